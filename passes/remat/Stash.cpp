//===- passes/remat/Stash.cpp - Activations stashed for backward ----------===//
#include "passes/remat/Stash.h"

#include "llvm/ADT/STLExtras.h"

namespace remat::passes::recompute {

uint64_t StashInfo::totalStashedBytes() const {
  uint64_t bytes = 0;
  for (const ir::Value *value : stashed)
    bytes += uint64_t(value->getType().getByteSize());
  return bytes;
}

StashInfo analyseStash(ir::Graph &graph) {
  StashInfo info;
  for (ir::Node &node : graph.getNodes()) {
    if (node.getStage() == ir::Stage::Backward)
      ++info.numBackwardNodes;
    if (node.getStage() != ir::Stage::Forward)
      continue;
    info.forwardPosition[&node] = info.forwardNodes.size();
    info.forwardNodes.push_back(&node);
    bool fromWeight = llvm::any_of(node.getOperands(), [&](ir::Value *v) {
      if (v->isGraphInput())
        return v->isWeight();
      auto it = info.dependsOnWeight.find(v);
      return it != info.dependsOnWeight.end() && it->second;
    });
    for (ir::Value *result : node.getResults()) {
      info.dependsOnWeight[result] = fromWeight;
      // A Constant is held whatever remat decides: not a stash to trade.
      if (node.getOp() == ir::OpKind::Constant)
        continue;
      bool readByBackward = llvm::any_of(result->getUses(), [](const ir::Use &u) {
        return u.user->getStage() == ir::Stage::Backward;
      });
      if (!readByBackward)
        continue;
      info.stashIndex[result] = info.stashed.size();
      info.stashed.push_back(result);
    }
  }
  return info;
}

} // namespace remat::passes::recompute
