//===- runtime/cpu/VectorMath.cpp - Vectorised f32 math for the kernels ---===//
//
// The AVX2 loops are compiled with a target attribute of "avx2" only, not
// "fma": with no FMA instruction available the compiler cannot contract a
// multiply and an add, so every lane rounds as runtime/MathF32.h's scalar
// code and the CUDA bodies (runtime/cuda/KernelBodies.h) do. The scalar
// tails call those functions themselves.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/VectorMath.h"
#include "runtime/MathF32.h"
#include "runtime/cuda/KernelBodies.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define REMAT_VECTORMATH_X86 1
#endif

namespace remat::runtime::cpu {

namespace {

using cuda::body::UnaryOp;

/// Adds the terms expF32(x[i] - shift) of [begin, n) to \p sum, writing
/// them to \p y when not null.
void addExpTerms(const float *x, float shift, float *y, int64_t begin,
                 int64_t n, cuda::body::LaneSum<float> &sum) {
  for (int64_t i = begin; i < n; ++i) {
    float e = expF32(x[i] - shift);
    if (y)
      y[i] = e;
    sum.add(i, e);
  }
}

template <bool Shifted>
void expScalar(const float *x, float shift, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = expF32(Shifted ? x[i] - shift : x[i]);
}

#ifdef REMAT_VECTORMATH_X86
#define REMAT_AVX2 __attribute__((target("avx2"), always_inline)) inline

REMAT_AVX2 __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
REMAT_AVX2 __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
REMAT_AVX2 __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
REMAT_AVX2 __m256 splat(float x) { return _mm256_set1_ps(x); }
/// a * x + c, two roundings.
REMAT_AVX2 __m256 step(__m256 a, __m256 x, float c) {
  return add(mul(a, x), splat(c));
}
/// Lanes of \p whenTrue where \p mask is set, else of \p whenFalse.
REMAT_AVX2 __m256 select(__m256 mask, __m256 whenTrue, __m256 whenFalse) {
  return _mm256_blendv_ps(whenFalse, whenTrue, mask);
}

/// Eight lanes of runtime/MathF32.h's expF32Steps, operation for
/// operation.
REMAT_AVX2 __m256 exp8Steps(__m256 v) {
  using namespace mathf32;
  __m256 isNaN = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  // Not NaN, so max/min are the scalar code's two selects.
  __m256 c = _mm256_min_ps(_mm256_max_ps(v, splat(kExpLow)), splat(kExpHigh));
  __m256 nf =
      sub(add(mul(c, splat(kLog2e)), splat(kExpRound)), splat(kExpRound));
  __m256 r = sub(c, mul(nf, splat(kLn2Hi)));
  r = sub(r, mul(nf, splat(kLn2Lo)));
  __m256 p = splat(kExpP0);
  p = step(p, r, kExpP1);
  p = step(p, r, kExpP2);
  p = step(p, r, kExpP3);
  p = step(p, r, kExpP4);
  p = step(p, r, kExpP5);
  p = add(add(mul(p, mul(r, r)), r), splat(1.0f));
  __m256i k = _mm256_cvttps_epi32(nf); // nf is an integer: exact
  __m256i half = _mm256_srai_epi32(k, 1);
  __m256i rest = _mm256_sub_epi32(k, half);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 scaleHalf =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  __m256 scaleRest =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
  return select(isNaN, v, mul(mul(p, scaleHalf), scaleRest));
}

/// Eight lanes of expF32. Lanes below kExpNormalFrom, whose results are
/// subnormal or 0, would run exp8Steps's multiplications through the CPU's
/// slow subnormal assist (on an AVX-512 Xeon, attention scores masked by
/// -10000 made Softmax several times slower), so those lanes are computed
/// apart: 0 below kExpZeroBelow, as expF32 returns, and the rare ones in
/// between by expF32 itself.
REMAT_AVX2 __m256 exp8(__m256 v) {
  using namespace mathf32;
  __m256 low = _mm256_cmp_ps(v, splat(kExpNormalFrom), _CMP_LT_OQ);
  int lowLanes = _mm256_movemask_ps(low);
  if (lowLanes == 0)
    return exp8Steps(v);
  __m256 result = select(low, _mm256_setzero_ps(),
                         exp8Steps(select(low, splat(kExpNormalFrom), v)));
  int zeroLanes =
      _mm256_movemask_ps(_mm256_cmp_ps(v, splat(kExpZeroBelow), _CMP_LT_OQ));
  if (zeroLanes == lowLanes)
    return result;
  alignas(32) float in[8], out[8];
  _mm256_store_ps(in, v);
  _mm256_store_ps(out, result);
  for (int lane = 0; lane < 8; ++lane)
    if ((lowLanes & ~zeroLanes) >> lane & 1)
      out[lane] = expF32(in[lane]);
  return _mm256_load_ps(out);
}

/// Eight lanes of erfF32.
REMAT_AVX2 __m256 erf8(__m256 x) {
  using namespace mathf32;
  __m256 isNaN = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 signBit = splat(-0.0f);
  __m256 a = _mm256_andnot_ps(signBit, x);
  __m256 t = mul(a, a);
  __m256 p = splat(kErfP7);
  p = step(p, t, kErfP6);
  p = step(p, t, kErfP5);
  p = step(p, t, kErfP4);
  p = step(p, t, kErfP3);
  p = step(p, t, kErfP2);
  p = step(p, t, kErfP1);
  p = step(p, t, kErfP0);
  __m256 small = add(x, mul(x, p));
  __m256 s = sub(a, splat(kErfCenter));
  __m256 q = splat(kErfQ12);
  q = step(q, s, kErfQ11);
  q = step(q, s, kErfQ10);
  q = step(q, s, kErfQ9);
  q = step(q, s, kErfQ8);
  q = step(q, s, kErfQ7);
  q = step(q, s, kErfQ6);
  q = step(q, s, kErfQ5);
  q = step(q, s, kErfQ4);
  q = step(q, s, kErfQ3);
  q = step(q, s, kErfQ2);
  q = step(q, s, kErfQ1);
  q = step(q, s, kErfQ0);
  __m256 large = sub(splat(1.0f), mul(exp8(_mm256_xor_ps(t, signBit)), q));
  large =
      select(_mm256_cmp_ps(a, splat(kErfCut), _CMP_GE_OQ), splat(1.0f), large);
  large = select(_mm256_cmp_ps(x, splat(0.0f), _CMP_LT_OQ),
                 _mm256_xor_ps(large, signBit), large);
  __m256 result =
      select(_mm256_cmp_ps(a, splat(kErfSplit), _CMP_LT_OQ), small, large);
  return select(isNaN, x, result);
}

/// The constants of the scalar bodies, as they compute them.
struct GeluConstants {
  float sqrtHalfUnary = static_cast<float>(0.70710678118654752440);
  float sqrtHalfGrad = static_cast<float>(M_SQRT1_2);
  float invSqrtTwoPi = static_cast<float>(1 / std::sqrt(2 * M_PI));
};

template <bool Shifted>
__attribute__((target("avx2"))) void expAvx2(const float *x, float shift,
                                             float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if (Shifted)
      v = sub(v, splat(shift));
    _mm256_storeu_ps(y + i, exp8(v));
  }
  expScalar<Shifted>(x + i, shift, y + i, n - i);
}

__attribute__((target("avx2"))) float
expShiftedLaneSumAvx2(const float *x, float shift, float *y, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp8(sub(_mm256_loadu_ps(x + i), splat(shift)));
    if (y)
      _mm256_storeu_ps(y + i, e);
    acc = add(acc, e);
  }
  // Lane k holds the terms j = k (mod 8) so far, summed in order.
  cuda::body::LaneSum<float> sum;
  _mm256_storeu_ps(sum.lanes, acc);
  addExpTerms(x, shift, y, i, n, sum);
  return sum.total();
}

