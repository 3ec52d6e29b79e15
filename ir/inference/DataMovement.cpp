//===- ir/inference/DataMovement.cpp - Data movement inference rules ------===//
//
// Reshape, Transpose, (Un)Squeeze, Concat, Slice, Split, Expand, Gather,
// ScatterElements and the shape-producing and constant ops Shape,
// ConstantOfShape, Constant, Range, OneHot; result shapes that depend on
// operand values are known only when those are constants.
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

Expected<Results> inferReshape(const Node &node) {
  if (auto err = checkI64Vector(node, 1))
    return std::move(err);
  auto allowZero = intAttr(node, "allowzero", 0);
  if (!allowZero)
    return allowZero.takeError();
  const TensorType &data = operandType(node, 0);
  int64_t count = data.getNumElements();
  auto shape = constantInts(node.getOperand(1));
  if (!shape)
    return Results{unknownShape(data.getDType(), count)};

  std::string shapeText = formatDims(*shape);
  Dims dims;
  std::optional<size_t> inferredIndex;
  bool hasZero = false;
  for (size_t i = 0; i < shape->size(); ++i) {
    int64_t dim = (*shape)[i];
    if (dim == -1) {
      if (inferredIndex)
        return nodeError(node, "shape " + shapeText + " has more than one -1");
      inferredIndex = i;
      dims.push_back(1);
      continue;
    }
    if (dim < -1)
      return nodeError(node,
                       "shape " + shapeText + " has invalid dim " + Twine(dim));
    if (dim == 0 && !*allowZero) {
      if (i >= data.getRank())
        return nodeError(node, "shape " + shapeText + " copies dim " +
                                   Twine(i) + " with 0, but " + data.str() +
                                   " has rank " + Twine(data.getRank()));
      dims.push_back(data.getDim(i));
      continue;
    }
    hasZero |= dim == 0;
    dims.push_back(dim);
  }
  if (*allowZero && hasZero && inferredIndex)
    return nodeError(node, "shape " + shapeText +
                               " has both 0 and -1 with allowzero = 1");
  std::optional<int64_t> knownCount = product(dims);
  if (!knownCount)
    return nodeError(node, "shape " + shapeText + " has too many elements");
  if (inferredIndex) {
    if (*knownCount == 0 || count % *knownCount != 0)
      return nodeError(node, "cannot reshape " + data.str() + " to shape " +
                                 shapeText + ": no size for the -1 dim fits " +
                                 Twine(count) + " elements");
    dims[*inferredIndex] = count / *knownCount;
  } else if (*knownCount != count) {
    return nodeError(node, "cannot reshape " + data.str() + " (" +
                               Twine(count) + " elements) to shape " +
                               shapeText + " (" + Twine(*knownCount) +
                               " elements)");
  }
  return Results{known(data.withDims(dims))};
}

Expected<Results> inferTranspose(const Node &node) {
  const TensorType &data = operandType(node, 0);
  unsigned rank = data.getRank();
  auto permAttr = intsAttr(node, "perm");
  if (!permAttr)
    return permAttr.takeError();
  std::vector<int64_t> perm;
  if (*permAttr) {
    perm = **permAttr;
  } else {
    for (unsigned i = 0; i < rank; ++i)
      perm.push_back(rank - 1 - i);
  }
  if (!isPermutation(perm, rank))
    return nodeError(node, "attribute 'perm' " + formatDims(perm) +
                               " is not a permutation of the " + Twine(rank) +
                               " dims of " + data.str());
  Dims dims;
  for (int64_t axis : perm)
    dims.push_back(data.getDim(axis));
  return Results{known(data.withDims(dims))};
}

