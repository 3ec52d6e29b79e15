//===- tests/unit/VectorMathTest.cpp - remat's f32 exp and erf ----------===//
//
// runtime/MathF32.h's expF32 and erfF32 against double precision (accuracy
// and edge cases), and runtime/cpu/VectorMath.h's array forms against the
// scalar functions bit for bit: the CPU kernels use the arrays, the CUDA
// bodies the scalar functions, so any difference here is a CPU/GPU one.
// Dropout's vectorised stream likewise.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/VectorMath.h"
#include "runtime/DropoutMask.h"
#include "runtime/MathF32.h"
#include "runtime/cuda/KernelBodies.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace remat::runtime;

namespace {

uint32_t bitsOf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float floatOf(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

/// |got - want| in units of the last place of want rounded to f32.
double ulpError(float got, double want) {
  float wantF = static_cast<float>(want);
  double ulp = static_cast<double>(std::nextafter(
                   std::fabs(wantF), std::numeric_limits<float>::infinity())) -
               std::fabs(wantF);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

/// Every level of vector math this CPU runs, scalar first: the tests of the
/// arrays run at each.
std::vector<cpu::VectorLevel> availableLevels() {
  std::vector<cpu::VectorLevel> levels;
  for (cpu::VectorLevel level :
       {cpu::VectorLevel::Scalar, cpu::VectorLevel::Avx2,
        cpu::VectorLevel::Avx512})
    if (level <= cpu::vectorMathBestLevel())
      levels.push_back(level);
  MESSAGE("vector math levels tested: "
          << levels.size() << ", best "
          << std::string(cpu::vectorLevelName(cpu::vectorMathBestLevel())));
  return levels;
}

/// Runs \p body at every available level, then restores the best.
template <typename Body> void atEveryLevel(Body body) {
  struct Restore {
    ~Restore() { cpu::setVectorMathLevel(cpu::vectorMathBestLevel()); }
  } restore;
  for (cpu::VectorLevel level : availableLevels()) {
    cpu::setVectorMathLevel(level);
    INFO("vector math: " << std::string(cpu::vectorLevelName(level)));
    body();
  }
}

struct Sweep {
  double worst = 0;
  float worstX = 0;
  int64_t checked = 0;
};

/// The worst error in ulp of \p fn against the double \p ref on every
/// \p stride-th f32 bit pattern of [0, \p high] and of [\p low, -0]
/// (positive and negative bit patterns each grow with |x|).
template <typename F, typename R>
Sweep sweepUlp(F fn, R ref, float high, float low, uint32_t stride) {
  Sweep sweep;
  auto run = [&](float from, float to) {
    for (uint32_t b = bitsOf(from); b <= bitsOf(to); b += stride) {
      float x = floatOf(b);
      double want = ref(static_cast<double>(x));
      double error =
          want == 0 ? std::fabs(double(fn(x))) : ulpError(fn(x), want);
      if (error > sweep.worst) {
        sweep.worst = error;
        sweep.worstX = x;
      }
      ++sweep.checked;
    }
  };
  run(0.0f, high);
  run(-0.0f, low);
  return sweep;
}

} // namespace

TEST_CASE("expF32 is within 1 ulp of exp on normal results") {
  // Every 251st f32 bit pattern from -87 to 88 (exp of both is normal):
  // about 8.9 million inputs, every exponent and residue.
  Sweep sweep =
      sweepUlp([](float x) { return expF32(x); },
               [](double x) { return std::exp(x); }, 88.0f, -87.0f, 251);
  MESSAGE("expF32: " << sweep.checked << " inputs, worst " << sweep.worst
                     << " ulp at x = " << sweep.worstX);
  CHECK(sweep.checked > 8000000);
  CHECK(sweep.worst <= 1.0);
}

TEST_CASE("expF32 at the edges of its range") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(std::isnan(expF32(std::numeric_limits<float>::quiet_NaN())));
  CHECK(expF32(inf) == inf);
  CHECK(expF32(-inf) == 0.0f);
  CHECK(expF32(0.0f) == 1.0f);
  CHECK(expF32(-0.0f) == 1.0f);
  // The largest x with a finite exp, and the next float, which overflows.
  float lastFinite = 88.7228317f;
  CHECK(std::isfinite(expF32(lastFinite)));
  CHECK(ulpError(expF32(lastFinite), std::exp(double(lastFinite))) <= 2.0);
  CHECK(expF32(88.7228394f) == inf);
  CHECK(expF32(1000.0f) == inf);
  // Subnormal results are rounded once: within one subnormal step.
  for (float x : {-88.0f, -95.5f, -100.0f, -103.0f}) {
    double want = std::exp(double(x));
    CHECK(std::fabs(expF32(x) - want) <= 0x1p-149);
    CHECK(expF32(x) > 0.0f);
  }
  CHECK(expF32(-104.0f) == 0.0f);
  CHECK(expF32(-1000.0f) == 0.0f);
}

TEST_CASE("expF32's shortcut and the vector lanes below the normal range") {
  atEveryLevel([&] {
    using namespace mathf32;
    // Every float from below kExpLow to above kExpNormalFrom: 0 below
    // kExpZeroBelow, subnormal up to kExpNormalFrom, normal from there; the
    // shortcut gives the steps' bits; the array (with its lanes computed
    // apart) gives expF32's.
    std::vector<float> x;
    for (uint32_t b = bitsOf(-105.0f); b >= bitsOf(-86.0f); --b)
      x.push_back(floatOf(b));
    REQUIRE(x.size() > 2000000);
    std::vector<float> y(x.size());
    cpu::expF32Array(x.data(), y.data(), int64_t(x.size()));
    int64_t wrong = 0, misplaced = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      float e = expF32(x[i]);
      wrong +=
          bitsOf(e) != bitsOf(expF32Steps(x[i])) || bitsOf(y[i]) != bitsOf(e);
      bool zero = e == 0.0f, normal = e >= std::numeric_limits<float>::min();
      misplaced +=
          zero != (x[i] < kExpZeroBelow) || (x[i] >= kExpNormalFrom && !normal);
    }
    CHECK(wrong == 0);
    CHECK(misplaced == 0);
    CHECK(expF32(kExpZeroBelow) == 0x1p-149f);
    // Lanes of every kind in one vector, at every position.
    const float kinds[] = {-10000.0f, -95.0f, -1.0f,
                           std::numeric_limits<float>::quiet_NaN()};
    for (int first = 0; first < 4; ++first) {
      float lanes[16];
      for (int i = 0; i < 16; ++i)
        lanes[i] = kinds[(first + i * (i + 1) / 2) % 4];
      float out[16];
      cpu::expF32Array(lanes, out, 16);
      for (int i = 0; i < 16; ++i)
        CHECK(bitsOf(out[i]) == bitsOf(expF32Steps(lanes[i])));
    }
  });
}

