//===- runtime/cuda/Conv.cpp - Conv, ConvTranspose and pooling ------------===//
//
// Direct convolution and pooling kernels over the geometry shape inference
// computes.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/RunnerImpl.h"

#include "ir/ShapeInference.h"

namespace remat::runtime::cuda::detail {

MaybeRunner selectConv(const ir::Node &node) {
  using ir::OpKind;
  switch (node.getOp()) {
  case OpKind::Conv:
  case OpKind::ConvTranspose: {
    ir::DType dtype = node.getOperand(0)->getType().getDType();
    auto geometry = ir::getConvGeometry(node);
    if (!geometry) {
      llvm::consumeError(geometry.takeError()); // the host kernel reports it
      return std::nullopt;
    }
    if ((dtype != ir::DType::F32 && dtype != ir::DType::F64) ||
        geometry->kernel.size() > size_t(body::kMaxRank))
      return std::nullopt;
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    body::ConvShape shape;
    shape.rank = int(geometry->kernel.size());
    shape.inChannels = inDims[1];
    shape.outChannels = geometry->resultDims[1];
    shape.group = geometry->group;
    shape.transpose = node.getOp() == OpKind::ConvTranspose;
    for (int d = 0; d < shape.rank; ++d) {
      shape.inSpatial[d] = inDims[2 + d];
      shape.outSpatial[d] = geometry->resultDims[2 + d];
      shape.kernel[d] = geometry->kernel[d];
      shape.strides[d] = geometry->strides[d];
      shape.dilations[d] = geometry->dilations[d];
      shape.padBegin[d] = geometry->padBegin[d];
    }
    ElemType type = *elemType(dtype);
    bool hasBias = node.getNumOperands() == 3;
    return Runner([&node, type, shape, hasBias](const RunContext &ctx,
                                               ArrayRef<Tensor> in,
                                               ArrayRef<Tensor> out) {
      return launched(launchConv(ctx.device.getStream(), type, in[0].getData(),
                                 in[1].getData(),
                                 hasBias ? in[2].getData() : nullptr,
                                 out[0].getData(), shape,
                                 out[0].getNumElements()),
                      node);
    });
  }
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::MaxPoolGrad:
  case OpKind::AveragePoolGrad: {
    ir::DType dtype = node.getOperand(0)->getType().getDType();
    bool grad = node.getOp() == OpKind::MaxPoolGrad ||
                node.getOp() == OpKind::AveragePoolGrad;
    ArrayRef<int64_t> inDims = grad ? node.getResult(0)->getType().getDims()
                                    : node.getOperand(0)->getType().getDims();
    auto geometry = ir::getPoolGeometry(node, inDims);
    if (!geometry) {
      llvm::consumeError(geometry.takeError()); // the host kernel reports it
      return std::nullopt;
    }
    if ((dtype != ir::DType::F32 && dtype != ir::DType::F64) ||
        geometry->kernel.size() > size_t(body::kMaxRank))
      return std::nullopt;
    body::PoolShape shape;
    shape.rank = int(geometry->kernel.size());
    shape.countIncludePad = geometry->countIncludePad;
    for (int d = 0; d < shape.rank; ++d) {
      shape.inSpatial[d] = inDims[2 + d];
      shape.outSpatial[d] = geometry->resultDims[2 + d];
      shape.kernel[d] = geometry->kernel[d];
      shape.strides[d] = geometry->strides[d];
      shape.dilations[d] = geometry->dilations[d];
      shape.padBegin[d] = geometry->padBegin[d];
      shape.padEnd[d] = geometry->padEnd[d];
    }
    ElemType type = *elemType(dtype);
    OpKind op = node.getOp();
    return Runner([&node, type, shape, op](const RunContext &ctx,
                                           ArrayRef<Tensor> in,
                                           ArrayRef<Tensor> out) {
      StreamHandle stream = ctx.device.getStream();
      int64_t count = out[0].getNumElements();
      if (op == OpKind::MaxPool || op == OpKind::AveragePool)
        return launched(launchPool(stream, type, in[0].getData(),
                                   out[0].getData(), shape,
                                   op == OpKind::MaxPool, count),
                        node);
      return launched(
          launchPoolGrad(stream, type, in[0].getData(),
                         op == OpKind::MaxPoolGrad ? in[1].getData() : nullptr,
                         out[0].getData(), shape, count),
          node);
    });
  }
  default:
    return std::nullopt;
  }
}

} // namespace remat::runtime::cuda::detail
