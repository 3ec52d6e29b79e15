//===- runtime/Backends.h - The backends this build has ---------*- C++ -*-===//
//
// The one list of backends, in its own library (remat_backends) above the
// runtime core and every backend: the core (runtime/Backend.h, the executor,
// the CPU backend) names no other backend, and a backend's library depends
// on the core, never the reverse. Tools, the API and tests create backends
// here.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_BACKENDS_H
#define REMAT_RUNTIME_BACKENDS_H

#include "runtime/Backend.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace remat::runtime {

/// \returns the names of the backends this build has, in the order of the
/// list (runtime/Backends.cpp): "cpu" always, "cuda" when it is built.
std::vector<llvm::StringRef> listBackends();

/// \returns the backend named \p name, or an error naming it and listing the
/// backends this build has.
llvm::Expected<std::unique_ptr<Backend>> createBackend(llvm::StringRef name);

} // namespace remat::runtime

#endif // REMAT_RUNTIME_BACKENDS_H