__attribute__((target("avx2"))) void erfAvx2(const float *x, float *y,
                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, erf8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i)
    y[i] = erfF32(x[i]);
}

/// cuda::body::unary(GeluErf): 0.5 * x * (1 + erf(x * sqrt(1/2))).
__attribute__((target("avx2"))) void geluErfAvx2(const float *x, float *y,
                                                 int64_t n) {
  GeluConstants k;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 e = erf8(mul(v, splat(k.sqrtHalfUnary)));
    _mm256_storeu_ps(y + i, mul(mul(splat(0.5f), v), add(splat(1.0f), e)));
  }
  for (; i < n; ++i)
    y[i] = cuda::body::unary(UnaryOp::GeluErf, x[i]);
}

/// cuda::body::geluGradErf: dy * (cdf + x * pdf).
__attribute__((target("avx2"))) void
geluGradErfAvx2(const float *dy, const float *x, float *y, int64_t n) {
  GeluConstants k;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(dy + i), v = _mm256_loadu_ps(x + i);
    __m256 cdf =
        mul(splat(0.5f), add(splat(1.0f), erf8(mul(v, splat(k.sqrtHalfGrad)))));
    __m256 pdf = mul(splat(k.invSqrtTwoPi), exp8(mul(splat(-0.5f), mul(v, v))));
    _mm256_storeu_ps(y + i, mul(g, add(cdf, mul(v, pdf))));
  }
  for (; i < n; ++i)
    y[i] = cuda::body::geluGradErf(dy[i], x[i]);
}
/// 64-bit lanes a * c mod 2^64 from 32-bit multiplies (AVX2 has none
/// wider): lo(a) lo(c) + ((hi(a) lo(c) + lo(a) hi(c)) << 32).
REMAT_AVX2 __m256i mulLow64(__m256i a, __m256i c) {
  __m256i cross =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c),
                       _mm256_mul_epu32(a, _mm256_srli_epi64(c, 32)));
  return _mm256_add_epi64(_mm256_mul_epu32(a, c), _mm256_slli_epi64(cross, 32));
}

