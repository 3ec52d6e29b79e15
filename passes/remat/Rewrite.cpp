//===- passes/remat/Rewrite.cpp - Inserting recompute subgraphs -----------===//
#include "passes/remat/Rewrite.h"

#include "ir/GradientName.h"
#include "passes/remat/Stash.h"

#include "llvm/ADT/DenseMap.h"

namespace remat::passes::recompute {

namespace {

class Rewriter {
public:
  /// With \p dryRun, changes nothing and only counts what it would clone.
  Rewriter(ir::Graph &graph, const RecomputePlan &plan,
           const CostProfile &profile, RecomputeUndo *undo, bool dryRun,
           unsigned cloneLimit = UINT_MAX)
      : graph_(graph), plan_(plan), profile_(profile), undo_(undo),
        dryRun_(dryRun), cloneLimit_(cloneLimit) {
    assert((dryRun || cloneLimit == UINT_MAX) &&
           "only a dry run may stop part way");
  }

  RecomputeStats run() {
    // Collect the backward nodes first: cloning inserts nodes as we go.
    std::vector<ir::Node *> backward;
    for (ir::Node &node : graph_.getNodes())
      if (node.getStage() == ir::Stage::Backward)
        backward.push_back(&node);
    for (ir::Node *node : backward) {
      current_ = node;
      // Note [Rebuilt per use]: this node's own rebuilt values. A copy of a
      // Constant serves the rebuilds before one backward node only.
      perUse_.clear();
      for (const auto &[constant, copy] : constantCopies_) {
        clones_.erase(constant);
        transient_.erase(constant);
      }
      constantCopies_.clear();
      for (unsigned i = 0; i < node->getNumOperands(); ++i) {
        ir::Value *operand = node->getOperand(i);
        if (!plan_.drop.count(operand) || plan_.keep.count(operand))
          continue;
        if (dryRun_) {
          materialize(operand, node);
          if (stats_.overLimit)
            return stats_;
          continue;
        }
        if (undo_)
          undo_->rewired.emplace_back(node, i, operand);
        node->setOperand(i, materialize(operand, node));
      }
    }
    return stats_;
  }

private:
  /// \returns true if \p value is still held when backward runs.
  bool isHeld(const ir::Value *value) {
    if (value->isGraphInput() || value->isGraphOutput())
      return true;
    const ir::Node *def = value->getDefiningNode();
    if (def->getStage() != ir::Stage::Forward)
      return true;
    if (plan_.keep.count(value))
      return true;
    if (auto it = plan_.heldThrough.find(value); it != plan_.heldThrough.end())
      return positionOf(current_) <= positionOf(it->second);
    // A Constant is never dropped; where a rebuild copies it instead of
    // reading it, materialize asks isCopied first.
    if (def->getOp() == ir::OpKind::Constant)
      return true;
    return isReadByBackward(value) && !plan_.drop.count(value);
  }

  /// \returns true if the rebuilds before \p before read a copy of the
  /// Constant \p value (copyConstant): when the schedule before the rewrite
  /// has no use of it at or after \p before, reading the original would
  /// hold it from its last use until then.
  bool isCopied(const ir::Value *value, const ir::Node *before) {
    if (value->isGraphInput() || value->isGraphOutput())
      return false;
    const ir::Node *def = value->getDefiningNode();
    if (def->getStage() != ir::Stage::Forward ||
        def->getOp() != ir::OpKind::Constant)
      return false;
    auto [it, inserted] = lastUse_.try_emplace(value, 0);
    if (inserted) {
      positionOf(before);
      for (const ir::Use &use : value->getUses())
        if (auto at = position_.find(use.user); at != position_.end())
          it->second = std::max(it->second, at->second);
    }
    return it->second < positionOf(before);
  }

  /// \returns the position of \p node, which is not a rebuild, among the
  /// nodes that are not (this rewrite's clones), numbered the first time
  /// one is asked for.
  unsigned positionOf(const ir::Node *node) {
    if (position_.empty()) {
      unsigned position = 0;
      for (const ir::Node &other : graph_.getNodes())
        if (other.getStage() != ir::Stage::Recompute)
          position_[&other] = position++;
    }
    assert(position_.count(node) && "a rebuild has no position");
    return position_.lookup(node);
  }

  /// \returns \p value itself if held, else its recompute clone for
  /// backward, building it (and what it needs) before \p before. An inner
  /// boundary on the way comes from its own pass (materializeBoundary).
  /// With \p once, \p value is rebuilt once whatever the plan says: it is
  /// on the way to a value rebuilt once.
  ir::Value *materialize(ir::Value *value, ir::Node *before,
                         bool once = false) {
    if (isCopied(value, before))
      return clones_[value] = copyConstant(*value->getDefiningNode(), before);
    if (isHeld(value))
      return value;
    if (plan_.innerBoundaries.count(value))
      return materializeBoundary(value, before);
    ir::Node *def = value->getDefiningNode();
    if (once || !plan_.rebuildPerUse || plan_.rebuildOnce.count(value)) {
      if (auto it = clones_.find(value); it != clones_.end())
        return it->second;
      for (ir::Value *operand : def->getOperands())
        materialize(operand, before, /*once=*/true);
      cloneInto(clones_, *def, before);
      return clones_.lookup(value);
    }
    if (auto it = perUse_.find(value); it != perUse_.end())
      return it->second;
    // Operands rebuilt once, or inner boundaries, come from clones_: this
    // node's clone reads them through perUse_.
    for (ir::Value *operand : def->getOperands())
      if (ir::Value *clone = materialize(operand, before); clone != operand)
        perUse_[operand] = clone;
    cloneInto(perUse_, *def, before);
    return perUse_.lookup(value);
  }

