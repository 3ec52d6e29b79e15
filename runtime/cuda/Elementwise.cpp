//===- runtime/cuda/Elementwise.cpp - Elementwise runners -----------------===//
//
// Unary and binary arithmetic and comparisons (broadcast through strides),
// Where, Cast, Dropout and its gradient, Not, IsNaN, IsInf and Clip.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/RunnerImpl.h"

#include "runtime/DropoutMask.h"

namespace remat::runtime::cuda::detail {

namespace {

std::optional<body::UnaryOp> unaryOpOf(const ir::Node &node) {
  using ir::OpKind;
  switch (node.getOp()) {
  case OpKind::Sqrt:
    return body::UnaryOp::Sqrt;
  case OpKind::Erf:
    return body::UnaryOp::Erf;
  case OpKind::Tanh:
    return body::UnaryOp::Tanh;
  case OpKind::Relu:
    return body::UnaryOp::Relu;
  case OpKind::Sigmoid:
    return body::UnaryOp::Sigmoid;
  case OpKind::Exp:
    return body::UnaryOp::Exp;
  case OpKind::Log:
    return body::UnaryOp::Log;
  case OpKind::Neg:
    return body::UnaryOp::Neg;
  case OpKind::Gelu: {
    auto approx = node.getAttrs().getString("approximate");
    return approx && *approx == "tanh" ? body::UnaryOp::GeluTanh
                                       : body::UnaryOp::GeluErf;
  }
  case OpKind::Sin:
    return body::UnaryOp::Sin;
  case OpKind::Cos:
    return body::UnaryOp::Cos;
  case OpKind::Abs:
    return body::UnaryOp::Abs;
  case OpKind::Reciprocal:
    return body::UnaryOp::Reciprocal;
  case OpKind::Sign:
    return body::UnaryOp::Sign;
  case OpKind::Ceil:
    return body::UnaryOp::Ceil;
  case OpKind::Floor:
    return body::UnaryOp::Floor;
  case OpKind::Softplus:
    return body::UnaryOp::Softplus;
  case OpKind::Acos:
    return body::UnaryOp::Acos;
  default:
    return std::nullopt;
  }
}

std::optional<body::BinaryOp> binaryOpOf(const ir::Node &node) {
  using ir::OpKind;
  switch (node.getOp()) {
  case OpKind::Add:
    return body::BinaryOp::Add;
  case OpKind::Sub:
    return body::BinaryOp::Sub;
  case OpKind::Mul:
    return body::BinaryOp::Mul;
  case OpKind::Div:
    return body::BinaryOp::Div;
  case OpKind::Max:
    return body::BinaryOp::Max;
  case OpKind::Pow:
    return body::BinaryOp::Pow;
  case OpKind::Equal:
    return body::BinaryOp::Equal;
  case OpKind::GreaterOrEqual:
    return body::BinaryOp::GreaterOrEqual;
  case OpKind::And:
    return body::BinaryOp::And;
  case OpKind::Min:
    return body::BinaryOp::Min;
  case OpKind::Less:
    return body::BinaryOp::Less;
  case OpKind::LessOrEqual:
    return body::BinaryOp::LessOrEqual;
  case OpKind::Greater:
    return body::BinaryOp::Greater;
  case OpKind::Or:
    return body::BinaryOp::Or;
  case OpKind::GeluGrad: {
    auto approx = node.getAttrs().getString("approximate");
    return approx && *approx == "tanh" ? body::BinaryOp::GeluGradTanh
                                       : body::BinaryOp::GeluGradErf;
  }
  default:
    return std::nullopt;
  }
}

} // namespace

MaybeRunner selectElementwise(const ir::Node &node,
                              const KnownValues &known) {
  using ir::OpKind;
  const ir::TensorType &outType = node.getResult(0)->getType();
  ArrayRef<int64_t> outDims = outType.getDims();
  unsigned elementSize = ir::dtypeSize(outType.getDType());
  const ir::AttrList &attrs = node.getAttrs();

  if (auto op = unaryOpOf(node)) {
    ir::DType dtype = outType.getDType();
    bool intOk = ((*op == body::UnaryOp::Neg || *op == body::UnaryOp::Relu) &&
                  (dtype == ir::DType::I64 || dtype == ir::DType::I32)) ||
                 (*op == body::UnaryOp::Sign &&
                  (dtype == ir::DType::I64 || dtype == ir::DType::I32 ||
                   dtype == ir::DType::I8 || dtype == ir::DType::U8));
    if (!isFloatType(dtype) && !intOk)
      return std::nullopt;
    ElemType type = *elemType(dtype);
    body::UnaryOp uop = *op;
    return Runner([&node, uop, type](const RunContext &ctx, ArrayRef<Tensor> in,
                                     ArrayRef<Tensor> out) -> Error {
      return launched(launchUnary(ctx.device.getStream(), uop, type,
                                  in[0].getData(), out[0].getData(),
                                  out[0].getNumElements()),
                      node);
    });
  }

  if (auto bop = binaryOpOf(node)) {
    if (node.getNumOperands() != 2)
      return std::nullopt; // Max/Min of one or of three or more
    ir::DType dtype = node.getOperand(0)->getType().getDType();
    body::BinaryOp op = *bop;
    bool floatOnly = op == body::BinaryOp::Div || op == body::BinaryOp::Pow ||
                     op == body::BinaryOp::GeluGradErf ||
                     op == body::BinaryOp::GeluGradTanh;
    if (op == body::BinaryOp::Pow &&
        node.getOperand(1)->getType().getDType() != dtype)
      return std::nullopt;
    bool logical = op == body::BinaryOp::And || op == body::BinaryOp::Or;
    if (logical && dtype != ir::DType::Bool)
      return std::nullopt;
    if (!logical &&
        !(isFloatType(dtype) ||
          (!floatOnly &&
           (dtype == ir::DType::I64 || dtype == ir::DType::I32))))
      return std::nullopt;
    ElemType type = *elemType(dtype);
    body::Dims space = toDims(outDims);
    body::Strides la =
        broadcastStrides(node.getOperand(0)->getType().getDims(), outDims);
    body::Strides lb =
        broadcastStrides(node.getOperand(1)->getType().getDims(), outDims);
    return Runner([&node, op, type, space, la, lb](const RunContext &ctx,
                                                   ArrayRef<Tensor> in,
                                                   ArrayRef<Tensor> out) {
      return launched(launchBinary(ctx.device.getStream(), op, type,
                                   in[0].getData(), in[1].getData(),
                                   out[0].getData(), space, la, lb),
                      node);
    });
  }

  switch (node.getOp()) {
  case OpKind::Clip: {
    auto type = elemType(outType.getDType());
    if (!type)
      return std::nullopt;
    bool hasMin = node.getNumOperands() > 1, hasMax = node.getNumOperands() > 2;
    return Runner([&node, type = *type, hasMin, hasMax](
                      const RunContext &ctx, ArrayRef<Tensor> in,
                      ArrayRef<Tensor> out) -> Error {
      return launched(
          launchClip(ctx.device.getStream(), type, in[0].getData(),
                     hasMin ? in[1].getData() : nullptr,
                     hasMax ? in[2].getData() : nullptr, out[0].getData(),
                     out[0].getNumElements()),
          node);
    });
  }
  case OpKind::Where: {
    body::Dims space = toDims(outDims);
    body::Strides lc =
        broadcastStrides(node.getOperand(0)->getType().getDims(), outDims);
    body::Strides lx =
        broadcastStrides(node.getOperand(1)->getType().getDims(), outDims);
    body::Strides ly =
        broadcastStrides(node.getOperand(2)->getType().getDims(), outDims);
    return Runner([&node, elementSize, space, lc, lx,
                   ly](const RunContext &ctx, ArrayRef<Tensor> in,
                       ArrayRef<Tensor> out) {
      return launched(launchWhere(ctx.device.getStream(), elementSize,
                                  in[0].getData(), in[1].getData(),
                                  in[2].getData(), out[0].getData(), space, lc,
                                  lx, ly),
                      node);
    });
  }
  case OpKind::Cast: {
    ir::DType from = node.getOperand(0)->getType().getDType();
    ir::DType to = outType.getDType();
    if (from == to)
      return copyRunner();
    if (from == ir::DType::Bool) {
      if (!elemType(to))
        return std::nullopt;
      // bool bytes are u8 0/1: converting them as u8 gives the same values.
      from = ir::DType::U8;
    }
    auto fromType = elemType(from);
    bool toBool = to == ir::DType::Bool;
    auto toType = toBool ? std::optional<ElemType>(ElemType::U8) : elemType(to);
    if (!fromType || !toType)
      return std::nullopt;
    ElemType f = *fromType, t = *toType;
    return Runner([&node, f, t, toBool](const RunContext &ctx,
                                        ArrayRef<Tensor> in,
                                        ArrayRef<Tensor> out) {
      return launched(launchCast(ctx.device.getStream(), f, t, toBool,
                                 in[0].getData(), out[0].getData(),
                                 out[0].getNumElements()),
                      node);
    });
  }
  case OpKind::Dropout: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    double ratio = 0.5;
    bool training = false;
    if (node.getNumOperands() > 1) {
      const ir::TensorData *r = knownOf(known, node.getOperand(1));
      if (!r)
        return std::nullopt;
      ratio = r->getDouble(0);
    }
    if (node.getNumOperands() > 2) {
      const ir::TensorData *t = knownOf(known, node.getOperand(2));
      if (!t)
        return std::nullopt;
      training = t->getInt(0) != 0;
    }
    if (training && ratio != 0 && !(ratio > 0 && ratio < 1))
      return std::nullopt; // the CPU kernel reports it
    bool identity = !training || ratio == 0;
    uint64_t key = dropoutKey(
        static_cast<uint64_t>(attrs.getInt("seed").value_or(0)));
    uint32_t threshold = dropoutThreshold(static_cast<float>(ratio));
    // The scale in the element type, as the CPU computes it.
    double scale = dtype == ir::DType::F32
                       ? double(1.0f / (1.0f - static_cast<float>(ratio)))
                       : 1.0 / (1.0 - ratio);
    ElemType type = *elemType(dtype);
    return Runner([&node, identity, key, threshold, scale,
                   type](const RunContext &ctx, ArrayRef<Tensor> in,
                         ArrayRef<Tensor> out) -> Error {
      uint8_t *mask =
          out.size() > 1 ? static_cast<uint8_t *>(out[1].getData()) : nullptr;
      int64_t count = out[0].getNumElements();
      if (identity) {
        if (in[0].getData() != out[0].getData() && count)
          if (cudaError_t err = cudaMemcpyAsync(
                  out[0].getData(), in[0].getData(), out[0].getByteSize(),
                  cudaMemcpyDeviceToDevice, ctx.device.getStream()))
            return cudaError(err, "copying a tensor");
        if (mask && count)
          if (cudaError_t err =
                  cudaMemsetAsync(mask, 1, count, ctx.device.getStream()))
            return cudaError(err, "filling a mask");
        return Error::success();
      }
      return launched(launchDropout(ctx.device.getStream(), type,
                                    in[0].getData(), out[0].getData(), mask,
                                    count, key, threshold, scale),
                      node);
    });
  }
  case OpKind::DropoutGrad: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    ElemType type = *elemType(dtype);
    int64_t count = outType.getNumElements();
    return Runner([&node, type, count](const RunContext &ctx,
                                       ArrayRef<Tensor> in,
                                       ArrayRef<Tensor> out) {
      return launched(
          launchDropoutGrad(ctx.device.getStream(), type, in[0].getData(),
                            static_cast<const uint8_t *>(in[1].getData()),
                            in[2].getData(), out[0].getData(), count),
          node);
    });
  }
  case OpKind::Not:
    return Runner([&node](const RunContext &ctx, ArrayRef<Tensor> in,
                          ArrayRef<Tensor> out) {
      return launched(launchNot(ctx.device.getStream(), in[0].getData(),
                                out[0].getData(), out[0].getNumElements()),
                      node);
    });
  case OpKind::IsNaN:
  case OpKind::IsInf: {
    ir::DType dtype = node.getOperand(0)->getType().getDType();
    if (dtype != ir::DType::F32 && dtype != ir::DType::F64)
      return std::nullopt;
    ElemType type = *elemType(dtype);
    bool isInf = node.getOp() == OpKind::IsInf;
    bool negative = attrs.getInt("detect_negative").value_or(1) != 0;
    bool positive = attrs.getInt("detect_positive").value_or(1) != 0;
    return Runner([&node, type, isInf, negative, positive](
                      const RunContext &ctx, ArrayRef<Tensor> in,
                      ArrayRef<Tensor> out) {
      return launched(launchFloatClass(ctx.device.getStream(), type, isInf,
                                       negative, positive, in[0].getData(),
                                       out[0].getData(),
                                       out[0].getNumElements()),
                      node);
    });
  }
  default:
    return std::nullopt;
  }
}

} // namespace remat::runtime::cuda::detail
