//===- runtime/cpu/PackedSgemm.cpp - remat's own f32 GEMM -----------------===//
//
// Note [Packed sgemm]
// ~~~~~~~~~~~~~~~~~~~
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
// in L1 while the A block (kMC x kKC, 256 KiB) streams from L2. (These are
// the AVX-512 kernel's figures; the AVX2 kernel's are in Note [The AVX2
// kernel]. Both are written once, in runtime/cpu/PackedSgemmImpl.inc.)
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
// Why not OpenBLAS: OpenBLAS 0.3.21's kernels and this one run bert-base's
// tiles at about the same rate with their operands in cache
// (`remat-bench-gemm --tile 256x1024`), but the training step is faster
// with this one (docs/benchmarks.md, CPU speed): an op(A) packed once per
// node and shared by column strips instead of once per 256 x 1024 tile,
// remat.PermutedMatMul's strided operands taken as they are instead of
// gathered and scattered, the bias started in the kernel, and 512-row
// tiles (any tiling gives the same bits, Bits above). Its packing
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
// Note [The AVX2 kernel]
// ~~~~~~~~~~~~~~~~~~~~~~
// On a CPU with AVX2 + FMA and no AVX-512F (the project's 2-core Zen 3
// EPYC), the same blocks and loops run a 6 x 16 kernel: 12 ymm
// accumulators, per k two loads of B and six broadcasts of A feeding 12
// FMAs (16 ymm registers: 12 + 2 + 1). A B panel is 16 KiB (in Zen 3's 32
// KiB L1), an A block 264 x 256 (264 KiB, in its 512 KiB L2); a B block
// (1024 x 256, 1 MiB) is larger than that L2 and streams from L3, one
// panel at a time. Its FMAs, their order, the K blocks (kKC) and the writes
// to C are the AVX-512 kernel's, lane for lane: the two give the same bits
// (a test checks it where both run), so remat's results do not depend on
// which one the CPU picks either.
//
// Why 6 x 16 (`remat-bench-register-shapes` times the candidates with
// their operands where the kernel keeps them): 6 x 16, 4 x 24 and 5 x 16
// run at about the FMA loop's rate; 8 x 8 has eight accumulators for two
// FMA pipes of latency 4, and 3 x 32 needs 17 registers (spills). Of the
// three fast ones, 4 x 24's 24-column panels would leave edges on
// bert-base's 64-, 128- and 512-column products (a 64-column head: panels of
// 24, 24 and 16) and not divide the runtime's strips (Linalg.cpp,
// kStripAlign), and 5 x 16 packs A in panels of five; 6 x 16's edges are
// rows, at most one panel per block. The reasons the step runs faster on it
// than on OpenBLAS's Haswell kernels are the AVX-512 kernel's (Note [Packed
// sgemm]), though OpenBLAS runs the largest single tiles a little faster.
//
// Note [A in place for narrow products]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Packing op(A) pays when each A panel then feeds many B panels. In a
// product of at most 64 columns (two of the AVX-512 kernel's B panels:
// attention's P V, dS K, P^T dO and dS^T Q, one head at a time) it feeds
// two, and the copy took about an eighth of the product's time on the
// AVX-512 machine, while at 128 columns reading in place and packing were
// level and at 768 packing won. So such a product's kernel broadcasts op(A)'s
// elements from where they lie, through the view's strides. The FMAs,
// their order and the writes to C are those of the packed path (a last
// panel of fewer than kMR rows is still packed, zero-padded): same bits.
// The AVX2 kernel reads the same products in place (four of its panels)
// when op(A) is stored as it is used (P V, dS K), and packs an op(A)
// stored transposed (P^T dO, dS^T Q; kNarrowReadsTransposedA). Read in
// place, such an A panel's k are a row of the stored matrix apart (2 KiB
// at seq 512, all in two sets of the Zen 3's L1), and each panel is read
// again for each of the four B panels, which in the bert-base step on the
// Zen 3 (`remat-run --profile`) made dS^T Q and P^T dO slower read in place
// than packed, and P V and dS K faster. Same bits either way, as above.
//
// Note [Tiles that share a packed A]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The runtime cuts a product into tiles for its threads (runtime/cpu/
// Linalg.cpp, finishPlan), and each tile used to pack its own op(A): a 512 x
// 768 product in four tiles packed its A two or four times, the MLM
// decoder's 30 column tiles packed the same 512 x 768 A thirty times. And
// with four tiles on two threads, whichever thread the machine slowed
// during the node left the other idle at its end (an instrumented build
// found nearly all of the pool's idle time in the 4- and 6-tile GEMMs).
// So the runtime cuts a product whose op(A) fits (packed, at most 8 MiB
// for the node) into column strips, at least 12 tasks where the strips
// stay 64 columns wide, and the strips of a row of tiles read one packed
// op(A): Note [op(A) packed once per node].
//
// Note [op(A) packed once per node]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The strips of a row of tiles first shared op(A) per thread: each thread
// packed it, lazily, the first time one of its strips needed a block. With
// one row of strips (512 tokens) both threads then packed all of op(A), and
// packing A cost as much as packing B. So op(A) is packed
// once per node instead, before the strips: packedSgemmPackA packs one
// block (kKC values of k by kMC rows) into the layout the block loop reads,
// the runtime spreads the blocks over its threads and then runs the strips,
// which read op(A) from there (packedSgemm's packedA). Packing moves no
// FMA: same bits. The packed op(A) lives in the calling thread's buffer,
// outside the arena (runtime/cpu/Linalg.cpp, kMaxPrepackedAFloats).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/PackedSgemm.h"

