//===- passes/ConstantEval.cpp - Evaluating nodes on constant data --------===//
//
// Each supported op computes its result type from the semantics first, checks
// it against the node's declared type (so nothing larger than declared is ever
// allocated), and only then fills the data. Data movement (Gather, Slice,
// Transpose, Expand, ...) copies raw elements through an index map; arithmetic
// loads elements into a compute type (float, double, int64_t or bool), works
// there and stores back, rounding or wrapping to the dtype.
//
//===----------------------------------------------------------------------===//

#include "passes/ConstantEval.h"

#include "ir/ShapeInference.h"
#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

using namespace remat;
using namespace remat::ir;
using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::SmallVector;
using llvm::StringRef;
using llvm::Twine;

namespace {

//===----------------------------------------------------------------------===//
// Element access
//===----------------------------------------------------------------------===//

template <typename T> T readLE(const uint8_t *p) {
  return llvm::support::endian::read<T, llvm::support::little,
                                     llvm::support::unaligned>(p);
}

template <typename T> void writeLE(uint8_t *p, T value) {
  llvm::support::endian::write<T, llvm::support::little,
                               llvm::support::unaligned>(p, value);
}

/// Calls \p fn with a value of the type arithmetic on \p dtype is carried out
/// in: float for f32, f16 and bf16 (rounded to the dtype when stored), double
/// for f64, int64_t for the integer types (wrapped to the dtype when stored)
/// and bool for bool.
template <typename Fn> decltype(auto) withComputeType(DType dtype, Fn &&fn) {
  switch (dtype) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    return fn(float());
  case DType::F64:
    return fn(double());
  case DType::I64:
  case DType::I32:
  case DType::I8:
  case DType::U8:
    return fn(int64_t());
  case DType::Bool:
    return fn(bool());
  }
  llvm_unreachable("unknown dtype");
}

/// \returns the element of \p dtype at \p p in compute type \p C, which must
/// be the compute type of \p dtype.
template <typename C> C loadElement(DType dtype, const uint8_t *p) {
  if constexpr (std::is_same_v<C, float>) {
    switch (dtype) {
    case DType::F32:
      return std::bit_cast<float>(readLE<uint32_t>(p));
    case DType::F16:
      return halfToFloat(readLE<uint16_t>(p));
    case DType::BF16:
      return bfloat16ToFloat(readLE<uint16_t>(p));
    default:
      break;
    }
  } else if constexpr (std::is_same_v<C, double>) {
    if (dtype == DType::F64)
      return std::bit_cast<double>(readLE<uint64_t>(p));
  } else if constexpr (std::is_same_v<C, int64_t>) {
    switch (dtype) {
    case DType::I64:
      return static_cast<int64_t>(readLE<uint64_t>(p));
    case DType::I32:
      return static_cast<int32_t>(readLE<uint32_t>(p));
    case DType::I8:
      return static_cast<int8_t>(*p);
    case DType::U8:
      return *p;
    default:
      break;
    }
  } else if constexpr (std::is_same_v<C, bool>) {
    if (dtype == DType::Bool)
      return *p != 0;
  }
  llvm_unreachable("dtype is not computed in this type");
}

/// Stores \p value, of the compute type of \p dtype, at \p p: floats round to
/// f16/bf16, integers wrap to the width of \p dtype (two's complement).
template <typename C> void storeElement(DType dtype, uint8_t *p, C value) {
  if constexpr (std::is_same_v<C, float>) {
    switch (dtype) {
    case DType::F32:
      return writeLE<uint32_t>(p, std::bit_cast<uint32_t>(value));
    case DType::F16:
      return writeLE<uint16_t>(p, floatToHalf(value));
    case DType::BF16:
      return writeLE<uint16_t>(p, floatToBFloat16(value));
    default:
      break;
    }
  } else if constexpr (std::is_same_v<C, double>) {
    if (dtype == DType::F64)
      return writeLE<uint64_t>(p, std::bit_cast<uint64_t>(value));
  } else if constexpr (std::is_same_v<C, int64_t>) {
    // Conversions to unsigned types are modular, which is the wrap we want.
    switch (dtype) {
    case DType::I64:
      return writeLE<uint64_t>(p, static_cast<uint64_t>(value));
    case DType::I32:
      return writeLE<uint32_t>(p, static_cast<uint32_t>(value));
    case DType::I8:
    case DType::U8:
      *p = static_cast<uint8_t>(value);
      return;
    default:
      break;
    }
  } else if constexpr (std::is_same_v<C, bool>) {
    if (dtype == DType::Bool) {
      *p = value ? 1 : 0;
      return;
    }
  }
  llvm_unreachable("dtype is not computed in this type");
}

/// \returns every element of \p data in compute type \p C.
template <typename C> std::vector<C> loadAll(const TensorData &data) {
  DType dtype = data.getType().getDType();
  unsigned size = dtypeSize(dtype);
  const uint8_t *bytes = data.getBytes().data();
  std::vector<C> values(data.getNumElements());
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = loadElement<C>(dtype, bytes + i * size);
  return values;
}

/// \returns data of \p type holding \p values (in its compute type).
template <typename C>
TensorDataPtr storeAll(const TensorType &type, const std::vector<C> &values) {
  auto data = std::make_shared<TensorData>(type);
  DType dtype = type.getDType();
  unsigned size = dtypeSize(dtype);
  uint8_t *bytes = data->getMutableBytes();
  assert(static_cast<int64_t>(values.size()) == data->getNumElements());
  for (size_t i = 0; i < values.size(); ++i)
    storeElement<C>(dtype, bytes + i * size, values[i]);
  return data;
}

/// \returns a copy of \p data's bytes viewed as \p type (same element count).
TensorDataPtr reinterpretAs(const TensorData &data, const TensorType &type) {
  ArrayRef<uint8_t> bytes = data.getBytes();
  return std::make_shared<TensorData>(
      type, std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

//===----------------------------------------------------------------------===//
// Integer arithmetic with two's complement wrap (no signed overflow UB)
//===----------------------------------------------------------------------===//

int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}
int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) *
                              static_cast<uint64_t>(b));
}
int64_t wrapNeg(int64_t a) { return wrapSub(0, a); }
/// Truncating division; \p b must not be 0. INT64_MIN / -1 wraps.
int64_t wrapDiv(int64_t a, int64_t b) {
  assert(b != 0 && "division by zero must be rejected before");
  return b == -1 ? wrapNeg(a) : a / b;
}

/// \returns true if the (already truncated) \p value is representable in
/// integer dtype \p dtype.
bool fitsInteger(double value, DType dtype) {
  switch (dtype) {
  case DType::I64:
    return value >= -0x1p63 && value < 0x1p63;
  case DType::I32:
    return value >= -2147483648.0 && value <= 2147483647.0;
  case DType::I8:
    return value >= -128.0 && value <= 127.0;
  case DType::U8:
    return value >= 0.0 && value <= 255.0;
  default:
    llvm_unreachable("not an integer dtype");
  }
}

template <typename C> bool isNaN(C value) {
  if constexpr (std::is_floating_point_v<C>)
    return std::isnan(value);
  else
    return false;
}

//===----------------------------------------------------------------------===//
// Index maps: which source element each result element comes from
//===----------------------------------------------------------------------===//

SmallVector<int64_t, 4> rowMajorStrides(ArrayRef<int64_t> dims) {
  SmallVector<int64_t, 4> strides(dims.size(), 1);
  for (size_t k = dims.size(); k > 1; --k)
    strides[k - 2] = strides[k - 1] * dims[k - 1];
  return strides;
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t dim : dims)
    result *= dim;
  return result;
}

