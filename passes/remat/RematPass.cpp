//===- passes/remat/RematPass.cpp - The remat pass ------------------------===//
#include "ir/OutputFile.h"
#include "ir/Support.h"
#include "passes/Passes.h"
#include "passes/remat/ChunkAttention.h"
#include "passes/remat/ChunkLoss.h"
#include "passes/remat/Solver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <atomic>
#include <thread>

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
  declareOption("chunk-attention",
                "compute each attention core (MatMul, softmax, dropout, "
                "MatMul) forward and backward in chunks of the batch: auto "
                "(when the solver's plan needs it), off, or a number of "
                "chunks",
                &chunkAttention_);
  declareOption("nested",
                "also consider plans that rebuild values again inside the "
                "backward: a recomputed group cut again in its own backward, "
                "and values rebuilt for each backward node that reads them "
                "(false for a front end whose backward can only read a set "
                "of saved values)",
                &nested_);
  declareOption("dump-model",
                "write remat's model of the step (nodes, bytes, predicted "
                "seconds, stash) as JSON to this file, for "
                "tools/bench/remat_oracle.py",
                &dumpModel_);
}

namespace recompute {

void forEachOnThreads(size_t count, llvm::function_ref<void(size_t)> work) {
  unsigned threads = std::min<size_t>(
      count, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i)
      work(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++)
      work(i);
  };
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < threads; ++t)
    helpers.emplace_back(worker);
  worker();
  for (std::thread &helper : helpers)
    helper.join();
}

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

