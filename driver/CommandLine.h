//===- driver/CommandLine.h - The tools' shared command line ----*- C++ -*-===//
//
// One command-line layer for remat-opt, remat-run and remat-sweep: the flags
// they share are declared once (ToolFlags), llvm::cl's own messages are
// folded into one `error:` line, and every failure prints `error: ...` and
// exits 1.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_DRIVER_COMMANDLINE_H
#define REMAT_DRIVER_COMMANDLINE_H

#include "session/Pipeline.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace remat::driver {

/// The flags of every tool that builds a model's training step: the dims
/// to bind, the cost model's profile, autodiff's unused and frozen weights
/// and padding rows, the optimizer and the memory limit. remat-sweep has these alone; remat-opt
/// and remat-run have them within ToolFlags. Construct one inside a tool's
/// main, before parseCommandLine.
struct StepFlags {
  explicit StepFlags(llvm::cl::OptionCategory &category);

  llvm::cl::opt<std::string> bind;
  llvm::cl::opt<std::string> costProfile;
  llvm::cl::opt<std::string> unusedWeights;
  llvm::cl::opt<std::string> freeze;
  llvm::cl::opt<std::string> paddingIdx;
  llvm::cl::opt<std::string> scalarWeights;
  /// The optimizer pass's options (--optimizer adds it to the pipeline).
  llvm::cl::opt<std::string> optimizer;
  llvm::cl::opt<std::string> lr;
  llvm::cl::opt<std::string> weightDecay;
  llvm::cl::opt<std::string> momentum;
  llvm::cl::opt<std::string> beta1;
  llvm::cl::opt<std::string> beta2;
  llvm::cl::opt<std::string> eps;
  llvm::cl::opt<std::string> optimizerPlacement;
  llvm::cl::opt<std::string> maxMemory;

  /// \returns the optimizer pass options the flags give, as key and value.
  std::vector<std::pair<std::string, std::string>> getOptimizerOptions() const;
  /// Checks --max-memory (and sets the memory limit, ir/Limits.h, from it),
  /// the unused-weights mode, the frozen weights' patterns, the padding
  /// rows and the optimizer's flags.
  llvm::Error validate() const;
};

/// The flags every tool that runs a pipeline has: StepFlags and the
/// pipeline's own. Construct one inside a tool's main, before
/// parseCommandLine.
struct ToolFlags : StepFlags {
  explicit ToolFlags(llvm::cl::OptionCategory &category);

  llvm::cl::opt<std::string> pipeline;
  llvm::cl::alias pipelineLong;
  llvm::cl::opt<std::string> budget;
  llvm::cl::opt<std::string> strategy;
  llvm::cl::opt<bool> explain;
  llvm::cl::opt<bool> timing;
  llvm::cl::opt<bool> printIrAfterAll;
  llvm::cl::opt<bool> printMemory;
  llvm::cl::opt<std::string> report;
  llvm::cl::opt<bool> listPasses;

  /// \returns the pipeline-related flags as PipelineOptions.
  session::PipelineOptions getPipelineOptions() const;
  /// Checks the values that do not need a model: budget syntax, strategy
  /// name, and StepFlags::validate's; sets the memory limit (ir/Limits.h)
  /// from --max-memory.
  llvm::Error validate() const;
};

/// Parses \p argv for the tool \p toolName with llvm::cl. On a bad flag
/// prints one `error:` line and \returns false.
bool parseCommandLine(int argc, char **argv, llvm::StringRef toolName,
                      llvm::StringRef overview);

/// Prints \p err as `error: ...` lines (one per line of its message).
/// \returns 1, the tools' exit code for a failure.
int reportError(llvm::Error err);

/// Prints every pass and its options to stdout (--list-passes).
void printPassList();

} // namespace remat::driver

#endif // REMAT_DRIVER_COMMANDLINE_H