/// \returns, for each element of a row-major tensor of shape \p dims, the
/// source index `base + sum(index[k] * strides[k])`. Amortized O(1) per
/// element (an odometer over the dims).
std::vector<int64_t> stridedIndexMap(ArrayRef<int64_t> dims,
                                     ArrayRef<int64_t> strides,
                                     int64_t base = 0) {
  assert(dims.size() == strides.size());
  std::vector<int64_t> map(product(dims));
  SmallVector<int64_t, 4> index(dims.size(), 0);
  int64_t offset = base;
  for (size_t i = 0; i < map.size(); ++i) {
    map[i] = offset;
    for (size_t k = dims.size(); k > 0; --k) {
      ++index[k - 1];
      offset += strides[k - 1];
      if (index[k - 1] < dims[k - 1])
        break;
      offset -= strides[k - 1] * dims[k - 1];
      index[k - 1] = 0;
    }
  }
  return map;
}

/// \returns the index map that broadcasts a tensor of shape \p inDims to
/// \p outDims (numpy rules; the caller has checked compatibility).
std::vector<int64_t> broadcastIndexMap(ArrayRef<int64_t> outDims,
                                       ArrayRef<int64_t> inDims) {
  assert(inDims.size() <= outDims.size());
  SmallVector<int64_t, 4> inStrides = rowMajorStrides(inDims);
  SmallVector<int64_t, 4> strides(outDims.size(), 0);
  size_t lead = outDims.size() - inDims.size();
  for (size_t k = 0; k < inDims.size(); ++k) {
    assert((inDims[k] == outDims[lead + k] || inDims[k] == 1) &&
           "shapes do not broadcast");
    strides[lead + k] = inDims[k] == 1 ? 0 : inStrides[k];
  }
  return stridedIndexMap(outDims, strides);
}

/// memcpy that accepts empty ranges (whose pointers may be null).
void copyBytes(uint8_t *to, const uint8_t *from, int64_t count) {
  if (count > 0)
    std::memcpy(to, from, count);
}

/// \returns data of \p type whose element i is element map[i] of \p src.
TensorDataPtr copyElements(const TensorData &src, const TensorType &type,
                           const std::vector<int64_t> &map) {
  auto data = std::make_shared<TensorData>(type);
  assert(static_cast<int64_t>(map.size()) == data->getNumElements());
  unsigned size = dtypeSize(type.getDType());
  const uint8_t *from = src.getBytes().data();
  uint8_t *to = data->getMutableBytes();
  for (size_t i = 0; i < map.size(); ++i)
    std::memcpy(to + i * size, from + map[i] * size, size);
  return data;
}

/// \returns \p value printed with %g, for messages.
std::string numStr(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

std::string dimsStr(ArrayRef<int64_t> dims) {
  std::string result = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    result += (i ? ", " : "") + std::to_string(dims[i]);
  return result + "]";
}

//===----------------------------------------------------------------------===//
// The evaluator
//===----------------------------------------------------------------------===//

class Evaluator {
public:
  Evaluator(const Node &node, ArrayRef<const TensorData *> operands)
      : node_(node), operands_(operands) {}

  /// Computes the single result of node_.
  Expected<TensorDataPtr> evaluate();

private:
  Error fail(const Twine &message) const {
    return makeError(node_.describe() + ": " + message);
  }
  const TensorData &operand(unsigned i) const {
    assert(operands_[i] && "null operand data");
    return *operands_[i];
  }
  const TensorType &operandType(unsigned i) const {
    return operand(i).getType();
  }
  const AttrList &attrs() const { return node_.getAttrs(); }

  /// Checks \p type against the declared result type before anything of that
  /// size is allocated.
  Error checkResult(const TensorType &type) const;
  /// \returns operand \p i, a vector (or scalar) of i64 (or i32 when
  /// \p allowI32), as int64 values.
  Expected<std::vector<int64_t>> intOperand(unsigned i, StringRef what,
                                            bool allowI32 = false) const;
  /// \returns \p axis in [0, rank), accepting [-rank, rank).
  Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                  StringRef what) const;
  /// Normalizes \p axes against \p rank and marks them; duplicates are errors.
  Expected<SmallVector<bool, 4>> axisMask(ArrayRef<int64_t> axes, int64_t rank,
                                          StringRef what) const;
  Expected<SmallVector<int64_t, 4>> broadcast(ArrayRef<int64_t> a,
                                              ArrayRef<int64_t> b) const;
  /// Errors unless every operand has the dtype of operand \p first.
  Error checkSameDType(unsigned first, unsigned last) const;

  Expected<TensorDataPtr> evalShape();
  Expected<TensorDataPtr> evalGather();
  Expected<TensorDataPtr> evalUnsqueeze();
  Expected<TensorDataPtr> evalSqueeze();
  Expected<TensorDataPtr> evalConcat();
  Expected<TensorDataPtr> evalSlice();
  Expected<TensorDataPtr> evalReshape();
  Expected<TensorDataPtr> evalExpand();
  Expected<TensorDataPtr> evalCast();
  Expected<TensorDataPtr> evalIdentity();
  Expected<TensorDataPtr> evalRange();
  Expected<TensorDataPtr> evalConstantOfShape();
  /// Equal and GreaterOrEqual: \p compare on broadcast operands of one
  /// dtype, computed in its compute type, giving bool.
  template <typename Compare>
  Expected<TensorDataPtr> evalComparison(Compare compare);
  Expected<TensorDataPtr> evalEqual();
  Expected<TensorDataPtr> evalWhere();
  Expected<TensorDataPtr> evalArithmetic();
  Expected<TensorDataPtr> evalPow();
  Expected<TensorDataPtr> evalUnary();
  Expected<TensorDataPtr> evalGelu();
  Expected<TensorDataPtr> evalGreaterOrEqual();
  Expected<TensorDataPtr> evalAnd();
  Expected<TensorDataPtr> evalMax();
  Expected<TensorDataPtr> evalMod();
  Expected<TensorDataPtr> evalTranspose();
  Expected<TensorDataPtr> evalReduce();

  const Node &node_;
  ArrayRef<const TensorData *> operands_;
};

Error Evaluator::checkResult(const TensorType &type) const {
  const TensorType &declared = node_.getResult(0)->getType();
  if (type != declared)
    return fail("evaluates to " + type.str() + " but declares " +
                declared.str());
  return Error::success();
}

Expected<std::vector<int64_t>> Evaluator::intOperand(unsigned i, StringRef what,
                                                     bool allowI32) const {
  const TensorType &type = operandType(i);
  bool dtypeOk = type.getDType() == DType::I64 ||
                 (allowI32 && type.getDType() == DType::I32);
  if (!dtypeOk || type.getRank() > 1)
    return fail(Twine(what) + " must be an " +
                (allowI32 ? "i64 or i32" : "i64") + " vector, got " +
                type.str());
  return loadAll<int64_t>(operand(i));
}

