//===- passes/FoldingPolicy.h - What folding may compute --------*- C++ -*-===//
//
// Constant folding computes through an ir::NodeEvaluator (the CPU kernels);
// this is the policy on top: which ops fold at all, and which values folding
// refuses to bake in although a kernel would compute them. fold-constants
// and canonicalize apply it; the driver wraps the ONNX importer's evaluator
// in it (makeFoldingEvaluator), so that import folds exactly what the pass
// folds.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_FOLDINGPOLICY_H
#define REMAT_PASSES_FOLDINGPOLICY_H

#include "ir/NodeEvaluator.h"
#include "ir/Ops.h"

namespace remat::passes {

/// \returns true if constant folding evaluates nodes of \p op: the ops with
/// trait kFoldable in ir/Ops.def.
bool isFoldable(ir::OpKind op);

/// Checks \p node, whose operands hold \p operands, against the policy:
/// isFoldable, and a Cast from a float to an integer dtype only of values the
/// dtype holds (C and ONNX leave the others undefined; the CPU kernel
/// saturates, but folding must not bake in one runtime's choice).
/// \returns an error naming the node and the value otherwise.
llvm::Error checkFoldable(const ir::Node &node,
                          llvm::ArrayRef<const ir::TensorData *> operands);

/// \returns an evaluator that refuses what checkFoldable() refuses and
/// otherwise calls \p evaluator.
ir::NodeEvaluator makeFoldingEvaluator(ir::NodeEvaluator evaluator);

} // namespace remat::passes

#endif // REMAT_PASSES_FOLDINGPOLICY_H
