//===- runtime/cpu/Conv.cpp - Conv, ConvTranspose and pooling -------------===//
//
// Direct N-d convolution (any number of spatial dims, strides, pads,
// dilations, groups) in f32 and f64. Each result element is one task's sum,
// accumulated in the element type in a fixed order (input channel, then
// kernel positions in row-major order), then the bias is added; tasks never
// share a sum, so the result does not depend on the thread count.
//
// ConvTranspose, the gradient of Conv by its input, is computed in gather
// form: result position o takes input position i at kernel offset k where
// i * stride - padBegin + k * dilation == o, summed over the input channels
// of its group and over k in the same fixed order.
//
// MaxPool and AveragePool (issue 40) take one result element per task too,
// scanning its window's positions inside X in row-major order: MaxPool
// keeps the first maximum (a later NaN replaces it, as torch's CPU kernel),
// AveragePool sums and divides once by the count. Their gradients
// remat.MaxPoolGrad and remat.AveragePoolGrad gather: each element of dx sums,
// over the windows that cover it in row-major order, the window's dy when
// its maximum is that element (MaxPool), or dy / count (AveragePool).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelImpl.h"

#include "ir/ShapeInference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace remat::runtime::cpu::detail {

namespace {

/// Everything a convolution kernel needs, from the node's types and
/// geometry.
struct ConvPlan {
  int64_t batch = 0, inChannels = 0, outChannels = 0, group = 1;
  Dims inSpatial, outSpatial, kernel, strides, dilations, padBegin;
  bool hasBias = false;
  bool transpose = false;
};

/// Advances the row-major multi-index \p index over \p dims; \returns false
/// after the last one.
inline bool nextIndex(Dims &index, ArrayRef<int64_t> dims) {
  for (size_t d = index.size(); d > 0; --d) {
    if (++index[d - 1] < dims[d - 1])
      return true;
    index[d - 1] = 0;
  }
  return false;
}

template <typename T> Kernel makeConvKernel(ConvPlan plan) {
  return [plan](const KernelContext &ctx) -> Error {
    const T *x = ctx.inputs[0].getData<T>();
    const T *w = ctx.inputs[1].getData<T>();
    const T *bias = plan.hasBias ? ctx.inputs[2].getData<T>() : nullptr;
    T *y = ctx.outputs[0].getData<T>();
    size_t rank = plan.kernel.size();
    int64_t outSize = product(plan.outSpatial);
    int64_t inSize = product(plan.inSpatial);
    int64_t kernelSize = product(plan.kernel);
    Dims inStrides = rowMajorStrides(plan.inSpatial);
    // Channels per group: of the operand X and of the result.
    int64_t xGroup = plan.inChannels / plan.group;
    int64_t yGroup = plan.outChannels / plan.group;
    int64_t total = plan.batch * plan.outChannels * outSize;
    int64_t grain = std::max<int64_t>(
        1, 4096 / std::max<int64_t>(1, xGroup * kernelSize));
    ctx.parallel.run(total, grain, [&](int64_t begin, int64_t end) {
      Dims pos(rank), k(rank);
      for (int64_t e = begin; e < end; ++e) {
        int64_t o = e % outSize;
        int64_t m = (e / outSize) % plan.outChannels;
        int64_t n = e / (outSize * plan.outChannels);
        int64_t rest = o;
        for (size_t d = rank; d > 0; --d) {
          pos[d - 1] = rest % plan.outSpatial[d - 1];
          rest /= plan.outSpatial[d - 1];
        }
        int64_t g = m / yGroup;
        T acc = T(0);
        for (int64_t c = 0; c < xGroup && kernelSize > 0; ++c) {
          int64_t xc = g * xGroup + c;
          const T *xPlane = x + (n * plan.inChannels + xc) * inSize;
          // Conv: W[m, c, k]; ConvTranspose: W[xc, m - g * yGroup, k].
          const T *wKernel =
              !plan.transpose
                  ? w + (m * xGroup + c) * kernelSize
                  : w + (xc * yGroup + (m - g * yGroup)) * kernelSize;
          std::fill(k.begin(), k.end(), 0);
          int64_t kk = 0;
          do {
            int64_t offset = 0;
            bool inside = true;
            for (size_t d = 0; d < rank && inside; ++d) {
              int64_t i;
              if (!plan.transpose) {
                i = pos[d] * plan.strides[d] - plan.padBegin[d] +
                    k[d] * plan.dilations[d];
              } else {
                int64_t t = pos[d] + plan.padBegin[d] - k[d] * plan.dilations[d];
                if (t < 0 || t % plan.strides[d] != 0) {
                  inside = false;
                  break;
                }
                i = t / plan.strides[d];
              }
              inside = i >= 0 && i < plan.inSpatial[d];
              offset += i * inStrides[d];
            }
            if (inside)
              acc += xPlane[offset] * wKernel[kk];
            ++kk;
          } while (nextIndex(k, plan.kernel));
        }
        if (bias)
          acc += bias[m];
        y[e] = acc;
      }
    });
    return Error::success();
  };
}

/// Everything a pooling kernel needs: the geometry over spatial dims and the
/// number of [N, C] planes.
struct PoolPlan {
  OpKind op = OpKind::MaxPool;
  int64_t planes = 0;
  Dims inSpatial, outSpatial, kernel, strides, dilations, padBegin, padEnd;
  bool countIncludePad = false;
};

/// The window of pooled position \p pos over one plane: calls \p fn(offset)
/// for each of its positions inside the input, in row-major kernel order;
/// \returns the window's count (inside positions, or those inside the padded
/// input when countIncludePad).
template <typename Fn>
int64_t forEachInWindow(const PoolPlan &plan, ArrayRef<int64_t> pos,
                        ArrayRef<int64_t> inStrides, Fn &&fn) {
  size_t rank = plan.kernel.size();
  Dims k(rank, 0);
  int64_t count = 0;
  do {
    int64_t offset = 0;
    bool inside = true, insidePadded = true;
    for (size_t d = 0; d < rank; ++d) {
      int64_t i = pos[d] * plan.strides[d] - plan.padBegin[d] +
                  k[d] * plan.dilations[d];
      inside = inside && i >= 0 && i < plan.inSpatial[d];
      insidePadded = insidePadded && i < plan.inSpatial[d] + plan.padEnd[d];
      offset += i * inStrides[d];
    }
    if (inside)
      fn(offset);
    if (plan.countIncludePad ? insidePadded : inside)
      ++count;
  } while (nextIndex(k, plan.kernel));
  return count;
}

/// The offset of the maximum of window \p pos in \p plane (the first of
/// equals; a NaN replaces it), or -1 for a window of pads only.
template <typename T>
int64_t windowArgMax(const PoolPlan &plan, const T *plane,
                     ArrayRef<int64_t> pos, ArrayRef<int64_t> inStrides) {
  int64_t best = -1;
  forEachInWindow(plan, pos, inStrides, [&](int64_t offset) {
    if (best < 0 || plane[offset] > plane[best] || std::isnan(plane[offset]))
      best = offset;
  });
  return best;
}

/// Splits row-major \p linear over \p dims into \p index.
inline void unflatten(int64_t linear, ArrayRef<int64_t> dims, Dims &index) {
  for (size_t d = dims.size(); d > 0; --d) {
    index[d - 1] = linear % dims[d - 1];
    linear /= dims[d - 1];
  }
}

template <typename T> Kernel makePoolKernel(PoolPlan plan) {
  return [plan](const KernelContext &ctx) -> Error {
    const T *x = ctx.inputs[0].getData<T>();
    T *y = ctx.outputs[0].getData<T>();
    size_t rank = plan.kernel.size();
    int64_t outSize = product(plan.outSpatial);
    int64_t inSize = product(plan.inSpatial);
    Dims inStrides = rowMajorStrides(plan.inSpatial);
    int64_t grain = std::max<int64_t>(1, 4096 / product(plan.kernel));
    ctx.parallel.run(
        plan.planes * outSize, grain, [&](int64_t begin, int64_t end) {
          Dims pos(rank);
          for (int64_t e = begin; e < end; ++e) {
            const T *plane = x + (e / outSize) * inSize;
            unflatten(e % outSize, plan.outSpatial, pos);
            if (plan.op == OpKind::MaxPool) {
              int64_t best = windowArgMax(plan, plane, pos, inStrides);
              y[e] =
                  best < 0 ? -std::numeric_limits<T>::infinity() : plane[best];
              continue;
            }
            T sum = T(0);
            int64_t count =
                forEachInWindow(plan, pos, inStrides,
                                [&](int64_t offset) { sum += plane[offset]; });
            y[e] = sum / static_cast<T>(count);
          }
        });
    return Error::success();
  };
}

template <typename T> Kernel makePoolGradKernel(PoolPlan plan) {
  return [plan](const KernelContext &ctx) -> Error {
    const T *dy = ctx.inputs[0].getData<T>();
    const T *x =
        plan.op == OpKind::MaxPoolGrad ? ctx.inputs[1].getData<T>() : nullptr;
    T *dx = ctx.outputs[0].getData<T>();
    size_t rank = plan.kernel.size();
    int64_t outSize = product(plan.outSpatial);
    int64_t inSize = product(plan.inSpatial);
    Dims inStrides = rowMajorStrides(plan.inSpatial);
    int64_t grain = std::max<int64_t>(1, 1024 / product(plan.kernel));
    ctx.parallel.run(
        plan.planes * inSize, grain, [&](int64_t begin, int64_t end) {
          Dims at(rank), lo(rank), hi(rank), box(rank), o(rank), pos(rank);
          for (int64_t e = begin; e < end; ++e) {
            int64_t p = e / inSize, self = e % inSize;
            unflatten(self, plan.inSpatial, at);
            // The pooled positions whose window may cover `at`.
            bool any = true;
            for (size_t d = 0; d < rank; ++d) {
              int64_t extent = plan.dilations[d] * (plan.kernel[d] - 1) + 1;
              int64_t from = at[d] + plan.padBegin[d] - extent + 1;
              lo[d] = std::max<int64_t>(0, from <= 0
                                               ? 0
                                               : (from + plan.strides[d] - 1) /
                                                     plan.strides[d]);
              hi[d] = std::min<int64_t>(plan.outSpatial[d] - 1,
                                        (at[d] + plan.padBegin[d]) /
                                            plan.strides[d]);
              box[d] = hi[d] - lo[d] + 1;
              any = any && box[d] > 0;
            }
            T acc = T(0);
            if (any) {
              std::fill(o.begin(), o.end(), 0);
              do {
                bool covers = true;
                int64_t outOffset = 0;
                for (size_t d = 0; d < rank; ++d) {
                  pos[d] = lo[d] + o[d];
                  covers = covers && (at[d] + plan.padBegin[d] -
                                      pos[d] * plan.strides[d]) %
                                             plan.dilations[d] ==
                                         0;
                  outOffset = outOffset * plan.outSpatial[d] + pos[d];
                }
                if (!covers)
                  continue;
                T g = dy[p * outSize + outOffset];
                if (plan.op == OpKind::MaxPoolGrad) {
                  if (windowArgMax(plan, x + p * inSize, pos, inStrides) ==
                      self)
                    acc += g;
                } else {
                  int64_t count =
                      forEachInWindow(plan, pos, inStrides, [](int64_t) {});
                  acc += g / static_cast<T>(count);
                }
              } while (nextIndex(o, box));
            }
            dx[e] = acc;
          }
        });
    return Error::success();
  };
}

/// MaxPool, AveragePool, remat.MaxPoolGrad and remat.AveragePoolGrad.
Expected<Kernel> selectPool(const ir::Node &node) {
  DType dtype = node.getOperand(0)->getType().getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "operands", dtype, "f32, f64");
  OpKind op = node.getOp();
  bool grad = op == OpKind::MaxPoolGrad || op == OpKind::AveragePoolGrad;
  // The pooled input: X, or the gradient's result.
  const ir::TensorType &x =
      grad ? node.getResult(0)->getType() : node.getOperand(0)->getType();
  auto geometry = ir::getPoolGeometry(node, x.getDims());
  if (!geometry)
    return geometry.takeError();
  PoolPlan plan;
  plan.op = op;
  plan.planes = x.getDim(0) * x.getDim(1);
  plan.inSpatial.assign(x.getDims().begin() + 2, x.getDims().end());
  plan.outSpatial.assign(geometry->resultDims.begin() + 2,
                         geometry->resultDims.end());
  plan.kernel.assign(geometry->kernel.begin(), geometry->kernel.end());
  plan.strides.assign(geometry->strides.begin(), geometry->strides.end());
  plan.dilations.assign(geometry->dilations.begin(), geometry->dilations.end());
  plan.padBegin.assign(geometry->padBegin.begin(), geometry->padBegin.end());
  plan.padEnd.assign(geometry->padEnd.begin(), geometry->padEnd.end());
  plan.countIncludePad = geometry->countIncludePad;
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return grad ? makePoolGradKernel<T>(plan) : makePoolKernel<T>(plan);
  });
}

} // namespace

