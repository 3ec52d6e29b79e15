//===- runtime/cpu/Kernels.cpp - Choosing a CPU kernel for a node ---------===//
//
// selectKernel() validates the node against shape inference (so every kernel
// may assume ONNX opset-17-consistent operand and result types), rejects what
// the CPU backend does not implement with a message naming the node, the op
// and the dtype or attribute, and hands the node to the select<Kernel> its
// Ops.def row names (Note [The op table]), in the file of its family:
//
//   Elementwise.cpp    unary and binary arithmetic, comparisons, Where, Max,
//                      Mod, Pow, Cast, Gelu, Dropout, remat.DropoutGrad
//   Linalg.cpp         MatMul, Gemm, remat.PermutedMatMul (OpenBLAS)
//   Normalization.cpp  Softmax, LogSoftmax, LayerNormalization,
//                      SoftmaxCrossEntropyLoss, remat.SoftmaxGrad,
//                      remat.LayerNormalizationGrad,
//                      remat.SoftmaxCrossEntropyGrad
//   Reductions.cpp     ReduceSum, ReduceMean, ReduceMax, ArgMax, ArgMin
//   DataMovement.cpp   Reshape, Transpose, (Un)Squeeze, Concat, Slice, Split,
//                      Expand, Gather, ScatterElements, Shape, Constant,
//                      ConstantOfShape, Range, OneHot, Identity
//   ElementwiseMore.cpp Sin, Cos, Abs, Reciprocal, Not, IsNaN, IsInf, Min,
//                      Less, LessOrEqual, Greater, Or, Sign, Ceil, Clip,
//                      Floor, Softplus, Acos
//   Indexing.cpp       GatherElements, Trilu, CumSum, Pad, Tile, TopK,
//                      EyeLike
//   Conv.cpp           Conv, ConvTranspose, MaxPool, AveragePool and their
//                      gradients
//
// Note [CPU dtypes]
// ~~~~~~~~~~~~~~~~~
// Arithmetic kernels implement f32 and f64, and the integer dtypes ONNX
// allows for the op (i64, i32, i8, u8) where it has integer semantics.
// Kernels that only move elements (Reshape, Transpose, Gather, Concat, Slice,
// Where, ...) work on every dtype, f16 and bf16 included, and Cast converts
// between all nine dtypes. f16/bf16 arithmetic is not implemented: graphs
// compute in f32 or f64 on the CPU.
//
// Note [Unsupported on the CPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Attribute and dtype combinations selectKernel() rejects, and why:
// - Any arithmetic op (Add, MatMul, Softmax, LayerNormalization, Reduce*,
//   Max, Dropout, ScatterElements "add"/"mul", ...) on f16 or bf16, and Pow
//   with an f16/bf16 exponent: see Note [CPU dtypes]; Cast to f32 first.
// - Integer Gemm whose 'alpha' or 'beta' is not a whole number (the product
//   is computed in the integer type).
// - MatMul/Gemm with a matrix dim beyond 2^31 - 1 (OpenBLAS takes int).
// - OneHot with f16/bf16 indices (any dtype works for depth and values).
// - ScatterElements reduction "max"/"min": opset 18; remat is opset 17 (none,
//   add, mul). reduction "add"/"mul" on bool: no arithmetic on bool.
// - ReduceMean and ReduceMax over an axis of size 0 (with a non-empty
//   result): the mean is 0/0 and opset 17 leaves the max of nothing
//   undefined, so constant folding leaves them too; so are ArgMax and
//   ArgMin over an empty axis. ReduceSum of nothing is
//   0 and is supported.
// - Mod and integer Div by zero, integer Pow with 0 to a negative power or a
//   result outside the dtype, Gather/ScatterElements indices out of range,
//   SoftmaxCrossEntropyLoss labels outside [0, C) (other than ignore_index):
//   undefined in ONNX; the kernel returns an error naming the node (at run
//   time, since they depend on values).
// Choices where ONNX leaves the result open:
// - Cast from a float to an integer dtype saturates to the dtype's range and
//   maps NaN to 0 (C++ leaves it undefined; ONNX does not say).
// - LayerNormalization computes its statistics in the wider of X's dtype and
//   stash_type: f32 for f32 X with stash_type 1 (or 10/16, f16/bf16: never
//   narrower than X), f64 for f64 X whatever the stash_type (remat's shape
//   inference gives f64 X f64 statistics, where ONNX would stash f32), f64
//   for f32 X with stash_type 11 (Y and the statistics then round to f32).
// - Sums (Softmax, LogSoftmax, LayerNormalization, ReduceSum/Mean, the loss)
//   accumulate in the element type, sequentially in index order.
// - SoftmaxCrossEntropyLoss with reduction "mean" divides by the sum of the
//   weights of the non-ignored labels; when every label is ignored that sum
//   is 0 and the loss is NaN, as in ONNX's reference implementation
//   (loss.sum() / gather_weight.sum()) and PyTorch.
// - Dropout without a 'seed' attribute uses seed 0 (the importer gives every
//   training-mode Dropout a seed, see DESIGN.md "Training step"). The mask
//   follows runtime/DropoutMask.h; kept elements are x * (1 / (1 - ratio)),
//   the scale computed in the element type from the ratio operand, as ONNX's
//   reference and onnxruntime do. The keep decision uses the ratio rounded
//   to f32 (dropoutKeep takes a float).
// - Dropout's ratio operand outside [0, 1) in training mode is a run-time
//   error (a constant one is already refused by shape inference).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "runtime/cpu/KernelImpl.h"