/// Four lanes of ir::splitMix64Finalize(z) >> 40 (dropoutBits24).
REMAT_AVX2 __m256i bits24(__m256i z) {
  z = mulLow64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)),
               _mm256_set1_epi64x(static_cast<int64_t>(0xBF58476D1CE4E5B9ull)));
  z = mulLow64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)),
               _mm256_set1_epi64x(static_cast<int64_t>(0x94D049BB133111EBull)));
  return _mm256_srli_epi64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 31)), 40);
}

/// kSpreadBits[m] has byte j = bit j of m: a movemask as eight bool bytes.
constexpr auto kSpreadBits = [] {
  std::array<uint64_t, 256> table{};
  for (unsigned m = 0; m < 256; ++m)
    for (unsigned j = 0; j < 8; ++j)
      table[m] |= static_cast<uint64_t>((m >> j) & 1) << (8 * j);
  return table;
}();

__attribute__((target("avx2"))) void
dropoutAvx2(const float *x, float *y, uint8_t *mask, int64_t begin, int64_t end,
            uint64_t key, uint32_t threshold, float scale) {
  const uint64_t gamma = ir::kSplitMix64Gamma;
  // Lane l of the first and second four: (l + 1) and (l + 5) gammas on.
  const __m256i lanesLow = _mm256_setr_epi64x(
      static_cast<int64_t>(gamma), static_cast<int64_t>(2 * gamma),
      static_cast<int64_t>(3 * gamma), static_cast<int64_t>(4 * gamma));
  const __m256i lanesHigh = _mm256_add_epi64(
      lanesLow, _mm256_set1_epi64x(static_cast<int64_t>(4 * gamma)));
  const __m256i evenFirst = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  // bits >= threshold as a signed compare: both are below 2^25.
  const __m256i below = _mm256_set1_epi32(static_cast<int32_t>(threshold) - 1);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    // dropoutBits24(key, i + l) hashes key + (i + l + 1) gamma.
    __m256i base = _mm256_set1_epi64x(
        static_cast<int64_t>(key + static_cast<uint64_t>(i) * gamma));
    __m256i low = _mm256_permutevar8x32_epi32(
        bits24(_mm256_add_epi64(base, lanesLow)), evenFirst);
    __m256i high = _mm256_permutevar8x32_epi32(
        bits24(_mm256_add_epi64(base, lanesHigh)), evenFirst);
    __m256i bits =
        _mm256_inserti128_si256(low, _mm256_castsi256_si128(high), 1);
    __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(bits, below));
    // keep ? x * scale : +0.
    _mm256_storeu_ps(
        y + i, _mm256_and_ps(keep, mul(_mm256_loadu_ps(x + i), splat(scale))));
    if (mask) {
      uint64_t bytes = kSpreadBits[_mm256_movemask_ps(keep)];
      std::memcpy(mask + i, &bytes, sizeof(bytes));
    }
  }
  for (; i < end; ++i) {
    bool keep;
    y[i] = cuda::body::dropout(x[i], key, i, threshold, scale, keep);
    if (mask)
      mask[i] = keep;
  }
}
__attribute__((target("avx2"))) bool orderFreeMaxAvx2(const float *x, int64_t n,
                                                      float &max) {
  __m256 best0 = _mm256_set1_ps(x[0]), best1 = best0;
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    best0 = _mm256_max_ps(best0, a);
    best1 = _mm256_max_ps(best1, b);
  }
  if (_mm256_movemask_ps(nan))
    return false;
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(best0, best1));
  float m = lanes[0];
  for (int j = 1; j < 8; ++j)
    m = lanes[j] > m ? lanes[j] : m;
  for (; i < n; ++i) {
    if (x[i] != x[i])
      return false;
    m = x[i] > m ? x[i] : m;
  }
  if (m == 0.0f || m != m)
    return false;
  max = m;
  return true;
}
#undef REMAT_AVX2
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

