//===- runtime/cpu/Conv.cpp - Conv and ConvTranspose ----------------------===//
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
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelImpl.h"

#include "ir/ShapeInference.h"

#include <algorithm>

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

} // namespace

Expected<Kernel> selectConv(const ir::Node &node) {
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