Expected<Results> inferUnsqueeze(const Node &node) {
  if (auto err = checkI64Vector(node, 1))
    return std::move(err);
  const TensorType &data = operandType(node, 0);
  auto axes = constantInts(node.getOperand(1));
  if (!axes)
    return Results{unknownShape(data.getDType(), data.getNumElements())};
  int64_t outRank = data.getRank() + static_cast<int64_t>(axes->size());
  auto normalized =
      normalizeAxes(node, "axes " + operandName(node, 1), *axes, outRank);
  if (!normalized)
    return normalized.takeError();
  SmallVector<bool, 8> inserted(outRank, false);
  for (unsigned axis : *normalized)
    inserted[axis] = true;
  Dims dims;
  unsigned next = 0;
  for (int64_t i = 0; i < outRank; ++i)
    dims.push_back(inserted[i] ? 1 : data.getDim(next++));
  return Results{known(data.withDims(dims))};
}

Expected<Results> inferSqueeze(const Node &node) {
  const TensorType &data = operandType(node, 0);
  SmallVector<bool, 8> removed(data.getRank(), false);
  if (node.getNumOperands() == 1) {
    for (unsigned i = 0; i < data.getRank(); ++i)
      removed[i] = data.getDim(i) == 1;
  } else {
    if (auto err = checkI64Vector(node, 1))
      return std::move(err);
    auto axes = constantInts(node.getOperand(1));
    if (!axes)
      return Results{unknownShape(data.getDType(), data.getNumElements())};
    auto normalized = normalizeAxes(node, "axes " + operandName(node, 1), *axes,
                                    data.getRank());
    if (!normalized)
      return normalized.takeError();
    for (unsigned axis : *normalized) {
      if (data.getDim(axis) != 1)
        return nodeError(node, "cannot squeeze dim " + Twine(axis) +
                                   " of size " + Twine(data.getDim(axis)) +
                                   " in " + data.str());
      removed[axis] = true;
    }
  }
  return Results{known(
      data.withDims(reduceDims(data.getDims(), removed, /*keepDims=*/false)))};
}

Expected<Results> inferConcat(const Node &node) {
  auto axisAttr = optionalIntAttr(node, "axis");
  if (!axisAttr)
    return axisAttr.takeError();
  if (!*axisAttr)
    return nodeError(node, "attribute 'axis' is required");
  const TensorType &first = operandType(node, 0);
  auto axis =
      normalizeAxis(node, "attribute 'axis'", **axisAttr, first.getRank());
  if (!axis)
    return axis.takeError();
  Dims dims = toDims(first.getDims());
  for (unsigned i = 1; i < node.getNumOperands(); ++i) {
    if (auto err = checkSameDType(node, i, 0))
      return std::move(err);
    const TensorType &type = operandType(node, i);
    bool compatible = type.getRank() == first.getRank();
    for (unsigned d = 0; compatible && d < first.getRank(); ++d)
      compatible = d == *axis || type.getDim(d) == first.getDim(d);
    if (!compatible)
      return nodeError(node, operandName(node, i) + " of type " + type.str() +
                                 " does not match " + operandName(node, 0) +
                                 " of type " + first.str() + " outside axis " +
                                 Twine(*axis));
    if (__builtin_add_overflow(dims[*axis], type.getDim(*axis), &dims[*axis]))
      return nodeError(node,
                       "concatenated dim " + Twine(*axis) + " overflows int64");
  }
  return Results{known(first.withDims(dims))};
}

namespace {

/// \returns the length of slicing a dim of size \p dim from \p start to
/// \p end by \p step (nonzero), with ONNX's clamping.
int64_t sliceLength(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim == 0)
    return 0;
  // dim >= 1, so adding it to a negative value cannot overflow.
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    if (end <= start)
      return 0;
    return (end - start - 1) / step + 1;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  if (start <= end)
    return 0;
  // -step overflows for INT64_MIN; compute in uint64.
  uint64_t stride = 0 - static_cast<uint64_t>(step);
  return static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / stride +
                              1);
}

} // namespace

