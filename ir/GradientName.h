//===- ir/GradientName.h - How gradients are named --------------*- C++ -*-===//
//
// Autodiff names the gradient of weight `w` `w_grad` (and the gradient
// values it builds on the way after the value they belong to), and remat
// names a recompute clone of `h` `h.remat`. The names are for people: what
// a value or node is lives in the IR (Value::getGradientOf,
// Node::getOrigin) and in the .rir text. Only a format without room for
// those marks (ONNX) keeps them in names, and recoverMarksFromNames() reads
// them back from there. This is the one place the names are written.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_GRADIENTNAME_H
#define REMAT_IR_GRADIENTNAME_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace remat::ir {

/// The suffix that marks a gradient's name.
inline constexpr llvm::StringLiteral kGradientSuffix = "_grad";

/// \returns the name of the gradient of the value named \p value ("w" gives
/// "w_grad"); Graph::uniqueName() may still add a suffix to make it unique.
inline std::string gradientName(llvm::StringRef value) {
  return (value + kGradientSuffix).str();
}

/// \returns true if \p name is a gradient's name (ends in "_grad").
inline bool isGradientName(llvm::StringRef name) {
  return name.endswith(kGradientSuffix);
}

/// The suffix of a recompute clone's results (Graph::cloneNode makes it
/// unique: `h.remat`, `h.remat.1`).
inline constexpr llvm::StringLiteral kRecomputeSuffix = ".remat";

/// Marks what a graph read from a format without room for marks (ONNX)
/// keeps in its names: each node result `<w>_grad` with `<w>` a graph
/// input becomes the gradient of `<w>` (autodiff gives that name to the
/// weight's gradient only; a weight without data is written to ONNX as a
/// plain input, so the input need not be marked a weight here); each recompute (Stage::Recompute) node whose
/// first result is `<x>.remat...`, with `<x>` the first result of a node
/// that is not a recompute one, becomes a copy of that node. Marks already
/// set stay.
inline void recoverMarksFromNames(Graph &graph) {
  for (Node &node : graph.getNodes())
    for (Value *result : node.getResults()) {
      llvm::StringRef name = result->getName();
      if (result->getGradientOf() || !isGradientName(name))
        continue;
      Value *weight = graph.lookup(name.drop_back(kGradientSuffix.size()));
      if (weight && weight->isGraphInput())
        result->setGradientOf(weight);
    }
  for (Node &node : graph.getNodes()) {
    if (node.getStage() != Stage::Recompute || node.getOrigin() ||
        node.getNumResults() == 0)
      continue;
    llvm::StringRef name = node.getResult(0)->getName();
    size_t at = name.find(kRecomputeSuffix);
    if (at == llvm::StringRef::npos)
      continue;
    const Value *original = graph.lookup(name.take_front(at));
    Node *origin = original ? original->getDefiningNode() : nullptr;
    if (origin && original->getResultIndex() == 0 && !origin->getOrigin() &&
        origin->getStage() != Stage::Recompute)
      node.setOrigin(origin);
  }
}

} // namespace remat::ir

#endif // REMAT_IR_GRADIENTNAME_H
