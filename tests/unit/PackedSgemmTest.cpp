//===- tests/unit/PackedSgemmTest.cpp - remat's own sgemm -----------------===//
//
// runtime/cpu/PackedSgemm.h against a double-precision product, and the
// property the runtime rests on (Note [Packed sgemm]): an element's bits
// depend on K alone, not on where it sits in the call, the transposes, the
// leading dims or the kernel. The cases run the kernel the CPU picks
// (unit.avx2_path runs them on the AVX2 kernel on an AVX-512 CPU); on a CPU
// with neither kernel they say they are skipped (the runtime runs OpenBLAS
// there).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/PackedSgemm.h"

#include "runtime/cpu/GemmProvider.h"
#include "ir/Support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ios>
#include <memory>
#include <random>
#include <string>
#include <vector>

using remat::runtime::cpu::packedSgemm;
using remat::runtime::cpu::packedSgemmAvailable;

namespace {

/// A row-major matrix with a padded leading dim.
struct Matrix {
  int64_t rows, cols, ld;
  std::vector<float> data;

  Matrix(int64_t rows, int64_t cols, int64_t pad = 0)
      : rows(rows), cols(cols), ld(cols + pad), data(rows * (cols + pad)) {}
  float &at(int64_t r, int64_t c) { return data[r * ld + c]; }
  float at(int64_t r, int64_t c) const { return data[r * ld + c]; }

  Matrix transposed(int64_t pad = 0) const {
    Matrix t(cols, rows, pad);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        t.at(c, r) = at(r, c);
    return t;
  }
};

Matrix randomMatrix(int64_t rows, int64_t cols, std::mt19937 &rng,
                    int64_t pad = 0) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  Matrix m(rows, cols, pad);
  for (float &x : m.data)
    x = value(rng);
  return m;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Checks packedSgemm on one case against a double-precision loop, and
/// that C's padding between rows is left alone.
void checkAgainstDouble(int64_t m, int64_t n, int64_t k, bool transA,
                        bool transB, float alpha, float beta,
                        std::mt19937 &rng) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(transA);
  CAPTURE(transB);
  CAPTURE(alpha);
  CAPTURE(beta);
  auto pad = [&] { return std::uniform_int_distribution<int64_t>(0, 2)(rng); };
  Matrix a = randomMatrix(transA ? k : m, transA ? m : k, rng, pad());
  Matrix b = randomMatrix(transB ? n : k, transB ? k : n, rng, pad());
  Matrix c = randomMatrix(m, n, rng, 1 + pad());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = n; j < c.ld; ++j)
      c.at(i, j) = 42.0f; // padding: must stay
  if (beta == 0.0f)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c.at(i, j) = NAN; // beta 0 must not read C
  Matrix expected = c;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += double(transA ? a.at(p, i) : a.at(i, p)) *
               double(transB ? b.at(j, p) : b.at(p, j));
      double old = beta == 0.0f ? 0.0 : double(beta) * c.at(i, j);
      expected.at(i, j) = float(alpha * sum + old);
    }
  packedSgemm(transA, transB, m, n, k, alpha, a.data.data(), a.ld,
              b.data.data(), b.ld, beta, c.data.data(), c.ld);
  int wrong = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < c.ld; ++j) {
      float got = c.at(i, j), want = expected.at(i, j);
      bool ok = j < n ? std::fabs(got - want) <= 1e-5f * float(k) + 1e-5f
                      : got == 42.0f;
      if (!ok && ++wrong <= 3)
        FAIL_CHECK("(" << i << ", " << j << "): " << got << ", expected "
                       << want);
    }
  CHECK(wrong == 0);
}