Expected<int64_t> Evaluator::normalizeAxis(int64_t axis, int64_t rank,
                                           StringRef what) const {
  if (axis < -rank || axis >= rank)
    return fail(Twine(what) + " " + Twine(axis) + " is out of range for rank " +
                Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

Expected<SmallVector<bool, 4>> Evaluator::axisMask(ArrayRef<int64_t> axes,
                                                   int64_t rank,
                                                   StringRef what) const {
  SmallVector<bool, 4> mask(rank, false);
  for (int64_t axis : axes) {
    auto normalized = normalizeAxis(axis, rank, what);
    if (!normalized)
      return normalized.takeError();
    if (mask[*normalized])
      return fail(Twine(what) + " " + Twine(axis) + " appears twice");
    mask[*normalized] = true;
  }
  return mask;
}

Expected<SmallVector<int64_t, 4>>
Evaluator::broadcast(ArrayRef<int64_t> a, ArrayRef<int64_t> b) const {
  auto dims = broadcastShapes(a, b);
  if (!dims)
    return fail("cannot broadcast " + dimsStr(a) + " and " + dimsStr(b));
  return *dims;
}

Error Evaluator::checkSameDType(unsigned first, unsigned last) const {
  DType dtype = operandType(first).getDType();
  for (unsigned i = first + 1; i <= last; ++i)
    if (operandType(i).getDType() != dtype)
      return fail("operands have different dtypes " + dtypeName(dtype) +
                  " and " + dtypeName(operandType(i).getDType()));
  return Error::success();
}

//===--- Shape-producing ops ---------------------------------------------===//

Expected<TensorDataPtr> Evaluator::evalShape() {
  // Only the operand's type matters; its data may be absent.
  int64_t rank = node_.getOperand(0)->getType().getRank();
  ArrayRef<int64_t> dims = node_.getOperand(0)->getType().getDims();
  int64_t start = attrs().getInt("start").value_or(0);
  int64_t end = attrs().getInt("end").value_or(rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  int64_t count = std::max<int64_t>(end - start, 0);
  TensorType type(DType::I64, {count});
  if (auto err = checkResult(type))
    return std::move(err);
  std::vector<int64_t> values(dims.begin() + start,
                              dims.begin() + start + count);
  return storeAll(type, values);
}

Expected<TensorDataPtr> Evaluator::evalConstantOfShape() {
  auto shape = intOperand(0, "shape");
  if (!shape)
    return shape.takeError();
  for (int64_t dim : *shape)
    if (dim < 0)
      return fail("shape " + dimsStr(*shape) + " has a negative dim");

  TensorDataPtr value;
  if (const AttrValue *attr = attrs().find("value")) {
    value = attrs().getTensor("value");
    if (!value)
      return fail("attribute 'value' must be a tensor, got " +
                  attrKindName(*attr));
    if (value->getNumElements() != 1)
      return fail("attribute 'value' must have one element, got " +
                  value->getType().str());
  } else {
    value = std::make_shared<TensorData>(TensorType(DType::F32, {1}));
  }

  TensorType type(value->getType().getDType(), *shape);
  if (auto err = checkResult(type))
    return std::move(err);
  auto data = std::make_shared<TensorData>(type);
  unsigned size = dtypeSize(type.getDType());
  uint8_t *bytes = data->getMutableBytes();
  for (int64_t i = 0, e = data->getNumElements(); i < e; ++i)
    std::memcpy(bytes + i * size, value->getBytes().data(), size);
  return data;
}

Expected<TensorDataPtr> Evaluator::evalRange() {
  for (unsigned i = 0; i < 3; ++i)
    if (operandType(i).getRank() != 0)
      return fail("operand " + Twine(i) + " must be a scalar, got " +
                  operandType(i).str());
  if (auto err = checkSameDType(0, 2))
    return std::move(err);
  DType dtype = operandType(0).getDType();
  if (dtype != DType::F32 && dtype != DType::F64 && dtype != DType::I32 &&
      dtype != DType::I64)
    return fail("Range is not defined on " + dtypeName(dtype));

  return withComputeType(dtype, [&](auto tag) -> Expected<TensorDataPtr> {
    using C = decltype(tag);
    if constexpr (std::is_same_v<C, bool>) {
      llvm_unreachable("bool rejected above");
    } else {
      C start = loadAll<C>(operand(0))[0];
      C limit = loadAll<C>(operand(1))[0];
      C delta = loadAll<C>(operand(2))[0];
      if (delta == C(0))
        return fail("delta is zero");
      int64_t count = 0;
      if constexpr (std::is_integral_v<C>) {
        // ceil(diff / delta) when diff and delta have the same sign; in 128
        // bits, where limit - start cannot overflow.
        __int128 diff = static_cast<__int128>(limit) - start;
        __int128 steps = 0;
        if (delta > 0 && diff > 0)
          steps = 1 + (diff - 1) / delta;
        else if (delta < 0 && diff < 0)
          steps = 1 + (diff + 1) / delta;
        if (steps > std::numeric_limits<int64_t>::max())
          return fail("range has too many elements");
        count = static_cast<int64_t>(steps);
      } else {
        double steps = std::ceil(static_cast<double>(C(limit - start)) /
                                 static_cast<double>(delta));
        if (std::isnan(steps) || steps >= 0x1p62)
          return fail("cannot compute the number of elements");
        count = steps > 0 ? static_cast<int64_t>(steps) : 0;
      }
      TensorType type(dtype, {count});
      if (auto err = checkResult(type))
        return std::move(err);
      std::vector<C> values(count);
      for (int64_t i = 0; i < count; ++i) {
        // ONNX defines output[i] = start + i * delta (not a running sum).
        if constexpr (std::is_integral_v<C>)
          values[i] = wrapAdd(start, wrapMul(i, delta));
        else
          values[i] = start + static_cast<C>(i) * delta;
      }
      return storeAll(type, values);
    }
  });
}

//===--- Data movement ---------------------------------------------------===//

Expected<TensorDataPtr> Evaluator::evalIdentity() {
  if (auto err = checkResult(operandType(0)))
    return std::move(err);
  return reinterpretAs(operand(0), operandType(0));
}

Expected<TensorDataPtr> Evaluator::evalReshape() {
  const TensorType &inType = operandType(0);
  auto shape = intOperand(1, "shape");
  if (!shape)
    return shape.takeError();
  bool allowZero = attrs().getInt("allowzero").value_or(0) != 0;

  SmallVector<int64_t, 4> dims;
  int inferAt = -1;
  bool hasZero = false;
  int64_t known = 1;
  for (size_t i = 0; i < shape->size(); ++i) {
    int64_t dim = (*shape)[i];
    if (dim == -1) {
      if (inferAt >= 0)
        return fail("shape " + dimsStr(*shape) + " has more than one -1");
      inferAt = i;
      dims.push_back(1);
      continue;
    }
    if (dim < -1)
      return fail("shape " + dimsStr(*shape) + " has a negative dim");
    if (dim == 0 && !allowZero) {
      if (i >= inType.getRank())
        return fail("shape " + dimsStr(*shape) + " copies dim " + Twine(i) +
                    " of " + inType.str() + ", which has no such dim");
      dim = inType.getDim(i);
    }
    hasZero |= dim == 0;
    auto next = checkedMul(known, dim);
    if (!next)
      return fail("shape " + dimsStr(*shape) + " overflows");
    known = *next;
    dims.push_back(dim);
  }

  int64_t count = inType.getNumElements();
  if (inferAt >= 0) {
    if (allowZero && hasZero)
      return fail("shape " + dimsStr(*shape) +
                  " has both -1 and 0 with allowzero set");
    if (known == 0 || count % known != 0)
      return fail("cannot reshape " + inType.str() + " to " + dimsStr(*shape));
    dims[inferAt] = count / known;
  } else if (known != count) {
    return fail("cannot reshape " + inType.str() + " to " + dimsStr(*shape));
  }

  TensorType type = inType.withDims(dims);
  if (auto err = checkResult(type))
    return std::move(err);
  return reinterpretAs(operand(0), type);
}

Expected<TensorDataPtr> Evaluator::evalUnsqueeze() {
  const TensorType &inType = operandType(0);
  auto axes = intOperand(1, "axes");
  if (!axes)
    return axes.takeError();
  int64_t outRank = inType.getRank() + axes->size();
  auto mask = axisMask(*axes, outRank, "axis");
  if (!mask)
    return mask.takeError();
  SmallVector<int64_t, 4> dims;
  unsigned next = 0;
  for (int64_t k = 0; k < outRank; ++k)
    dims.push_back((*mask)[k] ? 1 : inType.getDim(next++));
  TensorType type = inType.withDims(dims);
  if (auto err = checkResult(type))
    return std::move(err);
  return reinterpretAs(operand(0), type);
}

Expected<TensorDataPtr> Evaluator::evalSqueeze() {
  const TensorType &inType = operandType(0);
  int64_t rank = inType.getRank();
  std::vector<int64_t> axes;
  if (node_.getNumOperands() > 1) {
    auto given = intOperand(1, "axes");
    if (!given)
      return given.takeError();
    axes = std::move(*given);
  }
  SmallVector<bool, 4> mask(rank, false);
  if (axes.empty()) {
    // No axes: remove every size-1 dim.
    for (int64_t k = 0; k < rank; ++k)
      mask[k] = inType.getDim(k) == 1;
  } else {
    auto given = axisMask(axes, rank, "axis");
    if (!given)
      return given.takeError();
    mask = std::move(*given);
    for (int64_t k = 0; k < rank; ++k)
      if (mask[k] && inType.getDim(k) != 1)
        return fail("cannot squeeze axis " + Twine(k) + " of " + inType.str() +
                    ", which is not 1");
  }
  SmallVector<int64_t, 4> dims;
  for (int64_t k = 0; k < rank; ++k)
    if (!mask[k])
      dims.push_back(inType.getDim(k));
  TensorType type = inType.withDims(dims);
  if (auto err = checkResult(type))
    return std::move(err);
  return reinterpretAs(operand(0), type);
}

Expected<TensorDataPtr> Evaluator::evalExpand() {
  const TensorType &inType = operandType(0);
  auto shape = intOperand(1, "shape");
  if (!shape)
    return shape.takeError();
  for (int64_t dim : *shape)
    if (dim < 0)
      return fail("shape " + dimsStr(*shape) + " has a negative dim");
  auto dims = broadcast(inType.getDims(), *shape);
  if (!dims)
    return dims.takeError();
  TensorType type = inType.withDims(*dims);
  if (auto err = checkResult(type))
    return std::move(err);
  return copyElements(operand(0), type,
                      broadcastIndexMap(*dims, inType.getDims()));
}

Expected<TensorDataPtr> Evaluator::evalTranspose() {
  const TensorType &inType = operandType(0);
  int64_t rank = inType.getRank();
  std::vector<int64_t> perm;
  if (auto given = attrs().getInts("perm")) {
    perm = std::move(*given);
  } else {
    for (int64_t k = rank; k > 0; --k)
      perm.push_back(k - 1);
  }
  if (static_cast<int64_t>(perm.size()) != rank)
    return fail("perm " + dimsStr(perm) + " does not match rank " +
                Twine(rank));
  SmallVector<bool, 4> seen(rank, false);
  for (int64_t axis : perm) {
    if (axis < 0 || axis >= rank || seen[axis])
      return fail("perm " + dimsStr(perm) + " is not a permutation");
    seen[axis] = true;
  }
  SmallVector<int64_t, 4> inStrides = rowMajorStrides(inType.getDims());
  SmallVector<int64_t, 4> dims, strides;
  for (int64_t axis : perm) {
    dims.push_back(inType.getDim(axis));
    strides.push_back(inStrides[axis]);
  }
  TensorType type = inType.withDims(dims);
  if (auto err = checkResult(type))
    return std::move(err);
  return copyElements(operand(0), type, stridedIndexMap(dims, strides));
}

Expected<TensorDataPtr> Evaluator::evalGather() {
  const TensorType &dataType = operandType(0);
  const TensorType &indicesType = operandType(1);
  int64_t rank = dataType.getRank();
  if (rank == 0)
    return fail("cannot gather from a scalar");
  if (indicesType.getDType() != DType::I64 &&
      indicesType.getDType() != DType::I32)
    return fail("indices must be i64 or i32, got " + indicesType.str());
  auto axis = normalizeAxis(attrs().getInt("axis").value_or(0), rank, "axis");
  if (!axis)
    return axis.takeError();

  int64_t axisDim = dataType.getDim(*axis);
  std::vector<int64_t> indices = loadAll<int64_t>(operand(1));
  for (int64_t &index : indices) {
    if (index < -axisDim || index >= axisDim)
      return fail("index " + Twine(index) + " is out of range for axis " +
                  Twine(*axis) + " of " + dataType.str());
    if (index < 0)
      index += axisDim;
  }

  ArrayRef<int64_t> dataDims = dataType.getDims();
  SmallVector<int64_t, 4> dims(dataDims.begin(), dataDims.begin() + *axis);
  llvm::append_range(dims, indicesType.getDims());
  dims.append(dataDims.begin() + *axis + 1, dataDims.end());
  TensorType type = dataType.withDims(dims);
  if (auto err = checkResult(type))
    return std::move(err);

  int64_t outer = product(dataDims.take_front(*axis));
  int64_t innerBytes =
      product(dataDims.drop_front(*axis + 1)) * dtypeSize(dataType.getDType());
  auto data = std::make_shared<TensorData>(type);
  const uint8_t *from = operand(0).getBytes().data();
  uint8_t *to = data->getMutableBytes();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t index : indices) {
      copyBytes(to, from + (o * axisDim + index) * innerBytes, innerBytes);
      to += innerBytes;
    }
  return data;
}

Expected<TensorDataPtr> Evaluator::evalConcat() {
  const TensorType &firstType = operandType(0);
  int64_t rank = firstType.getRank();
  if (rank == 0)
    return fail("cannot concatenate scalars");
  auto axis = attrs().getInt("axis");
  if (!axis)
    return fail("attribute 'axis' is required");
  auto normalized = normalizeAxis(*axis, rank, "axis");
  if (!normalized)
    return normalized.takeError();
  if (auto err = checkSameDType(0, node_.getNumOperands() - 1))
    return std::move(err);

  SmallVector<int64_t, 4> dims(firstType.getDims().begin(),
                               firstType.getDims().end());
  dims[*normalized] = 0;
  for (unsigned i = 0; i < node_.getNumOperands(); ++i) {
    const TensorType &type = operandType(i);
    bool compatible = type.getRank() == rank;
    for (int64_t k = 0; compatible && k < rank; ++k)
      compatible = k == *normalized || type.getDim(k) == firstType.getDim(k);
    if (!compatible)
      return fail("cannot concatenate " + firstType.str() + " and " +
                  type.str() + " along axis " + Twine(*axis));
    dims[*normalized] += type.getDim(*normalized);
  }
  TensorType type = firstType.withDims(dims);
  if (auto err = checkResult(type))
    return std::move(err);

  int64_t outer = product(ArrayRef<int64_t>(dims).take_front(*normalized));
  int64_t innerElems =
      product(ArrayRef<int64_t>(dims).drop_front(*normalized + 1));
  unsigned size = dtypeSize(type.getDType());
  auto data = std::make_shared<TensorData>(type);
  uint8_t *to = data->getMutableBytes();
  for (int64_t o = 0; o < outer; ++o)
    for (unsigned i = 0; i < node_.getNumOperands(); ++i) {
      int64_t blockBytes =
          operandType(i).getDim(*normalized) * innerElems * size;
      copyBytes(to, operand(i).getBytes().data() + o * blockBytes, blockBytes);
      to += blockBytes;
    }
  return data;
}

Expected<TensorDataPtr> Evaluator::evalSlice() {
  const TensorType &inType = operandType(0);
  int64_t rank = inType.getRank();
  unsigned numOperands = node_.getNumOperands();
  auto starts = intOperand(1, "starts", /*allowI32=*/true);
  if (!starts)
    return starts.takeError();
  auto ends = intOperand(2, "ends", /*allowI32=*/true);
  if (!ends)
    return ends.takeError();
  size_t count = starts->size();
  if (ends->size() != count)
    return fail("starts " + dimsStr(*starts) + " and ends " + dimsStr(*ends) +
                " differ in length");

  std::vector<int64_t> axes, steps(count, 1);
  if (numOperands > 3) {
    auto given = intOperand(3, "axes", /*allowI32=*/true);
    if (!given)
      return given.takeError();
    axes = std::move(*given);
  } else {
    for (size_t i = 0; i < count; ++i)
      axes.push_back(i);
  }
  if (numOperands > 4) {
    auto given = intOperand(4, "steps", /*allowI32=*/true);
    if (!given)
      return given.takeError();
    steps = std::move(*given);
  }
  if (axes.size() != count || steps.size() != count)
    return fail("starts, ends, axes and steps differ in length");
  // Validates the axes (range, duplicates); the mask itself is not needed.
  if (auto mask = axisMask(axes, rank, "axis"); !mask)
    return mask.takeError();

  // Start from the whole tensor and narrow each sliced axis.
  SmallVector<int64_t, 4> inStrides = rowMajorStrides(inType.getDims());
  SmallVector<int64_t, 4> dims(inType.getDims().begin(),
                               inType.getDims().end());
  SmallVector<int64_t, 4> strides = inStrides;
  int64_t base = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    int64_t dim = inType.getDim(axis);
    int64_t step = steps[i];
    if (step == 0)
      return fail("step of axis " + Twine(axis) + " is zero");
    int64_t start = (*starts)[i], end = (*ends)[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    int64_t length = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start)
        length = 1 + (end - start - 1) / step;
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      if (start > end) {
        // |step| as unsigned: step may be INT64_MIN.
        uint64_t magnitude = 0 - static_cast<uint64_t>(step);
        length = 1 + static_cast<int64_t>(
                         static_cast<uint64_t>(start - end - 1) / magnitude);
      }
    }
    dims[axis] = length;
    if (length > 0)
      base += start * inStrides[axis];
    // With one element the step is never taken (and step * stride might
    // overflow for huge steps).
    strides[axis] = length > 1 ? step * inStrides[axis] : 0;
  }

  TensorType type = inType.withDims(dims);
  if (auto err = checkResult(type))
    return std::move(err);
  return copyElements(operand(0), type, stridedIndexMap(dims, strides, base));
}

