//===- runtime/cpu/Evaluator.cpp - CPU kernels on constant data -----------===//
//
// Operands and results are viewed in place (a kernel never writes its
// inputs), so evaluating copies nothing. The kernel runs as one chunk on the
// calling thread; chunking never changes what a kernel computes (Note in
// runtime/cpu/Kernels.h), so the bits are those of any run-time thread
// count.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Evaluator.h"

#include "runtime/cpu/Kernels.h"

#include "ir/Limits.h"
#include "ir/Support.h"

#include "llvm/ADT/Twine.h"

namespace remat::runtime::cpu {

namespace {

/// Runs every body on the calling thread, in one chunk.
class SerialParallelFor final : public ParallelFor {
public:
  void run(int64_t count, int64_t /*grain*/,
           const std::function<void(int64_t, int64_t)> &body) override {
    if (count > 0)
      body(0, count);
  }
  unsigned getNumThreads() const override { return 1; }
};

/// Where an empty tensor points: kernels may form (but never dereference)
/// pointers into it, so it must not be null.
alignas(64) uint8_t emptyStorage[64];

/// \returns a pointer to \p bytes, the data of an operand, for a Tensor.
void *dataOf(llvm::ArrayRef<uint8_t> bytes) {
  // Kernels never write their inputs; Tensor has one pointer type for both.
  return bytes.empty() ? emptyStorage : const_cast<uint8_t *>(bytes.data());
}

} // namespace

llvm::Expected<llvm::SmallVector<ir::TensorDataPtr, 1>>
evaluateNode(const ir::Node &node,
             llvm::ArrayRef<const ir::TensorData *> operands) {
  assert(operands.size() == node.getNumOperands() &&
         "one operand data entry per operand");
  llvm::SmallVector<Tensor, 4> inputs;
  for (unsigned i = 0; i < operands.size(); ++i) {
    const ir::TensorType &type = node.getOperand(i)->getType();
    if (!operands[i]) {
      if (node.getOp() != ir::OpKind::Shape)
        return makeError("cannot evaluate " + node.describe() + ": operand " +
                         llvm::Twine(i) + " is not constant");
      inputs.emplace_back(type, emptyStorage);
      continue;
    }
    if (operands[i]->getType() != type)
      return makeError("cannot evaluate " + node.describe() + ": operand " +
                       llvm::Twine(i) + " holds " +
                       operands[i]->getType().str() + ", not " + type.str());
    inputs.emplace_back(type, dataOf(operands[i]->getBytes()));
  }

  auto kernel = selectKernel(node);
  if (!kernel)
    return kernel.takeError();

  llvm::SmallVector<std::shared_ptr<ir::TensorData>, 1> results;
  llvm::SmallVector<Tensor, 1> outputs;
  for (const ir::Value *result : node.getResults()) {
    // A folded result's shape may come from a file (ConstantOfShape):
    // check it against the memory limit before allocating.
    if (auto err = ir::checkAllocation(result->getType(),
                                       "the result of " + node.describe()))
      return std::move(err);
    auto data = std::make_shared<ir::TensorData>(result->getType());
    outputs.emplace_back(result->getType(), data->getNumElements() > 0
                                                ? data->getMutableBytes()
                                                : emptyStorage);
    results.push_back(std::move(data));
  }
  SerialParallelFor serial;
  if (auto err = (*kernel)(KernelContext{node, inputs, outputs, serial}))
    return std::move(err);
  return llvm::SmallVector<ir::TensorDataPtr, 1>(results.begin(),
                                                 results.end());
}

ir::NodeEvaluator makeCpuEvaluator() { return evaluateNode; }

} // namespace remat::runtime::cpu