TEST_CASE("the exp arrays give expF32's bits at every length and offset") {
  atEveryLevel([&] {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> wide(-120.0f, 100.0f);
    std::vector<float> x(1000);
    for (float &v : x)
      v = wide(rng);
    // Edge values inside the vector part and in the tail.
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                              inf,
                              -inf,
                              0.0f,
                              -0.0f,
                              88.7228317f,
                              88.7228394f,
                              -103.0f,
                              -104.0f,
                              1e-30f};
    for (size_t i = 0; i < std::size(specials); ++i) {
      x[3 + i] = specials[i];
      x[995 - i] = specials[i];
    }
    const float shift = 1.25f;
    for (int64_t offset : {0, 1, 5}) {
      for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 100, 994}) {
        std::vector<float> y(n), shifted(n),
            inPlace(x.begin() + offset, x.begin() + offset + n);
        cpu::expF32Array(x.data() + offset, y.data(), n);
        cpu::expF32ShiftedArray(x.data() + offset, shift, shifted.data(), n);
        cpu::expF32Array(inPlace.data(), inPlace.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          float v = x[offset + i];
          INFO("offset " << offset << " n " << n << " i " << i << " x " << v);
          CHECK(bitsOf(y[i]) == bitsOf(expF32(v)));
          CHECK(bitsOf(inPlace[i]) == bitsOf(expF32(v)));
          CHECK(bitsOf(shifted[i]) == bitsOf(expF32(v - shift)));
        }
      }
    }
  });
}

TEST_CASE("expOf is expF32 for f32 and std::exp for f64") {
  CHECK(bitsOf(expOf(0.3f)) == bitsOf(expF32(0.3f)));
  CHECK(expOf(0.3) == std::exp(0.3));
  std::vector<double> x = {-2.0, 0.5, 3.0}, y(3);
  cpu::expShiftedArray(x.data(), 0.5, y.data(), 3);
  for (int i = 0; i < 3; ++i)
    CHECK(y[i] == std::exp(x[i] - 0.5));
}

