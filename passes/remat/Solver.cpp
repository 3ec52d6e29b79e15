//===- passes/remat/Solver.cpp - Choosing what to recompute ---------------===//
#include "passes/remat/Solver.h"

#include "ir/Support.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace remat::passes::recompute {

llvm::ArrayRef<std::string> getStrategyNames() {
  // Indexed by Strategy.
  static const std::vector<std::string> names = {
      "none", "every-layer", "sqrt", "chain-dp", "selective", "auto"};
  return names;
}

llvm::StringRef getStrategyName(Strategy strategy) {
  return getStrategyNames()[size_t(strategy)];
}

std::optional<Strategy> parseStrategy(llvm::StringRef name) {
  llvm::ArrayRef<std::string> names = getStrategyNames();
  const std::string *it = llvm::find(names, name);
  if (it == names.end())
    return std::nullopt;
  return Strategy(it - names.begin());
}

bool isBudgetDriven(Strategy strategy) {
  switch (strategy) {
  case Strategy::None:
  case Strategy::EveryLayer:
  case Strategy::Sqrt:
    return false;
  case Strategy::ChainDp:
  case Strategy::Selective:
  case Strategy::Auto:
    return true;
  }
  llvm_unreachable("unknown strategy");
}

llvm::StringRef segmentOptionName(SegmentOption option) {
  switch (option) {
  case SegmentOption::Keep:
    return "keep";
  case SegmentOption::Selective:
    return "selective";
  case SegmentOption::Recompute:
    return "recompute";
  }
  llvm_unreachable("unknown segment option");
}

namespace {

uint64_t bytesOf(const ir::Value *value) {
  return uint64_t(value->getType().getByteSize());
}

constexpr unsigned kBuckets = 512;

} // namespace

Solver::Solver(ir::Graph &graph, const StashInfo &stash,
               const SegmentChain &chain, const CostProfile &profile)
    : graph_(graph), stash_(stash), chain_(chain), profile_(profile) {
  for (const ir::Value *input : graph.getInputs())
    persistentBytes_ += bytesOf(input);
  for (const ir::Node &node : graph.getNodes())
    baseSeconds_ += nodeSeconds(node, profile);

  chainSeconds_.resize(stash.stashed.size());
  backwardUses_.resize(stash.stashed.size());
  for (size_t i = 0; i < stash.stashed.size(); ++i) {
    chainSeconds_[i] = chainSeconds(stash.stashed[i]);
    for (const ir::Use &use : stash.stashed[i]->getUses())
      backwardUses_[i] += use.user->getStage() == ir::Stage::Backward;
  }

  for (const Segment &segment : chain.segments) {
    uint64_t kept = 0;
    double seconds = 0;
    for (const ir::Value *value : segment.stashed) {
      if (isCheap(value))
        seconds += chainSeconds_[stash.stashIndex.lookup(value)];
      else
        kept += bytesOf(value);
    }
    selectiveKeptBytes_.push_back(kept);
    selectiveSeconds_.push_back(seconds);
    double forward = 0;
    for (const ir::Node *node : segment.nodes)
      forward += nodeSeconds(*node, profile);
    forwardSeconds_.push_back(forward);
  }
}

llvm::Error Solver::initialize() {
  auto plan = planMemory(graph_);
  if (!plan)
    return plan.takeError();
  basePeakBytes_ = persistentBytes_ + plan->arenaBytes;
  for (const ir::Node &node : graph_.getNodes())
    position_[&node] = unsigned(position_.size());
  return llvm::Error::success();
}

double Solver::chainSeconds(const ir::Value *value) const {
  // Rebuild from what is held when only this value is dropped: inputs,
  // constants (read as they are or copied: free), other stashed values and
  // outputs; forward temporaries on the way are rebuilt too, each once.
  llvm::DenseSet<const ir::Node *> visited;
  llvm::SmallVector<const ir::Node *, 8> work{value->getDefiningNode()};
  double seconds = 0;
  while (!work.empty()) {
    const ir::Node *node = work.pop_back_val();
    if (!visited.insert(node).second)
      continue;
    seconds += nodeSeconds(*node, profile_);
    for (const ir::Value *operand : node->getOperands()) {
      if (operand->isGraphInput() || operand->isGraphOutput() ||
          stash_.isStashed(operand))
        continue;
      const ir::Node *def = operand->getDefiningNode();
      if (def->getOp() == ir::OpKind::Constant)
        continue;
      work.push_back(def);
    }
  }
  return seconds;
}

bool Solver::isCheap(const ir::Value *value) const {
  double passSeconds = double(bytesOf(value)) / profile_.bytesPerSecond;
  double seconds = chainSeconds_[stash_.stashIndex.lookup(value)];
  return seconds <= kCheapPasses * std::max(passSeconds, 1e-9);
}

std::vector<SegmentChoice> Solver::fixedPlan(Strategy strategy) const {
  size_t n = chain_.segments.size();
  std::vector<SegmentChoice> choices(n);
  auto group = [&](size_t begin, size_t end) {
    for (size_t s = begin; s < end && s < n; ++s)
      choices[s] = {SegmentOption::Recompute, unsigned(begin)};
  };
  if (strategy == Strategy::EveryLayer) {
    for (const LayerStack &stack : chain_.stacks)
      for (unsigned layer = 0; layer < stack.numLayers; ++layer) {
        size_t begin = stack.firstSegment + layer * stack.period;
        group(begin, begin + stack.period);
      }
  } else if (strategy == Strategy::Sqrt) {
    if (chain_.numLayers >= 2) {
      for (const LayerStack &stack : chain_.stacks) {
        unsigned k = unsigned(std::ceil(std::sqrt(double(stack.numLayers))));
        for (unsigned layer = 0; layer < stack.numLayers; layer += k) {
          size_t begin = stack.firstSegment + layer * stack.period;
          size_t layers = std::min(k, stack.numLayers - layer);
          group(begin, begin + layers * stack.period);
        }
      }
    } else {
      size_t k = size_t(std::ceil(std::sqrt(double(n))));
      for (size_t begin = 0; begin < n; begin += k)
        group(begin, begin + k);
    }
  }
  return choices;
}

PlanResult Solver::evaluate(llvm::StringRef strategy,
                            std::vector<SegmentChoice> choices,
                            const std::vector<std::string> *drop,
                            bool estimate, bool perUse) {
  PlanResult result = describe(strategy, std::move(choices), drop, perUse);
  measure(result, estimate);
  return result;
}

