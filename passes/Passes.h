//===- passes/Passes.h - Declarations of every pass -------------*- C++ -*-===//
#ifndef REMAT_PASSES_PASSES_H
#define REMAT_PASSES_PASSES_H

#include "passes/Pass.h"

#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <optional>
#include <vector>

namespace remat::passes {

/// Removes nodes none of whose results is used or a graph output. Nodes have
/// no side effects (Dropout's mask is a function of its seed), so any unused
/// node can go. Unused non-weight inputs are kept: they are the interface.
class DcePass : public Pass {
public:
  llvm::StringRef getName() const override { return "dce"; }
  llvm::StringRef getSummary() const override {
    return "remove nodes whose results are never used";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;
};

/// Common-subexpression elimination: a node with the same op, operands,
/// attributes, stage and result types as an earlier one is replaced by it.
/// Stage::Recompute nodes are never merged, neither with each other nor with
/// the forward nodes they recompute: a recompute clone exists precisely so
/// that the original can be freed early, and merging it would undo remat.
class CsePass : public Pass {
public:
  llvm::StringRef getName() const override { return "cse"; }
  llvm::StringRef getSummary() const override {
    return "merge identical nodes (never Stage::Recompute ones)";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;
};

/// Evaluates nodes whose operands are all Constant results and replaces them
/// with Constant nodes: shape subgraphs (Shape, Gather, Concat, Unsqueeze,
/// ...) of any size, other ops when the result has at most max-elements
/// elements. Computes with the PassContext's evaluator (the CPU kernels)
/// under passes/FoldingPolicy.h; without one it is an error.
class FoldConstantsPass : public Pass {
public:
  FoldConstantsPass();
  llvm::StringRef getName() const override { return "fold-constants"; }
  llvm::StringRef getSummary() const override {
    return "evaluate nodes whose operands are all constants";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;

private:
  int64_t maxElements_ = 1024;
};

/// Turns every Dropout into the identity (training_mode false), as a model
/// in inference mode computes it: for comparing with references that were
/// computed without dropout. Unused training-mode constants are left to dce.
class DisableDropoutPass : public Pass {
public:
  llvm::StringRef getName() const override { return "disable-dropout"; }
  llvm::StringRef getSummary() const override {
    return "make every Dropout the identity (training_mode false), and remove "
           "it where nothing reads its mask";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;
};

/// Rewrites MatMuls whose operands are Transposes (or whose only use is
/// one) into remat.PermutedMatMul, which reads and writes through the
/// transposed layout, and erases the Transposes; never raises the live
/// peak (Note [fold-transpose]).
class FoldTransposePass : public Pass {
public:
  llvm::StringRef getName() const override { return "fold-transpose"; }
  llvm::StringRef getSummary() const override {
    return "fold Transposes into the MatMuls that read or write them "
           "(remat.PermutedMatMul)";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;
};

/// Runs fold-constants, cse and dce until none changes the graph (or
/// max-iterations rounds), then checks every type against shape inference.
/// Needs the PassContext's evaluator, as fold-constants does.
/// With dims bound at import, every shape chain of a transformer export
/// collapses to constants: no Shape op remains.
class CanonicalizePass : public Pass {
public:
  CanonicalizePass();
  llvm::StringRef getName() const override { return "canonicalize"; }
  llvm::StringRef getSummary() const override {
    return "fold constants, merge duplicates and drop dead nodes to a "
           "fixpoint";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;

private:
  int64_t maxIterations_ = 16;
};

/// Reverse-mode differentiation: appends the backward of the loss
/// (Stage::Backward nodes, standard ONNX ops only) and makes the graph's
/// outputs the loss followed by `<weight>_grad` for every weight that reaches
/// it, in weight-input order. Every other forward output is removed (so dce
/// can drop what only it needed). Weights that do not reach the loss are
/// reported as unused-weights says: warn (default), error, or drop (remove
/// them and the dead nodes, with a note). Weights that `freeze` names
/// (comma-separated names or globs) are frozen: they stay weights (stored,
/// read by the step) but get no gradient, so no update and no optimizer
/// state, and paths from them alone need no gradient rule. `padding-idx`
/// (NAME=ROW,...) makes an embedding's lookups add no gradient to one row,
/// as torch's nn.Embedding(padding_idx=ROW) does. See DESIGN.md
/// "Training step".
class AutodiffPass : public Pass {
public:
  AutodiffPass();
  /// Parses autodiff's `freeze` option: weight names or globs (`*`, `?`,
  /// `[...]`), comma-separated, each with its text. Errors name the bad
  /// entry.
  static llvm::Expected<
      std::vector<std::pair<std::string, llvm::GlobPattern>>>
  parseFreeze(llvm::StringRef text);
  /// Parses autodiff's `padding-idx` option: NAME=ROW entries,
  /// comma-separated (the row torch's nn.Embedding(padding_idx=ROW) gives no
  /// gradient). Errors name the bad entry.
  static llvm::Expected<std::vector<std::pair<std::string, int64_t>>>
  parsePaddingIdx(llvm::StringRef text);
  llvm::StringRef getName() const override { return "autodiff"; }
  llvm::StringRef getSummary() const override {
    return "append the backward pass and output the gradient of every weight";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;

private:
  std::string loss_;
  std::string unusedWeights_ = "warn";
  std::string freeze_;
  std::string paddingIdx_;
};

/// Reorders the schedule to lower the peak of live arena bytes: greedy list
/// scheduling that runs, of the ready nodes, the one that grows the arena
/// least (ties to the given order). The new order is kept only if its peak
/// (Liveness) is lower, so the peak never grows.
class SchedulePass : public Pass {
public:
  llvm::StringRef getName() const override { return "schedule"; }
  llvm::StringRef getSummary() const override {
    return "reorder nodes to lower peak memory (never raises it)";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;
};

/// \returns the greedy memory-aware topological order of \p graph's nodes
/// that SchedulePass considers (without applying it).
std::vector<ir::Node *> computeMemoryAwareOrder(ir::Graph &graph);

/// Appends the optimizer step to a training step (passes/Optimizer.cpp):
/// each weight `w` whose gradient `w_grad` is an output gets its update in
/// standard ONNX ops, sgd (with momentum) or adamw as torch.optim computes
/// them; the gradient outputs give way to `w_new` and the new optimizer
/// state, which ir/UpdateName.h marks as written over their inputs. The
/// state (`w.exp_avg`, `w.exp_avg_sq`, `w.momentum_buffer`,
/// `optimizer.step`) is persistent: graph inputs with zero-filled data, or
/// the inputs of those names already there (resuming). placement=eager puts
/// each update right after its gradient is complete, end puts them last.
class OptimizerPass : public Pass {
public:
  OptimizerPass();
  llvm::StringRef getName() const override { return "optimizer"; }
  llvm::StringRef getSummary() const override {
    return "append the sgd or adamw weight update (state persistent, "
           "updates in place)";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;
  /// Checks the option values; errors name the option.
  llvm::Error validate() const;

private:
  std::string kind_ = "adamw";
  double lr_ = 1e-3;
  double weightDecay_ = 0;
  double momentum_ = 0;
  double beta1_ = 0.9;
  double beta2_ = 0.999;
  double eps_ = 1e-8;
  std::string placement_ = "eager";
};

/// \returns true if graph input \p input is optimizer state that
/// OptimizerPass made or adopted (for reports).
bool isOptimizerState(const ir::Value *input);

/// Makes the optimizer state of a model saved with its state (remat-run
/// --save-weights) state again: inputs named `<weight>.exp_avg`, ... lose the
/// weight flag an importer gave them, a Constant `optimizer.step` becomes
/// an input, and the output keepOptimizerStep added goes. \returns whether
/// anything changed.
bool adoptOptimizerState(ir::Graph &graph);

/// Adds an output `optimizer.step.saved` = Identity(optimizer.step) to a
/// model about to be saved with its optimizer state, so that an ONNX importer
/// (which drops unused one-element initializers) keeps the step count;
/// adoptOptimizerState removes it again.
void keepOptimizerStep(ir::Graph &graph);

/// Moves each node that writes an update over its input (ir/UpdateName.h) to
/// after the last other node that reads that input, so that no node reads an
/// input after it is overwritten. \returns whether anything moved.
bool orderUpdatesAfterReads(ir::Graph &graph);

/// \returns an error naming the nodes if a node reads an input after the
/// node that writes its update over it.
llvm::Error checkUpdateOrder(const ir::Graph &graph);

/// Places every node result at an offset in one arena and stores the
/// MemoryPlan on the graph (DESIGN.md "Memory model"): 256-byte alignment,
/// largest buffers first at the lowest free offset, an elementwise result
/// reusing a same-typed operand that dies at its node when in-place is set.
class PlanMemoryPass : public Pass {
public:
  PlanMemoryPass();
  llvm::StringRef getName() const override { return "plan-memory"; }
  llvm::StringRef getSummary() const override {
    return "assign every value an offset in one arena";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;

private:
  bool inPlace_ = true;
};

/// Chooses under a byte budget which activations to keep for backward and
/// which to recompute, and rewrites the training step accordingly
/// (DESIGN.md "Rematerialization"; passes/remat/). budget bounds the planned
/// peak (weights + inputs + arena), as bytes or as a percentage of the
/// planned peak without remat; strategy is none, every-layer, sqrt,
/// chain-dp, selective or auto.
class RematPass : public Pass {
public:
  RematPass();
  llvm::StringRef getName() const override { return "remat"; }
  llvm::StringRef getSummary() const override {
    return "recompute activations in backward to fit a memory budget";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;
  /// Hands on what the last run decided (PassResults::rematReport).
  void addResults(PassResults &results) const override {
    if (report_)
      results.rematReport = *report_;
  }

private:
  ByteAmount budget_;
  std::string strategy_ = "auto";
  std::string boundaries_;
  std::string costProfile_;
  bool explain_ = false;
  /// auto, off or a number of chunks (Note [Chunked loss head]).
  std::string chunkLoss_ = "auto";
  /// auto, off or a number of chunks (Note [Chunked attention core]).
  std::string chunkAttention_ = "auto";
  /// Whether nested plans are candidates (Note [Nested recompute]).
  bool nested_ = true;
  std::string dumpModel_;
  std::optional<llvm::json::Object> report_;
};

/// \returns the plan PlanMemoryPass stores for \p graph's schedule, or an
/// error if the arena would not be addressable (over 2^62 bytes).
llvm::Expected<ir::MemoryPlan> planMemory(const ir::Graph &graph,
                                          bool inPlace = true);

/// \returns the peak live arena bytes of \p graph's schedule with the
/// in-place sharing planMemory would choose: a lower bound of its arena that
/// costs a fraction of planning (remat ranks candidate plans by it).
llvm::Expected<uint64_t> lowerBoundArenaBytes(const ir::Graph &graph);

} // namespace remat::passes

#endif // REMAT_PASSES_PASSES_H
