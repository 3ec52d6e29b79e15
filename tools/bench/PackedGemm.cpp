//===- tools/bench/PackedGemm.cpp - A packed f32 GEMM kernel, for the bench =//
//
// A GEMM candidate of remat's own for tools/bench/GemmBench.cpp: one
// single-threaded f32 product C = alpha op(A) op(B) + beta C, in the classic
// packed layout. K is cut into blocks of kKC; for each block, the rows of
// op(A) are copied into panels of kMR rows (k-major, kMR values per k) and
// the columns of op(B) into panels of kNR columns (kNR values per k),
// zero-padded at the edges. A 6x16 register kernel (12 ymm accumulators, two
// loads of B and six broadcasts of A per k) runs over every pair of panels,
// the B panel (kKC x 16 floats, 16 KiB) held in L1, the A panels in L2.
//
// Bits: element (i, j) is one FMA chain over each K block in order of k,
// the blocks added to C in order; an edge block runs the same kernel on a
// padded copy. The order depends on K alone, so the kernel would keep
// remat's results independent of the thread count (Note [OpenBLAS threads]
// in runtime/cpu/Linalg.cpp).
//
// Measured, not used: on this Zen 3 it runs bert-base's tile shapes about
// 15-20% slower than OpenBLAS 0.3.21's Zen and Haswell kernels (see the
// issue 16 note for the figures), so the runtime keeps OpenBLAS.
//
//===----------------------------------------------------------------------===//

#include "tools/bench/PackedGemm.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#define REMAT_PACKED_SGEMM 1
#endif

namespace remat::bench {

#ifdef REMAT_PACKED_SGEMM
namespace {

constexpr int64_t kMR = 6;
constexpr int64_t kNR = 16;
/// K block: a B panel is kKC * kNR floats (16 KiB, in L1).
constexpr int64_t kKC = 256;
/// Rows and columns packed at once: runtime/cpu/Linalg.cpp's tile is 128 x
/// 256, so a tile packs its A and B once per K block.
constexpr int64_t kMC = 132; // a multiple of kMR, >= 128
constexpr int64_t kNC = 256; // a multiple of kNR

/// Floats from one packed B panel to the next: one cache line more than the
/// panel, so that the panels' rows do not all fall in one set of the L1
/// cache when packing writes them side by side.
constexpr int64_t bPanelStride(int64_t kc) { return kc * kNR + kNR; }

/// The packing buffers of one thread, 64-byte aligned, allocated on first
/// use and kept until the thread exits.
struct PackBuffers {
  float *b = nullptr;
  float *a = nullptr;

