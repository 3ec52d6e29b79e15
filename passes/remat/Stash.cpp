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

bool isReadByBackward(const ir::Value *value) {
  return llvm::any_of(value->getUses(), [](const ir::Use &use) {
    return use.user->getStage() == ir::Stage::Backward;
  });
}

StashInfo analyseStash(ir::Graph &graph) {
  StashInfo info;
  llvm::DenseMap<const ir::Value *, unsigned> sourcesOf;
  for (ir::Node &node : graph.getNodes()) {
    if (node.getStage() != ir::Stage::Forward)
      continue;
    info.forwardPosition[&node] = info.forwardNodes.size();
    info.forwardNodes.push_back(&node);
    // Bit 0: reached from a trainable weight; bit 1: from a data input.
    unsigned sources = 0;
    for (ir::Value *operand : node.getOperands())
      sources |= operand->isGraphInput() ? (operand->isWeight() ? 1u : 2u)
                                         : sourcesOf.lookup(operand);
    for (ir::Value *result : node.getResults()) {
      sourcesOf[result] = sources;
      info.isActivation[result] = sources == 3;
      // A Constant is not a stash to trade: the rebuilds read it, or copy it
      // where its last use has passed (applyRecomputePlan).
      if (node.getOp() == ir::OpKind::Constant)
        continue;
      if (!isReadByBackward(result))
        continue;
      info.stashIndex[result] = info.stashed.size();
      info.stashed.push_back(result);
    }
  }
  return info;
}

} // namespace remat::passes::recompute
