//===- session/Pipeline.h - Pipelines the tools share -----------*- C++ -*-===//
//
// One definition, for remat-opt, remat-run and remat-sweep, of which passes
// run on a model and how the flags that stand for pass options reach them
// (DESIGN.md "Data flow": with a budget the default pipeline is
// canonicalize,autodiff,dce,schedule,remat,plan-memory, and a graph that is
// already a training step skips autodiff).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_SESSION_PIPELINE_H
#define REMAT_SESSION_PIPELINE_H

#include "ir/Graph.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace remat::session {

/// The passes that turn a model into a training step.
constexpr const char *kTrainingPipeline = "canonicalize,autodiff,dce";

/// What the tools' flags say about the pipeline.
struct PipelineOptions {
  /// -p: the pipeline as given ("" for the tool's default).
  std::string pipeline;
  /// --budget, --strategy, --cost-profile, --explain: options of the remat
  /// pass; a budget or strategy alone makes remat part of the default.
  std::string budget;
  std::string strategy;
  std::string costProfile;
  bool explain = false;
  /// --unused-weights, --freeze and --padding-idx: the autodiff options.
  std::string unusedWeights;
  std::string freeze;
  std::string paddingIdx;
  bool timing = false;
  bool printIrAfterAll = false;
  /// --optimizer (sgd|adamw, "" for none) and the optimizer pass options
  /// its flags gave (--lr, ...), as key and value.
  std::string optimizer;
  std::vector<std::pair<std::string, std::string>> optimizerOptions;
};

/// \returns true if \p graph is already a training step: an output is a
/// weight's gradient (Value::getGradientOf) or an update written over an
/// input (ir/UpdateName.h).
bool isTrainingStep(const ir::Graph &graph);

/// \returns the index of \p graph's loss output: the first output that is
/// not a gradient when the graph is a training step, else the first scalar
/// float output; -1 if none.
int findLossOutput(const ir::Graph &graph);

/// \returns the pipeline to run on \p graph: options.pipeline if given; else
/// with a budget or strategy the remat pipeline (training passes first
/// unless \p graph is a training step, then schedule,remat,plan-memory);
/// else \p fallback.
std::string choosePipeline(const ir::Graph &graph,
                           const PipelineOptions &options,
                           llvm::StringRef fallback);

/// \returns \p pipeline without its `remat{...}` entries (what
/// --check-equivalence compares against).
std::string withoutRemat(llvm::StringRef pipeline);

/// \returns \p pipeline with fold-transpose before its first remat or
/// plan-memory (appended when it has neither), unless it has fold-transpose:
/// what remat-run adds to its own pipelines for the CPU backend
/// (Note [fold-transpose]).
std::string withCpuFusions(llvm::StringRef pipeline);

/// What running a pipeline left for reports.
struct PipelineResult {
  std::string pipeline;
  /// The remat pass's decisions, when it ran.
  std::optional<llvm::json::Object> rematReport;
};

/// Checks \p pipeline and the option flags of \p options against it (an
/// option for a pass the pipeline lacks is an error), without running it.
llvm::Error checkPipeline(llvm::StringRef pipeline,
                          const PipelineOptions &options);

/// Verifies \p graph, then runs \p pipeline with the option flags of
/// \p options set on their passes. Warnings, timing and --explain go to
/// \p diag.
llvm::Expected<PipelineResult> runPipeline(ir::Graph &graph,
                                           llvm::StringRef pipeline,
                                           const PipelineOptions &options,
                                           llvm::raw_ostream &diag);

} // namespace remat::session

#endif // REMAT_SESSION_PIPELINE_H