void erfF32Array(const float *x, float *y, int64_t n) {
#ifdef REMAT_VECTORMATH_X86
  if (vectorMathUsesAvx2())
    return erfAvx2(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i)
    y[i] = erfF32(x[i]);
}

void geluErfF32Array(const float *x, float *y, int64_t n) {
#ifdef REMAT_VECTORMATH_X86
  if (vectorMathUsesAvx2())
    return geluErfAvx2(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i)
    y[i] = cuda::body::unary(UnaryOp::GeluErf, x[i]);
}

float expShiftedLaneSumF32(const float *x, float shift, float *y, int64_t n) {
#ifdef REMAT_VECTORMATH_X86
  if (vectorMathUsesAvx2())
    return expShiftedLaneSumAvx2(x, shift, y, n);
#endif
  cuda::body::LaneSum<float> sum;
  addExpTerms(x, shift, y, 0, n, sum);
  return sum.total();
}

bool orderFreeMaxF32(const float *x, int64_t n, float &max) {
#ifdef REMAT_VECTORMATH_X86
  if (vectorMathUsesAvx2())
    return orderFreeMaxAvx2(x, n, max);
#endif
  return false;
}

void dropoutF32Array(const float *x, float *y, uint8_t *mask, int64_t begin,
                     int64_t end, uint64_t key, uint32_t threshold,
                     float scale) {
#ifdef REMAT_VECTORMATH_X86
  if (vectorMathUsesAvx2())
    return dropoutAvx2(x, y, mask, begin, end, key, threshold, scale);
#endif
  for (int64_t i = begin; i < end; ++i) {
    bool keep;
    y[i] = cuda::body::dropout(x[i], key, i, threshold, scale, keep);
    if (mask)
      mask[i] = keep;
  }
}

void geluGradErfF32Array(const float *dy, const float *x, float *y, int64_t n) {
#ifdef REMAT_VECTORMATH_X86
  if (vectorMathUsesAvx2())
    return geluGradErfAvx2(dy, x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i)
    y[i] = cuda::body::geluGradErf(dy[i], x[i]);
}

} // namespace remat::runtime::cpu