PlanResult Solver::describe(llvm::StringRef strategy,
                            std::vector<SegmentChoice> choices,
                            const std::vector<std::string> *drop,
                            bool perUse) const {
  PlanResult result;
  result.strategy = strategy.str();
  result.perUse = perUse;
  result.choices = std::move(choices);
  if (drop) {
    result.dropNames = *drop;
  } else {
    for (size_t s = 0; s < chain_.segments.size(); ++s) {
      const Segment &segment = chain_.segments[s];
      SegmentChoice choice = result.choices[s];
      if (choice.option == SegmentOption::Keep)
        continue;
      for (const ir::Value *value : segment.stashed)
        if (choice.option == SegmentOption::Recompute || isCheap(value))
          result.dropNames.push_back(value->getName().str());
      if (choice.option == SegmentOption::Recompute &&
          choice.groupStart == s && segment.input)
        result.keepNames.push_back(segment.input->getName().str());
      if (choice.option == SegmentOption::Recompute && choice.nested &&
          choice.groupStart != s && segment.input)
        result.nestedNames.push_back(segment.input->getName().str());
    }
    // Side inputs are held for every segment that reads them (Note [Side
    // inputs]), so that recompute never rebuilds them.
    if (!result.dropNames.empty())
      for (const ir::Value *value : chain_.sideInputs)
        result.keepNames.push_back(value->getName().str());
  }
  result.keptStashBytes = keptStashBytes(result);
  return result;
}

uint64_t Solver::keptStashBytes(const PlanResult &plan) const {
  llvm::StringSet<> dropped;
  for (const std::string &name : plan.dropNames)
    dropped.insert(name);
  for (const std::string &name : plan.keepNames)
    dropped.erase(name);
  uint64_t bytes = 0;
  for (const ir::Value *value : stash_.stashed)
    if (!dropped.count(value->getName()))
      bytes += bytesOf(value);
  for (const std::string &name : plan.keepNames)
    if (!stash_.isStashed(graph_.lookup(name)))
      bytes += bytesOf(graph_.lookup(name));
  return bytes;
}

bool Solver::searchesWide() const {
  return graph_.getNodes().size() <= kWideSearchNodes;
}

void Solver::measure(PlanResult &plan, bool estimate) {
  if (estimate) {
    ensureEstimate(plan);
    return;
  }
  plan.stats = predictRecomputeStats(graph_, toRewrite(plan), profile_,
                                     plan.perUse ? perUseCloneLimit()
                                                 : UINT_MAX);
}

/// \returns what identifies \p plan's rewrite: one pool member each.
static std::string rewriteKey(const PlanResult &plan) {
  std::string key = llvm::join(plan.dropNames, ",") + "|" +
                    llvm::join(plan.keepNames, ",") + "|" +
                    llvm::join(plan.nestedNames, ",") +
                    (plan.perUse ? "|per-use|" + llvm::join(plan.onceNames, ",")
                                 : "");
  for (const auto &[value, through] : plan.heldThroughNames)
    key += "|held " + value + " through " + through;
  return key;
}

/// rewriteKey with each list in name order: one key for the plans that the
/// local moves reach in different orders (addLocalPlans).
static std::string localKey(const PlanResult &plan) {
  PlanResult sorted;
  sorted.dropNames = plan.dropNames;
  sorted.keepNames = plan.keepNames;
  sorted.nestedNames = plan.nestedNames;
  sorted.onceNames = plan.onceNames;
  sorted.perUse = plan.perUse;
  sorted.heldThroughNames = plan.heldThroughNames;
  llvm::sort(sorted.heldThroughNames);
  for (std::vector<std::string> *names :
       {&sorted.dropNames, &sorted.keepNames, &sorted.nestedNames,
        &sorted.onceNames})
    llvm::sort(*names);
  return rewriteKey(sorted);
}

void Solver::ensureEstimate(PlanResult &plan) {
  if (plan.estimated)
    return;
  // Measure on the graph itself, then put it back: cheaper than a copy.
  RecomputeUndo undo;
  RecomputeStats stats =
      applyRecomputePlan(graph_, toRewrite(plan), profile_, &undo);
  auto lowerBound = lowerBoundArenaBytes(graph_);
  undoRecomputePlan(graph_, undo);
  assert((plan.stats.clonedNodes == 0 ||
          (plan.stats.clonedNames == stats.clonedNames &&
           plan.stats.recomputeSeconds == stats.recomputeSeconds)) &&
         "predictRecomputeStats differs from the rewrite");
  plan.stats = std::move(stats);
  // An arena past 2^62 bytes: rank it last; planning it reports the error.
  plan.boundedEstimate = bool(lowerBound);
  plan.estimatedPeakBytes =
      persistentBytes_ +
      (lowerBound
           ? *lowerBound
           : (llvm::consumeError(lowerBound.takeError()), UINT64_MAX / 2));
  plan.estimated = true;
}

RecomputePlan Solver::toRewrite(const PlanResult &plan) const {
  return toRecomputePlan(graph_, plan);
}

RecomputePlan toRecomputePlan(const ir::Graph &graph, const PlanResult &plan) {
  RecomputePlan rewrite;
  for (const std::string &name : plan.dropNames)
    rewrite.drop.insert(graph.lookup(name));
  for (const std::string &name : plan.keepNames)
    rewrite.keep.insert(graph.lookup(name));
  for (const std::string &name : plan.nestedNames)
    rewrite.innerBoundaries.insert(graph.lookup(name));
  rewrite.rebuildPerUse = plan.perUse;
  for (const std::string &name : plan.onceNames)
    rewrite.rebuildOnce.insert(graph.lookup(name));
  for (const auto &[value, through] : plan.heldThroughNames)
    rewrite.heldThrough[graph.lookup(value)] =
        graph.lookup(through)->getDefiningNode();
  return rewrite;
}

llvm::Error Solver::planExactly(PlanResult &plan) {
  if (plan.plannedPeakBytes)
    return llvm::Error::success();
  RecomputeUndo undo;
  applyRecomputePlan(graph_, toRewrite(plan), profile_, &undo);
  auto memoryPlan = planMemory(graph_);
  undoRecomputePlan(graph_, undo);
  if (!memoryPlan)
    return memoryPlan.takeError();
  plan.plannedPeakBytes = persistentBytes_ + memoryPlan->arenaBytes;
  return llvm::Error::success();
}

