//===- runtime/cuda/KernelBodies.h - The CUDA kernels' math -----*- C++ -*-===//
//
// What one CUDA thread computes, as plain __host__ __device__ functions: the
// .cu kernels are thin loops over these, and tests/unit/CudaKernelBodiesTest
// runs the same functions on the host against the CPU backend's kernels, so
// the math is tested on machines without a GPU.
//
// Every body follows the CPU reference (runtime/cpu) operation for operation
// and sums in the same order (index order, or LaneSum's eight lanes for sums
// of exponentials), one thread owning each output, except the reductions
// (ReduceSum and the like), whose threads share an output and combine in a
// fixed tree (reducePartial): no atomics, so results are the same bits on
// every run (Kernels.cu builds
// with --fmad=false so that no a * b + c contracts into an FMA the CPU does
// not do).
//
// Every exp and erf is runtime/MathF32.h's expOf and erfOf, so in f32 they
// are the CPU's bits too.
//
// Plain C++17 with no dependencies beyond ir/Hash.h, DropoutMask.h and
// MathF32.h.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CUDA_KERNELBODIES_H
#define REMAT_RUNTIME_CUDA_KERNELBODIES_H

#include "ir/Hash.h"
#include "runtime/DropoutMask.h"
#include "runtime/MathF32.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace remat::runtime::cuda::body {

/// The most dims a CUDA kernel indexes; higher ranks run on the host.
constexpr int kMaxRank = 8;

/// Dims of an index space, row-major.
struct Dims {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
};

/// Per dim, how far one step moves in a tensor, in elements (0 broadcasts),
/// from element \c base.
struct Strides {
  int64_t base = 0;
  int64_t strides[kMaxRank] = {};
};

/// \returns the element offset of linear index \p linear of \p space in a
/// tensor laid out by \p layout.
/// An index below 2^32 is split with 32-bit divisions, which the GPU does
/// in a few instructions rather than 64-bit division's long emulation.
REMAT_HOST_DEVICE inline int64_t offsetOf(const Dims &space,
                                          const Strides &layout,
                                          int64_t linear) {
  int64_t offset = layout.base;
  if (space.rank == 1)
    return offset + linear * layout.strides[0];
  if (linear >= 0 && linear <= int64_t(UINT32_MAX)) {
    uint32_t rest = uint32_t(linear);
    for (int d = space.rank - 1; d >= 0; --d) {
      int64_t dim = space.dims[d];
      if (dim > int64_t(rest)) {
        // Also every dim of 2^32 or more: the rest is its index.
        offset += int64_t(rest) * layout.strides[d];
        rest = 0;
        continue;
      }
      uint32_t quotient = rest / uint32_t(dim);
      offset += int64_t(rest - quotient * uint32_t(dim)) * layout.strides[d];
      rest = quotient;
    }
    return offset;
  }
  for (int d = space.rank - 1; d >= 0; --d) {
    int64_t index = linear % space.dims[d];
    linear /= space.dims[d];
    offset += index * layout.strides[d];
  }
  return offset;
}

/// Drops the dims of size 1 from \p space and merges each dim into the one
/// before it where every layout of \p layouts steps over the inner dim as
/// one step of the outer (outer stride = inner stride * inner size): the
/// same elements in the same order, with fewer dims for offsetOf to split.
/// A space with a dim of 0 is left as it is (it has no elements). In place:
/// dim d moves to a position at or before d, read before it is written.
template <typename... Layouts>
inline void collapseDims(Dims &space, Layouts &...layouts) {
  static_assert((std::is_same_v<Layouts, Strides> && ...));
  for (int d = 0; d < space.rank; ++d)
    if (space.dims[d] == 0)
      return;
  int rank = 0;
  for (int d = 0; d < space.rank; ++d) {
    int64_t size = space.dims[d];
    if (size == 1)
      continue;
    if (rank > 0 &&
        ((layouts.strides[rank - 1] == layouts.strides[d] * size) && ...)) {
      space.dims[rank - 1] *= size;
      ((layouts.strides[rank - 1] = layouts.strides[d]), ...);
      continue;
    }
    space.dims[rank] = size;
    ((layouts.strides[rank] = layouts.strides[d]), ...);
    ++rank;
  }
  for (int d = rank; d < kMaxRank; ++d) {
    space.dims[d] = 0;
    ((layouts.strides[d] = 0), ...);
  }
  space.rank = rank;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class UnaryOp : uint8_t {
  Sqrt,
  Erf,
  Tanh,
  Relu,
  Sigmoid,
  Exp,
  Log,
  Neg,
  GeluErf,
  GeluTanh,
  // Issue 13 (float operands only): runtime/cpu/ElementwiseMore.cpp.
  Sin,
  Cos,
  Abs,
  Reciprocal,
  // Float and integer operands: runtime/cpu/ElementwiseMore.cpp's SignOp.
  Sign,
  // Issue 40 (float operands only): runtime/cpu/ElementwiseMore.cpp.
  Ceil,
  Floor,
  Softplus,
  Acos
};

/// One element of a unary op: runtime/cpu/Elementwise.cpp's formulas.
template <typename T> REMAT_HOST_DEVICE inline T unary(UnaryOp op, T x) {
  if constexpr (std::is_integral_v<T>) {
    // Only Neg, Relu and Sign are integer ops on the cuda backend; Neg
    // wraps.
    using U = std::make_unsigned_t<T>;
    if (op == UnaryOp::Neg)
      return static_cast<T>(U(0) - static_cast<U>(x));
    if (op == UnaryOp::Sign) {
      if (x > T(0))
        return T(1);
      if constexpr (std::is_signed_v<T>)
        if (x < T(0))
          return T(-1);
      return T(0);
    }
    if constexpr (std::is_signed_v<T>)
      return x < T(0) ? T(0) : x;
    return x;
  } else {
    switch (op) {
    case UnaryOp::Sqrt:
      return std::sqrt(x);
    case UnaryOp::Erf:
      return erfOf(x);
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Relu:
      return x < T(0) ? T(0) : x;
    case UnaryOp::Sigmoid:
      return T(1) / (T(1) + expOf(-x));
    case UnaryOp::Exp:
      return expOf(x);
    case UnaryOp::Log:
      return std::log(x);
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::GeluErf: {
      const T sqrtHalf = T(0.70710678118654752440);
      return T(0.5) * x * (T(1) + erfOf(x * sqrtHalf));
    }
    case UnaryOp::GeluTanh: {
      const T sqrtTwoOverPi = T(0.79788456080286535588);
      const T cubic = T(0.044715);
      return T(0.5) * x *
             (T(1) + std::tanh(sqrtTwoOverPi * (x + cubic * x * x * x)));
    }
    case UnaryOp::Sin:
      return std::sin(x);
    case UnaryOp::Cos:
      return std::cos(x);
    case UnaryOp::Abs:
      return std::fabs(x);
    case UnaryOp::Reciprocal:
      return T(1) / x;
    case UnaryOp::Sign:
      // -0 gives 0; NaN stays NaN.
      if (x > T(0))
        return T(1);
      if (x < T(0))
        return T(-1);
      return x == T(0) ? T(0) : x;
    case UnaryOp::Ceil:
      return std::ceil(x);
    case UnaryOp::Floor:
      return std::floor(x);
    case UnaryOp::Softplus: {
      T positive = x > T(0) ? x : T(0);
      return positive + std::log1p(expOf(x > T(0) ? -x : x));
    }
    case UnaryOp::Acos:
      return std::acos(x);
    }
    return x;
  }
}

/// Binary ops of the cuda backend. Comparisons and And give bool bytes;
/// the rest the operands' type.
enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Max, Pow, Equal, GreaterOrEqual, And,
  // Issue 13: runtime/cpu/ElementwiseMore.cpp.
  Min, Less, LessOrEqual, Greater, Or,
  // remat.GeluGrad (a = dy, b = x; floats only).
  GeluGradErf, GeluGradTanh
};

