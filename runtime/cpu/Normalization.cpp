//===- runtime/cpu/Normalization.cpp - Softmax, LayerNorm and the loss ----===//
//
// (Their gradients remat.SoftmaxGrad and remat.LayerNormalizationGrad are
// here too, and remat.SoftmaxCrossEntropyGrad, the loss's gradient, which
// maps log_prob with no reduction, element by element, split over threads in
// blocks whose bounds do not change a value.)
//
// Each of these reduces along one axis and then maps. Work is split across
// threads by independent rows only; every sum runs inside one thread in a
// fixed order, so results do not depend on the thread count. Sums of X, of
// squared deviations and of losses run in index order; sums of exponentials
// in the eight-lane order of cuda::body::LaneSum.
//
// The tensor is viewed as [outer, n, inner] with n the reduced axis. When
// inner is 1 the rows are contiguous; otherwise a thread processes one outer
// slice at a time, all inner columns together, still summing each column over
// n in the same order (so both layouts give the same bits for the same
// column).
//
// Every exp is remat's (runtime/MathF32.h); along a contiguous row the
// exponentials and their LaneSum are computed eight lanes at a time
// (runtime/cpu/VectorMath.h, the same bits).
//
//===----------------------------------------------------------------------===//

#include "runtime/MathF32.h"
#include "runtime/cpu/KernelImpl.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/cuda/KernelBodies.h"

#include "ir/ShapeInference.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace remat::runtime::cpu::detail {

namespace {

/// Rows of this many elements or more are worth a thread chunk each.
constexpr int64_t kRowGrainElements = 16 * 1024;

int64_t rowGrain(int64_t rowElements) {
  return std::max<int64_t>(1, kRowGrainElements /
                                  std::max<int64_t>(rowElements, 1));
}

/// The [outer, n, inner] view of \p dims around \p axis.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView viewAround(ArrayRef<int64_t> dims, unsigned axis) {
  AxisView view;
  view.outer = product(dims.take_front(axis));
  view.n = dims[axis];
  view.inner = product(dims.drop_front(axis + 1));
  return view;
}

/// \returns max(a, b), ignoring a NaN b (a NaN anywhere still poisons the
/// sum of exponentials, so the row comes out NaN).
template <typename T> inline T maxOf(T a, T b) { return b > a ? b : a; }

/// The max of the row x[0..n), n > 0, as maxOf folds it from x[0]; in f32
/// eight lanes at a time when the order cannot matter (orderFreeMaxF32).
template <typename T> T rowMax(const T *x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    float max;
    if (orderFreeMaxF32(x, n, max))
      return max;
  }
  T m = x[0];
  for (int64_t j = 1; j < n; ++j)
    m = maxOf(m, x[j]);
  return m;
}

/// For the [n, inner] slab at \p x, computes per column the max over the n
/// rows (folded in row order) and the LaneSum of exp(x - max). \p mx and \p sum
/// have \p inner entries.
template <typename T>
void columnStats(const T *x, int64_t n, int64_t inner, T *mx, T *sum) {
  if (inner == 1) {
    T m = n > 0 ? rowMax(x, n) : -std::numeric_limits<T>::infinity();
    *mx = m;
    *sum = expShiftedLaneSum(x, m, static_cast<T *>(nullptr), n);
    return;
  }
  for (int64_t i = 0; i < inner; ++i)
    mx[i] = n > 0 ? x[i] : -std::numeric_limits<T>::infinity();
  for (int64_t j = 1; j < n; ++j)
    for (int64_t i = 0; i < inner; ++i)
      mx[i] = maxOf(mx[i], x[j * inner + i]);
  // Per column, the LaneSum of its exponentials: row j adds to lane j % 8.
  std::vector<cuda::body::LaneSum<T>> lanes(inner);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < inner; ++i)
      lanes[i].add(j, expOf(x[j * inner + i] - mx[i]));
  for (int64_t i = 0; i < inner; ++i)
    sum[i] = lanes[i].total();
}

