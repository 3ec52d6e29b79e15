//===- ir/inference/Reductions.cpp - Reduction inference rules ------------===//
//
// ReduceSum (axes as an operand) and ReduceMean, ReduceMax, ReduceL2,
// ReduceLogSumExp (axes as an attribute, opset 17); ArgMax and ArgMin
// (issue 40).
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

/// Reduces operand 0 over \p axes (all axes when empty).
Expected<Results> reduceOver(const Node &node, ArrayRef<int64_t> axes,
                             bool keepDims, const Twine &what) {
  const TensorType &data = operandType(node, 0);
  SmallVector<bool, 8> reduced(data.getRank(), axes.empty());
  auto normalized = normalizeAxes(node, what, axes, data.getRank());
  if (!normalized)
    return normalized.takeError();
  for (unsigned axis : *normalized)
    reduced[axis] = true;
  return Results{
      known(data.withDims(reduceDims(data.getDims(), reduced, keepDims)))};
}

} // namespace

/// ReduceMean, ReduceMax, ReduceL2 and ReduceLogSumExp: axes and keepdims
/// are attributes in opset 17.
Expected<Results> inferAttrReduction(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  auto keepDims = intAttr(node, "keepdims", 1);
  if (!keepDims)
    return keepDims.takeError();
  auto axes = intsAttr(node, "axes");
  if (!axes)
    return axes.takeError();
  std::vector<int64_t> axisList = axes->value_or(std::vector<int64_t>());
  return reduceOver(node, axisList, *keepDims != 0, "attribute 'axes'");
}

/// ReduceSum takes axes as an optional operand since opset 13.
Expected<Results> inferReduceSum(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  auto keepDims = intAttr(node, "keepdims", 1);
  if (!keepDims)
    return keepDims.takeError();
  auto noopWithEmptyAxes = intAttr(node, "noop_with_empty_axes", 0);
  if (!noopWithEmptyAxes)
    return noopWithEmptyAxes.takeError();
  const TensorType &data = operandType(node, 0);
  std::vector<int64_t> axes;
  if (node.getNumOperands() == 2) {
    if (auto err = checkI64Vector(node, 1))
      return std::move(err);
    auto values = constantInts(node.getOperand(1));
    if (!values)
      return Results{unknownShape(data.getDType())};
    axes = std::move(*values);
  }
  if (axes.empty() && *noopWithEmptyAxes)
    return Results{known(data)};
  // Without an axes operand, axes is empty and no axis message can arise.
  std::string what = node.getNumOperands() == 2 ? "axes " + operandName(node, 1)
                                                : std::string("axes");
  return reduceOver(node, axes, *keepDims != 0, what);
}

/// ArgMax and ArgMin: one axis (attribute 'axis', default 0) of a numeric
/// operand of rank >= 1; i64 indices, the axis kept as 1 or dropped by
/// 'keepdims'. 'select_last_index' is 0 or 1.
Expected<Results> inferArgReduce(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  if (auto err = checkMinRank(node, 0, 1))
    return std::move(err);
  const TensorType &data = operandType(node, 0);
  auto axis = normalizedAxisAttr(node, 0, data.getRank());
  if (!axis)
    return axis.takeError();
  auto keepDims = intAttr(node, "keepdims", 1);
  if (!keepDims)
    return keepDims.takeError();
  auto last = flagAttr(node, "select_last_index", false);
  if (!last)
    return last.takeError();
  SmallVector<bool, 8> reduced(data.getRank(), false);
  reduced[*axis] = true;
  return Results{known(TensorType(
      DType::I64, reduceDims(data.getDims(), reduced, *keepDims != 0)))};
}

} // namespace remat::ir::inference
