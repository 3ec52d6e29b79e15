//===- ir/UpdateName.h - How in-place updates are named ---------*- C++ -*-===//
//
// A training step with an optimizer (passes/Optimizer.cpp) outputs the new
// value of each persistent input it updates: the weight `w` becomes the
// output `w_new`, the optimizer state `w.exp_avg` becomes `w.exp_avg_new`.
// Such an output is an in-place update: the memory plan gives it no arena
// offset and the executor writes it over its input's storage, so that no
// second copy of the weights or of the state exists. The rule is in the
// names (like ir/GradientName.h) so that it survives .rir and ONNX round
// trips; this is the one place it is written.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_UPDATENAME_H
#define REMAT_IR_UPDATENAME_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace remat::ir {

/// The suffix that marks the new value of an updated input.
inline constexpr llvm::StringLiteral kUpdateSuffix = "_new";

/// \returns the name of the updated value of the input \p input ("w" gives
/// "w_new").
inline std::string updatedName(llvm::StringRef input) {
  return (input + kUpdateSuffix).str();
}

/// \returns the graph input that node result \p value is written over: the
/// value is a graph output named `<input>_new`, `<input>` is a persistent
/// graph input (a weight, or an input with data such as optimizer state) of
/// the same type, and the node that defines the value is not a Constant.
/// \returns null for every other value: inputs fed each step are never
/// overwritten.
inline const Value *getUpdatedInput(const Value *value) {
  if (value->isGraphInput() || !value->isGraphOutput() ||
      !value->getName().endswith(kUpdateSuffix) ||
      value->getDefiningNode()->getOp() == OpKind::Constant)
    return nullptr;
  const Value *input = value->getGraph()->lookup(
      value->getName().drop_back(kUpdateSuffix.size()));
  if (!input || !input->isGraphInput() || input->getType() != value->getType() ||
      !(input->isWeight() || input->getData()))
    return nullptr;
  return input;
}

} // namespace remat::ir

#endif // REMAT_IR_UPDATENAME_H
