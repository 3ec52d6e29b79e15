//===- passes/remat/RematPass.cpp - The remat pass ------------------------===//
#include "ir/OutputFile.h"
#include "ir/Support.h"
#include "passes/Passes.h"
#include "passes/remat/ChunkLoss.h"
#include "passes/remat/Solver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

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
  declareOption("chunk-loss",
                "compute the loss head (a Gemm and its softmax cross-entropy) "
                "in chunks of tokens: auto (when the solver's plan needs it), "
                "off, or a number of chunks",
                &chunkLoss_);
  declareOption("dump-model",
                "write remat's model of the step (nodes, bytes, predicted "
                "seconds, stash) as JSON to this file, for "
                "tools/bench/remat_oracle.py",
                &dumpModel_);
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

llvm::Error makeInfeasibleError(Solver &solver, Strategy strategy,
                                uint64_t budgetBytes,
                                llvm::StringRef budgetText,
                                Solver *alternative,
                                llvm::StringRef alternativeNote) {
  // The smallest any strategy reaches, of the step as it is or of
  // \p alternative (the step with its loss head chunked) when that is
  // smaller, and the strategy's own floor: a budget at or above it has a
  // plan.
  auto smallest = solver.smallestPlan();
  if (!smallest)
    return smallest.takeError();
  auto own = solver.smallestPlanOf(strategy);
  if (!own)
    return own.takeError();
  std::string note;
  if (alternative) {
    auto other = alternative->smallestPlan();
    if (!other)
      return other.takeError();
    if (other->plannedPeakBytes < smallest->plannedPeakBytes) {
      smallest = std::move(other);
      note = (", " + alternativeNote).str();
    }
    auto otherOwn = alternative->smallestPlanOf(strategy);
    if (!otherOwn)
      return otherOwn.takeError();
    if (otherOwn->plannedPeakBytes < own->plannedPeakBytes)
      own = std::move(otherOwn);
  }
  uint64_t ownPeak = own->plannedPeakBytes;
  bool ownFloor = ownPeak < smallest->plannedPeakBytes;
  const PlanResult &floor = ownFloor ? *own : *smallest;
  bool otherFloor = ownPeak != floor.plannedPeakBytes;
  std::string message = "budget " + formatBytes(budgetBytes);
  if (budgetText.endswith("%")) {
    message += " (";
    message += budgetText;
    message += " of " + formatBytes(solver.getBasePeakBytes()) + ")";
  }
  message += " is below every plan of strategy '";
  message += getStrategyName(strategy);
  message += "'";
  if (otherFloor)
    message += ", whose smallest planned peak is " + formatBytes(ownPeak) +
               " (" + std::to_string(ownPeak) + " B)";
  message += "; the smallest feasible planned peak is " +
             formatBytes(floor.plannedPeakBytes) + " (" +
             std::to_string(floor.plannedPeakBytes) + " B, strategy '" +
             floor.strategy + "'" + (ownFloor ? "" : note) +
             "); without remat it is " + formatBytes(solver.getBasePeakBytes());
  return makeError(message);
}

} // namespace recompute

llvm::Expected<bool> RematPass::run(ir::Graph &graph) {
  report_.reset();
  // declareEnumOption accepts only getStrategyNames().
  Strategy strategy = *parseStrategy(strategy_);
  auto chunkSetting = parseChunkLoss(chunkLoss_);
  if (!chunkSetting)
    return chunkSetting.takeError();
  std::vector<std::string> boundaries;
  for (llvm::StringRef name : llvm::split(boundaries_, ','))
    if (!name.trim().empty())
      boundaries.push_back(name.trim().ltrim('%').str());
  auto problem = prepareRematProblem(graph, costProfile_, boundaries);
  if (!problem)
    return problem.takeError();
  if (isBudgetDriven(strategy) && !budget_.isSet)
    return makeError("strategy '" + strategy_ +
                     "' needs a budget (budget=6GiB or budget=40%)");
  Solver &solver = *(*problem)->solver;
  if (!dumpModel_.empty())
    if (auto err = writeOutputFile(
            dumpModel_,
            llvm::formatv("{0:1}\n",
                          llvm::json::Value(solver.describeModel()))
                .str()))
      return makeError("dump-model: " + errorToString(std::move(err)));
  std::optional<uint64_t> budget;
  if (budget_.isSet)
    budget = budget_.resolve(solver.getBasePeakBytes());

  // The step with its loss head chunked is a second pool of plans (Note
  // [Chunked loss head]); the pick is the fastest predicted plan that fits,
  // of either, so budgets stay monotone (Note [Monotone budgets]).
  std::string headWhyNot;
  std::unique_ptr<ChunkedStep> chunked;
  if (chunkSetting->mode == ChunkLossSetting::Mode::Fixed ||
      (chunkSetting->mode == ChunkLossSetting::Mode::Auto && budget)) {
    auto step = prepareChunkedStep(graph, *chunkSetting, costProfile_,
                                   boundaries, headWhyNot);
    if (!step)
      return step.takeError();
    chunked = std::move(*step);
  }
  Solver *chunkedSolver = chunked ? chunked->problem->solver.get() : nullptr;
  std::optional<PlanResult> chosen;
  Solver *chosenSolver = nullptr;
  for (Solver *candidate : {&solver, chunkedSolver}) {
    if (!candidate || (candidate == &solver && chunkSetting->mode ==
                                                   ChunkLossSetting::Mode::Fixed))
      continue;
    auto plan = candidate->solve(strategy, budget);
    if (!plan)
      return plan.takeError();
    if (!*plan)
      continue;
    double seconds = candidate->getPredictedSeconds(**plan);
    if (chosen) {
      double best = chosenSolver->getPredictedSeconds(*chosen);
      if (seconds > best || (seconds == best && (*plan)->plannedPeakBytes >=
                                                    chosen->plannedPeakBytes))
        continue;
    }
    chosen = std::move(**plan);
    chosenSolver = candidate;
  }
  bool isChunked = chosenSolver && chosenSolver == chunkedSolver;
  if (!chosen) {
    if (chunkSetting->mode == ChunkLossSetting::Mode::Fixed)
      return makeInfeasibleError(*chunkedSolver, strategy, *budget,
                                 budget_.str());
    return makeInfeasibleError(
        solver, strategy, *budget, budget_.str(), chunkedSolver,
        chunked ? "loss head in " + std::to_string(chunked->chunks) + " chunks"
                : "");
  }
  std::string chunkNote;
  if (isChunked)
    chunkNote = chunked->description;
  else if (chunked)
    chunkNote = chunked->description +
                " was not needed: the whole head's plan is as fast or faster";
  else if (chunkSetting->mode == ChunkLossSetting::Mode::Off)
    chunkNote = "off";
  else if (budget)
    chunkNote = "the loss head is left whole: " + headWhyNot;
  report_ = chosenSolver->explainJson(*chosen, budget);
  // Without a budget auto has nothing to meet: no note.
  if (!chunkNote.empty())
    report_->try_emplace("chunk_loss", chunkNote);
  if (explain_) {
    std::string text =
        chunkNote.empty() ? "" : "chunk-loss: " + chunkNote + "\n";
    llvm::raw_string_ostream os(text);
    chosenSolver->explain(*chosen, budget, os);
    os.flush();
    emitRaw(text);
  }
  if (isChunked) {
    auto stats = applyChunkedPlan(graph, *chunked, *chosen);
    if (!stats)
      return stats.takeError();
    return true;
  }
  RecomputeStats stats = solver.apply(*chosen);
  return stats.clonedNodes != 0;
}

} // namespace remat::passes
