//===- ir/inference/Indexing.cpp - Indexing inference rules ---------------===//
//
// GatherElements, Trilu, CumSum, Pad, Tile, TopK and EyeLike.
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

/// Checks that operand \p i holds one element (a 0-D tensor, or 1-D of one
/// element, which exporters also write) of dtype \p accepts.
Error checkScalarOperand(const Node &node, unsigned i, bool (*accepts)(DType),
                         StringRef expected) {
  if (auto err = checkDType(node, i, accepts, expected))
    return err;
  const TensorType &type = operandType(node, i);
  if (type.getRank() <= 1 && type.getNumElements() == 1)
    return Error::success();
  return nodeError(node, operandName(node, i) +
                             " must be a scalar (one element), got " +
                             type.str());
}

} // namespace

/// Trilu: a tensor of rank >= 2 and an optional i64 scalar k.
Expected<Results> inferTrilu(const Node &node) {
  if (auto err = checkMinRank(node, 0, 2))
    return std::move(err);
  if (node.getNumOperands() == 2)
    if (auto err = checkScalarOperand(node, 1, isI64, "dtype i64"))
      return std::move(err);
  auto upper = flagAttr(node, "upper", true);
  if (!upper)
    return upper.takeError();
  return Results{known(operandType(node, 0))};
}

namespace {

/// CumSum's data: ONNX allows the float dtypes, int32 and int64 (and
/// uint32/uint64, which remat does not have).
bool isCumSumType(DType dtype) {
  return isFloat(dtype) || dtype == DType::I64 || dtype == DType::I32;
}

} // namespace

Expected<Results> inferCumSum(const Node &node) {
  if (auto err =
          checkDType(node, 0, isCumSumType, "a float, i32 or i64 dtype"))
    return std::move(err);
  if (auto err = checkScalarOperand(node, 1, isIndexType, "dtype i32 or i64"))
    return std::move(err);
  for (StringRef name : {"exclusive", "reverse"}) {
    auto value = flagAttr(node, name, false);
    if (!value)
      return value.takeError();
  }
  const TensorType &data = operandType(node, 0);
  if (auto axis = constantInts(node.getOperand(1))) {
    auto normalized = normalizeAxis(node, "axis " + operandName(node, 1),
                                    (*axis)[0], data.getRank());
    if (!normalized)
      return normalized.takeError();
  }
  return Results{known(data)};
}

Expected<Results> inferGatherElements(const Node &node) {
  const TensorType &data = operandType(node, 0);
  const TensorType &indices = operandType(node, 1);
  auto axis = gatherAxis(node);
  if (!axis)
    return axis.takeError();
  if (auto err = checkIndicesRank(node))
    return std::move(err);
  if (auto err = checkIndicesWithinData(node, *axis))
    return std::move(err);
  if (data.getDim(*axis) == 0 && indices.getNumElements() > 0)
    return nodeError(node, operandName(node, 0) + " of type " + data.str() +
                               " has no entries along axis " + Twine(*axis) +
                               " to gather");
  return Results{known(data.withDims(indices.getDims()))};
}

