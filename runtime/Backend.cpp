//===- runtime/Backend.cpp - Backends and executables ---------------------===//
//
// What every backend shares; the list of backends is runtime/Backends.cpp.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"

#include "ir/Support.h"

namespace remat::runtime {

Executable::~Executable() = default;
Backend::~Backend() = default;

llvm::Error checkInputs(const ir::Graph &graph, llvm::ArrayRef<Tensor> inputs) {
  if (inputs.size() != graph.getNumInputs())
    return makeError("graph @" + graph.getName() + " has " +
                     llvm::Twine(graph.getNumInputs()) + " inputs, got " +
                     llvm::Twine(inputs.size()) + " tensors");
  for (unsigned i = 0; i < inputs.size(); ++i) {
    const ir::Value *input = graph.getInput(i);
    if (inputs[i].getType() != input->getType())
      return makeError("input %" + input->getName() + " expects " +
                       input->getType().str() + ", got " +
                       inputs[i].getType().str());
    if (!inputs[i].getData() && input->getType().getByteSize() != 0)
      return makeError("input %" + input->getName() + " has no data");
  }
  return llvm::Error::success();
}

} // namespace remat::runtime
