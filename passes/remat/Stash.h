//===- passes/remat/Stash.h - Activations stashed for backward --*- C++ -*-===//
//
// The first analysis of remat (DESIGN.md "Rematerialization", step 1): which
// forward values the backward pass reads. Each such value is held from its
// forward node to its last backward use; those bytes are what remat trades
// for recompute time.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_STASH_H
#define REMAT_PASSES_REMAT_STASH_H

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <vector>

namespace remat::passes::recompute {

/// The forward part of a training step and what backward reads from it.
struct StashInfo {
  /// Forward nodes in schedule order.
  std::vector<ir::Node *> forwardNodes;
  /// Position of each forward node in forwardNodes.
  llvm::DenseMap<const ir::Node *, unsigned> forwardPosition;
  /// Forward node results with at least one Stage::Backward user, in
  /// schedule order. Constant results are excluded: never dropped, they are
  /// read by the rebuilds as they are, or copied where the original's last
  /// use has passed (applyRecomputePlan).
  std::vector<ir::Value *> stashed;
  /// Index of each stashed value in stashed.
  llvm::DenseMap<const ir::Value *, unsigned> stashIndex;
  /// Forward values computed from both a data input and a trainable weight:
  /// the activation stream. The rest never break a cut: masks and positions
  /// computed from inputs alone, values computed from weights alone (a
  /// transposed or sliced weight, which an exporter may hoist to the top of
  /// the graph), constants.
  llvm::DenseMap<const ir::Value *, bool> isActivation;

  bool isStashed(const ir::Value *value) const {
    return stashIndex.count(value) != 0;
  }
  uint64_t totalStashedBytes() const;
};

/// \returns true if a Stage::Backward node reads \p value.
bool isReadByBackward(const ir::Value *value);

/// \returns the stash analysis of \p graph's schedule.
StashInfo analyseStash(ir::Graph &graph);

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_STASH_H