/// Pad: pads (i64[2 * n]) and axes (i32/i64[n], opset 18; all dims when
/// absent) must be constants for a static shape; constant_value is a scalar
/// of the data's dtype.
Expected<Results> inferPad(const Node &node) {
  const TensorType &data = operandType(node, 0);
  int64_t rank = data.getRank();
  auto mode = stringAttr(node, "mode", "constant");
  if (!mode)
    return mode.takeError();
  if (*mode != "constant" && *mode != "reflect" && *mode != "edge" &&
      *mode != "wrap")
    return nodeError(node, "attribute 'mode' is \"" + *mode +
                               "\", expected \"constant\", \"reflect\", "
                               "\"edge\" or \"wrap\"");
  if (auto err = checkI64Vector(node, 1))
    return std::move(err);
  if (node.getNumOperands() > 2) {
    if (auto err = checkSameDType(node, 2, 0))
      return std::move(err);
    const TensorType &value = operandType(node, 2);
    if (value.getRank() > 1 || value.getNumElements() != 1)
      return nodeError(node, operandName(node, 2) +
                                 " must be a scalar (one element), got " +
                                 value.str());
  }
  std::vector<int64_t> axes;
  if (node.getNumOperands() > 3) {
    if (auto err = checkDType(node, 3, isIndexType, "dtype i32 or i64"))
      return std::move(err);
    if (auto err = checkRank(node, 3, 1))
      return std::move(err);
    auto values = constantInts(node.getOperand(3));
    if (!values)
      return Results{unknownShape(data.getDType())};
    auto normalized =
        normalizeAxes(node, "axes " + operandName(node, 3), *values, rank);
    if (!normalized)
      return normalized.takeError();
    axes.assign(normalized->begin(), normalized->end());
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  int64_t count = static_cast<int64_t>(axes.size());
  if (operandType(node, 1).getDim(0) != 2 * count)
    return nodeError(node, "pads " + operandName(node, 1) + " of type " +
                               operandType(node, 1).str() + " must have " +
                               Twine(2 * count) + " entries (two per padded "
                               "axis)");
  auto pads = constantInts(node.getOperand(1));
  if (!pads)
    return Results{unknownShape(data.getDType())};
  Dims dims = toDims(data.getDims());
  for (int64_t k = 0; k < count; ++k) {
    int64_t axis = axes[k];
    int64_t begin = (*pads)[k], end = (*pads)[k + count];
    if (*mode != "constant") {
      if (begin < 0 || end < 0)
        return nodeError(node, "pads " + formatDims(*pads) +
                                   " has a negative entry for axis " +
                                   Twine(axis) + ", which only mode "
                                   "\"constant\" supports");
      if ((begin > 0 || end > 0) && dims[axis] == 0)
        return nodeError(node, "mode \"" + *mode + "\" cannot pad axis " +
                                   Twine(axis) + " of size 0 of " +
                                   operandName(node, 0) + " of type " +
                                   data.str());
    }
    int64_t padded;
    bool overflow = __builtin_add_overflow(dims[axis], begin, &padded) ||
                    __builtin_add_overflow(padded, end, &padded);
    if (overflow || padded < 0)
      return nodeError(node, "pads " + formatDims(*pads) + " leave axis " +
                                 Twine(axis) + " of " + operandName(node, 0) +
                                 " of type " + data.str() +
                                 " with a negative size");
    dims[axis] = padded;
  }
  return Results{known(data.withDims(dims))};
}

/// Tile: repeats is an i64 vector with one entry >= 0 per dim of the data,
/// a constant for a static shape; dim d of the result is dims[d] *
/// repeats[d] (0 when either is).
Expected<Results> inferTile(const Node &node) {
  if (auto err = checkI64Vector(node, 1))
    return std::move(err);
  const TensorType &data = operandType(node, 0);
  const TensorType &repeats = operandType(node, 1);
  if (repeats.getDim(0) != int64_t(data.getRank()))
    return nodeError(node, operandName(node, 1) + " of type " + repeats.str() +
                               " must have one entry per dim of " + data.str());
  auto values = constantInts(node.getOperand(1));
  if (!values)
    return Results{unknownShape(data.getDType())};
  Dims dims;
  for (size_t d = 0; d < values->size(); ++d) {
    int64_t times = (*values)[d], dim = data.getDim(d);
    if (times < 0)
      return nodeError(node, "repeats " + formatDims(*values) +
                                 " has negative entry " + Twine(times));
    if (times > 0 && dim > std::numeric_limits<int64_t>::max() / times)
      return nodeError(node, "repeats " + formatDims(*values) + " of " +
                                 data.str() + " has too many elements");
    dims.push_back(dim * times);
  }
  return Results{known(data.withDims(dims))};
}

/// TopK: a numeric operand of rank >= 1 and K, an i64 tensor of one
/// element (ONNX's is 1-D) in [0, dim of 'axis'], a constant for a static
/// shape; values of the operand's dtype and i64 indices, the axis K long.
/// 'largest' and 'sorted' are 0 or 1.
Expected<Results> inferTopK(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  if (auto err = checkMinRank(node, 0, 1))
    return std::move(err);
  if (auto err = checkScalarOperand(node, 1, isI64, "dtype i64"))
    return std::move(err);
  const TensorType &data = operandType(node, 0);
  auto axis = normalizedAxisAttr(node, -1, data.getRank());
  if (!axis)
    return axis.takeError();
  for (StringRef name : {"largest", "sorted"}) {
    auto value = flagAttr(node, name, true);
    if (!value)
      return value.takeError();
  }
  auto k = constantInts(node.getOperand(1));
  if (!k)
    return Results{unknownShape(data.getDType()), unknownShape(DType::I64)};
  int64_t dim = data.getDim(*axis);
  if ((*k)[0] < 0 || (*k)[0] > dim)
    return nodeError(node, "K " + Twine((*k)[0]) + " is outside [0, " +
                               Twine(dim) + "], the dim of axis " +
                               Twine(*axis) + " of " + data.str());
  Dims dims(data.getDims().begin(), data.getDims().end());
  dims[*axis] = (*k)[0];
  return Results{known(data.withDims(dims)),
                 known(TensorType(DType::I64, dims))};
}

/// EyeLike: a 2-D operand of any dtype; the result has its shape and the
/// dtype of attribute 'dtype' (an ONNX code), or the operand's.
Expected<Results> inferEyeLike(const Node &node) {
  if (auto err = checkRank(node, 0, 2))
    return std::move(err);
  const TensorType &x = operandType(node, 0);
  auto code = optionalIntAttr(node, "dtype");
  if (!code)
    return code.takeError();
  DType dtype = x.getDType();
  if (*code) {
    std::optional<DType> chosen = fromOnnxCode(**code);
    if (!chosen)
      return nodeError(node, "attribute 'dtype' is " + Twine(**code) +
                                 ", which is not an ONNX dtype code remat "
                                 "supports");
    dtype = *chosen;
  }
  if (auto k = intAttr(node, "k", 0); !k)
    return k.takeError();
  return Results{known(x.withDType(dtype))};
}

} // namespace remat::ir::inference
