//===- runtime/cpu/Linalg.cpp - MatMul and Gemm on the CPU ----------------===//
//
// Note [OpenBLAS threads]
// ~~~~~~~~~~~~~~~~~~~~~~~
// OpenBLAS's own threading changes results: on OpenBLAS 0.3.21 (Debian 12)
// sgemm of 3x5000x300 and of 1000x1x1000 gives different bits with 1, 2 and 4
// OpenBLAS threads (it splits some shapes differently, and small-N shapes go
// through gemv paths that split K). So remat sets OpenBLAS to one thread
// (openblas_set_num_threads(1), once, before the first MatMul/Gemm kernel is
// selected) and parallelizes itself: each product is cut into tiles of at
// most 256 x 1024 output elements (finishPlan), a cut that depends only on
// the shapes, and every tile is one single-threaded cblas_?gemm call
// over the whole K. Which thread runs a tile does not change its bits, so
// results are identical for every thread count (CpuKernelsTest checks 1 vs 4
// threads). (Tiling itself can change bits relative to one untiled call, e.g.
// 7x13x1000 split 3+4 rows; that is fine: the tiling is a fixed function of the
// shapes, so a recomputed MatMul reproduces the original exactly.)
//
// f32 tiles run on the process's GEMM provider (runtime/cpu/GemmProvider.h):
// unless a program chooses otherwise, remat's own kernel on a CPU with
// AVX-512F or AVX2 + FMA (packedSgemm, Note [Packed sgemm] in
// runtime/cpu/PackedSgemm.cpp), on tiles of up to 512 x 1024
// (kMaxPackedTile): it runs the step faster than OpenBLAS on both kinds of
// CPU (docs/benchmarks.md), and an element's bits depend on K alone, so any
// tiling gives the same results. The tools' REMAT_GEMM=openblas chooses
// OpenBLAS (for comparisons; unit.openblas_path runs the kernel tests that
// way). f64 always runs OpenBLAS.
//
// Batched MatMul whose right operand has no batch dims (activations times a
// weight, the common case) folds the batch into M: one product of
// (batch * M) x K by K x N. Otherwise every batch is its own product (tiled
// the same way), with numpy broadcasting of the batch dims.
//
// remat.PermutedMatMul (fold-transpose) is a batched MatMul whose operands
// and result are read and written through their transposes: each matrix
// keeps a unit-stride dim, the batch dims are per-product offsets, and a
// row-major matrix is passed with its stride as leading dim. With OpenBLAS,
// a column-major operand is not passed with BLAS's trans flag, whose kernels
// round differently (OpenBLAS 0.3.21, SkylakeX and Haswell cores): each tile
// gathers it into row-major scratch, and a result with unit-stride rows is
// computed in scratch and scattered. The GEMM calls are then those of the
// MatMul over copied operands (same tiles, same layouts up to the leading
// dim), and so are the bits. remat's own kernel packs any layout with
// the same bits, so there a column-major operand is passed with the trans
// flag, and a column-major result is computed as C^T = op(B)^T op(A)^T
// straight into place: no copies.
//
// Integer MatMul and Gemm (i32, i64) use plain loops with wrapping
// arithmetic, accumulating over k in order.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelImpl.h"
#include "runtime/cpu/PackedSgemm.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace remat::runtime::cpu::detail {