//===----------------------------------------------------------------------===//
// Softmax and LogSoftmax
//===----------------------------------------------------------------------===//

/// Softmax over one [n, inner] slab: y = exp(x - max) / sum, as ONNX's
/// reference computes it. \p y may alias \p x.
template <typename T>
void softmaxSlab(const T *x, T *y, int64_t n, int64_t inner,
                 std::vector<T> &scratch) {
  if (inner == 1) {
    T m = rowMax(x, n);
    // y = exp(x - m) (y may be x: element j reads only x[j]) and its sum.
    T s = expShiftedLaneSum(x, m, y, n);
    for (int64_t j = 0; j < n; ++j)
      y[j] = y[j] / s;
    return;
  }
  scratch.resize(2 * inner);
  T *mx = scratch.data(), *sum = mx + inner;
  for (int64_t i = 0; i < inner; ++i)
    mx[i] = x[i];
  for (int64_t j = 1; j < n; ++j)
    for (int64_t i = 0; i < inner; ++i)
      mx[i] = maxOf(mx[i], x[j * inner + i]);
  std::vector<cuda::body::LaneSum<T>> lanes(inner);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < inner; ++i) {
      T e = expOf(x[j * inner + i] - mx[i]);
      y[j * inner + i] = e;
      lanes[i].add(j, e);
    }
  for (int64_t i = 0; i < inner; ++i)
    sum[i] = lanes[i].total();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < inner; ++i)
      y[j * inner + i] = y[j * inner + i] / sum[i];
}

/// LogSoftmax over one slab: y = (x - max) - log(sum). \p y may alias \p x.
template <typename T>
void logSoftmaxSlab(const T *x, T *y, int64_t n, int64_t inner,
                    std::vector<T> &scratch) {
  scratch.resize(2 * inner);
  T *mx = scratch.data(), *sum = mx + inner;
  columnStats(x, n, inner, mx, sum);
  for (int64_t i = 0; i < inner; ++i)
    sum[i] = std::log(sum[i]);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < inner; ++i)
      y[j * inner + i] = (x[j * inner + i] - mx[i]) - sum[i];
}

} // namespace

Expected<Kernel> selectSoftmax(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  DType dtype = type.getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "operand", dtype, "f32, f64");
  unsigned axis = normalizeAxis(node.getAttrs().getInt("axis").value_or(-1),
                                type.getRank());
  AxisView view = viewAround(type.getDims(), axis);
  bool isLog = node.getOp() == ir::OpKind::LogSoftmax;
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [view, isLog](const KernelContext &ctx) -> Error {
      const T *x = ctx.inputs[0].getData<T>();
      T *y = ctx.outputs[0].getData<T>();
      if (view.n == 0)
        return Error::success();
      int64_t slab = view.n * view.inner;
      ctx.parallel.run(view.outer, rowGrain(slab),
                       [&](int64_t begin, int64_t end) {
                         std::vector<T> scratch;
                         for (int64_t o = begin; o < end; ++o) {
                           if (isLog)
                             logSoftmaxSlab(x + o * slab, y + o * slab, view.n,
                                            view.inner, scratch);
                           else
                             softmaxSlab(x + o * slab, y + o * slab, view.n,
                                         view.inner, scratch);
                         }
                       });
      return Error::success();
    };
  });
}

//===----------------------------------------------------------------------===//
// remat.SoftmaxGrad
//===----------------------------------------------------------------------===//