/// dy * Gelu'(x), approximate "none": the operations, in order, of the
/// graph autodiff emitted before remat.GeluGrad existed (so the bits did not
/// change): dy * (0.5 (1 + erf(x / sqrt 2)) + x (exp(-0.5 x^2) / sqrt(2 pi))).
template <typename T> REMAT_HOST_DEVICE inline T geluGradErf(T dy, T x) {
  const T half = T(0.5), one = T(1);
  // The constants as autodiff wrote them into the graph.
  const T sqrtHalf = T(M_SQRT1_2);
  const T invSqrtTwoPi = T(1 / std::sqrt(2 * M_PI));
  T cdf = half * (one + erfOf(x * sqrtHalf));
  T pdf = invSqrtTwoPi * expOf(T(-0.5) * (x * x));
  return dy * (cdf + x * pdf);
}

/// dy * Gelu'(x), approximate "tanh": with u = c (x + k x^3) and t = tanh u,
/// Gelu' = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2).
template <typename T> REMAT_HOST_DEVICE inline T geluGradTanh(T dy, T x) {
  const T half = T(0.5), one = T(1);
  const T c = T(std::sqrt(2 / M_PI));
  const T k = T(0.044715), threeK = T(3 * 0.044715);
  T x2 = x * x;
  T t = std::tanh(c * (x + k * (x2 * x)));
  T du = c * (one + threeK * x2);
  T sech2 = one - t * t;
  return dy * (half * (one + t) + (half * x) * (sech2 * du));
}

/// \returns true when \p op gives bool bytes.
REMAT_HOST_DEVICE inline bool isPredicate(BinaryOp op) {
  return op == BinaryOp::Equal || op == BinaryOp::GreaterOrEqual ||
         op == BinaryOp::And || op == BinaryOp::Less ||
         op == BinaryOp::LessOrEqual || op == BinaryOp::Greater ||
         op == BinaryOp::Or;
}

/// One element of an arithmetic binary op (not a predicate). Integers wrap;
/// integer Div by zero is left to the host (the backend runs it there).
template <typename T> REMAT_HOST_DEVICE inline T binary(BinaryOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                 std::make_unsigned_t<T>>;
    switch (op) {
    case BinaryOp::Add:
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case BinaryOp::Sub:
      return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    case BinaryOp::Mul:
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case BinaryOp::Max:
      return a < b ? b : a;
    case BinaryOp::Min:
      return b < a ? b : a;
    default:
      return T(0);
    }
  } else {
    switch (op) {
    case BinaryOp::Add:
      return a + b;
    case BinaryOp::Sub:
      return a - b;
    case BinaryOp::Mul:
      return a * b;
    case BinaryOp::Div:
      return a / b;
    case BinaryOp::Max:
      if (std::isnan(a) || std::isnan(b))
        return std::isnan(a) ? a : b;
      return a < b ? b : a;
    case BinaryOp::Pow:
      return std::pow(a, b);
    case BinaryOp::Min:
      if (std::isnan(a) || std::isnan(b))
        return std::isnan(a) ? a : b;
      return b < a ? b : a;
    case BinaryOp::GeluGradErf:
      return geluGradErf(a, b);
    case BinaryOp::GeluGradTanh:
      return geluGradTanh(a, b);
    default:
      return T(0);
    }
  }
}

/// One element of a predicate op, as a bool byte.
template <typename T>
REMAT_HOST_DEVICE inline uint8_t predicate(BinaryOp op, T a, T b) {
  switch (op) {
  case BinaryOp::Equal:
    return a == b;
  case BinaryOp::GreaterOrEqual:
    return a >= b;
  case BinaryOp::Less:
    return a < b;
  case BinaryOp::LessOrEqual:
    return a <= b;
  case BinaryOp::Greater:
    return a > b;
  case BinaryOp::Or:
    return (a != T(0)) || (b != T(0));
  default: // And, on bool bytes
    return (a != T(0)) && (b != T(0));
  }
}

