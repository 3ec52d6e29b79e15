//===- ir/Ops.h - The op set -------------------------------------*- C++ -*-===//
//
// The one explicit list of ops is ir/Ops.def. Op semantics are ONNX opset 17
// with numpy broadcasting; ops outside ONNX live in domain "remat" and are
// decomposed to standard ops on export.
//
// Note [The op table]
// ~~~~~~~~~~~~~~~~~~~
// A fact about an op that a pass, a backend or a frontend would otherwise
// spell as a switch over OpKind is a column of its row in ir/Ops.def: its
// arity, traits (elementwise, in place, foldable, differentiable, ...), cost
// class, which operands carry gradients, since which ONNX opset it exists,
// and the names of the rules that implement it: its shape-inference rule
// (infer<Infer>, shared by ops that type alike) and its CPU kernel family
// (select<Kernel>). Consumers expand the row with the OP macro into tables
// indexed by OpKind, so a rule that is missing or misnamed is a compile
// error, not a silent default. What stays per op is only the body of a
// rule: an inference function, a kernel, a gradient rule. Adding an
// elementwise op that fits an existing rule and kernel family therefore
// touches Ops.def, one kernel body and a test.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_OPS_H
#define REMAT_IR_OPS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace remat::ir {

enum class OpKind : uint16_t {
#define OP(NAME, ...) NAME,
#include "ir/Ops.def"
};

/// Facts about an op that passes and backends read instead of keeping lists.
/// Ops.def gives each op its traits; read them with hasTrait.
enum OpTrait : uint32_t {
  /// Result element i depends only on operand element i (after broadcasting).
  kElementwise = 1u << 0,
  /// The result may overwrite a same-typed operand that dies here: result
  /// element i reads element i of such operands and no other element of
  /// them (every kElementwise op with it, and remat.SoftmaxCrossEntropyGrad,
  /// whose only operand of the result's type is log_prob), or, for the
  /// row-wise remat.SoftmaxGrad and remat.LayerNormalizationGrad, a result
  /// row reads only the same row of such operands and the kernels read the
  /// whole row before writing any of it.
  kInPlace = 1u << 1,
  /// The result is operand 0's data unchanged, only its shape differs
  /// (Reshape, Squeeze, Unsqueeze, Identity, Flatten-like).
  kShapeOnly = 1u << 2,
  /// Draws random numbers (Dropout in training mode).
  kRandom = 1u << 3,
  /// Autodiff knows it: its gradient flows to the operands in the row's
  /// GradOperands, by the rule grad<Name>; none means the gradient is zero.
  kDifferentiable = 1u << 4,
  /// Constant folding evaluates it: shape ops, data movement, elementwise
  /// arithmetic and reductions. GEMMs, normalizations, the loss and random
  /// ops (Dropout) stay for the runtime.
  kFoldable = 1u << 5,
};

/// A set of operand indices, bit i for operand i; the GradOperands column.
using OperandSet = uint32_t;
/// No operand.
constexpr OperandSet kNoOperands = 0;
/// Every operand, however many (variadic ops).
constexpr OperandSet kAllOperands = ~OperandSet(0);
/// \returns the set of the operand indices \p indices (each below 32).
template <typename... Indices>
constexpr OperandSet operandSet(Indices... indices) {
  return (OperandSet(0) | ... | (OperandSet(1) << indices));
}

/// What dominates an op's run time, for the cost model: Free for constants,
/// Shape and pure views; Gemm for MatMul and Gemm; Reduction for the
/// reductions, Softmax, LogSoftmax, LayerNormalization and the loss;
/// MemoryBound for everything else.
enum class CostClass : uint8_t { Free, MemoryBound, Reduction, Gemm };

/// Marks an unbounded operand or result count in Ops.def.
constexpr int kVariadic = -1;

/// Static facts about one op, from Ops.def.
struct OpInfo {
  llvm::StringRef name;
  /// "" for the ONNX default domain, "remat" for remat's own ops.
  llvm::StringRef domain;
  int minOperands;
  int maxOperands; ///< kVariadic for no bound.
  int minResults;
  int maxResults; ///< kVariadic for no bound.
  /// OpTrait bits.
  uint32_t traits;
  CostClass cost;
  /// The operands autodiff differentiates (kDifferentiable ops only).
  OperandSet gradOperands;
  /// The first default-domain ONNX opset with the op, 0 for none.
  int onnxSince;
  llvm::StringRef summary;
};

/// \returns the Ops.def entry of \p op.
const OpInfo &getOpInfo(OpKind op);
/// \returns the op named \p name in \p domain ("" or "ai.onnx" for ONNX's
/// default domain), or std::nullopt.
std::optional<OpKind> lookupOp(llvm::StringRef domain, llvm::StringRef name);
/// \returns every op in Ops.def order.
llvm::ArrayRef<OpKind> allOps();
/// \returns whether Ops.def gives \p op the trait \p trait.
bool hasTrait(OpKind op, OpTrait trait);
/// \returns whether autodiff differentiates operand \p index of \p op, a
/// kDifferentiable op.
bool isGradOperand(OpKind op, unsigned index);
/// \returns the name of \p cost as Ops.def spells it ("MemoryBound").
llvm::StringRef costClassName(CostClass cost);
/// \returns the .rir spelling: the name, prefixed "remat." in domain remat.
std::string getOpSpelling(OpKind op);

} // namespace remat::ir

#endif // REMAT_IR_OPS_H
