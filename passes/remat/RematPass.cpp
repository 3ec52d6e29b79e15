//===- passes/remat/RematPass.cpp - The remat pass ------------------------===//
#include "ir/Support.h"
#include "passes/Passes.h"
#include "passes/remat/Solver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace remat::passes {

using namespace remat::passes::recompute;

RematPass::RematPass() {
  declareByteOption("budget",
                    "bound on the planned peak (weights + inputs + arena): "
                    "bytes (6GiB, 512MiB) or a percentage of the planned "
                    "peak without remat (40%)",
                    &budget_, /*allowPercent=*/true);
  declareEnumOption("strategy",
                    "what may be recomputed (auto: the fastest plan of all "
                    "that fits the budget)",
                    &strategy_,
                    std::vector<std::string>(getStrategyNames().begin(),
                                             getStrategyNames().end()));
  declareOption("boundaries",
                "segment boundaries to use instead of the cut points found "
                "(comma-separated value names)",
                &boundaries_);
  declareOption("cost-profile",
                "node times measured by remat-run --profile (default: the "
                "built-in GEMM rate and bandwidth)",
                &costProfile_);
  declareOption("explain", "print the decisions and their reasons", &explain_);
}

namespace recompute {

llvm::Expected<std::unique_ptr<RematProblem>>
prepareRematProblem(ir::Graph &graph, llvm::StringRef costProfilePath,
                    llvm::ArrayRef<std::string> boundaries) {
  unsigned backward = 0;
  std::vector<std::string> recomputed;
  for (const ir::Node &node : graph.getNodes()) {
    if (node.getStage() == ir::Stage::Backward)
      ++backward;
    if (node.getStage() == ir::Stage::Recompute && recomputed.size() < 3)
      recomputed.push_back(("%" + node.getResult(0)->getName()).str());
  }
  if (!recomputed.empty())
    return makeError("remat has already been applied to @" + graph.getName() +
                     ": it has recompute nodes (" +
                     llvm::join(recomputed, ", ") + ")");
  if (backward == 0)
    return makeError("remat needs a training step, and @" + graph.getName() +
                     " has no backward nodes (run autodiff first, e.g. -p "
                     "canonicalize,autodiff,dce,schedule,remat,plan-memory)");

  auto problem = std::make_unique<RematProblem>();
  if (!costProfilePath.empty()) {
    auto loaded = loadCostProfile(costProfilePath);
    if (!loaded)
      return loaded.takeError();
    problem->profile = std::move(*loaded);
  }
  problem->stash = analyseStash(graph);
  auto chain = findSegments(graph, problem->stash, boundaries);
  if (!chain)
    return chain.takeError();
  problem->chain = std::move(*chain);
  problem->solver = std::make_unique<Solver>(graph, problem->stash,
                                             problem->chain, problem->profile);
  if (auto err = problem->solver->initialize())
    return std::move(err);
  return std::move(problem);
}

llvm::Error makeInfeasibleError(Solver &solver, llvm::StringRef strategy,
                                uint64_t budgetBytes,
                                llvm::StringRef budgetText) {
  auto smallest = solver.smallestPlan();
  if (!smallest)
    return smallest.takeError();
  // The strategy's own floor: a budget at or above it has a plan.
  auto own = solver.smallestPlanOf(strategy);
  if (!own)
    return own.takeError();
  uint64_t ownPeak = own->plannedPeakBytes;
  const PlanResult &floor =
      ownPeak < smallest->plannedPeakBytes ? *own : *smallest;
  std::string message = "budget " + formatBytes(budgetBytes);
  if (budgetText.endswith("%")) {
    message += " (";
    message += budgetText;
    message += " of " + formatBytes(solver.getBasePeakBytes()) + ")";
  }
  message += " is below every plan of strategy '";
  message += strategy;
  message += "'";
  bool ownFloor = ownPeak != floor.plannedPeakBytes;
  if (ownFloor)
    message += ", whose smallest planned peak is " + formatBytes(ownPeak) +
               " (" + std::to_string(ownPeak) + " B)";
  message += "; the smallest feasible planned peak is " +
             formatBytes(floor.plannedPeakBytes) + " (" +
             std::to_string(floor.plannedPeakBytes) + " B, strategy '" +
             floor.strategy + "'); without remat it is " +
             formatBytes(solver.getBasePeakBytes());
  return makeError(message);
}

} // namespace recompute

llvm::Expected<bool> RematPass::run(ir::Graph &graph) {
  report_.reset();
  bool budgetDriven = strategy_ == "chain-dp" || strategy_ == "selective" ||
                      strategy_ == "auto";
  std::vector<std::string> boundaries;
  for (llvm::StringRef name : llvm::split(boundaries_, ','))
    if (!name.trim().empty())
      boundaries.push_back(name.trim().ltrim('%').str());
  auto problem = prepareRematProblem(graph, costProfile_, boundaries);
  if (!problem)
    return problem.takeError();
  if (budgetDriven && !budget_.isSet)
    return makeError("strategy '" + strategy_ +
                     "' needs a budget (budget=6GiB or budget=40%)");
  Solver &solver = *(*problem)->solver;
  std::optional<uint64_t> budget;
  if (budget_.isSet)
    budget = budget_.resolve(solver.getBasePeakBytes());

  auto plan = solver.solve(strategy_, budget);
  if (!plan)
    return plan.takeError();
  if (!*plan)
    return makeInfeasibleError(solver, strategy_, *budget, budget_.str());
  const PlanResult &chosen = **plan;
  report_ = solver.explainJson(chosen, budget);
  if (explain_) {
    std::string text;
    llvm::raw_string_ostream os(text);
    solver.explain(chosen, budget, os);
    os.flush();
    emitRaw(text);
  }
  RecomputeStats stats = solver.apply(chosen);
  return stats.clonedNodes != 0;
}

} // namespace remat::passes
