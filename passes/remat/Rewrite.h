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
// Note [Nested recompute]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A recomputed group rebuilt as above holds its whole rebuilt stash through
// its backward: the first backward node of the group needs a value near its
// end, whose clone chain runs from the group's input through every segment.
// Rotor's recompute-within-recompute cuts the group again: its inner
// boundaries (the inputs of its segments after the first) are rebuilt first,
// in one pass from the group's input whose other clones (transient ones)
// serve only that pass and die in it; then each segment's dropped values are
// rebuilt from its inner boundary's clone when backward first needs them,
// that is during the segment's own backward. Held during the group's
// backward: its inner boundaries and one segment's stash, instead of the
// whole group's stash; paid: the values before the last inner boundary are
// computed twice. Two levels in the plans the solver builds: layers, then
// the segments of each layer (Solver::nestedPlans). Clones are the same
// computation on the same inputs, so the bits stay those of the original.
//
// Note [Rebuilt per use]
// ~~~~~~~~~~~~~~~~~~~~~~
// A clone that serves every later backward use is held from the first of
// them to the last. Checkmate's plans may instead rebuild a value again
// for a later use, holding it only across each use: at the smallest peaks
// its optimum recomputes some nodes five to seven times (tools/bench/
// remat_oracle.py on the random graphs of the tests). With rebuildPerUse,
// each backward node rebuilds the dropped values it reads, and the dropped
// values on their way, for itself; plan-memory frees them after it. Held
// during the backward: what is held, and one node's rebuilt operands with
// the chain that makes them; paid: a value read by k backward nodes is
// computed k + 1 times. The solver offers such plans at the bottom of its
// pool, for budgets nothing faster fits (Solver::addPerUsePlans).
// rebuildOnce mixes the two: its values are rebuilt once, for every later
// use, and so are the dropped values on their way (a clone that serves
// several uses reads clones that live as long); a node's per-use clone
// reads a clone rebuilt once, or an inner boundary's, where there is one
// (Solver::addMixedPlans).
//
// Note [Held part of backward]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A stashed value is otherwise held for all of backward or dropped for all
// of it. heldThrough holds a dropped value from forward through one
// backward node: the backward nodes up to it, and the rebuilds before them,
// read the original, which then dies; the backward nodes after it read a
// rebuild, made once or per use as the plan says. Checkmate's optimum does
// this where a value's first backward readers come early and its last come
// late (random256_30's v4: read at positions 55 and 60, held through 55,
// rebuilt for 60; tools/bench/remat_oracle.py), and a value held that long
// can also feed the rebuilds of the values computed from it that backward
// reads before then. The solver reaches such plans by local moves (Note
// [Local plans]). Which node is "after" is the schedule's order before the
// rewrite, the order the rewrite visits backward in.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_REWRITE_H
#define REMAT_PASSES_REMAT_REWRITE_H

#include "passes/remat/CostModel.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <climits>
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
  /// Dropped values at which a recomputed group is cut again (Note [Nested
  /// recompute]): each is rebuilt once, from what is held, by a pass whose
  /// other clones serve only it; the dropped values between two of them are
  /// rebuilt from the earlier one when backward first needs them.
  llvm::DenseSet<const ir::Value *> innerBoundaries;
  /// Whether each backward node rebuilds the dropped values it reads for
  /// itself (Note [Rebuilt per use]), instead of the first one rebuilding
  /// them for every later use. Inner boundaries are rebuilt once either way.
  bool rebuildPerUse = false;
  /// With rebuildPerUse: dropped values rebuilt once all the same, for
  /// every later use, with the dropped values on their way (Note [Rebuilt
  /// per use]).
  llvm::DenseSet<const ir::Value *> rebuildOnce;
  /// Dropped values held from forward through a backward node, and rebuilt
  /// only for the backward nodes after it (Note [Held part of backward]):
  /// the nodes up to it, and the rebuilds before them, read the original.
  llvm::DenseMap<const ir::Value *, const ir::Node *> heldThrough;
};

/// What a rewrite added.
struct RecomputeStats {
  unsigned clonedNodes = 0;
  /// predictRecomputeStats only: it stopped counting past its clone limit
  /// (the other fields then count what it had reached).
  bool overLimit = false;
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

/// \returns what applyRecomputePlan(graph, plan, profile) would return (the
/// same clones counted in the same order), without changing \p graph; or,
/// past \p cloneLimit clones (copies of Constants not counted), what it
/// counted up to there, overLimit set.
RecomputeStats predictRecomputeStats(const ir::Graph &graph,
                                     const RecomputePlan &plan,
                                     const CostProfile &profile,
                                     unsigned cloneLimit = UINT_MAX);

/// Restores \p graph to what it was before the rewrite \p undo recorded
/// (the same nodes, operands and names; the memory plan stays dropped).
void undoRecomputePlan(ir::Graph &graph, const RecomputeUndo &undo);

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_REWRITE_H
