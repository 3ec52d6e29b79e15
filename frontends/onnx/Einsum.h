//===- frontends/onnx/Einsum.h - Einsum as MatMul, Transpose, ... -*- C++
//-*-===//
//
// remat has no Einsum op: the importer lowers each Einsum node into ops that
// have shape inference, kernels and gradient rules (Expand, ReduceSum,
// Transpose, Reshape, MatMul), so that nothing after import knows about it.
//
// parseEinsum reads the equation against the operands' dims (numpy's
// semantics: explicit "->" or implicit output, "..." broadcast from the
// right, a subscript of size 1 broadcast against a larger one) and says
// what is wrong with it; emitEinsum then sums each subscript that only one
// operand has and the output lacks, contracts the operands left to right,
// each pair as one batched MatMul [batch, m, k] x [batch, k, n], and
// transposes to the output's order. A subscript repeated within one operand
// (a trace or a diagonal) is refused.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_ONNX_EINSUM_H
#define REMAT_FRONTENDS_ONNX_EINSUM_H

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <vector>

namespace remat::onnx_frontend {

/// A parsed equation. Subscripts are numbered: a letter by its character
/// code, the j-th dim the ellipsis stands for (counted in the output's
/// ellipsis, right-aligned in each operand) by kEllipsisLabel + j.
struct EinsumSpec {
  static constexpr int kEllipsisLabel = 256;
  /// The subscript of each dim of each operand.
  std::vector<std::vector<int>> inputs;
  /// The subscript of each dim of the result.
  std::vector<int> output;
  /// The size of each subscript (the largest over the operands).
  std::map<int, int64_t> sizes;
};

/// Parses \p equation for operands of dims \p dims. Errors are messages
/// without the node's name (the importer adds it).
llvm::Expected<EinsumSpec>
parseEinsum(llvm::StringRef equation,
            llvm::ArrayRef<std::vector<int64_t>> dims);

/// Emits one node of op \p op; \returns its single result.
using EinsumNodeFn = llvm::function_ref<llvm::Expected<ir::Value *>(
    ir::OpKind op, llvm::ArrayRef<ir::Value *> operands, ir::AttrList attrs)>;
/// \returns an i64[n] constant holding \p values.
using EinsumIntsFn =
    llvm::function_ref<ir::Value *(llvm::ArrayRef<int64_t> values)>;

/// Emits \p spec over \p operands through \p node and \p ints. \returns the
/// result (an operand itself when the equation is the identity).
llvm::Expected<ir::Value *> emitEinsum(const EinsumSpec &spec,
                                       llvm::ArrayRef<ir::Value *> operands,
                                       EinsumNodeFn node, EinsumIntsFn ints);

} // namespace remat::onnx_frontend

#endif // REMAT_FRONTENDS_ONNX_EINSUM_H
