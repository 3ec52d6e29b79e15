//===- ir/inference/Elementwise.cpp - Elementwise inference rules ---------===//
//
// Arithmetic, unary, comparison and logical ops, Where, Max/Min, Mod, Pow,
// Cast, IsNaN, IsInf, Dropout, Clip and remat.Gelu, remat.GeluGrad,
// remat.DropoutGrad: numpy broadcasting, the result of the operands' shape.
//
// The rules are infer<Infer> for the Infer column of ir/Ops.def
// (Note [The op table]).
//
//===----------------------------------------------------------------------===//
#include "ir/inference/InferenceImpl.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace remat::ir::inference {

namespace {

/// A result of \p dtype with operands 0 and 1 broadcast together.
Expected<Results> broadcastResult(const Node &node, DType dtype) {
  auto dims = broadcastOperands(node, {0, 1});
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(dtype, *dims))};
}

/// Two operands of one dtype that satisfies \p accepts, numpy broadcasting;
/// the result has that dtype.
Expected<Results> inferBinary(const Node &node, bool (*accepts)(DType),
                              StringRef expected) {
  if (auto err = checkDType(node, 0, accepts, expected))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  return broadcastResult(node, operandType(node, 0).getDType());
}

} // namespace

/// Add, Sub, Mul, Div: same numeric dtype, broadcast.
Expected<Results> inferArithmetic(const Node &node) {
  return inferBinary(node, isNumeric, "a numeric dtype");
}

Expected<Results> inferPow(const Node &node) {
  if (auto err =
          checkDType(node, 0, isPowBaseType, "a float, i32 or i64 dtype"))
    return std::move(err);
  if (auto err = checkDType(node, 1, isNumeric, "a numeric dtype"))
    return std::move(err);
  auto dims = broadcastOperands(node, {0, 1});
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(operandType(node, 0).getDType(), *dims))};
}

namespace {

/// A unary op whose operand dtype must satisfy \p accepts; the result has
/// the operand's type.
Expected<Results> inferUnary(const Node &node, bool (*accepts)(DType),
                             StringRef expected) {
  if (auto err = checkDType(node, 0, accepts, expected))
    return std::move(err);
  return Results{known(operandType(node, 0))};
}

} // namespace

/// Sqrt, Erf, Tanh, Sigmoid, Exp, Log, Sin, Cos, Reciprocal.
Expected<Results> inferUnaryFloat(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}

/// Relu, Neg.
Expected<Results> inferUnarySigned(const Node &node) {
  return inferUnary(node, isSignedNumeric, "a float or signed integer dtype");
}

/// Abs.
Expected<Results> inferUnaryNumeric(const Node &node) {
  return inferUnary(node, isNumeric, "a numeric dtype");
}

/// Not.
Expected<Results> inferUnaryBool(const Node &node) {
  return inferUnary(node, isBool, "dtype bool");
}

/// Identity.
Expected<Results> inferUnaryAny(const Node &node) {
  return inferUnary(node, isAnyType, "any dtype");
}

Expected<Results> inferWhere(const Node &node) {
  if (auto err = checkDType(node, 0, isBool, "dtype bool"))
    return std::move(err);
  if (auto err = checkSameDType(node, 2, 1))
    return std::move(err);
  auto dims = broadcastOperands(node, {0, 1, 2});
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(operandType(node, 1).getDType(), *dims))};
}

Expected<Results> inferEqual(const Node &node) {
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  return broadcastResult(node, DType::Bool);
}

/// GreaterOrEqual, Greater, Less, LessOrEqual.
Expected<Results> inferCompare(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  return broadcastResult(node, DType::Bool);
}

/// And, Or.
Expected<Results> inferLogical(const Node &node) {
  for (unsigned i = 0; i < 2; ++i)
    if (auto err = checkDType(node, i, isBool, "dtype bool"))
      return std::move(err);
  return broadcastResult(node, DType::Bool);
}

/// Max, Min: one or more operands of one numeric dtype, all broadcast
/// together.
Expected<Results> inferMinMax(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  SmallVector<unsigned, 4> indices;
  for (unsigned i = 0; i < node.getNumOperands(); ++i) {
    if (i > 0)
      if (auto err = checkSameDType(node, i, 0))
        return std::move(err);
    indices.push_back(i);
  }
  auto dims = broadcastOperands(node, indices);
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(operandType(node, 0).getDType(), *dims))};
}