Expected<Kernel> selectConv(const ir::Node &node) {
  switch (node.getOp()) {
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::MaxPoolGrad:
  case OpKind::AveragePoolGrad:
    return selectPool(node);
  default:
    break;
  }
  DType dtype = node.getOperand(0)->getType().getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "operands", dtype, "f32, f64");
  auto geometry = ir::getConvGeometry(node);
  if (!geometry)
    return geometry.takeError();
  const ir::TensorType &x = node.getOperand(0)->getType();
  ConvPlan plan;
  plan.transpose = node.getOp() == OpKind::ConvTranspose;
  plan.batch = x.getDim(0);
  plan.inChannels = x.getDim(1);
  plan.outChannels = geometry->resultDims[1];
  plan.group = geometry->group;
  plan.inSpatial.assign(x.getDims().begin() + 2, x.getDims().end());
  plan.outSpatial.assign(geometry->resultDims.begin() + 2,
                         geometry->resultDims.end());
  plan.kernel.assign(geometry->kernel.begin(), geometry->kernel.end());
  plan.strides.assign(geometry->strides.begin(), geometry->strides.end());
  plan.dilations.assign(geometry->dilations.begin(),
                        geometry->dilations.end());
  plan.padBegin.assign(geometry->padBegin.begin(), geometry->padBegin.end());
  plan.hasBias = node.getNumOperands() == 3;
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return makeConvKernel<T>(plan);
  });
}

} // namespace remat::runtime::cpu::detail