//===--- Type conversion -------------------------------------------------===//

Expected<TensorDataPtr> Evaluator::evalCast() {
  auto to = attrs().getInt("to");
  if (!to)
    return fail("attribute 'to' is required");
  std::optional<DType> target = fromOnnxCode(*to);
  if (!target)
    return fail("cannot cast to ONNX type " + Twine(*to));
  const TensorType &inType = operandType(0);
  TensorType type = inType.withDType(*target);
  if (auto err = checkResult(type))
    return std::move(err);

  auto data = std::make_shared<TensorData>(type);
  unsigned size = dtypeSize(*target);
  uint8_t *bytes = data->getMutableBytes();
  return withComputeType(
      inType.getDType(), [&](auto fromTag) -> Expected<TensorDataPtr> {
        using From = decltype(fromTag);
        std::vector<From> values = loadAll<From>(operand(0));
        return withComputeType(
            *target, [&](auto toTag) -> Expected<TensorDataPtr> {
              using To = decltype(toTag);
              for (size_t i = 0; i < values.size(); ++i) {
                From value = values[i];
                To converted;
                if constexpr (std::is_same_v<To, bool>) {
                  converted = value != From(0); // NaN is nonzero, so true
                } else if constexpr (std::is_floating_point_v<From> &&
                                     std::is_integral_v<To>) {
                  // Truncation toward zero; values the dtype cannot hold (and
                  // NaN) are undefined in C and ONNX, so refuse them.
                  double truncated = std::trunc(static_cast<double>(value));
                  if (std::isnan(truncated) || !fitsInteger(truncated, *target))
                    return fail("cannot cast " +
                                numStr(static_cast<double>(value)) + " to " +
                                dtypeName(*target));
                  converted = static_cast<To>(truncated);
                } else {
                  // int -> int wraps when stored; int -> float and float ->
                  // float round to nearest; bool -> number is 0 or 1.
                  converted = static_cast<To>(value);
                }
                storeElement<To>(*target, bytes + i * size, converted);
              }
              return data;
            });
      });
}

