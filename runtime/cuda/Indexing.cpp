//===- runtime/cuda/Indexing.cpp - Index-driven kernels -------------------===//
//
// Index-driven kernels: GatherElements, Trilu, CumSum, Pad, Tile and TopK.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/RunnerImpl.h"

namespace remat::runtime::cuda::detail {

MaybeRunner selectIndexing(const ir::Node &node,
                           const KnownValues &known) {
  using ir::OpKind;
  const ir::TensorType &outType = node.getResult(0)->getType();
  ArrayRef<int64_t> outDims = outType.getDims();
  unsigned elementSize = ir::dtypeSize(outType.getDType());
  const ir::AttrList &attrs = node.getAttrs();
  switch (node.getOp()) {
  case OpKind::Trilu: {
    bool upper = attrs.getInt("upper").value_or(1) != 0;
    int64_t rows = outDims[outDims.size() - 2];
    int64_t cols = outDims.back();
    bool hasK = node.getNumOperands() > 1;
    return Runner([&node, elementSize, upper, rows, cols, hasK](
                      const RunContext &ctx, ArrayRef<Tensor> in,
                      ArrayRef<Tensor> out) {
      const int64_t *k =
          hasK ? static_cast<const int64_t *>(in[1].getData()) : nullptr;
      return launched(launchTrilu(ctx.device.getStream(), elementSize,
                                  in[0].getData(), out[0].getData(), rows,
                                  cols, out[0].getNumElements(), upper, k),
                      node);
    });
  }
  case OpKind::CumSum: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype) && dtype != ir::DType::I64 &&
        dtype != ir::DType::I32)
      return std::nullopt;
    const ir::TensorData *axisData = knownOf(known, node.getOperand(1));
    if (!axisData)
      return std::nullopt;
    int64_t rank = int64_t(outDims.size());
    int64_t axisValue = axisData->getInts()[0];
    if (axisValue < -rank || axisValue >= rank)
      return std::nullopt; // the host kernel reports it
    unsigned axis = unsigned(axisValue < 0 ? axisValue + rank : axisValue);
    int64_t outer = 1, inner = 1;
    for (unsigned d = 0; d < axis; ++d)
      outer *= outDims[d];
    for (size_t d = axis + 1; d < outDims.size(); ++d)
      inner *= outDims[d];
    int64_t length = outDims[axis];
    ElemType type = *elemType(dtype);
    bool exclusive = attrs.getInt("exclusive").value_or(0) != 0;
    bool reverse = attrs.getInt("reverse").value_or(0) != 0;
    return Runner([&node, type, outer, length, inner, exclusive, reverse](
                      const RunContext &ctx, ArrayRef<Tensor> in,
                      ArrayRef<Tensor> out) {
      return launched(launchCumSum(ctx.device.getStream(), type,
                                   in[0].getData(), out[0].getData(), outer,
                                   length, inner, exclusive, reverse),
                      node);
    });
  }
  case OpKind::GatherElements: {
    ArrayRef<int64_t> dataDims = node.getOperand(0)->getType().getDims();
    int axis = int(axisAttr(node, 0, unsigned(dataDims.size())));
    std::vector<int64_t> strides = rowMajor(dataDims);
    body::Strides dataStrides;
    for (size_t d = 0; d < strides.size(); ++d)
      dataStrides.strides[d] = strides[d];
    body::Dims space = toDims(outDims);
    int64_t axisSize = dataDims[axis];
    bool i64 = node.getOperand(1)->getType().getDType() == ir::DType::I64;
    return Runner([&node, elementSize, i64, space, dataStrides, axis,
                   axisSize](const RunContext &ctx, ArrayRef<Tensor> in,
                             ArrayRef<Tensor> out) {
      return launched(launchGatherElements(
                          ctx.device.getStream(), elementSize, i64,
                          in[0].getData(), in[1].getData(), out[0].getData(),
                          space, dataStrides, axis, axisSize,
                          out[0].getNumElements(), ctx.device.getErrorFlag()),
                      node);
    });
  }
  case OpKind::Pad: {
    const ir::TensorData *padsData = knownOf(known, node.getOperand(1));
    if (!padsData)
      return std::nullopt;
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    int64_t rank = int64_t(inDims.size());
    std::vector<int64_t> axes;
    if (node.getNumOperands() > 3) {
      const ir::TensorData *axesData = knownOf(known, node.getOperand(3));
      if (!axesData)
        return std::nullopt;
      for (int64_t axis : axesData->getInts())
        axes.push_back(axis < 0 ? axis + rank : axis);
    } else {
      for (int64_t d = 0; d < rank; ++d)
        axes.push_back(d);
    }
    std::vector<int64_t> pads = padsData->getInts();
    if (pads.size() != 2 * axes.size())
      return std::nullopt;
    body::Strides begin;
    for (size_t k = 0; k < axes.size(); ++k)
      begin.strides[axes[k]] = pads[k];
    std::string modeName = attrs.getString("mode").value_or("constant");
    body::PadMode mode = modeName == "reflect" ? body::PadMode::Reflect
                         : modeName == "edge"  ? body::PadMode::Edge
                         : modeName == "wrap"  ? body::PadMode::Wrap
                                               : body::PadMode::Constant;
    body::Dims outSpace = toDims(outDims), inSpace = toDims(inDims);
    bool hasValue = node.getNumOperands() > 2 && mode == body::PadMode::Constant;
    return Runner([&node, elementSize, outSpace, inSpace, begin, mode,
                   hasValue](const RunContext &ctx, ArrayRef<Tensor> in,
                             ArrayRef<Tensor> out) {
      return launched(launchPad(ctx.device.getStream(), elementSize,
                                in[0].getData(), out[0].getData(), outSpace,
                                inSpace, begin, mode,
                                hasValue ? in[2].getData() : nullptr),
                      node);
    });
  }
  case OpKind::TopK: {
    // K known at compile time and matching the results' type; else the
    // host kernel runs (and checks it).
    const ir::TensorType &inType = node.getOperand(0)->getType();
    auto type = elemType(inType.getDType());
    const ir::TensorData *kData = knownOf(known, node.getOperand(1));
    if (!type || !kData)
      return std::nullopt;
    ArrayRef<int64_t> inDims = inType.getDims();
    int64_t rank = inType.getRank();
    int64_t axis = attrs.getInt("axis").value_or(-1);
    axis = axis < 0 ? axis + rank : axis;
    int64_t k = kData->getInts()[0];
    if (k != outDims[axis])
      return std::nullopt;
    int64_t outer = 1, count = inDims[axis], inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= inDims[d];
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= inDims[d];
    bool largest = attrs.getInt("largest").value_or(1) != 0;
    return Runner([&node, type = *type, outer, count, inner, k,
                   largest](const RunContext &ctx, ArrayRef<Tensor> in,
                            ArrayRef<Tensor> out) {
      return launched(launchTopK(ctx.device.getStream(), type, in[0].getData(),
                                 out[0].getData(), out[1].getData(), outer,
                                 count, inner, k, largest),
                      node);
    });
  }
  case OpKind::Tile: {
    // Repeats known at compile time and matching the result's type; else
    // the host kernel runs (and checks them).
    const ir::TensorData *repeatsData = knownOf(known, node.getOperand(1));
    if (!repeatsData)
      return std::nullopt;
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    std::vector<int64_t> repeats = repeatsData->getInts();
    if (repeats.size() != inDims.size())
      return std::nullopt;
    for (size_t d = 0; d < inDims.size(); ++d)
      if (inDims[d] * repeats[d] != outDims[d])
        return std::nullopt;
    body::Dims outSpace = toDims(outDims), inSpace = toDims(inDims);
    return Runner([&node, elementSize, outSpace, inSpace](
                      const RunContext &ctx, ArrayRef<Tensor> in,
                      ArrayRef<Tensor> out) {
      return launched(launchTile(ctx.device.getStream(), elementSize,
                                 in[0].getData(), out[0].getData(), outSpace,
                                 inSpace),
                      node);
    });
  }
  default:
    return std::nullopt;
  }
}

} // namespace remat::runtime::cuda::detail
