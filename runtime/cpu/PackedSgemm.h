//===- runtime/cpu/PackedSgemm.h - remat's own f32 GEMM ---------*- C++ -*-===//
//
// A single-threaded f32 matrix product of remat's own, with a kernel for
// CPUs with AVX-512F and one for CPUs with AVX2 + FMA
// (runtime/cpu/PackedSgemm.cpp). The runtime's MatMul and Gemm use it for
// f32 where either kernel runs, OpenBLAS otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CPU_PACKEDSGEMM_H
#define REMAT_RUNTIME_CPU_PACKEDSGEMM_H

#include <cstdint>

namespace remat::runtime::cpu {

/// remat's kernels, by the instructions they need.
enum class PackedSgemmIsa { None, Avx2, Avx512 };

/// The kernel packedSgemm runs: the process's GEMM provider's
/// (runtime/cpu/GemmProvider.h; by default AVX-512F -> Avx512, else
/// AVX2 + FMA -> Avx2), None when the provider is OpenBLAS (the runtime then
/// runs OpenBLAS) or this is not x86-64.
PackedSgemmIsa packedSgemmIsa();
/// True when this build and this CPU can run \p isa's kernel.
bool packedSgemmSupports(PackedSgemmIsa isa);
/// "remat-avx512", "remat-avx2" or "none".
const char *packedSgemmName(PackedSgemmIsa isa);
/// The columns of packedSgemmIsa()'s B panels (its register kernel's
/// width), 0 for None.
int64_t packedSgemmPanelWidth();

/// True when packedSgemmIsa() is not None.
bool packedSgemmAvailable();

/// op(A) packed ahead for calls that share it (Note [op(A) packed once per
/// node] in runtime/cpu/PackedSgemm.cpp): an m x k op(A) takes
/// packedSgemmPackedASize(m, k) floats and is packed in kBlocks x
/// rowBlocks independent blocks, which threads may pack side by side.
struct PackedABlocks {
  int64_t kBlocks = 0, rowBlocks = 0;
};
int64_t packedSgemmPackedASize(int64_t m, int64_t k);
PackedABlocks packedSgemmPackedABlocks(int64_t m, int64_t k);

/// The calling thread's buffer for a packed op(A) of at least \p floats
/// (64-byte aligned, kept while the thread lives, grown as needed).
float *packedSgemmABuffer(int64_t floats);

/// Packs block (\p kBlock, \p rowBlock) of the m x k op(A) (m, k > 0;
/// element (i, p) at a[i * lda + p], or a[p * lda + i] with \p transA) into
/// \p packed, of packedSgemmPackedASize(m, k) floats from a 32-byte
/// boundary.
void packedSgemmPackA(bool transA, int64_t m, int64_t k, const float *a,
                      int64_t lda, int64_t kBlock, int64_t rowBlock,
                      float *packed);

/// C = alpha op(A) op(B) + beta C, single-threaded, over row-major storage
/// as cblas_sgemm takes it (beta 0 never reads C). Element (i, j) is one
/// FMA chain per K block of 256 in order of k, the blocks added to C in
/// order: its bits depend on K alone, not on where the element sits, the
/// transposes or the leading dims, and not on the kernel either: both run
/// the same FMAs in the same order. Only when packedSgemmAvailable().
/// With \p packedA (every block of this op(A) packed by
/// packedSgemmPackA with these m and k), op(A) is read from it and a, lda
/// and transA are not: same bits. With \p bias (n values), C is not read:
/// C = alpha op(A) op(B) + beta bias[j] in every row, the bits of filling C
/// with the bias first (beta 0 ignores it, as it ignores C).
void packedSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc,
                 const float *packedA = nullptr, const float *bias = nullptr);

/// packedSgemm on \p isa's kernel, which packedSgemmSupports(isa) must
/// allow (\p packedA, if any, packed for packedSgemmIsa()'s kernel must not
/// be passed unless isa is that one): for tests and benchmarks that compare
/// the kernels.
void packedSgemmOn(PackedSgemmIsa isa, bool transA, bool transB, int64_t m,
                   int64_t n, int64_t k, float alpha, const float *a,
                   int64_t lda, const float *b, int64_t ldb, float beta,
                   float *c, int64_t ldc, const float *packedA = nullptr,
                   const float *bias = nullptr);

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_PACKEDSGEMM_H