//===--- Elementwise -----------------------------------------------------===//

/// \returns fn(a[i'], b[i'']) for every element of the broadcast of \p aDims
/// and \p bDims to \p dims.
template <typename R, typename A, typename B, typename Fn>
std::vector<R> mapBinary(const std::vector<A> &a, ArrayRef<int64_t> aDims,
                         const std::vector<B> &b, ArrayRef<int64_t> bDims,
                         ArrayRef<int64_t> dims, Fn fn) {
  std::vector<int64_t> aMap = broadcastIndexMap(dims, aDims);
  std::vector<int64_t> bMap = broadcastIndexMap(dims, bDims);
  std::vector<R> result(aMap.size());
  for (size_t i = 0; i < aMap.size(); ++i)
    result[i] = fn(a[aMap[i]], b[bMap[i]]);
  return result;
}

Expected<TensorDataPtr> Evaluator::evalArithmetic() {
  const TensorType &aType = operandType(0), &bType = operandType(1);
  if (auto err = checkSameDType(0, 1))
    return std::move(err);
  DType dtype = aType.getDType();
  OpKind op = node_.getOp();
  if (dtype == DType::Bool)
    return fail(node_.getOpSpelling() + " is not defined on bool");
  auto dims = broadcast(aType.getDims(), bType.getDims());
  if (!dims)
    return dims.takeError();
  TensorType type(dtype, *dims);
  if (auto err = checkResult(type))
    return std::move(err);

  return withComputeType(dtype, [&](auto tag) -> Expected<TensorDataPtr> {
    using C = decltype(tag);
    if constexpr (std::is_same_v<C, bool>) {
      llvm_unreachable("bool rejected above");
    } else {
      std::vector<C> a = loadAll<C>(operand(0)), b = loadAll<C>(operand(1));
      if constexpr (std::is_integral_v<C>) {
        // Every element of b is used when the result is not empty.
        if (op == OpKind::Div && type.getNumElements() > 0 &&
            llvm::is_contained(b, 0))
          return fail("integer division by zero");
      }
      auto run = [&](auto fn) {
        return storeAll(type, mapBinary<C>(a, aType.getDims(), b,
                                           bType.getDims(), *dims, fn));
      };
      switch (op) {
      case OpKind::Add:
        return run([](C x, C y) {
          if constexpr (std::is_integral_v<C>)
            return wrapAdd(x, y);
          else
            return x + y;
        });
      case OpKind::Sub:
        return run([](C x, C y) {
          if constexpr (std::is_integral_v<C>)
            return wrapSub(x, y);
          else
            return x - y;
        });
      case OpKind::Mul:
        return run([](C x, C y) {
          if constexpr (std::is_integral_v<C>)
            return wrapMul(x, y);
          else
            return x * y;
        });
      case OpKind::Div:
        return run([](C x, C y) {
          if constexpr (std::is_integral_v<C>)
            return wrapDiv(x, y);
          else
            return x / y;
        });
      default:
        llvm_unreachable("not an arithmetic op");
      }
    }
  });
}

