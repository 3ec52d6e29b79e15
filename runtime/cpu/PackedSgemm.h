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

/// op(A) packed ahead for calls that share it (Note [op(A) packed once per
/// node] in runtime/cpu/PackedSgemm.cpp): an m x k op(A) takes
/// packedSgemm512PackedASize(m, k) floats and is packed in kBlocks x
/// rowBlocks independent blocks, which threads may pack side by side.
struct PackedABlocks {
  int64_t kBlocks = 0, rowBlocks = 0;
};
int64_t packedSgemm512PackedASize(int64_t m, int64_t k);
PackedABlocks packedSgemm512PackedABlocks(int64_t m, int64_t k);

/// The calling thread's buffer for a packed op(A) of at least \p floats
/// (64-byte aligned, kept while the thread lives, grown as needed).
float *packedSgemm512ABuffer(int64_t floats);

/// Packs block (\p kBlock, \p rowBlock) of the m x k op(A) (m, k > 0;
/// element (i, p) at a[i * lda + p], or a[p * lda + i] with \p transA) into
/// \p packed, of packedSgemm512PackedASize(m, k) floats from a 32-byte
/// boundary.
void packedSgemm512PackA(bool transA, int64_t m, int64_t k, const float *a,
                         int64_t lda, int64_t kBlock, int64_t rowBlock,
                         float *packed);

/// C = alpha op(A) op(B) + beta C, single-threaded, over row-major storage
/// as cblas_sgemm takes it (beta 0 never reads C). Element (i, j) is one
/// FMA chain per K block of 256 in order of k, the blocks added to C in
/// order: its bits depend on K alone, not on where the element sits, the
/// transposes or the leading dims. Only when packedSgemm512Available().
/// With \p packedA (every block of this op(A) packed by
/// packedSgemm512PackA with these m and k), op(A) is read from it and a, lda
/// and transA are not: same bits. With \p bias (n values), C is not read:
/// C = alpha op(A) op(B) + beta bias[j] in every row, the bits of filling C
/// with the bias first (beta 0 ignores it, as it ignores C).
void packedSgemm512(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float beta, float *c, int64_t ldc,
                    const float *packedA = nullptr,
                    const float *bias = nullptr);

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_PACKEDSGEMM_H
