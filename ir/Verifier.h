//===- ir/Verifier.h - Structural and type checks ---------------*- C++ -*-===//
#ifndef REMAT_IR_VERIFIER_H
#define REMAT_IR_VERIFIER_H

#include "ir/Graph.h"

#include "llvm/Support/Error.h"

namespace remat::ir {

/// Checks the invariants every pass must keep:
///  - every op is known and has an arity allowed by Ops.def;
///  - every operand is defined before its use (Note [Schedule]); a cycle is
///    reported as such, naming the values on it;
///  - use lists agree with operands, in both directions;
///  - declared result types agree with shape inference;
///  - value names are unique;
///  - every graph output is a value of this graph.
/// \returns the first violation found, naming the node or value.
llvm::Error verify(const Graph &graph);

} // namespace remat::ir

#endif // REMAT_IR_VERIFIER_H
