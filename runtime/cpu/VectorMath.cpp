//===- runtime/cpu/VectorMath.cpp - Vectorised f32 math for the kernels ---===//
//
// exp, erf, Gelu and GeluGrad are written once for any lane count
// (VectorMathLanes.inc) and compiled twice, for AVX2 (8 lanes) and for
// AVX-512 F (16 lanes); Dropout's stream and the row max have AVX2 loops
// only. The CPU's best level is chosen at run time (vectorMathBestLevel),
// so the build stays baseline x86-64. The loops are compiled with target
// attributes of "avx2" or "avx512f" only, neither of which brings FMA, and
// the runtime builds with -ffp-contract=off: a multiply and an add are
// never contracted, so every lane rounds as runtime/MathF32.h's scalar
// code and the CUDA bodies (runtime/cuda/KernelBodies.h) do. The scalar
// tails call those functions themselves.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/VectorMath.h"
#include "runtime/MathF32.h"
#include "runtime/cuda/KernelBodies.h"

#include <algorithm>
#include <array>
#include <atomic>
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
/// The constants of the scalar bodies, as they compute them.
struct GeluConstants {
  float sqrtHalfUnary = static_cast<float>(0.70710678118654752440);
  float sqrtHalfGrad = static_cast<float>(M_SQRT1_2);
  float invSqrtTwoPi = static_cast<float>(1 / std::sqrt(2 * M_PI));
};

