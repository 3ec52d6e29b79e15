//===- passes/Passes.h - Declarations of every pass -------------*- C++ -*-===//
#ifndef REMAT_PASSES_PASSES_H
#define REMAT_PASSES_PASSES_H

#include "passes/Pass.h"

#include <memory>

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
/// elements.
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
    return "make every Dropout the identity (training_mode false)";
  }
  llvm::Expected<bool> run(ir::Graph &graph) override;
};

/// Runs fold-constants, cse and dce until none changes the graph (or
/// max-iterations rounds), then checks every type against shape inference.
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

} // namespace remat::passes

#endif // REMAT_PASSES_PASSES_H
