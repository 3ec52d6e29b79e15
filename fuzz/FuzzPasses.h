//===- fuzz/FuzzPasses.h - Pass pipelines in fuzz targets -------*- C++ -*-===//
//
// What the fuzz targets that run passes (FuzzOnnx, FuzzPipeline) share: a
// pass manager set up as the tools set theirs up, and the one invariant of a
// run: a pass may refuse a graph, the verifier after it must not.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FUZZ_FUZZPASSES_H
#define REMAT_FUZZ_FUZZPASSES_H

#include "fuzz/FuzzCommon.h"
#include "passes/FoldingPolicy.h"
#include "passes/PassManager.h"
#include "runtime/cpu/Evaluator.h"

#include <string>

namespace remat::fuzz {

/// Quiets \p pm and gives it the CPU folding evaluator, as the tools do.
inline void setUpPassManager(passes::PassManager &pm) {
  pm.setDiagnosticStream(&llvm::nulls());
  passes::PassContext context;
  context.evaluator =
      passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
  pm.setContext(std::move(context));
}

/// Runs \p pm on \p graph; \returns whether it ran. A pass may refuse a
/// graph (an error), but the verifier after it must not (\p what).
inline bool runPassesVerified(passes::PassManager &pm, ir::Graph &graph,
                              const char *what) {
  auto changed = pm.run(graph);
  if (changed)
    return true;
  // PassManager says "invalid IR after pass" when the verifier fails.
  std::string message = llvm::toString(changed.takeError());
  fuzzCheck(message.rfind("invalid IR after pass", 0) != 0, what);
  return false;
}

} // namespace remat::fuzz

#endif // REMAT_FUZZ_FUZZPASSES_H