namespace avx2 {
#define LANES_INLINE __attribute__((target("avx2"), always_inline)) inline
#define LANES_LOOP __attribute__((target("avx2")))
using F = __m256;
using Mask = __m256;
constexpr int kLanes = 8;
LANES_INLINE F load(const float *p) { return _mm256_loadu_ps(p); }
LANES_INLINE void store(float *p, F v) { _mm256_storeu_ps(p, v); }
LANES_INLINE F splat(float x) { return _mm256_set1_ps(x); }
LANES_INLINE F zero() { return _mm256_setzero_ps(); }
LANES_INLINE F add(F a, F b) { return _mm256_add_ps(a, b); }
LANES_INLINE F sub(F a, F b) { return _mm256_sub_ps(a, b); }
LANES_INLINE F mul(F a, F b) { return _mm256_mul_ps(a, b); }
/// b where either is NaN, as maxps and minps do.
LANES_INLINE F maxOf(F a, F b) { return _mm256_max_ps(a, b); }
LANES_INLINE F minOf(F a, F b) { return _mm256_min_ps(a, b); }
LANES_INLINE F absOf(F v) { return _mm256_andnot_ps(splat(-0.0f), v); }
LANES_INLINE F negOf(F v) { return _mm256_xor_ps(v, splat(-0.0f)); }
LANES_INLINE Mask lessThan(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
LANES_INLINE Mask atLeast(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
LANES_INLINE Mask isNaN(F v) { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }
/// Lanes of \p whenTrue where \p mask is set, else of \p whenFalse.
LANES_INLINE F select(Mask mask, F whenTrue, F whenFalse) {
  return _mm256_blendv_ps(whenFalse, whenTrue, mask);
}
LANES_INLINE unsigned laneBits(Mask mask) {
  return static_cast<unsigned>(_mm256_movemask_ps(mask));
}
/// p * 2^(n >> 1) * 2^(n - (n >> 1)) for integral \p nf in [-150, 129], as
/// expF32Steps applies 2^n.
LANES_INLINE F scaleByPowerOfTwo(F p, F nf) {
  __m256i k = _mm256_cvttps_epi32(nf); // nf is an integer: exact
  __m256i half = _mm256_srai_epi32(k, 1);
  __m256i rest = _mm256_sub_epi32(k, half);
  const __m256i bias = _mm256_set1_epi32(127);
  F scaleHalf =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  F scaleRest =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
  return mul(mul(p, scaleHalf), scaleRest);
}
/// Adds the terms of \p e to the eight lanes of a LaneSum.
LANES_INLINE void addToLaneSum(__m256 &acc, F e) { acc = add(acc, e); }
#include "runtime/cpu/VectorMathLanes.inc"
#undef LANES_INLINE
#undef LANES_LOOP
} // namespace avx2

namespace avx512 {
#define LANES_INLINE __attribute__((target("avx512f"), always_inline)) inline
#define LANES_LOOP __attribute__((target("avx512f")))
using F = __m512;
using Mask = __mmask16;
constexpr int kLanes = 16;
/// GCC 12 warns of an uninitialised source inside the unmasked forms of
/// some AVX-512 intrinsics (a false positive); their zero-masked forms
/// with every lane set are the same instructions.
constexpr __mmask16 kAll = 0xFFFF;
LANES_INLINE F load(const float *p) { return _mm512_loadu_ps(p); }
LANES_INLINE void store(float *p, F v) { _mm512_storeu_ps(p, v); }
LANES_INLINE F splat(float x) { return _mm512_set1_ps(x); }
LANES_INLINE F zero() { return _mm512_setzero_ps(); }
LANES_INLINE F add(F a, F b) { return _mm512_add_ps(a, b); }
LANES_INLINE F sub(F a, F b) { return _mm512_sub_ps(a, b); }
LANES_INLINE F mul(F a, F b) { return _mm512_mul_ps(a, b); }
LANES_INLINE F maxOf(F a, F b) { return _mm512_maskz_max_ps(kAll, a, b); }
LANES_INLINE F minOf(F a, F b) { return _mm512_maskz_min_ps(kAll, a, b); }
/// Sign-bit operations in integer lanes (the float ones need AVX-512 DQ).
LANES_INLINE F absOf(F v) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
}
LANES_INLINE F negOf(F v) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(v),
                       _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}
LANES_INLINE Mask lessThan(F a, F b) {
  return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ);
}
LANES_INLINE Mask atLeast(F a, F b) {
  return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ);
}
LANES_INLINE Mask isNaN(F v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q); }
LANES_INLINE F select(Mask mask, F whenTrue, F whenFalse) {
  return _mm512_mask_blend_ps(mask, whenFalse, whenTrue);
}
LANES_INLINE unsigned laneBits(Mask mask) { return mask; }
LANES_INLINE F scaleByPowerOfTwo(F p, F nf) {
  __m512i k = _mm512_maskz_cvttps_epi32(kAll, nf);
  __m512i half = _mm512_maskz_srai_epi32(kAll, k, 1);
  __m512i rest = _mm512_sub_epi32(k, half);
  const __m512i bias = _mm512_set1_epi32(127);
  F scaleHalf = _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(kAll, _mm512_add_epi32(half, bias), 23));
  F scaleRest = _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(kAll, _mm512_add_epi32(rest, bias), 23));
  return mul(mul(p, scaleHalf), scaleRest);
}
/// Lanes 0-7 then lanes 8-15: element i + 8 follows element i in lane i % 8.
LANES_INLINE void addToLaneSum(__m256 &acc, F e) {
  acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(
                               0xF, _mm512_castps_pd(e), 0)));
  acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(
                               0xF, _mm512_castps_pd(e), 1)));
}
#include "runtime/cpu/VectorMathLanes.inc"
#undef LANES_INLINE
#undef LANES_LOOP
} // namespace avx512

#define REMAT_AVX2 __attribute__((target("avx2"), always_inline)) inline

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
    _mm256_storeu_ps(y + i,
                     _mm256_and_ps(keep, avx2::mul(_mm256_loadu_ps(x + i),
                                                   avx2::splat(scale))));
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

#define REMAT_AVX512F __attribute__((target("avx512f"), always_inline)) inline

/// Every lane of eight 64-bit ones: GCC 12 warns of an uninitialised
/// source inside the unmasked forms of some AVX-512 intrinsics (a false
/// positive, as in namespace avx512 above); their zero-masked forms with
/// every lane set are the same instructions.
constexpr __mmask8 kAll64 = 0xFF;

/// mulLow64 in eight 64-bit lanes (AVX-512F has no vpmullq either; that is
/// AVX-512 DQ's).
REMAT_AVX512F __m512i mulLow64x8(__m512i a, __m512i c) {
  __m512i cross = _mm512_add_epi64(
      _mm512_maskz_mul_epu32(kAll64, _mm512_maskz_srli_epi64(kAll64, a, 32), c),
      _mm512_maskz_mul_epu32(kAll64, a,
                             _mm512_maskz_srli_epi64(kAll64, c, 32)));
  return _mm512_add_epi64(_mm512_maskz_mul_epu32(kAll64, a, c),
                          _mm512_maskz_slli_epi64(kAll64, cross, 32));
}

