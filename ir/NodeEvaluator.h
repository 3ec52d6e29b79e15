//===- ir/NodeEvaluator.h - Evaluating one node on constants ----*- C++ -*-===//
//
// What constant folding (passes/FoldConstants.cpp, and the ONNX importer's
// shape-subgraph folding) computes with. Op semantics live in the reference
// CPU kernels only (runtime/cpu); runtime::cpu::makeCpuEvaluator() runs them
// on constant data, as XLA folds through its HloEvaluator and Glow through
// its Interpreter backend. passes/ and frontends/ take a NodeEvaluator from
// whoever drives them (driver/, tests) and never include runtime/.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_NODEEVALUATOR_H
#define REMAT_IR_NODEEVALUATOR_H

#include "ir/Attributes.h"
#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <functional>

namespace remat::ir {

/// Computes the results of a node from the contents of its operands: one
/// entry per operand (null only for an operand whose data the op does not
/// read, such as Shape's), \returns one tensor per result, each of the type
/// the node declares, or an error naming the node (an op or dtype the
/// evaluator lacks, integer division by zero, an index out of range, ...).
using NodeEvaluator =
    std::function<llvm::Expected<llvm::SmallVector<TensorDataPtr, 1>>(
        const Node &node, llvm::ArrayRef<const TensorData *> operands)>;

} // namespace remat::ir

#endif // REMAT_IR_NODEEVALUATOR_H