namespace {

/// A product's tile, in output rows x columns.
struct Tile {
  int64_t rows, cols;
};
/// Each tile is one cblas call, which packs its own panels of A and B: the
/// larger the tile, the less packing per flop, and tiles of fewer than 256
/// rows cost most (`remat-bench-gemm --tile` times bert-base's shapes in
/// any tiling). So a tile is at most this large,
constexpr Tile kMaxTile = {256, 1024};
/// remat's own kernel gives the same bits whatever the tiling, so its tiles
/// may take all the rows of a 512-row product: each B block is then packed
/// once, not once per 256 rows (B is mostly a weight, read from memory),
/// which makes the step's Gemm nodes faster than 256-row tiles do.
constexpr Tile kMaxPackedTile = {512, 1024};
/// Either tile is split further (its longer side first, into equal parts) until
/// a MatMul or Gemm has this many tasks for the threads, unless a side would
/// fall under kMinTileSide. The tiling must not follow the thread count
/// (Note [OpenBLAS threads]), so this is a fixed trade: on more than four
/// threads a 512 x 768 product leaves some idle.
constexpr int64_t kMinTasks = 4;
constexpr int64_t kMinTileSide = 64;
/// remat's own kernel splits a product whose op(A), packed, fits
/// kMaxPrepackedAFloats into column strips, not rows, until it has this many
/// tasks: op(A) is packed once for the node, by all threads, and every strip
/// reads it, so the split adds no packing, and the threads finish a node
/// closer together (Note [Tiles that share a packed A] and Note [op(A)
/// packed once per node] in runtime/cpu/PackedSgemm.cpp).
constexpr int64_t kMinStripTasks = 12;
/// The most floats of a node's op(A), packed, for column strips (8 MiB, in
/// a buffer of each thread that runs nodes, kept while it lives, outside
/// the arena); a larger op(A) is packed by each tile, block by block (the
/// MLM head's gradient, K = 30522).
constexpr int64_t kMaxPrepackedAFloats = int64_t(1) << 21;
/// Strips are at least this wide and their widths a multiple of kStripAlign,
/// a multiple of either kernel's panel width (32 columns for AVX-512, 16 for
/// AVX2: packedSgemmPanelWidth), so that no strip but a product's last has
/// an edge panel.
constexpr int64_t kMinStripWidth = 64;
constexpr int64_t kStripAlign = 32;
/// A strip's block of C is at most this many floats (512 KiB, a quarter of
/// the AVX-512 machine's 2 MiB L2, all of the Zen 3's; strips narrower than
/// kMaxPackedTile's 1024 columns where it takes): every K block reads and
/// writes the strip's C again, and the MLM decoder's 512 x 1024 strips (2 MiB
/// of C next to a 1 MiB B block) went to L3 for it; its 256-column strips
/// stay in L2. Of bert-base's other products only the FFN's weight
/// gradients change (384 and 512 columns to 256 and 320).
constexpr int64_t kMaxStripCFloats = 128 * 1024;
/// Tile sides are multiples of this, which the unroll sizes of OpenBLAS's
/// x86 sgemm kernels divide, so only a product's last row and column of
/// tiles run their edge code.
constexpr int64_t kTileAlign = 16;
/// Floating-point operations per thread chunk below which tiles are not
/// worth spreading (only the partition of tiles over threads, never a
/// result, depends on this).
constexpr int64_t kFlopsPerChunk = 2 * 1000 * 1000;

void useSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

/// One matrix product C = alpha * op(A) op(B) + beta * C over row-major
/// storage, as cblas takes it. \p packedA is op(A) packed for remat's own
/// kernel (packedSgemmPackA), or null; so is \p bias, C's first values
/// in every row, which only remat's kernel takes (packedSgemm).
template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha,
          const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
          int64_t ldc, const float *packedA = nullptr,
          const float *bias = nullptr) {
  if constexpr (std::is_same_v<T, float>)
    if (packedSgemmAvailable()) {
      packedSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                  packedA, bias);
      return;
    }
  assert(!bias && "only remat's kernel starts C from a bias row");
  CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a,
                int(lda), b, int(ldb), beta, c, int(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a,
                int(lda), b, int(ldb), beta, c, int(ldc));
}

/// A batch of products with the same M, N, K: C_i = alpha * op(A_i) op(B_i)
/// + beta * C_i, with A_i = a + aOffsets[i], and so on.
struct ProductPlan {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  /// Leading dims of the stored A, B and C.
  int64_t lda = 0, ldb = 0, ldc = 0;
  std::vector<int64_t> aOffsets, bOffsets, cOffsets;
  /// remat.PermutedMatMul: op(A) (op(B)) is stored column-major with
  /// leading dim lda (ldb), and with scatterC C's rows are its unit-stride
  /// dim (ldc is 1, column stride cColStride). For OpenBLAS, whose
  /// transposed kernels round differently from its plain ones, such an
  /// operand is gathered per tile into row-major scratch and such a C
  /// computed in scratch and scattered, so the GEMM gets the layout a MatMul
  /// over copied operands gets, and its bits; remat's own kernel takes
  /// them as they are (runProducts).
  bool gatherA = false, gatherB = false, scatterC = false;
  int64_t cColStride = 1;
  Tile tile = kMaxTile;
  int64_t rowTiles = 0, colTiles = 0;
  /// The tiles of a row share op(A): it is packed once for the node, each
  /// row's at its own place (kMinStripTasks, kMaxPrepackedAFloats).
  bool prepackA = false;

  int64_t numTasks() const {
    return static_cast<int64_t>(aOffsets.size()) * rowTiles * colTiles;
  }
};

