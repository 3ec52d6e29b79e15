//===- passes/Canonicalize.cpp - Fold, merge and clean to a fixpoint ------===//
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "passes/Passes.h"

namespace remat::passes {

CanonicalizePass::CanonicalizePass() {
  declareOption("max-iterations",
                "stop after this many rounds of fold-constants, cse and dce",
                &maxIterations_);
}

llvm::Expected<bool> CanonicalizePass::run(ir::Graph &graph) {
  if (maxIterations_ < 1)
    return makeError("max-iterations must be at least 1, got " +
                     llvm::Twine(maxIterations_));
  if (auto evaluator = getEvaluator(); !evaluator)
    return evaluator.takeError();
  FoldConstantsPass fold;
  fold.setContext(getContext());
  CsePass cse;
  DcePass dce;
  bool changed = false;
  for (int64_t round = 0; round < maxIterations_; ++round) {
    bool roundChanged = false;
    for (Pass *pass : {static_cast<Pass *>(&fold), static_cast<Pass *>(&cse),
                       static_cast<Pass *>(&dce)}) {
      auto passChanged = pass->run(graph);
      if (!passChanged)
        return passChanged.takeError();
      roundChanged |= *passChanged;
    }
    changed |= roundChanged;
    if (!roundChanged)
      break;
  }
  // Shape inference: every declared type must agree with what inference
  // now derives from the folded constants. Import gave every value a static
  // type already, so this checks rather than refines.
  for (const ir::Node &node : graph.getNodes())
    if (auto err = ir::checkResultTypes(node))
      return std::move(err);
  return changed;
}

} // namespace remat::passes
