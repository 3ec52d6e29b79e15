//===- tools/bench/PackedGemm.h - A packed f32 GEMM kernel ------*- C++ -*-===//
//
// remat's own GEMM candidate for remat-bench-gemm (tools/bench/PackedGemm.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_TOOLS_BENCH_PACKEDGEMM_H
#define REMAT_TOOLS_BENCH_PACKEDGEMM_H

#include <cstdint>

namespace remat::bench {

/// True when this CPU runs packedSgemm (x86-64 with AVX2 and FMA).
bool packedSgemmAvailable();

/// A single-threaded f32 product C = alpha op(A) op(B) + beta C over
/// row-major storage, as cblas_sgemm takes it, whose bits depend on the
/// shapes alone. Only when packedSgemmAvailable().
void packedSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc);

} // namespace remat::bench

#endif // REMAT_TOOLS_BENCH_PACKEDGEMM_H