/// \returns \p base to the power \p exponent >= 0, wrapping on overflow.
int64_t intPow(int64_t base, int64_t exponent) {
  assert(exponent >= 0);
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1)
      result = wrapMul(result, base);
    base = wrapMul(base, base);
    exponent >>= 1;
  }
  return result;
}

Expected<TensorDataPtr> Evaluator::evalPow() {
  const TensorType &aType = operandType(0), &bType = operandType(1);
  DType dtype = aType.getDType();
  if (dtype == DType::Bool || dtype == DType::I8 || dtype == DType::U8)
    return fail("Pow is not defined on base " + dtypeName(dtype));
  if (bType.getDType() == DType::Bool)
    return fail("Pow is not defined on exponent bool");
  auto dims = broadcast(aType.getDims(), bType.getDims());
  if (!dims)
    return dims.takeError();
  // The result has the base's dtype.
  TensorType type(dtype, *dims);
  if (auto err = checkResult(type))
    return std::move(err);

  // The exponent in the compute type of its own dtype, converted to E.
  auto loadExponent = [&](auto eTag) {
    using E = decltype(eTag);
    return withComputeType(bType.getDType(), [&](auto tag) {
      using S = decltype(tag);
      std::vector<S> values = loadAll<S>(operand(1));
      return std::vector<E>(values.begin(), values.end());
    });
  };

  if (isFloat(dtype)) {
    return withComputeType(dtype, [&](auto tag) -> Expected<TensorDataPtr> {
      using C = decltype(tag);
      if constexpr (!std::is_floating_point_v<C>) {
        llvm_unreachable("float dtype");
      } else {
        std::vector<C> a = loadAll<C>(operand(0));
        std::vector<C> b = loadExponent(C());
        return storeAll(
            type, mapBinary<C>(a, aType.getDims(), b, bType.getDims(), *dims,
                               [](C x, C y) { return std::pow(x, y); }));
      }
    });
  }

  // Integer base: exact with an integer exponent (a negative exponent gives
  // the truncated reciprocal), through double with a float exponent.
  std::vector<int64_t> a = loadAll<int64_t>(operand(0));
  std::vector<int64_t> aMap = broadcastIndexMap(*dims, aType.getDims());
  std::vector<int64_t> bMap = broadcastIndexMap(*dims, bType.getDims());
  std::vector<int64_t> result(aMap.size());
  if (isInteger(bType.getDType())) {
    std::vector<int64_t> b = loadExponent(int64_t());
    for (size_t i = 0; i < result.size(); ++i) {
      int64_t x = a[aMap[i]], y = b[bMap[i]];
      if (y >= 0)
        result[i] = intPow(x, y);
      else if (x == 0)
        return fail("0 raised to a negative power");
      else if (x == 1 || x == -1)
        result[i] = (y % 2 != 0) ? x : 1;
      else
        result[i] = 0;
    }
  } else {
    std::vector<double> b = loadExponent(double());
    for (size_t i = 0; i < result.size(); ++i) {
      double value =
          std::trunc(std::pow(static_cast<double>(a[aMap[i]]), b[bMap[i]]));
      if (std::isnan(value) || !fitsInteger(value, dtype))
        return fail("Pow result " + numStr(value) + " does not fit " +
                    dtypeName(dtype));
      result[i] = static_cast<int64_t>(value);
    }
  }
  return storeAll(type, result);
}

Expected<TensorDataPtr> Evaluator::evalUnary() {
  const TensorType &inType = operandType(0);
  DType dtype = inType.getDType();
  OpKind op = node_.getOp();
  bool signedInt =
      dtype == DType::I64 || dtype == DType::I32 || dtype == DType::I8;
  bool defined = isFloat(dtype) ||
                 ((op == OpKind::Relu || op == OpKind::Neg) && signedInt);
  if (!defined)
    return fail(node_.getOpSpelling() + " is not defined on " +
                dtypeName(dtype));
  if (auto err = checkResult(inType))
    return std::move(err);

  return withComputeType(dtype, [&](auto tag) -> Expected<TensorDataPtr> {
    using C = decltype(tag);
    if constexpr (std::is_same_v<C, bool>) {
      llvm_unreachable("bool rejected above");
    } else {
      std::vector<C> values = loadAll<C>(operand(0));
      auto apply = [&](auto fn) {
        for (C &value : values)
          value = fn(value);
        return storeAll(inType, values);
      };
      if (op == OpKind::Neg)
        return apply([](C x) -> C {
          if constexpr (std::is_integral_v<C>)
            return wrapNeg(x);
          else
            return -x;
        });
      // NaN compares false, so it passes through.
      if (op == OpKind::Relu)
        return apply([](C x) -> C { return x < C(0) ? C(0) : x; });
      if constexpr (std::is_floating_point_v<C>) {
        switch (op) {
        case OpKind::Sqrt:
          return apply([](C x) -> C { return std::sqrt(x); });
        case OpKind::Exp:
          return apply([](C x) -> C { return std::exp(x); });
        case OpKind::Log:
          return apply([](C x) -> C { return std::log(x); });
        case OpKind::Erf:
          return apply([](C x) -> C { return std::erf(x); });
        case OpKind::Tanh:
          return apply([](C x) -> C { return std::tanh(x); });
        case OpKind::Sigmoid:
          return apply([](C x) -> C { return C(1) / (C(1) + std::exp(-x)); });
        default:
          break;
        }
      }
      llvm_unreachable("not a unary op on this dtype");
    }
  });
}

/// remat.Gelu, as ONNX opset 20 defines it: x/2 * (1 + erf(x/sqrt(2))), or
/// with approximate = "tanh", x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715
/// x^3))), in the compute type of the dtype.
Expected<TensorDataPtr> Evaluator::evalGelu() {
  const TensorType &inType = operandType(0);
  DType dtype = inType.getDType();
  if (!isFloat(dtype))
    return fail("Gelu is not defined on " + dtypeName(dtype));
  auto approximate = attrs().getString("approximate");
  if (attrs().has("approximate") && !approximate)
    return fail("attribute 'approximate' must be a string");
  bool useTanh = approximate && *approximate == "tanh";
  if (approximate && !useTanh && *approximate != "none")
    return fail("attribute 'approximate' is \"" + *approximate +
                "\", expected \"none\" or \"tanh\"");
  if (auto err = checkResult(inType))
    return std::move(err);

  return withComputeType(dtype, [&](auto tag) -> Expected<TensorDataPtr> {
    using C = decltype(tag);
    if constexpr (std::is_floating_point_v<C>) {
      std::vector<C> values = loadAll<C>(operand(0));
      const C half(0.5), one(1);
      const C sqrtHalf = C(0.70710678118654752440);      // 1 / sqrt(2)
      const C sqrtTwoOverPi = C(0.79788456080286535588); // sqrt(2 / pi)
      const C cubic = C(0.044715);
      for (C &x : values) {
        if (useTanh)
          x = half * x *
              (one + std::tanh(sqrtTwoOverPi * (x + cubic * x * x * x)));
        else
          x = half * x * (one + std::erf(x * sqrtHalf));
      }
      return storeAll(inType, values);
    } else {
      llvm_unreachable("non-float dtypes rejected above");
    }
  });
}

