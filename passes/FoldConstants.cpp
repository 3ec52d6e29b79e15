//===- passes/FoldConstants.cpp - Evaluate nodes on constants -------------===//
//
// Walks the schedule once, in order. A node folds when every operand is the
// result of a Constant node (Shape needs only its operand's static type, so
// it always folds), passes/FoldingPolicy.h allows it, and each result is
// small enough (max-elements). The values come from the PassContext's
// evaluator: the CPU kernels, so a folded constant holds exactly the bits
// the runtime would compute; an evaluator error (integer division by zero,
// an index out of range, ...) leaves the node for the runtime. Because the
// walk is in schedule order, a chain such as Shape -> Gather -> Unsqueeze ->
// Concat collapses in one run: each folded node becomes a Constant before its
// users are visited.
//
// Each result is replaced by a new Constant node placed where the folded node
// was, with the folded node's name, stage, layer and location, so printed IR
// stays readable and the schedule stays topological (Note [Schedule]).
// Stage::Recompute nodes fold like any other: a constant costs nothing to
// recompute, and the Constant keeps the Recompute stage so reports still
// attribute it to remat. Constants left without uses are for `dce`.
//
//===----------------------------------------------------------------------===//

#include "passes/FoldingPolicy.h"
#include "passes/Passes.h"

#include "ir/ShapeInference.h"
#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <cstdio>

using namespace remat;
using namespace remat::ir;
using namespace remat::passes;
using llvm::Expected;
using llvm::SmallVector;

namespace {

/// A shape vector has one element per dim, so no real one comes near this;
/// it bounds the i64 exemption below so that e.g. Range(0, 1e9) still obeys
/// max-elements.
constexpr int64_t kMaxShapeLikeElements = 64;

/// \returns true if \p type looks like a shape (or a dim): i64 of rank <= 1
/// and at most kMaxShapeLikeElements elements. Such results fold whatever
/// max-elements says, because shape subgraphs must fold for Reshape, Expand
/// and friends to get static result shapes.
bool isShapeLike(const TensorType &type) {
  return type.getDType() == DType::I64 && type.getRank() <= 1 &&
         type.getNumElements() <= kMaxShapeLikeElements;
}

/// Replaces \p node, whose results evaluate to \p results, by one Constant
/// node per result.
//  Given:   %a = Constant() {value = dense<i64[1]: [2]>}
//           %b = Constant() {value = dense<i64[1]: [3]>}
//           %s = Concat(%a, %b) {axis = 0}; %y = Reshape(%x, %s)
//  Execute: replaceWithConstants(node(%s), {[2, 3]})
//  Result:  %a = ...; %b = ...
//           %s = Constant() {value = dense<i64[2]: [2, 3]>}; %y = Reshape(%x,
//           %s)
void replaceWithConstants(Graph &graph, Node &node,
                          llvm::ArrayRef<TensorDataPtr> results) {
  assert(results.size() == node.getNumResults());
  SmallVector<std::pair<Value *, std::string>, 1> renames;
  for (unsigned i = 0; i < node.getNumResults(); ++i) {
    Value *old = node.getResult(i);
    AttrList attrs;
    attrs.set("value", results[i]);
    // The old name is still taken; the constant gets it once node is gone.
    Node *constant = graph.createNode(OpKind::Constant, {}, {old->getType()},
                                      {graph.uniqueName(old->getName())},
                                      std::move(attrs), &node);
    constant->setStage(node.getStage());
    constant->setLayer(node.getLayer());
    constant->setLoc(node.getLoc());
    Value *replacement = constant->getResult(0);
    replacement->setLoc(old->getLoc());
    old->replaceAllUsesWith(replacement);
    renames.emplace_back(replacement, old->getName().str());
  }
  graph.eraseNode(&node);
  for (auto &[value, name] : renames)
    value->setName(name);
}

/// \returns true if the (already truncated) \p value is representable in
/// integer dtype \p dtype.
bool fitsInteger(double value, DType dtype) {
  switch (dtype) {
  case DType::I64:
    return value >= -0x1p63 && value < 0x1p63;
  case DType::I32:
    return value >= -2147483648.0 && value <= 2147483647.0;
  case DType::I8:
    return value >= -128.0 && value <= 127.0;
  case DType::U8:
    return value >= 0.0 && value <= 255.0;
  default:
    llvm_unreachable("not an integer dtype");
  }
}

/// Refuses a Cast of \p data, a float tensor, to integer dtype \p target
/// when an element truncated toward zero is NaN or outside the dtype.
llvm::Error checkCastRange(const Node &node, const TensorData &data,
                           DType target) {
  for (int64_t i = 0, e = data.getNumElements(); i < e; ++i) {
    double value = data.getDouble(i);
    double truncated = std::trunc(value);
    if (!std::isnan(truncated) && fitsInteger(truncated, target))
      continue;
    char text[32];
    std::snprintf(text, sizeof(text), "%g", value);
    return makeError(node.describe() + ": cannot cast " + text + " to " +
                     dtypeName(target));
  }
  return llvm::Error::success();
}

} // namespace