/// Cuts \p plan's products of \p dtype into tiles (kMaxTile or
/// kMaxPackedTile, kMinTasks; remat's kernel into column strips when they
/// can share op(A), kMinStripTasks). Only the shapes and the kernel choose,
/// never the thread count: results must not depend on it.
void finishPlan(ProductPlan &plan, DType dtype) {
  const bool packed = dtype == DType::F32 && packedSgemmAvailable();
  const Tile maxTile = packed ? kMaxPackedTile : kMaxTile;
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  auto side = [&](int64_t extent, int64_t tiles) {
    int64_t even = ceilDiv(std::max<int64_t>(extent, 1), tiles);
    return std::min(std::max<int64_t>(extent, 1),
                    ceilDiv(even, kTileAlign) * kTileAlign);
  };
  int64_t products = std::max<int64_t>(1, plan.aOffsets.size());
  int64_t rowTiles = ceilDiv(std::max<int64_t>(plan.m, 1), maxTile.rows);
  int64_t colTiles = ceilDiv(std::max<int64_t>(plan.n, 1), maxTile.cols);
  int64_t stripRows = side(plan.m, rowTiles);
  // Products of at most 64 columns (2 * kStripAlign) are not cut into
  // strips: their A is read in place or packed by the one tile of a row
  // (Note [A in place for narrow products]).
  assert((!packed || kStripAlign % packedSgemmPanelWidth() == 0) &&
         "strips of whole panels");
  if (packed && plan.n > 2 * kStripAlign &&
      products * rowTiles * packedSgemmPackedASize(stripRows, plan.k) <=
          kMaxPrepackedAFloats) {
    // Column strips, which share their row's packed op(A).
    int64_t widest = std::max(
        kMinStripWidth, kMaxStripCFloats / std::max<int64_t>(stripRows, 1) /
                            kStripAlign * kStripAlign);
    colTiles = std::max(colTiles, ceilDiv(plan.n, widest));
    auto strip = [&](int64_t tiles) {
      return std::min(plan.n, ceilDiv(ceilDiv(plan.n, tiles), kStripAlign) *
                                  kStripAlign);
    };
    while (products * rowTiles * colTiles < kMinStripTasks &&
           strip(colTiles + 1) >= kMinStripWidth &&
           ceilDiv(plan.n, strip(colTiles + 1)) > colTiles)
      colTiles = ceilDiv(plan.n, strip(colTiles + 1));
    if (products * rowTiles * colTiles >= kMinTasks) {
      plan.tile = {stripRows, strip(colTiles)};
      plan.rowTiles = ceilDiv(std::max<int64_t>(plan.m, 1), plan.tile.rows);
      plan.colTiles = ceilDiv(plan.n, plan.tile.cols);
      plan.prepackA = plan.colTiles > 1;
      return;
    }
    // Too narrow for kMinTasks strips: rows too, as without sharing.
    colTiles = ceilDiv(std::max<int64_t>(plan.n, 1), maxTile.cols);
  }
  while (products * rowTiles * colTiles < kMinTasks) {
    int64_t rows = side(plan.m, rowTiles), cols = side(plan.n, colTiles);
    if (cols >= rows && cols >= 2 * kMinTileSide)
      ++colTiles;
    else if (rows >= 2 * kMinTileSide)
      ++rowTiles;
    else if (cols >= 2 * kMinTileSide)
      ++colTiles;
    else
      break;
  }
  plan.tile = {side(plan.m, rowTiles), side(plan.n, colTiles)};
  // Rounding the sides up to kTileAlign may leave fewer tiles.
  plan.rowTiles = ceilDiv(std::max<int64_t>(plan.m, 1), plan.tile.rows);
  plan.colTiles = ceilDiv(std::max<int64_t>(plan.n, 1), plan.tile.cols);
}

/// Gemm's C operand broadcast to [M, N]: element (r, j) of the result
/// starts as scale * data[r * rowStride + j * colStride] (wrapping for
/// integers).
template <typename T> struct BiasTile {
  const T *data = nullptr;
  int64_t rowStride = 0, colStride = 0;
  T scale = T(1);

  T scaled(T value) const {
    if constexpr (std::is_integral_v<T>)
      return wrapMul(scale, value);
    else
      return scale * value;
  }

  /// Writes the bias into the rows x cols block of C at (row0, col0).
  void fill(int64_t row0, int64_t rows, int64_t col0, int64_t cols, T *cTile,
            int64_t ldc) const {
    for (int64_t r = 0; r < rows; ++r) {
      const T *source = data + (row0 + r) * rowStride + col0 * colStride;
      T *target = cTile + r * ldc;
      if (colStride == 1)
        for (int64_t j = 0; j < cols; ++j)
          target[j] = scaled(source[j]);
      else
        std::fill(target, target + cols, scaled(source[0]));
    }
  }
};

/// dst[i * dstStride + j] = src[j * srcStride + i] for i < rows, j < cols:
/// a transposing copy, in 16 x 16 blocks so that both sides stay in cache.
template <typename T>
void transposeCopy(const T *src, int64_t srcStride, T *dst, int64_t dstStride,
                   int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 16;
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock)
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
      int64_t i1 = std::min(rows, i0 + kBlock),
              j1 = std::min(cols, j0 + kBlock);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j)
          dst[i * dstStride + j] = src[j * srcStride + i];
    }
}