template <typename Compare>
Expected<TensorDataPtr> Evaluator::evalComparison(Compare compare) {
  const TensorType &aType = operandType(0), &bType = operandType(1);
  if (auto err = checkSameDType(0, 1))
    return std::move(err);
  auto dims = broadcast(aType.getDims(), bType.getDims());
  if (!dims)
    return dims.takeError();
  TensorType type(DType::Bool, *dims);
  if (auto err = checkResult(type))
    return std::move(err);
  return withComputeType(aType.getDType(), [&](auto tag) -> TensorDataPtr {
    using C = decltype(tag);
    std::vector<C> a = loadAll<C>(operand(0)), b = loadAll<C>(operand(1));
    return storeAll(type, mapBinary<bool>(a, aType.getDims(), b,
                                          bType.getDims(), *dims, compare));
  });
}

Expected<TensorDataPtr> Evaluator::evalEqual() {
  return evalComparison([](auto x, auto y) { return x == y; });
}

Expected<TensorDataPtr> Evaluator::evalGreaterOrEqual() {
  // Mixed dtypes are reported by evalComparison, as before this check.
  if (operandType(0).getDType() == DType::Bool &&
      operandType(1).getDType() == DType::Bool)
    return fail("GreaterOrEqual is not defined on bool");
  // NaN compares false, as IEEE (and ONNX runtimes) have it.
  return evalComparison([](auto x, auto y) { return x >= y; });
}

Expected<TensorDataPtr> Evaluator::evalAnd() {
  const TensorType &aType = operandType(0), &bType = operandType(1);
  if (aType.getDType() != DType::Bool || bType.getDType() != DType::Bool)
    return fail("And needs bool operands, got " + aType.str() + " and " +
                bType.str());
  auto dims = broadcast(aType.getDims(), bType.getDims());
  if (!dims)
    return dims.takeError();
  TensorType type(DType::Bool, *dims);
  if (auto err = checkResult(type))
    return std::move(err);
  std::vector<bool> a = loadAll<bool>(operand(0)),
                    b = loadAll<bool>(operand(1));
  return storeAll(type,
                  mapBinary<bool>(a, aType.getDims(), b, bType.getDims(), *dims,
                                  [](bool x, bool y) { return x && y; }));
}

/// Max over any number of operands, folded left to right; a NaN operand
/// makes the result NaN (numpy's maximum, onnxruntime's Max).
Expected<TensorDataPtr> Evaluator::evalMax() {
  unsigned last = operands_.size() - 1;
  if (auto err = checkSameDType(0, last))
    return std::move(err);
  DType dtype = operandType(0).getDType();
  if (dtype == DType::Bool)
    return fail("Max is not defined on bool");
  SmallVector<int64_t, 4> dims(operandType(0).getDims().begin(),
                               operandType(0).getDims().end());
  for (unsigned i = 1; i <= last; ++i) {
    auto next = broadcast(dims, operandType(i).getDims());
    if (!next)
      return next.takeError();
    dims = *next;
  }
  TensorType type(dtype, dims);
  if (auto err = checkResult(type))
    return std::move(err);
  return withComputeType(dtype, [&](auto tag) -> TensorDataPtr {
    using C = decltype(tag);
    // Start from operand 0 broadcast to the result shape.
    std::vector<int64_t> map0 =
        broadcastIndexMap(dims, operandType(0).getDims());
    std::vector<C> first = loadAll<C>(operand(0));
    std::vector<C> result(map0.size());
    for (size_t i = 0; i < map0.size(); ++i)
      result[i] = first[map0[i]];
    for (unsigned k = 1; k <= last; ++k) {
      std::vector<C> next = loadAll<C>(operand(k));
      result = mapBinary<C>(result, dims, next, operandType(k).getDims(), dims,
                            [](C x, C y) -> C {
                              if (isNaN(x) || isNaN(y))
                                return isNaN(x) ? x : y;
                              return x < y ? y : x;
                            });
    }
    return storeAll(type, result);
  });
}

/// Mod with fmod = 0: the integer remainder with the sign of the divisor
/// (Python's %); with fmod = 1: C's fmod / truncated remainder, the sign of
/// the dividend. Integer division by zero is refused.
Expected<TensorDataPtr> Evaluator::evalMod() {
  const TensorType &aType = operandType(0), &bType = operandType(1);
  if (auto err = checkSameDType(0, 1))
    return std::move(err);
  DType dtype = aType.getDType();
  if (dtype == DType::Bool)
    return fail("Mod is not defined on bool");
  int64_t fmod = attrs().getInt("fmod").value_or(0);
  if (fmod != 0 && fmod != 1)
    return fail("attribute 'fmod' is " + Twine(fmod) + ", expected 0 or 1");
  if (isFloat(dtype) && fmod != 1)
    return fail("attribute 'fmod' must be 1 for float dtype " +
                dtypeName(dtype));
  auto dims = broadcast(aType.getDims(), bType.getDims());
  if (!dims)
    return dims.takeError();
  TensorType type(dtype, *dims);
  if (auto err = checkResult(type))
    return std::move(err);

  return withComputeType(dtype, [&](auto tag) -> Expected<TensorDataPtr> {
    using C = decltype(tag);
    if constexpr (std::is_same_v<C, bool>) {
      llvm_unreachable("bool rejected above");
    } else {
      std::vector<C> a = loadAll<C>(operand(0)), b = loadAll<C>(operand(1));
      if constexpr (std::is_integral_v<C>) {
        if (type.getNumElements() > 0 && llvm::is_contained(b, 0))
          return fail("integer division by zero");
      }
      return storeAll(type,
                      mapBinary<C>(a, aType.getDims(), b, bType.getDims(),
                                   *dims, [fmod](C x, C y) -> C {
                                     if constexpr (std::is_integral_v<C>) {
                                       // INT64_MIN % -1 overflows; the result
                                       // is 0.
                                       C r = y == -1 ? 0 : x % y;
                                       if (fmod == 0 && r != 0 &&
                                           ((r < 0) != (y < 0)))
                                         r += y;
                                       return r;
                                     } else {
                                       return std::fmod(x, y);
                                     }
                                   }));
    }
  });
}

Expected<TensorDataPtr> Evaluator::evalWhere() {
  const TensorType &condType = operandType(0);
  const TensorType &xType = operandType(1), &yType = operandType(2);
  if (condType.getDType() != DType::Bool)
    return fail("condition must be bool, got " + condType.str());
  if (auto err = checkSameDType(1, 2))
    return std::move(err);
  auto xyDims = broadcast(xType.getDims(), yType.getDims());
  if (!xyDims)
    return xyDims.takeError();
  auto dims = broadcast(condType.getDims(), *xyDims);
  if (!dims)
    return dims.takeError();
  TensorType type(xType.getDType(), *dims);
  if (auto err = checkResult(type))
    return std::move(err);

  std::vector<bool> cond = loadAll<bool>(operand(0));
  std::vector<int64_t> condMap = broadcastIndexMap(*dims, condType.getDims());
  std::vector<int64_t> xMap = broadcastIndexMap(*dims, xType.getDims());
  std::vector<int64_t> yMap = broadcastIndexMap(*dims, yType.getDims());
  auto data = std::make_shared<TensorData>(type);
  unsigned size = dtypeSize(type.getDType());
  const uint8_t *x = operand(1).getBytes().data();
  const uint8_t *y = operand(2).getBytes().data();
  uint8_t *to = data->getMutableBytes();
  for (size_t i = 0; i < condMap.size(); ++i) {
    const uint8_t *from =
        cond[condMap[i]] ? x + xMap[i] * size : y + yMap[i] * size;
    std::memcpy(to + i * size, from, size);
  }
  return data;
}