uint64_t Solver::dpTemporaries() const {
  uint64_t totalStash = 0;
  for (const Segment &segment : chain_.segments)
    totalStash += segment.stashedBytes;
  uint64_t baseArena = basePeakBytes_ - persistentBytes_;
  return baseArena > totalStash ? baseArena - totalStash : 0;
}

Solver::DpPlans Solver::runDp(uint64_t arenaBudget, bool allowSelective) const {
  size_t n = chain_.segments.size();
  uint64_t temporaries = dpTemporaries();
  if (temporaries >= arenaBudget)
    return {};
  uint64_t quantum = std::max<uint64_t>(1, arenaBudget / kBuckets);
  auto buckets = [&](uint64_t bytes) {
    return size_t((bytes + quantum - 1) / quantum);
  };
  size_t limit = buckets(arenaBudget - temporaries); // kept bytes allowed
  size_t width = limit + 1;
  size_t maxGroup = std::max<size_t>(
      16, chain_.period ? size_t(4) * chain_.period : size_t(16));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s * width + b]: least seconds for segments < s holding b buckets.
  std::vector<double> best((n + 1) * width, kInf);
  struct Step {
    SegmentOption option = SegmentOption::Keep;
    uint32_t from = 0; // segment index the step started at
    uint32_t prevBucket = 0;
  };
  std::vector<Step> how((n + 1) * width);
  best[0] = 0;
  auto relax = [&](size_t to, size_t bucket, double seconds, Step step) {
    if (bucket > limit || seconds >= best[to * width + bucket])
      return;
    best[to * width + bucket] = seconds;
    how[to * width + bucket] = step;
  };
  // Per group s..t: the bytes it rebuilds and its forward seconds, summed
  // from s as the relaxation order reads them.
  std::vector<uint64_t> groupRebuilt;
  std::vector<double> groupSeconds;
  for (size_t s = 0; s < n; ++s) {
    const Segment &segment = chain_.segments[s];
    uint64_t checkpoint = segment.input ? bytesOf(segment.input) : 0;
    size_t keepBuckets = buckets(segment.stashedBytes);
    size_t selectiveBuckets = buckets(selectiveKeptBytes_[s]);
    size_t checkpointBuckets = buckets(checkpoint);
    bool selectiveHelps =
        allowSelective && selectiveKeptBytes_[s] < segment.stashedBytes;
    groupRebuilt.clear();
    groupSeconds.clear();
    uint64_t rebuilt = 0;
    double seconds = 0;
    for (size_t t = s; t < n && t < s + maxGroup; ++t) {
      rebuilt += chain_.segments[t].stashedBytes;
      seconds += forwardSeconds_[t];
      groupRebuilt.push_back(rebuilt);
      groupSeconds.push_back(seconds);
    }
    for (size_t b = 0; b <= limit; ++b) {
      double before = best[s * width + b];
      if (before == kInf)
        continue;
      uint64_t held = uint64_t(b) * quantum;
      // Its own backward rebuilds (or holds) its whole stash.
      bool fitsOwn = held + segment.stashedBytes + temporaries <= arenaBudget;
      if (fitsOwn) {
        relax(s + 1, b + keepBuckets, before,
              {SegmentOption::Keep, uint32_t(s), uint32_t(b)});
        if (selectiveHelps)
          relax(s + 1, b + selectiveBuckets, before + selectiveSeconds_[s],
                {SegmentOption::Selective, uint32_t(s), uint32_t(b)});
      }
      for (size_t g = 0; g < groupRebuilt.size(); ++g) {
        if (held + checkpoint + groupRebuilt[g] + temporaries > arenaBudget)
          break;
        relax(s + 1 + g, b + checkpointBuckets, before + groupSeconds[g],
              {SegmentOption::Recompute, uint32_t(s), uint32_t(b)});
      }
    }
  }
  // The least seconds at the end, and the fewest buckets held (least
  // seconds among those: the first finite entry).
  const double *last = &best[n * width];
  size_t leastTime = width, leastHeld = width;
  for (size_t b = 0; b <= limit; ++b) {
    if (last[b] == kInf)
      continue;
    if (leastHeld == width)
      leastHeld = b;
    if (leastTime == width || last[b] < last[leastTime])
      leastTime = b;
  }
  auto trace = [&](size_t bucket) -> std::optional<std::vector<SegmentChoice>> {
    if (bucket == width)
      return std::nullopt;
    std::vector<SegmentChoice> choices(n);
    size_t at = n;
    while (at > 0) {
      Step step = how[at * width + bucket];
      for (size_t s = step.from; s < at; ++s)
        choices[s] = {step.option, step.from};
      at = step.from;
      bucket = step.prevBucket;
    }
    return choices;
  };
  return {trace(leastTime), trace(leastHeld)};
}

