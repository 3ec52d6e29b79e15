//===- runtime/cpu/Evaluator.h - CPU kernels on constant data ---*- C++ -*-===//
//
// Constant folding computes with the CPU kernels (ir/NodeEvaluator.h): a
// folded constant is, bit for bit, what the kernel computes at run time.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CPU_EVALUATOR_H
#define REMAT_RUNTIME_CPU_EVALUATOR_H

#include "ir/NodeEvaluator.h"

namespace remat::runtime::cpu {

/// Selects the CPU kernel of \p node and runs it on the calling thread over
/// \p operands (one per operand of \p node, each of the operand's type; null
/// only for Shape's operand, whose data Shape never reads). \returns one
/// tensor per result, of the declared result type, or the error selection
/// or the kernel reports (an unsupported op or dtype, integer division by
/// zero, an index out of range, ...), naming the node.
llvm::Expected<llvm::SmallVector<ir::TensorDataPtr, 1>>
evaluateNode(const ir::Node &node,
             llvm::ArrayRef<const ir::TensorData *> operands);

/// \returns evaluateNode() as an ir::NodeEvaluator, for the fold-constants
/// and canonicalize passes (passes::PassContext) and the ONNX importer
/// (onnx_frontend::ImportOptions).
ir::NodeEvaluator makeCpuEvaluator();

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_EVALUATOR_H