namespace {

/// remat.SoftmaxGrad of \p rows contiguous rows of \p n elements:
/// cuda::body::softmaxGradColumn per row, four rows' sums as independent
/// chains (the same additions in the same order per row). \p dx may alias
/// \p dy or \p y: each row is read whole before it is written.
template <typename T>
void softmaxGradRows(const T *dy, const T *y, T *dx, int64_t rows, int64_t n) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T *g0 = dy + r * n, *g1 = g0 + n, *g2 = g1 + n, *g3 = g2 + n;
    const T *y0 = y + r * n, *y1 = y0 + n, *y2 = y1 + n, *y3 = y2 + n;
    T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
    for (int64_t j = 0; j < n; ++j) {
      s0 = s0 + g0[j] * y0[j];
      s1 = s1 + g1[j] * y1[j];
      s2 = s2 + g2[j] * y2[j];
      s3 = s3 + g3[j] * y3[j];
    }
    const T sums[] = {s0, s1, s2, s3};
    for (int64_t k = 0; k < 4; ++k) {
      const T *g = dy + (r + k) * n, *yr = y + (r + k) * n;
      T *out = dx + (r + k) * n, s = sums[k];
      for (int64_t j = 0; j < n; ++j)
        out[j] = yr[j] * (g[j] - s);
    }
  }
  for (; r < rows; ++r)
    cuda::body::softmaxGradColumn(dy + r * n, y + r * n, dx + r * n, n, 1);
}

/// remat.SoftmaxGrad of one [n, inner] slab, all columns together, each
/// summed over n in softmaxGradColumn's order.
template <typename T>
void softmaxGradSlab(const T *dy, const T *y, T *dx, int64_t n, int64_t inner,
                     std::vector<T> &sums) {
  sums.assign(inner, T(0));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < inner; ++i)
      sums[i] = sums[i] + dy[j * inner + i] * y[j * inner + i];
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < inner; ++i)
      dx[j * inner + i] = y[j * inner + i] * (dy[j * inner + i] - sums[i]);
}

} // namespace

Expected<Kernel> selectSoftmaxGrad(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  DType dtype = type.getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "dy", dtype, "f32, f64");
  unsigned axis = normalizeAxis(node.getAttrs().getInt("axis").value_or(-1),
                                type.getRank());
  AxisView view = viewAround(type.getDims(), axis);
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [view](const KernelContext &ctx) -> Error {
      const T *dy = ctx.inputs[0].getData<T>();
      const T *y = ctx.inputs[1].getData<T>();
      T *dx = ctx.outputs[0].getData<T>();
      if (view.n == 0)
        return Error::success();
      if (view.inner == 1) {
        ctx.parallel.run(
            view.outer, rowGrain(view.n), [&](int64_t begin, int64_t end) {
              int64_t at = begin * view.n;
              softmaxGradRows(dy + at, y + at, dx + at, end - begin, view.n);
            });
        return Error::success();
      }
      int64_t slab = view.n * view.inner;
      ctx.parallel.run(
          view.outer, rowGrain(slab), [&](int64_t begin, int64_t end) {
            std::vector<T> sums;
            for (int64_t o = begin; o < end; ++o)
              softmaxGradSlab(dy + o * slab, y + o * slab, dx + o * slab,
                              view.n, view.inner, sums);
          });
      return Error::success();
    };
  });
}

//===----------------------------------------------------------------------===//
// LayerNormalization
//===----------------------------------------------------------------------===//

