//===- runtime/cpu/PackedSgemm.cpp - remat's AVX-512 f32 GEMM -------------===//
//
// Note [Packed AVX-512 sgemm]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The classic packed product (Goto's layout, as BLIS and OpenBLAS build
// theirs), single-threaded: remat's threads each run whole tiles of a
// product (Note [OpenBLAS threads] in runtime/cpu/Linalg.cpp).
//
// For each block of kNC columns of C and each block of kKC values of k, the
// columns of op(B) are copied into panels of kNR = 32 columns (kNR values per
// k, zero past the last column); then for each block of kMC rows, the rows
// of op(A) into panels of kMR = 8 rows (kMR values per k). A register
// kernel keeps an 8 x 32 block of C in 16 zmm accumulators: per k, two
// loads of B and eight broadcasts of A feed 16 FMAs. The loops run the B
// panels outside the A panels, so a B panel (kKC x 32 floats, 32 KiB) stays
// in L1 while the A block (kMC x kKC, 256 KiB) streams from L2.
//
// Bits: element (i, j) of C is, for each K block in order, one FMA chain
// from 0 over the block's k in order, then C = alpha * sum + beta * C (the
// first block; beta 0 writes alpha * sum without reading C, as BLAS does)
// or C = alpha * sum + C (the later ones). A panel or a block of C at an
// edge runs the same kernel on zero-padded copies. So the bits depend on K
// alone: not on where the element sits, on the tiling, on the transposes or
// on the leading dims, and remat's results stay the same for every thread
// count.
//
// Why not OpenBLAS: on the AVX-512 Xeon this was written on (Sapphire
// Rapids class, 160-167 GFLOP/s per thread in an FMA loop), OpenBLAS
// 0.3.21's SkylakeX kernels and this one run bert-base's tiles at about the
// same rate with their operands in cache (remat-bench-gemm --tile 256x1024:
// 0.96-1.02x), but in a training step this one took about 10% less time
// (alternated profiles, docs/benchmarks.md), and it lets remat.PermutedMatMul
// pass strided operands as they are instead of copying them. Its packing
// buffers (1.3 MiB per thread, like OpenBLAS's own, and up to 8 MiB for an
// op(A) packed once per node, Note [op(A) packed once per node]) are
// outside the arena.
//
// The cache sizes behind the blocks: a B panel in a 48 KiB L1, the A block
// and a B block (1 MiB) in a 2 MiB L2. The runtime's largest tile for this
// kernel is 512 x 1024 (runtime/cpu/Linalg.cpp, kMaxPackedTile): a tile
// packs its B once per K block and its A in two blocks of kMC rows.
//
// alpha 0 (or k 0) computes C = beta * C without reading A and B, as BLAS
// does, so an Inf or NaN in them does not reach C.
//
// Note [A in place for narrow products]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Packing op(A) pays when each A panel then feeds many B panels. In a
// product of at most 64 columns (two B panels: attention's P V, dS K, P^T dO
// and dS^T Q, one head at a time) it feeds two, and the copy took about an
// eighth of the product's time: in a one-thread harness over 12 heads of
// 512 x 64 x 512, 104 GFLOP/s with A packed and 119 with it read in place
// (88 and 98 with A transposed; 128 x 64 x 128: 96 and 108, 82 and 102),
// while at 128 columns the two were level (108 and 111) and at 768 packing
// won (109 and 105). So such a product's kernel broadcasts op(A)'s
// elements from where they lie, through the view's strides. The FMAs,
// their order and the writes to C are those of the packed path (a last
// panel of fewer than kMR rows is still packed, zero-padded): same bits.
//
// Note [Tiles that share a packed A]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The runtime cuts a product into tiles for its threads (runtime/cpu/
// Linalg.cpp, finishPlan), and each tile used to pack its own op(A): a 512 x
// 768 product in four tiles packed its A two or four times, the MLM
// decoder's 30 column tiles packed the same 512 x 768 A thirty times. And
// with four tiles on two threads, whichever thread the machine slowed
// during the node left the other idle at its end: the pool's threads were
// idle for 2-11% of their time in the bert-base step (b4s128, 2 threads,
// an instrumented build), nearly all of it in the 4- and 6-tile GEMMs,
// where the two threads finished a node 1.1 ms apart on average (of 8.4).
// So the runtime cuts a product whose op(A) fits (packed, at most 8 MiB
// for the node) into column strips, at least 12 tasks where the strips
// stay 64 columns wide, and the strips of a row of tiles read one packed
// op(A): Note [op(A) packed once per node].
//
// Note [op(A) packed once per node]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The strips of a row of tiles first shared op(A) per thread: each thread
// packed it, lazily, the first time one of its strips needed a block. With
// one row of strips (512 tokens) both threads then packed all of op(A): in
// the bert-base step (b4s128, an instrumented build counting cycles in the
// packing) packing A took 1.59-1.77e9 cycles of 2.2-2.4e10 in the GEMMs at
// 2 threads against 1.13e9 at 1, as much as packing B. So op(A) is packed
// once per node instead, before the strips: packedSgemm512PackA packs one
// block (kKC values of k by kMC rows) into the layout the block loop reads,
// the runtime spreads the blocks over its threads and then runs the strips,
// which read op(A) from there (packedSgemm512's packedA). Packing moves no
// FMA: same bits. The packed op(A) lives in the calling thread's buffer,
// outside the arena (runtime/cpu/Linalg.cpp, kMaxPrepackedAFloats).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/PackedSgemm.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define REMAT_PACKED_SGEMM512 1
#endif

