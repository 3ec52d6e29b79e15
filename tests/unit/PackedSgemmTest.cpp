//===- tests/unit/PackedSgemmTest.cpp - remat's AVX-512 sgemm -------------===//
//
// runtime/cpu/PackedSgemm.h against a double-precision product, and the
// property the runtime rests on (Note [Packed AVX-512 sgemm]): an element's
// bits depend on K alone, not on where it sits in the call, the transposes
// or the leading dims. On a CPU without AVX-512F the cases say they are
// skipped (the runtime runs OpenBLAS there).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/PackedSgemm.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ios>
#include <random>
#include <vector>

using remat::runtime::cpu::packedSgemm512;
using remat::runtime::cpu::packedSgemm512Available;

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

/// C = A B with neither operand transposed, C's leading dim n + cPad.
Matrix multiply(const Matrix &a, const Matrix &b, int64_t cPad = 0) {
  Matrix c(a.rows, b.cols, cPad);
  packedSgemm512(false, false, a.rows, b.cols, a.cols, 1.0f, a.data.data(),
                 a.ld, b.data.data(), b.ld, 0.0f, c.data.data(), c.ld);
  return c;
}

} // namespace

TEST_CASE("packedSgemm512 matches a double-precision product") {
  if (!packedSgemm512Available()) {
    MESSAGE("skipped: this CPU has no AVX-512F (or REMAT_GEMM=openblas)");
    return;
  }
  std::mt19937 rng(11);
  auto dim = [&](int64_t hi) {
    return std::uniform_int_distribution<int64_t>(1, hi)(rng);
  };
  // Shapes cross the 8-row and 32-column panels, the 256-deep K blocks and
  // the 256-row and 1024-column blocks.
  for (int trial = 0; trial < 48; ++trial) {
    int64_t m = dim(trial % 6 ? 40 : 300), n = dim(trial % 5 ? 70 : 1100);
    int64_t k = dim(trial % 3 ? 40 : 600);
    bool transA = trial & 1, transB = trial & 2;
    float alpha = trial % 5 ? 1.0f : 0.5f;
    float beta = trial % 4 == 0 ? 0.0f : trial % 4 == 1 ? 1.0f : -2.0f;
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(transA);
    CAPTURE(transB);
    CAPTURE(alpha);
    CAPTURE(beta);
    Matrix a = randomMatrix(transA ? k : m, transA ? m : k, rng, dim(3) - 1);
    Matrix b = randomMatrix(transB ? n : k, transB ? k : n, rng, dim(3) - 1);
    Matrix c = randomMatrix(m, n, rng, dim(3) - 1);
    if (beta == 0.0f)
      for (float &x : c.data)
        x = NAN; // beta 0 must not read C
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
    packedSgemm512(transA, transB, m, n, k, alpha, a.data.data(), a.ld,
                   b.data.data(), b.ld, beta, c.data.data(), c.ld);
    int wrong = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (!(std::fabs(c.at(i, j) - expected.at(i, j)) <=
              1e-5f * float(k) + 1e-5f) &&
            ++wrong <= 3)
          FAIL_CHECK("(" << i << ", " << j << "): " << c.at(i, j)
                         << ", expected " << expected.at(i, j));
    CHECK(wrong == 0);
  }
}

TEST_CASE("packedSgemm512's bits depend on K alone") {
  if (!packedSgemm512Available()) {
    MESSAGE("skipped: this CPU has no AVX-512F (or REMAT_GEMM=openblas)");
    return;
  }
  std::mt19937 rng(5);
  // 77 x 70 crosses the 8 x 32 panels' edges; K = 600 makes three K blocks.
  const int64_t m = 77, n = 70, k = 600;
  Matrix a = randomMatrix(m, k, rng), b = randomMatrix(k, n, rng);
  Matrix c = multiply(a, b);
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
      packedSgemm512(transA, transB, m, n, k, 1.0f, opA.data.data(), opA.ld,
                     opB.data.data(), opB.ld, 0.0f, other.data.data(),
                     other.ld);
      checkSame(other, false);
    }
  }

  SUBCASE("the transposed product, C^T = B^T A^T") {
    Matrix aT = a.transposed(), bT = b.transposed();
    checkSame(multiply(bT, aT), true);
  }

  SUBCASE("every block of C computed on its own") {
    // A block's elements sit elsewhere in the kernel's panels (or in an
    // edge copy) than in the whole product.
    for (int64_t row0 : {0, 5, 40})
      for (int64_t col0 : {0, 3, 33}) {
        CAPTURE(row0);
        CAPTURE(col0);
        int64_t rows = std::min<int64_t>(m - row0, 13);
        int64_t cols = std::min<int64_t>(n - col0, 37);
        std::vector<float> block(rows * cols);
        packedSgemm512(false, false, rows, cols, k, 1.0f, &a.at(row0, 0), a.ld,
                       &b.at(0, col0), b.ld, 0.0f, block.data(), cols);
        int wrong = 0;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            wrong += !sameBits(block[i * cols + j], c.at(row0 + i, col0 + j));
        CHECK(wrong == 0);
      }
  }

  SUBCASE("beta 1 adds the product to C, K block by K block") {
    // C = 0 + AB with beta 1 takes the same path per element as beta 0.
    Matrix other(m, n);
    packedSgemm512(false, false, m, n, k, 1.0f, a.data.data(), a.ld,
                   b.data.data(), b.ld, 1.0f, other.data.data(), other.ld);
    checkSame(other, false);
  }
}