#include "runtime/cpu/GemmProvider.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define REMAT_PACKED_SGEMM 1
#endif

namespace remat::runtime::cpu {

#ifdef REMAT_PACKED_SGEMM
namespace {

// What both kernels share; each has its own kMR, kNR and kMC.
constexpr int64_t kKC = 256;
constexpr int64_t kNC = 1024; // a multiple of both kNR
/// Products of at most this many columns read A in place (on the AVX2
/// kernel only an op(A) stored as it is used: kNarrowReadsTransposedA; Note
/// [A in place for narrow products]).
constexpr int64_t kMaxNarrowColumns = 64;
/// packBlock prefetches the source line this many lines ahead.
constexpr int64_t kPackAhead = 4;

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

struct BufferFree {
  void operator()(float *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], BufferFree>;

/// \p floats floats, 64-byte aligned.
Buffer allocateBuffer(int64_t floats) {
  // aligned_alloc wants a multiple of the alignment (ASan's returns null
  // otherwise): whole cache lines.
  size_t bytes = (sizeof(float) * size_t(floats) + 63) / 64 * 64;
  Buffer buffer(static_cast<float *>(std::aligned_alloc(64, bytes)));
  if (!buffer)
    throw std::bad_alloc();
  return buffer;
}

} // namespace

/// The AVX-512F kernel: 8 x 32, 16 zmm accumulators.
namespace avx512 {
namespace {
#define REMAT_TARGET __attribute__((target("avx512f,avx2,fma")))
constexpr int64_t kMR = 8;
constexpr int64_t kNR = 32;
constexpr int64_t kMC = 256; // a multiple of kMR
/// A narrow product reads an op(A) stored transposed in place too (Note [A
/// in place for narrow products]).
constexpr bool kNarrowReadsTransposedA = true;
/// The kernel's vectors (PackedSgemmImpl.inc): 16 floats.
using Vec = __m512;
constexpr int64_t kLanes = 16;
REMAT_TARGET inline Vec vZero() { return _mm512_setzero_ps(); }
REMAT_TARGET inline Vec vLoad(const float *p) { return _mm512_load_ps(p); }
REMAT_TARGET inline Vec vLoadU(const float *p) { return _mm512_loadu_ps(p); }
REMAT_TARGET inline Vec vSplat(float x) { return _mm512_set1_ps(x); }
REMAT_TARGET inline Vec vMul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
REMAT_TARGET inline Vec vFma(Vec a, Vec b, Vec c) {
  return _mm512_fmadd_ps(a, b, c);
}
REMAT_TARGET inline void vStoreU(float *p, Vec v) { _mm512_storeu_ps(p, v); }
REMAT_TARGET void packALines(View src, int64_t full, int64_t kc, float *out,
                             int64_t panelStride);
#include "runtime/cpu/PackedSgemmImpl.inc"

/// Packs rows [0, full) (whole panels) and k [0, kc) of \p src, whose rows
/// are its unit-stride dim, into panels \p panelStride apart. An A panel's
/// line holds two k: lines p and p + 1 are copied together, one whole cache
/// line per panel, not two halves of it at different times.
REMAT_TARGET void packALines(View src, int64_t full, int64_t kc, float *out,
                             int64_t panelStride) {
  static_assert(kMR == 8, "the two-k copy moves eight floats per k");
  int64_t p = 0;
  for (; p + 1 < kc; p += 2) {
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
  if (p < kc) {
    const float *in = src.data + p * src.cs;
    for (int64_t r0 = 0; r0 < full; r0 += kMR)
      _mm256_storeu_ps(out + (r0 / kMR) * panelStride + p * kMR,
                       _mm256_loadu_ps(in + r0));
  }
}
#undef REMAT_TARGET
} // namespace
} // namespace avx512

/// The AVX2 + FMA kernel (Note [The AVX2 kernel]): 6 x 16, 12 ymm
/// accumulators.
namespace avx2 {
namespace {
#define REMAT_TARGET __attribute__((target("avx2,fma")))
constexpr int64_t kMR = 6;
constexpr int64_t kNR = 16;
constexpr int64_t kMC = 264; // a multiple of kMR
/// A narrow product packs an op(A) stored transposed (Note [A in place for
/// narrow products]).
constexpr bool kNarrowReadsTransposedA = false;
/// The kernel's vectors (PackedSgemmImpl.inc): 8 floats.
using Vec = __m256;
constexpr int64_t kLanes = 8;
REMAT_TARGET inline Vec vZero() { return _mm256_setzero_ps(); }
REMAT_TARGET inline Vec vLoad(const float *p) { return _mm256_load_ps(p); }
REMAT_TARGET inline Vec vLoadU(const float *p) { return _mm256_loadu_ps(p); }
REMAT_TARGET inline Vec vSplat(float x) { return _mm256_set1_ps(x); }
REMAT_TARGET inline Vec vMul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
REMAT_TARGET inline Vec vFma(Vec a, Vec b, Vec c) {
  return _mm256_fmadd_ps(a, b, c);
}
REMAT_TARGET inline void vStoreU(float *p, Vec v) { _mm256_storeu_ps(p, v); }
REMAT_TARGET void packALines(View src, int64_t full, int64_t kc, float *out,
                             int64_t panelStride);
#include "runtime/cpu/PackedSgemmImpl.inc"

/// packALines for panels of six rows: each k's six floats of a panel.
REMAT_TARGET void packALines(View src, int64_t full, int64_t kc, float *out,
                             int64_t panelStride) {
  static_assert(kMR == 6, "a panel's line is a 16- and an 8-byte move");
  for (int64_t p = 0; p < kc; ++p) {
    prefetchLines(src, p, kc, full);
    const float *in = src.data + p * src.cs;
    for (int64_t r0 = 0; r0 < full; r0 += kMR) {
      float *panel = out + (r0 / kMR) * panelStride + p * kMR;
      _mm_storeu_ps(panel, _mm_loadu_ps(in + r0));
      _mm_storel_pi(reinterpret_cast<__m64 *>(panel + 4),
                    _mm_loadl_pi(_mm_setzero_ps(),
                                 reinterpret_cast<const __m64 *>(in + r0 + 4)));
    }
  }
}
#undef REMAT_TARGET
} // namespace
} // namespace avx2

PackedSgemmIsa packedSgemmIsa() {
  switch (getGemmProvider()) {
  case GemmProvider::RematAvx512:
    return PackedSgemmIsa::Avx512;
  case GemmProvider::RematAvx2:
    return PackedSgemmIsa::Avx2;
  case GemmProvider::OpenBlas:
    break;
  }
  return PackedSgemmIsa::None;
}

bool packedSgemmSupports(PackedSgemmIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
  case PackedSgemmIsa::None:
    return false;
  case PackedSgemmIsa::Avx2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case PackedSgemmIsa::Avx512:
    return __builtin_cpu_supports("avx512f");
  }
  return false;
}

const char *packedSgemmName(PackedSgemmIsa isa) {
  switch (isa) {
  case PackedSgemmIsa::None:
    return "none";
  case PackedSgemmIsa::Avx2:
    return "remat-avx2";
  case PackedSgemmIsa::Avx512:
    return "remat-avx512";
  }
  return "none";
}

int64_t packedSgemmPanelWidth() {
  switch (packedSgemmIsa()) {
  case PackedSgemmIsa::Avx2:
    return avx2::kNR;
  case PackedSgemmIsa::Avx512:
    return avx512::kNR;
  case PackedSgemmIsa::None:
    break;
  }
  return 0;
}

int64_t packedSgemmPackedASize(int64_t m, int64_t k) {
  switch (packedSgemmIsa()) {
  case PackedSgemmIsa::Avx512:
    return avx512::packedASize(m, k);
  case PackedSgemmIsa::Avx2:
    return avx2::packedASize(m, k);
  case PackedSgemmIsa::None:
    break;
  }
  return 0;
}

PackedABlocks packedSgemmPackedABlocks(int64_t m, int64_t k) {
  switch (packedSgemmIsa()) {
  case PackedSgemmIsa::Avx512:
    return avx512::packedABlocks(m, k);
  case PackedSgemmIsa::Avx2:
    return avx2::packedABlocks(m, k);
  case PackedSgemmIsa::None:
    break;
  }
  return {};
}

float *packedSgemmABuffer(int64_t floats) {
  static thread_local Buffer buffer;
  static thread_local int64_t capacity = 0;
  if (capacity < floats) {
    buffer = allocateBuffer(floats); // throws, keeping the old one
    capacity = floats;
  }
  return buffer.get();
}

void packedSgemmPackA(bool transA, int64_t m, int64_t k, const float *a,
                      int64_t lda, int64_t kBlock, int64_t rowBlock,
                      float *packed) {
  switch (packedSgemmIsa()) {
  case PackedSgemmIsa::Avx512:
    avx512::packA(transA, m, k, a, lda, kBlock, rowBlock, packed);
    return;
  case PackedSgemmIsa::Avx2:
    avx2::packA(transA, m, k, a, lda, kBlock, rowBlock, packed);
    return;
  case PackedSgemmIsa::None:
    break;
  }
  assert(false && "packedSgemmPackA with remat's kernels off");
}

bool packedSgemmAvailable() { return packedSgemmIsa() != PackedSgemmIsa::None; }

void packedSgemmOn(PackedSgemmIsa isa, bool transA, bool transB, int64_t m,
                   int64_t n, int64_t k, float alpha, const float *a,
                   int64_t lda, const float *b, int64_t ldb, float beta,
                   float *c, int64_t ldc, const float *packedA,
                   const float *bias) {
  assert(packedSgemmSupports(isa) && "this CPU cannot run that kernel");
  assert((!packedA || isa == packedSgemmIsa()) &&
         "op(A) is packed for packedSgemmIsa()'s kernel");
  if (isa == PackedSgemmIsa::None)
    return;
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
  if (isa == PackedSgemmIsa::Avx512)
    avx512::sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                  packedA, bias);
  else
    avx2::sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                packedA, bias);
}

void packedSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc,
                 const float *packedA, const float *bias) {
  assert(packedSgemmAvailable() && "packedSgemm needs AVX2 + FMA or AVX-512F");
  packedSgemmOn(packedSgemmIsa(), transA, transB, m, n, k, alpha, a, lda, b,
                ldb, beta, c, ldc, packedA, bias);
}

#else // !REMAT_PACKED_SGEMM

PackedSgemmIsa packedSgemmIsa() { return PackedSgemmIsa::None; }

bool packedSgemmSupports(PackedSgemmIsa) { return false; }

const char *packedSgemmName(PackedSgemmIsa) { return "none"; }

int64_t packedSgemmPanelWidth() { return 0; }

bool packedSgemmAvailable() { return false; }

int64_t packedSgemmPackedASize(int64_t, int64_t) { return 0; }

PackedABlocks packedSgemmPackedABlocks(int64_t, int64_t) { return {}; }

float *packedSgemmABuffer(int64_t) {
  assert(false && "packedSgemmABuffer needs x86-64");
  return nullptr;
}

void packedSgemmPackA(bool, int64_t, int64_t, const float *, int64_t, int64_t,
                      int64_t, float *) {
  assert(false && "packedSgemmPackA needs x86-64");
}

void packedSgemmOn(PackedSgemmIsa, bool, bool, int64_t, int64_t, int64_t, float,
                   const float *, int64_t, const float *, int64_t, float,
                   float *, int64_t, const float *, const float *) {
  assert(false && "packedSgemmOn needs x86-64");
}

void packedSgemm(bool, bool, int64_t, int64_t, int64_t, float, const float *,
                 int64_t, const float *, int64_t, float, float *, int64_t,
                 const float *, const float *) {
  assert(false && "packedSgemm needs x86-64");
}

#endif // REMAT_PACKED_SGEMM

} // namespace remat::runtime::cpu
