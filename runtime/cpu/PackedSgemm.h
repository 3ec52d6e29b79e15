//===- runtime/cpu/PackedSgemm.h - remat's AVX-512 f32 GEMM -----*- C++ -*-===//
//
// A single-threaded f32 matrix product of remat's own for CPUs with
// AVX-512F (runtime/cpu/PackedSgemm.cpp). The runtime's MatMul and Gemm use
// it for f32 when the CPU has AVX-512F, OpenBLAS otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CPU_PACKEDSGEMM_H
#define REMAT_RUNTIME_CPU_PACKEDSGEMM_H

#include <cstdint>

namespace remat::runtime::cpu {

/// True when this build and this CPU run packedSgemm512 (x86-64 with
/// AVX-512F), and REMAT_GEMM is not set to "openblas".
bool packedSgemm512Available();

/// C = alpha op(A) op(B) + beta C, single-threaded, over row-major storage
/// as cblas_sgemm takes it (beta 0 never reads C). Element (i, j) is one
/// FMA chain per K block of 256 in order of k, the blocks added to C in
/// order: its bits depend on K alone, not on where the element sits, the
/// transposes or the leading dims. Only when packedSgemm512Available().
void packedSgemm512(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float beta, float *c, int64_t ldc);

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_PACKEDSGEMM_H