namespace remat::runtime::cpu {

#ifdef REMAT_PACKED_SGEMM512
namespace {

constexpr int64_t kMR = 8;
constexpr int64_t kNR = 32;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 256;  // a multiple of kMR
constexpr int64_t kNC = 1024; // a multiple of kNR
/// Products of at most this many columns read A in place (Note [A in place
/// for narrow products]).
constexpr int64_t kMaxNarrowColumns = 2 * kNR;
static_assert(kMR % 8 == 0 && kNR % 8 == 0,
              "packPanel copies and transposes 8 floats at a time");

/// packBlock prefetches the source line this many lines ahead.
constexpr int64_t kPackAhead = 4;

/// Floats from one packed B panel to the next: one cache line more than the
/// panel, so that packing, which writes the panels side by side, does not
/// keep hitting one set of the L1 cache.
constexpr int64_t bPanelStride(int64_t kc) { return kc * kNR + 16; }
/// The same for op(A)'s panels of kMR rows: at kc = kKC a panel is 8 KiB,
/// and packBlock's copy of an op(A) stored transposed (a dW = X^T dY's X^T)
/// writes a line of every panel of its block at each k, all into one L1
/// set without the extra line. With it, and with packBlock copying two k
/// (one whole line per panel) at a time, that copy (remat-bench-gemm
/// --ceilings, three alternated runs) went from 5.6-6.0 to 9.8-10.0 GB/s
/// with op(A) in L3 (44-47% of memcpy's bandwidth to 71-77%) and from
/// 3.6-4.4 to 5.0-5.1 GB/s from memory; in the bert-base step (b4s128, 2
/// threads, perf, three alternated runs) packBlock's share went from
/// 5.51-5.83% to 5.03-5.61% and the GEMMs' from 80.0-82.8% to 79.4-81.3%.
/// (The two-k copy without the extra line left the step's share where it
/// was.)
constexpr int64_t aPanelStride(int64_t kc) { return kc * kMR + 16; }

/// One thread's packing buffers, 64-byte aligned, allocated on first use and
/// kept until the thread exits.
struct PackBuffers {
  struct Free {
    void operator()(float *p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<float[], Free>;

  static Buffer allocate(int64_t floats) {
    // aligned_alloc wants a multiple of the alignment (ASan's returns null
    // otherwise): whole cache lines.
    size_t bytes = (sizeof(float) * size_t(floats) + 63) / 64 * 64;
    Buffer buffer(static_cast<float *>(std::aligned_alloc(64, bytes)));
    if (!buffer)
      throw std::bad_alloc();
    return buffer;
  }

  Buffer aBuffer = allocate(kMC / kMR * aPanelStride(kKC));
  Buffer bBuffer = allocate(bPanelStride(kKC) * (kNC / kNR));
  float *a = aBuffer.get();
  float *b = bBuffer.get();
};

#define REMAT_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

/// Transposes the 8 x 8 block at \p in (rows \p ldIn apart) into \p out
/// (rows \p ldOut apart).
REMAT_TARGET_AVX512 __attribute__((always_inline)) inline void
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
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44);
  __m256 u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44);
  __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44);
  __m256 u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44);
  __m256 u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_store_ps(out, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_store_ps(out + ldOut, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_store_ps(out + 2 * ldOut, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_store_ps(out + 3 * ldOut, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_store_ps(out + 4 * ldOut, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_store_ps(out + 5 * ldOut, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_store_ps(out + 6 * ldOut, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_store_ps(out + 7 * ldOut, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/// A matrix view: element (r, c) at data[r * rs + c * cs], one of rs and cs
/// being 1.
struct View {
  const float *data;
  int64_t rs, cs;
  float at(int64_t r, int64_t c) const { return data[r * rs + c * cs]; }
  /// The view whose element (0, 0) is this one's (r, c).
  View from(int64_t r, int64_t c) const {
    return {data + r * rs + c * cs, rs, cs};
  }
};

/// Copies rows [0, rows) (rows <= width) and k [0, kc) of \p src into one
/// panel: element (i, p) at out[p * width + i], rows past \p rows zero.
/// width is kMR for A panels (src = op(A)) and kNR for B panels (src =
/// op(B)^T), so one routine packs both sides.
REMAT_TARGET_AVX512 void packPanel(View src, int64_t rows, int64_t kc,
                                   int64_t width, float *out) {
  // (Whole panels with unit stride along the width are packBlock's.)
  int64_t p = 0;
  if (src.cs == 1 && rows == width) {
    // Unit stride along k: 8 x 8 transposes, eight rows at a time from end
    // to end (eight streams), not all the panel's rows at each k: in the
    // bert-base step (b4s128, 2 threads, perf, 3 alternated runs) packPanel
    // went from 3.56-3.78% of the samples to 3.21-3.41%.
    int64_t full = kc / 8 * 8;
    for (int64_t i = 0; i < width; i += 8)
      for (int64_t q = 0; q < full; q += 8)
        transpose8x8(src.data + i * src.rs + q, src.rs, out + q * width + i,
                     width);
    p = full;
  }
  for (; p < kc; ++p)
    for (int64_t i = 0; i < width; ++i)
      out[p * width + i] = i < rows ? src.at(i, p) : 0.0f;
}

/// Asks for the cache lines of \p src's line p + kPackAhead (k = p +
/// kPackAhead, its first \p floats floats), if p + kPackAhead < \p kc.
/// packBlock's lines are short streams of their own (a strip's width of a
/// weight's row, say): in the bert-base step (b4s128, 2 threads) its
/// samples per sample in the kernel fell from 0.089-0.104 to 0.076-0.082
/// with these (perf, alternated runs, docs/benchmarks.md). (Written as a
/// lambda, which has no target attribute, the prefetches were gone from
/// the binary without a warning, and packBlock's share rose by a fifth.)
REMAT_TARGET_AVX512 __attribute__((always_inline)) inline void
prefetchLines(View src, int64_t p, int64_t kc, int64_t floats) {
  if (p + kPackAhead >= kc)
    return;
  uintptr_t first =
      reinterpret_cast<uintptr_t>(src.data + (p + kPackAhead) * src.cs);
  uintptr_t last = first + uintptr_t(floats) * sizeof(float) - 1;
  for (uintptr_t line = first & ~uintptr_t(63); line <= last; line += 64)
    _mm_prefetch(reinterpret_cast<const char *>(line), _MM_HINT_T0);
}

/// Packs rows [0, count) and k [0, kc) of \p src into panels of \p width
/// rows (packPanel), panel q at out + q * panelStride. When the rows are
/// the unit-stride dim (op(B) as stored, op(A) stored transposed), source
/// line p is read once from end to end for all the panels, instead of a
/// panel's width of it per panel: a stream the hardware prefetches, where
/// the operand comes from memory.
REMAT_TARGET_AVX512 void packBlock(View src, int64_t count, int64_t kc,
                                   int64_t width, float *out,
                                   int64_t panelStride) {
  int64_t full = src.rs == 1 ? count / width * width : 0;
  int64_t p = 0;
  if (width == kMR) {
    // An A panel's line holds two k: copy lines p and p + 1 together, one
    // whole cache line per panel, not two halves of it at different times.
    static_assert(kMR == 8, "the two-k copy moves eight floats per k");
    for (; full > 0 && p + 1 < kc; p += 2) {
      prefetchLines(src, p, kc, full);
      prefetchLines(src, p + 1, kc, full);
      const float *in = src.data + p * src.cs, *next = in + src.cs;
      int64_t r0 = 0;
      for (; r0 + 2 * kMR <= full; r0 += 2 * kMR) {
        // Rows r0 .. r0 + 15 at k = p and p + 1: panel r0's line is the
        // first eight of each, the next panel's the last eight.
        __m512 here = _mm512_loadu_ps(in + r0);
        __m512 there = _mm512_loadu_ps(next + r0);
        float *panel = out + (r0 / kMR) * panelStride + p * kMR;
        // (The masked form with every lane set: GCC 12 warns that the
        // plain one's undefined source may be used uninitialized.)
        _mm512_storeu_ps(
            panel, _mm512_mask_shuffle_f32x4(here, 0xFFFF, here, there, 0x44));
        _mm512_storeu_ps(
            panel + panelStride,
            _mm512_mask_shuffle_f32x4(here, 0xFFFF, here, there, 0xEE));
      }
      for (; r0 < full; r0 += kMR) {
        float *panel = out + (r0 / kMR) * panelStride + p * kMR;
        _mm256_storeu_ps(panel, _mm256_loadu_ps(in + r0));
        _mm256_storeu_ps(panel + kMR, _mm256_loadu_ps(next + r0));
      }
    }
  }
  for (; full > 0 && p < kc; ++p) {
    prefetchLines(src, p, kc, full);
    const float *in = src.data + p * src.cs;
    for (int64_t r0 = 0; r0 < full; r0 += width) {
      float *panel = out + (r0 / width) * panelStride + p * width;
      for (int64_t i = 0; i < width; i += 8)
        _mm256_store_ps(panel + i, _mm256_loadu_ps(in + r0 + i));
    }
  }
  for (int64_t r0 = full; r0 < count; r0 += width)
    packPanel(src.from(r0, 0), std::min(width, count - r0), kc, width,
              out + (r0 / width) * panelStride);
}

/// op(A)'s panels of kMR rows, the last one zero-padded.
constexpr int64_t aPanels(int64_t m) { return (m + kMR - 1) / kMR; }

/// Where block (p0, i0) of op(A) (kc values of k from p0, rows from i0)
/// starts in a packed op(A) of m rows: the K blocks one after another, each
/// kKC deep but the last, each its row blocks of panels one after another
/// (aPanelStride apart), as packBlock writes them.
constexpr int64_t packedAOffset(int64_t m, int64_t p0, int64_t i0, int64_t kc) {
  return p0 / kKC * aPanels(m) * aPanelStride(kKC) +
         i0 / kMR * aPanelStride(kc);
}

/// Where the kernel reads op(A): element (i, p) of the 8-row panel at
/// data[i * rowStride + p * kStride]. A packed panel has the strides 1 and
/// kMR as constants (PackedPanel); a panel read where it lies in op(A) has
/// its view's strides (StridedPanel).
struct PackedPanel {
  const float *data;
  static constexpr int64_t rowStride = 1, kStride = kMR;
};
struct StridedPanel {
  const float *data;
  int64_t rowStride, kStride;
};

/// c (8 x 32, leading dim ldc) = alpha * sum_p A[p] B[p] + (overwrite ? 0 :
/// beta * c), with A's panel at \p a and B a packed panel of depth kc; with
/// \p bias, beta * bias[j] in every row instead of beta * c (c not read).
template <typename Panel>
REMAT_TARGET_AVX512 void
kernel8x32(int64_t kc, Panel a, const float *bp, float *c, int64_t ldc,
           float alpha, float beta, bool overwrite, const float *bias) {
  __m512 acc[kMR][2];
#pragma GCC unroll 8
  for (int64_t i = 0; i < kMR; ++i) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + 16), _MM_HINT_T0);
  }
  const float *ap = a.data;
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b0 = _mm512_load_ps(bp);
    __m512 b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 8
    for (int64_t i = 0; i < kMR; ++i) {
      __m512 ai = _mm512_set1_ps(ap[i * a.rowStride]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    ap += a.kStride;
    bp += kNR;
  }
  __m512 vAlpha = _mm512_set1_ps(alpha);
  __m512 vBeta = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int64_t i = 0; i < kMR; ++i) {
    float *row = c + i * ldc;
    if (overwrite) {
      _mm512_storeu_ps(row, _mm512_mul_ps(vAlpha, acc[i][0]));
      _mm512_storeu_ps(row + 16, _mm512_mul_ps(vAlpha, acc[i][1]));
      continue;
    }
    const float *start = bias ? bias : row;
    __m512 old0 = _mm512_mul_ps(vBeta, _mm512_loadu_ps(start));
    __m512 old1 = _mm512_mul_ps(vBeta, _mm512_loadu_ps(start + 16));
    _mm512_storeu_ps(row, _mm512_fmadd_ps(vAlpha, acc[i][0], old0));
    _mm512_storeu_ps(row + 16, _mm512_fmadd_ps(vAlpha, acc[i][1], old1));
  }
}

/// Runs the kernel on the 8 x 32 block of C at \p cBlock, of which \p rows
/// x \p cols lie inside C: a block at an edge runs on a copy, so that every
/// element gets the same operations wherever it sits. With \p bias (its
/// \p cols values), C starts as beta * bias[j] in every row, not read.
template <typename Panel>
REMAT_TARGET_AVX512 void multiplyPanel(int64_t kc, Panel a, const float *bPanel,
                                       float *cBlock, int64_t ldc, int64_t rows,
                                       int64_t cols, float alpha, float beta,
                                       bool overwrite, const float *bias) {
  if (rows == kMR && cols == kNR) {
    kernel8x32(kc, a, bPanel, cBlock, ldc, alpha, beta, overwrite, bias);
    return;
  }
  alignas(64) float cEdge[kMR * kNR] = {};
  if (!overwrite)
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(cEdge + i * kNR, bias ? bias : cBlock + i * ldc,
                  sizeof(float) * cols);
  kernel8x32(kc, a, bPanel, cEdge, kNR, alpha, beta, overwrite, nullptr);
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(cBlock + i * ldc, cEdge + i * kNR, sizeof(float) * cols);
}

/// Runs the kernel over an mc x nc block of C with B packed and A either
/// packed (\p aPacked, panels of kMR rows) or, when aPacked is null, read
/// where it lies (\p aView; Note [A in place for narrow products]), its last
/// panel packed when it has fewer than kMR rows. With \p bias (nc values),
/// C starts as beta * bias[j] in every row, not read.
REMAT_TARGET_AVX512 void multiplyBlock(int64_t mc, int64_t nc, int64_t kc,
                                       const float *aPacked, View aView,
                                       const float *bp, float *c, int64_t ldc,
                                       float alpha, float beta, bool overwrite,
                                       const float *bias) {
  int64_t fullRows = aPacked ? mc : mc / kMR * kMR;
  alignas(64) float aEdge[kMR * kKC];
  if (fullRows < mc)
    packPanel(aView.from(fullRows, 0), mc - fullRows, kc, kMR, aEdge);
  for (int64_t c0 = 0; c0 < nc; c0 += kNR) {
    int64_t cols = std::min(kNR, nc - c0);
    const float *bPanel = bp + (c0 / kNR) * bPanelStride(kc);
    const float *panelBias = bias ? bias + c0 : nullptr;
    for (int64_t r0 = 0; r0 < mc; r0 += kMR) {
      int64_t rows = std::min(kMR, mc - r0);
      float *cBlock = c + r0 * ldc + c0;
      if (aPacked) {
        multiplyPanel(kc, PackedPanel{aPacked + r0 / kMR * aPanelStride(kc)},
                      bPanel, cBlock, ldc, rows, cols, alpha, beta, overwrite,
                      panelBias);
      } else if (r0 < fullRows) {
        View panel = aView.from(r0, 0);
        multiplyPanel(kc, StridedPanel{panel.data, panel.rs, panel.cs}, bPanel,
                      cBlock, ldc, rows, cols, alpha, beta, overwrite,
                      panelBias);
      } else {
        multiplyPanel(kc, PackedPanel{aEdge}, bPanel, cBlock, ldc, rows, cols,
                      alpha, beta, overwrite, panelBias);
      }
    }
  }
}

} // namespace

int64_t packedSgemm512PackedASize(int64_t m, int64_t k) {
  int64_t kBlocks = (k + kKC - 1) / kKC;
  return kBlocks * aPanels(m) * aPanelStride(kKC);
}

PackedABlocks packedSgemm512PackedABlocks(int64_t m, int64_t k) {
  return {(k + kKC - 1) / kKC, (m + kMC - 1) / kMC};
}

float *packedSgemm512ABuffer(int64_t floats) {
  static thread_local PackBuffers::Buffer buffer;
  static thread_local int64_t capacity = 0;
  if (capacity < floats) {
    buffer = PackBuffers::allocate(floats); // throws, keeping the old one
    capacity = floats;
  }
  return buffer.get();
}

void packedSgemm512PackA(bool transA, int64_t m, int64_t k, const float *a,
                         int64_t lda, int64_t kBlock, int64_t rowBlock,
                         float *packed) {
  assert(m > 0 && k > 0 && kBlock * kKC < k && rowBlock * kMC < m &&
         "a block of op(A)");
  int64_t p0 = kBlock * kKC, i0 = rowBlock * kMC;
  int64_t kc = std::min(kKC, k - p0), mc = std::min(kMC, m - i0);
  View opA = transA ? View{a, 1, lda} : View{a, lda, 1};
  packBlock(opA.from(i0, p0), mc, kc, kMR,
            packed + packedAOffset(m, p0, i0, kc), aPanelStride(kc));
}

bool packedSgemm512Available() {
  static const bool available = [] {
    const char *choice = std::getenv("REMAT_GEMM");
    if (choice && std::strcmp(choice, "openblas") == 0)
      return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return available;
}

void packedSgemm512(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float beta, float *c, int64_t ldc,
                    const float *packedA, const float *bias) {
  assert(packedSgemm512Available() && "packedSgemm512 needs AVX-512F");
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0 || alpha == 0.0f) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float &value = c[i * ldc + j];
        value = beta == 0.0f ? 0.0f : beta * (bias ? bias[j] : value);
      }
    return;
  }
  static thread_local PackBuffers buffers;
  // op(A)(i, p) and op(B)^T(j, p) as views.
  View opA = transA ? View{a, 1, lda} : View{a, lda, 1};
  View opBT = transB ? View{b, ldb, 1} : View{b, 1, ldb};
  // Note [op(A) packed once per node], Note [A in place for narrow
  // products].
  const bool readsAInPlace = !packedA && n <= kMaxNarrowColumns;
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    int64_t nc = std::min(kNC, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kKC) {
      int64_t kc = std::min(kKC, k - p0);
      bool first = p0 == 0;
      bool overwrite = first && beta == 0.0f;
      float blockBeta = first ? beta : 1.0f;
      packBlock(opBT.from(j0, p0), nc, kc, kNR, buffers.b, bPanelStride(kc));
      for (int64_t i0 = 0; i0 < m; i0 += kMC) {
        int64_t mc = std::min(kMC, m - i0);
        const float *aPacked = nullptr;
        if (packedA) {
          aPacked = packedA + packedAOffset(m, p0, i0, kc);
        } else if (!readsAInPlace) {
          packBlock(opA.from(i0, p0), mc, kc, kMR, buffers.a, aPanelStride(kc));
          aPacked = buffers.a;
        }
        multiplyBlock(mc, nc, kc, aPacked, opA.from(i0, p0), buffers.b,
                      c + i0 * ldc + j0, ldc, alpha, blockBeta, overwrite,
                      first && bias ? bias + j0 : nullptr);
      }
    }
  }
}

#else // !REMAT_PACKED_SGEMM512

bool packedSgemm512Available() { return false; }

int64_t packedSgemm512PackedASize(int64_t, int64_t) { return 0; }

PackedABlocks packedSgemm512PackedABlocks(int64_t, int64_t) { return {}; }

float *packedSgemm512ABuffer(int64_t) {
  assert(false && "packedSgemm512ABuffer needs x86-64 with AVX-512F");
  return nullptr;
}

void packedSgemm512PackA(bool, int64_t, int64_t, const float *, int64_t,
                         int64_t, int64_t, float *) {
  assert(false && "packedSgemm512PackA needs x86-64 with AVX-512F");
}

void packedSgemm512(bool, bool, int64_t, int64_t, int64_t, float, const float *,
                    int64_t, const float *, int64_t, float, float *, int64_t,
                    const float *, const float *) {
  assert(false && "packedSgemm512 needs x86-64 with AVX-512F");
}

#endif // REMAT_PACKED_SGEMM512

} // namespace remat::runtime::cpu