std::vector<PlanResult> &Solver::getPool() {
  if (poolBuilt_)
    return pool_;
  poolBuilt_ = true;
  llvm::StringSet<> seen;
  // The flat plans' choices, each once, for their nested variants: two
  // choices can give one flat rewrite (a segment selective, or rebuilt
  // with its group, when all it stashes is cheap) and different nested
  // ones.
  std::vector<std::pair<std::string, std::vector<SegmentChoice>>> flat;
  std::set<std::vector<std::pair<unsigned, unsigned>>> flatSeen;
  bool collectFlat = nestedPlansAllowed_ && searchesWide();
  auto add = [&](PlanResult plan) {
    if (collectFlat) {
      std::vector<std::pair<unsigned, unsigned>> key;
      for (const SegmentChoice &choice : plan.choices)
        key.push_back({unsigned(choice.option), choice.groupStart});
      if (flatSeen.insert(std::move(key)).second)
        flat.push_back({plan.strategy, plan.choices});
    }
    // One member per distinct rewrite.
    if (!seen.insert(rewriteKey(plan)).second)
      return;
    pool_.push_back(std::move(plan));
  };
  for (Strategy fixed : {Strategy::None, Strategy::EveryLayer, Strategy::Sqrt})
    add(evaluate(getStrategyName(fixed), fixedPlan(fixed)));
  for (auto &[name, choices] : compactPlans())
    add(evaluate(name, choices));

  // Selective: the cheapest-per-byte prefixes of the cheap stashed values.
  std::vector<const ir::Value *> cheap;
  for (const ir::Value *value : stash_.stashed)
    if (isCheap(value))
      cheap.push_back(value);
  llvm::stable_sort(cheap, [&](const ir::Value *a, const ir::Value *b) {
    double ca = chainSeconds_[stash_.stashIndex.lookup(a)] / double(bytesOf(a));
    double cb = chainSeconds_[stash_.stashIndex.lookup(b)] / double(bytesOf(b));
    return ca < cb;
  });
  std::vector<SegmentChoice> keepAll(chain_.segments.size());
  for (unsigned step = 1; step <= kLadderSteps; ++step) {
    size_t k = (cheap.size() * step + kLadderSteps - 1) / kLadderSteps;
    std::vector<std::string> names;
    llvm::DenseSet<unsigned> segments;
    for (size_t i = 0; i < k; ++i) {
      names.push_back(cheap[i]->getName().str());
      segments.insert(chain_.segmentOf.lookup(cheap[i]->getDefiningNode()));
    }
    std::vector<SegmentChoice> choices = keepAll;
    for (unsigned s : segments)
      choices[s] = {SegmentOption::Selective, s};
    add(evaluate("selective", std::move(choices), &names));
  }

  // The chain DP on a ladder of budgets from the smallest estimated peak so
  // far up to no remat, plus each fixed plan's peak: at each rung the plan
  // of least predicted time and the one that holds the least, with and
  // without selective segments. A DP plan over its level gets one retry
  // with the level lowered by the overshoot. A small graph searches wider
  // (searchesWide): rungs below the fixed plans too, and up to
  // kLevelAttempts runs per rung, correcting the level both ways.
  uint64_t low = basePeakBytes_, high = basePeakBytes_;
  std::vector<uint64_t> levels;
  for (const PlanResult &plan : pool_) {
    low = std::min(low, plan.estimatedPeakBytes);
    levels.push_back(plan.estimatedPeakBytes);
  }
  for (unsigned step = 0; step < kLadderSteps; ++step)
    levels.push_back(low + (high - low) * step / kLadderSteps);
  // And below the fixed plans, down to what the DP's model can plan at all:
  // the fixed plans need not be near the smallest peaks (a graph whose
  // largest stash is not in a layer).
  uint64_t dpFloor = persistentBytes_ + dpTemporaries() + 1;
  if (dpFloor < low && searchesWide())
    for (unsigned step = 0; step < kLadderSteps; ++step)
      levels.push_back(dpFloor + (low - dpFloor) * step / kLadderSteps);
  llvm::sort(levels);
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  // Each distinct plan's estimated peak: neighbouring rungs and the four
  // DP variants often give the same plan, which is rewritten once. A repeat
  // still takes its retry, so every variant runs as it would alone and the
  // pool holds at least what the least-time runs give by themselves.
  std::map<std::vector<std::pair<unsigned, unsigned>>, uint64_t> estimates;
  std::map<std::pair<uint64_t, bool>, DpPlans> dpRuns;
  unsigned attempts = searchesWide() ? kLevelAttempts : 2;
  for (uint64_t level : levels) {
    if (level <= persistentBytes_)
      continue;
    for (auto [leastHeld, selective] :
         {std::pair{false, false}, std::pair{false, true},
          std::pair{true, false}, std::pair{true, true}}) {
      uint64_t arena = level - persistentBytes_;
      for (unsigned attempt = 0; attempt < attempts; ++attempt) {
        // Both variants come from one table: run it once per level.
        auto [cached, isNewRun] = dpRuns.try_emplace({arena, selective});
        if (isNewRun)
          cached->second = runDp(arena, selective);
        const auto &choices =
            leastHeld ? cached->second.leastHeld : cached->second.leastTime;
        if (!choices)
          break;
        std::vector<std::pair<unsigned, unsigned>> key;
        for (const SegmentChoice &choice : *choices)
          key.push_back({unsigned(choice.option), choice.groupStart});
        auto [known, isNew] = estimates.try_emplace(std::move(key), 0);
        if (isNew) {
          PlanResult plan =
              evaluate(selective ? "chain-dp+selective" : "chain-dp", *choices);
          known->second = plan.estimatedPeakBytes;
          add(std::move(plan));
        }
        uint64_t estimate = known->second;
        if (estimate > level) {
          if (estimate - level >= arena)
            break;
          arena -= estimate - level;
          continue;
        }
        // Under the level by more than the rounding: the DP's model was
        // pessimistic here, and a plan that holds more may still fit.
        uint64_t slack = level - estimate;
        if (!searchesWide() || slack <= level / kLevelSlack)
          break;
        arena += slack;
      }
    }
  }
  // In a small graph, every plan that drops one or two stashed values and
  // holds the rest, each rebuilt once. The selective prefixes drop the
  // cheapest values first, and a DP segment drops all its cheap values or
  // all it stashes; the fastest fit just under a budget is often one or two
  // values of any cost in segments apart. After the ladder, whose rungs
  // they would multiply; like the nested plans', their estimates wait until
  // a decision reads them.
  if (searchesWide() && stash_.stashed.size() <= kDropFewStashed)
    for (size_t a = 0; a < stash_.stashed.size(); ++a)
      for (size_t b = a; b < stash_.stashed.size(); ++b) {
        std::vector<std::string> names;
        std::vector<SegmentChoice> choices = keepAll;
        for (size_t i : a == b ? std::vector<size_t>{a}
                               : std::vector<size_t>{a, b}) {
          const ir::Value *value = stash_.stashed[i];
          names.push_back(value->getName().str());
          unsigned s = chain_.segmentOf.lookup(value->getDefiningNode());
          choices[s] = {SegmentOption::Selective, s};
        }
        add(evaluate("drop-few", std::move(choices), &names,
                     /*estimate=*/false));
      }

  // Every plan so far with its groups cut again inside (Note [Nested
  // recompute]), unless the caller cannot run them. No decision above reads
  // their estimates: they are made when the order or a budget first reads
  // them (ensureEstimate), and the recompute time that orders the pool comes
  // from a dry run of the rewrite.
  if (!collectFlat && nestedPlansAllowed_)
    for (const PlanResult &plan : pool_)
      flat.push_back({plan.strategy, plan.choices});
  collectFlat = false;
  for (auto &[name, choices] : nestedPlans(flat)) {
    PlanResult plan = describe(name, std::move(choices));
    if (seen.contains(rewriteKey(plan)))
      continue;
    measure(plan, /*estimate=*/false);
    add(std::move(plan));
  }
  if (nestedPlansAllowed_ && perUsePlansAllowed_)
    addPerUsePlans(add);
  for (size_t i = 0; i < pool_.size(); ++i)
    pool_[i].poolIndex = unsigned(i);
  basePoolSize_ = pool_.size();
  sortPool();
  return pool_;
}

