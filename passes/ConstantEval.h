//===- passes/ConstantEval.h - Evaluating nodes on constant data -*- C++
//-*-===//
//
// A small reference interpreter for the ops that appear in shape subgraphs and
// in constant expressions, used by fold-constants (and by the ONNX importer's
// shape-subgraph folding). Semantics are ONNX opset 17 with numpy
// broadcasting.
//
// Arithmetic happens in the dtype's own precision: f32 in float, f64 in
// double, f16 and bf16 in float rounded to the dtype when stored, integers in
// int64 wrapped to the dtype (two's complement). Where ONNX leaves the result
// undefined (integer division by zero, a float cast to an integer type that
// cannot hold it) evaluation refuses with an error instead of choosing a
// value, so that folding never bakes in a result a runtime might not produce.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_CONSTANTEVAL_H
#define REMAT_PASSES_CONSTANTEVAL_H

#include "ir/Attributes.h"
#include "ir/Graph.h"
#include "ir/Ops.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

namespace remat::passes {

/// \returns true if evaluateNode() implements \p op. Lets callers skip nodes
/// that can never fold (MatMul, Softmax, Dropout, ...) without building an
/// error.
bool canEvaluate(ir::OpKind op);

/// Computes the results of \p node from the contents of its operands.
///
/// \p operands has one entry per operand of \p node. An entry may be null
/// only for `Shape`, whose result depends on the operand's type alone; any
/// other null entry is an error. Operand types are taken from the data.
///
/// Each result is computed from the semantics alone and must equal the type
/// \p node declares for it; a mismatch is an error (and nothing larger than
/// the declared type is ever allocated).
///
/// \returns one tensor per result, or an error naming the node: "cannot
/// evaluate <Op> ..." for ops outside the supported set, otherwise what is
/// wrong (integer division by zero, index out of range, bad attribute, ...).
llvm::Expected<llvm::SmallVector<ir::TensorDataPtr, 1>>
evaluateNode(const ir::Node &node,
             llvm::ArrayRef<const ir::TensorData *> operands);

} // namespace remat::passes

#endif // REMAT_PASSES_CONSTANTEVAL_H