/// One element of Cast between f32, f64, i64, i32, i8 and u8 as the CPU
/// converts it: float to integer truncates, saturates and maps NaN to 0.
/// Cast to bool is castToBool.
template <typename To, typename From>
REMAT_HOST_DEVICE inline To castValue(From value) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(value))
      return To(0);
    double truncated = std::trunc(static_cast<double>(value));
    if (truncated < static_cast<double>(std::numeric_limits<To>::min()))
      return std::numeric_limits<To>::min();
    if (truncated >= static_cast<double>(std::numeric_limits<To>::max()) + 1.0)
      return std::numeric_limits<To>::max();
    return static_cast<To>(truncated);
  } else {
    return static_cast<To>(value);
  }
}

/// Cast to bool: nonzero (NaN included) is true.
template <typename From> REMAT_HOST_DEVICE inline uint8_t castToBool(From value) {
  return value != From(0) ? 1 : 0;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// Element \p index of a training-mode Dropout: kept elements are x * scale,
/// dropped ones 0; \p keep receives the mask bit. \p threshold and \p scale
/// as runtime/cpu computes them (dropoutThreshold, 1 / (1 - ratio) in T).
template <typename T>
REMAT_HOST_DEVICE inline T dropout(T x, uint64_t key, int64_t index,
                                   uint32_t threshold, T scale, bool &keep) {
  keep = dropoutBits24(key, static_cast<uint64_t>(index)) >= threshold;
  return keep ? x * scale : T(0);
}

//===----------------------------------------------------------------------===//
// Softmax, LayerNormalization, loss: one thread per row or column
//===----------------------------------------------------------------------===//

template <typename T> REMAT_HOST_DEVICE inline T maxIgnoringNaN(T a, T b) {
  return b > a ? b : a;
}

/// The order of remat's sums of exponentials (Softmax, LogSoftmax, the
/// loss): term j goes to partial sum j % 8, each partial summed in index
/// order, then ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)). The CPU
/// adds eight terms at a time in one vector register in exactly this order
/// (runtime/cpu/VectorMath.h), without a chain of n dependent additions.
template <typename T> struct LaneSum {
  T lanes[8] = {T(0), T(0), T(0), T(0), T(0), T(0), T(0), T(0)};

  REMAT_HOST_DEVICE void add(int64_t j, T value) { lanes[j & 7] += value; }
  REMAT_HOST_DEVICE T total() const {
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
           ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  }
};

/// Softmax (or LogSoftmax when \p isLog) of the column of \p n elements at
/// \p x, \p stride apart, into \p y (same layout; may alias \p x). The
/// CPU's order: max, then the LaneSum of exp(x - max), then divide (or
/// (x - max) - log(sum)).
template <typename T>
REMAT_HOST_DEVICE inline void softmaxColumn(const T *x, T *y, int64_t n,
                                            int64_t stride, bool isLog) {
  if (n == 0)
    return;
  T m = x[0];
  for (int64_t j = 1; j < n; ++j)
    m = maxIgnoringNaN(m, x[j * stride]);
  LaneSum<T> sum;
  if (isLog) {
    for (int64_t j = 0; j < n; ++j)
      sum.add(j, expOf(x[j * stride] - m));
    T logSum = std::log(sum.total());
    for (int64_t j = 0; j < n; ++j)
      y[j * stride] = (x[j * stride] - m) - logSum;
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    T e = expOf(x[j * stride] - m);
    y[j * stride] = e;
    sum.add(j, e);
  }
  T s = sum.total();
  for (int64_t j = 0; j < n; ++j)
    y[j * stride] = y[j * stride] / s;
}

/// LayerNormalization's statistics of the row of \p n elements at \p x, in
/// U: the mean and 1 / sqrt(variance + eps), each sum in index order.
template <typename T, typename U>
REMAT_HOST_DEVICE inline void layerNormRowStats(const T *x, int64_t n, U count,
                                                U eps, U &mu, U &invStd) {
  U sum = U(0);
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<U>(x[i]);
  mu = sum / count;
  U squares = U(0);
  for (int64_t i = 0; i < n; ++i) {
    U d = static_cast<U>(x[i]) - mu;
    squares += d * d;
  }
  U variance = squares / count;
  invStd = U(1) / std::sqrt(variance + eps);
}

/// LayerNormalization of one row of \p n elements: X of type T, statistics
/// computed in U and stored as S (runtime/cpu/Normalization.cpp). \p scale
/// and \p bias (may be null) have n elements; \p y may alias \p x.
template <typename T, typename U, typename S>
REMAT_HOST_DEVICE inline void
layerNormRow(const T *x, const T *scale, const T *bias, T *y, int64_t n,
             float epsilon, S *mean, S *invStdDev) {
  U mu, invStd;
  layerNormRowStats(x, n, static_cast<U>(n), static_cast<U>(epsilon), mu,
                    invStd);
  if (mean)
    *mean = static_cast<S>(mu);
  if (invStdDev)
    *invStdDev = static_cast<S>(invStd);
  for (int64_t i = 0; i < n; ++i) {
    T normalized = static_cast<T>((static_cast<U>(x[i]) - mu) * invStd);
    T scaled = normalized * scale[i];
    y[i] = bias ? scaled + bias[i] : scaled;
  }
}

/// remat.DropoutGrad at one element: (dy * (keep ? 1 : 0)) * scale, the
/// Cast, Mul and Mul nodes autodiff emitted before the op existed, in their
/// order, so the bits are those of that graph (a dropped element is dy * 0,
/// signed zero or NaN as the Mul gave).
template <typename T>
REMAT_HOST_DEVICE inline T dropoutGrad(T dy, bool keep, T scale) {
  return (dy * (keep ? T(1) : T(0))) * scale;
}

/// remat.SoftmaxGrad of the column of \p n elements at \p dy and \p y,
/// \p stride apart, into \p dx (same layout; may alias either): dx = y *
/// (dy - s) with s the sum of dy * y from 0 in index order. These are the
/// Mul, ReduceSum, Sub and Mul nodes autodiff emitted before the op existed,
/// in their order, so the bits are those of that graph.
template <typename T>
REMAT_HOST_DEVICE inline void softmaxGradColumn(const T *dy, const T *y, T *dx,
                                                int64_t n, int64_t stride) {
  T s = T(0);
  for (int64_t j = 0; j < n; ++j)
    s = s + dy[j * stride] * y[j * stride];
  for (int64_t j = 0; j < n; ++j)
    dx[j * stride] = y[j * stride] * (dy[j * stride] - s);
}

/// remat.LayerNormalizationGrad's two sums over a row, from 0 in index
/// order: of dxhat = dy * scale and of dxhat * xhat, xhat = (x - mean) *
/// invStd.
template <typename T>
REMAT_HOST_DEVICE inline void
layerNormGradRowSums(const T *dy, const T *x, const T *scale, int64_t n, T mean,
                     T invStd, T &sum, T &sumXhat) {
  T a = T(0), b = T(0);
  for (int64_t i = 0; i < n; ++i) {
    T dxhat = dy[i] * scale[i];
    T xhat = (x[i] - mean) * invStd;
    a = a + dxhat;
    b = b + dxhat * xhat;
  }
  sum = a;
  sumXhat = b;
}

/// remat.LayerNormalizationGrad of one row of \p n elements given the
/// means \p m1 of dxhat and \p m2 of dxhat * xhat: dx = ((dxhat - m1) -
/// xhat * m2) * invStd. With layerNormGradRowSums these are the operations
/// of the Mul, Sub, ReduceMean and Mul nodes autodiff emitted before the op
/// existed, in their order. \p dx may alias \p dy or \p x.
template <typename T>
REMAT_HOST_DEVICE inline void
layerNormGradRowMap(const T *dy, const T *x, const T *scale, T *dx, int64_t n,
                    T mean, T invStd, T m1, T m2) {
  for (int64_t i = 0; i < n; ++i) {
    T dxhat = dy[i] * scale[i];
    T xhat = (x[i] - mean) * invStd;
    dx[i] = ((dxhat - m1) - xhat * m2) * invStd;
  }
}

/// remat.LayerNormalizationGrad of one row: both passes, means as
/// ReduceMean divides (the sum over the count in T).
template <typename T>
REMAT_HOST_DEVICE inline void layerNormGradRow(const T *dy, const T *x,
                                               const T *scale, T *dx, int64_t n,
                                               T mean, T invStd) {
  T sum, sumXhat;
  layerNormGradRowSums(dy, x, scale, n, mean, invStd, sum, sumXhat);
  T count = static_cast<T>(n);
  layerNormGradRowMap(dy, x, scale, dx, n, mean, invStd, sum / count,
                      sumXhat / count);
}

/// SoftmaxCrossEntropyLoss at position (b, d) of scores [N, C, D]: the
/// column of C scores at \p x (\p spatial apart). Writes the column's log
/// probabilities to \p logProb when not null and \returns the element's
/// loss: 0 when \p label is ignored, else -logP[label] (times its weight).
/// \p label must be in [0, C) unless ignored.
template <typename T, typename L>
REMAT_HOST_DEVICE inline T crossEntropyColumn(const T *x, int64_t classes,
                                              int64_t spatial, L label,
                                              bool hasIgnore,
                                              int64_t ignoreIndex,
                                              const T *weights, T *logProb) {
  T m = classes > 0 ? x[0] : -std::numeric_limits<T>::infinity();
  for (int64_t c = 1; c < classes; ++c)
    m = maxIgnoringNaN(m, x[c * spatial]);
  LaneSum<T> sum;
  for (int64_t c = 0; c < classes; ++c)
    sum.add(c, expOf(x[c * spatial] - m));
  T lse = std::log(sum.total());
  if (logProb)
    for (int64_t c = 0; c < classes; ++c)
      logProb[c * spatial] = (x[c * spatial] - m) - lse;
  if (hasIgnore && static_cast<int64_t>(label) == ignoreIndex)
    return T(0);
  T logP = (x[static_cast<int64_t>(label) * spatial] - m) - lse;
  return weights ? -logP * weights[label] : -logP;
}

/// remat.SoftmaxCrossEntropyGrad at one element of log_prob [N, C, D]:
/// (exp(logProb) - (its class is the label ? 1 : 0)) * scale. These are the
/// operations, in order, of the Exp, Equal, Cast, Sub and Mul nodes autodiff
/// emitted before the op existed, so the bits are those of that graph.
template <typename T>
REMAT_HOST_DEVICE inline T crossEntropyGrad(T logProb, bool isLabel, T scale) {
  return (expOf(logProb) - (isLabel ? T(1) : T(0))) * scale;
}

/// The loss reduced over \p count elements ("sum" or "mean"), in index order
/// as the CPU sums it. For "mean" the divisor is the weight of the
/// non-ignored labels (their count without weights).
template <typename T, typename L>
REMAT_HOST_DEVICE inline T reduceCrossEntropy(const T *losses, const L *labels,
                                              int64_t count, bool mean,
                                              bool hasIgnore,
                                              int64_t ignoreIndex,
                                              const T *weights) {
  T total = T(0);
  for (int64_t i = 0; i < count; ++i)
    total += losses[i];
  if (!mean)
    return total;
  if (weights) {
    T weightSum = T(0);
    for (int64_t i = 0; i < count; ++i) {
      if (hasIgnore && static_cast<int64_t>(labels[i]) == ignoreIndex)
        continue;
      weightSum += weights[labels[i]];
    }
    return total / weightSum;
  }
  int64_t kept = count;
  if (hasIgnore)
    for (int64_t i = 0; i < count; ++i)
      kept -= static_cast<int64_t>(labels[i]) == ignoreIndex;
  return total / static_cast<T>(kept);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class ReduceOp : uint8_t { Sum, Mean, Max, L2, LogSumExp };

/// Output element \p o of a reduction: its inputs are \p reduced's index
/// space (row-major, the CPU's order) from the offset of \p o in \p kept.
/// Floats accumulate in T; Max starts from the first input and lets NaN
/// win, Sum, Mean and L2 (squares) start from 0; Mean divides by the count,
/// L2 takes the square root; LogSumExp is the CPU's two passes.
template <typename T>
REMAT_HOST_DEVICE inline T reduceElement(ReduceOp op, const T *x,
                                         const Dims &keptSpace,
                                         const Strides &kept,
                                         const Dims &reducedSpace,
                                         const Strides &reduced,
                                         int64_t reduceCount, int64_t o) {
  int64_t base = offsetOf(keptSpace, kept, o);
  if (op == ReduceOp::LogSumExp) {
    // The CPU's two passes: the max (NaN wins), taken as 0 when infinite,
    // then log(sum(exp(x - max))) + max; -inf over no elements.
    if (reduceCount == 0)
      return -std::numeric_limits<T>::infinity();
    T m = x[base + offsetOf(reducedSpace, reduced, 0)];
    for (int64_t r = 1; r < reduceCount && !std::isnan(m); ++r) {
      T v = x[base + offsetOf(reducedSpace, reduced, r)];
      m = std::isnan(v) || v > m ? v : m;
    }
    if (std::isinf(m))
      m = T(0);
    T sum = T(0);
    for (int64_t r = 0; r < reduceCount; ++r)
      sum += expOf(x[base + offsetOf(reducedSpace, reduced, r)] - m);
    return std::log(sum) + m;
  }
  T acc = op == ReduceOp::Max ? x[base + offsetOf(reducedSpace, reduced, 0)]
                              : T(0);
  for (int64_t r = 0; r < reduceCount; ++r) {
    T value = x[base + offsetOf(reducedSpace, reduced, r)];
    if (op == ReduceOp::Max) {
      if (std::isnan(acc))
        continue;
      if (std::isnan(value))
        acc = value;
      else
        acc = value > acc ? value : acc;
    } else if (op == ReduceOp::L2) {
      acc = acc + value * value;
    } else {
      acc = acc + value;
    }
  }
  if (op == ReduceOp::Mean)
    return acc / static_cast<T>(reduceCount);
  if (op == ReduceOp::L2)
    return std::sqrt(acc);
  return acc;
}

/// The parallel reductions of Kernels.cu (every op but LogSumExp, which
/// is reduceElement's two passes): G threads share an output; thread t of
/// G folds inputs t, t + G, t + 2G, ... in index order from the identity
/// (reducePartial), the G partials combine in a fixed tree (partial t with
/// partial t + s, for s = G/2, G/4, ..., 1; reduceCombine), and
/// reduceFinish ends Mean and L2. The order depends only on the shapes, so
/// every run gives the same bits; it is not the CPU's index order, so sums
/// differ from the CPU's in the last bits.
template <typename T> REMAT_HOST_DEVICE inline T reduceIdentity(ReduceOp op) {
  return op == ReduceOp::Max ? -std::numeric_limits<T>::infinity() : T(0);
}

/// Max lets NaN win (the first one, reading a before b); the rest add.
template <typename T>
REMAT_HOST_DEVICE inline T reduceCombine(ReduceOp op, T a, T b) {
  if (op != ReduceOp::Max)
    return a + b;
  if (std::isnan(a))
    return a;
  if (std::isnan(b))
    return b;
  return b > a ? b : a;
}

template <typename T>
REMAT_HOST_DEVICE inline T
reducePartial(ReduceOp op, const T *x, int64_t base, const Dims &reducedSpace,
              const Strides &reduced, int64_t reduceCount, int64_t first,
              int64_t step) {
  T acc = reduceIdentity<T>(op);
  for (int64_t r = first; r < reduceCount; r += step) {
    T value = x[base + offsetOf(reducedSpace, reduced, r)];
    acc = reduceCombine(op, acc, op == ReduceOp::L2 ? value * value : value);
  }
  return acc;
}

template <typename T>
REMAT_HOST_DEVICE inline T reduceFinish(ReduceOp op, T acc,
                                        int64_t reduceCount) {
  if (op == ReduceOp::Mean)
    return acc / static_cast<T>(reduceCount);
  if (op == ReduceOp::L2)
    return std::sqrt(acc);
  return acc;
}

/// Output element \p o of ArgMax (\p isMax) or ArgMin over the middle dim
/// of \p outer x \p count x \p inner elements (the CPU's order: the axis
/// scanned from index 0): the index of the first extreme, or of the last
/// when \p last. NaN is beyond every number and equal to NaN (numpy's
/// argmax/argmin return the first NaN).
template <typename T>
REMAT_HOST_DEVICE inline int64_t argReduceElement(bool isMax, bool last,
                                                  const T *x, int64_t count,
                                                  int64_t inner, int64_t o) {
  const T *line = x + (o / inner) * count * inner + o % inner;
  int64_t best = 0;
  for (int64_t k = 1; k < count; ++k) {
    T v = line[k * inner], b = line[best * inner];
    bool nanV = false, nanB = false;
    if constexpr (std::is_floating_point_v<T>) {
      nanV = v != v;
      nanB = b != b;
    }
    bool take;
    if (nanV || nanB)
      take = nanV && (last || !nanB);
    else
      take = (isMax ? b < v : v < b) || (last && v == b);
    if (take)
      best = k;
  }
  return best;
}

//===----------------------------------------------------------------------===//
// Gather and ScatterElements
//===----------------------------------------------------------------------===//

/// \returns \p index wrapped into [0, size) (negative counts from the end),
/// or -1 when it is out of range.
REMAT_HOST_DEVICE inline int64_t wrapIndex(int64_t index, int64_t size) {
  if (index < 0)
    index += size;
  return index >= 0 && index < size ? index : -1;
}

/// Gather of data viewed as [outer, axisSize, inner] with \p count indices:
/// output element \p o is data[outer][indices[k]][inner] for o = (outer, k,
/// inner). \returns the data offset, or -1 for an index out of range.
template <typename I>
REMAT_HOST_DEVICE inline int64_t gatherOffset(const I *indices, int64_t count,
                                              int64_t axisSize, int64_t inner,
                                              int64_t o) {
  int64_t i = o % inner;
  int64_t k = (o / inner) % count;
  int64_t outer = o / (inner * count);
  int64_t index = wrapIndex(static_cast<int64_t>(indices[k]), axisSize);
  if (index < 0)
    return -1;
  return (outer * axisSize + index) * inner + i;
}

/// The data offset ScatterElements writes update element \p p to: indices
/// and updates have dims \p updateSpace, data has \p dataStrides (row-major
/// strides of data's dims); along \p axis the coordinate is the index.
/// \returns -1 for an index out of range.
template <typename I>
REMAT_HOST_DEVICE inline int64_t scatterTarget(const I *indices,
                                               const Dims &updateSpace,
                                               const int64_t *dataStrides,
                                               int axis, int64_t axisSize,
                                               int64_t p) {
  int64_t offset = 0, linear = p;
  for (int d = updateSpace.rank - 1; d >= 0; --d) {
    int64_t coord = linear % updateSpace.dims[d];
    linear /= updateSpace.dims[d];
    if (d == axis) {
      coord = wrapIndex(static_cast<int64_t>(indices[p]), axisSize);
      if (coord < 0)
        return -1;
    }
    offset += coord * dataStrides[d];
  }
  return offset;
}

/// GatherElements reads data at the offset ScatterElements writes to:
/// scatterTarget(indices, indexSpace, dataStrides, axis, axisSize, o) for
/// output element o.

//===----------------------------------------------------------------------===//
// Trilu, CumSum, Pad (issue 13; runtime/cpu/Indexing.cpp)
//===----------------------------------------------------------------------===//

/// Trilu keeps element (row \p i, column \p j) of its matrix when j - i >= k
/// (upper) or j - i <= k (lower).
REMAT_HOST_DEVICE inline bool triluKeeps(bool upper, int64_t k, int64_t i,
                                         int64_t j) {
  return upper ? j - i >= k : j - i <= k;
}

/// CumSum of the line of \p length elements at \p x, \p stride apart, into
/// \p y (same layout): a sequential sum in axis order (from the end when
/// \p reverse), in T; integers wrap.
template <typename T>
REMAT_HOST_DEVICE inline void cumSumLine(const T *x, T *y, int64_t length,
                                         int64_t stride, bool exclusive,
                                         bool reverse) {
  T sum = T(0);
  for (int64_t s = 0; s < length; ++s) {
    int64_t offset = (reverse ? length - 1 - s : s) * stride;
    T value = x[offset];
    T next;
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      next = static_cast<T>(static_cast<U>(sum) + static_cast<U>(value));
    } else {
      next = sum + value;
    }
    y[offset] = exclusive ? sum : next;
    sum = next;
  }
}

/// Pad modes (the CPU backend uses this enum and padSource too).
enum class PadMode : uint8_t { Constant, Reflect, Edge, Wrap };

/// The input position that padded position \p i (measured from the first
/// input element) copies along an axis of \p size, or -1 for the constant.
REMAT_HOST_DEVICE inline int64_t padSource(int64_t i, int64_t size,
                                           PadMode mode) {
  if (i >= 0 && i < size)
    return i;
  switch (mode) {
  case PadMode::Constant:
    return -1;
  case PadMode::Edge:
    return i < 0 ? 0 : size - 1;
  case PadMode::Wrap: {
    int64_t r = i % size;
    return r < 0 ? r + size : r;
  }
  case PadMode::Reflect: {
    if (size == 1)
      return 0;
    int64_t period = 2 * (size - 1);
    int64_t r = i % period;
    if (r < 0)
      r += period;
    return r < size ? r : period - r;
  }
  }
  return -1;
}

/// The input offset result element \p o of Pad copies (row-major input
/// \p inSpace, result \p outSpace, \p begin pads per dim), or -1 for the
/// constant.
REMAT_HOST_DEVICE inline int64_t padOffset(const Dims &outSpace,
                                           const Dims &inSpace,
                                           const int64_t *begin, PadMode mode,
                                           int64_t o) {
  int64_t offset = 0, scale = 1;
  for (int d = outSpace.rank - 1; d >= 0; --d) {
    int64_t coord = o % outSpace.dims[d];
    o /= outSpace.dims[d];
    int64_t source = padSource(coord - begin[d], inSpace.dims[d], mode);
    if (source < 0)
      return -1;
    offset += source * scale;
    scale *= inSpace.dims[d];
  }
  return offset;
}

//===----------------------------------------------------------------------===//
// Clip, Tile, TopK (issue 40; runtime/cpu/ElementwiseMore.cpp, Indexing.cpp)
//===----------------------------------------------------------------------===//

/// Clip of one element by the bounds present, as the CPU kernel: NaN stays
/// NaN, and hi wins when lo > hi.
template <typename T>
REMAT_HOST_DEVICE inline T clipElement(T x, const T *lo, const T *hi) {
  if (lo && x < *lo)
    x = *lo;
  if (hi && *hi < x)
    x = *hi;
  return x;
}

/// The input offset that result element \p o of Tile copies: each
/// coordinate modulo the input's dim (row-major \p inSpace, result
/// \p outSpace of the same rank, no dim of either 0).
REMAT_HOST_DEVICE inline int64_t tileOffset(const Dims &outSpace,
                                            const Dims &inSpace, int64_t o) {
  int64_t offset = 0, scale = 1;
  for (int d = outSpace.rank - 1; d >= 0; --d) {
    int64_t coord = o % outSpace.dims[d];
    o /= outSpace.dims[d];
    offset += coord % inSpace.dims[d] * scale;
    scale *= inSpace.dims[d];
  }
  return offset;
}

/// The place of element \p k of a TopK line (\p count elements \p inner
/// apart from \p line) in TopK's order: the number of elements before it,
/// larger ones first (smaller unless \p largest), NaN above every number,
/// equals by index. TopK writes the element at that place if below K.
template <typename T>
REMAT_HOST_DEVICE inline int64_t topKPlace(const T *line, int64_t count,
                                           int64_t inner, int64_t k,
                                           bool largest) {
  T v = line[k * inner];
  bool nanV = false;
  if constexpr (std::is_floating_point_v<T>)
    nanV = v != v;
  int64_t place = 0;
  for (int64_t j = 0; j < count; ++j) {
    if (j == k)
      continue;
    T w = line[j * inner];
    bool nanW = false;
    if constexpr (std::is_floating_point_v<T>)
      nanW = w != w;
    bool before;
    if (nanV || nanW)
      before = nanV == nanW ? j < k : (largest ? nanW : nanV);
    else
      before = (largest ? v < w : w < v) || (v == w && j < k);
    place += before ? 1 : 0;
  }
  return place;
}

//===----------------------------------------------------------------------===//
// Conv, ConvTranspose (issue 13; runtime/cpu/Conv.cpp)
//===----------------------------------------------------------------------===//

/// The geometry of a Conv or ConvTranspose: N-d, one entry per spatial dim.
struct ConvShape {
  int rank = 0;
  int64_t inChannels = 0, outChannels = 0, group = 1;
  int64_t inSpatial[kMaxRank] = {}, outSpatial[kMaxRank] = {};
  int64_t kernel[kMaxRank] = {}, strides[kMaxRank] = {};
  int64_t dilations[kMaxRank] = {}, padBegin[kMaxRank] = {};
  bool transpose = false;
};

/// Result element \p e ([N, M, spatial...] row-major) of a Conv (or
/// ConvTranspose, in gather form) of \p x by \p w, plus \p bias (or null):
/// the CPU kernel's sum, in its order (input channel, then kernel positions
/// row-major), with the bias added last.
template <typename T>
REMAT_HOST_DEVICE inline T convElement(const ConvShape &shape, const T *x,
                                       const T *w, const T *bias, int64_t e) {
  int64_t outSize = 1, inSize = 1, kernelSize = 1;
  for (int d = 0; d < shape.rank; ++d) {
    outSize *= shape.outSpatial[d];
    inSize *= shape.inSpatial[d];
    kernelSize *= shape.kernel[d];
  }
  int64_t o = e % outSize;
  int64_t m = (e / outSize) % shape.outChannels;
  int64_t n = e / (outSize * shape.outChannels);
  int64_t pos[kMaxRank] = {};
  for (int d = shape.rank - 1; d >= 0; --d) {
    pos[d] = o % shape.outSpatial[d];
    o /= shape.outSpatial[d];
  }
  int64_t xGroup = shape.inChannels / shape.group;
  int64_t yGroup = shape.outChannels / shape.group;
  int64_t g = m / yGroup;
  T acc = T(0);
  for (int64_t c = 0; c < xGroup; ++c) {
    int64_t xc = g * xGroup + c;
    const T *xPlane = x + (n * shape.inChannels + xc) * inSize;
    // Conv: W[m, c, k]; ConvTranspose: W[xc, m - g * yGroup, k].
    const T *wKernel = !shape.transpose
                           ? w + (m * xGroup + c) * kernelSize
                           : w + (xc * yGroup + (m - g * yGroup)) * kernelSize;
    for (int64_t kk = 0; kk < kernelSize; ++kk) {
      // Kernel position kk, row-major; the input offset it reads.
      int64_t rest = kk, offset = 0, scale = 1;
      bool inside = true;
      for (int d = shape.rank - 1; d >= 0; --d) {
        int64_t k = rest % shape.kernel[d];
        rest /= shape.kernel[d];
        int64_t i;
        if (!shape.transpose) {
          i = pos[d] * shape.strides[d] - shape.padBegin[d] +
              k * shape.dilations[d];
        } else {
          int64_t t = pos[d] + shape.padBegin[d] - k * shape.dilations[d];
          if (t < 0 || t % shape.strides[d] != 0) {
            inside = false;
            break;
          }
          i = t / shape.strides[d];
        }
        if (i < 0 || i >= shape.inSpatial[d]) {
          inside = false;
          break;
        }
        offset += i * scale;
        scale *= shape.inSpatial[d];
      }
      if (inside)
        acc += xPlane[offset] * wKernel[kk];
    }
  }
  if (bias)
    acc += bias[m];
  return acc;
}

/// ScatterElements "add" or "mul" for one output element: \p value is
/// data's element; the updates that target it are \p sortedPositions[begin,
/// end) (update positions in increasing order, as a stable sort by target
/// leaves them), applied in that order as the CPU applies them.
template <typename T>
REMAT_HOST_DEVICE inline T scatterCombine(T value, const T *updates,
                                          const int64_t *sortedPositions,
                                          int64_t begin, int64_t end,
                                          bool multiply) {
  for (int64_t k = begin; k < end; ++k) {
    T u = updates[sortedPositions[k]];
    value = multiply ? value * u : value + u;
  }
  return value;
}

/// \returns the first k in [0, n) with keys[k] >= key (keys ascending).
REMAT_HOST_DEVICE inline int64_t lowerBound(const int64_t *keys, int64_t n,
                                            int64_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

//===----------------------------------------------------------------------===//
// MaxPool, AveragePool and their gradients (issue 40; runtime/cpu/Conv.cpp)
//===----------------------------------------------------------------------===//

/// The geometry of a pooling op: N-d, one entry per spatial dim.
struct PoolShape {
  int rank = 0;
  int64_t inSpatial[kMaxRank] = {}, outSpatial[kMaxRank] = {};
  int64_t kernel[kMaxRank] = {}, strides[kMaxRank] = {};
  int64_t dilations[kMaxRank] = {}, padBegin[kMaxRank] = {};
  int64_t padEnd[kMaxRank] = {};
  bool countIncludePad = false;
};

/// Visits the window of pooled position \p pos: \p fn(offset) for each of its
/// positions inside the input plane, kernel positions row-major; \returns
/// the window's count (inside, or inside the padded input when
/// countIncludePad), as the CPU's forEachInWindow.
template <typename Fn>
REMAT_HOST_DEVICE inline int64_t poolWindow(const PoolShape &shape,
                                            const int64_t *pos, Fn &&fn) {
  int64_t kernelSize = 1;
  for (int d = 0; d < shape.rank; ++d)
    kernelSize *= shape.kernel[d];
  int64_t count = 0;
  for (int64_t kk = 0; kk < kernelSize; ++kk) {
    int64_t rest = kk, offset = 0, scale = 1;
    bool inside = true, insidePadded = true;
    for (int d = shape.rank - 1; d >= 0; --d) {
      int64_t k = rest % shape.kernel[d];
      rest /= shape.kernel[d];
      int64_t i = pos[d] * shape.strides[d] - shape.padBegin[d] +
                  k * shape.dilations[d];
      inside = inside && i >= 0 && i < shape.inSpatial[d];
      insidePadded = insidePadded && i < shape.inSpatial[d] + shape.padEnd[d];
      offset += i * scale;
      scale *= shape.inSpatial[d];
    }
    if (inside)
      fn(offset);
    if (shape.countIncludePad ? insidePadded : inside)
      ++count;
  }
  return count;
}

/// The plane offset of the maximum of window \p pos (the first of equals, a
/// NaN replacing it), or -1 for a window of pads only.
template <typename T>
REMAT_HOST_DEVICE inline int64_t
poolArgMax(const PoolShape &shape, const T *plane, const int64_t *pos) {
  int64_t best = -1;
  poolWindow(shape, pos, [&](int64_t offset) {
    if (best < 0 || plane[offset] > plane[best] || std::isnan(plane[offset]))
      best = offset;
  });
  return best;
}

/// Result element \p e ([N, C, pooled...] row-major) of MaxPool (\p max) or
/// AveragePool of \p x.
template <typename T>
REMAT_HOST_DEVICE inline T poolElement(const PoolShape &shape, bool max,
                                       const T *x, int64_t e) {
  int64_t outSize = 1, inSize = 1;
  for (int d = 0; d < shape.rank; ++d) {
    outSize *= shape.outSpatial[d];
    inSize *= shape.inSpatial[d];
  }
  const T *plane = x + (e / outSize) * inSize;
  int64_t o = e % outSize;
  int64_t pos[kMaxRank] = {};
  for (int d = shape.rank - 1; d >= 0; --d) {
    pos[d] = o % shape.outSpatial[d];
    o /= shape.outSpatial[d];
  }
  if (max) {
    int64_t best = poolArgMax(shape, plane, pos);
    return best < 0 ? -std::numeric_limits<T>::infinity() : plane[best];
  }
  T sum = T(0);
  int64_t count =
      poolWindow(shape, pos, [&](int64_t offset) { sum += plane[offset]; });
  return sum / static_cast<T>(count);
}

/// Element \p e of dx ([N, C, spatial...] row-major) of remat.MaxPoolGrad
/// (\p x the pooled input) or remat.AveragePoolGrad (\p x null): the sum,
/// over the windows covering it in row-major order, of the window's \p dy
/// when its maximum is this element, or of dy / count.
template <typename T>
REMAT_HOST_DEVICE inline T poolGradElement(const PoolShape &shape, const T *dy,
                                           const T *x, int64_t e) {
  int64_t outSize = 1, inSize = 1;
  for (int d = 0; d < shape.rank; ++d) {
    outSize *= shape.outSpatial[d];
    inSize *= shape.inSpatial[d];
  }
  int64_t p = e / inSize, self = e % inSize;
  int64_t at[kMaxRank] = {}, lo[kMaxRank] = {}, box[kMaxRank] = {};
  int64_t rest = self, windows = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    at[d] = rest % shape.inSpatial[d];
    rest /= shape.inSpatial[d];
  }
  for (int d = 0; d < shape.rank; ++d) {
    int64_t extent = shape.dilations[d] * (shape.kernel[d] - 1) + 1;
    int64_t from = at[d] + shape.padBegin[d] - extent + 1;
    lo[d] = from <= 0 ? 0 : (from + shape.strides[d] - 1) / shape.strides[d];
    int64_t hi = (at[d] + shape.padBegin[d]) / shape.strides[d];
    if (hi > shape.outSpatial[d] - 1)
      hi = shape.outSpatial[d] - 1;
    box[d] = hi >= lo[d] ? hi - lo[d] + 1 : 0;
    windows *= box[d];
  }
  T acc = T(0);
  for (int64_t w = 0; w < windows; ++w) {
    int64_t pos[kMaxRank] = {};
    int64_t r = w;
    for (int d = shape.rank - 1; d >= 0; --d) {
      pos[d] = lo[d] + r % box[d];
      r /= box[d];
    }
    bool covers = true;
    int64_t outOffset = 0;
    for (int d = 0; d < shape.rank; ++d) {
      covers =
          covers && (at[d] + shape.padBegin[d] - pos[d] * shape.strides[d]) %
                            shape.dilations[d] ==
                        0;
      outOffset = outOffset * shape.outSpatial[d] + pos[d];
    }
    if (!covers)
      continue;
    T g = dy[p * outSize + outOffset];
    if (x) {
      if (poolArgMax(shape, x + p * inSize, pos) == self)
        acc += g;
    } else {
      acc += g / static_cast<T>(poolWindow(shape, pos, [](int64_t) {}));
    }
  }
  return acc;
}

} // namespace remat::runtime::cuda::body

#endif // REMAT_RUNTIME_CUDA_KERNELBODIES_H