std::vector<PlanResult> &Solver::getAutoPool() {
  getPool();
  if (!localPlansAdded_) {
    localPlansAdded_ = true;
    if (localPlansAllowed_ && searchesWide() &&
        stash_.stashed.size() <= kDropFewStashed) {
      addLocalPlans();
      sortPool();
    }
  }
  return pool_;
}

void Solver::sortPool() {
  // Note [Monotone budgets]: one fixed order, independent of the budget:
  // least recompute time, then least estimated peak, then pool order. The
  // estimate breaks ties only: members of equal time are estimated first.
  std::map<double, std::vector<size_t>> byTime;
  for (size_t i = 0; i < pool_.size(); ++i)
    byTime[pool_[i].stats.recomputeSeconds].push_back(i);
  for (const auto &[seconds, members] : byTime)
    if (members.size() > 1)
      for (size_t i : members)
        ensureEstimate(pool_[i]);
  llvm::stable_sort(pool_, [](const PlanResult &a, const PlanResult &b) {
    if (a.stats.recomputeSeconds != b.stats.recomputeSeconds)
      return a.stats.recomputeSeconds < b.stats.recomputeSeconds;
    if (a.estimatedPeakBytes != b.estimatedPeakBytes)
      return a.estimatedPeakBytes < b.estimatedPeakBytes;
    return a.poolIndex < b.poolIndex;
  });
}

void Solver::addLocalPlans() {
  // Note [Local plans].
  llvm::StringSet<> seen;
  for (const PlanResult &plan : pool_)
    seen.insert(localKey(plan));
  unsigned fresh = 0; // the members the last round added from this index
  for (unsigned round = 0; round < kLocalRounds; ++round) {
    // In the pool's order, with every member estimated; walking it, the
    // front is each member whose estimated peak is below all before it.
    for (PlanResult &plan : pool_)
      ensureEstimate(plan);
    sortPool();
    std::vector<PlanResult> added;
    uint64_t least = UINT64_MAX;
    for (const PlanResult &member : pool_) {
      if (member.estimatedPeakBytes >= least)
        continue;
      least = member.estimatedPeakBytes;
      // A member an earlier round expanded gives only plans seen already.
      if (member.poolIndex < fresh)
        continue;
      for (PlanResult &plan : localPlansAround(member))
        if (seen.insert(localKey(plan)).second) {
          measure(plan, /*estimate=*/false);
          if (!plan.stats.overLimit)
            added.push_back(std::move(plan));
        }
    }
    if (added.empty())
      break;
    fresh = unsigned(pool_.size());
    for (PlanResult &plan : added) {
      plan.poolIndex = unsigned(pool_.size());
      pool_.push_back(std::move(plan));
    }
  }
}

bool Solver::isRebuiltFrom(const ir::Value *value, llvm::StringRef source,
                           const PlanResult &plan, bool direct) const {
  // Backward from value's node through the forward values a rebuild
  // recomputes, stopping at what the plan holds (direct: at every stashed
  // value, and false at a dropped one).
  llvm::SmallVector<const ir::Value *, 8> work(
      value->getDefiningNode()->getOperands().begin(),
      value->getDefiningNode()->getOperands().end());
  llvm::DenseSet<const ir::Value *> seen;
  while (!work.empty()) {
    const ir::Value *operand = work.pop_back_val();
    if (!seen.insert(operand).second)
      continue;
    if (operand->getName() == source)
      return true;
    if (operand->isGraphInput())
      continue;
    const ir::Node *def = operand->getDefiningNode();
    if (def->getStage() != ir::Stage::Forward ||
        def->getOp() == ir::OpKind::Constant ||
        llvm::is_contained(plan.keepNames, operand->getName()))
      continue;
    if (stash_.isStashed(operand)) {
      bool dropped = llvm::is_contained(plan.dropNames, operand->getName());
      if (direct && dropped)
        return false;
      if (direct || !dropped)
        continue;
    }
    work.append(def->getOperands().begin(), def->getOperands().end());
  }
  return false;
}

bool Solver::isReadOnlyUpTo(const ir::Value *value,
                            const ir::Node *last) const {
  bool read = false;
  for (const ir::Use &use : value->getUses())
    if (use.user->getStage() == ir::Stage::Backward) {
      if (position_.lookup(use.user) > position_.lookup(last))
        return false;
      read = true;
    }
  return read;
}

