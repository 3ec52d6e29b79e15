//===- ir/ShapeInference.h - Result types from operands ---------*- C++ -*-===//
//
// Each op in Ops.def has an inference function with ONNX opset-17 semantics
// and numpy broadcasting. Some result shapes depend on operand *values*
// (Reshape's shape, Expand, Range, ConstantOfShape, Slice's starts, ...);
// those are known only when the operand is defined by a Constant node.
// Otherwise inference returns the dtype alone and the declared type is
// checked only for what can be known (dtype, and element count for Reshape).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_SHAPEINFERENCE_H
#define REMAT_IR_SHAPEINFERENCE_H

#include "ir/Graph.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <optional>

namespace remat::ir {

/// What inference knows about one result.
struct InferredType {
  /// The full type when shapeKnown; otherwise only its dtype is meaningful.
  TensorType type;
  bool shapeKnown = true;
  /// When the shape is unknown but the element count is (Reshape).
  std::optional<int64_t> numElements;
};

/// \returns the `value` tensor of the well-formed Constant node that defines
/// \p value when its type matches \p value's, else null. (Inference reads the
/// scalar and list forms value_float/value_int/value_floats/value_ints
/// itself; the importer normalizes them to `value`.)
const TensorData *getConstantValue(const Value *value);

/// Checks operand and result counts of \p node against Ops.def.
llvm::Error checkArity(const Node &node);

/// Infers the result types of \p node from its operands and attributes.
/// Errors name the node and say what is wrong (operand dtype, rank, attribute
/// out of range, incompatible broadcast dims, ...).
llvm::Expected<llvm::SmallVector<InferredType, 1>> inferTypes(const Node &node);

/// Checks the declared result types of \p node against inference. The
/// message names the node, the result, the declared and the inferred type.
llvm::Error checkResultTypes(const Node &node);

/// Broadcasts \p a and \p b numpy-style; \returns std::nullopt when a pair of
/// dims is incompatible.
std::optional<llvm::SmallVector<int64_t, 4>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// The resolved geometry of a Conv or ConvTranspose node: one entry per
/// spatial dim, pads resolved from auto_pad, and the result dims.
struct ConvGeometry {
  llvm::SmallVector<int64_t, 3> kernel;
  llvm::SmallVector<int64_t, 3> strides;
  llvm::SmallVector<int64_t, 3> dilations;
  llvm::SmallVector<int64_t, 3> padBegin;
  llvm::SmallVector<int64_t, 3> padEnd;
  /// ConvTranspose only; zeros for Conv.
  llvm::SmallVector<int64_t, 3> outputPadding;
  int64_t group = 1;
  /// [N, M, spatial...]: M output channels (W.dim(0) for Conv,
  /// W.dim(1) * group for ConvTranspose).
  llvm::SmallVector<int64_t, 5> resultDims;
};

/// \returns the geometry of Conv or ConvTranspose node \p node, or an error
/// naming the node and the attribute or operand at fault.
llvm::Expected<ConvGeometry> getConvGeometry(const Node &node);

/// The resolved geometry of a pooling node (MaxPool, AveragePool and their
/// remat gradients): one entry per spatial dim, pads resolved from auto_pad,
/// the window count rule, and the pooled dims.
struct PoolGeometry {
  llvm::SmallVector<int64_t, 3> kernel;
  llvm::SmallVector<int64_t, 3> strides;
  llvm::SmallVector<int64_t, 3> dilations;
  llvm::SmallVector<int64_t, 3> padBegin;
  llvm::SmallVector<int64_t, 3> padEnd;
  /// AveragePool's count_include_pad; false for MaxPool.
  bool countIncludePad = false;
  /// [N, C, pooled spatial...].
  llvm::SmallVector<int64_t, 5> resultDims;
};

/// \returns the geometry of pooling node \p node over an input of dims
/// \p inputDims ([N, C, spatial...]), or an error naming the node and the
/// attribute at fault.
llvm::Expected<PoolGeometry> getPoolGeometry(const Node &node,
                                             llvm::ArrayRef<int64_t> inputDims);

} // namespace remat::ir

#endif // REMAT_IR_SHAPEINFERENCE_H
