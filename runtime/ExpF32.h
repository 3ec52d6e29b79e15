//===- runtime/ExpF32.h - exp(x) in f32, the same bits everywhere -*- C++
//-*-===//
//
// remat's f32 exponential: one fixed sequence of IEEE-754 single-precision
// additions and multiplications (no library call, no FMA, no table), so the
// scalar function below, the CPU backend's AVX2 loop
// (runtime/cpu/VectorMath.h) and a CUDA thread (runtime/cuda/KernelBodies.h)
// all give the same bits for the same x. Every f32 exp in remat's kernels
// (Exp, Sigmoid, Softmax, LogSoftmax, SoftmaxCrossEntropyLoss and its
// gradient, GeluGrad) is this one; f64 uses std::exp.
//
// The method is the classic one (Cody and Waite's range reduction with a
// degree-5 polynomial, the coefficients of Moshier's Cephes expf):
//   n = round(x log2 e), r = x - n ln2 (ln2 in two parts, hi exact in n),
//   exp(r) ~ 1 + r + r^2 P(r) on |r| <= ln2 / 2, exp(x) = exp(r) 2^n.
// 2^n is applied as two powers of two, 2^(n >> 1) then 2^(n - (n >> 1)),
// each a normal float, so results that overflow become +inf and results in
// the subnormal range are rounded once. Against a double-precision exp on
// 8.9 million f32 spread over [-87, 88] (tests/unit/VectorMathTest.cpp) the
// worst error is 0.95 ulp; x above 88.72283 gives +inf, x of -104 and below
// gives 0, NaN stays NaN.
//
// Plain C++17 usable from CUDA device code (REMAT_HOST_DEVICE, ir/Hash.h).
// It must be compiled without FMA contraction (CMakeLists.txt passes
// -ffp-contract=off to the runtime; Kernels.cu builds with --fmad=false).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_EXPF32_H
#define REMAT_RUNTIME_EXPF32_H

#include "ir/Hash.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace remat::runtime::expf32 {

/// Inputs are clamped to [kLow, kHigh] first: exp(kLow) rounds to 0 and
/// exp(kHigh) overflows, so clamping changes no result but keeps n in
/// [-150, 129], where both halves of 2^n are normal floats.
inline constexpr float kLow = -104.0f;
inline constexpr float kHigh = 89.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
/// 1.5 * 2^23: (t + kRound) - kRound rounds t (|t| < 2^22) to the nearest
/// integer, ties to even, in two exact-by-construction additions.
inline constexpr float kRound = 12582912.0f;
/// ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 9 significant bits, so n * kLn2Hi is
/// exact for |n| < 2^15.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500e-4f;
inline constexpr float kP1 = 1.3981999507e-3f;
inline constexpr float kP2 = 8.3334519073e-3f;
inline constexpr float kP3 = 4.1665795894e-2f;
inline constexpr float kP4 = 1.6666665459e-1f;
inline constexpr float kP5 = 5.0000001201e-1f;

/// \returns 2^k for an integer k in [-126, 127].
REMAT_HOST_DEVICE inline float powerOfTwo(int32_t k) {
  uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

} // namespace remat::runtime::expf32

namespace remat::runtime {

/// exp(x) in f32, the same bits on every backend (see the file comment).
REMAT_HOST_DEVICE inline float expF32(float x) {
  using namespace expf32;
  if (x != x)
    return x;
  x = x < kLow ? kLow : x;
  x = x > kHigh ? kHigh : x;
  float n = (x * kLog2e + kRound) - kRound;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = (p * (r * r) + r) + 1.0f;
  int32_t k = static_cast<int32_t>(n);
  int32_t half = k >> 1; // floor(k / 2): arithmetic shift
  return (p * powerOfTwo(half)) * powerOfTwo(k - half);
}

/// remat's exp for a kernel's element type: expF32 for f32, std::exp
/// otherwise.
template <typename T> REMAT_HOST_DEVICE inline T expOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return expF32(x);
  else
    return std::exp(x);
}

} // namespace remat::runtime

#endif // REMAT_RUNTIME_EXPF32_H
