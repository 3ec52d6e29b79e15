//===- runtime/cuda/DataMovement.cpp - Copies, views and gathers ----------===//
//
// Views (Identity, Reshape, (Un)Squeeze) copy or alias; Transpose, Expand,
// Concat, Split and Slice are strided copies; Gather, ScatterElements and
// ConstantOfShape have their own kernels.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/RunnerImpl.h"

namespace remat::runtime::cuda::detail {

namespace {

Runner copiesRunner(const ir::Node &node, std::vector<CopyPlan> plans,
                    unsigned elementSize) {
  return [&node, plans, elementSize](const RunContext &ctx,
                                     ArrayRef<Tensor> in,
                                     ArrayRef<Tensor> out) -> Error {
    for (const CopyPlan &p : plans)
      if (auto err = launched(
              launchStridedCopy(ctx.device.getStream(), elementSize,
                                in[p.operand].getData(),
                                out[p.result].getData(), p.space, p.in, p.out),
              node))
        return err;
    return Error::success();
  };
}

} // namespace

Runner copyRunner() {
  return [](const RunContext &ctx, ArrayRef<Tensor> in,
            ArrayRef<Tensor> out) -> Error {
    if (in[0].getData() == out[0].getData() || out[0].getByteSize() == 0)
      return Error::success();
    if (cudaError_t err = cudaMemcpyAsync(
            out[0].getData(), in[0].getData(), out[0].getByteSize(),
            cudaMemcpyDeviceToDevice, ctx.device.getStream()))
      return cudaError(err, "copying a tensor");
    return Error::success();
  };
}

MaybeRunner selectDataMovement(const ir::Node &node,
                               const KnownValues &known,
                               uint64_t &scratchBytes) {
  using ir::OpKind;
  const ir::TensorType &outType = node.getResult(0)->getType();
  ArrayRef<int64_t> outDims = outType.getDims();
  unsigned elementSize = ir::dtypeSize(outType.getDType());
  const ir::AttrList &attrs = node.getAttrs();
  switch (node.getOp()) {
  case OpKind::Identity:
  case OpKind::Reshape:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    return copyRunner();
  case OpKind::Transpose: {
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    std::vector<int64_t> perm;
    if (auto list = attrs.getInts("perm"))
      perm.assign(list->begin(), list->end());
    else
      for (size_t d = inDims.size(); d > 0; --d)
        perm.push_back(int64_t(d - 1));
    std::vector<int64_t> inStrides = rowMajor(inDims);
    CopyPlan plan;
    plan.space = toDims(outDims);
    for (size_t d = 0; d < perm.size(); ++d)
      plan.in.strides[d] = inStrides[perm[d]];
    plan.out = contiguous(outDims);
    return copiesRunner(node, {plan}, elementSize);
  }
  case OpKind::Expand: {
    CopyPlan plan;
    plan.space = toDims(outDims);
    plan.in = broadcastStrides(node.getOperand(0)->getType().getDims(),
                               outDims);
    plan.out = contiguous(outDims);
    return copiesRunner(node, {plan}, elementSize);
  }
  case OpKind::Concat: {
    unsigned axis = axisAttr(node, 0, outType.getRank());
    std::vector<int64_t> outStrides = rowMajor(outDims);
    std::vector<CopyPlan> plans;
    int64_t offset = 0;
    for (unsigned i = 0; i < node.getNumOperands(); ++i) {
      ArrayRef<int64_t> inDims = node.getOperand(i)->getType().getDims();
      CopyPlan plan;
      plan.operand = i;
      plan.space = toDims(inDims);
      plan.in = contiguous(inDims);
      for (size_t d = 0; d < outDims.size(); ++d)
        plan.out.strides[d] = outStrides[d];
      plan.out.base = offset * outStrides[axis];
      offset += inDims[axis];
      plans.push_back(plan);
    }
    return copiesRunner(node, std::move(plans), elementSize);
  }
  case OpKind::Split: {
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    unsigned axis = axisAttr(node, 0, unsigned(inDims.size()));
    std::vector<int64_t> inStrides = rowMajor(inDims);
    std::vector<CopyPlan> plans;
    int64_t offset = 0;
    for (unsigned r = 0; r < node.getNumResults(); ++r) {
      ArrayRef<int64_t> dims = node.getResult(r)->getType().getDims();
      CopyPlan plan;
      plan.result = r;
      plan.space = toDims(dims);
      for (size_t d = 0; d < dims.size(); ++d)
        plan.in.strides[d] = inStrides[d];
      plan.in.base = offset * inStrides[axis];
      plan.out = contiguous(dims);
      offset += dims[axis];
      plans.push_back(plan);
    }
    return copiesRunner(node, std::move(plans), elementSize);
  }
  case OpKind::Slice: {
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    unsigned rank = unsigned(inDims.size());
    std::vector<const ir::TensorData *> ops;
    for (unsigned i = 1; i < node.getNumOperands(); ++i) {
      ops.push_back(knownOf(known, node.getOperand(i)));
      if (!ops.back())
        return std::nullopt;
    }
    std::vector<int64_t> starts = ops[0]->getInts(), ends = ops[1]->getInts();
    std::vector<int64_t> axes, steps(starts.size(), 1);
    if (ops.size() > 2)
      axes = ops[2]->getInts();
    else
      for (size_t i = 0; i < starts.size(); ++i)
        axes.push_back(int64_t(i));
    if (ops.size() > 3)
      steps = ops[3]->getInts();
    std::vector<int64_t> inStrides = rowMajor(inDims);
    CopyPlan plan;
    plan.space = toDims(outDims);
    plan.out = contiguous(outDims);
    for (unsigned d = 0; d < rank; ++d)
      plan.in.strides[d] = inStrides[d];
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
      int64_t dim = inDims[axis], start = starts[i], step = steps[i];
      if (start < 0)
        start += dim;
      if (step > 0)
        start = std::clamp<int64_t>(start, 0, dim);
      else
        start = std::clamp<int64_t>(start, 0, dim - 1);
      if (outDims[axis] == 0)
        start = 0;
      plan.in.base += start * inStrides[axis];
      plan.in.strides[axis] = inStrides[axis] * step;
    }
    return copiesRunner(node, {plan}, elementSize);
  }
  case OpKind::Gather: {
    ArrayRef<int64_t> dataDims = node.getOperand(0)->getType().getDims();
    unsigned axis = axisAttr(node, 0, unsigned(dataDims.size()));
    int64_t outer = 1, inner = 1;
    for (unsigned d = 0; d < axis; ++d)
      outer *= dataDims[d];
    for (unsigned d = axis + 1; d < dataDims.size(); ++d)
      inner *= dataDims[d];
    int64_t axisSize = dataDims[axis];
    int64_t count = node.getOperand(1)->getType().getNumElements();
    bool i64 = node.getOperand(1)->getType().getDType() == ir::DType::I64;
    return Runner([&node, elementSize, i64, outer, axisSize, inner,
                   count](const RunContext &ctx, ArrayRef<Tensor> in,
                          ArrayRef<Tensor> out) {
      return launched(launchGather(ctx.device.getStream(), elementSize, i64,
                                   in[0].getData(), in[1].getData(),
                                   out[0].getData(), outer, axisSize, inner,
                                   count, ctx.device.getErrorFlag()),
                      node);
    });
  }
  case OpKind::ScatterElements: {
    ArrayRef<int64_t> dataDims = node.getOperand(0)->getType().getDims();
    std::string reduction = attrs.getString("reduction").value_or("none");
    int mode = reduction == "none" ? 0 : reduction == "add" ? 1 : 2;
    if (reduction != "none" && reduction != "add" && reduction != "mul")
      return std::nullopt;
    ir::DType dtype = outType.getDType();
    if (mode != 0 && !(isFloatType(dtype) || dtype == ir::DType::I64 ||
                       dtype == ir::DType::I32))
      return std::nullopt;
    ElemType type = elemType(dtype).value_or(ElemType::U8);
    unsigned axis = axisAttr(node, 0, unsigned(dataDims.size()));
    body::Dims updates = toDims(node.getOperand(2)->getType().getDims());
    std::vector<int64_t> dataStrides = rowMajor(dataDims);
    int64_t dataCount = outType.getNumElements();
    int64_t count = node.getOperand(2)->getType().getNumElements();
    if (mode != 0)
      scratchBytes = std::max(scratchBytes, scatterWorkspaceBytes(count));
    bool i64 = node.getOperand(1)->getType().getDType() == ir::DType::I64;
    int64_t axisSize = dataDims[axis];
    return Runner([&node, type, elementSize, mode, i64, dataCount, updates,
                   dataStrides, axis, axisSize](const RunContext &ctx,
                                                ArrayRef<Tensor> in,
                                                ArrayRef<Tensor> out) {
      return launched(
          launchScatter(ctx.device.getStream(), type, elementSize, mode, i64,
                        in[0].getData(), in[1].getData(), in[2].getData(),
                        out[0].getData(), dataCount, updates,
                        dataStrides.data(), int(axis), axisSize, ctx.scratch,
                        ctx.device.getErrorFlag()),
          node);
    });
  }
  case OpKind::ConstantOfShape: {
    // The result type has the shape; the value is one element (0 of f32 by
    // default, ONNX).
    std::vector<uint8_t> value(elementSize, 0);
    if (ir::TensorDataPtr attr = attrs.getTensor("value")) {
      if (attr->getBytes().size() != elementSize)
        return std::nullopt;
      value.assign(attr->getBytes().begin(), attr->getBytes().end());
    }
    return Runner([&node, elementSize, value](const RunContext &ctx,
                                             ArrayRef<Tensor>,
                                             ArrayRef<Tensor> out) {
      return launched(launchFill(ctx.device.getStream(), elementSize,
                                 value.data(), out[0].getData(),
                                 out[0].getNumElements()),
                      node);
    });
  }
  default:
    return std::nullopt;
  }
}

} // namespace remat::runtime::cuda::detail