/// op(A) (rows x k, leading dim lda) packed ahead for packedSgemm's
/// packedA: block by block in reverse order, as threads may, into a buffer
/// of NaNs, so that a block left unpacked shows.
using Packed = std::unique_ptr<float[], void (*)(void *)>;
Packed packAllBlocks(const float *opA, int64_t lda, bool transA, int64_t rows,
                     int64_t k) {
  using remat::runtime::cpu::packedSgemmPackA;
  using remat::runtime::cpu::packedSgemmPackedABlocks;
  using remat::runtime::cpu::packedSgemmPackedASize;
  int64_t floats = packedSgemmPackedASize(rows, k);
  Packed packed(static_cast<float *>(std::aligned_alloc(
                    64, (sizeof(float) * floats + 63) / 64 * 64)),
                std::free);
  std::fill(packed.get(), packed.get() + floats, NAN);
  auto blocks = packedSgemmPackedABlocks(rows, k);
  for (int64_t kb = blocks.kBlocks - 1; kb >= 0; --kb)
    for (int64_t rb = blocks.rowBlocks - 1; rb >= 0; --rb)
      packedSgemmPackA(transA, rows, k, opA, lda, kb, rb, packed.get());
  return packed;
}

} // namespace

TEST_CASE("packedSgemm matches a double-precision product") {
  if (!packedSgemmAvailable()) {
    MESSAGE("skipped: remat's kernels are off here (no AVX2 + FMA, or "
            "REMAT_GEMM=openblas)");
    return;
  }
  std::mt19937 rng(11);
  auto dim = [&](int64_t hi) {
    return std::uniform_int_distribution<int64_t>(1, hi)(rng);
  };
  // Small random shapes cross the panels (8 x 32 or 6 x 16) and the
  // 256-deep K blocks,
  for (int trial = 0; trial < 40; ++trial) {
    int64_t m = dim(40), n = dim(70), k = dim(trial % 3 ? 40 : 600);
    float alpha = trial % 5 ? 1.0f : 0.5f;
    float beta = trial % 4 == 0 ? 0.0f : trial % 4 == 1 ? 1.0f : -2.0f;
    checkAgainstDouble(m, n, k, trial & 1, trial & 2, alpha, beta, rng);
  }
  // and these the 256-row and 1024-column blocks, with every transpose.
  for (int trans = 0; trans < 4; ++trans) {
    checkAgainstDouble(301, 1056, 300, trans & 1, trans & 2, 1.0f, -2.0f, rng);
    checkAgainstDouble(257, 40, 600, trans & 1, trans & 2, 0.5f, 0.0f, rng);
  }
}

TEST_CASE("packedSgemm with k, alpha, m or n zero") {
  if (!packedSgemmAvailable()) {
    MESSAGE("skipped: remat's kernels are off here (no AVX2 + FMA, or "
            "REMAT_GEMM=openblas)");
    return;
  }
  std::mt19937 rng(3);
  Matrix a = randomMatrix(5, 7, rng), b = randomMatrix(7, 9, rng);
  a.at(1, 2) = INFINITY;
  b.at(3, 4) = NAN;
  Matrix c(5, 9);
  // k 0, beta 0: zeros, C not read.
  for (float &x : c.data)
    x = NAN;
  packedSgemm(false, false, 5, 9, 0, 1.0f, a.data.data(), a.ld, b.data.data(),
              b.ld, 0.0f, c.data.data(), c.ld);
  for (float x : c.data)
    CHECK(sameBits(x, 0.0f));
  // alpha 0: beta * C, A and B (with Inf and NaN) not read.
  for (float &x : c.data)
    x = 3.0f;
  packedSgemm(false, false, 5, 9, 7, 0.0f, a.data.data(), a.ld, b.data.data(),
              b.ld, -2.0f, c.data.data(), c.ld);
  for (float x : c.data)
    CHECK(x == -6.0f);
  // m or n 0: nothing written.
  packedSgemm(false, false, 0, 9, 7, 1.0f, a.data.data(), a.ld, b.data.data(),
              b.ld, 0.0f, c.data.data(), c.ld);
  packedSgemm(false, false, 5, 0, 7, 1.0f, a.data.data(), a.ld, b.data.data(),
              b.ld, 0.0f, c.data.data(), c.ld);
  for (float x : c.data)
    CHECK(x == -6.0f);
}