//===--- Reductions ------------------------------------------------------===//

Expected<TensorDataPtr> Evaluator::evalReduce() {
  const TensorType &inType = operandType(0);
  DType dtype = inType.getDType();
  int64_t rank = inType.getRank();
  OpKind op = node_.getOp();
  if (dtype == DType::Bool)
    return fail(node_.getOpSpelling() + " is not defined on bool");
  bool keepDims = attrs().getInt("keepdims").value_or(1) != 0;

  // Opset 17: ReduceSum takes axes as an optional operand (and may be a
  // no-op without them); ReduceMean and ReduceMax take an attribute.
  std::vector<int64_t> axes;
  if (op == OpKind::ReduceSum) {
    if (node_.getNumOperands() > 1) {
      auto given = intOperand(1, "axes");
      if (!given)
        return given.takeError();
      axes = std::move(*given);
    }
    if (axes.empty() && attrs().getInt("noop_with_empty_axes").value_or(0) != 0)
      return evalIdentity();
  } else if (auto given = attrs().getInts("axes")) {
    axes = std::move(*given);
  }

  SmallVector<bool, 4> reduced(rank, true);
  if (!axes.empty()) {
    auto mask = axisMask(axes, rank, "axis");
    if (!mask)
      return mask.takeError();
    reduced = std::move(*mask);
  }

  // The result in its keepdims layout (the same linear order either way).
  SmallVector<int64_t, 4> keptDims, dims;
  int64_t reduceCount = 1;
  for (int64_t k = 0; k < rank; ++k) {
    keptDims.push_back(reduced[k] ? 1 : inType.getDim(k));
    if (reduced[k])
      reduceCount *= inType.getDim(k);
    if (!reduced[k] || keepDims)
      dims.push_back(keptDims.back());
  }
  TensorType type(dtype, dims);
  if (auto err = checkResult(type))
    return std::move(err);
  int64_t count = type.getNumElements();
  if (reduceCount == 0 && count > 0 && op != OpKind::ReduceSum)
    return fail("reduces over an empty axis of " + inType.str());

  // Each input element's output index: output strides, 0 on reduced axes.
  SmallVector<int64_t, 4> strides = rowMajorStrides(keptDims);
  for (int64_t k = 0; k < rank; ++k)
    if (reduced[k])
      strides[k] = 0;
  std::vector<int64_t> map = stridedIndexMap(inType.getDims(), strides);

  return withComputeType(dtype, [&](auto tag) -> Expected<TensorDataPtr> {
    using C = decltype(tag);
    if constexpr (std::is_same_v<C, bool>) {
      llvm_unreachable("bool rejected above");
    } else {
      std::vector<C> values = loadAll<C>(operand(0));
      std::vector<C> result(count, C(0));
      if (op == OpKind::ReduceMax) {
        // The first NaN wins, as in numpy.
        std::vector<bool> seen(count, false);
        for (size_t i = 0; i < values.size(); ++i) {
          C &acc = result[map[i]];
          C value = values[i];
          if (!seen[map[i]]) {
            acc = value;
            seen[map[i]] = true;
          } else if (!isNaN(acc) && (isNaN(value) || value > acc)) {
            acc = value;
          }
        }
        return storeAll(type, result);
      }
      // Sum in input order, so the result is deterministic.
      for (size_t i = 0; i < values.size(); ++i) {
        C &acc = result[map[i]];
        if constexpr (std::is_integral_v<C>)
          acc = wrapAdd(acc, values[i]);
        else
          acc += values[i];
      }
      if (op == OpKind::ReduceMean)
        for (C &acc : result) {
          if constexpr (std::is_integral_v<C>)
            acc /= reduceCount;
          else
            acc /= static_cast<C>(reduceCount);
        }
      return storeAll(type, result);
    }
  });
}

//===--- Dispatch --------------------------------------------------------===//

Expected<TensorDataPtr> Evaluator::evaluate() {
  switch (node_.getOp()) {
  case OpKind::Shape:
    return evalShape();
  case OpKind::Gather:
    return evalGather();
  case OpKind::Unsqueeze:
    return evalUnsqueeze();
  case OpKind::Squeeze:
    return evalSqueeze();
  case OpKind::Concat:
    return evalConcat();
  case OpKind::Slice:
    return evalSlice();
  case OpKind::Reshape:
    return evalReshape();
  case OpKind::Expand:
    return evalExpand();
  case OpKind::Cast:
    return evalCast();
  case OpKind::Identity:
    return evalIdentity();
  case OpKind::Range:
    return evalRange();
  case OpKind::ConstantOfShape:
    return evalConstantOfShape();
  case OpKind::Equal:
    return evalEqual();
  case OpKind::Where:
    return evalWhere();
  case OpKind::GreaterOrEqual:
    return evalGreaterOrEqual();
  case OpKind::And:
    return evalAnd();
  case OpKind::Max:
    return evalMax();
  case OpKind::Mod:
    return evalMod();
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
    return evalArithmetic();
  case OpKind::Pow:
    return evalPow();
  case OpKind::Neg:
  case OpKind::Sqrt:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Erf:
  case OpKind::Tanh:
  case OpKind::Relu:
  case OpKind::Sigmoid:
    return evalUnary();
  case OpKind::Gelu:
    return evalGelu();
  case OpKind::Transpose:
    return evalTranspose();
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceMax:
    return evalReduce();
  default:
    llvm_unreachable("canEvaluate() and evaluate() disagree");
  }
}

} // namespace

bool remat::passes::canEvaluate(OpKind op) {
  switch (op) {
  case OpKind::Shape:
  case OpKind::Gather:
  case OpKind::Unsqueeze:
  case OpKind::Squeeze:
  case OpKind::Concat:
  case OpKind::Slice:
  case OpKind::Reshape:
  case OpKind::Expand:
  case OpKind::Cast:
  case OpKind::Identity:
  case OpKind::Range:
  case OpKind::ConstantOfShape:
  case OpKind::Equal:
  case OpKind::Where:
  case OpKind::GreaterOrEqual:
  case OpKind::And:
  case OpKind::Max:
  case OpKind::Mod:
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Neg:
  case OpKind::Sqrt:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Erf:
  case OpKind::Tanh:
  case OpKind::Relu:
  case OpKind::Sigmoid:
  case OpKind::Gelu:
  case OpKind::Transpose:
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceMax:
    return true;
  default:
    return false;
  }
}

Expected<SmallVector<TensorDataPtr, 1>>
remat::passes::evaluateNode(const Node &node,
                            ArrayRef<const TensorData *> operands) {
  assert(operands.size() == node.getNumOperands() &&
         "one operand data entry per operand");
  if (!canEvaluate(node.getOp()))
    return makeError("cannot evaluate " + node.describe());
  // Every supported op has exactly one result.
  if (node.getNumResults() != 1)
    return makeError(node.describe() + ": expected 1 result, got " +
                     Twine(node.getNumResults()));
  for (unsigned i = 0; i < operands.size(); ++i) {
    if (operands[i] || node.getOp() == OpKind::Shape)
      continue;
    return makeError("cannot evaluate " + node.describe() + ": operand " +
                     Twine(i) + " is not constant");
  }

  Evaluator evaluator(node, operands);
  auto result = evaluator.evaluate();
  if (!result)
    return result.takeError();
  SmallVector<TensorDataPtr, 1> results;
  results.push_back(std::move(*result));
  return results;
}