Expected<Results> inferSlice(const Node &node) {
  unsigned numOperands = node.getNumOperands();
  for (unsigned i = 1; i < numOperands; ++i) {
    if (auto err = checkDType(node, i, isIndexType, "dtype i32 or i64"))
      return std::move(err);
    if (auto err = checkRank(node, i, 1))
      return std::move(err);
    if (i > 1)
      if (auto err = checkSameDType(node, i, 1))
        return std::move(err);
  }
  int64_t length = operandType(node, 1).getDim(0);
  for (unsigned i = 2; i < numOperands; ++i)
    if (operandType(node, i).getDim(0) != length)
      return nodeError(node, operandName(node, i) + " of type " +
                                 operandType(node, i).str() +
                                 " must have as many entries as " +
                                 operandName(node, 1) + " of type " +
                                 operandType(node, 1).str());

  const TensorType &data = operandType(node, 0);
  int64_t rank = data.getRank();
  if (numOperands == 3 && length > rank)
    return nodeError(node, operandName(node, 1) + " has " + Twine(length) +
                               " entries, but " + data.str() + " has rank " +
                               Twine(rank));

  SmallVector<std::vector<int64_t>, 4> values;
  for (unsigned i = 1; i < numOperands; ++i) {
    auto ints = constantInts(node.getOperand(i));
    if (!ints)
      return Results{unknownShape(data.getDType())};
    values.push_back(std::move(*ints));
  }
  const std::vector<int64_t> &starts = values[0];
  const std::vector<int64_t> &ends = values[1];
  std::vector<int64_t> axes;
  if (numOperands >= 4) {
    axes = values[2];
  } else {
    for (int64_t i = 0; i < length; ++i)
      axes.push_back(i);
  }
  std::vector<int64_t> steps(length, 1);
  if (numOperands == 5)
    steps = values[3];

  auto normalized = normalizeAxes(
      node,
      numOperands >= 4 ? "axes " + operandName(node, 3) : std::string("axes"),
      axes, rank);
  if (!normalized)
    return normalized.takeError();
  Dims dims = toDims(data.getDims());
  for (int64_t i = 0; i < length; ++i) {
    if (steps[i] == 0)
      return nodeError(node, "steps " + operandName(node, 4) + " " +
                                 formatDims(steps) + " has a zero step");
    unsigned axis = (*normalized)[i];
    dims[axis] = sliceLength(data.getDim(axis), starts[i], ends[i], steps[i]);
  }
  return Results{known(data.withDims(dims))};
}

Expected<Results> inferSplit(const Node &node) {
  const TensorType &data = operandType(node, 0);
  auto axis = normalizedAxisAttr(node, 0, data.getRank());
  if (!axis)
    return axis.takeError();
  unsigned numResults = node.getNumResults();
  int64_t dim = data.getDim(*axis);
  std::vector<int64_t> sizes;
  if (node.getNumOperands() == 2) {
    if (auto err = checkI64Vector(node, 1))
      return std::move(err);
    if (operandType(node, 1).getDim(0) != numResults)
      return nodeError(node, "split " + operandName(node, 1) + " of type " +
                                 operandType(node, 1).str() + " has " +
                                 Twine(operandType(node, 1).getDim(0)) +
                                 " entries for " + Twine(numResults) +
                                 " results");
    auto split = constantInts(node.getOperand(1));
    if (!split)
      return Results(numResults, unknownShape(data.getDType()));
    int64_t sum = 0;
    for (int64_t size : *split) {
      if (size < 0 || __builtin_add_overflow(sum, size, &sum))
        return nodeError(node, "split " + formatDims(*split) +
                                   " has a negative or too large entry");
    }
    if (sum != dim)
      return nodeError(node, "split " + formatDims(*split) + " sums to " +
                                 Twine(sum) + ", but dim " + Twine(*axis) +
                                 " of " + data.str() + " is " + Twine(dim));
    sizes = std::move(*split);
  } else {
    if (dim % numResults != 0)
      return nodeError(node, "cannot split dim " + Twine(*axis) + " of " +
                                 data.str() + " evenly into " +
                                 Twine(numResults) + " results");
    sizes.assign(numResults, dim / numResults);
  }
  Results results;
  for (int64_t size : sizes) {
    Dims dims = toDims(data.getDims());
    dims[*axis] = size;
    results.push_back(known(data.withDims(dims)));
  }
  return results;
}

