//===- tools/GemmOption.h - The tools' REMAT_GEMM option --------*- C++ -*-===//
//
// What runs the CPU's f32 products is a tool option, REMAT_GEMM in the
// environment (so that it reaches every tool a script or ctest starts):
// "openblas", "avx2" or "avx512" (runtime/cpu/GemmProvider.h); unset or
// empty, the fastest this CPU runs. Each tool's main applies it first, and
// sets OpenBLAS's core type for this CPU (Note [OpenBLAS core type] in
// runtime/cpu/GemmProvider.cpp): the library does neither by itself.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_TOOLS_GEMMOPTION_H
#define REMAT_TOOLS_GEMMOPTION_H

#include "runtime/cpu/GemmProvider.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace remat::tools {

/// Applies REMAT_GEMM alone. \returns false after printing
/// "error: REMAT_GEMM=...: ..." when the value names no provider or one this
/// CPU cannot run.
inline bool applyGemmProviderOption() {
  using namespace remat::runtime::cpu;
  const char *value = std::getenv("REMAT_GEMM");
  if (!value || !*value)
    return true;
  llvm::Expected<GemmProvider> provider = parseGemmProvider(value);
  llvm::Error err =
      provider ? setGemmProvider(*provider) : provider.takeError();
  if (!err)
    return true;
  llvm::errs() << "error: REMAT_GEMM=" << value << ": "
               << llvm::toString(std::move(err)) << "\n";
  return false;
}

/// Applies REMAT_GEMM, then sets OpenBLAS's core type for this CPU: what a
/// tool's main does first. \returns false as applyGemmProviderOption does.
inline bool applyGemmOption() {
  if (!applyGemmProviderOption())
    return false;
  remat::runtime::cpu::selectOpenBlasCore();
  return true;
}

} // namespace remat::tools

#endif // REMAT_TOOLS_GEMMOPTION_H