/// Where row \p row0 of product \p product's op(A) starts, and whether it
/// is stored transposed: row r of op(A) starts at r * lda when stored as
/// is, at column r when stored transposed; a gathered A (element (i, p) at
/// (row0 + i) + p * lda) is BLAS's transposed A.
template <typename T>
std::pair<const T *, bool> tileA(const ProductPlan &plan, const T *a,
                                 int64_t product, int64_t row0) {
  bool transposed = plan.transA || plan.gatherA;
  return {a + plan.aOffsets[product] + (transposed ? row0 : row0 * plan.lda),
          transposed};
}

/// Packs op(A) of every row of tiles of \p plan for remat's kernel (Note
/// [op(A) packed once per node] in runtime/cpu/PackedSgemm.cpp), the blocks
/// spread over \p parallel's threads, into the calling thread's buffer.
/// \returns the packed rows of tiles, \p rowStride floats apart (product
/// by product, row by row), as the tiles' op(A) as remat's kernel reads it
/// (a gathered A passed transposed).
const float *prepackA(const ProductPlan &plan, const float *a,
                      ParallelFor &parallel, int64_t &rowStride) {
  const Tile tile = plan.tile;
  rowStride = packedSgemmPackedASize(tile.rows, plan.k);
  int64_t rowsOfTiles = int64_t(plan.aOffsets.size()) * plan.rowTiles;
  assert(rowsOfTiles * rowStride <= kMaxPrepackedAFloats &&
         "finishPlan bounds the packed op(A)");
  float *packed = packedSgemmABuffer(rowsOfTiles * rowStride);
  // The blocks of the tallest row of tiles; a shorter last row has fewer.
  PackedABlocks blocks = packedSgemmPackedABlocks(tile.rows, plan.k);
  int64_t perRow = blocks.kBlocks * blocks.rowBlocks;
  parallel.run(rowsOfTiles * perRow, 1, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      int64_t rowOfTiles = unit / perRow, block = unit % perRow;
      int64_t product = rowOfTiles / plan.rowTiles;
      int64_t row0 = (rowOfTiles % plan.rowTiles) * tile.rows;
      int64_t rows = std::min(tile.rows, plan.m - row0);
      int64_t kBlock = block / blocks.rowBlocks;
      int64_t rowBlock = block % blocks.rowBlocks;
      if (rowBlock >= packedSgemmPackedABlocks(rows, plan.k).rowBlocks)
        continue;
      auto [aTile, transA] = tileA(plan, a, product, row0);
      packedSgemmPackA(transA, rows, plan.k, aTile, plan.lda, kBlock, rowBlock,
                       packed + rowOfTiles * rowStride);
    }
  });
  return packed;
}