Expected<Results> inferExpand(const Node &node) {
  if (auto err = checkI64Vector(node, 1))
    return std::move(err);
  const TensorType &data = operandType(node, 0);
  auto shape = constantInts(node.getOperand(1));
  if (!shape)
    return Results{unknownShape(data.getDType())};
  for (int64_t dim : *shape)
    if (dim < 0)
      return nodeError(node, "shape " + formatDims(*shape) +
                                 " has negative dim " + Twine(dim));
  auto dims = broadcastShapes(data.getDims(), *shape);
  if (!dims)
    return nodeError(node, "cannot expand " + data.str() + " to shape " +
                               formatDims(*shape));
  return Results{known(data.withDims(*dims))};
}

Expected<Results> inferGather(const Node &node) {
  const TensorType &data = operandType(node, 0);
  const TensorType &indices = operandType(node, 1);
  auto axis = gatherAxis(node);
  if (!axis)
    return axis.takeError();
  Dims dims = toDims(data.getDims().take_front(*axis));
  dims.append(indices.getDims().begin(), indices.getDims().end());
  ArrayRef<int64_t> rest = data.getDims().drop_front(*axis + 1);
  dims.append(rest.begin(), rest.end());
  return Results{known(data.withDims(dims))};
}

Expected<Results> inferScatterElements(const Node &node) {
  if (auto err = checkDType(node, 1, isIndexType, "dtype i32 or i64"))
    return std::move(err);
  if (auto err = checkSameDType(node, 2, 0))
    return std::move(err);
  const TensorType &data = operandType(node, 0);
  const TensorType &indices = operandType(node, 1);
  const TensorType &updates = operandType(node, 2);
  auto axis = normalizedAxisAttr(node, 0, data.getRank());
  if (!axis)
    return axis.takeError();
  auto reduction = stringAttr(node, "reduction", "none");
  if (!reduction)
    return reduction.takeError();
  if (*reduction != "none" && *reduction != "add" && *reduction != "mul")
    return nodeError(node, "attribute 'reduction' is \"" + *reduction +
                               "\", expected \"none\", \"add\" or \"mul\"");
  if (auto err = checkIndicesRank(node))
    return std::move(err);
  if (updates.getDims() != indices.getDims())
    return nodeError(node, operandName(node, 2) + " of type " + updates.str() +
                               " must have the shape of " +
                               operandName(node, 1) + " of type " +
                               indices.str());
  if (auto err = checkIndicesWithinData(node, *axis))
    return std::move(err);
  return Results{known(data)};
}

Expected<Results> inferShape(const Node &node) {
  int64_t rank = operandType(node, 0).getRank();
  auto start = intAttr(node, "start", 0);
  if (!start)
    return start.takeError();
  auto end = intAttr(node, "end", rank);
  if (!end)
    return end.takeError();
  // Opset 15: negative values count from the back; both clamp to [0, rank].
  auto clampAxis = [rank](int64_t axis) {
    if (axis < 0)
      axis += rank;
    return std::clamp<int64_t>(axis, 0, rank);
  };
  int64_t length = std::max<int64_t>(clampAxis(*end) - clampAxis(*start), 0);
  return Results{known(TensorType(DType::I64, {length}))};
}

Expected<Results> inferConstantOfShape(const Node &node) {
  if (auto err = checkI64Vector(node, 0))
    return std::move(err);
  auto value = readAttr<TensorDataPtr>(node, "value", "a tensor");
  if (!value)
    return value.takeError();
  DType dtype = DType::F32;
  if (*value) {
    const TensorType &valueType = (**value)->getType();
    if (valueType.getNumElements() != 1)
      return nodeError(node, "attribute 'value' of type " + valueType.str() +
                                 " must have exactly one element");
    dtype = valueType.getDType();
  }
  auto shape = constantInts(node.getOperand(0));
  if (!shape)
    return Results{unknownShape(dtype)};
  for (int64_t dim : *shape)
    if (dim < 0)
      return nodeError(node, "shape " + formatDims(*shape) +
                                 " has negative dim " + Twine(dim));
  return Results{known(TensorType(dtype, *shape))};
}