TEST_CASE("packedSgemm's bits depend on K alone") {
  if (!packedSgemmAvailable()) {
    MESSAGE("skipped: remat's kernels are off here (no AVX2 + FMA, or "
            "REMAT_GEMM=openblas)");
    return;
  }
  std::mt19937 rng(5);
  // 301 x 1100 crosses the panels' edges (8 x 32 or 6 x 16: a last panel
  // of 5 or of 1 row) and the row blocks (256 or 264) and 1024-column
  // blocks; K = 600 makes three K blocks. C starts random and
  // beta is -2, so that the first K block's beta * C and the later blocks'
  // additions to C are part of what must match.
  const int64_t m = 301, n = 1100, k = 600;
  const float beta = -2.0f;
  Matrix a = randomMatrix(m, k, rng), b = randomMatrix(k, n, rng);
  const Matrix c0 = randomMatrix(m, n, rng);
  Matrix c = c0;
  packedSgemm(false, false, m, n, k, 1.0f, a.data.data(), a.ld, b.data.data(),
              b.ld, beta, c.data.data(), c.ld);
  auto checkSame = [&](const Matrix &other, bool transposed) {
    int wrong = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float got = transposed ? other.at(j, i) : other.at(i, j);
        if (!sameBits(got, c.at(i, j)) && ++wrong <= 3)
          FAIL_CHECK("(" << i << ", " << j << "): " << std::hexfloat << got
                         << " vs " << c.at(i, j));
      }
    CHECK(wrong == 0);
  };

  SUBCASE("stored transposed, with other leading dims") {
    Matrix aT = a.transposed(3), bT = b.transposed(5);
    for (int variant = 1; variant < 4; ++variant) {
      bool transA = variant & 1, transB = variant & 2;
      CAPTURE(transA);
      CAPTURE(transB);
      const Matrix &opA = transA ? aT : a, &opB = transB ? bT : b;
      Matrix other(m, n, 7);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          other.at(i, j) = c0.at(i, j);
      packedSgemm(transA, transB, m, n, k, 1.0f, opA.data.data(), opA.ld,
                  opB.data.data(), opB.ld, beta, other.data.data(), other.ld);
      checkSame(other, false);
    }
  }

  SUBCASE("the transposed product, C^T = B^T A^T") {
    Matrix aT = a.transposed(), bT = b.transposed();
    Matrix cT = c0.transposed();
    packedSgemm(false, false, n, m, k, 1.0f, bT.data.data(), bT.ld,
                aT.data.data(), aT.ld, beta, cT.data.data(), cT.ld);
    checkSame(cT, true);
  }

  SUBCASE("narrow products, which read A in place") {
    // At most 64 columns: A is not packed (Note [A in place for narrow
    // products]), except the last panel of fewer than kMR rows (and, on
    // the AVX2 kernel, an op(A) stored transposed). All m =
    // 301 rows (two row blocks, an edge panel), every transpose, other
    // leading dims: the bits of the packed product above; and with alpha
    // 0.5 and beta 0 over a C of NaNs, those of the packed product with
    // them. C's padding stays as it was.
    Matrix cHalf(m, n);
    for (float &x : cHalf.data)
      x = NAN;
    packedSgemm(false, false, m, n, k, 0.5f, a.data.data(), a.ld, b.data.data(),
                b.ld, 0.0f, cHalf.data.data(), cHalf.ld);
    Matrix aT = a.transposed(3), bT = b.transposed(5);
    for (int variant = 0; variant < 8; ++variant)
      for (int64_t col0 : {0, 40, 1036})
        for (int64_t cols : {64, 33, 8}) {
          bool transA = variant & 1, transB = variant & 2, half = variant & 4;
          CAPTURE(transA);
          CAPTURE(transB);
          CAPTURE(half);
          CAPTURE(col0);
          CAPTURE(cols);
          const Matrix &opA = transA ? aT : a;
          const float *opB = transB ? &bT.at(col0, 0) : &b.at(0, col0);
          Matrix block(m, cols, 2);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < block.ld; ++j)
              block.at(i, j) = j >= cols ? 42.0f
                               : half    ? NAN
                                         : c0.at(i, col0 + j);
          packedSgemm(transA, transB, m, cols, k, half ? 0.5f : 1.0f,
                      opA.data.data(), opA.ld, opB, transB ? bT.ld : b.ld,
                      half ? 0.0f : beta, block.data.data(), block.ld);
          const Matrix &want = half ? cHalf : c;
          int wrong = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < block.ld; ++j)
              wrong += j < cols
                           ? !sameBits(block.at(i, j), want.at(i, col0 + j))
                           : block.at(i, j) != 42.0f;
          CHECK(wrong == 0);
        }
  }

  SUBCASE("column strips that read one packed A") {
    // Note [op(A) packed once per node]: op(A) is packed block by block
    // (here in reverse order, as threads may), then strips of uneven widths
    // read it, also strips of at most 64 columns, which without it read A
    // in place. Every transpose: the bits of the whole product. The calls
    // get another A (negated) where they would read it: they must not.
    Matrix aT = a.transposed(3), bT = b.transposed(5);
    Matrix negA = a, negAT = aT;
    for (float &x : negA.data)
      x = -x;
    for (float &x : negAT.data)
      x = -x;
    const int64_t widths[] = {64, 96, 33, 512, 8, 200, 187};
    for (int variant = 0; variant < 4; ++variant) {
      bool transA = variant & 1, transB = variant & 2;
      CAPTURE(transA);
      CAPTURE(transB);
      const Matrix &opA = transA ? aT : a, &other = transA ? negAT : negA;
      Packed packed = packAllBlocks(opA.data.data(), opA.ld, transA, m, k);
      Matrix strips = c0;
      int64_t col0 = 0;
      for (int64_t width : widths) {
        const float *opB = transB ? &bT.at(col0, 0) : &b.at(0, col0);
        packedSgemm(transA, transB, m, width, k, 1.0f, other.data.data(),
                    other.ld, opB, transB ? bT.ld : b.ld, beta,
                    &strips.at(0, col0), strips.ld, packed.get());
        col0 += width;
      }
      REQUIRE(col0 == n);
      checkSame(strips, false);
    }

    // A lower row of tiles: 37 rows of op(A) from row 100 (the last panel
    // padded), packed on their own.
    Packed packed = packAllBlocks(&a.at(100, 0), a.ld, false, 37, k);
    Matrix rows = c0;
    packedSgemm(false, false, 37, n, k, 1.0f, &negA.at(100, 0), negA.ld,
                b.data.data(), b.ld, beta, &rows.at(100, 0), rows.ld,
                packed.get());
    int wrong = 0;
    for (int64_t i = 100; i < 137; ++i)
      for (int64_t j = 0; j < n; ++j)
        wrong += !sameBits(rows.at(i, j), c.at(i, j));
    CHECK(wrong == 0);
  }

  SUBCASE("C started from a bias row") {
    // Gemm's bias of [N] goes to the kernel, which starts each block of C
    // from it (beta * bias[j]) instead of reading C: the bits of C filled
    // with the bias first, at every edge and over all three K blocks, with
    // alpha 0, in strips of at most 64 columns (A read in place) and with
    // op(A) packed ahead. C holds NaN, so a read of it would show.
    Matrix bias = randomMatrix(1, n, rng);
    auto check = [&](float alpha, int64_t col0, int64_t width,
                     const float *packedA) {
      Matrix filled(m, width), got(m, width);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < width; ++j) {
          filled.at(i, j) = bias.at(0, col0 + j);
          got.at(i, j) = NAN;
        }
      packedSgemm(false, false, m, width, k, alpha, a.data.data(), a.ld,
                  &b.at(0, col0), b.ld, beta, filled.data.data(), filled.ld);
      packedSgemm(false, false, m, width, k, alpha, a.data.data(), a.ld,
                  &b.at(0, col0), b.ld, beta, got.data.data(), got.ld, packedA,
                  &bias.at(0, col0));
      int wrong = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < width; ++j)
          wrong += !sameBits(got.at(i, j), filled.at(i, j));
      CHECK(wrong == 0);
    };
    for (float alpha : {1.0f, 0.0f}) {
      CAPTURE(alpha);
      check(alpha, 0, n, nullptr);
    }
    for (int64_t width : {64, 33, 8}) {
      CAPTURE(width);
      check(1.0f, 100, width, nullptr);
    }
    Packed packed = packAllBlocks(a.data.data(), a.ld, false, m, k);
    check(1.0f, 0, n, packed.get());
    check(1.0f, 100, 64, packed.get());
  }

  SUBCASE("every block of C computed on its own") {
    // A block's elements sit elsewhere in the kernel's panels (or in an
    // edge copy) than in the whole product.
    for (int64_t row0 : {0, 5, 250, 290})
      for (int64_t col0 : {0, 3, 1010, 1090}) {
        CAPTURE(row0);
        CAPTURE(col0);
        int64_t rows = std::min<int64_t>(m - row0, 13);
        int64_t cols = std::min<int64_t>(n - col0, 37);
        std::vector<float> block(rows * cols);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            block[i * cols + j] = c0.at(row0 + i, col0 + j);
        packedSgemm(false, false, rows, cols, k, 1.0f, &a.at(row0, 0), a.ld,
                    &b.at(0, col0), b.ld, beta, block.data(), cols);
        int wrong = 0;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            wrong += !sameBits(block[i * cols + j], c.at(row0 + i, col0 + j));
        CHECK(wrong == 0);
      }
  }
}