/// Runs every tile of \p plan; \p beta applies to the existing C. With
/// \p bias, each tile's block of C starts from the bias (the product then
/// adds to it, \p beta being 1): a bias of one row goes into remat's kernel,
/// which starts C from it; otherwise the tile fills its block of C first,
/// on its thread and in its cache, not in one pass over C before it.
template <typename T>
void runProducts(const ProductPlan &plan, T alpha, const T *a, const T *b,
                 T beta, T *c, ParallelFor &parallel,
                 const BiasTile<T> *bias = nullptr) {
  if (plan.m == 0 || plan.n == 0)
    return;
  int64_t tilesPerProduct = plan.rowTiles * plan.colTiles;
  const Tile tile = plan.tile;
  int64_t flopsPerTask = std::max<int64_t>(1, 2 * std::min(plan.m, tile.rows) *
                                                  std::min(plan.n, tile.cols) *
                                                  std::max<int64_t>(plan.k, 1));
  int64_t grain = std::max<int64_t>(1, kFlopsPerChunk / flopsPerTask);
  // remat's own f32 kernel packs any layout, with the same bits
  // (Note [Packed sgemm]): strided operands and results go to it as
  // they are stored, without the gathers and scatters BLAS needs.
  bool packsStrided = false;
  if constexpr (std::is_same_v<T, float>)
    packsStrided = packedSgemmAvailable() && plan.k > 0;
  // Note [op(A) packed once per node]: every row of tiles' op(A) is packed
  // first, its blocks spread over the threads, then the strips read it.
  // (A result stored column-major runs as C^T = op(B)^T op(A)^T, where
  // op(A) is the kernel's B: packed by each strip.)
  const float *packedA = nullptr;
  int64_t packedARowStride = 0;
  if constexpr (std::is_same_v<T, float>)
    if (plan.prepackA && packsStrided && !plan.scatterC)
      packedA = prepackA(plan, a, parallel, packedARowStride);
  // A bias that is one row (Gemm's C of [N]) goes to remat's kernel, which
  // starts each block of C from it instead of writing C first and reading
  // it back: the same values, scaled as BiasTile::fill scales them.
  bool biasRows = false;
  if constexpr (std::is_same_v<T, float>)
    biasRows = bias && packsStrided && !plan.scatterC && bias->rowStride == 0 &&
               bias->colStride == 1;
  parallel.run(plan.numTasks(), grain, [&](int64_t begin, int64_t end) {
    std::vector<T> aScratch, bScratch, cScratch, biasScratch;
    for (int64_t task = begin; task < end; ++task) {
      int64_t product = task / tilesPerProduct;
      int64_t index = task % tilesPerProduct;
      int64_t row0 = (index / plan.colTiles) * tile.rows;
      int64_t col0 = (index % plan.colTiles) * tile.cols;
      int64_t rows = std::min(tile.rows, plan.m - row0);
      int64_t cols = std::min(tile.cols, plan.n - col0);
      // Column j of op(B) starts at j when stored as is, at row j when
      // stored transposed (tileA, likewise for op(A)).
      auto [aTile, transA] = tileA(plan, a, product, row0);
      const T *bTile =
          b + plan.bOffsets[product] + (plan.transB ? col0 * plan.ldb : col0);
      T *cTile = c + plan.cOffsets[product] + row0 * plan.ldc + col0;
      int64_t lda = plan.lda, ldb = plan.ldb, ldc = plan.ldc;
      bool transB = plan.transB;
      if (plan.gatherA && !packsStrided) {
        // For OpenBLAS a gathered A is copied to row-major scratch.
        aScratch.resize(rows * plan.k);
        transposeCopy(aTile, plan.lda, aScratch.data(), plan.k, rows, plan.k);
        aTile = aScratch.data();
        lda = plan.k;
        transA = false;
      }
      if (plan.gatherB) {
        // Element (p, j) of op(B) is at p + (col0 + j) * ldb: BLAS's
        // transposed B, likewise.
        bTile = b + plan.bOffsets[product] + col0 * plan.ldb;
        transB = true;
        if (!packsStrided) {
          bScratch.resize(plan.k * cols);
          transposeCopy(bTile, plan.ldb, bScratch.data(), cols, plan.k, cols);
          bTile = bScratch.data();
          ldb = cols;
          transB = false;
        }
      }
      T *cOut = cTile;
      if (plan.scatterC) {
        assert(!bias && beta == T(0) && "a scattered C is written, not read");
        cOut = c + plan.cOffsets[product] + row0 * plan.ldc +
               col0 * plan.cColStride;
        if (packsStrided) {
          // C stored column-major is C^T = op(B)^T op(A)^T row-major, and
          // the kernel's products commute exactly (fma(a, b, c) =
          // fma(b, a, c)).
          gemm<T>(!transB, !transA, cols, rows, plan.k, alpha, bTile, ldb,
                  aTile, lda, beta, cOut, plan.cColStride);
          continue;
        }
        cScratch.resize(rows * cols);
        cTile = cScratch.data();
        ldc = cols;
      }
      const float *biasRow = nullptr;
      if (biasRows) {
        biasScratch.resize(cols);
        bias->fill(0, 1, col0, cols, biasScratch.data(), cols);
        if constexpr (std::is_same_v<T, float>)
          biasRow = biasScratch.data();
      } else if (bias) {
        bias->fill(row0, rows, col0, cols, cTile, ldc);
      }
      if (plan.k == 0) {
        // BLAS may leave C untouched for k = 0; the product is 0.
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j) {
            T &value = cTile[r * ldc + j];
            value = beta == T(0) ? T(0) : beta * value;
          }
      } else {
        gemm<T>(transA, transB, rows, cols, plan.k, alpha, aTile, lda, bTile,
                ldb, beta, cTile, ldc,
                packedA ? packedA + (task / plan.colTiles) * packedARowStride
                        : nullptr,
                biasRow);
      }
      // Element (r, j) goes to r + j * cColStride: a transposing copy.
      if (plan.scatterC)
        transposeCopy(cTile, ldc, cOut, plan.cColStride, cols, rows);
    }
  });
}

