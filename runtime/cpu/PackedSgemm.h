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

/// Names one op(A) that several calls on a thread multiply by (the column
/// tiles of one product), so that the thread packs it once (Note [Tiles
/// that share a packed A] in runtime/cpu/PackedSgemm.cpp). Equal keys
/// promise equal contents: \p run is new for each use of the kernel (a
/// node's run), \p tile names the rows of op(A) within it.
struct SharedAKey {
  uint64_t run = 0;
  int64_t tile = 0;
  bool operator==(const SharedAKey &other) const {
    return run == other.run && tile == other.tile;
  }
};

/// True when a thread keeps an m x k op(A) packed for a SharedAKey (at most
/// 8 MiB packed); a larger op(A) is packed block by block.
bool packedSgemm512SharesA(int64_t m, int64_t k);

/// C = alpha op(A) op(B) + beta C, single-threaded, over row-major storage
/// as cblas_sgemm takes it (beta 0 never reads C). Element (i, j) is one
/// FMA chain per K block of 256 in order of k, the blocks added to C in
/// order: its bits depend on K alone, not on where the element sits, the
/// transposes or the leading dims. Only when packedSgemm512Available().
/// With \p shareA (and packedSgemm512SharesA(m, k)), op(A) is packed once
/// per thread for every call with the same key, op(A) and m, k: same bits.
void packedSgemm512(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float beta, float *c, int64_t ldc,
                    const SharedAKey *shareA = nullptr);

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_PACKEDSGEMM_H
