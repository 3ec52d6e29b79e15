//===- runtime/cuda/Reductions.cpp - Reduce*, ArgMax, ArgMin --------------===//
//
// ReduceSum, ReduceMean, ReduceMax, ReduceL2, ReduceLogSumExp: one kernel
// over the kept and the reduced axes, each as strides. ArgMax, ArgMin: one
// thread per output element scans the axis.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/RunnerImpl.h"

namespace remat::runtime::cuda::detail {

namespace {

/// The reduced axes of a Reduce node, or nullopt when not known.
std::optional<std::vector<bool>> reducedAxes(const ir::Node &node,
                                             const KnownValues &known) {
  unsigned rank = node.getOperand(0)->getType().getRank();
  std::vector<int64_t> axes;
  bool noopWithEmpty =
      node.getAttrs().getInt("noop_with_empty_axes").value_or(0) != 0;
  if (node.getOp() == ir::OpKind::ReduceSum) {
    if (node.getNumOperands() == 2) {
      const ir::TensorData *data = knownOf(known, node.getOperand(1));
      if (!data)
        return std::nullopt;
      axes = data->getInts();
    }
  } else if (auto list = node.getAttrs().getInts("axes")) {
    axes.assign(list->begin(), list->end());
  }
  std::vector<bool> reduced(rank, axes.empty() && !noopWithEmpty);
  for (int64_t axis : axes)
    reduced[axis < 0 ? axis + rank : axis] = true;
  return reduced;
}

} // namespace

MaybeRunner selectReduce(const ir::Node &node, const KnownValues &known) {
  ir::DType dtype = node.getOperand(0)->getType().getDType();
  if (!isFloatType(dtype))
    return std::nullopt;
  auto reduced = reducedAxes(node, known);
  if (!reduced)
    return std::nullopt;
  ArrayRef<int64_t> dims = node.getOperand(0)->getType().getDims();
  std::vector<int64_t> strides = rowMajor(dims);
  body::Dims keptSpace, reducedSpace;
  body::Strides kept, red;
  int64_t count = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if ((*reduced)[d]) {
      red.strides[reducedSpace.rank] = strides[d];
      reducedSpace.dims[reducedSpace.rank++] = dims[d];
      count *= dims[d];
    } else {
      kept.strides[keptSpace.rank] = strides[d];
      keptSpace.dims[keptSpace.rank++] = dims[d];
    }
  }
  if (count == 0 && node.getOp() != ir::OpKind::ReduceSum)
    return std::nullopt; // the CPU's error
  body::ReduceOp op;
  switch (node.getOp()) {
  case ir::OpKind::ReduceSum:
    op = body::ReduceOp::Sum;
    break;
  case ir::OpKind::ReduceMean:
    op = body::ReduceOp::Mean;
    break;
  case ir::OpKind::ReduceL2:
    op = body::ReduceOp::L2;
    break;
  case ir::OpKind::ReduceLogSumExp:
    op = body::ReduceOp::LogSumExp;
    break;
  default:
    op = body::ReduceOp::Max;
    break;
  }
  ElemType type = *elemType(dtype);
  return Runner([&node, op, type, keptSpace, kept, reducedSpace, red,
                 count](const RunContext &ctx, ArrayRef<Tensor> in,
                        ArrayRef<Tensor> out) -> Error {
    return launched(launchReduce(ctx.device.getStream(), op, type,
                                 in[0].getData(), out[0].getData(), keptSpace,
                                 kept, reducedSpace, red, count),
                    node);
  });
}

MaybeRunner selectArgReduce(const ir::Node &node, const KnownValues &) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  auto elem = elemType(type.getDType());
  if (!elem)
    return std::nullopt;
  ArrayRef<int64_t> dims = type.getDims();
  int64_t rank = type.getRank();
  int64_t axis = node.getAttrs().getInt("axis").value_or(0);
  axis = axis < 0 ? axis + rank : axis;
  int64_t outer = 1, count = dims[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= dims[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= dims[d];
  if (count == 0 && outer * inner > 0)
    return std::nullopt; // the CPU's error
  bool isMax = node.getOp() == ir::OpKind::ArgMax;
  bool last = node.getAttrs().getInt("select_last_index").value_or(0) != 0;
  return Runner([&node, isMax, last, type = *elem, outer, count,
                 inner](const RunContext &ctx, ArrayRef<Tensor> in,
                        ArrayRef<Tensor> out) -> Error {
    return launched(launchArgReduce(ctx.device.getStream(), isMax, last, type,
                                    in[0].getData(), out[0].getData(), outer,
                                    count, inner),
                    node);
  });
}

} // namespace remat::runtime::cuda::detail