/// Integer version of runProducts, one product per task: C = alpha * AB +
/// beta * C with wrapping arithmetic, summing over k in order.
template <typename T>
void runIntProducts(const ProductPlan &plan, T alpha, const T *a, const T *b,
                    T beta, T *c, ParallelFor &parallel) {
  int64_t m = plan.m, n = plan.n, k = plan.k;
  int64_t count = static_cast<int64_t>(plan.aOffsets.size()) * m;
  parallel.run(count, 16, [&](int64_t begin, int64_t end) {
    std::vector<T> row(n);
    for (int64_t task = begin; task < end; ++task) {
      int64_t product = task / m, i = task % m;
      const T *aBase = a + plan.aOffsets[product];
      const T *bBase = b + plan.bOffsets[product];
      T *cRow = c + plan.cOffsets[product] + i * plan.ldc;
      std::fill(row.begin(), row.end(), T(0));
      for (int64_t p = 0; p < k; ++p) {
        T aValue =
            plan.transA ? aBase[p * plan.lda + i] : aBase[i * plan.lda + p];
        for (int64_t j = 0; j < n; ++j) {
          T bValue =
              plan.transB ? bBase[j * plan.ldb + p] : bBase[p * plan.ldb + j];
          row[j] = wrapAdd(row[j], wrapMul(aValue, bValue));
        }
      }
      for (int64_t j = 0; j < n; ++j)
        cRow[j] = wrapAdd(wrapMul(alpha, row[j]),
                          beta == T(0) ? T(0) : wrapMul(beta, cRow[j]));
    }
  });
}

/// The f32/f64 kernel running \p plan's products: Y = A B.
Kernel productKernel(ProductPlan plan, DType dtype) {
  useSingleThreadedBlas();
  auto shared = std::make_shared<const ProductPlan>(std::move(plan));
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [shared](const KernelContext &ctx) -> Error {
      runProducts<T>(*shared, T(1), ctx.inputs[0].getData<T>(),
                     ctx.inputs[1].getData<T>(), T(0),
                     ctx.outputs[0].getData<T>(), ctx.parallel);
      return Error::success();
    };
  });
}

