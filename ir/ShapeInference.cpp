//===- ir/ShapeInference.cpp - Result types from operands -----------------===//
//
// One infer<Name> function per op in Ops.def, with ONNX opset-17 semantics.
// Every function may assume that checkArity() passed and that every operand
// type passed TensorType::checkSize(); inferTypes() checks both first, and
// checks the size of every inferred type afterwards.
//
// Values that shapes depend on (Reshape's shape, Slice's starts, ...) are read
// from Constant nodes in any of the five forms Constant accepts (value,
// value_float, value_int, value_floats, value_ints). The public
// getConstantValue() hands out only the `value` tensor, which the node owns;
// the scalar and list forms have no TensorData to point to.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeInference.h"

#include "ir/Support.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <variant>
#include <vector>

using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::SmallVector;
using llvm::StringRef;
using llvm::Twine;

namespace remat::ir {

namespace {

using Results = SmallVector<InferredType, 1>;
using Dims = SmallVector<int64_t, 4>;

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

Error nodeError(const Node &node, const Twine &message) {
  return makeError(node.describe() + ": " + message);
}

/// \returns "[2,3]", the dims part of TensorType::str().
std::string formatDims(ArrayRef<int64_t> dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i != 0)
      text += ",";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

/// \returns "operand 1 (%b)".
std::string operandName(const Node &node, unsigned i) {
  return "operand " + std::to_string(i) + " (%" +
         node.getOperand(i)->getName().str() + ")";
}

/// \returns "1 operand" / "2 operands" / "1 to 3 results" /
/// "at least 1 result".
std::string countPhrase(int min, int max, StringRef noun) {
  std::string text;
  if (max == kVariadic)
    text = "at least " + std::to_string(min);
  else if (min == max)
    text = std::to_string(min);
  else
    text = std::to_string(min) + " to " + std::to_string(max);
  bool singular = min == 1 && (max == 1 || max == kVariadic);
  return text + " " + noun.str() + (singular ? "" : "s");
}

/// \returns \p value printed as by "%g" ("0.1", "1e+20", "nan").
std::string formatNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

//===----------------------------------------------------------------------===//
// Dtype classes (ONNX type constraints, restricted to remat's dtypes)
//===----------------------------------------------------------------------===//

bool isAnyType(DType) { return true; }
bool isNumeric(DType dtype) { return dtype != DType::Bool; }
bool isFloatType(DType dtype) { return isFloat(dtype); }
/// Relu and Neg: ONNX allows the signed types only.
bool isSignedNumeric(DType dtype) {
  return isFloat(dtype) || dtype == DType::I64 || dtype == DType::I32 ||
         dtype == DType::I8;
}
/// MatMul and Gemm: float16/bfloat16/float/double and int32/int64 (ONNX's
/// uint32/uint64 do not exist in remat; int8/uint8 need MatMulInteger).
bool isMatMulType(DType dtype) {
  return isFloat(dtype) || dtype == DType::I64 || dtype == DType::I32;
}
/// Pow's base: int32, int64 and the float types.
bool isPowBaseType(DType dtype) { return isMatMulType(dtype); }
bool isIndexType(DType dtype) {
  return dtype == DType::I64 || dtype == DType::I32;
}
bool isI64(DType dtype) { return dtype == DType::I64; }
bool isBool(DType dtype) { return dtype == DType::Bool; }
/// Range: float, double, int32, int64 (ONNX's int16 does not exist in remat).
bool isRangeType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::I32 ||
         dtype == DType::I64;
}

const TensorType &operandType(const Node &node, unsigned i) {
  return node.getOperand(i)->getType();
}

/// Checks that operand \p i of \p node has a dtype accepted by \p accepts;
/// \p expected describes the accepted dtypes ("a float dtype").
Error checkDType(const Node &node, unsigned i, bool (*accepts)(DType),
                 StringRef expected) {
  const TensorType &type = operandType(node, i);
  if (accepts(type.getDType()))
    return Error::success();
  return nodeError(node, operandName(node, i) + " must have " + expected +
                             ", got " + type.str());
}

/// Checks that operand \p i has the dtype of operand \p j.
Error checkSameDType(const Node &node, unsigned i, unsigned j) {
  const TensorType &a = operandType(node, i);
  const TensorType &b = operandType(node, j);
  if (a.getDType() == b.getDType())
    return Error::success();
  return nodeError(node, operandName(node, i) + " has type " + a.str() +
                             ", expected dtype " + dtypeName(b.getDType()) +
                             " (the dtype of " + operandName(node, j) + ")");
}

/// Checks that operand \p i has rank \p rank.
Error checkRank(const Node &node, unsigned i, unsigned rank) {
  const TensorType &type = operandType(node, i);
  if (type.getRank() == rank)
    return Error::success();
  return nodeError(node, operandName(node, i) + " must have rank " +
                             Twine(rank) + ", got " + type.str());
}

/// Checks that operand \p i has rank at least \p rank.
Error checkMinRank(const Node &node, unsigned i, unsigned rank) {
  const TensorType &type = operandType(node, i);
  if (type.getRank() >= rank)
    return Error::success();
  return nodeError(node, operandName(node, i) + " must have rank >= " +
                             Twine(rank) + ", got " + type.str());
}

/// Checks that operand \p i is a 1-D tensor of i64, as ONNX requires of
/// shape and axes operands.
Error checkI64Vector(const Node &node, unsigned i) {
  if (auto err = checkDType(node, i, isI64, "dtype i64"))
    return err;
  return checkRank(node, i, 1);
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

/// \returns attribute \p name of \p node if it has kind \p T, std::nullopt
/// if absent, an error naming the kinds if present with another kind.
template <typename T>
Expected<std::optional<T>> readAttr(const Node &node, StringRef name,
                                    StringRef expected) {
  const AttrValue *value = node.getAttrs().find(name);
  if (!value)
    return std::optional<T>();
  if (const T *typed = std::get_if<T>(value))
    return std::optional<T>(*typed);
  return nodeError(node, "attribute '" + name + "' must be " + expected +
                             ", got " + attrKindName(*value));
}

Expected<std::optional<int64_t>> optionalIntAttr(const Node &node,
                                                 StringRef name) {
  return readAttr<int64_t>(node, name, "an int");
}

Expected<int64_t> intAttr(const Node &node, StringRef name,
                          int64_t defaultValue) {
  auto value = optionalIntAttr(node, name);
  if (!value)
    return value.takeError();
  return value->value_or(defaultValue);
}

Expected<float> floatAttr(const Node &node, StringRef name,
                          float defaultValue) {
  auto value = readAttr<float>(node, name, "a float");
  if (!value)
    return value.takeError();
  return value->value_or(defaultValue);
}

Expected<std::string> stringAttr(const Node &node, StringRef name,
                                 StringRef defaultValue) {
  auto value = readAttr<std::string>(node, name, "a string");
  if (!value)
    return value.takeError();
  return value->value_or(defaultValue.str());
}

Expected<std::optional<std::vector<int64_t>>> intsAttr(const Node &node,
                                                       StringRef name) {
  return readAttr<std::vector<int64_t>>(node, name, "ints");
}

/// Like intsAttr for float lists; an empty list parses as ints, so an empty
/// int list is accepted as an empty float list.
Expected<std::optional<std::vector<float>>> floatsAttr(const Node &node,
                                                       StringRef name) {
  const AttrValue *value = node.getAttrs().find(name);
  if (value) {
    const auto *ints = std::get_if<std::vector<int64_t>>(value);
    if (ints && ints->empty())
      return std::optional<std::vector<float>>(std::vector<float>());
  }
  return readAttr<std::vector<float>>(node, name, "floats");
}

//===----------------------------------------------------------------------===//
// Axes
//===----------------------------------------------------------------------===//

/// Maps \p axis in [-rank, rank-1] to [0, rank-1]; \p what names it in the
/// message ("attribute 'axis'").
Expected<unsigned> normalizeAxis(const Node &node, const Twine &what,
                                 int64_t axis, int64_t rank) {
  if (rank == 0)
    return nodeError(node, what + " is " + Twine(axis) +
                               ", but the operand is a scalar");
  if (axis < -rank || axis >= rank)
    return nodeError(node, what + " is " + Twine(axis) +
                               ", expected a value in [" + Twine(-rank) + ", " +
                               Twine(rank - 1) + "] for rank " + Twine(rank));
  return static_cast<unsigned>(axis < 0 ? axis + rank : axis);
}

/// Normalizes every entry of \p axes against \p rank and rejects duplicates.
Expected<SmallVector<unsigned, 4>> normalizeAxes(const Node &node,
                                                 const Twine &what,
                                                 ArrayRef<int64_t> axes,
                                                 int64_t rank) {
  SmallVector<unsigned, 4> result;
  SmallVector<bool, 8> seen(rank, false);
  for (int64_t axis : axes) {
    auto normalized = normalizeAxis(node, what + " entry", axis, rank);
    if (!normalized)
      return normalized.takeError();
    if (seen[*normalized])
      return nodeError(node, what + " " + formatDims(axes) + " names axis " +
                                 Twine(*normalized) + " twice");
    seen[*normalized] = true;
    result.push_back(*normalized);
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Constant operands
//===----------------------------------------------------------------------===//

/// The attributes a Constant node may hold its value in; exactly one must be
/// present. The last three are ONNX forms remat does not support.
constexpr StringRef kConstantValueAttrs[] = {
    "value",      "value_float",  "value_int",    "value_floats",
    "value_ints", "sparse_value", "value_string", "value_strings"};

/// \returns the name of the single value attribute of Constant node \p node,
/// or "" when there is none or more than one.
StringRef singleConstantAttr(const Node &node) {
  StringRef found;
  for (StringRef name : kConstantValueAttrs) {
    if (!node.getAttrs().has(name))
      continue;
    if (!found.empty())
      return "";
    found = name;
  }
  return found;
}

/// \returns the type a well-formed Constant node \p node produces, or
/// std::nullopt if its value attribute is missing, duplicated or ill-kinded
/// (inferConstant reports those).
std::optional<TensorType> constantAttrType(const Node &node) {
  StringRef name = singleConstantAttr(node);
  const AttrList &attrs = node.getAttrs();
  if (name == "value") {
    TensorDataPtr data = attrs.getTensor("value");
    if (!data)
      return std::nullopt;
    return data->getType();
  }
  if (name == "value_float" && attrs.getFloat(name))
    return TensorType(DType::F32, {});
  if (name == "value_int" && attrs.getInt(name))
    return TensorType(DType::I64, {});
  if (name == "value_ints") {
    if (auto ints = attrs.getInts(name))
      return TensorType(DType::I64, {static_cast<int64_t>(ints->size())});
  }
  if (name == "value_floats") {
    if (auto floats = attrs.getFloats(name))
      return TensorType(DType::F32, {static_cast<int64_t>(floats->size())});
    // An empty list parses as an int list.
    if (auto ints = attrs.getInts(name); ints && ints->empty())
      return TensorType(DType::F32, {0});
  }
  return std::nullopt;
}

/// \returns the Constant node defining \p value when it is well formed and
/// its attribute type equals the type declared on \p value; null otherwise.
const Node *wellFormedConstant(const Value *value) {
  const Node *def = value->getDefiningNode();
  if (!def || def->getOp() != OpKind::Constant)
    return nullptr;
  std::optional<TensorType> type = constantAttrType(*def);
  if (!type || *type != value->getType())
    return nullptr;
  return def;
}

/// \returns the elements of constant \p value as int64 (floats truncate
/// toward zero), or std::nullopt if \p value is not a Constant's result.
std::optional<std::vector<int64_t>> constantInts(const Value *value) {
  const Node *def = wellFormedConstant(value);
  if (!def)
    return std::nullopt;
  const AttrList &attrs = def->getAttrs();
  StringRef name = singleConstantAttr(*def);
  if (name == "value")
    return attrs.getTensor("value")->getInts();
  if (name == "value_int")
    return std::vector<int64_t>{*attrs.getInt(name)};
  if (name == "value_ints")
    return *attrs.getInts(name);
  if (name == "value_float")
    return std::vector<int64_t>{static_cast<int64_t>(*attrs.getFloat(name))};
  assert(name == "value_floats" && "constantAttrType accepted another form");
  std::vector<int64_t> result;
  if (auto floats = attrs.getFloats(name))
    for (float element : *floats)
      result.push_back(static_cast<int64_t>(element));
  return result;
}

/// \returns the elements of constant \p value as doubles, or std::nullopt.
std::optional<std::vector<double>> constantDoubles(const Value *value) {
  const Node *def = wellFormedConstant(value);
  if (!def)
    return std::nullopt;
  const AttrList &attrs = def->getAttrs();
  StringRef name = singleConstantAttr(*def);
  std::vector<double> result;
  if (name == "value") {
    TensorDataPtr data = attrs.getTensor("value");
    for (int64_t i = 0, e = data->getNumElements(); i < e; ++i)
      result.push_back(data->getDouble(i));
  } else if (name == "value_int") {
    result.push_back(static_cast<double>(*attrs.getInt(name)));
  } else if (name == "value_ints") {
    std::vector<int64_t> ints = *attrs.getInts(name);
    result.assign(ints.begin(), ints.end());
  } else if (name == "value_float") {
    result.push_back(*attrs.getFloat(name));
  } else if (auto floats = attrs.getFloats(name)) {
    result.assign(floats->begin(), floats->end());
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Results and shape helpers
//===----------------------------------------------------------------------===//

Dims toDims(ArrayRef<int64_t> dims) { return Dims(dims.begin(), dims.end()); }

InferredType known(TensorType type) {
  InferredType result;
  result.type = std::move(type);
  return result;
}

/// A result whose dtype is known but whose dims depend on operand values
/// that are not constant.
InferredType unknownShape(DType dtype,
                          std::optional<int64_t> numElements = std::nullopt) {
  InferredType result;
  result.type = TensorType(dtype, {});
  result.shapeKnown = false;
  result.numElements = numElements;
  return result;
}

/// Broadcasts the operands \p indices of \p node numpy-style.
Expected<Dims> broadcastOperands(const Node &node, ArrayRef<unsigned> indices) {
  Dims dims = toDims(operandType(node, indices[0]).getDims());
  for (unsigned i : indices.drop_front()) {
    auto next = broadcastShapes(dims, operandType(node, i).getDims());
    if (next) {
      dims = *next;
      continue;
    }
    std::string list;
    for (unsigned j : indices) {
      if (!list.empty())
        list += ", ";
      list += operandName(node, j) + ": " + operandType(node, j).str();
    }
    return nodeError(node, "cannot broadcast operands " + list);
  }
  return dims;
}

/// \returns true if \p from broadcasts to \p to without changing \p to
/// (ONNX unidirectional broadcasting).
bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[offset + i])
      return false;
  return true;
}

/// \returns the element count of \p dims, or std::nullopt on overflow or a
/// negative dim.
std::optional<int64_t> product(ArrayRef<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims) {
    auto next = checkedMul(count, dim);
    if (!next)
      return std::nullopt;
    count = *next;
  }
  return count;
}

/// \returns \p dims with the axes marked in \p reduced removed, or set to 1
/// when \p keepDims.
Dims reduceDims(ArrayRef<int64_t> dims, ArrayRef<bool> reduced, bool keepDims) {
  Dims result;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!reduced[i])
      result.push_back(dims[i]);
    else if (keepDims)
      result.push_back(1);
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Add, Sub, Mul, Div: same numeric dtype, broadcast.
/// Operands of one dtype that satisfies \p accepts, numpy broadcasting.
Expected<Results> inferArithmetic(const Node &node,
                                  bool (*accepts)(DType) = isNumeric,
                                  StringRef expected = "a numeric dtype") {
  if (auto err = checkDType(node, 0, accepts, expected))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  auto dims = broadcastOperands(node, {0, 1});
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(operandType(node, 0).getDType(), *dims))};
}

Expected<Results> inferAdd(const Node &node) { return inferArithmetic(node); }
Expected<Results> inferSub(const Node &node) { return inferArithmetic(node); }
Expected<Results> inferMul(const Node &node) { return inferArithmetic(node); }
Expected<Results> inferDiv(const Node &node) { return inferArithmetic(node); }

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

/// A unary op whose operand dtype must satisfy \p accepts; the result has
/// the operand's type.
Expected<Results> inferUnary(const Node &node, bool (*accepts)(DType),
                             StringRef expected) {
  if (auto err = checkDType(node, 0, accepts, expected))
    return std::move(err);
  return Results{known(operandType(node, 0))};
}

Expected<Results> inferSqrt(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}
Expected<Results> inferErf(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}
Expected<Results> inferTanh(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}
Expected<Results> inferSigmoid(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}
Expected<Results> inferExp(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}
Expected<Results> inferLog(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}
Expected<Results> inferRelu(const Node &node) {
  return inferUnary(node, isSignedNumeric, "a float or signed integer dtype");
}
Expected<Results> inferNeg(const Node &node) {
  return inferUnary(node, isSignedNumeric, "a float or signed integer dtype");
}
Expected<Results> inferIdentity(const Node &node) {
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
  auto dims = broadcastOperands(node, {0, 1});
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(DType::Bool, *dims))};
}