/// Mod: ONNX requires fmod = 1 for float dtypes (C's fmod); fmod = 0 is the
/// integer remainder with the sign of the divisor.
Expected<Results> inferMod(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  auto fmod = flagAttr(node, "fmod", false);
  if (!fmod)
    return fmod.takeError();
  DType dtype = operandType(node, 0).getDType();
  if (isFloat(dtype) && !*fmod)
    return nodeError(node, "attribute 'fmod' must be 1 for " +
                               operandName(node, 0) + " of float type " +
                               operandType(node, 0).str());
  auto dims = broadcastOperands(node, {0, 1});
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(dtype, *dims))};
}

Expected<Results> inferCast(const Node &node) {
  auto to = optionalIntAttr(node, "to");
  if (!to)
    return to.takeError();
  if (!*to)
    return nodeError(node, "attribute 'to' is required");
  std::optional<DType> dtype = fromOnnxCode(**to);
  if (!dtype)
    return nodeError(node, "attribute 'to' is " + Twine(**to) +
                               ", which is not an ONNX dtype code remat "
                               "supports");
  return Results{known(operandType(node, 0).withDType(*dtype))};
}

Expected<Results> inferDropout(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  if (node.getNumOperands() >= 2) {
    if (auto err = checkDType(node, 1, isFloatType, "a float dtype"))
      return std::move(err);
    if (auto err = checkRank(node, 1, 0))
      return std::move(err);
    if (auto ratio = constantDoubles(node.getOperand(1))) {
      double value = ratio->front();
      if (!(value >= 0.0 && value < 1.0))
        return nodeError(node, "ratio " + operandName(node, 1) + " is " +
                                   formatNumber(value) +
                                   ", expected a value in [0, 1)");
    }
  }
  if (node.getNumOperands() == 3) {
    if (auto err = checkDType(node, 2, isBool, "dtype bool"))
      return std::move(err);
    if (auto err = checkRank(node, 2, 0))
      return std::move(err);
  }
  if (auto seed = optionalIntAttr(node, "seed"); !seed)
    return seed.takeError();
  const TensorType &data = operandType(node, 0);
  Results results{known(data)};
  if (node.getNumResults() == 2)
    results.push_back(known(data.withDType(DType::Bool)));
  return results;
}

Expected<Results> inferIsNaN(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  return Results{known(operandType(node, 0).withDType(DType::Bool))};
}

Expected<Results> inferIsInf(const Node &node) {
  for (StringRef name : {"detect_negative", "detect_positive"}) {
    auto value = flagAttr(node, name, true);
    if (!value)
      return value.takeError();
  }
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  return Results{known(operandType(node, 0).withDType(DType::Bool))};
}

/// Clip: x of a numeric dtype; min and max (operands 1 and 2, either absent
/// from the end) each one element of x's dtype, a 0-D tensor or a 1-D one
/// of one element as exporters also write.
Expected<Results> inferClip(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  for (unsigned i = 1; i < node.getNumOperands(); ++i) {
    if (auto err = checkSameDType(node, i, 0))
      return std::move(err);
    const TensorType &bound = operandType(node, i);
    if (bound.getRank() > 1 || bound.getNumElements() != 1)
      return nodeError(node, operandName(node, i) +
                                 " must be a scalar (one element), got " +
                                 bound.str());
  }
  return Results{known(operandType(node, 0))};
}

namespace {

/// Gelu's and GeluGrad's 'approximate': "none" (default) or "tanh".
Error checkGeluApproximate(const Node &node) {
  auto approximate = stringAttr(node, "approximate", "none");
  if (!approximate)
    return approximate.takeError();
  if (*approximate != "none" && *approximate != "tanh")
    return nodeError(node, "attribute 'approximate' is \"" + *approximate +
                               "\", expected \"none\" or \"tanh\"");
  return Error::success();
}

} // namespace

/// remat.Gelu is ONNX opset 20's Gelu: a float operand, the same type out.
Expected<Results> inferGelu(const Node &node) {
  if (auto err = checkGeluApproximate(node))
    return std::move(err);
  return inferUnary(node, isFloatType, "a float dtype");
}

/// remat.GeluGrad(dy, x): float operands of one dtype, broadcast.
Expected<Results> inferGeluGrad(const Node &node) {
  if (auto err = checkGeluApproximate(node))
    return std::move(err);
  return inferBinary(node, isFloatType, "a float dtype");
}

/// remat.DropoutGrad(dy, mask, scale): dy of a float dtype, mask bool of its
/// dims, scale a scalar of its dtype. The result has dy's type.
Expected<Results> inferDropoutGrad(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  const TensorType &dy = operandType(node, 0);
  if (auto err = checkOperandType(node, 1, dy.withDType(DType::Bool)))
    return std::move(err);
  if (auto err = checkOperandType(node, 2, TensorType(dy.getDType(), {})))
    return std::move(err);
  return Results{known(dy)};
}

} // namespace remat::ir::inference