/// z ^ (z >> shift) in eight 64-bit lanes.
REMAT_AVX512F __m512i xorShift(__m512i z, unsigned shift) {
  return _mm512_xor_si512(z, _mm512_maskz_srli_epi64(kAll64, z, shift));
}

/// bits24 in eight lanes.
REMAT_AVX512F __m512i bits24x8(__m512i z) {
  z = mulLow64x8(xorShift(z, 30), _mm512_set1_epi64(static_cast<int64_t>(
                                      0xBF58476D1CE4E5B9ull)));
  z = mulLow64x8(xorShift(z, 27), _mm512_set1_epi64(static_cast<int64_t>(
                                      0x94D049BB133111EBull)));
  return _mm512_maskz_srli_epi64(kAll64, xorShift(z, 31), 40);
}

/// dropoutAvx2 sixteen elements at a time: the same hashes, compares and
/// products, so the same bits and keeps (VectorMathTest checks both against
/// cuda::body::dropout). On a [48, 128, 1024] Dropout alone (`remat-run
/// --forward --profile`, 1 thread, three alternated pairs) it took 7.2-7.4
/// ms against 8.5-9.6 with dropoutAvx2, and the bert-base step's 37
/// Dropout nodes (batch 1 seq 512, 2 threads) 27.4-35.4 ms against
/// 37.4-42.3. (Most of the work is the hashes' 64-bit products, three
/// 32-bit multiplies each in both; here one instruction does eight lanes'.)
__attribute__((target("avx512f"))) void
dropoutAvx512(const float *x, float *y, uint8_t *mask, int64_t begin,
              int64_t end, uint64_t key, uint32_t threshold, float scale) {
  const uint64_t gamma = ir::kSplitMix64Gamma;
  // Lane l of the first and second eight: (l + 1) and (l + 9) gammas on.
  alignas(64) int64_t steps[16];
  for (int l = 0; l < 16; ++l)
    steps[l] = static_cast<int64_t>(static_cast<uint64_t>(l + 1) * gamma);
  const __m512i firstEight = _mm512_load_si512(steps);
  const __m512i secondEight = _mm512_load_si512(steps + 8);
  // The low halves of both eights' 64-bit lanes, in order.
  const __m512i lowHalves = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18,
                                              20, 22, 24, 26, 28, 30);
  // bits >= threshold as a signed compare: both are below 2^25.
  const __m512i below = _mm512_set1_epi32(static_cast<int32_t>(threshold) - 1);
  const __m512 vScale = _mm512_set1_ps(scale);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    // dropoutBits24(key, i + l) hashes key + (i + l + 1) gamma.
    __m512i base = _mm512_set1_epi64(
        static_cast<int64_t>(key + static_cast<uint64_t>(i) * gamma));
    __m512i bits = _mm512_permutex2var_epi32(
        bits24x8(_mm512_add_epi64(base, firstEight)), lowHalves,
        bits24x8(_mm512_add_epi64(base, secondEight)));
    __mmask16 keep = _mm512_cmpgt_epi32_mask(bits, below);
    // keep ? x * scale : +0.
    _mm512_storeu_ps(y + i,
                     _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(x + i), vScale));
    if (mask) {
      uint64_t bytes[2] = {kSpreadBits[keep & 0xFF], kSpreadBits[keep >> 8]};
      std::memcpy(mask + i, bytes, sizeof(bytes));
    }
  }
  dropoutAvx2(x, y, mask, i, end, key, threshold, scale);
}
#undef REMAT_AVX512F

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

VectorLevel detectLevel() {
#ifdef REMAT_VECTORMATH_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return VectorLevel::Avx512;
  if (__builtin_cpu_supports("avx2"))
    return VectorLevel::Avx2;
#endif
  return VectorLevel::Scalar;
}

/// The level the arrays run at; -1 until first asked.
std::atomic<int> currentLevel{-1};

