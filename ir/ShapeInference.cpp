//===- ir/ShapeInference.cpp - Result types from operands -----------------===//
//
// Dispatches each node to the inference rule its Ops.def row names,
// infer<Infer> in ir/inference/ (one file per op family), with ONNX
// opset-17 semantics, and defines the helpers the rules share
// (ir/inference/InferenceImpl.h). Every rule may assume that checkArity()
// passed and that every operand type passed TensorType::checkSize();
// inferTypes() checks both first, and checks the size of every inferred
// type afterwards.
//
// Values that shapes depend on (Reshape's shape, Slice's starts, ...) are read
// from Constant nodes in any of the five forms Constant accepts (value,
// value_float, value_int, value_floats, value_ints). The public
// getConstantValue() hands out only the `value` tensor, which the node owns;
// the scalar and list forms have no TensorData to point to.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeInference.h"

#include "ir/inference/InferenceImpl.h"

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

namespace remat::ir {

namespace inference {

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

Error nodeError(const Node &node, const Twine &message) {
  return makeError(node.describe() + ": " + message);
}

std::string formatDims(ArrayRef<int64_t> dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i != 0)
      text += ",";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

std::string operandName(const Node &node, unsigned i) {
  return "operand " + std::to_string(i) + " (%" +
         node.getOperand(i)->getName().str() + ")";
}

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

bool isSignedNumeric(DType dtype) {
  return isFloat(dtype) || dtype == DType::I64 || dtype == DType::I32 ||
         dtype == DType::I8;
}

bool isMatMulType(DType dtype) {
  return isFloat(dtype) || dtype == DType::I64 || dtype == DType::I32;
}

bool isPowBaseType(DType dtype) { return isMatMulType(dtype); }

bool isIndexType(DType dtype) {
  return dtype == DType::I64 || dtype == DType::I32;
}

bool isI64(DType dtype) { return dtype == DType::I64; }

bool isBool(DType dtype) { return dtype == DType::Bool; }

bool isRangeType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::I32 ||
         dtype == DType::I64;
}

const TensorType &operandType(const Node &node, unsigned i) {
  return node.getOperand(i)->getType();
}

Error checkDType(const Node &node, unsigned i, bool (*accepts)(DType),
                 StringRef expected) {
  const TensorType &type = operandType(node, i);
  if (accepts(type.getDType()))
    return Error::success();
  return nodeError(node, operandName(node, i) + " must have " + expected +
                             ", got " + type.str());
}

Error checkSameDType(const Node &node, unsigned i, unsigned j) {
  const TensorType &a = operandType(node, i);
  const TensorType &b = operandType(node, j);
  if (a.getDType() == b.getDType())
    return Error::success();
  return nodeError(node, operandName(node, i) + " has type " + a.str() +
                             ", expected dtype " + dtypeName(b.getDType()) +
                             " (the dtype of " + operandName(node, j) + ")");
}

Error checkRank(const Node &node, unsigned i, unsigned rank) {
  const TensorType &type = operandType(node, i);
  if (type.getRank() == rank)
    return Error::success();
  return nodeError(node, operandName(node, i) + " must have rank " +
                             Twine(rank) + ", got " + type.str());
}

Error checkMinRank(const Node &node, unsigned i, unsigned rank) {
  const TensorType &type = operandType(node, i);
  if (type.getRank() >= rank)
    return Error::success();
  return nodeError(node, operandName(node, i) + " must have rank >= " +
                             Twine(rank) + ", got " + type.str());
}

Error checkI64Vector(const Node &node, unsigned i) {
  if (auto err = checkDType(node, i, isI64, "dtype i64"))
    return err;
  return checkRank(node, i, 1);
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

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

Expected<bool> flagAttr(const Node &node, StringRef name, bool defaultValue) {
  auto value = intAttr(node, name, defaultValue ? 1 : 0);
  if (!value)
    return value.takeError();
  if (*value != 0 && *value != 1)
    return nodeError(node, "attribute '" + name + "' is " + Twine(*value) +
                               ", expected 0 or 1");
  return *value == 1;
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

Expected<unsigned> normalizedAxisAttr(const Node &node, int64_t defaultAxis,
                                      int64_t rank) {
  auto axis = intAttr(node, "axis", defaultAxis);
  if (!axis)
    return axis.takeError();
  return normalizeAxis(node, "attribute 'axis'", *axis, rank);
}

Expected<unsigned> gatherAxis(const Node &node) {
  if (auto err = checkDType(node, 1, isIndexType, "dtype i32 or i64"))
    return std::move(err);
  return normalizedAxisAttr(node, 0, operandType(node, 0).getRank());
}

Error checkIndicesRank(const Node &node) {
  const TensorType &data = operandType(node, 0);
  const TensorType &indices = operandType(node, 1);
  if (indices.getRank() != data.getRank())
    return nodeError(node, operandName(node, 1) + " of type " + indices.str() +
                               " must have the rank of " +
                               operandName(node, 0) + " of type " + data.str());
  return Error::success();
}

Error checkIndicesWithinData(const Node &node, unsigned axis) {
  const TensorType &data = operandType(node, 0);
  const TensorType &indices = operandType(node, 1);
  for (unsigned d = 0; d < data.getRank(); ++d)
    if (d != axis && indices.getDim(d) > data.getDim(d))
      return nodeError(node, operandName(node, 1) + " of type " +
                                 indices.str() + " exceeds " +
                                 operandName(node, 0) + " of type " +
                                 data.str() + " in dim " + Twine(d));
  return Error::success();
}

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

const Node *wellFormedConstant(const Value *value) {
  const Node *def = value->getDefiningNode();
  if (!def || def->getOp() != OpKind::Constant)
    return nullptr;
  std::optional<TensorType> type = constantAttrType(*def);
  if (!type || *type != value->getType())
    return nullptr;
  return def;
}

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

InferredType unknownShape(DType dtype,
                          std::optional<int64_t> numElements) {
  InferredType result;
  result.type = TensorType(dtype, {});
  result.shapeKnown = false;
  result.numElements = numElements;
  return result;
}

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

bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[offset + i])
      return false;
  return true;
}

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

Error checkOperandType(const Node &node, unsigned i, const TensorType &wanted) {
  if (operandType(node, i) == wanted)
    return Error::success();
  return nodeError(node, operandName(node, i) + " of type " +
                             operandType(node, i).str() + " must be " +
                             wanted.str());
}

} // namespace inference

using namespace inference;

namespace {

using Rule = Expected<Results> (*)(const Node &);

/// The inference rule of every op, infer<Infer> from its Ops.def row,
/// indexed by OpKind.
constexpr Rule kRules[] = {
#define OP(NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS, \
           TRAITS, COST, INFER, ...)                                           \
  &infer##INFER,
#include "ir/Ops.def"
};

Expected<Results> dispatch(const Node &node) {
  return kRules[size_t(node.getOp())](node);
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

Expected<PoolGeometry> getPoolGeometry(const Node &node,
                                       ArrayRef<int64_t> inputDims) {
  return poolGeometry(node, inputDims);
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