namespace {

/// Rows whose LayerNormalization statistics are computed together.
constexpr int64_t kStatRows = 4;

/// The mean and 1 / sqrt(variance + eps) of \p group (at most kStatRows)
/// rows of \p n elements at \p x, each row summed in index order as
/// cuda::body::layerNormRow does. A full group runs its rows' additions as
/// four independent chains, not one chain after another: the same
/// operations in the same order per row, four times the throughput.
template <typename T, typename U>
void layerNormStats(const T *x, int64_t n, int64_t group, U count, U eps,
                    U *mean, U *invStd) {
  if (group == kStatRows) {
    const T *x0 = x, *x1 = x + n, *x2 = x + 2 * n, *x3 = x + 3 * n;
    U s0 = U(0), s1 = U(0), s2 = U(0), s3 = U(0);
    for (int64_t i = 0; i < n; ++i) {
      s0 += static_cast<U>(x0[i]);
      s1 += static_cast<U>(x1[i]);
      s2 += static_cast<U>(x2[i]);
      s3 += static_cast<U>(x3[i]);
    }
    U m0 = s0 / count, m1 = s1 / count, m2 = s2 / count, m3 = s3 / count;
    U q0 = U(0), q1 = U(0), q2 = U(0), q3 = U(0);
    for (int64_t i = 0; i < n; ++i) {
      U d0 = static_cast<U>(x0[i]) - m0, d1 = static_cast<U>(x1[i]) - m1;
      U d2 = static_cast<U>(x2[i]) - m2, d3 = static_cast<U>(x3[i]) - m3;
      q0 += d0 * d0;
      q1 += d1 * d1;
      q2 += d2 * d2;
      q3 += d3 * d3;
    }
    const U means[] = {m0, m1, m2, m3}, squares[] = {q0, q1, q2, q3};
    for (int64_t k = 0; k < kStatRows; ++k) {
      mean[k] = means[k];
      U variance = squares[k] / count;
      invStd[k] = U(1) / std::sqrt(variance + eps);
    }
    return;
  }
  for (int64_t k = 0; k < group; ++k)
    cuda::body::layerNormRowStats(x + k * n, n, count, eps, mean[k], invStd[k]);
}

/// X of element type T normalized in compute type U, statistics stored as S.
/// Follows ONNX's function body: Mean = ReduceMean(X), D = X - Mean,
/// Var = ReduceMean(D * D), InvStdDev = 1 / Sqrt(Var + epsilon),
/// Normalized = Cast<T>(D * InvStdDev), Y = Normalized * Scale + B.
template <typename T, typename U, typename S> struct LayerNormKernel {
  int64_t rows = 0, n = 0;
  float epsilon = 0;
  /// How Scale and B broadcast to the normalized shape; null when they
  /// already have it.
  std::optional<BroadcastPlan<1>> scalePlan, biasPlan;
  bool hasBias = false;

  /// \returns \p tensor broadcast to n elements, in \p storage if needed.
  static const T *expand(const std::optional<BroadcastPlan<1>> &plan,
                         const Tensor &tensor, std::vector<T> &storage) {
    const T *data = tensor.getData<T>();
    if (!plan)
      return data;
    storage.resize(plan->numElements);
    forEachRun(*plan, 0, plan->numElements,
               [&](int64_t o, const std::array<int64_t, 1> &off,
                   const std::array<int64_t, 1> &stride, int64_t count) {
                 for (int64_t i = 0; i < count; ++i)
                   storage[o + i] = data[off[0] + i * stride[0]];
               });
    return storage.data();
  }

  Error operator()(const KernelContext &ctx) const {
    const T *x = ctx.inputs[0].getData<T>();
    std::vector<T> scaleStorage, biasStorage;
    const T *scale = expand(scalePlan, ctx.inputs[1], scaleStorage);
    const T *bias =
        hasBias ? expand(biasPlan, ctx.inputs[2], biasStorage) : nullptr;
    T *y = ctx.outputs[0].getData<T>();
    S *meanOut = ctx.outputs.size() > 1 ? ctx.outputs[1].getData<S>() : nullptr;
    S *invStdOut =
        ctx.outputs.size() > 2 ? ctx.outputs[2].getData<S>() : nullptr;
    const U eps = static_cast<U>(epsilon);
    const U count = static_cast<U>(n);
    ctx.parallel.run(rows, rowGrain(n), [&](int64_t begin, int64_t end) {
      for (int64_t r0 = begin; r0 < end; r0 += kStatRows) {
        int64_t group = std::min<int64_t>(kStatRows, end - r0);
        U mean[kStatRows], invStd[kStatRows];
        layerNormStats(x + r0 * n, n, group, count, eps, mean, invStd);
        for (int64_t k = 0; k < group; ++k) {
          int64_t r = r0 + k;
          const T *xr = x + r * n;
          T *yr = y + r * n;
          if (meanOut)
            meanOut[r] = static_cast<S>(mean[k]);
          if (invStdOut)
            invStdOut[r] = static_cast<S>(invStd[k]);
          // yr may alias xr: each element is read before it is written.
          // Two loops, so that neither tests for the bias per element.
          U mu = mean[k], inv = invStd[k];
          auto scaled = [&](int64_t i) {
            return static_cast<T>((static_cast<U>(xr[i]) - mu) * inv) *
                   scale[i];
          };
          if (bias)
            for (int64_t i = 0; i < n; ++i)
              yr[i] = scaled(i) + bias[i];
          else
            for (int64_t i = 0; i < n; ++i)
              yr[i] = scaled(i);
        }
      }
    });
    return Error::success();
  }
};

} // namespace