template <bool Shifted>
void expArray(const float *x, float shift, float *y, int64_t n) {
#ifdef REMAT_VECTORMATH_X86
  switch (vectorMathLevel()) {
  case VectorLevel::Avx512:
    return avx512::expLoop<Shifted>(x, shift, y, n);
  case VectorLevel::Avx2:
    return avx2::expLoop<Shifted>(x, shift, y, n);
  case VectorLevel::Scalar:
    break;
  }
#endif
  expScalar<Shifted>(x, shift, y, n);
}

} // namespace

VectorLevel vectorMathBestLevel() {
  static const VectorLevel best = detectLevel();
  return best;
}

VectorLevel vectorMathLevel() {
  int level = currentLevel.load(std::memory_order_relaxed);
  if (level < 0) {
    level = static_cast<int>(vectorMathBestLevel());
    currentLevel.store(level, std::memory_order_relaxed);
  }
  return static_cast<VectorLevel>(level);
}

VectorLevel setVectorMathLevel(VectorLevel level) {
  level = std::min(level, vectorMathBestLevel());
  currentLevel.store(static_cast<int>(level), std::memory_order_relaxed);
  return level;
}

bool vectorMathUsesAvx2() { return vectorMathLevel() >= VectorLevel::Avx2; }

const char *vectorLevelName(VectorLevel level) {
  switch (level) {
  case VectorLevel::Avx512:
    return "AVX-512 (16 lanes)";
  case VectorLevel::Avx2:
    return "AVX2 (8 lanes)";
  case VectorLevel::Scalar:
    break;
  }
  return "scalar";
}

void expF32Array(const float *x, float *y, int64_t n) {
  expArray<false>(x, 0.0f, y, n);
}

void expF32ShiftedArray(const float *x, float shift, float *y, int64_t n) {
  expArray<true>(x, shift, y, n);
}

/// Runs \p call's AVX-512 or AVX2 loop at the current level, or returns
/// false for the scalar loop.
#ifdef REMAT_VECTORMATH_X86
#define REMAT_DISPATCH_LANES(loop, ...)                                        \
  switch (vectorMathLevel()) {                                                 \
  case VectorLevel::Avx512:                                                    \
    return avx512::loop(__VA_ARGS__);                                          \
  case VectorLevel::Avx2:                                                      \
    return avx2::loop(__VA_ARGS__);                                            \
  case VectorLevel::Scalar:                                                    \
    break;                                                                     \
  }
#else
#define REMAT_DISPATCH_LANES(loop, ...)
#endif

void erfF32Array(const float *x, float *y, int64_t n) {
  REMAT_DISPATCH_LANES(erfLoop, x, y, n)
  for (int64_t i = 0; i < n; ++i)
    y[i] = erfF32(x[i]);
}

void geluErfF32Array(const float *x, float *y, int64_t n) {
  REMAT_DISPATCH_LANES(geluErfLoop, x, y, n)
  for (int64_t i = 0; i < n; ++i)
    y[i] = cuda::body::unary(UnaryOp::GeluErf, x[i]);
}

float expShiftedLaneSumF32(const float *x, float shift, float *y, int64_t n) {
  REMAT_DISPATCH_LANES(expShiftedLaneSumLoop, x, shift, y, n)
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
  switch (vectorMathLevel()) {
  case VectorLevel::Avx512:
    return dropoutAvx512(x, y, mask, begin, end, key, threshold, scale);
  case VectorLevel::Avx2:
    return dropoutAvx2(x, y, mask, begin, end, key, threshold, scale);
  case VectorLevel::Scalar:
    break;
  }
#endif
  for (int64_t i = begin; i < end; ++i) {
    bool keep;
    y[i] = cuda::body::dropout(x[i], key, i, threshold, scale, keep);
    if (mask)
      mask[i] = keep;
  }
}

void geluGradErfF32Array(const float *dy, const float *x, float *y, int64_t n) {
  REMAT_DISPATCH_LANES(geluGradErfLoop, dy, x, y, n)
  for (int64_t i = 0; i < n; ++i)
    y[i] = cuda::body::geluGradErf(dy[i], x[i]);
}

#undef REMAT_DISPATCH_LANES

} // namespace remat::runtime::cpu
