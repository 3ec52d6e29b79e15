//===- tests/unit/VectorMathTest.cpp - remat's f32 exp ------------------===//
//
// runtime/ExpF32.h's expF32 against a double-precision exp (its accuracy and
// its edge cases), and runtime/cpu/VectorMath.h's array forms against it bit
// for bit: the CPU kernels use the arrays, the CUDA bodies the scalar
// function, so any difference here is a CPU/GPU difference.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/VectorMath.h"
#include "runtime/ExpF32.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
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

} // namespace

TEST_CASE("expF32 is within 1 ulp of exp on normal results") {
  // Every 251st f32 bit pattern from -87 to 88 (exp of both is normal):
  // about 8.5 million inputs, every exponent and residue.
  double worst = 0;
  float worstX = 0;
  int64_t checked = 0;
  auto sweep = [&](float from, float to) {
    for (uint32_t b = bitsOf(from); b <= bitsOf(to); b += 251) {
      float x = floatOf(b);
      double error = ulpError(expF32(x), std::exp(static_cast<double>(x)));
      if (error > worst) {
        worst = error;
        worstX = x;
      }
      ++checked;
    }
  };
  sweep(0.0f, 88.0f);   // positive bit patterns grow with x
  sweep(-0.0f, -87.0f); // negative ones grow with |x|
  MESSAGE("expF32: " << checked << " inputs, worst " << worst
                     << " ulp at x = " << worstX);
  CHECK(checked > 8000000);
  CHECK(worst <= 1.0);
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

TEST_CASE("the exp arrays give expF32's bits at every length and offset") {
  MESSAGE("vector math runs " << std::string(
              cpu::vectorMathUsesAvx2() ? "eight AVX2 lanes" : "scalar"));
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
}

TEST_CASE("expOf is expF32 for f32 and std::exp for f64") {
  CHECK(bitsOf(expOf(0.3f)) == bitsOf(expF32(0.3f)));
  CHECK(expOf(0.3) == std::exp(0.3));
  std::vector<double> x = {-2.0, 0.5, 3.0}, y(3);
  cpu::expShiftedArray(x.data(), 0.5, y.data(), 3);
  for (int i = 0; i < 3; ++i)
    CHECK(y[i] == std::exp(x[i] - 0.5));
}
