//===- runtime/cpu/VectorMath.h - Vectorised f32 math -----------*- C++ -*-===//
//
// Array forms of remat's f32 math (runtime/MathF32.h) for the CPU kernels:
// sixteen lanes at a time with AVX-512 or eight with AVX2 when the CPU has
// them (chosen at run time, so the build stays baseline x86-64), the scalar
// function otherwise and for the tail. Each lane performs the scalar function's
// operations in its order, so the results are its bits whichever path runs
// (tests/unit/VectorMathTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CPU_VECTORMATH_H
#define REMAT_RUNTIME_CPU_VECTORMATH_H

#include "runtime/cuda/KernelBodies.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace remat::runtime::cpu {

/// y[i] = expF32(x[i]) for i in [0, n). \p y may be \p x.
void expF32Array(const float *x, float *y, int64_t n);

/// y[i] = expF32(x[i] - shift) for i in [0, n), the subtraction in f32.
/// \p y may be \p x.
void expF32ShiftedArray(const float *x, float shift, float *y, int64_t n);

/// y[i] = erfF32(x[i]). \p y may be \p x.
void erfF32Array(const float *x, float *y, int64_t n);

/// y[i] = Gelu(x[i]), approximate "none": cuda::body::unary(GeluErf)'s
/// bits. \p y may be \p x.
void geluErfF32Array(const float *x, float *y, int64_t n);

/// y[i] = cuda::body::geluGradErf(dy[i], x[i]), its bits. \p y may be
/// \p dy or \p x.
void geluGradErfF32Array(const float *dy, const float *x, float *y, int64_t n);

/// Dropout of elements [begin, end) of \p x into \p y and, when not null,
/// \p mask (bool bytes): cuda::body::dropout's values and keeps, drawn
/// from runtime/DropoutMask.h's stream \p key.
void dropoutF32Array(const float *x, float *y, uint8_t *mask, int64_t begin,
                     int64_t end, uint64_t key, uint32_t threshold,
                     float scale);

/// The largest of x[0..n), n > 0, when no element is NaN and it is not zero:
/// then every order of comparisons finds the same value, so it is what a
/// sequential fold finds. Otherwise (a NaN, or a max of +-0 whose sign the
/// fold's order decides) \returns false and the caller folds in order.
bool orderFreeMaxF32(const float *x, int64_t n, float &max);

/// \returns the cuda::body::LaneSum of expF32(x[i] - shift) over
/// [0, n), writing each term to \p y when not null (\p y may be \p x).
float expShiftedLaneSumF32(const float *x, float shift, float *y, int64_t n);

/// The same for a kernel's element type: the f32 arrays above, std::exp
/// element by element for f64.
template <typename T> inline void expArray(const T *x, T *y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    expF32Array(x, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i)
      y[i] = std::exp(x[i]);
  }
}
template <typename T>
inline void expShiftedArray(const T *x, T shift, T *y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    expF32ShiftedArray(x, shift, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i)
      y[i] = std::exp(x[i] - shift);
  }
}

template <typename T>
inline T expShiftedLaneSum(const T *x, T shift, T *y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return expShiftedLaneSumF32(x, shift, y, n);
  } else {
    cuda::body::LaneSum<T> sum;
    for (int64_t i = 0; i < n; ++i) {
      T e = std::exp(x[i] - shift);
      if (y)
        y[i] = e;
      sum.add(i, e);
    }
    return sum.total();
  }
}

/// The instruction sets the arrays above can run in.
enum class VectorLevel { Scalar, Avx2, Avx512 };

/// The best the CPU has: AVX-512 F (exp, erf, Gelu and GeluGrad sixteen
/// lanes at a time, the rest as AVX2), else AVX2, else scalar.
VectorLevel vectorMathBestLevel();

/// The level the arrays run at: the best unless lowered.
VectorLevel vectorMathLevel();

/// Runs the arrays at \p level, or at the best level if that is lower (for
/// tests and benchmarks that compare the levels; every level gives the same
/// bits). Not for use while kernels run. \returns the level now in use.
VectorLevel setVectorMathLevel(VectorLevel level);

/// "AVX-512 (16 lanes)", "AVX2 (8 lanes)" or "scalar".
const char *vectorLevelName(VectorLevel level);

/// \returns whether the arrays run at AVX2 or above.
bool vectorMathUsesAvx2();

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_VECTORMATH_H