  PackBuffers() {
    a = static_cast<float *>(std::aligned_alloc(64, sizeof(float) * kMC * kKC));
    b = static_cast<float *>(std::aligned_alloc(
        64, sizeof(float) * bPanelStride(kKC) * (kNC / kNR)));
    if (!a || !b)
      throw std::bad_alloc();
  }
  ~PackBuffers() {
    std::free(b);
    std::free(a);
  }
  PackBuffers(const PackBuffers &) = delete;
  PackBuffers &operator=(const PackBuffers &) = delete;
};

/// Copies the \p rows (<= kMR) rows of an A panel, element (i, p) at
/// a[i * rs + p * cs], into \p out as a packed panel (element (i, p) at
/// out[p * kMR + i]), rows past \p rows zero.
void packRows(int64_t rows, int64_t kc, const float *a, int64_t rs, int64_t cs,
              float *out) {
  for (int64_t p = 0; p < kc; ++p)
    for (int64_t i = 0; i < kMR; ++i)
      out[p * kMR + i] = i < rows ? a[i * rs + p * cs] : 0.0f;
}

/// Transposes the 8 x 8 block at \p in (rows \p ldIn apart) into \p out
/// (rows \p ldOut apart).
__attribute__((target("avx2,fma"), always_inline)) inline void
transpose8x8(const float *in, int64_t ldIn, float *out, int64_t ldOut) {
  __m256 r0 = _mm256_loadu_ps(in), r1 = _mm256_loadu_ps(in + ldIn);
  __m256 r2 = _mm256_loadu_ps(in + 2 * ldIn);
  __m256 r3 = _mm256_loadu_ps(in + 3 * ldIn);
  __m256 r4 = _mm256_loadu_ps(in + 4 * ldIn);
  __m256 r5 = _mm256_loadu_ps(in + 5 * ldIn);
  __m256 r6 = _mm256_loadu_ps(in + 6 * ldIn);
  __m256 r7 = _mm256_loadu_ps(in + 7 * ldIn);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44),
         u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44),
         u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44),
         u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44),
         u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(out, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out + ldOut, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out + 2 * ldOut, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out + 3 * ldOut, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out + 4 * ldOut, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out + 5 * ldOut, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out + 6 * ldOut, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out + 7 * ldOut, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/// Copies k [0, kc) and columns [0, nc) of op(B) (starting at \p b) into
/// panels of kNR columns: panel c holds element (p, c * kNR + j) at
/// [c * bPanelStride(kc) + p * kNR + j]. Columns past nc are zero.
__attribute__((target("avx2,fma"))) void packB(bool transB, int64_t kc,
                                               int64_t nc, const float *b,
                                               int64_t ldb, float *out) {
  int64_t stride = bPanelStride(kc);
  if (!transB) {
    // op(B)(p, j) = b[p * ldb + j]: row p is contiguous; read it once.
    for (int64_t p = 0; p < kc; ++p) {
      const float *source = b + p * ldb;
      for (int64_t c0 = 0; c0 < nc; c0 += kNR) {
        float *target = out + (c0 / kNR) * stride + p * kNR;
        int64_t cols = std::min(kNR, nc - c0);
        if (cols == kNR) {
          _mm256_store_ps(target, _mm256_loadu_ps(source + c0));
          _mm256_store_ps(target + 8, _mm256_loadu_ps(source + c0 + 8));
          continue;
        }
        int64_t j = 0;
        for (; j < cols; ++j)
          target[j] = source[c0 + j];
        for (; j < kNR; ++j)
          target[j] = 0.0f;
      }
    }
    return;
  }
  for (int64_t c0 = 0; c0 < nc; c0 += kNR) {
    int64_t cols = std::min(kNR, nc - c0);
    float *panel = out + (c0 / kNR) * stride;
    // op(B)(p, j) = b[j * ldb + p]: column j is contiguous in k. Whole
    // 8 x 8 blocks are transposed in registers.
    int64_t p = 0;
    if (cols == kNR)
      for (; p + 8 <= kc; p += 8) {
        transpose8x8(b + c0 * ldb + p, ldb, panel + p * kNR, kNR);
        transpose8x8(b + (c0 + 8) * ldb + p, ldb, panel + p * kNR + 8, kNR);
      }
    int64_t pBegin = p;
    for (int64_t j = 0; j < kNR; ++j) {
      if (j >= cols) {
        for (int64_t q = pBegin; q < kc; ++q)
          panel[q * kNR + j] = 0.0f;
        continue;
      }
      const float *source = b + (c0 + j) * ldb;
      for (int64_t q = pBegin; q < kc; ++q)
        panel[q * kNR + j] = source[q];
    }
  }
}

/// Row = alpha * (low, high) + (overwrite ? 0 : beta * row), 16 floats.
__attribute__((target("avx2,fma"), always_inline)) inline void
storeRow(float *row, __m256 low, __m256 high, __m256 alpha, __m256 beta,
         bool overwrite) {
  if (overwrite) {
    _mm256_storeu_ps(row, _mm256_mul_ps(alpha, low));
    _mm256_storeu_ps(row + 8, _mm256_mul_ps(alpha, high));
    return;
  }
  __m256 old0 = _mm256_mul_ps(beta, _mm256_loadu_ps(row));
  __m256 old1 = _mm256_mul_ps(beta, _mm256_loadu_ps(row + 8));
  _mm256_storeu_ps(row, _mm256_fmadd_ps(alpha, low, old0));
  _mm256_storeu_ps(row + 8, _mm256_fmadd_ps(alpha, high, old1));
}

/// C (6 x 16, leading dim ldc) = alpha * sum_p A[p] B[p] + (overwrite ? 0 :
/// beta * C), with A and B packed panels of depth kc.
__attribute__((target("avx2,fma"))) void
kernel6x16(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
           float alpha, float beta, bool overwrite) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t i = 0; i < kMR; ++i)
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m256 b0 = _mm256_load_ps(bp);
    __m256 b1 = _mm256_load_ps(bp + 8);
    __m256 a = _mm256_broadcast_ss(ap);
    c00 = _mm256_fmadd_ps(a, b0, c00);
    c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(ap + 1);
    c10 = _mm256_fmadd_ps(a, b0, c10);
    c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(ap + 2);
    c20 = _mm256_fmadd_ps(a, b0, c20);
    c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(ap + 3);
    c30 = _mm256_fmadd_ps(a, b0, c30);
    c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(ap + 4);
    c40 = _mm256_fmadd_ps(a, b0, c40);
    c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(ap + 5);
    c50 = _mm256_fmadd_ps(a, b0, c50);
    c51 = _mm256_fmadd_ps(a, b1, c51);
    ap += kMR;
    bp += kNR;
  }
  __m256 vAlpha = _mm256_set1_ps(alpha);
  __m256 vBeta = _mm256_set1_ps(beta);
  storeRow(c, c00, c01, vAlpha, vBeta, overwrite);
  storeRow(c + ldc, c10, c11, vAlpha, vBeta, overwrite);
  storeRow(c + 2 * ldc, c20, c21, vAlpha, vBeta, overwrite);
  storeRow(c + 3 * ldc, c30, c31, vAlpha, vBeta, overwrite);
  storeRow(c + 4 * ldc, c40, c41, vAlpha, vBeta, overwrite);
  storeRow(c + 5 * ldc, c50, c51, vAlpha, vBeta, overwrite);
}