TEST_CASE("erfF32 is within 1.5 ulp of erf") {
  // Every 97th f32 bit pattern of [-5, 5]: both pieces, the split at 1, the
  // cut at 4 and the tiny inputs.
  Sweep sweep = sweepUlp([](float x) { return erfF32(x); },
                         [](double x) { return std::erf(x); }, 5.0f, -5.0f, 97);
  MESSAGE("erfF32: " << sweep.checked << " inputs, worst " << sweep.worst
                     << " ulp at x = " << sweep.worstX);
  CHECK(sweep.checked > 20000000);
  CHECK(sweep.worst <= 1.5);
}

TEST_CASE("erfF32 at the edges of its range") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(std::isnan(erfF32(std::numeric_limits<float>::quiet_NaN())));
  CHECK(erfF32(inf) == 1.0f);
  CHECK(erfF32(-inf) == -1.0f);
  CHECK(bitsOf(erfF32(0.0f)) == bitsOf(0.0f));
  CHECK(bitsOf(erfF32(-0.0f)) == bitsOf(-0.0f));
  CHECK(erfF32(4.0f) == 1.0f);
  CHECK(erfF32(-30.0f) == -1.0f);
  // Odd: erf(-x) = -erf(x) for every x, both pieces.
  for (float x : {1e-20f, 0.3f, 0.999f, 1.0f, 2.5f, 3.99f})
    CHECK(bitsOf(erfF32(-x)) == bitsOf(-erfF32(x)));
}

TEST_CASE("erf, Gelu and GeluGrad arrays give the scalar bodies' bits") {
  atEveryLevel([&] {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> wide(-6.0f, 6.0f);
    std::vector<float> x(700), dy(700);
    for (float &v : x)
      v = wide(rng);
    for (float &v : dy)
      v = wide(rng);
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                              inf,
                              -inf,
                              0.0f,
                              -0.0f,
                              1.0f,
                              -1.0f,
                              4.0f,
                              -4.0f,
                              1e-30f,
                              40.0f,
                              -40.0f};
    for (size_t i = 0; i < std::size(specials); ++i) {
      x[2 + i] = specials[i];
      x[690 - i] = specials[i];
    }
    using cuda::body::UnaryOp;
    for (int64_t offset : {0, 3}) {
      for (int64_t n : {0, 1, 7, 8, 9, 33, 687}) {
        std::vector<float> erf(n), gelu(n), grad(n);
        const float *xs = x.data() + offset, *gs = dy.data() + offset;
        cpu::erfF32Array(xs, erf.data(), n);
        cpu::geluErfF32Array(xs, gelu.data(), n);
        cpu::geluGradErfF32Array(gs, xs, grad.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          INFO("offset " << offset << " n " << n << " i " << i << " x "
                         << xs[i]);
          CHECK(bitsOf(erf[i]) == bitsOf(erfF32(xs[i])));
          CHECK(bitsOf(gelu[i]) ==
                bitsOf(cuda::body::unary(UnaryOp::GeluErf, xs[i])));
          CHECK(bitsOf(grad[i]) ==
                bitsOf(cuda::body::geluGradErf(gs[i], xs[i])));
        }
      }
    }
  });
}