bool remat::passes::isFoldable(OpKind op) { return hasTrait(op, kFoldable); }

llvm::Error
remat::passes::checkFoldable(const Node &node,
                             llvm::ArrayRef<const TensorData *> operands) {
  assert(operands.size() == node.getNumOperands() &&
         "one operand data entry per operand");
  if (!isFoldable(node.getOp()))
    return makeError(node.describe() + ": constant folding does not evaluate " +
                     node.getOpSpelling());
  if (node.getOp() == OpKind::Cast && operands[0] &&
      isFloat(operands[0]->getType().getDType())) {
    DType target = node.getResult(0)->getType().getDType();
    if (isInteger(target))
      return checkCastRange(node, *operands[0], target);
  }
  return llvm::Error::success();
}

NodeEvaluator remat::passes::makeFoldingEvaluator(NodeEvaluator evaluator) {
  return [evaluator = std::move(evaluator)](
             const Node &node, llvm::ArrayRef<const TensorData *> operands)
             -> Expected<SmallVector<TensorDataPtr, 1>> {
    if (auto err = checkFoldable(node, operands))
      return std::move(err);
    return evaluator(node, operands);
  };
}

FoldConstantsPass::FoldConstantsPass() {
  declareOption("max-elements",
                "fold a node only if each result has at most this many "
                "elements (shape-like i64 vectors always fold)",
                &maxElements_);
}

Expected<bool> FoldConstantsPass::run(Graph &graph) {
  if (maxElements_ < 0)
    return makeError("option max-elements must not be negative, got " +
                     llvm::Twine(maxElements_));
  auto evaluator = getEvaluator();
  if (!evaluator)
    return evaluator.takeError();

  bool changed = false;
  SmallVector<const TensorData *, 4> operands;
  for (Node &node : llvm::make_early_inc_range(graph.getNodes())) {
    // Most selective first: most nodes are ops that never fold.
    if (node.getOp() == OpKind::Constant || !isFoldable(node.getOp()))
      continue;

    bool isShape = node.getOp() == OpKind::Shape;
    operands.clear();
    bool allConstant = true;
    for (Value *operand : node.getOperands()) {
      const TensorData *data = operand ? getConstantValue(operand) : nullptr;
      allConstant &= data != nullptr;
      operands.push_back(data);
    }
    if (!allConstant && !isShape)
      continue;

    bool small = llvm::all_of(node.getResults(), [&](Value *result) {
      const TensorType &type = result->getType();
      return isShape || isShapeLike(type) ||
             type.getNumElements() <= maxElements_;
    });
    if (!small)
      continue;

    // What the policy or the evaluator refuses (an out-of-range cast, an
    // unsupported dtype, integer division by zero, ...) is left for the
    // runtime, and the verifier still reports a graph that is invalid.
    if (auto err = checkFoldable(node, operands)) {
      llvm::consumeError(std::move(err));
      continue;
    }
    auto results = (**evaluator)(node, operands);
    if (!results) {
      llvm::consumeError(results.takeError());
      continue;
    }
    replaceWithConstants(graph, node, *results);
    changed = true;
  }
  return changed;
}
