//===- runtime/MathF32.h - exp and erf in f32, the same bits -*- C++ -*-===//
//
// remat's f32 exp and erf: each one fixed sequence of IEEE-754
// single-precision additions, multiplications and (for erf) an exp, with no
// library call, no FMA and no table. So the scalar functions below, the CPU
// backend's AVX2 loops (runtime/cpu/VectorMath.h) and a CUDA thread
// (runtime/cuda/KernelBodies.h) give the same bits for the same x. Every f32
// exp and erf in remat's kernels is one of these (Exp, Erf, Sigmoid, Gelu,
// GeluGrad, Softmax, LogSoftmax, SoftmaxCrossEntropyLoss and its gradient);
// f64 uses std::exp and std::erf.
//
// exp: Cody and Waite's range reduction with a degree-5 polynomial, the
// coefficients of Moshier's Cephes expf:
//   n = round(x log2 e), r = x - n ln2 (ln2 in two parts, hi exact in n),
//   exp(r) ~ 1 + r + r^2 P(r) on |r| <= ln2 / 2, exp(x) = exp(r) 2^n.
// 2^n is applied as two powers of two, 2^(n >> 1) then 2^(n - (n >> 1)),
// each a normal float, so results that overflow become +inf and results in
// the subnormal range are rounded once. x above 88.72283 gives +inf, x of
// -104 and below gives 0, NaN stays NaN.
//
// erf: two polynomials fitted by tools/math/fit_erf.py (which prints these
// coefficients): erf(x) = x + x P(x^2) for |x| < 1, and
// erf(x) = sign(x) (1 - exp(-x^2) Q(|x| - 2.5)) for 1 <= |x| < 4, where
// Q fits exp(x^2) erfc(x); 1 beyond (erf(4) is 1 in f32).
//
// Accuracy against double precision, by tests/unit/VectorMathTest.cpp:
// exp within 0.95 ulp on 8.9 million f32 spread over [-87, 88]; erf within
// 1.24 ulp on 22 million f32 spread over [-5, 5].
//
// Plain C++17 usable from CUDA device code (REMAT_HOST_DEVICE, ir/Hash.h).
// It must be compiled without FMA contraction (CMakeLists.txt passes
// -ffp-contract=off to the runtime; Kernels.cu builds with --fmad=false).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_MATHF32_H
#define REMAT_RUNTIME_MATHF32_H

#include "ir/Hash.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace remat::runtime::mathf32 {

/// Inputs are clamped to [kExpLow, kExpHigh] first: exp(kExpLow) rounds to 0
/// and exp(kExpHigh) overflows, so clamping changes no result but keeps n in
/// [-150, 129], where both halves of 2^n are normal floats.
inline constexpr float kExpLow = -104.0f;
inline constexpr float kExpHigh = 89.0f;
/// expF32(x) is 0 for every x below kExpZeroBelow, the least float whose
/// exp it does not round to 0 (2^-149, the least subnormal), and a normal
/// float for every x from kExpNormalFrom up; between the two its result is
/// subnormal (tests/unit/VectorMathTest.cpp checks every float in between).
inline constexpr float kExpZeroBelow = -0x1.9fe368p+6f; // -103.972076
inline constexpr float kExpNormalFrom = -87.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
/// 1.5 * 2^23: (t + kExpRound) - kExpRound rounds t (|t| < 2^22) to the nearest
/// integer, ties to even, in two exact-by-construction additions.
inline constexpr float kExpRound = 12582912.0f;
/// ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 9 significant bits, so n * kLn2Hi is
/// exact for |n| < 2^15.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpP0 = 1.9875691500e-4f;
inline constexpr float kExpP1 = 1.3981999507e-3f;
inline constexpr float kExpP2 = 8.3334519073e-3f;
inline constexpr float kExpP3 = 4.1665795894e-2f;
inline constexpr float kExpP4 = 1.6666665459e-1f;
inline constexpr float kExpP5 = 5.0000001201e-1f;