Expected<Kernel> selectLayerNormalization(const ir::Node &node) {
  const ir::TensorType &xType = node.getOperand(0)->getType();
  DType dtype = xType.getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "X", dtype, "f32, f64");
  const ir::AttrList &attrs = node.getAttrs();
  unsigned axis =
      normalizeAxis(attrs.getInt("axis").value_or(-1), xType.getRank());
  float epsilon = attrs.getFloat("epsilon").value_or(1e-5f);
  int64_t stashType = attrs.getInt("stash_type").value_or(1);
  // Note [Unsupported on the CPU]: statistics in the wider of X and the
  // stash type.
  bool computeInF64 =
      dtype == DType::F64 || stashType == ir::onnxCode(DType::F64);
  DType statsDType = node.getNumResults() > 1
                         ? node.getResult(1)->getType().getDType()
                         : dtype;
  if (!isF32OrF64(statsDType))
    return unsupportedDType(node, "Mean/InvStdDev", statsDType, "f32, f64");

  ArrayRef<int64_t> normalized = xType.getDims().drop_front(axis);
  auto planFor = [&](unsigned i) -> std::optional<BroadcastPlan<1>> {
    ArrayRef<int64_t> dims = node.getOperand(i)->getType().getDims();
    if (dims == normalized)
      return std::nullopt;
    return makeBroadcastPlan<1>(normalized, {dims});
  };

  auto build = [&](auto xTag, auto uTag, auto sTag) -> Kernel {
    using T = decltype(xTag);
    using U = decltype(uTag);
    using S = decltype(sTag);
    LayerNormKernel<T, U, S> kernel;
    kernel.rows = product(xType.getDims().take_front(axis));
    kernel.n = product(normalized);
    kernel.epsilon = epsilon;
    kernel.scalePlan = planFor(1);
    kernel.hasBias = node.getNumOperands() == 3;
    if (kernel.hasBias)
      kernel.biasPlan = planFor(2);
    return kernel;
  };
  auto withStats = [&](auto xTag, auto uTag) -> Kernel {
    if (statsDType == DType::F32)
      return build(xTag, uTag, float());
    return build(xTag, uTag, double());
  };
  if (dtype == DType::F64)
    return withStats(double(), double());
  if (computeInF64)
    return withStats(float(), double());
  return withStats(float(), float());
}

//===----------------------------------------------------------------------===//
// remat.LayerNormalizationGrad
//===----------------------------------------------------------------------===//