#include "ir/ShapeInference.h"

#include "llvm/ADT/Twine.h"

#include <cmath>

namespace remat::runtime::cpu {

namespace detail {

std::string dimsStr(ArrayRef<int64_t> dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

Error unsupportedDType(const ir::Node &node, const Twine &what, ir::DType dtype,
                       const Twine &supported) {
  return nodeError(node, "the cpu backend has no " + node.getOpSpelling() +
                             " kernel for " + what + " of dtype " +
                             ir::dtypeName(dtype) +
                             " (supported: " + supported + ")");
}

Error checkRuntimeDims(const ir::Node &node, const Twine &what,
                       ArrayRef<int64_t> computed, ArrayRef<int64_t> declared) {
  if (computed == declared)
    return Error::success();
  return nodeError(node, what + " gives dims " + dimsStr(computed) +
                             ", but the node declares " + dimsStr(declared));
}

std::vector<int64_t> readInts(const Tensor &tensor) {
  int64_t count = tensor.getNumElements();
  std::vector<int64_t> values(count);
  switch (tensor.getDType()) {
  case ir::DType::I64: {
    const int64_t *data = tensor.getData<int64_t>();
    values.assign(data, data + count);
    break;
  }
  case ir::DType::I32: {
    const int32_t *data = tensor.getData<int32_t>();
    values.assign(data, data + count);
    break;
  }
  default:
    llvm_unreachable("shape inference admits only i64/i32 here");
  }
  return values;
}

double readScalarAsDouble(const Tensor &tensor) {
  assert(tensor.getNumElements() >= 1 && "empty scalar operand");
  switch (tensor.getDType()) {
  case ir::DType::F32:
    return *tensor.getData<float>();
  case ir::DType::F64:
    return *tensor.getData<double>();
  case ir::DType::F16:
    return ir::halfToFloat(*tensor.getData<uint16_t>());
  case ir::DType::BF16:
    return ir::bfloat16ToFloat(*tensor.getData<uint16_t>());
  case ir::DType::I64:
    return static_cast<double>(*tensor.getData<int64_t>());
  case ir::DType::I32:
    return *tensor.getData<int32_t>();
  case ir::DType::I8:
    return *tensor.getData<int8_t>();
  case ir::DType::U8:
  case ir::DType::Bool:
    return *tensor.getData<uint8_t>();
  }
  llvm_unreachable("unknown dtype");
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t dim : dims)
    result *= dim;
  return result;
}

Dims rowMajorStrides(ArrayRef<int64_t> dims) {
  Dims strides(dims.size(), 1);
  for (size_t k = dims.size(); k > 1; --k)
    strides[k - 2] = strides[k - 1] * dims[k - 1];
  return strides;
}

} // namespace detail

using namespace detail;

bool dropoutKeep(uint64_t seed, uint64_t index, float ratio) {
  float u =
      static_cast<float>(dropoutBits24(dropoutKey(seed), index)) * 0x1p-24f;
  return u >= ratio;
}

namespace {

/// Checks what shape inference cannot phrase as well for the CPU backend.
Error precheck(const ir::Node &node) {
  if (node.getOp() == ir::OpKind::ScatterElements) {
    auto reduction = node.getAttrs().getString("reduction");
    if (reduction && (*reduction == "max" || *reduction == "min"))
      return nodeError(node, "attribute 'reduction' is \"" + *reduction +
                                 "\", which is ONNX opset 18; remat implements "
                                 "opset 17 (\"none\", \"add\", \"mul\")");
  }
  return Error::success();
}

/// remat.Extern: another front end's op (remat.torch), planned by remat and
/// run by that front end.
Expected<Kernel> selectExtern(const ir::Node &node) {
  return nodeError(node, "remat.Extern ('" +
                             node.getAttrs().getString("target").value_or("") +
                             "') has no kernel: remat plans it, its own front "
                             "end runs it");
}

using Selector = Expected<Kernel> (*)(const ir::Node &);

/// The kernel family of every op, select<Kernel> from its Ops.def row,
/// indexed by OpKind.
constexpr Selector kSelectors[] = {
#define OP(NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS, \
           TRAITS, COST, INFER, KERNEL, ...)                                   \
  &select##KERNEL,
#include "ir/Ops.def"
};

} // namespace

Expected<Kernel> selectKernel(const ir::Node &node) {
  if (auto err = precheck(node))
    return std::move(err);
  if (auto err = ir::checkResultTypes(node))
    return std::move(err);
  for (unsigned i = 0; i < node.getNumResults(); ++i)
    if (auto err = node.getResult(i)->getType().checkSize())
      return nodeError(node, "result %" + node.getResult(i)->getName() + ": " +
                                 errorToString(std::move(err)));

  return kSelectors[size_t(node.getOp())](node);
}

} // namespace remat::runtime::cpu