/// erf's split points and its two polynomials (tools/math/fit_erf.py),
/// constant term first.
inline constexpr float kErfSplit = 1.0f;
inline constexpr float kErfCut = 4.0f;
inline constexpr float kErfCenter = 2.5f;
inline constexpr float kErfP0 = 1.283791661e-01f;
inline constexpr float kErfP1 = -3.761263788e-01f;
inline constexpr float kErfP2 = 1.128378287e-01f;
inline constexpr float kErfP3 = -2.686543763e-02f;
inline constexpr float kErfP4 = 5.221053492e-03f;
inline constexpr float kErfP5 = -8.484396385e-04f;
inline constexpr float kErfP6 = 1.126825373e-04f;
inline constexpr float kErfP7 = -9.673590284e-06f;
inline constexpr float kErfQ0 = 2.108063698e-01f;
inline constexpr float kErfQ1 = -7.434733957e-02f;
inline constexpr float kErfQ2 = 2.493800782e-02f;
inline constexpr float kErfQ3 = -8.001679555e-03f;
inline constexpr float kErfQ4 = 2.466997597e-03f;
inline constexpr float kErfQ5 = -7.331884699e-04f;
inline constexpr float kErfQ6 = 2.110511414e-04f;
inline constexpr float kErfQ7 = -5.948642502e-05f;
inline constexpr float kErfQ8 = 1.599714597e-05f;
inline constexpr float kErfQ9 = -3.763825816e-06f;
inline constexpr float kErfQ10 = 1.023505661e-06f;
inline constexpr float kErfQ11 = -4.237685971e-07f;
inline constexpr float kErfQ12 = 9.592292827e-08f;

/// \returns 2^k for an integer k in [-126, 127].
REMAT_HOST_DEVICE inline float powerOfTwo(int32_t k) {
  uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

/// The polynomial with coefficients \p c then \p rest (highest power first)
/// at \p x by Horner's rule: p = c, then p = p * x + r for each r of \p rest
/// in order; each step one rounded multiply and one rounded add.
template <typename... Rest>
REMAT_HOST_DEVICE inline float horner(float x, float c, Rest... rest) {
  float p = c;
  ((p = p * x + rest), ...);
  return p;
}

} // namespace remat::runtime::mathf32

namespace remat::runtime {

/// expF32's steps, without its shortcut for results that round to 0.
REMAT_HOST_DEVICE inline float expF32Steps(float x) {
  using namespace mathf32;
  if (x != x)
    return x;
  x = x < kExpLow ? kExpLow : x;
  x = x > kExpHigh ? kExpHigh : x;
  float n = (x * kLog2e + kExpRound) - kExpRound;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = horner(r, kExpP0, kExpP1, kExpP2, kExpP3, kExpP4, kExpP5);
  p = (p * (r * r) + r) + 1.0f;
  int32_t k = static_cast<int32_t>(n);
  int32_t half = k >> 1; // floor(k / 2): arithmetic shift
  return (p * powerOfTwo(half)) * powerOfTwo(k - half);
}

/// exp(x) in f32, the same bits on every backend (see the file comment).
/// Below kExpZeroBelow the steps round to 0 through subnormal products,
/// which x86 CPUs compute in a slow microcode assist (the FTZ and DAZ
/// modes stay off: they would change results); returning 0 at once gives
/// the same bits (VectorMathTest checks every float down to kExpLow).
REMAT_HOST_DEVICE inline float expF32(float x) {
  return x < mathf32::kExpZeroBelow ? 0.0f : expF32Steps(x);
}

/// erf(x) in f32, the same bits on every backend (see the file comment).
/// Both pieces are computed and one is chosen, as the vector loop does.
REMAT_HOST_DEVICE inline float erfF32(float x) {
  using namespace mathf32;
  if (x != x)
    return x;
  float a = std::fabs(x);
  float t = a * a;
  float p =
      horner(t, kErfP7, kErfP6, kErfP5, kErfP4, kErfP3, kErfP2, kErfP1, kErfP0);
  float small = x + x * p;
  float s = a - kErfCenter;
  float q = horner(s, kErfQ12, kErfQ11, kErfQ10, kErfQ9, kErfQ8, kErfQ7, kErfQ6,
                   kErfQ5, kErfQ4, kErfQ3, kErfQ2, kErfQ1, kErfQ0);
  float large = 1.0f - expF32(-t) * q;
  large = a >= kErfCut ? 1.0f : large;
  large = x < 0.0f ? -large : large;
  return a < kErfSplit ? small : large;
}

/// remat's exp for a kernel's element type: expF32 for f32, std::exp
/// otherwise.
template <typename T> REMAT_HOST_DEVICE inline T expOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return expF32(x);
  else
    return std::exp(x);
}

/// remat's erf for a kernel's element type: erfF32 for f32, std::erf
/// otherwise.
template <typename T> REMAT_HOST_DEVICE inline T erfOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return erfF32(x);
  else
    return std::erf(x);
}

} // namespace remat::runtime

#endif // REMAT_RUNTIME_MATHF32_H