Expected<Results> inferConstant(const Node &node) {
  const AttrList &attrs = node.getAttrs();
  SmallVector<StringRef, 2> present;
  for (StringRef name : kConstantValueAttrs)
    if (attrs.has(name))
      present.push_back(name);
  if (present.size() != 1) {
    std::string list;
    for (StringRef name : present)
      list += (list.empty() ? "'" : ", '") + name.str() + "'";
    return nodeError(node, "expects exactly one of 'value', 'value_float', "
                           "'value_int', 'value_floats', 'value_ints', got " +
                               (list.empty() ? std::string("none") : list));
  }
  StringRef name = present.front();
  if (name == "value") {
    auto value = readAttr<TensorDataPtr>(node, name, "a tensor");
    if (!value)
      return value.takeError();
    assert(**value && "tensor attribute holds no data");
    return Results{known((**value)->getType())};
  }
  if (name == "value_float") {
    if (auto value = readAttr<float>(node, name, "a float"); !value)
      return value.takeError();
    return Results{known(TensorType(DType::F32, {}))};
  }
  if (name == "value_int") {
    if (auto value = optionalIntAttr(node, name); !value)
      return value.takeError();
    return Results{known(TensorType(DType::I64, {}))};
  }
  if (name == "value_floats") {
    auto value = floatsAttr(node, name);
    if (!value)
      return value.takeError();
    return Results{known(
        TensorType(DType::F32, {static_cast<int64_t>((*value)->size())}))};
  }
  if (name == "value_ints") {
    auto value = intsAttr(node, name);
    if (!value)
      return value.takeError();
    return Results{known(
        TensorType(DType::I64, {static_cast<int64_t>((*value)->size())}))};
  }
  return nodeError(node, "attribute '" + name + "' is not supported");
}

namespace {

/// \returns ceil((limit - start) / delta) clamped below at 0, computed as
/// onnxruntime does for float types: the difference in the element type,
/// the division in double.
Expected<int64_t> floatRangeLength(const Node &node, DType dtype,
                                   ArrayRef<double> bounds) {
  double start = bounds[0], limit = bounds[1], delta = bounds[2];
  if (delta == 0)
    return nodeError(node, "delta " + operandName(node, 2) + " is zero");
  double difference = dtype == DType::F32
                          ? static_cast<double>(static_cast<float>(limit) -
                                                static_cast<float>(start))
                          : limit - start;
  double count = std::ceil(difference / delta);
  if (std::isnan(count))
    return nodeError(node, "range from " + formatNumber(start) + " to " +
                               formatNumber(limit) + " by " +
                               formatNumber(delta) + " has no length");
  if (count <= 0)
    return 0;
  // 2^63: the first double that does not fit int64.
  if (count >= 9223372036854775808.0)
    return nodeError(node, "range from " + formatNumber(start) + " to " +
                               formatNumber(limit) + " by " +
                               formatNumber(delta) + " has too many elements");
  return static_cast<int64_t>(count);
}

/// \returns ceil((limit - start) / delta) clamped below at 0, exactly.
Expected<int64_t> intRangeLength(const Node &node, ArrayRef<int64_t> bounds) {
  int64_t start = bounds[0], limit = bounds[1], delta = bounds[2];
  if (delta == 0)
    return nodeError(node, "delta " + operandName(node, 2) + " is zero");
  // limit - start can overflow int64; the quotient cannot exceed 2^64.
  __int128 difference = static_cast<__int128>(limit) - start;
  __int128 quotient = difference / delta;
  if (quotient * delta != difference && (difference > 0) == (delta > 0))
    ++quotient;
  if (quotient <= 0)
    return 0;
  if (quotient > std::numeric_limits<int64_t>::max())
    return nodeError(node, "range from " + Twine(start) + " to " +
                               Twine(limit) + " by " + Twine(delta) +
                               " has too many elements");
  return static_cast<int64_t>(quotient);
}

} // namespace

