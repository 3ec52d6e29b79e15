//===- passes/remat/Rewrite.h - Inserting recompute subgraphs ---*- C++ -*-===//
//
// Step 5 of remat (DESIGN.md "Rematerialization"). Given the stashed values
// to drop and the boundaries to keep, each backward node that reads a
// dropped value reads a recompute clone instead. The clone is built just
// before the first backward node that needs it from what is still held:
// graph inputs, kept stashed values, kept boundaries, Constant results and
// forward graph outputs; anything else on the way is cloned too (operands
// first, so the schedule stays topological). A clone, once built, serves
// every later backward use, so a recomputed segment is rebuilt once.
// Clones are Stage::Recompute nodes whose origin is the original
// (Node::getOrigin), named `<original>.remat` for people; a Dropout
// clone draws the same mask from its (seed, index) stream, so every
// recomputed value equals its original bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_REWRITE_H
#define REMAT_PASSES_REMAT_REWRITE_H

#include "passes/remat/CostModel.h"

#include "llvm/ADT/DenseSet.h"

#include <string>
#include <tuple>
#include <vector>

namespace remat::passes::recompute {

/// Which stashed values are recomputed and which extra values are kept.
struct RecomputePlan {
  /// Stashed values whose backward uses read a recompute clone.
  llvm::DenseSet<const ir::Value *> drop;
  /// Forward values held to the end of backward whether or not they are
  /// stashed (the segment boundaries recompute starts from). A value in
  /// both sets is kept.
  llvm::DenseSet<const ir::Value *> keep;
};

/// What a rewrite added.
struct RecomputeStats {
  unsigned clonedNodes = 0;
  /// The first result name of each cloned original, in clone order.
  std::vector<std::string> clonedNames;
  double recomputeFlops = 0;
  double recomputeSeconds = 0;
};

/// What a rewrite changed, so that it can be undone (the solver measures a
/// candidate plan on the graph itself and then restores it).
struct RecomputeUndo {
  /// Clones in the order they were created.
  std::vector<ir::Node *> clones;
  /// (backward node, operand index, original operand) per rewired use.
  std::vector<std::tuple<ir::Node *, unsigned, ir::Value *>> rewired;
};

/// Rewrites \p graph (a scheduled training step) under \p plan; the plan's
/// values must be \p graph's. \returns what was cloned, priced by
/// \p profile. With \p undo, records how to restore the graph.
RecomputeStats applyRecomputePlan(ir::Graph &graph, const RecomputePlan &plan,
                                  const CostProfile &profile,
                                  RecomputeUndo *undo = nullptr);

/// Restores \p graph to what it was before the rewrite \p undo recorded
/// (the same nodes, operands and names; the memory plan stays dropped).
void undoRecomputePlan(ir::Graph &graph, const RecomputeUndo &undo);

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_REWRITE_H