Error checkBlasDims(const ir::Node &node, ArrayRef<int64_t> values) {
  for (int64_t value : values)
    if (value > std::numeric_limits<int>::max())
      return nodeError(node, "a matrix dim of " + Twine(value) +
                                 " exceeds OpenBLAS's 32-bit int");
  return Error::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// MatMul
//===----------------------------------------------------------------------===//

Expected<Kernel> selectMatMul(const ir::Node &node) {
  const ir::TensorType &aType = node.getOperand(0)->getType();
  const ir::TensorType &bType = node.getOperand(1)->getType();
  DType dtype = aType.getDType();
  if (!isF32OrF64(dtype) && dtype != DType::I64 && dtype != DType::I32)
    return unsupportedDType(node, "operands", dtype, "f32, f64, i64, i32");

  // numpy: a 1-D left operand is a row vector, a 1-D right one a column.
  Dims aDims(aType.getDims().begin(), aType.getDims().end());
  Dims bDims(bType.getDims().begin(), bType.getDims().end());
  if (aDims.size() == 1)
    aDims.insert(aDims.begin(), 1);
  if (bDims.size() == 1)
    bDims.push_back(1);
  ProductPlan plan;
  plan.m = aDims[aDims.size() - 2];
  plan.k = aDims.back();
  plan.n = bDims.back();
  ArrayRef<int64_t> aBatch = ArrayRef<int64_t>(aDims).drop_back(2);
  ArrayRef<int64_t> bBatch = ArrayRef<int64_t>(bDims).drop_back(2);

  plan.lda = plan.k;
  plan.ldb = plan.n;
  plan.ldc = plan.n;
  if (product(bBatch) == 1) {
    // Every batch shares B: fold the batch into M.
    plan.m *= product(aBatch);
    plan.aOffsets = {0};
    plan.bOffsets = {0};
    plan.cOffsets = {0};
  } else {
    size_t rank = std::max(aBatch.size(), bBatch.size());
    Dims batch(rank, 1);
    auto aligned = [&](ArrayRef<int64_t> dims) {
      Dims result(rank, 1);
      std::copy(dims.begin(), dims.end(),
                result.begin() + (rank - dims.size()));
      return result;
    };
    Dims aAligned = aligned(aBatch), bAligned = aligned(bBatch);
    for (size_t d = 0; d < rank; ++d)
      batch[d] = std::max(aAligned[d], bAligned[d]);
    // Matrix strides of each operand's batch dims; 0 where broadcast.
    Dims aStrides = rowMajorStrides(aAligned),
         bStrides = rowMajorStrides(bAligned);
    int64_t count = product(batch);
    Dims index(rank, 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t aMatrix = 0, bMatrix = 0;
      for (size_t d = 0; d < rank; ++d) {
        aMatrix += aAligned[d] == 1 ? 0 : index[d] * aStrides[d];
        bMatrix += bAligned[d] == 1 ? 0 : index[d] * bStrides[d];
      }
      plan.aOffsets.push_back(aMatrix * plan.m * plan.k);
      plan.bOffsets.push_back(bMatrix * plan.k * plan.n);
      plan.cOffsets.push_back(i * plan.m * plan.n);
      for (size_t d = rank; d > 0; --d) {
        if (++index[d - 1] < batch[d - 1])
          break;
        index[d - 1] = 0;
      }
    }
  }
  finishPlan(plan, dtype);

  if (!isF32OrF64(dtype)) {
    auto shared = std::make_shared<const ProductPlan>(std::move(plan));
    if (dtype == DType::I64)
      return Kernel([shared](const KernelContext &ctx) -> Error {
        runIntProducts<int64_t>(*shared, 1, ctx.inputs[0].getData<int64_t>(),
                                ctx.inputs[1].getData<int64_t>(), 0,
                                ctx.outputs[0].getData<int64_t>(),
                                ctx.parallel);
        return Error::success();
      });
    return Kernel([shared](const KernelContext &ctx) -> Error {
      runIntProducts<int32_t>(*shared, 1, ctx.inputs[0].getData<int32_t>(),
                              ctx.inputs[1].getData<int32_t>(), 0,
                              ctx.outputs[0].getData<int32_t>(), ctx.parallel);
      return Error::success();
    });
  }

  if (auto err = checkBlasDims(node, {plan.m, plan.n, plan.k}))
    return std::move(err);
  return productKernel(std::move(plan), dtype);
}

//===----------------------------------------------------------------------===//
// remat.PermutedMatMul
//===----------------------------------------------------------------------===//

namespace {

/// The 'perm_*' attribute \p name of \p node, identity when absent.
Dims permOf(const ir::Node &node, llvm::StringRef name, size_t rank) {
  if (auto perm = node.getAttrs().getInts(name))
    return Dims(perm->begin(), perm->end());
  Dims identity(rank);
  for (size_t d = 0; d < rank; ++d)
    identity[d] = int64_t(d);
  return identity;
}

} // namespace

Expected<Kernel> selectPermutedMatMul(const ir::Node &node) {
  const ir::TensorType &aType = node.getOperand(0)->getType();
  const ir::TensorType &bType = node.getOperand(1)->getType();
  const ir::TensorType &yType = node.getResult(0)->getType();
  DType dtype = aType.getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "operands", dtype, "f32, f64");
  // Shape inference checked the perms: each operand's and the result's
  // unit-stride dim is one of its matrix dims.
  size_t rank = aType.getRank();
  Dims permA = permOf(node, "perm_a", rank),
       permB = permOf(node, "perm_b", rank);
  Dims permY = permOf(node, "perm_y", rank);
  Dims aStrides = rowMajorStrides(aType.getDims());
  Dims bStrides = rowMajorStrides(bType.getDims());
  Dims yStrides = rowMajorStrides(yType.getDims());
  // Stride in Y of each dim of the product [batch..., M, N].
  Dims productStrides(rank);
  for (size_t j = 0; j < rank; ++j)
    productStrides[permY[j]] = yStrides[j];

  ProductPlan plan;
  plan.m = aType.getDim(permA[rank - 2]);
  plan.k = aType.getDim(permA[rank - 1]);
  plan.n = bType.getDim(permB[rank - 1]);
  // A matrix whose columns are the stored unit-stride dim is row-major with
  // its rows' stride as leading dim; otherwise it is column-major, with its
  // columns' stride as leading dim, and is gathered tile by tile.
  plan.gatherA = permA[rank - 1] != int64_t(rank) - 1;
  plan.lda = aStrides[permA[plan.gatherA ? rank - 1 : rank - 2]];
  plan.gatherB = permB[rank - 1] != int64_t(rank) - 1;
  plan.ldb = bStrides[permB[plan.gatherB ? rank - 1 : rank - 2]];
  // A result whose columns are not the unit-stride dim (its rows are:
  // ldc is 1) is scattered.
  plan.ldc = productStrides[rank - 2];
  plan.scatterC = permY[rank - 1] != int64_t(rank) - 1;
  assert((!plan.scatterC || plan.ldc == 1) && "perm_y puts M innermost");
  plan.cColStride = productStrides[rank - 1];
  Dims batch;
  for (size_t d = 0; d + 2 < rank; ++d)
    batch.push_back(aType.getDim(permA[d]));
  int64_t count = product(batch);
  Dims index(batch.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t aOffset = 0, bOffset = 0, cOffset = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      aOffset += index[d] * aStrides[permA[d]];
      bOffset += index[d] * bStrides[permB[d]];
      cOffset += index[d] * productStrides[d];
    }
    plan.aOffsets.push_back(aOffset);
    plan.bOffsets.push_back(bOffset);
    plan.cOffsets.push_back(cOffset);
    for (size_t d = batch.size(); d > 0; --d) {
      if (++index[d - 1] < batch[d - 1])
        break;
      index[d - 1] = 0;
    }
  }
  finishPlan(plan, dtype);
  if (auto err = checkBlasDims(
          node, {plan.m, plan.n, plan.k, plan.lda, plan.ldb, plan.ldc}))
    return std::move(err);
  return productKernel(std::move(plan), dtype);
}