namespace {

/// remat.LayerNormalizationGrad of \p rows rows of \p n elements:
/// cuda::body::layerNormGradRow per row, four rows' sums as eight
/// independent chains (the same operations in the same order per row).
/// \p dx may alias \p dy or \p x: each row is read whole before it is
/// written.
template <typename T>
void layerNormGradRows(const T *dy, const T *x, const T *scale, const T *mean,
                       const T *invStd, T *dx, int64_t rows, int64_t n) {
  const T count = static_cast<T>(n);
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T *g0 = dy + r * n, *g1 = g0 + n, *g2 = g1 + n, *g3 = g2 + n;
    const T *x0 = x + r * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
    const T mu0 = mean[r], mu1 = mean[r + 1], mu2 = mean[r + 2],
            mu3 = mean[r + 3];
    const T in0 = invStd[r], in1 = invStd[r + 1], in2 = invStd[r + 2],
            in3 = invStd[r + 3];
    T a0 = T(0), a1 = T(0), a2 = T(0), a3 = T(0);
    T b0 = T(0), b1 = T(0), b2 = T(0), b3 = T(0);
    for (int64_t i = 0; i < n; ++i) {
      T d0 = g0[i] * scale[i], d1 = g1[i] * scale[i];
      T d2 = g2[i] * scale[i], d3 = g3[i] * scale[i];
      a0 = a0 + d0;
      a1 = a1 + d1;
      a2 = a2 + d2;
      a3 = a3 + d3;
      b0 = b0 + d0 * ((x0[i] - mu0) * in0);
      b1 = b1 + d1 * ((x1[i] - mu1) * in1);
      b2 = b2 + d2 * ((x2[i] - mu2) * in2);
      b3 = b3 + d3 * ((x3[i] - mu3) * in3);
    }
    const T sums[] = {a0, a1, a2, a3}, sumsXhat[] = {b0, b1, b2, b3};
    for (int64_t k = 0; k < 4; ++k) {
      int64_t at = (r + k) * n;
      cuda::body::layerNormGradRowMap(dy + at, x + at, scale, dx + at, n,
                                      mean[r + k], invStd[r + k],
                                      sums[k] / count, sumsXhat[k] / count);
    }
  }
  for (; r < rows; ++r)
    cuda::body::layerNormGradRow(dy + r * n, x + r * n, scale, dx + r * n, n,
                                 mean[r], invStd[r]);
}

} // namespace

Expected<Kernel> selectLayerNormalizationGrad(const ir::Node &node) {
  const ir::TensorType &xType = node.getOperand(1)->getType();
  DType dtype = xType.getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "X", dtype, "f32, f64");
  unsigned axis = normalizeAxis(node.getAttrs().getInt("axis").value_or(-1),
                                xType.getRank());
  int64_t rows = product(xType.getDims().take_front(axis));
  int64_t n = product(xType.getDims().drop_front(axis));
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [rows, n](const KernelContext &ctx) -> Error {
      const T *dy = ctx.inputs[0].getData<T>();
      const T *x = ctx.inputs[1].getData<T>();
      const T *scale = ctx.inputs[2].getData<T>();
      const T *mean = ctx.inputs[3].getData<T>();
      const T *invStd = ctx.inputs[4].getData<T>();
      T *dx = ctx.outputs[0].getData<T>();
      ctx.parallel.run(rows, rowGrain(n), [&](int64_t begin, int64_t end) {
        layerNormGradRows(dy + begin * n, x + begin * n, scale, mean + begin,
                          invStd + begin, dx + begin * n, end - begin, n);
      });
      return Error::success();
    };
  });
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss
//===----------------------------------------------------------------------===//