std::vector<PlanResult> Solver::localPlansAround(const PlanResult &base) const {
  // Boundaries the plan holds or cuts again at stay as they are.
  auto isBoundary = [&](const std::string &name) {
    return llvm::is_contained(base.keepNames, name) ||
           llvm::is_contained(base.nestedNames, name);
  };
  auto make = [&](std::vector<std::string> drop, std::vector<std::string> once,
                  std::vector<SegmentChoice> choices) {
    PlanResult plan = base;
    // Named for the member it comes from: "per-use+local".
    if (!llvm::StringRef(base.strategy).endswith("+local"))
      plan.strategy += "+local";
    plan.dropNames = std::move(drop);
    plan.onceNames = std::move(once);
    plan.choices = std::move(choices);
    plan.estimated = false;
    plan.estimatedPeakBytes = plan.plannedPeakBytes = 0;
    plan.keptStashBytes = keptStashBytes(plan);
    return plan;
  };
  std::vector<PlanResult> plans;
  // One dropped value held instead (faster, a larger peak)...
  for (const std::string &name : base.dropNames) {
    if (isBoundary(name))
      continue;
    std::vector<std::string> drop, once;
    for (const std::string &other : base.dropNames)
      if (other != name)
        drop.push_back(other);
    for (const std::string &other : base.onceNames)
      if (other != name)
        once.push_back(other);
    plans.push_back(make(std::move(drop), std::move(once), base.choices));
  }
  // ...or one held stashed value dropped (slower, a smaller peak), its
  // segment then selective if it was kept whole.
  for (const ir::Value *value : stash_.stashed) {
    std::string name = value->getName().str();
    if (isBoundary(name) || llvm::is_contained(base.dropNames, name))
      continue;
    std::vector<std::string> drop = base.dropNames;
    drop.push_back(name);
    std::vector<SegmentChoice> choices = base.choices;
    unsigned s = chain_.segmentOf.lookup(value->getDefiningNode());
    if (choices[s].option == SegmentOption::Keep)
      choices[s] = {SegmentOption::Selective, s};
    plans.push_back(make(std::move(drop), base.onceNames, std::move(choices)));
  }
  // A held boundary dropped: what its groups rebuild then starts further
  // back, from what is still held (slower, a smaller peak).
  for (const std::string &name : base.keepNames) {
    const ir::Value *value = graph_.lookup(name);
    if (llvm::is_contained(chain_.sideInputs, value))
      continue;
    std::vector<std::string> drop = base.dropNames;
    if (stash_.isStashed(value) && !llvm::is_contained(drop, name))
      drop.push_back(name);
    PlanResult plan = make(std::move(drop), base.onceNames, base.choices);
    llvm::erase_value(plan.keepNames, name);
    plan.keptStashBytes = keptStashBytes(plan);
    plans.push_back(std::move(plan));
  }
  // One dropped value made an inner boundary, or one inner boundary no
  // longer cut: the values on its way are rebuilt in a pass of their own
  // and again when backward needs them, or held from one rebuild. Not
  // where the caller cannot run nested plans (setNestedPlans).
  for (const std::string &name : base.dropNames) {
    if (!nestedPlansAllowed_ || isBoundary(name))
      continue;
    PlanResult plan = make(base.dropNames, base.onceNames, base.choices);
    plan.nestedNames.push_back(name);
    plans.push_back(std::move(plan));
  }
  for (const std::string &name : base.nestedNames) {
    PlanResult plan = make(base.dropNames, base.onceNames, base.choices);
    llvm::erase_value(plan.nestedNames, name);
    plans.push_back(std::move(plan));
  }
  // In a plan rebuilt per use, one dropped value rebuilt once instead, or
  // one such value rebuilt per use again.
  if (base.perUse) {
    for (const std::string &name : base.dropNames) {
      if (isBoundary(name) || llvm::is_contained(base.onceNames, name))
        continue;
      std::vector<std::string> once = base.onceNames;
      once.push_back(name);
      plans.push_back(make(base.dropNames, std::move(once), base.choices));
    }
    for (const std::string &name : base.onceNames) {
      std::vector<std::string> once = base.onceNames;
      llvm::erase_value(once, name);
      plans.push_back(make(base.dropNames, std::move(once), base.choices));
    }
  }
  // One dropped value held from forward through one of its backward
  // readers but the last, and rebuilt only for the later ones (Note [Held
  // part of backward]), or such a value dropped for all of backward again.
  // Not where the caller cannot run nested plans: the saved set would
  // differ between backward nodes.
  if (nestedPlansAllowed_) {
    for (const std::string &name : base.dropNames) {
      if (isBoundary(name) ||
          llvm::any_of(base.heldThroughNames,
                       [&](const auto &held) { return held.first == name; }))
        continue;
      std::vector<const ir::Node *> readers;
      for (const ir::Use &use : graph_.lookup(name)->getUses())
        if (use.user->getStage() == ir::Stage::Backward &&
            !llvm::is_contained(readers, use.user))
          readers.push_back(use.user);
      llvm::sort(readers, [&](const ir::Node *a, const ir::Node *b) {
        return position_.lookup(a) < position_.lookup(b);
      });
      for (size_t i = 0; i + 1 < readers.size(); ++i) {
        PlanResult plan = make(base.dropNames, base.onceNames, base.choices);
        plan.heldThroughNames.emplace_back(
            name, readers[i]->getResult(0)->getName().str());
        // The same with one held stashed value that is computed from it
        // alone and read only up to that reader dropped and rebuilt once,
        // from the held value, with the dropped values rebuilt from it
        // there rebuilt once too.
        for (const ir::Value *value : stash_.stashed) {
          std::string other = value->getName().str();
          if (other == name || isBoundary(other) ||
              llvm::is_contained(plan.dropNames, other) ||
              !isReadOnlyUpTo(value, readers[i]) ||
              !isRebuiltFrom(value, name, plan, /*direct=*/true))
            continue;
          PlanResult window = plan;
          window.dropNames.push_back(other);
          unsigned s = chain_.segmentOf.lookup(value->getDefiningNode());
          if (window.choices[s].option == SegmentOption::Keep)
            window.choices[s] = {SegmentOption::Selective, s};
          if (window.perUse) {
            window.onceNames.push_back(other);
            for (const std::string &dropped : plan.dropNames) {
              const ir::Value *later = graph_.lookup(dropped);
              if (!llvm::is_contained(plan.onceNames, dropped) &&
                  !isBoundary(dropped) && isReadOnlyUpTo(later, readers[i]) &&
                  isRebuiltFrom(later, other, window, /*direct=*/false))
                window.onceNames.push_back(dropped);
            }
          }
          window.keptStashBytes = keptStashBytes(window);
          plans.push_back(std::move(window));
        }
        plans.push_back(std::move(plan));
      }
    }
    for (size_t i = 0; i < base.heldThroughNames.size(); ++i) {
      PlanResult plan = make(base.dropNames, base.onceNames, base.choices);
      plan.heldThroughNames.erase(plan.heldThroughNames.begin() + i);
      plans.push_back(std::move(plan));
    }
  }
  // A value the move held again, or made a boundary, is no longer held
  // through part of backward.
  for (PlanResult &plan : plans)
    llvm::erase_if(plan.heldThroughNames, [&](const auto &held) {
      return !llvm::is_contained(plan.dropNames, held.first) ||
             llvm::is_contained(plan.keepNames, held.first) ||
             llvm::is_contained(plan.nestedNames, held.first);
    });
  return plans;
}

/// \returns true if a plan of \p strategy may come from the pool member
/// \p plan.
static bool belongsTo(Strategy strategy, const PlanResult &plan) {
  if (strategy == Strategy::Auto || plan.strategy == "none")
    return true;
  return plan.strategy == getStrategyName(strategy);
}