  /// \returns the clone of the inner boundary \p value, building it before
  /// \p before from what is held and the inner boundaries before it: the
  /// dropped values on the way are cloned into transient_, which no backward
  /// node reads, so they die within this pass (Note [Nested recompute]).
  ir::Value *materializeBoundary(ir::Value *value, ir::Node *before) {
    if (auto it = clones_.find(value); it != clones_.end())
      return it->second;
    ir::Node *def = value->getDefiningNode();
    for (ir::Value *operand : def->getOperands())
      materializeTransient(operand, before);
    cloneInto(transient_, *def, before);
    for (ir::Value *result : def->getResults())
      clones_[result] = transient_.lookup(result);
    return clones_.lookup(value);
  }

  void materializeTransient(ir::Value *value, ir::Node *before) {
    if (transient_.count(value))
      return;
    if (isCopied(value, before)) {
      transient_[value] = copyConstant(*value->getDefiningNode(), before);
      return;
    }
    if (isHeld(value))
      return;
    if (plan_.innerBoundaries.count(value)) {
      transient_[value] = materializeBoundary(value, before);
      return;
    }
    ir::Node *def = value->getDefiningNode();
    for (ir::Value *operand : def->getOperands())
      materializeTransient(operand, before);
    cloneInto(transient_, *def, before);
  }

  /// \returns the copy of the Constant \p def that the rebuilds before
  /// \p before read, making it the first time. Read by them, the original
  /// would live on from its last use to the last rebuild that reads it; one
  /// copy per backward node lives only through that node's rebuilds, within
  /// that range, so no position holds more bytes (the copy is free in the
  /// cost model).
  ir::Value *copyConstant(const ir::Node &def, ir::Node *before) {
    ir::Value *value = def.getResult(0);
    if (auto it = constantCopies_.find(value); it != constantCopies_.end())
      return it->second;
    cloneInto(constantCopies_, def, before);
    return constantCopies_.lookup(value);
  }

  /// Clones \p def before \p before, its operands read through \p map.
  void cloneInto(llvm::DenseMap<const ir::Value *, ir::Value *> &map,
                 const ir::Node &def, ir::Node *before) {
    countClone(def);
    if (dryRun_) {
      // The original stands for its clone: isHeld reads the graph, which
      // the real rewrite changes only where it is not read again (a
      // dropped value's backward uses), so the same nodes are cloned.
      for (ir::Value *result : def.getResults())
        map[result] = result;
      return;
    }
    ir::Node *clone =
        graph_.cloneNode(def, map, before, ir::Stage::Recompute,
                         ir::kRecomputeSuffix);
    if (undo_)
      undo_->clones.push_back(clone);
  }

  void countClone(const ir::Node &def) {
    // The copies of Constants do not count against the limit: they are
    // scalars and shapes, and a plan rebuilt per use makes many.
    if (def.getOp() != ir::OpKind::Constant && limitedClones_++ >= cloneLimit_)
      stats_.overLimit = true;
    ++stats_.clonedNodes;
    stats_.clonedNames.push_back(def.getResult(0)->getName().str());
    stats_.recomputeFlops += nodeFlops(def);
    stats_.recomputeSeconds += nodeSeconds(def, profile_);
  }

  ir::Graph &graph_;
  const RecomputePlan &plan_;
  const CostProfile &profile_;
  RecomputeUndo *undo_;
  bool dryRun_;
  /// Original forward value -> its clone. Filled by Graph::cloneNode, which
  /// also reads it to rewire the clone's operands.
  llvm::DenseMap<const ir::Value *, ir::Value *> clones_;
  /// The same for the passes that rebuild inner boundaries.
  llvm::DenseMap<const ir::Value *, ir::Value *> transient_;
  /// The same for the backward node being rewired, with rebuildPerUse.
  llvm::DenseMap<const ir::Value *, ir::Value *> perUse_;
  /// Constant -> its copy, for the backward node being rewired.
  llvm::DenseMap<const ir::Value *, ir::Value *> constantCopies_;
  /// The position of each node that is not a rebuild, in schedule order.
  llvm::DenseMap<const ir::Node *, unsigned> position_;
  /// The backward node being rewired.
  const ir::Node *current_ = nullptr;
  /// Constant -> the position of its last use before the rewrite.
  llvm::DenseMap<const ir::Value *, unsigned> lastUse_;
  unsigned cloneLimit_;
  /// The clones counted against cloneLimit_.
  unsigned limitedClones_ = 0;
  RecomputeStats stats_;
};

} // namespace

RecomputeStats applyRecomputePlan(ir::Graph &graph, const RecomputePlan &plan,
                                  const CostProfile &profile,
                                  RecomputeUndo *undo) {
  return Rewriter(graph, plan, profile, undo, /*dryRun=*/false).run();
}

RecomputeStats predictRecomputeStats(const ir::Graph &graph,
                                     const RecomputePlan &plan,
                                     const CostProfile &profile,
                                     unsigned cloneLimit) {
  // A dry run does not change the graph.
  return Rewriter(const_cast<ir::Graph &>(graph), plan, profile, nullptr,
                  /*dryRun=*/true, cloneLimit)
      .run();
}

void undoRecomputePlan(ir::Graph &graph, const RecomputeUndo &undo) {
  for (auto it = undo.rewired.rbegin(); it != undo.rewired.rend(); ++it)
    std::get<0>(*it)->setOperand(std::get<1>(*it), std::get<2>(*it));
  for (auto it = undo.clones.rbegin(); it != undo.clones.rend(); ++it)
    graph.eraseNode(*it);
}

} // namespace remat::passes::recompute