namespace {

enum class Reduction { None, Sum, Mean };

/// scores [N, C, d1..dk] viewed as [N, C, D]; labels [N, D].
template <typename T, typename L> struct SoftmaxCrossEntropyKernel {
  int64_t batch = 0, classes = 0, spatial = 1;
  Reduction reduction = Reduction::Mean;
  std::optional<int64_t> ignoreIndex;
  bool hasWeights = false;

  Error operator()(const KernelContext &ctx) const {
    const T *scores = ctx.inputs[0].getData<T>();
    const L *labels = ctx.inputs[1].getData<L>();
    const T *weights = hasWeights ? ctx.inputs[2].getData<T>() : nullptr;
    T *logProb = ctx.outputs.size() > 1 ? ctx.outputs[1].getData<T>() : nullptr;
    int64_t count = batch * spatial;

    // Labels outside [0, C) are undefined in ONNX unless ignored.
    for (int64_t i = 0; i < count; ++i) {
      int64_t label = labels[i];
      if (ignoreIndex && label == *ignoreIndex)
        continue;
      if (label < 0 || label >= classes)
        return nodeError(
            ctx.node,
            "label " + Twine(label) + " at position " + Twine(i) +
                " is outside [0, " + Twine(classes) + ")" +
                (ignoreIndex ? " and is not ignore_index " + Twine(*ignoreIndex)
                             : Twine("")));
    }

    // Per-element losses (into the output when not reduced), and the
    // per-element weights for "mean".
    std::vector<T> lossStorage;
    T *losses = reduction == Reduction::None
                    ? ctx.outputs[0].getData<T>()
                    : (lossStorage.resize(count), lossStorage.data());
    int64_t slab = classes * spatial;
    ctx.parallel.run(batch, rowGrain(slab), [&](int64_t begin, int64_t end) {
      std::vector<T> scratch(2 * spatial);
      T *mx = scratch.data(), *lse = mx + spatial;
      for (int64_t b = begin; b < end; ++b) {
        const T *x = scores + b * slab;
        columnStats(x, classes, spatial, mx, lse);
        for (int64_t d = 0; d < spatial; ++d)
          lse[d] = std::log(lse[d]);
        if (logProb && spatial == 1) {
          // One contiguous row (scores [N, C]): a loop that vectorises,
          // the same operations.
          T *lp = logProb + b * slab;
          const T m = mx[0], l = lse[0];
          for (int64_t c = 0; c < classes; ++c)
            lp[c] = (x[c] - m) - l;
        } else if (logProb) {
          T *lp = logProb + b * slab;
          for (int64_t c = 0; c < classes; ++c)
            for (int64_t d = 0; d < spatial; ++d)
              lp[c * spatial + d] = (x[c * spatial + d] - mx[d]) - lse[d];
        }
        for (int64_t d = 0; d < spatial; ++d) {
          int64_t i = b * spatial + d;
          int64_t label = labels[i];
          if (ignoreIndex && label == *ignoreIndex) {
            losses[i] = T(0);
            continue;
          }
          T logP = (x[label * spatial + d] - mx[d]) - lse[d];
          losses[i] = weights ? -logP * weights[label] : -logP;
        }
      }
    });
    if (reduction == Reduction::None)
      return Error::success();

    T total = T(0);
    for (int64_t i = 0; i < count; ++i)
      total += losses[i];
    T *out = ctx.outputs[0].getData<T>();
    if (reduction == Reduction::Sum) {
      *out = total;
      return Error::success();
    }
    // Mean: divided by the total weight of the non-ignored elements (their
    // count without weights). All ignored gives 0 / 0 = NaN, as ONNX's
    // reference implementation does.
    if (weights) {
      T weightSum = T(0);
      for (int64_t i = 0; i < count; ++i) {
        int64_t label = labels[i];
        if (ignoreIndex && label == *ignoreIndex)
          continue;
        weightSum += weights[label];
      }
      *out = total / weightSum;
      return Error::success();
    }
    int64_t kept = count;
    if (ignoreIndex)
      for (int64_t i = 0; i < count; ++i)
        kept -= labels[i] == *ignoreIndex;
    *out = total / static_cast<T>(kept);
    return Error::success();
  }
};

/// remat.SoftmaxCrossEntropyGrad: out = (exp(log_prob) - onehot(labels)) *
/// scale over log_prob [batch, classes, spatial], labels and scale [batch,
/// spatial]. A label outside [0, classes) matches no class, as Equal does.
template <typename T, typename L> struct CrossEntropyGradKernel {
  int64_t batch = 0, classes = 0, spatial = 0;

  Error operator()(const KernelContext &ctx) const {
    const T *logProb = ctx.inputs[0].getData<T>();
    const L *labels = ctx.inputs[1].getData<L>();
    const T *scale = ctx.inputs[2].getData<T>();
    T *out = ctx.outputs[0].getData<T>();
    if (batch * classes * spatial == 0)
      return Error::success();
    // Tasks are (n, c) columns of `spatial` elements each.
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / spatial);
    ctx.parallel.run(batch * classes, grain, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end;) {
        int64_t n = task / classes, c0 = task % classes;
        int64_t c1 = std::min(classes, c0 + (end - task));
        const L *rowLabels = labels + n * spatial;
        const T *rowScale = scale + n * spatial;
        if (spatial == 1) {
          // A contiguous run of classes: the exps eight lanes at a time,
          // then crossEntropyGrad's subtraction and product on them.
          int64_t base = n * classes;
          expArray(logProb + base + c0, out + base + c0, c1 - c0);
          int64_t label = static_cast<int64_t>(rowLabels[0]);
          for (int64_t c = c0; c < c1; ++c)
            out[base + c] =
                (out[base + c] - (c == label ? T(1) : T(0))) * rowScale[0];
        } else {
          for (int64_t c = c0; c < c1; ++c) {
            int64_t base = (n * classes + c) * spatial;
            for (int64_t s = 0; s < spatial; ++s)
              out[base + s] = cuda::body::crossEntropyGrad(
                  logProb[base + s], static_cast<int64_t>(rowLabels[s]) == c,
                  rowScale[s]);
          }
        }
        task += c1 - c0;
      }
    });
    return Error::success();
  }
};

} // namespace