//===----------------------------------------------------------------------===//
// Gemm
//===----------------------------------------------------------------------===//

Expected<Kernel> selectGemm(const ir::Node &node) {
  const ir::TensorType &aType = node.getOperand(0)->getType();
  const ir::TensorType &bType = node.getOperand(1)->getType();
  const ir::TensorType &yType = node.getResult(0)->getType();
  DType dtype = aType.getDType();
  if (!isF32OrF64(dtype) && dtype != DType::I64 && dtype != DType::I32)
    return unsupportedDType(node, "operands", dtype, "f32, f64, i64, i32");
  const ir::AttrList &attrs = node.getAttrs();
  // ONNX: any nonzero transA/transB means transposed.
  bool transA = attrs.getInt("transA").value_or(0) != 0;
  bool transB = attrs.getInt("transB").value_or(0) != 0;
  float alpha = attrs.getFloat("alpha").value_or(1.0f);
  float beta = attrs.getFloat("beta").value_or(1.0f);
  bool hasC = node.getNumOperands() == 3;

  ProductPlan plan;
  plan.transA = transA;
  plan.transB = transB;
  plan.m = yType.getDim(0);
  plan.n = yType.getDim(1);
  plan.k = aType.getDim(transA ? 0 : 1);
  plan.lda = aType.getDim(1);
  plan.ldb = bType.getDim(1);
  plan.ldc = plan.n;
  plan.aOffsets = {0};
  plan.bOffsets = {0};
  plan.cOffsets = {0};
  finishPlan(plan, dtype);

  // Y starts as beta * C broadcast to [M, N] (ONNX computes beta * C even
  // when beta is 0, so inf/NaN in C propagate), and the product adds to it.
  // Strides of C over the result's rows and columns (0 where broadcast).
  int64_t cRowStride = 0, cColStride = 0;
  if (hasC) {
    ArrayRef<int64_t> cDims = node.getOperand(2)->getType().getDims();
    if (!cDims.empty() && cDims.back() != 1)
      cColStride = 1;
    if (cDims.size() == 2 && cDims[0] != 1)
      cRowStride = cDims[1];
  }

  if (!isF32OrF64(dtype)) {
    if (alpha != std::trunc(alpha) || beta != std::trunc(beta))
      return nodeError(node, "integer Gemm needs whole-number 'alpha' and "
                             "'beta', got " +
                                 std::to_string(alpha) + " and " +
                                 std::to_string(beta));
  } else {
    if (auto err =
            checkBlasDims(node, {plan.m, plan.n, plan.k, plan.lda, plan.ldb}))
      return std::move(err);
    useSingleThreadedBlas();
  }
  auto shared = std::make_shared<const ProductPlan>(std::move(plan));
  auto make = [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [shared, hasC, cRowStride, cColStride, alpha,
            beta](const KernelContext &ctx) -> Error {
      T *y = ctx.outputs[0].getData<T>();
      std::optional<BiasTile<T>> bias;
      if (hasC)
        bias = BiasTile<T>{ctx.inputs[2].getData<T>(), cRowStride, cColStride,
                           static_cast<T>(beta)};
      T productBeta = hasC ? T(1) : T(0);
      if constexpr (std::is_integral_v<T>) {
        // Integer products run a row per task: fill all of C first.
        if (bias)
          bias->fill(0, shared->m, 0, shared->n, y, shared->ldc);
        runIntProducts<T>(*shared, static_cast<T>(alpha),
                          ctx.inputs[0].getData<T>(),
                          ctx.inputs[1].getData<T>(), productBeta, y,
                          ctx.parallel);
      } else {
        // The bias goes in tile by tile (runProducts).
        runProducts<T>(*shared, static_cast<T>(alpha),
                       ctx.inputs[0].getData<T>(), ctx.inputs[1].getData<T>(),
                       productBeta, y, ctx.parallel, bias ? &*bias : nullptr);
      }
      return Error::success();
    };
  };
  switch (dtype) {
  case DType::F32:
    return make(float());
  case DType::F64:
    return make(double());
  case DType::I64:
    return make(int64_t());
  default:
    return make(int32_t());
  }
}

} // namespace remat::runtime::cpu::detail
