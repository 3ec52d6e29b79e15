//===- runtime/cuda/Normalization.cpp - Softmax, norms and the loss -------===//
//
// Softmax, LogSoftmax, LayerNormalization, SoftmaxCrossEntropyLoss and
// their gradients.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/RunnerImpl.h"

namespace remat::runtime::cuda::detail {

namespace {

/// The loss's scores (and its gradient's log_prob), [N, C, d...], viewed as
/// [batch, classes, spatial] as the cross-entropy kernels take them.
struct ClassView {
  int64_t batch = 0, classes = 0, spatial = 1;

  explicit ClassView(const ir::TensorType &type)
      : batch(type.getDim(0)), classes(type.getDim(1)) {
    for (unsigned d = 2; d < type.getRank(); ++d)
      spatial *= type.getDim(d);
  }
};

} // namespace

MaybeRunner selectNormalization(const ir::Node &node,
                                uint64_t &scratchBytes) {
  using ir::OpKind;
  const ir::TensorType &outType = node.getResult(0)->getType();
  ArrayRef<int64_t> outDims = outType.getDims();
  const ir::AttrList &attrs = node.getAttrs();
  switch (node.getOp()) {
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::SoftmaxGrad: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    unsigned axis = axisAttr(node, -1, outType.getRank());
    int64_t outer = 1, inner = 1, n = outDims[axis];
    for (unsigned d = 0; d < axis; ++d)
      outer *= outDims[d];
    for (unsigned d = axis + 1; d < outDims.size(); ++d)
      inner *= outDims[d];
    ElemType type = *elemType(dtype);
    if (node.getOp() == OpKind::SoftmaxGrad)
      return Runner([&node, type, outer, n, inner](const RunContext &ctx,
                                                   ArrayRef<Tensor> in,
                                                   ArrayRef<Tensor> out) {
        return launched(launchSoftmaxGrad(ctx.device.getStream(), type,
                                          in[0].getData(), in[1].getData(),
                                          out[0].getData(), outer, n, inner),
                        node);
      });
    bool isLog = node.getOp() == OpKind::LogSoftmax;
    return Runner([&node, type, isLog, outer, n,
                   inner](const RunContext &ctx, ArrayRef<Tensor> in,
                          ArrayRef<Tensor> out) {
      return launched(launchSoftmax(ctx.device.getStream(), type, isLog,
                                    in[0].getData(), out[0].getData(), outer,
                                    n, inner),
                      node);
    });
  }
  case OpKind::LayerNormalizationGrad: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    unsigned axis = axisAttr(node, -1, outType.getRank());
    int64_t rows = 1, n = 1;
    for (unsigned d = 0; d < outDims.size(); ++d)
      (d < axis ? rows : n) *= outDims[d];
    ElemType type = *elemType(dtype);
    return Runner([&node, type, rows, n](const RunContext &ctx,
                                         ArrayRef<Tensor> in,
                                         ArrayRef<Tensor> out) {
      return launched(
          launchLayerNormGrad(ctx.device.getStream(), type, in[0].getData(),
                              in[1].getData(), in[2].getData(), in[3].getData(),
                              in[4].getData(), out[0].getData(), rows, n),
          node);
    });
  }
  case OpKind::LayerNormalization: {
    const ir::TensorType &xType = node.getOperand(0)->getType();
    ir::DType dtype = xType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    unsigned axis = axisAttr(node, -1, xType.getRank());
    ArrayRef<int64_t> normalized = xType.getDims().drop_front(axis);
    for (unsigned i = 1; i < node.getNumOperands(); ++i)
      if (node.getOperand(i)->getType().getDims() != normalized)
        return std::nullopt; // broadcast scale/bias: host
    ir::DType statsDType =
        node.getNumResults() > 1 ? node.getResult(1)->getType().getDType()
                                 : dtype;
    if (!isFloatType(statsDType))
      return std::nullopt;
    int64_t stashType = attrs.getInt("stash_type").value_or(1);
    bool computeF64 =
        dtype == ir::DType::F64 || stashType == ir::onnxCode(ir::DType::F64);
    int64_t rows = 1, n = 1;
    for (unsigned d = 0; d < axis; ++d)
      rows *= xType.getDim(d);
    for (int64_t d : normalized)
      n *= d;
    float epsilon = attrs.getFloat("epsilon").value_or(1e-5f);
    ElemType type = *elemType(dtype), stats = *elemType(statsDType);
    bool hasBias = node.getNumOperands() == 3;
    return Runner([&node, type, computeF64, stats, rows, n, epsilon,
                   hasBias](const RunContext &ctx, ArrayRef<Tensor> in,
                            ArrayRef<Tensor> out) {
      return launched(
          launchLayerNorm(ctx.device.getStream(), type, computeF64, stats,
                          in[0].getData(), in[1].getData(),
                          hasBias ? in[2].getData() : nullptr,
                          out[0].getData(),
                          out.size() > 1 ? out[1].getData() : nullptr,
                          out.size() > 2 ? out[2].getData() : nullptr, rows, n,
                          epsilon),
          node);
    });
  }
  case OpKind::SoftmaxCrossEntropyLoss: {
    const ir::TensorType &scores = node.getOperand(0)->getType();
    ir::DType dtype = scores.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    bool labelsI64 =
        node.getOperand(1)->getType().getDType() == ir::DType::I64;
    std::string reduction = attrs.getString("reduction").value_or("mean");
    std::optional<int64_t> ignore = attrs.getInt("ignore_index");
    ClassView view(scores);
    int64_t batch = view.batch, classes = view.classes, spatial = view.spatial;
    bool reduced = reduction != "none";
    bool mean = reduction == "mean";
    uint64_t lossBytes = reduced ? uint64_t(batch * spatial) *
                                       ir::dtypeSize(dtype)
                                 : 0;
    scratchBytes = std::max(scratchBytes, lossBytes);
    ElemType type = *elemType(dtype);
    bool hasWeights = node.getNumOperands() == 3;
    return Runner([&node, type, labelsI64, batch, classes, spatial, reduced,
                   mean, ignore, hasWeights](const RunContext &ctx,
                                             ArrayRef<Tensor> in,
                                             ArrayRef<Tensor> out) {
      void *losses = reduced ? ctx.scratch : out[0].getData();
      return launched(
          launchCrossEntropy(
              ctx.device.getStream(), type, labelsI64, in[0].getData(),
              in[1].getData(), hasWeights ? in[2].getData() : nullptr, losses,
              out.size() > 1 ? out[1].getData() : nullptr,
              reduced ? out[0].getData() : nullptr, mean, batch, classes,
              spatial, ignore.has_value(), ignore.value_or(0),
              ctx.device.getErrorFlag()),
          node);
    });
  }
  case OpKind::SoftmaxCrossEntropyGrad: {
    const ir::TensorType &logProb = node.getOperand(0)->getType();
    ir::DType dtype = logProb.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    bool labelsI64 = node.getOperand(1)->getType().getDType() == ir::DType::I64;
    ClassView view(logProb);
    ElemType type = *elemType(dtype);
    return Runner([&node, type, labelsI64, view](const RunContext &ctx,
                                                 ArrayRef<Tensor> in,
                                                 ArrayRef<Tensor> out) {
      return launched(launchCrossEntropyGrad(ctx.device.getStream(), type,
                                             labelsI64, in[0].getData(),
                                             in[1].getData(), in[2].getData(),
                                             out[0].getData(), view.batch,
                                             view.classes, view.spatial),
                      node);
    });
  }
  default:
    return std::nullopt;
  }
}

} // namespace remat::runtime::cuda::detail