Expected<Kernel> selectSoftmaxCrossEntropyGrad(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  DType dtype = type.getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "log_prob", dtype, "f32, f64");
  DType labelDType = node.getOperand(1)->getType().getDType();
  auto build = [&](auto tTag, auto lTag) -> Kernel {
    CrossEntropyGradKernel<decltype(tTag), decltype(lTag)> kernel;
    kernel.batch = type.getDim(0);
    kernel.classes = type.getDim(1);
    kernel.spatial = product(type.getDims().drop_front(2));
    return kernel;
  };
  return dispatchFloat(dtype, [&](auto tTag) -> Kernel {
    if (labelDType == DType::I64)
      return build(tTag, int64_t());
    return build(tTag, int32_t());
  });
}

Expected<Kernel> selectSoftmaxCrossEntropyLoss(const ir::Node &node) {
  const ir::TensorType &scoresType = node.getOperand(0)->getType();
  DType dtype = scoresType.getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "scores", dtype, "f32, f64");
  DType labelDType = node.getOperand(1)->getType().getDType();
  const ir::AttrList &attrs = node.getAttrs();
  std::string reductionName = attrs.getString("reduction").value_or("mean");
  Reduction reduction = reductionName == "none"  ? Reduction::None
                        : reductionName == "sum" ? Reduction::Sum
                                                 : Reduction::Mean;
  std::optional<int64_t> ignoreIndex = attrs.getInt("ignore_index");

  auto build = [&](auto tTag, auto lTag) -> Kernel {
    SoftmaxCrossEntropyKernel<decltype(tTag), decltype(lTag)> kernel;
    kernel.batch = scoresType.getDim(0);
    kernel.classes = scoresType.getDim(1);
    kernel.spatial = product(scoresType.getDims().drop_front(2));
    kernel.reduction = reduction;
    kernel.ignoreIndex = ignoreIndex;
    kernel.hasWeights = node.getNumOperands() == 3;
    return kernel;
  };
  return dispatchFloat(dtype, [&](auto tTag) -> Kernel {
    if (labelDType == DType::I64)
      return build(tTag, int64_t());
    return build(tTag, int32_t());
  });
}

} // namespace remat::runtime::cpu::detail