llvm::Expected<std::optional<PlanResult>>
Solver::solve(Strategy strategy, std::optional<uint64_t> budgetBytes) {
  assert(basePeakBytes_ != 0 && "initialize() first");
  if (!isBudgetDriven(strategy)) {
    PlanResult result = evaluate(getStrategyName(strategy), fixedPlan(strategy));
    if (auto err = planExactly(result))
      return std::move(err);
    if (budgetBytes && result.plannedPeakBytes > *budgetBytes)
      return std::nullopt;
    return std::optional<PlanResult>(std::move(result));
  }
  assert(budgetBytes && "budget-driven strategies need a budget");
  // The first member, in the pool's fixed order, whose planned peak fits.
  // The estimate is a lower bound of the planned peak (live bytes with the
  // same in-place sharing), so members over the budget by it are skipped
  // without planning them.
  for (PlanResult &plan :
       strategy == Strategy::Auto ? getAutoPool() : getPool()) {
    if (!belongsTo(strategy, plan))
      continue;
    ensureEstimate(plan);
    if (plan.estimatedPeakBytes > *budgetBytes)
      continue;
    if (auto err = planExactly(plan))
      return std::move(err);
    if (plan.plannedPeakBytes <= *budgetBytes)
      return std::optional<PlanResult>(plan);
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::vector<SegmentChoice>>>
Solver::compactPlans() const {
  size_t n = chain_.segments.size();
  std::vector<std::pair<std::string, std::vector<SegmentChoice>>> plans;
  plans.push_back({"every-layer", fixedPlan(Strategy::EveryLayer)});
  plans.push_back({"sqrt", fixedPlan(Strategy::Sqrt)});
  std::vector<SegmentChoice> each(n), selective(n);
  for (size_t s = 0; s < n; ++s) {
    each[s] = {SegmentOption::Recompute, unsigned(s)};
    selective[s] = {SegmentOption::Selective, unsigned(s)};
  }
  plans.push_back({"chain-dp", each});
  plans.push_back({"selective", selective});
  // The layer plans with every segment outside the layers selective, or
  // rebuilt from its own boundary.
  for (Strategy layered : {Strategy::EveryLayer, Strategy::Sqrt})
    for (SegmentOption outside :
         {SegmentOption::Selective, SegmentOption::Recompute}) {
      std::vector<SegmentChoice> choices = fixedPlan(layered);
      for (size_t s = 0; s < n; ++s)
        if (choices[s].option == SegmentOption::Keep)
          choices[s] = {outside, unsigned(s)};
      plans.push_back({"chain-dp+selective", std::move(choices)});
    }
  return plans;
}

std::vector<std::pair<std::string, std::vector<SegmentChoice>>>
Solver::nestedPlans(
    const std::vector<std::pair<std::string, std::vector<SegmentChoice>>>
        &plans) const {
  std::vector<std::pair<std::string, std::vector<SegmentChoice>>> nested;
  for (const auto &[name, choices] : plans) {
    std::vector<SegmentChoice> cut = choices;
    bool inner = false;
    for (size_t s = 0; s < cut.size(); ++s)
      if (cut[s].option == SegmentOption::Recompute &&
          cut[s].groupStart != s && chain_.segments[s].input) {
        cut[s].nested = true;
        inner = true;
      }
    if (inner)
      nested.push_back({"nested", std::move(cut)});
  }
  return nested;
}

unsigned Solver::perUseCloneLimit() const {
  return std::max<unsigned>(kPerUseMinClones,
                            kPerUseClonesPerNode * graph_.getNodes().size());
}

size_t Solver::perUseMemberCount() const {
  return std::max<size_t>(kPerUseMembers,
                          kPerUseMemberNodes /
                              std::max<size_t>(1, graph_.getNodes().size()));
}

void Solver::addPerUsePlans(llvm::function_ref<void(PlanResult)> add) {
  // Their estimates wait as the nested plans' do; a rewrite past the clone
  // limit is not offered (its dry run stops there).
  auto offer = [&](PlanResult plan) {
    if (!plan.stats.overLimit)
      add(std::move(plan));
  };
  // The members of the smallest estimated peaks (those estimated so far:
  // the flat ones), and their nested variants, rebuilt per use: the floor
  // is what these plans are for, and each costs a rewrite to estimate.
  std::vector<const PlanResult *> flat;
  for (const PlanResult &plan : pool_)
    if (plan.estimated && plan.stats.clonedNodes)
      flat.push_back(&plan);
  llvm::stable_sort(flat, [](const PlanResult *a, const PlanResult *b) {
    return a->estimatedPeakBytes < b->estimatedPeakBytes;
  });
  flat.resize(std::min<size_t>(flat.size(), perUseMemberCount()));
  std::vector<std::pair<std::string, std::vector<SegmentChoice>>> choices;
  std::vector<PlanResult> members;
  for (const PlanResult *member : flat) {
    PlanResult plan = *member;
    plan.strategy = "per-use";
    plan.perUse = true;
    plan.estimated = false;
    plan.estimatedPeakBytes = plan.plannedPeakBytes = 0;
    plan.stats = predictRecomputeStats(graph_, toRewrite(plan), profile_,
                                       perUseCloneLimit());
    members.push_back(std::move(plan));
    choices.push_back({member->strategy, member->choices});
  }
  for (auto &[name, cut] : nestedPlans(choices))
    members.push_back(evaluate("per-use", std::move(cut), nullptr,
                               /*estimate=*/false, /*perUse=*/true));
  // Every stashed value dropped and nothing else held: each backward node
  // rebuilds its operands from the graph's inputs (the smallest peaks of
  // small graphs; a large one runs past the clone limit).
  std::vector<std::string> all;
  for (const ir::Value *value : stash_.stashed)
    all.push_back(value->getName().str());
  std::vector<SegmentChoice> each(chain_.segments.size());
  for (SegmentChoice &choice : each)
    choice = {SegmentOption::Recompute, 0};
  // In a small graph, also the plans that hold one or two of the
  // kHoldFewValues stashed values whose rebuilds would cost the most per
  // byte (the chain again for each backward use) and drop every other: the
  // oracle's smallest peaks hold a few values and rebuild the rest, some
  // more than once.
  if (searchesWide() && all.size() > 2 && all.size() <= kDropFewStashed) {
    auto perUseCost = [&](const ir::Value *value) {
      unsigned i = stash_.stashIndex.lookup(value);
      return backwardUses_[i] * chainSeconds_[i] /
             double(std::max<uint64_t>(1, bytesOf(value)));
    };
    std::vector<const ir::Value *> dear(stash_.stashed.begin(),
                                        stash_.stashed.end());
    llvm::stable_sort(dear, [&](const ir::Value *a, const ir::Value *b) {
      return perUseCost(a) > perUseCost(b);
    });
    dear.resize(std::min<size_t>(dear.size(), kHoldFewValues));
    for (size_t a = 0; a < dear.size(); ++a)
      for (size_t b = a; b < dear.size(); ++b) {
        std::vector<std::string> drop;
        for (const ir::Value *value : stash_.stashed)
          if (value != dear[a] && value != dear[b])
            drop.push_back(value->getName().str());
        members.push_back(evaluate("per-use", each, &drop,
                                   /*estimate=*/false, /*perUse=*/true));
      }
  }
  members.push_back(evaluate("per-use", std::move(each), &all,
                             /*estimate=*/false, /*perUse=*/true));
  if (searchesWide() && mixedPlansAllowed_)
    addMixedPlans(members);
  for (PlanResult &plan : members)
    offer(std::move(plan));
}

void Solver::addMixedPlans(std::vector<PlanResult> &members) const {
  // What rebuilding a value per use costs over rebuilding it once, per byte
  // it holds: its chain again for each backward use after the first.
  llvm::DenseMap<const ir::Value *, double> extraPerByte;
  for (size_t i = 0; i < stash_.stashed.size(); ++i)
    if (backwardUses_[i] > 1)
      extraPerByte[stash_.stashed[i]] = (backwardUses_[i] - 1) *
                                        chainSeconds_[i] /
                                        double(bytesOf(stash_.stashed[i]));
  size_t count = members.size();
  for (size_t m = 0; m < count; ++m) {
    std::vector<const ir::Value *> dropped;
    for (const std::string &name : members[m].dropNames)
      if (!llvm::is_contained(members[m].keepNames, name) &&
          !llvm::is_contained(members[m].nestedNames, name)) {
        const ir::Value *value = graph_.lookup(name);
        if (extraPerByte.lookup(value) > 0)
          dropped.push_back(value);
      }
    // Most costly per byte held first: those gain the least from a hold
    // cut to each use.
    llvm::stable_sort(dropped, [&](const ir::Value *a, const ir::Value *b) {
      return extraPerByte.lookup(a) > extraPerByte.lookup(b);
    });
    size_t previous = 0;
    for (unsigned step = 1; step < kMixedSteps; ++step) {
      size_t k = dropped.size() * step / kMixedSteps;
      if (k == previous)
        continue;
      previous = k;
      PlanResult plan = members[m];
      for (size_t i = 0; i < k; ++i)
        plan.onceNames.push_back(dropped[i]->getName().str());
      plan.stats = predictRecomputeStats(graph_, toRewrite(plan), profile_,
                                         perUseCloneLimit());
      members.push_back(std::move(plan));
    }
  }
}

llvm::Expected<PlanResult> Solver::smallestPlan() {
  auto plan = smallestPlanBelow(UINT64_MAX);
  if (!plan)
    return plan.takeError();
  assert(*plan && "none is a member of every strategy");
  return std::move(**plan);
}

llvm::Expected<PlanResult> Solver::smallestPlanOf(Strategy strategy) {
  auto plan = smallestPlanOfBelow(strategy, UINT64_MAX);
  if (!plan)
    return plan.takeError();
  assert(*plan && "none is a member of every strategy");
  return std::move(**plan);
}

llvm::Expected<std::optional<PlanResult>>
Solver::smallestPlanBelow(uint64_t beat) {
  // auto reaches every pool member.
  return smallestMember([](const PlanResult &) { return true; }, beat,
                        /*autoPool=*/true);
}

llvm::Expected<std::optional<PlanResult>>
Solver::smallestPlanOfBelow(Strategy strategy, uint64_t beat) {
  // A fixed strategy has one plan; the others reach their own pool members
  // (and none), which solve() reads.
  if (!isBudgetDriven(strategy)) {
    auto plan = solve(strategy, std::nullopt);
    if (!plan)
      return plan.takeError();
    if ((*plan)->plannedPeakBytes >= beat)
      return std::nullopt;
    return std::move(*plan);
  }
  return smallestMember(
      [&](const PlanResult &plan) { return belongsTo(strategy, plan); }, beat,
      strategy == Strategy::Auto);
}

llvm::Expected<std::optional<PlanResult>> Solver::smallestMember(
    llvm::function_ref<bool(const PlanResult &)> isMember, uint64_t beat,
    bool autoPool) {
  // Plan the members with the smallest estimates exactly; the least planned
  // peak among them is what the infeasible-budget error reports, and a
  // strategy that reads them reaches it. The local plans are ranked apart,
  // after the others: many of theirs estimate small and plan larger, and
  // would crowd out of the planned few a member that plans smaller.
  std::vector<PlanResult *> pool, local;
  for (PlanResult &plan : autoPool ? getAutoPool() : getPool())
    if (isMember(plan)) {
      ensureEstimate(plan);
      (plan.poolIndex < basePoolSize_ ? pool : local).push_back(&plan);
    }
  PlanResult *best = nullptr;
  for (std::vector<PlanResult *> *byEstimate : {&pool, &local}) {
    llvm::stable_sort(*byEstimate, [](const PlanResult *a, const PlanResult *b) {
      return a->estimatedPeakBytes < b->estimatedPeakBytes;
    });
    // Plan the six smallest estimates, and every estimate within 1% of the
    // smallest (plans that all sit on the same floor rank unreliably by the
    // bound), at most 32. A member whose estimate, a lower bound of its
    // planned peak, is at or above the least planned peak so far (or
    // \p beat) cannot be strictly smaller, which is what replaces the
    // best: it is not planned. Those of no bound (the estimate failed:
    // planning them reports the error) still are.
    uint64_t floor =
        byEstimate->empty() ? 0 : byEstimate->front()->estimatedPeakBytes;
    for (size_t i = 0; i < byEstimate->size() && i < 32; ++i) {
      PlanResult &plan = *(*byEstimate)[i];
      if (i >= 6 && plan.estimatedPeakBytes > floor + floor / 100)
        break;
      uint64_t least = best ? std::min(beat, best->plannedPeakBytes) : beat;
      if (plan.estimatedPeakBytes >= least && plan.boundedEstimate)
        continue;
      if (auto err = planExactly(plan))
        return std::move(err);
      if (plan.plannedPeakBytes < least)
        best = &plan;
    }
  }
  if (!best)
    return std::nullopt;
  return std::optional<PlanResult>(*best);
}

RecomputeStats Solver::apply(const PlanResult &plan) {
  return applyRecomputePlan(graph_, toRewrite(plan), profile_);
}

} // namespace remat::passes::recompute
