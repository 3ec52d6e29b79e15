//===- ir/inference/InferenceImpl.h - Inference rule helpers ----*- C++ -*-===//
//
// The shape-inference rules live in files by op family, as runtime/cpu's
// kernels do:
//
//   Elementwise.cpp    arithmetic, unary, comparison and logical ops, Where,
//                      Max/Min, Mod, Pow, Cast, IsNaN, IsInf, Dropout, Clip,
//                      remat.Gelu, remat.GeluGrad, remat.DropoutGrad
//   Linalg.cpp         MatMul, Gemm, Conv, ConvTranspose,
//                      remat.PermutedMatMul, MaxPool, AveragePool and their
//                      remat gradients
//   Normalization.cpp  Softmax, LogSoftmax, LayerNormalization,
//                      SoftmaxCrossEntropyLoss and their remat gradients
//   Reductions.cpp     ReduceSum, ReduceMean, ReduceMax, ReduceL2,
//                      ReduceLogSumExp, ArgMax, ArgMin
//   DataMovement.cpp   shape ops, Concat, Slice, Split, Expand, Gather,
//                      ScatterElements, Shape, Constant, ConstantOfShape,
//                      Range, OneHot, remat.Extern (types as declared)
//   Indexing.cpp       GatherElements, Trilu, CumSum, Pad, Tile, TopK,
//                      EyeLike
//
// Each rule is infer<Infer> for an Infer of ir/Ops.def (Note [The op
// table]); ops that type alike share one (Arithmetic, UnaryFloat,
// Compare, ...). ir/ShapeInference.cpp dispatches to them and defines the
// helpers declared here. Every rule may assume that checkArity() passed and
// that every operand type passed TensorType::checkSize().
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_INFERENCE_INFERENCEIMPL_H
#define REMAT_IR_INFERENCE_INFERENCEIMPL_H

#include "ir/ShapeInference.h"
#include "ir/Support.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace remat::ir::inference {

using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::SmallVector;
using llvm::StringRef;
using llvm::Twine;

/// What a rule infers: one entry per result.
using Results = SmallVector<InferredType, 1>;
using Dims = SmallVector<int64_t, 4>;

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

/// \returns an error "<node>: <message>".
Error nodeError(const Node &node, const Twine &message);

/// \returns "[2,3]", the dims part of TensorType::str().
std::string formatDims(ArrayRef<int64_t> dims);

/// \returns "operand 1 (%b)".
std::string operandName(const Node &node, unsigned i);

/// \returns "1 operand" / "2 operands" / "1 to 3 results" /
/// "at least 1 result".
std::string countPhrase(int min, int max, StringRef noun);

/// \returns \p value printed as by "%g" ("0.1", "1e+20", "nan").
std::string formatNumber(double value);

//===----------------------------------------------------------------------===//
// Dtype classes (ONNX type constraints, restricted to remat's dtypes)
//===----------------------------------------------------------------------===//

/// Dtype classes for checkDType: every dtype, the non-bool ones, the float
/// ones.
bool isAnyType(DType);
bool isNumeric(DType dtype);
bool isFloatType(DType dtype);

/// Relu and Neg: ONNX allows the signed types only.
bool isSignedNumeric(DType dtype);

/// MatMul and Gemm: float16/bfloat16/float/double and int32/int64 (ONNX's
/// uint32/uint64 do not exist in remat; int8/uint8 need MatMulInteger).
bool isMatMulType(DType dtype);

/// Pow's base: int32, int64 and the float types.
bool isPowBaseType(DType dtype);

/// Dtype classes for checkDType: i32 or i64 (indices), i64, bool.
bool isIndexType(DType dtype);
bool isI64(DType dtype);
bool isBool(DType dtype);

/// Range: float, double, int32, int64 (ONNX's int16 does not exist in remat).
bool isRangeType(DType dtype);

/// \returns the type of operand \p i of \p node.
const TensorType &operandType(const Node &node, unsigned i);

/// Checks that operand \p i of \p node has a dtype accepted by \p accepts;
/// \p expected describes the accepted dtypes ("a float dtype").
Error checkDType(const Node &node, unsigned i, bool (*accepts)(DType),
                 StringRef expected);

/// Checks that operand \p i has the dtype of operand \p j.
Error checkSameDType(const Node &node, unsigned i, unsigned j);

/// Checks that operand \p i has rank \p rank.
Error checkRank(const Node &node, unsigned i, unsigned rank);

/// Checks that operand \p i has rank at least \p rank.
Error checkMinRank(const Node &node, unsigned i, unsigned rank);

/// Checks that operand \p i is a 1-D tensor of i64, as ONNX requires of
/// shape and axes operands.
Error checkI64Vector(const Node &node, unsigned i);

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

/// \returns int attribute \p name, std::nullopt if absent.
Expected<std::optional<int64_t>> optionalIntAttr(const Node &node,
                                                 StringRef name);

/// \returns int, float or string attribute \p name, \p defaultValue if
/// absent.
Expected<int64_t> intAttr(const Node &node, StringRef name,
                          int64_t defaultValue);
Expected<float> floatAttr(const Node &node, StringRef name,
                          float defaultValue);
Expected<std::string> stringAttr(const Node &node, StringRef name,
                                 StringRef defaultValue);

/// \returns int attribute \p name as a flag: 0 or 1 (\p defaultValue if
/// absent), any other value an error "attribute 'NAME' is V, expected 0 or
/// 1".
Expected<bool> flagAttr(const Node &node, StringRef name, bool defaultValue);