TEST_CASE("the Dropout array gives the body's values and keeps") {
  atEveryLevel([&] {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> wide(-3.0f, 3.0f);
    std::vector<float> x(300);
    for (float &v : x)
      v = wide(rng);
    x[17] = std::numeric_limits<float>::quiet_NaN();
    x[290] = std::numeric_limits<float>::infinity();
    uint64_t key = dropoutKey(99);
    for (float ratio : {0.0f, 0.1f, 0.5f, 0.999f}) {
      uint32_t threshold = dropoutThreshold(ratio);
      float scale = 1.0f / (1.0f - ratio);
      for (auto range : {std::pair<int64_t, int64_t>{0, 300},
                                {3, 300},
                                {5, 12},
                                {8, 16},
                                {1, 2},
                                {7, 7}}) {
        // Plain locals: clang 14 cannot capture structured bindings in the
        // lambda INFO makes.
        const int64_t begin = range.first, end = range.second;
        std::vector<float> y(300, -1.0f), yNoMask(300, -1.0f);
        std::vector<uint8_t> mask(300, 7);
        cpu::dropoutF32Array(x.data(), y.data(), mask.data(), begin, end, key,
                             threshold, scale);
        cpu::dropoutF32Array(x.data(), yNoMask.data(), nullptr, begin, end, key,
                             threshold, scale);
        int64_t kept = 0;
        for (int64_t i = 0; i < 300; ++i) {
          INFO("ratio " << ratio << " [" << begin << ", " << end << ") i "
                        << i);
          if (i < begin || i >= end) {
            CHECK(y[i] == -1.0f); // outside the range: untouched
            CHECK(mask[i] == 7);
            continue;
          }
          bool keep;
          float want =
              cuda::body::dropout(x[i], key, i, threshold, scale, keep);
          CHECK(bitsOf(y[i]) == bitsOf(want));
          CHECK(bitsOf(yNoMask[i]) == bitsOf(want));
          CHECK(mask[i] == uint8_t(keep));
          kept += keep;
        }
        if (ratio == 0.0f)
          CHECK(kept == end - begin);
      }
    }
  });
}

TEST_CASE("orderFreeMaxF32 finds the fold's max or declines") {
  atEveryLevel([&] {
    auto fold = [](const std::vector<float> &x) {
      float m = x[0];
      for (float v : x)
        m = v > m ? v : m;
      return m;
    };
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> wide(-50.0f, 50.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t n : {1, 7, 15, 16, 17, 40, 512}) {
      std::vector<float> x(n);
      for (float &v : x)
        v = wide(rng);
      float max = 0;
      bool found = cpu::orderFreeMaxF32(x.data(), n, max);
      CHECK(found == cpu::vectorMathUsesAvx2());
      if (found)
        CHECK(bitsOf(max) == bitsOf(fold(x)));
      // A NaN anywhere, in the vector part or the tail: declined.
      for (int64_t at : {int64_t(0), n / 2, n - 1}) {
        std::vector<float> withNaN = x;
        withNaN[at] = nan;
        CHECK_FALSE(cpu::orderFreeMaxF32(withNaN.data(), n, max));
      }
      // A max of zero, whose sign depends on the order: declined.
      std::vector<float> zeros(n, -1.0f);
      zeros[n - 1] = -0.0f;
      zeros[0] = 0.0f;
      CHECK_FALSE(cpu::orderFreeMaxF32(zeros.data(), n, max));
      // All -inf is a max like any other.
      std::vector<float> negInf(n, -inf);
      if (cpu::orderFreeMaxF32(negInf.data(), n, max))
        CHECK(max == -inf);
    }
  });
}

TEST_CASE("the exp lane sum gives the body's LaneSum bits and terms") {
  atEveryLevel([&] {
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> wide(-20.0f, 5.0f);
    std::vector<float> x(300);
    for (float &v : x)
      v = wide(rng);
    const float shift = 2.5f;
    for (int64_t n : {0, 1, 7, 8, 9, 16, 23, 32, 41, 300}) {
      cuda::body::LaneSum<float> want;
      for (int64_t j = 0; j < n; ++j)
        want.add(j, expF32(x[j] - shift));
      std::vector<float> y(n);
      float withTerms = cpu::expShiftedLaneSumF32(x.data(), shift, y.data(), n);
      float alone = cpu::expShiftedLaneSumF32(x.data(), shift, nullptr, n);
      INFO("n " << n);
      CHECK(bitsOf(withTerms) == bitsOf(want.total()));
      CHECK(bitsOf(alone) == bitsOf(want.total()));
      for (int64_t j = 0; j < n; ++j)
        CHECK(bitsOf(y[j]) == bitsOf(expF32(x[j] - shift)));
    }
    // The order is the lanes', not the index order: 1 + 2^-24 seven times
    // is 1 in index order but not when the small terms meet first.
    cuda::body::LaneSum<float> order;
    order.add(0, 1.0f);
    for (int64_t j = 1; j < 16; ++j)
      order.add(j, j == 8 ? 0.0f : 0x1p-24f);
    float sequential = 1.0f;
    for (int64_t j = 1; j < 16; ++j)
      sequential += j == 8 ? 0.0f : 0x1p-24f;
    CHECK(sequential == 1.0f);
    CHECK(order.total() > 1.0f);
  });
}
