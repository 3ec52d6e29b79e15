//===- runtime/cpu/VectorMath.cpp - Vectorised f32 math for the kernels ---===//
//
// The AVX2 loop is compiled with a target attribute of "avx2" only, not
// "fma": with no FMA instruction available the compiler cannot contract a
// multiply and an add, so every lane rounds as runtime/ExpF32.h's scalar
// code does.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/VectorMath.h"
#include "runtime/ExpF32.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define REMAT_VECTORMATH_X86 1
#endif

namespace remat::runtime::cpu {

namespace {

template <bool Shifted>
void expScalar(const float *x, float shift, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = expF32(Shifted ? x[i] - shift : x[i]);
}

#ifdef REMAT_VECTORMATH_X86
/// Eight lanes of runtime/ExpF32.h's expF32, operation for operation.
template <bool Shifted>
__attribute__((target("avx2"))) void expAvx2(const float *x, float shift,
                                             float *y, int64_t n) {
  using namespace expf32;
  const __m256 low = _mm256_set1_ps(kLow), high = _mm256_set1_ps(kHigh);
  const __m256 log2e = _mm256_set1_ps(kLog2e), round = _mm256_set1_ps(kRound);
  const __m256 ln2Hi = _mm256_set1_ps(kLn2Hi), ln2Lo = _mm256_set1_ps(kLn2Lo);
  const __m256 p0 = _mm256_set1_ps(kP0), p1 = _mm256_set1_ps(kP1),
               p2 = _mm256_set1_ps(kP2), p3 = _mm256_set1_ps(kP3),
               p4 = _mm256_set1_ps(kP4), p5 = _mm256_set1_ps(kP5);
  const __m256 one = _mm256_set1_ps(1.0f), by = _mm256_set1_ps(shift);
  const __m256i bias = _mm256_set1_epi32(127);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if (Shifted)
      v = _mm256_sub_ps(v, by);
    __m256 isNaN = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    // Not NaN, so max/min are the scalar code's two selects.
    __m256 c = _mm256_min_ps(_mm256_max_ps(v, low), high);
    __m256 nf =
        _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(c, log2e), round), round);
    __m256 r = _mm256_sub_ps(c, _mm256_mul_ps(nf, ln2Hi));
    r = _mm256_sub_ps(r, _mm256_mul_ps(nf, ln2Lo));
    __m256 p = p0;
    p = _mm256_add_ps(_mm256_mul_ps(p, r), p1);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), p2);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), p3);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), p4);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), p5);
    p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r),
                      one);
    __m256i k = _mm256_cvttps_epi32(nf); // nf is an integer: exact
    __m256i half = _mm256_srai_epi32(k, 1);
    __m256i rest = _mm256_sub_epi32(k, half);
    __m256 scaleHalf = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    __m256 scaleRest = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
    __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, scaleHalf), scaleRest);
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(result, v, isNaN));
  }
  expScalar<Shifted>(x + i, shift, y + i, n - i);
}
#endif

bool detectAvx2() {
#ifdef REMAT_VECTORMATH_X86
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

template <bool Shifted>
void expArray(const float *x, float shift, float *y, int64_t n) {
#ifdef REMAT_VECTORMATH_X86
  if (vectorMathUsesAvx2())
    return expAvx2<Shifted>(x, shift, y, n);
#endif
  expScalar<Shifted>(x, shift, y, n);
}

} // namespace

bool vectorMathUsesAvx2() {
  static const bool avx2 = detectAvx2();
  return avx2;
}

void expF32Array(const float *x, float *y, int64_t n) {
  expArray<false>(x, 0.0f, y, n);
}

void expF32ShiftedArray(const float *x, float shift, float *y, int64_t n) {
  expArray<true>(x, shift, y, n);
}

} // namespace remat::runtime::cpu
