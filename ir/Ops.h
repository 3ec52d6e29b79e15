//===- ir/Ops.h - The op set -------------------------------------*- C++ -*-===//
//
// The one explicit list of ops is ir/Ops.def. Op semantics are ONNX opset 17
// with numpy broadcasting; ops outside ONNX live in domain "remat" and are
// decomposed to standard ops on export.
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
#define OP(NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS,  \
           SUMMARY)                                                            \
  NAME,
#include "ir/Ops.def"
};

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
  llvm::StringRef summary;
};

/// \returns the Ops.def entry of \p op.
const OpInfo &getOpInfo(OpKind op);
/// \returns the op named \p name in \p domain ("" or "ai.onnx" for ONNX's
/// default domain), or std::nullopt.
std::optional<OpKind> lookupOp(llvm::StringRef domain, llvm::StringRef name);
/// \returns every op in Ops.def order.
llvm::ArrayRef<OpKind> allOps();
/// \returns the .rir spelling: the name, prefixed "remat." in domain remat.
std::string getOpSpelling(OpKind op);

} // namespace remat::ir

#endif // REMAT_IR_OPS_H