TEST_CASE("remat's AVX2 and AVX-512 kernels give the same bits") {
  using remat::runtime::cpu::PackedSgemmIsa;
  using remat::runtime::cpu::packedSgemmOn;
  using remat::runtime::cpu::packedSgemmSupports;
  if (!packedSgemmSupports(PackedSgemmIsa::Avx512) ||
      !packedSgemmSupports(PackedSgemmIsa::Avx2)) {
    MESSAGE("skipped: this CPU has no AVX-512F, so only one kernel runs");
    return;
  }
  std::mt19937 rng(5);
  auto dim = [&](int64_t hi) {
    return std::uniform_int_distribution<int64_t>(1, hi)(rng);
  };
  // Shapes that cross both kernels' panels (8 x 32 and 6 x 16) and blocks
  // (256 and 264 rows), the K blocks, the narrow products that read A in
  // place, and a bias row.
  auto coin = [&] { return std::uniform_int_distribution<int>(0, 1)(rng); };
  for (int trial = 0; trial < 40; ++trial) {
    // Each choice drawn on its own, so that every combination can come up.
    int64_t m = dim(coin() ? 40 : 600), n = dim(coin() ? 70 : 1100);
    int64_t k = dim(coin() ? 40 : 700);
    bool transA = coin(), transB = coin();
    float alpha = coin() ? 1.0f : 0.5f;
    int betaKind = std::uniform_int_distribution<int>(0, 2)(rng);
    float beta = betaKind == 0 ? 0.0f : betaKind == 1 ? 1.0f : -2.0f;
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(transA);
    CAPTURE(transB);
    CAPTURE(trial);
    Matrix a = randomMatrix(transA ? k : m, transA ? m : k, rng, dim(3) - 1);
    Matrix b = randomMatrix(transB ? n : k, transB ? k : n, rng, dim(2) - 1);
    Matrix c512 = randomMatrix(m, n, rng), c2 = c512;
    Matrix bias = randomMatrix(1, n, rng);
    const float *biasRow = coin() ? bias.data.data() : nullptr;
    packedSgemmOn(PackedSgemmIsa::Avx512, transA, transB, m, n, k, alpha,
                  a.data.data(), a.ld, b.data.data(), b.ld, beta,
                  c512.data.data(), c512.ld, nullptr, biasRow);
    packedSgemmOn(PackedSgemmIsa::Avx2, transA, transB, m, n, k, alpha,
                  a.data.data(), a.ld, b.data.data(), b.ld, beta,
                  c2.data.data(), c2.ld, nullptr, biasRow);
    int differ = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        differ += !sameBits(c512.at(i, j), c2.at(i, j));
    CHECK(differ == 0);
  }
}

