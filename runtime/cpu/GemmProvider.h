//===- runtime/cpu/GemmProvider.h - Who runs the f32 GEMMs ------*- C++ -*-===//
//
// The CPU kernels run MatMul's and Gemm's f32 products on one provider:
// remat's packed kernels (runtime/cpu/PackedSgemm.h, one for AVX-512F and
// one for AVX2 + FMA) or OpenBLAS; f64 products always run OpenBLAS. The
// provider belongs to the process and is chosen explicitly: a process that
// chooses nothing gets the fastest this CPU runs, and the tools choose from
// their REMAT_GEMM option (tools/GemmOption.h). The library reads no
// environment variable for it and changes no OpenBLAS setting but its
// thread count (Note [OpenBLAS threads] in runtime/cpu/Linalg.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CPU_GEMMPROVIDER_H
#define REMAT_RUNTIME_CPU_GEMMPROVIDER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace remat::runtime::cpu {

/// Where f32 products run.
enum class GemmProvider { OpenBlas, RematAvx2, RematAvx512 };

/// The provider of a process that has chosen none: RematAvx512 on a CPU with
/// AVX-512F, else RematAvx2 with AVX2 + FMA, else OpenBlas.
GemmProvider getDefaultGemmProvider();

/// True when this build and this CPU can run \p provider.
bool isGemmProviderSupported(GemmProvider provider);

/// The provider the kernels selected from now on run their f32 products on.
GemmProvider getGemmProvider();

/// Makes \p provider run the f32 products of every kernel selected from now
/// on. Call it before compiling graphs or folding constants (a kernel's
/// tiling follows the provider it was selected for) and while no kernel
/// runs. \returns an error naming \p provider when this CPU cannot run it.
llvm::Error setGemmProvider(GemmProvider provider);

/// "openblas", "avx2" or "avx512": the names REMAT_GEMM takes.
llvm::StringRef getGemmProviderName(GemmProvider provider);

/// \returns the provider named \p name (getGemmProviderName), or an error
/// naming it and listing the names.
llvm::Expected<GemmProvider> parseGemmProvider(llvm::StringRef name);

/// Chooses OpenBLAS's kernels (its "core type") from the CPU's features and
/// re-initialises OpenBLAS with them when they differ from its own choice;
/// OPENBLAS_CORETYPE in the environment wins (Note [OpenBLAS core type] in
/// runtime/cpu/GemmProvider.cpp). It sets and restores OPENBLAS_CORETYPE and
/// swaps the kernels of a library the whole process shares, so only a
/// program's main calls it (tools/GemmOption.h), before any OpenBLAS call.
/// \returns the core in use.
std::string selectOpenBlasCore();

/// Re-initialises a DYNAMIC_ARCH OpenBLAS with core type \p core (an
/// OPENBLAS_CORETYPE name). \returns false when the library cannot (static
/// or single-architecture builds). For benchmarks and selectOpenBlasCore.
bool reinitOpenBlasCore(const char *core);

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_GEMMPROVIDER_H
