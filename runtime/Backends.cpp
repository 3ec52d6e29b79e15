//===- runtime/Backends.cpp - The backends this build has -----------------===//
//
// The one list of backends this build has. Nothing registers itself at load
// time (STYLE.md): a backend is a line here, guarded by the CMake option
// that builds it. This file is the library remat_backends, linked above the
// runtime core and the backends' libraries.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backends.h"

#include "ir/Support.h"
#include "runtime/cpu/CpuBackend.h"
#if REMAT_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

#include "llvm/ADT/StringExtras.h"

namespace remat::runtime {

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

} // namespace remat::runtime
