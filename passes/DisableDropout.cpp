//===- passes/DisableDropout.cpp - Dropout as in inference ----------------===//
#include "ir/Builder.h"
#include "passes/Passes.h"

namespace remat::passes {

llvm::Expected<bool> DisableDropoutPass::run(ir::Graph &graph) {
  bool changed = false;
  for (ir::Node &node : graph.getNodes()) {
    // Without a training_mode operand, Dropout is already the identity.
    if (node.getOp() != ir::OpKind::Dropout || node.getNumOperands() < 3)
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
  return changed;
}

} // namespace remat::passes