/// \returns ints attribute \p name, std::nullopt if absent.
Expected<std::optional<std::vector<int64_t>>> intsAttr(const Node &node,
                                                       StringRef name);

/// Like intsAttr for float lists; an empty list parses as ints, so an empty
/// int list is accepted as an empty float list.
Expected<std::optional<std::vector<float>>> floatsAttr(const Node &node,
                                                       StringRef name);

//===----------------------------------------------------------------------===//
// Axes
//===----------------------------------------------------------------------===//

/// Maps \p axis in [-rank, rank-1] to [0, rank-1]; \p what names it in the
/// message ("attribute 'axis'").
Expected<unsigned> normalizeAxis(const Node &node, const Twine &what,
                                 int64_t axis, int64_t rank);

/// The node's attribute 'axis' (\p defaultAxis when absent), normalized
/// against \p rank.
Expected<unsigned> normalizedAxisAttr(const Node &node, int64_t defaultAxis,
                                      int64_t rank);

/// Gather's and GatherElements' axis: operand 1 (indices) must be i32 or
/// i64, attribute 'axis' (default 0) is normalized against operand 0 (data).
Expected<unsigned> gatherAxis(const Node &node);

/// Checks that operand 1 (indices) has the rank of operand 0 (data), as
/// GatherElements and ScatterElements need.
Error checkIndicesRank(const Node &node);

/// Checks that, off \p axis, every dim of operand 1 (indices) is within
/// operand 0's (data): there indices address data positionally.
Error checkIndicesWithinData(const Node &node, unsigned axis);

/// Normalizes every entry of \p axes against \p rank and rejects duplicates.
Expected<SmallVector<unsigned, 4>> normalizeAxes(const Node &node,
                                                 const Twine &what,
                                                 ArrayRef<int64_t> axes,
                                                 int64_t rank);

//===----------------------------------------------------------------------===//
// Constant operands
//===----------------------------------------------------------------------===//

/// The attributes a Constant node may hold its value in; exactly one must be
/// present. The last three are ONNX forms remat does not support.
inline constexpr StringRef kConstantValueAttrs[] = {
    "value",      "value_float",  "value_int",    "value_floats",
    "value_ints", "sparse_value", "value_string", "value_strings"};

/// \returns the name of the single value attribute of Constant node \p node,
/// or "" when there is none or more than one.
StringRef singleConstantAttr(const Node &node);

/// \returns the type a well-formed Constant node \p node produces, or
/// std::nullopt if its value attribute is missing, duplicated or ill-kinded
/// (inferConstant reports those).
std::optional<TensorType> constantAttrType(const Node &node);

/// \returns the Constant node defining \p value when it is well formed and
/// its attribute type equals the type declared on \p value; null otherwise.
const Node *wellFormedConstant(const Value *value);

/// \returns the elements of constant \p value as int64 (floats truncate
/// toward zero), or std::nullopt if \p value is not a Constant's result.
std::optional<std::vector<int64_t>> constantInts(const Value *value);

/// \returns the elements of constant \p value as doubles, or std::nullopt.
std::optional<std::vector<double>> constantDoubles(const Value *value);

//===----------------------------------------------------------------------===//
// Results and shape helpers
//===----------------------------------------------------------------------===//

/// \returns \p dims as a Dims.
Dims toDims(ArrayRef<int64_t> dims);

/// A result of the known type \p type.
InferredType known(TensorType type);

/// A result whose dtype is known but whose dims depend on operand values
/// that are not constant.
InferredType unknownShape(DType dtype,
                          std::optional<int64_t> numElements = std::nullopt);

/// Broadcasts the operands \p indices of \p node numpy-style.
Expected<Dims> broadcastOperands(const Node &node, ArrayRef<unsigned> indices);

/// \returns true if \p from broadcasts to \p to without changing \p to
/// (ONNX unidirectional broadcasting).
bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to);

/// \returns the element count of \p dims, or std::nullopt on overflow or a
/// negative dim.
std::optional<int64_t> product(ArrayRef<int64_t> dims);

/// \returns \p dims with the axes marked in \p reduced removed, or set to 1
/// when \p keepDims.
Dims reduceDims(ArrayRef<int64_t> dims, ArrayRef<bool> reduced, bool keepDims);

/// \returns true if \p perm holds each of 0 .. rank - 1 once.
bool isPermutation(ArrayRef<int64_t> perm, int64_t rank);

/// \returns an error naming operand \p i of \p node unless its type is
/// \p wanted.
Error checkOperandType(const Node &node, unsigned i, const TensorType &wanted);

/// \returns the geometry of Conv or ConvTranspose node \p node, or an error
/// naming the node and the attribute or operand at fault.
Expected<ConvGeometry> convGeometry(const Node &node);

/// \returns the geometry of pooling node \p node over an input of dims
/// \p inputDims, or an error naming the node and the attribute at fault.
Expected<PoolGeometry> poolGeometry(const Node &node,
                                    ArrayRef<int64_t> inputDims);

//===----------------------------------------------------------------------===//
// The rules
//===----------------------------------------------------------------------===//

/// The rule of every Infer column entry of ir/Ops.def, \returns the result
/// types of \p node or an error naming it.
#define OP(NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS, \
           TRAITS, COST, INFER, ...)                                           \
  Expected<Results> infer##INFER(const Node &node);
#include "ir/Ops.def"

} // namespace remat::ir::inference

#endif // REMAT_IR_INFERENCE_INFERENCEIMPL_H