Expected<Results> inferRange(const Node &node) {
  if (auto err = checkDType(node, 0, isRangeType, "dtype f32, f64, i32 or i64"))
    return std::move(err);
  for (unsigned i = 0; i < 3; ++i) {
    if (i > 0)
      if (auto err = checkSameDType(node, i, 0))
        return std::move(err);
    if (auto err = checkRank(node, i, 0))
      return std::move(err);
  }
  DType dtype = operandType(node, 0).getDType();
  Expected<int64_t> length = 0;
  if (isFloat(dtype)) {
    SmallVector<double, 3> bounds;
    for (unsigned i = 0; i < 3; ++i) {
      auto value = constantDoubles(node.getOperand(i));
      if (!value)
        return Results{unknownShape(dtype)};
      bounds.push_back(value->front());
    }
    length = floatRangeLength(node, dtype, bounds);
  } else {
    // Read integers exactly; doubles would round beyond 2^53.
    SmallVector<int64_t, 3> bounds;
    for (unsigned i = 0; i < 3; ++i) {
      auto value = constantInts(node.getOperand(i));
      if (!value)
        return Results{unknownShape(dtype)};
      bounds.push_back(value->front());
    }
    length = intRangeLength(node, bounds);
  }
  if (!length)
    return length.takeError();
  return Results{known(TensorType(dtype, {*length}))};
}

Expected<Results> inferOneHot(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  if (auto err = checkDType(node, 1, isNumeric, "a numeric dtype"))
    return std::move(err);
  const TensorType &indices = operandType(node, 0);
  const TensorType &depth = operandType(node, 1);
  const TensorType &values = operandType(node, 2);
  if (depth.getRank() > 1 || depth.getNumElements() != 1)
    return nodeError(node, "depth " + operandName(node, 1) + " of type " +
                               depth.str() +
                               " must be a scalar or have one element");
  if (values.getRank() != 1 || values.getDim(0) != 2)
    return nodeError(node, "values " + operandName(node, 2) + " of type " +
                               values.str() +
                               " must have shape [2] (off value, on value)");
  int64_t outRank = indices.getRank() + 1;
  auto axis = normalizedAxisAttr(node, -1, outRank);
  if (!axis)
    return axis.takeError();
  auto depthValue = constantDoubles(node.getOperand(1));
  if (!depthValue)
    return Results{unknownShape(values.getDType())};
  double classes = std::trunc(depthValue->front());
  if (!(classes >= 1) || classes >= 9.2233720368547758e18)
    return nodeError(node, "depth " + operandName(node, 1) + " is " +
                               formatNumber(depthValue->front()) +
                               ", expected a positive count");
  Dims dims = toDims(indices.getDims());
  dims.insert(dims.begin() + *axis, static_cast<int64_t>(classes));
  return Results{known(TensorType(values.getDType(), dims))};
}

/// remat.Extern(...) {target, cost, flops, bytes}: an op remat has no kernel
/// for (another front end's, e.g. an aten op from remat.torch). Its results
/// are the types declared; 'target' (a non-empty string) names it, 'cost' is
/// "gemm", "memory" (the default) or "free", and 'flops' and 'bytes', when
/// given, are counts of at least 0.
Expected<Results> inferExtern(const Node &node) {
  const AttrList &attrs = node.getAttrs();
  std::optional<std::string> target = attrs.getString("target");
  if (!target || target->empty())
    return nodeError(node, "needs a non-empty string attribute 'target'");
  if (std::optional<std::string> cost = attrs.getString("cost"))
    if (*cost != "gemm" && *cost != "memory" && *cost != "free")
      return nodeError(node, "attribute 'cost' is \"" + *cost +
                                 "\"; expected \"gemm\", \"memory\" or "
                                 "\"free\"");
  for (StringRef name : {"flops", "bytes"})
    if (std::optional<int64_t> count = attrs.getInt(name); count && *count < 0)
      return nodeError(node, "attribute '" + name + "' is " + Twine(*count) +
                                 "; it must be at least 0");
  Results results;
  for (const Value *result : node.getResults())
    results.push_back(known(result->getType()));
  return results;
}


} // namespace remat::ir::inference