llvm::Error makeInfeasibleError(
    Solver &solver, Strategy strategy, uint64_t budgetBytes,
    llvm::StringRef budgetText,
    llvm::ArrayRef<std::pair<Solver *, std::string>> alternatives) {
  // The smallest any strategy reaches, of the step as it is or of an
  // alternative (the step with its loss head or attention cores chunked)
  // when that is smaller, and the strategy's own floor: a budget at or
  // above it has a plan. An alternative is searched only for plans below
  // the floors found so far (its members estimated at or above them are
  // not planned), which finds the same floors.
  auto smallest = solver.smallestPlan();
  if (!smallest)
    return smallest.takeError();
  auto own = solver.smallestPlanOf(strategy);
  if (!own)
    return own.takeError();
  std::string note;
  for (const auto &[alternative, alternativeNote] : alternatives) {
    auto other = alternative->smallestPlanBelow(smallest->plannedPeakBytes);
    if (!other)
      return other.takeError();
    if (*other) {
      smallest = std::move(**other);
      note = ", " + alternativeNote;
    }
    auto otherOwn =
        alternative->smallestPlanOfBelow(strategy, own->plannedPeakBytes);
    if (!otherOwn)
      return otherOwn.takeError();
    if (*otherOwn)
      own = std::move(**otherOwn);
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
  auto attentionChoice = parseChunkAttention(chunkAttention_);
  if (!attentionChoice)
    return attentionChoice.takeError();
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
  solver.setNestedPlans(nested_);
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

  // The step with its loss head chunked, its attention cores chunked, or
  // both, are further pools of plans (Note [Chunked loss head], Note
  // [Chunked attention core]); the pick is the fastest predicted plan that
  // fits, of any, so budgets stay monotone (Note [Monotone budgets]).
  using Mode = ChunkLossSetting::Mode;
  ChunkLossSetting off{Mode::Off, 0};
  std::string headWhyNot, attentionWhyNot;
  struct Pool {
    Solver *solver = nullptr;
    std::unique_ptr<ChunkedStep> step;
    bool loss = false, attention = false;
  };
  std::vector<Pool> pools;
  // The chunked copies asked for, built on threads (each reads the step
  // and writes only its copy), then taken in this order.
  struct Build {
    bool loss = false, attention = false;
    std::string lossWhy, attentionWhy;
    std::optional<llvm::Expected<std::unique_ptr<ChunkedStep>>> step;
  };
  std::vector<Build> builds;
  for (bool loss : {false, true})
    for (bool attention : {false, true}) {
      // A Fixed setting is applied in every pool; auto only with a budget.
      if ((loss && chunkSetting->mode == Mode::Off) ||
          (!loss && chunkSetting->mode == Mode::Fixed) ||
          (attention && attentionChoice->mode == Mode::Off) ||
          (!attention && attentionChoice->mode == Mode::Fixed))
        continue;
      if (!loss && !attention) {
        builds.push_back({false, false, "", "", std::nullopt});
        continue;
      }
      if ((loss && chunkSetting->mode == Mode::Auto && !budget) ||
          (attention && attentionChoice->mode == Mode::Auto && !budget))
        continue;
      builds.push_back({loss, attention, "", "", std::nullopt});
    }
  forEachOnThreads(builds.size(), [&](size_t i) {
    Build &build = builds[i];
    if (!build.loss && !build.attention)
      return;
    build.step.emplace(prepareChunkedStep(
        graph, build.loss ? *chunkSetting : off,
        build.attention ? *attentionChoice : off, costProfile_, boundaries,
        build.lossWhy, build.attentionWhy));
  });
  llvm::Error buildError = llvm::Error::success();
  for (Build &build : builds) {
    if (!build.step) {
      if (!buildError)
        pools.push_back({&solver, nullptr, false, false});
      continue;
    }
    auto &step = *build.step;
    if (!step || buildError) {
      // The first error in the order above is the pass's.
      llvm::Error err = step ? llvm::Error::success() : step.takeError();
      if (!buildError)
        buildError = std::move(err);
      else
        llvm::consumeError(std::move(err));
      continue;
    }
    if (build.loss && !build.lossWhy.empty())
      headWhyNot = build.lossWhy;
    if (build.attention && !build.attentionWhy.empty())
      attentionWhyNot = build.attentionWhy;
    if (!*step)
      continue;
    Solver *stepSolver = (*step)->problem->solver.get();
    stepSolver->setNestedPlans(nested_);
    pools.push_back(
        {stepSolver, std::move(*step), build.loss, build.attention});
  }
  if (buildError)
    return std::move(buildError);
  // Each pool's solver works on its own graph (the step, or its chunked
  // copy), so the pools are solved on threads; the results are read in
  // the pools' order, as one after another would give them.
  std::vector<std::optional<llvm::Expected<std::optional<PlanResult>>>>
      solved(pools.size());
  forEachOnThreads(pools.size(), [&](size_t i) {
    solved[i].emplace(pools[i].solver->solve(strategy, budget));
  });
  std::optional<PlanResult> chosen;
  const Pool *chosenPool = nullptr;
  llvm::Error firstError = llvm::Error::success();
  for (size_t i = 0; i < pools.size(); ++i) {
    const Pool &pool = pools[i];
    auto &plan = *solved[i];
    if (!plan) {
      if (!firstError)
        firstError = plan.takeError();
      else
        llvm::consumeError(plan.takeError());
      continue;
    }
    if (firstError || !*plan)
      continue;
    double seconds = pool.solver->getPredictedSeconds(**plan);
    if (chosen) {
      double best = chosenPool->solver->getPredictedSeconds(*chosen);
      if (seconds > best || (seconds == best && (*plan)->plannedPeakBytes >=
                                                    chosen->plannedPeakBytes))
        continue;
    }
    chosen = std::move(**plan);
    chosenPool = &pool;
  }
  if (firstError)
    return std::move(firstError);
  auto describePool = [](const Pool &pool) {
    std::string note;
    if (pool.loss)
      note = "loss head in " + std::to_string(pool.step->chunks) + " chunks";
    if (pool.attention)
      note += std::string(note.empty() ? "" : ", ") +
              std::to_string(pool.step->attentionCores) +
              " attention cores chunked";
    return note;
  };
  if (!chosen) {
    // The first pool is the step as it is unless a setting is Fixed.
    if (pools.empty())
      return makeError("remat: no pool of plans (chunk-loss and "
                       "chunk-attention ask for nothing that can be built)");
    std::vector<std::pair<Solver *, std::string>> alternatives;
    for (const Pool &pool : llvm::drop_begin(pools))
      alternatives.push_back({pool.solver, describePool(pool)});
    return makeInfeasibleError(*pools.front().solver, strategy, *budget,
                               budget_.str(), alternatives);
  }
  // What was chunked, or why not, for --explain and the report.
  auto findStep = [&](bool loss, bool attention) -> const ChunkedStep * {
    for (const Pool &pool : pools)
      if (pool.step && pool.loss == loss && pool.attention == attention)
        return pool.step.get();
    return nullptr;
  };
  std::string chunkNote, attentionNote;
  if (chosenPool->loss)
    chunkNote = chosenPool->step->description;
  else if (const ChunkedStep *step = findStep(true, chosenPool->attention))
    chunkNote = step->description +
                " was not needed: the whole head's plan is as fast or faster";
  else if (chunkSetting->mode == Mode::Off)
    chunkNote = "off";
  else if (budget)
    chunkNote = "the loss head is left whole: " + headWhyNot;
  auto leftWhole = [](const ChunkedStep &step) {
    return step.attentionLeftWhole.empty()
               ? std::string()
               : "; left whole: " + step.attentionLeftWhole;
  };
  if (chosenPool->attention)
    attentionNote =
        chosenPool->step->attentionDescription + leftWhole(*chosenPool->step);
  else if (const ChunkedStep *step = findStep(chosenPool->loss, true))
    attentionNote = step->attentionDescription +
                    ": not needed, the whole cores' plan is as fast or "
                    "faster" +
                    leftWhole(*step);
  else if (attentionChoice->mode == Mode::Off)
    attentionNote = "off";
  else if (budget)
    attentionNote =
        "the attention cores are left whole: " +
        (attentionWhyNot.empty() ? std::string("no plan needs them chunked")
                                 : attentionWhyNot);
  Solver &chosenSolver = *chosenPool->solver;
  report_ = chosenSolver.explainJson(*chosen, budget);
  // Without a budget auto has nothing to meet: no note.
  if (!chunkNote.empty())
    report_->try_emplace("chunk_loss", chunkNote);
  if (!attentionNote.empty())
    report_->try_emplace("chunk_attention", attentionNote);
  if (explain_) {
    std::string text =
        attentionNote.empty() ? "" : "chunk-attention: " + attentionNote + "\n";
    if (!chunkNote.empty())
      text += "chunk-loss: " + chunkNote + "\n";
    llvm::raw_string_ostream os(text);
    chosenSolver.explain(*chosen, budget, os);
    os.flush();
    emitRaw(text);
  }
  if (chosenPool->step) {
    auto stats = applyChunkedPlan(graph, *chosenPool->step, *chosen);
    if (!stats)
      return stats.takeError();
    return true;
  }
  RecomputeStats stats = solver.apply(*chosen);
  return stats.clonedNodes != 0;
}

} // namespace remat::passes
