//===- runtime/Backend.cpp - Backends and their registry ------------------===//
//
// The one list of backends this build has. Nothing registers itself at load
// time (STYLE.md): a backend is a line here, guarded by the CMake option
// that builds it.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"

#include "ir/Support.h"
#include "runtime/cpu/CpuBackend.h"
#if REMAT_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

#include "llvm/ADT/StringExtras.h"

namespace remat::runtime {

Executable::~Executable() = default;
Backend::~Backend() = default;

namespace {

struct BackendEntry {
  const char *name;
  std::unique_ptr<Backend> (*create)();
};

/// Every built backend; the first is the default.
const BackendEntry kBackends[] = {
    {"cpu", cpu::createCpuBackend},
#if REMAT_HAVE_CUDA
    {"cuda", cuda::createCudaBackend},
#endif
};

} // namespace

std::vector<llvm::StringRef> listBackends() {
  std::vector<llvm::StringRef> names;
  for (const BackendEntry &entry : kBackends)
    names.push_back(entry.name);
  return names;
}

llvm::Expected<std::unique_ptr<Backend>> createBackend(llvm::StringRef name) {
  for (const BackendEntry &entry : kBackends)
    if (name == entry.name)
      return entry.create();
  return makeError("unknown backend '" + name + "' (available: " +
                   llvm::join(listBackends(), ", ") + ")");
}

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