Expected<Results> inferGreaterOrEqual(const Node &node) {
  if (auto err = checkDType(node, 0, isNumeric, "a numeric dtype"))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  auto dims = broadcastOperands(node, {0, 1});
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(DType::Bool, *dims))};
}

Expected<Results> inferAnd(const Node &node) {
  for (unsigned i = 0; i < 2; ++i)
    if (auto err = checkDType(node, i, isBool, "dtype bool"))
      return std::move(err);
  auto dims = broadcastOperands(node, {0, 1});
  if (!dims)
    return dims.takeError();
  return Results{known(TensorType(DType::Bool, *dims))};
}

/// Max: one or more operands of one numeric dtype, all broadcast together.
Expected<Results> inferMax(const Node &node) {
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
  auto fmod = intAttr(node, "fmod", 0);
  if (!fmod)
    return fmod.takeError();
  if (*fmod != 0 && *fmod != 1)
    return nodeError(node, "attribute 'fmod' is " + Twine(*fmod) +
                               ", expected 0 or 1");
  DType dtype = operandType(node, 0).getDType();
  if (isFloat(dtype) && *fmod != 1)
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

//===----------------------------------------------------------------------===//
// Linear algebra and normalization
//===----------------------------------------------------------------------===//

Expected<Results> inferMatMul(const Node &node) {
  if (auto err = checkDType(node, 0, isMatMulType, "a float, i32 or i64 dtype"))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  if (auto err = checkMinRank(node, 0, 1))
    return std::move(err);
  if (auto err = checkMinRank(node, 1, 1))
    return std::move(err);
  const TensorType &a = operandType(node, 0);
  const TensorType &b = operandType(node, 1);
  // numpy: a 1-D left operand is a row vector, a 1-D right operand a column
  // vector; the added dim is removed from the result.
  Dims aDims = toDims(a.getDims()), bDims = toDims(b.getDims());
  bool aIsVector = aDims.size() == 1, bIsVector = bDims.size() == 1;
  if (aIsVector)
    aDims.insert(aDims.begin(), 1);
  if (bIsVector)
    bDims.push_back(1);
  int64_t aK = aDims[aDims.size() - 1], bK = bDims[bDims.size() - 2];
  if (aK != bK)
    return nodeError(node, "cannot multiply " + a.str() + " by " + b.str() +
                               ": contraction dims " + Twine(aK) + " and " +
                               Twine(bK) + " differ");
  ArrayRef<int64_t> aBatch = ArrayRef<int64_t>(aDims).drop_back(2);
  ArrayRef<int64_t> bBatch = ArrayRef<int64_t>(bDims).drop_back(2);
  auto batch = broadcastShapes(aBatch, bBatch);
  if (!batch)
    return nodeError(node, "cannot broadcast the batch dims of " + a.str() +
                               " and " + b.str());
  Dims dims = *batch;
  if (!aIsVector)
    dims.push_back(aDims[aDims.size() - 2]);
  if (!bIsVector)
    dims.push_back(bDims[bDims.size() - 1]);
  return Results{known(TensorType(a.getDType(), dims))};
}

Expected<Results> inferGemm(const Node &node) {
  if (auto err = checkDType(node, 0, isMatMulType, "a float, i32 or i64 dtype"))
    return std::move(err);
  for (unsigned i = 1; i < node.getNumOperands(); ++i)
    if (auto err = checkSameDType(node, i, 0))
      return std::move(err);
  if (auto err = checkRank(node, 0, 2))
    return std::move(err);
  if (auto err = checkRank(node, 1, 2))
    return std::move(err);
  auto transA = intAttr(node, "transA", 0);
  if (!transA)
    return transA.takeError();
  auto transB = intAttr(node, "transB", 0);
  if (!transB)
    return transB.takeError();
  for (StringRef name : {"alpha", "beta"})
    if (auto value = floatAttr(node, name, 1.0f); !value)
      return value.takeError();
  const TensorType &a = operandType(node, 0);
  const TensorType &b = operandType(node, 1);
  // ONNX treats any nonzero transA/transB as true.
  int64_t m = a.getDim(*transA ? 1 : 0), aK = a.getDim(*transA ? 0 : 1);
  int64_t bK = b.getDim(*transB ? 1 : 0), n = b.getDim(*transB ? 0 : 1);
  if (aK != bK)
    return nodeError(node, "cannot multiply " + a.str() +
                               (*transA ? " (transposed)" : "") + " by " +
                               b.str() + (*transB ? " (transposed)" : "") +
                               ": contraction dims " + Twine(aK) + " and " +
                               Twine(bK) + " differ");
  Dims dims = {m, n};
  if (node.getNumOperands() == 3 &&
      !broadcastsTo(operandType(node, 2).getDims(), dims))
    return nodeError(node, operandName(node, 2) + " of type " +
                               operandType(node, 2).str() +
                               " does not broadcast to the product shape " +
                               formatDims(dims));
  return Results{known(TensorType(a.getDType(), dims))};
}

Expected<Results> inferSoftmaxLike(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  auto axis = intAttr(node, "axis", -1);
  if (!axis)
    return axis.takeError();
  const TensorType &x = operandType(node, 0);
  if (auto normalized =
          normalizeAxis(node, "attribute 'axis'", *axis, x.getRank());
      !normalized)
    return normalized.takeError();
  return Results{known(x)};
}

Expected<Results> inferSoftmax(const Node &node) {
  return inferSoftmaxLike(node);
}
Expected<Results> inferLogSoftmax(const Node &node) {
  return inferSoftmaxLike(node);
}

/// Y has X's type. Mean and InvStdDev keep X's leading dims and have size 1
/// from 'axis' on. Their dtype is the stash type U: f32 when stash_type is 1
/// (the default) and X is f16, bf16 or f32; otherwise X's own dtype, so that
/// f64 models keep f64 statistics and a stash_type other than 1 means "no
/// widening". (ONNX's schema would make U = stash_type, i.e. f32 even for an
/// f64 X; remat never narrows the statistics below X's precision.)
Expected<Results> inferLayerNormalization(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  for (unsigned i = 1; i < node.getNumOperands(); ++i)
    if (auto err = checkSameDType(node, i, 0))
      return std::move(err);
  auto axisAttr = intAttr(node, "axis", -1);
  if (!axisAttr)
    return axisAttr.takeError();
  if (auto epsilon = floatAttr(node, "epsilon", 1e-5f); !epsilon)
    return epsilon.takeError();
  auto stashType = intAttr(node, "stash_type", 1);
  if (!stashType)
    return stashType.takeError();
  std::optional<DType> stash = fromOnnxCode(*stashType);
  if (!stash || !isFloat(*stash))
    return nodeError(node, "attribute 'stash_type' is " + Twine(*stashType) +
                               ", expected the ONNX code of a float dtype");

  const TensorType &x = operandType(node, 0);
  auto axis = normalizeAxis(node, "attribute 'axis'", *axisAttr, x.getRank());
  if (!axis)
    return axis.takeError();
  ArrayRef<int64_t> normalized = x.getDims().drop_front(*axis);
  for (unsigned i = 1; i < node.getNumOperands(); ++i) {
    const TensorType &param = operandType(node, i);
    if (!broadcastsTo(param.getDims(), normalized))
      return nodeError(node, operandName(node, i) + " of type " + param.str() +
                                 " does not match the normalized shape " +
                                 formatDims(normalized) + " of " + x.str());
  }

  Results results{known(x)};
  DType xDType = x.getDType();
  DType statsDType = xDType;
  if (*stashType == onnxCode(DType::F32) &&
      (xDType == DType::F16 || xDType == DType::BF16 || xDType == DType::F32))
    statsDType = DType::F32;
  Dims statsDims = toDims(x.getDims());
  for (size_t i = *axis; i < statsDims.size(); ++i)
    statsDims[i] = 1;
  for (unsigned i = 1; i < node.getNumResults(); ++i)
    results.push_back(known(TensorType(statsDType, statsDims)));
  return results;
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

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

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

/// ReduceMean and ReduceMax: axes and keepdims are attributes in opset 17.
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

Expected<Results> inferReduceMean(const Node &node) {
  return inferAttrReduction(node);
}
Expected<Results> inferReduceMax(const Node &node) {
  return inferAttrReduction(node);
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

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

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

/// \returns true if \p perm holds each of 0 .. rank - 1 once.
bool isPermutation(ArrayRef<int64_t> perm, int64_t rank) {
  if (int64_t(perm.size()) != rank)
    return false;
  SmallVector<bool, 8> seen(rank, false);
  for (int64_t d : perm) {
    if (d < 0 || d >= rank || seen[d])
      return false;
    seen[d] = true;
  }
  return true;
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
  auto axisAttr = intAttr(node, "axis", 0);
  if (!axisAttr)
    return axisAttr.takeError();
  auto axis =
      normalizeAxis(node, "attribute 'axis'", *axisAttr, data.getRank());
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
  if (auto err = checkDType(node, 1, isIndexType, "dtype i32 or i64"))
    return std::move(err);
  const TensorType &data = operandType(node, 0);
  const TensorType &indices = operandType(node, 1);
  auto axisAttr = intAttr(node, "axis", 0);
  if (!axisAttr)
    return axisAttr.takeError();
  auto axis =
      normalizeAxis(node, "attribute 'axis'", *axisAttr, data.getRank());
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
  auto axisAttr = intAttr(node, "axis", 0);
  if (!axisAttr)
    return axisAttr.takeError();
  auto axis =
      normalizeAxis(node, "attribute 'axis'", *axisAttr, data.getRank());
  if (!axis)
    return axis.takeError();
  auto reduction = stringAttr(node, "reduction", "none");
  if (!reduction)
    return reduction.takeError();
  if (*reduction != "none" && *reduction != "add" && *reduction != "mul")
    return nodeError(node, "attribute 'reduction' is \"" + *reduction +
                               "\", expected \"none\", \"add\" or \"mul\"");
  if (indices.getRank() != data.getRank())
    return nodeError(node, operandName(node, 1) + " of type " + indices.str() +
                               " must have the rank of " +
                               operandName(node, 0) + " of type " + data.str());
  if (updates.getDims() != indices.getDims())
    return nodeError(node, operandName(node, 2) + " of type " + updates.str() +
                               " must have the shape of " +
                               operandName(node, 1) + " of type " +
                               indices.str());
  // Off the scatter axis, indices address data positionally.
  for (unsigned d = 0; d < data.getRank(); ++d)
    if (d != *axis && indices.getDim(d) > data.getDim(d))
      return nodeError(node, operandName(node, 1) + " of type " +
                                 indices.str() + " exceeds " +
                                 operandName(node, 0) + " of type " +
                                 data.str() + " in dim " + Twine(d));
  return Results{known(data)};
}

//===----------------------------------------------------------------------===//
// Shape-producing and constant ops
//===----------------------------------------------------------------------===//

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
  auto axisAttr = intAttr(node, "axis", -1);
  if (!axisAttr)
    return axisAttr.takeError();
  int64_t outRank = indices.getRank() + 1;
  auto axis = normalizeAxis(node, "attribute 'axis'", *axisAttr, outRank);
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

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

/// Checks SoftmaxCrossEntropyLoss's scores (operand 0: float, rank >= 2)
/// and labels (operand 1: i32 or i64, [N, d1, ..., dk] for scores [N, C,
/// d1, ..., dk]). \returns the labels' dims.
Expected<Dims> checkCrossEntropyLabels(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  if (auto err = checkMinRank(node, 0, 2))
    return std::move(err);
  if (auto err = checkDType(node, 1, isIndexType, "dtype i32 or i64"))
    return std::move(err);
  const TensorType &scores = operandType(node, 0);
  const TensorType &labels = operandType(node, 1);
  Dims expectedLabels;
  expectedLabels.push_back(scores.getDim(0));
  ArrayRef<int64_t> spatial = scores.getDims().drop_front(2);
  expectedLabels.append(spatial.begin(), spatial.end());
  if (labels.getDims() != ArrayRef<int64_t>(expectedLabels))
    return nodeError(node, "labels " + operandName(node, 1) + " of type " +
                               labels.str() + " must have shape " +
                               formatDims(expectedLabels) + " for scores " +
                               scores.str());
  return expectedLabels;
}

Expected<Results> inferSoftmaxCrossEntropyLoss(const Node &node) {
  auto expectedLabels = checkCrossEntropyLabels(node);
  if (!expectedLabels)
    return expectedLabels.takeError();
  auto reduction = stringAttr(node, "reduction", "mean");
  if (!reduction)
    return reduction.takeError();
  if (*reduction != "none" && *reduction != "sum" && *reduction != "mean")
    return nodeError(node, "attribute 'reduction' is \"" + *reduction +
                               "\", expected \"none\", \"sum\" or \"mean\"");
  if (auto ignoreIndex = optionalIntAttr(node, "ignore_index"); !ignoreIndex)
    return ignoreIndex.takeError();

  const TensorType &scores = operandType(node, 0);
  if (node.getNumOperands() == 3) {
    if (auto err = checkSameDType(node, 2, 0))
      return std::move(err);
    const TensorType &weights = operandType(node, 2);
    if (weights.getRank() != 1 || weights.getDim(0) != scores.getDim(1))
      return nodeError(node, "weights " + operandName(node, 2) + " of type " +
                                 weights.str() + " must have shape [" +
                                 Twine(scores.getDim(1)) + "] for scores " +
                                 scores.str());
  }
  Dims lossDims;
  if (*reduction == "none")
    lossDims = *expectedLabels;
  Results results{known(TensorType(scores.getDType(), lossDims))};
  if (node.getNumResults() == 2)
    results.push_back(known(scores));
  return results;
}

//===----------------------------------------------------------------------===//
// Ops added for the transformer families (issue 13)
//===----------------------------------------------------------------------===//

Expected<Results> inferSin(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}
Expected<Results> inferCos(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}
Expected<Results> inferAbs(const Node &node) {
  return inferUnary(node, isNumeric, "a numeric dtype");
}
Expected<Results> inferNot(const Node &node) {
  return inferUnary(node, isBool, "dtype bool");
}

Expected<Results> inferIsNaN(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  return Results{known(operandType(node, 0).withDType(DType::Bool))};
}

/// Min: as Max.
Expected<Results> inferMin(const Node &node) { return inferMax(node); }

Expected<Results> inferReciprocal(const Node &node) {
  return inferUnary(node, isFloatType, "a float dtype");
}

Expected<Results> inferIsInf(const Node &node) {
  for (StringRef name : {"detect_negative", "detect_positive"}) {
    auto value = intAttr(node, name, 1);
    if (!value)
      return value.takeError();
    if (*value != 0 && *value != 1)
      return nodeError(node, "attribute '" + name + "' is " + Twine(*value) +
                                 ", expected 0 or 1");
  }
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  return Results{known(operandType(node, 0).withDType(DType::Bool))};
}

Expected<Results> inferLess(const Node &node) {
  return inferGreaterOrEqual(node);
}
Expected<Results> inferLessOrEqual(const Node &node) {
  return inferGreaterOrEqual(node);
}
Expected<Results> inferGreater(const Node &node) {
  return inferGreaterOrEqual(node);
}
Expected<Results> inferOr(const Node &node) { return inferAnd(node); }

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

/// Trilu: a tensor of rank >= 2 and an optional i64 scalar k.
Expected<Results> inferTrilu(const Node &node) {
  if (auto err = checkMinRank(node, 0, 2))
    return std::move(err);
  if (node.getNumOperands() == 2)
    if (auto err = checkScalarOperand(node, 1, isI64, "dtype i64"))
      return std::move(err);
  auto upper = intAttr(node, "upper", 1);
  if (!upper)
    return upper.takeError();
  if (*upper != 0 && *upper != 1)
    return nodeError(node, "attribute 'upper' is " + Twine(*upper) +
                               ", expected 0 or 1");
  return Results{known(operandType(node, 0))};
}

/// CumSum's data: ONNX allows the float dtypes, int32 and int64 (and
/// uint32/uint64, which remat does not have).
bool isCumSumType(DType dtype) {
  return isFloat(dtype) || dtype == DType::I64 || dtype == DType::I32;
}

Expected<Results> inferCumSum(const Node &node) {
  if (auto err =
          checkDType(node, 0, isCumSumType, "a float, i32 or i64 dtype"))
    return std::move(err);
  if (auto err = checkScalarOperand(node, 1, isIndexType, "dtype i32 or i64"))
    return std::move(err);
  for (StringRef name : {"exclusive", "reverse"}) {
    auto value = intAttr(node, name, 0);
    if (!value)
      return value.takeError();
    if (*value != 0 && *value != 1)
      return nodeError(node, "attribute '" + name + "' is " + Twine(*value) +
                                 ", expected 0 or 1");
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
  if (auto err = checkDType(node, 1, isIndexType, "dtype i32 or i64"))
    return std::move(err);
  const TensorType &data = operandType(node, 0);
  const TensorType &indices = operandType(node, 1);
  auto axisAttr = intAttr(node, "axis", 0);
  if (!axisAttr)
    return axisAttr.takeError();
  auto axis =
      normalizeAxis(node, "attribute 'axis'", *axisAttr, data.getRank());
  if (!axis)
    return axis.takeError();
  if (indices.getRank() != data.getRank())
    return nodeError(node, operandName(node, 1) + " of type " + indices.str() +
                               " must have the rank of " +
                               operandName(node, 0) + " of type " + data.str());
  // Off the gather axis, indices address data positionally.
  for (unsigned d = 0; d < data.getRank(); ++d)
    if (d != *axis && indices.getDim(d) > data.getDim(d))
      return nodeError(node, operandName(node, 1) + " of type " +
                                 indices.str() + " exceeds " +
                                 operandName(node, 0) + " of type " +
                                 data.str() + " in dim " + Twine(d));
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

/// Reads an ints attribute of \p count entries, or \p defaultValue
/// repeated when absent.
Expected<SmallVector<int64_t, 3>> convInts(const Node &node, StringRef name,
                                           size_t count, int64_t defaultValue,
                                           int64_t minimum) {
  auto values = intsAttr(node, name);
  if (!values)
    return values.takeError();
  SmallVector<int64_t, 3> result(count, defaultValue);
  if (!*values)
    return result;
  if ((*values)->size() != count)
    return nodeError(node, "attribute '" + name + "' " +
                               formatDims(**values) + " must have " +
                               Twine(count) + " entries (one per spatial dim)");
  for (size_t i = 0; i < count; ++i) {
    if ((**values)[i] < minimum)
      return nodeError(node, "attribute '" + name + "' " +
                                 formatDims(**values) + " has an entry below " +
                                 Twine(minimum));
    result[i] = (**values)[i];
  }
  return result;
}

Expected<ConvGeometry> convGeometry(const Node &node) {
  bool transpose = node.getOp() == OpKind::ConvTranspose;
  for (unsigned i = 0; i < node.getNumOperands(); ++i)
    if (auto err = checkDType(node, i, isFloatType, "a float dtype"))
      return std::move(err);
  for (unsigned i = 1; i < node.getNumOperands(); ++i)
    if (auto err = checkSameDType(node, i, 0))
      return std::move(err);
  if (auto err = checkMinRank(node, 0, 3))
    return std::move(err);
  const TensorType &x = operandType(node, 0);
  const TensorType &w = operandType(node, 1);
  size_t spatial = x.getRank() - 2;
  if (auto err = checkRank(node, 1, x.getRank()))
    return std::move(err);
  ConvGeometry geometry;
  auto group = intAttr(node, "group", 1);
  if (!group)
    return group.takeError();
  if (*group < 1)
    return nodeError(node, "attribute 'group' is " + Twine(*group) +
                               ", expected a positive value");
  geometry.group = *group;
  int64_t channels = x.getDim(1);
  int64_t outChannels;
  if (!transpose) {
    // W is [M, C / group, k...].
    if (channels % *group != 0 || w.getDim(0) % *group != 0)
      return nodeError(node, "attribute 'group' " + Twine(*group) +
                                 " must divide the channels of " +
                                 operandName(node, 0) + " of type " + x.str() +
                                 " and of " + operandName(node, 1) +
                                 " of type " + w.str());
    if (w.getDim(1) * *group != channels)
      return nodeError(node, operandName(node, 1) + " of type " + w.str() +
                                 " must have " + Twine(channels / *group) +
                                 " input channels (dim 1) for " +
                                 operandName(node, 0) + " of type " + x.str() +
                                 " and group " + Twine(*group));
    outChannels = w.getDim(0);
  } else {
    // W is [C, M / group, k...].
    if (w.getDim(0) != channels || channels % *group != 0)
      return nodeError(node, operandName(node, 1) + " of type " + w.str() +
                                 " must have " + Twine(channels) +
                                 " channels (dim 0, divisible by group " +
                                 Twine(*group) + ") for " +
                                 operandName(node, 0) + " of type " + x.str());
    outChannels = w.getDim(1) * *group;
  }
  if (node.getNumOperands() == 3) {
    const TensorType &b = operandType(node, 2);
    if (b.getRank() != 1 || b.getDim(0) != outChannels)
      return nodeError(node, operandName(node, 2) + " of type " + b.str() +
                                 " must have shape [" + Twine(outChannels) +
                                 "] (one bias per output channel)");
  }
  geometry.kernel.assign(w.getDims().begin() + 2, w.getDims().end());
  if (auto kernelShape = intsAttr(node, "kernel_shape"); !kernelShape) {
    return kernelShape.takeError();
  } else if (*kernelShape &&
             ArrayRef<int64_t>(**kernelShape) !=
                 ArrayRef<int64_t>(geometry.kernel)) {
    return nodeError(node, "attribute 'kernel_shape' " +
                               formatDims(**kernelShape) +
                               " differs from the spatial dims of " +
                               operandName(node, 1) + " of type " + w.str());
  }
  auto strides = convInts(node, "strides", spatial, 1, 1);
  if (!strides)
    return strides.takeError();
  auto dilations = convInts(node, "dilations", spatial, 1, 1);
  if (!dilations)
    return dilations.takeError();
  geometry.strides = *strides;
  geometry.dilations = *dilations;
  geometry.outputPadding.assign(spatial, 0);
  if (transpose) {
    auto outputPadding = convInts(node, "output_padding", spatial, 0, 0);
    if (!outputPadding)
      return outputPadding.takeError();
    geometry.outputPadding = *outputPadding;
  }
  // ConvTranspose's output_shape (spatial dims, or all dims) decides the
  // pads (below) and overrides 'pads'.
  std::optional<std::vector<int64_t>> outputShape;
  if (transpose) {
    auto shape = intsAttr(node, "output_shape");
    if (!shape)
      return shape.takeError();
    if (*shape) {
      std::vector<int64_t> dims = **shape;
      if (dims.size() == spatial + 2)
        dims.erase(dims.begin(), dims.begin() + 2);
      if (dims.size() != spatial)
        return nodeError(node, "attribute 'output_shape' " +
                                   formatDims(**shape) + " must have " +
                                   Twine(spatial) + " entries (one per "
                                   "spatial dim)");
      outputShape = dims;
    }
  }
  auto autoPad = stringAttr(node, "auto_pad", "NOTSET");
  if (!autoPad)
    return autoPad.takeError();
  if (*autoPad != "NOTSET" && *autoPad != "VALID" && *autoPad != "SAME_UPPER" &&
      *autoPad != "SAME_LOWER")
    return nodeError(node, "attribute 'auto_pad' is \"" + *autoPad +
                               "\", expected NOTSET, VALID, SAME_UPPER or "
                               "SAME_LOWER");
  auto pads = intsAttr(node, "pads");
  if (!pads)
    return pads.takeError();
  geometry.padBegin.assign(spatial, 0);
  geometry.padEnd.assign(spatial, 0);
  if (*pads) {
    if (*autoPad != "NOTSET")
      return nodeError(node, "attributes 'pads' and 'auto_pad' \"" + *autoPad +
                                 "\" exclude each other");
    if ((*pads)->size() != 2 * spatial)
      return nodeError(node, "attribute 'pads' " + formatDims(**pads) +
                                 " must have " + Twine(2 * spatial) +
                                 " entries (begin and end per spatial dim)");
    for (size_t i = 0; i < spatial; ++i) {
      geometry.padBegin[i] = (**pads)[i];
      geometry.padEnd[i] = (**pads)[i + spatial];
      if (geometry.padBegin[i] < 0 || geometry.padEnd[i] < 0)
        return nodeError(node, "attribute 'pads' " + formatDims(**pads) +
                                   " has a negative entry");
    }
  }
  geometry.resultDims = {x.getDim(0), outChannels};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = x.getDim(i + 2);
    int64_t extent = geometry.dilations[i] * (geometry.kernel[i] - 1) + 1;
    int64_t stride = geometry.strides[i];
    if (transpose && outputShape) {
      // ONNX: total = stride (in - 1) + output_padding + extent - out;
      // SAME_UPPER puts total / 2 first, otherwise total / 2 goes last,
      // rounded down as ONNX's reference computes it. A negative total (an
      // output_shape beyond the transposed extent) pads negatively: the
      // positions past the extent take no input.
      int64_t full = stride * (in - 1) + geometry.outputPadding[i] + extent;
      int64_t total = full - (*outputShape)[i];
      if ((*outputShape)[i] < 0)
        return nodeError(node, "attribute 'output_shape' " +
                                   formatDims(*outputShape) +
                                   " has a negative entry");
      int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      geometry.padBegin[i] = *autoPad == "SAME_UPPER" ? half : total - half;
      geometry.padEnd[i] = total - geometry.padBegin[i];
      geometry.resultDims.push_back((*outputShape)[i]);
      continue;
    }
    if (transpose) {
      if (*autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER") {
        // The result is in * stride; the padding is what the full
        // transposed extent exceeds it by.
        int64_t full = stride * (in - 1) + geometry.outputPadding[i] + extent;
        int64_t total = std::max<int64_t>(0, full - in * stride);
        int64_t half = total / 2;
        geometry.padBegin[i] = *autoPad == "SAME_UPPER" ? half : total - half;
        geometry.padEnd[i] = total - geometry.padBegin[i];
      }
      int64_t out = stride * (in - 1) + geometry.outputPadding[i] + extent -
                    geometry.padBegin[i] - geometry.padEnd[i];
      if (out < 0)
        return nodeError(node, "the result would have a negative size in "
                               "spatial dim " +
                                   Twine(i));
      geometry.resultDims.push_back(out);
      continue;
    }
    if (*autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER") {
      int64_t out = (in + stride - 1) / stride;
      int64_t total = std::max<int64_t>(0, (out - 1) * stride + extent - in);
      int64_t half = total / 2;
      geometry.padBegin[i] = *autoPad == "SAME_UPPER" ? half : total - half;
      geometry.padEnd[i] = total - geometry.padBegin[i];
    }
    int64_t padded = in + geometry.padBegin[i] + geometry.padEnd[i];
    if (padded < extent)
      return nodeError(node, "the kernel extent " + Twine(extent) +
                                 " exceeds the padded input size " +
                                 Twine(padded) + " in spatial dim " + Twine(i) +
                                 " of " + operandName(node, 0) + " of type " +
                                 x.str());
    geometry.resultDims.push_back((padded - extent) / stride + 1);
  }
  return geometry;
}

Expected<Results> inferConvLike(const Node &node) {
  auto geometry = convGeometry(node);
  if (!geometry)
    return geometry.takeError();
  return Results{
      known(TensorType(operandType(node, 0).getDType(), geometry->resultDims))};
}

Expected<Results> inferConv(const Node &node) { return inferConvLike(node); }
Expected<Results> inferConvTranspose(const Node &node) {
  return inferConvLike(node);
}

//===----------------------------------------------------------------------===//
// Domain remat
//===----------------------------------------------------------------------===//

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
  return inferArithmetic(node, isFloatType, "a float dtype");
}

/// remat.SoftmaxCrossEntropyGrad(log_prob, labels, scale): log_prob and
/// labels as SoftmaxCrossEntropyLoss's scores and labels; scale of
/// log_prob's dtype and the labels' shape. The result has log_prob's type.
Expected<Results> inferSoftmaxCrossEntropyGrad(const Node &node) {
  auto labelDims = checkCrossEntropyLabels(node);
  if (!labelDims)
    return labelDims.takeError();
  if (auto err = checkSameDType(node, 2, 0))
    return std::move(err);
  const TensorType &scale = operandType(node, 2);
  if (scale.getDims() != ArrayRef<int64_t>(*labelDims))
    return nodeError(node, "scale " + operandName(node, 2) + " of type " +
                               scale.str() + " must have the labels' shape " +
                               formatDims(*labelDims));
  return Results{known(operandType(node, 0))};
}

/// \returns an error naming operand \p i of \p node unless its type is
/// \p wanted.
Error checkOperandType(const Node &node, unsigned i, const TensorType &wanted) {
  if (operandType(node, i) == wanted)
    return Error::success();
  return nodeError(node, operandName(node, i) + " of type " +
                             operandType(node, i).str() + " must be " +
                             wanted.str());
}

/// remat.SoftmaxGrad(dy, y): float operands of one type; 'axis' as
/// Softmax's. The result has their type.
Expected<Results> inferSoftmaxGrad(const Node &node) {
  if (auto results = inferSoftmaxLike(node); !results)
    return results.takeError();
  if (operandType(node, 1) != operandType(node, 0))
    return nodeError(
        node, operandName(node, 1) + " of type " + operandType(node, 1).str() +
                  " must have the type of " + operandName(node, 0) + ", " +
                  operandType(node, 0).str());
  return Results{known(operandType(node, 0))};
}

/// remat.LayerNormalizationGrad(dy, X, Scale, Mean, InvStdDev): dy and X of
/// one float type, Scale of X's dtype and exactly the normalized shape (the
/// dims from 'axis' on), Mean and InvStdDev of X's dtype and
/// LayerNormalization's statistics shape. The result has X's type.
Expected<Results> inferLayerNormalizationGrad(const Node &node) {
  if (auto err = checkDType(node, 1, isFloatType, "a float dtype"))
    return std::move(err);
  auto axisAttr = intAttr(node, "axis", -1);
  if (!axisAttr)
    return axisAttr.takeError();
  const TensorType &x = operandType(node, 1);
  auto axis = normalizeAxis(node, "attribute 'axis'", *axisAttr, x.getRank());
  if (!axis)
    return axis.takeError();
  Dims statsDims = toDims(x.getDims());
  for (size_t i = *axis; i < statsDims.size(); ++i)
    statsDims[i] = 1;
  auto expect = [&](unsigned i, ArrayRef<int64_t> dims) {
    return checkOperandType(node, i, TensorType(x.getDType(), dims));
  };
  if (auto err = expect(0, x.getDims()))
    return std::move(err);
  if (auto err = expect(2, x.getDims().drop_front(*axis)))
    return std::move(err);
  for (unsigned i : {3u, 4u})
    if (auto err = expect(i, statsDims))
      return std::move(err);
  return Results{known(x)};
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

/// remat.PermutedMatMul(A, B) {perm_a, perm_b, perm_y}: A and B of one
/// float dtype and one rank r >= 2; each perm (identity when absent) a
/// permutation of [0, r). Transpose(A, perm_a) is [batch..., M, K] and
/// Transpose(B, perm_b) [batch..., K, N] with the same batch dims (no
/// broadcasting); the result is Transpose([batch..., M, N], perm_y). The
/// layout a strided GEMM can read and write: A's and B's innermost dim stays
/// one of the matrix dims (perm[r - 1] or perm[r - 2] is r - 1), and so does
/// the result's (perm_y[r - 1] is r - 1 or r - 2).
Expected<Results> inferPermutedMatMul(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  if (auto err = checkMinRank(node, 0, 2))
    return std::move(err);
  const TensorType &a = operandType(node, 0);
  const TensorType &b = operandType(node, 1);
  int64_t rank = a.getRank();
  if (b.getRank() != unsigned(rank))
    return nodeError(node, "operands " + a.str() + " and " + b.str() +
                               " must have one rank");
  std::vector<int64_t> perms[3];
  const char *names[3] = {"perm_a", "perm_b", "perm_y"};
  for (unsigned p = 0; p < 3; ++p) {
    auto attr = intsAttr(node, names[p]);
    if (!attr)
      return attr.takeError();
    if (*attr) {
      perms[p] = **attr;
    } else {
      perms[p].resize(rank);
      std::iota(perms[p].begin(), perms[p].end(), 0);
    }
    if (!isPermutation(perms[p], rank))
      return nodeError(
          node, "attribute '" + Twine(names[p]) + "' " + formatDims(perms[p]) +
                    " is not a permutation of the " + Twine(rank) + " dims");
    bool strided = p == 2 ? perms[p][rank - 1] >= rank - 2
                          : perms[p][rank - 1] == rank - 1 ||
                                perms[p][rank - 2] == rank - 1;
    if (!strided)
      return nodeError(node, "attribute '" + Twine(names[p]) + "' " +
                                 formatDims(perms[p]) +
                                 (p == 2 ? " makes a batch dim of the "
                                           "product the result's last"
                                         : " moves the operand's last dim "
                                           "out of the matrix dims"));
  }
  auto permuted = [&](const TensorType &type, ArrayRef<int64_t> perm) {
    Dims dims;
    for (int64_t d : perm)
      dims.push_back(type.getDim(d));
    return dims;
  };
  Dims pa = permuted(a, perms[0]), pb = permuted(b, perms[1]);
  if (pa[rank - 1] != pb[rank - 2])
    return nodeError(node, "cannot multiply " + formatDims(pa) + " by " +
                               formatDims(pb) +
                               " (the permuted operands): "
                               "contraction dims " +
                               Twine(pa[rank - 1]) + " and " +
                               Twine(pb[rank - 2]) + " differ");
  if (!std::equal(pa.begin(), pa.end() - 2, pb.begin()))
    return nodeError(node, "the permuted operands " + formatDims(pa) + " and " +
                               formatDims(pb) +
                               " must have the same batch dims");
  Dims product(pa.begin(), pa.end() - 1);
  product.push_back(pb[rank - 1]);
  Dims dims;
  for (int64_t d : perms[2])
    dims.push_back(product[d]);
  return Results{known(TensorType(a.getDType(), dims))};
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

/// Dispatches to infer<Name> for every op in Ops.def.
Expected<Results> dispatch(const Node &node) {
  switch (node.getOp()) {
#define OP(NAME, ...)                                                          \
  case OpKind::NAME:                                                           \
    return infer##NAME(node);
#include "ir/Ops.def"
  }
  llvm_unreachable("unknown op kind");
}

} // namespace

//===----------------------------------------------------------------------===//
// Public interface
//===----------------------------------------------------------------------===//

const TensorData *getConstantValue(const Value *value) {
  const Node *def = wellFormedConstant(value);
  if (!def || singleConstantAttr(*def) != "value")
    return nullptr;
  return def->getAttrs().getTensor("value").get();
}

Error checkArity(const Node &node) {
  const OpInfo &info = node.getOpInfo();
  auto check = [&](int count, int min, int max, StringRef noun) -> Error {
    if (count >= min && (max == kVariadic || count <= max))
      return Error::success();
    return nodeError(node, "expects " + countPhrase(min, max, noun) + ", got " +
                               Twine(count));
  };
  if (auto err = check(node.getNumOperands(), info.minOperands,
                       info.maxOperands, "operand"))
    return err;
  return check(node.getNumResults(), info.minResults, info.maxResults,
               "result");
}

Expected<SmallVector<InferredType, 1>> inferTypes(const Node &node) {
  if (auto err = checkArity(node))
    return std::move(err);
  for (unsigned i = 0; i < node.getNumOperands(); ++i) {
    const TensorType &type = operandType(node, i);
    if (auto err = type.checkSize())
      return nodeError(node, operandName(node, i) + ": " +
                                 errorToString(std::move(err)));
  }
  auto results = dispatch(node);
  if (!results)
    return results.takeError();
  assert(results->size() == node.getNumResults() &&
         "inference must produce one type per result");
  for (unsigned i = 0; i < results->size(); ++i) {
    const InferredType &result = (*results)[i];
    if (!result.shapeKnown)
      continue;
    if (auto err = result.type.checkSize())
      return nodeError(node, "inferred result %" +
                                 node.getResult(i)->getName() + ": " +
                                 errorToString(std::move(err)));
  }
  return results;
}

Error checkResultTypes(const Node &node) {
  auto inferred = inferTypes(node);
  if (!inferred)
    return inferred.takeError();
  for (unsigned i = 0; i < node.getNumResults(); ++i) {
    const Value *result = node.getResult(i);
    const TensorType &declared = result->getType();
    const InferredType &expected = (*inferred)[i];
    std::string prefix = "declared type " + declared.str() + " of result %" +
                         result->getName().str() + " does not match ";
    if (expected.shapeKnown) {
      if (declared != expected.type)
        return nodeError(node, prefix + "inferred type " + expected.type.str());
      continue;
    }
    if (declared.getDType() != expected.type.getDType())
      return nodeError(node, prefix + "inferred dtype " +
                                 dtypeName(expected.type.getDType()));
    if (!expected.numElements)
      continue;
    if (auto err = declared.checkSize())
      return nodeError(node, "declared result %" + result->getName() + ": " +
                                 errorToString(std::move(err)));
    if (declared.getNumElements() != *expected.numElements)
      return nodeError(node, prefix + "inferred element count " +
                                 Twine(*expected.numElements));
  }
  return Error::success();
}

Expected<ConvGeometry> getConvGeometry(const Node &node) {
  assert((node.getOp() == OpKind::Conv ||
          node.getOp() == OpKind::ConvTranspose) &&
         "not a Conv or ConvTranspose node");
  return convGeometry(node);
}

std::optional<SmallVector<int64_t, 4>> broadcastShapes(ArrayRef<int64_t> a,
                                                       ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t, 4> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the back; missing leading dims act as 1.
    int64_t aDim = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t bDim = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (aDim == bDim || bDim == 1)
      result[i] = aDim;
    else if (aDim == 1)
      result[i] = bDim;
    else
      return std::nullopt;
  }
  return result;
}

} // namespace remat::ir