/// Runs the kernel over an mc x nc block of C with A and B packed. A panel
/// with fewer than kNR columns or kMR rows runs on a 6 x 16 copy of C, so
/// that every element gets the same operations wherever it sits.
void multiplyBlock(int64_t mc, int64_t nc, int64_t kc, const float *ap,
                   const float *bp, float *c, int64_t ldc, float alpha,
                   float beta, bool overwrite) {
  for (int64_t c0 = 0; c0 < nc; c0 += kNR) {
    int64_t cols = std::min(kNR, nc - c0);
    const float *bPanel = bp + (c0 / kNR) * bPanelStride(kc);
    for (int64_t r0 = 0; r0 < mc; r0 += kMR) {
      int64_t rows = std::min(kMR, mc - r0);
      const float *aPanel = ap + r0 * kc;
      float *cBlock = c + r0 * ldc + c0;
      if (rows == kMR && cols == kNR) {
        kernel6x16(kc, aPanel, bPanel, cBlock, ldc, alpha, beta, overwrite);
        continue;
      }
      alignas(32) float edge[kMR * kNR] = {};
      if (!overwrite)
        for (int64_t i = 0; i < rows; ++i)
          std::memcpy(edge + i * kNR, cBlock + i * ldc, sizeof(float) * cols);
      kernel6x16(kc, aPanel, bPanel, edge, kNR, alpha, beta, overwrite);
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(cBlock + i * ldc, edge + i * kNR, sizeof(float) * cols);
    }
  }
}

} // namespace

bool packedSgemmAvailable() {
  static const bool available =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}

void packedSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc) {
  assert(packedSgemmAvailable() && "packedSgemm needs AVX2 and FMA");
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float &value = c[i * ldc + j];
        value = beta == 0.0f ? 0.0f : beta * value;
      }
    return;
  }
  static thread_local PackBuffers buffers;
  // op(A)(i, p) = a[i * lda + p], or a[p * lda + i] when transposed.
  int64_t rs = transA ? 1 : lda, cs = transA ? lda : 1;
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    int64_t nc = std::min(kNC, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kKC) {
      int64_t kc = std::min(kKC, k - p0);
      // The first K block applies beta (and never reads C when beta is 0,
      // as BLAS does); later blocks add to what the earlier ones wrote.
      bool first = p0 == 0;
      bool overwrite = first && beta == 0.0f;
      float blockBeta = first ? beta : 1.0f;
      const float *bBlock = transB ? b + j0 * ldb + p0 : b + p0 * ldb + j0;
      packB(transB, kc, nc, bBlock, ldb, buffers.b);
      for (int64_t i0 = 0; i0 < m; i0 += kMC) {
        int64_t mc = std::min(kMC, m - i0);
        const float *aBlock = a + i0 * rs + p0 * cs;
        for (int64_t r0 = 0; r0 < mc; r0 += kMR)
          packRows(std::min(kMR, mc - r0), kc, aBlock + r0 * rs, rs, cs,
                   buffers.a + r0 * kc);
        multiplyBlock(mc, nc, kc, buffers.a, buffers.b, c + i0 * ldc + j0, ldc,
                      alpha, blockBeta, overwrite);
      }
    }
  }
}

#else // !REMAT_PACKED_SGEMM

bool packedSgemmAvailable() { return false; }

void packedSgemm(bool, bool, int64_t, int64_t, int64_t, float, const float *,
                 int64_t, const float *, int64_t, float, float *, int64_t) {
  assert(false && "packedSgemm needs x86-64 with AVX2 and FMA");
}

#endif // REMAT_PACKED_SGEMM

} // namespace remat::bench