TEST_CASE("packedSgemm's kernel follows REMAT_GEMM") {
  using remat::runtime::cpu::PackedSgemmIsa;
  using remat::runtime::cpu::packedSgemmIsa;
  using remat::runtime::cpu::packedSgemmSupports;
  const char *choice = std::getenv("REMAT_GEMM");
  std::string wanted = choice ? choice : "";
  if (wanted == "openblas") {
    CHECK(packedSgemmIsa() == PackedSgemmIsa::None);
  } else if (wanted == "avx2" && packedSgemmSupports(PackedSgemmIsa::Avx2)) {
    // unit.avx2_path: the AVX2 kernel even where AVX-512F would be picked.
    CHECK(packedSgemmIsa() == PackedSgemmIsa::Avx2);
  } else if (packedSgemmSupports(PackedSgemmIsa::Avx512)) {
    CHECK(packedSgemmIsa() == PackedSgemmIsa::Avx512);
  } else if (packedSgemmSupports(PackedSgemmIsa::Avx2)) {
    CHECK(packedSgemmIsa() == PackedSgemmIsa::Avx2);
  } else {
    CHECK(packedSgemmIsa() == PackedSgemmIsa::None);
  }
}

TEST_CASE("the GEMM provider is the program's explicit choice") {
  using namespace remat::runtime::cpu;
  const GemmProvider before = getGemmProvider();
  // The library reads no environment variable: REMAT_GEMM is the tools'.
  const char *old = std::getenv("REMAT_GEMM");
  std::string saved = old ? old : "";
  setenv("REMAT_GEMM", "openblas", 1);
  CHECK(getGemmProvider() == before);
  if (old)
    setenv("REMAT_GEMM", saved.c_str(), 1);
  else
    unsetenv("REMAT_GEMM");

  // The default is the fastest provider the CPU runs.
  GemmProvider fastest = isGemmProviderSupported(GemmProvider::RematAvx512)
                             ? GemmProvider::RematAvx512
                         : isGemmProviderSupported(GemmProvider::RematAvx2)
                             ? GemmProvider::RematAvx2
                             : GemmProvider::OpenBlas;
  CHECK(getDefaultGemmProvider() == fastest);

  for (GemmProvider provider : {GemmProvider::OpenBlas, GemmProvider::RematAvx2,
                                GemmProvider::RematAvx512}) {
    CAPTURE(getGemmProviderName(provider).str());
    auto parsed = parseGemmProvider(getGemmProviderName(provider));
    REQUIRE(bool(parsed));
    CHECK(*parsed == provider);
    llvm::Error err = setGemmProvider(provider);
    if (!isGemmProviderSupported(provider)) {
      std::string name = getGemmProviderName(provider).str();
      CHECK(remat::errorToString(std::move(err)) ==
            "this CPU cannot run the " + name + " GEMM provider (remat's " +
                name + " kernel needs " +
                (provider == GemmProvider::RematAvx512 ? "AVX-512F"
                                                       : "AVX2 and FMA") +
                ")");
      continue;
    }
    REQUIRE(!err);
    CHECK(getGemmProvider() == provider);
    CHECK(packedSgemmIsa() ==
          (provider == GemmProvider::RematAvx512 ? PackedSgemmIsa::Avx512
           : provider == GemmProvider::RematAvx2 ? PackedSgemmIsa::Avx2
                                                 : PackedSgemmIsa::None));
    CHECK(packedSgemmAvailable() == (provider != GemmProvider::OpenBlas));
  }
  auto unknown = parseGemmProvider("blis");
  REQUIRE(!unknown);
  CHECK(remat::errorToString(unknown.takeError()) ==
        "unknown GEMM provider 'blis' (known: openblas, avx2, avx512)");
  REQUIRE(!setGemmProvider(before));
}
