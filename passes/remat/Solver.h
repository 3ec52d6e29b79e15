//===- passes/remat/Solver.h - Choosing what to recompute -------*- C++ -*-===//
//
// Steps 3 and 4 of remat (DESIGN.md "Rematerialization"): options per
// segment, strategies, and the chain DP that picks one option per segment
// under a byte budget.
//
// Note [Chain DP as built]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Segments 0..L-1 carry S_i (bytes they stash), and three kinds of choice:
//   keep       - hold all of S_i through backward;
//   selective  - hold what is expensive to rebuild, drop the rest (a stashed
//                value is cheap when rebuilding it from what is held costs at
//                most kCheapPasses passes over its bytes at memory speed:
//                softmax, dropout, GELU, LayerNorm outputs and the seq^2
//                attention scores, but not a GEMM's output);
//   recompute  - a group of consecutive segments s..t is dropped whole and
//                rebuilt from its input boundary x_{s-1}, which is held (the
//                seed's per-layer checkpointing when the group is a layer).
// With A the kept bytes of the segments before s, T the temporaries of the
// no-remat peak beyond all stashes, the model checks, for each choice,
// A + S_s..t (rebuilt during their backward) + T <= budget, and at the end
// of forward sum(kept) + T <= budget; it minimises the predicted recompute
// seconds, or (the least-held variant) the kept bytes at the end of forward
// and then the seconds. Bytes are counted in 512 buckets of the budget, each
// step's rounded up (so "least held" is least up to that rounding), and the
// DP is O(L * G * 512) for groups of up to G segments. Nested recompute
// (Rotor's recompute-within-recompute) is not modelled by the DP: its plans
// are added to the pool as variants of the others (Solver::nestedPlans,
// Note [Nested recompute] in Rewrite.h), and so are plans that rebuild a
// value for each backward use (Solver::addPerUsePlans, Note [Rebuilt per
// use]).
// The model is an estimate, so the DP is only a generator of candidates:
// see Note [Monotone budgets].
//
// Note [Monotone budgets]
// ~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's activation_memory_budget is not monotone: a smaller budget can
// give a larger peak. remat's is, by construction. The solver builds one
// pool of candidate plans that does not depend on the budget: the fixed
// plans (none, every-layer, sqrt), the most compact plans, 12 selective
// prefixes (the cheap stashed values, cheapest rebuild per byte first), and
// the chain DP with and without selective segments at a ladder of budgets
// (12 rungs from the smallest estimated peak to no remat, plus each fixed
// plan's peak; in a small graph 12 more below, down to what the DP can plan
// at all: Solver::searchesWide), taking at each rung both the plan of
// least predicted time and the plan that holds the fewest bytes. The second
// keeps the smallest reachable peak from hinging on the cost rates: which
// plans the least-time runs propose at the lowest rungs shifts with the
// rates, so without the least-held ones the smallest peak did too (figures
// in docs/remat.md; tests/tools/remat-smallest.test). A small graph also
// gets every plan that drops one or two stashed values and holds the rest
// (kDropFewStashed), and auto reads the local plans around the pool's
// front too (Note [Local plans]). Every candidate is
// rewritten on a copy and its peak is bounded below by its live bytes under
// plan-memory's in-place sharing. The pool is sorted once by (recompute
// time, estimated peak, build order). A budget B then takes the first
// member, in that order, whose planned peak (plan-memory on the rewritten
// copy) is at most B. For B' < B the members that fit B' are a subset of
// those that fit B, so the choice at B' is the choice at B if it still
// fits, and else a plan whose planned peak is at most B' < the peak chosen
// at B. `none`,
// `every-layer` and `sqrt` are fixed plans; `chain-dp` and `selective` read
// only their own members (and none), `auto` reads all of them, so auto is
// never slower (by the model) than a fixed plan that fits.
//
// Note [Local plans]
// ~~~~~~~~~~~~~~~~~~
// The pool's families each vary a plan along one axis (which segments, how
// many cheap values, which one or two values), so between two members on
// its front (no member both faster and of a smaller estimated peak) there
// is often a plan one value away from either that beats both at a budget
// between them: the oracle's optimum is frequently a front member with one
// value more held or dropped (tools/bench/oracle_floors.py). In a small
// graph (searched wider, at most kDropFewStashed stashed values) auto's
// pool also holds, for each member on the front, every plan one move away:
//   - one of its dropped values held instead (faster, a larger peak);
//   - one more stashed value dropped (slower, smaller; its segment becomes
//     selective if it was kept whole);
//   - one held boundary dropped, so that the groups that started from it
//     are rebuilt from what is held further back (side inputs stay held);
//   - one dropped value made an inner boundary (Note [Nested recompute]),
//     or one inner boundary no longer cut, unless the caller cannot run
//     nested plans (setNestedPlans): the values on its way are rebuilt by
//     a pass of their own and again when backward needs them, instead of
//     held from one rebuild;
//   - in a plan rebuilt per use, one dropped value rebuilt once instead,
//     or one rebuilt once rebuilt per use again;
//   - one dropped value held from forward through one of its backward
//     readers but the last (Note [Held part of backward] in Rewrite.h),
//     alone, or with one held stashed value that is computed directly from
//     it and read only up to that reader dropped and rebuilt once (with
//     the dropped values rebuilt from that one there): while the value is
//     held, what is computed from it is cheap to rebuild; or such a value
//     dropped for all of backward again. Not where the caller cannot run
//     nested plans.
// Later rounds do the same around the members the round before put on the
// front, up to kLocalRounds; a plan reached twice by different moves is
// one member. The oracle's plans at the budgets where auto was furthest
// from it cut a group again at one value or rebuild a boundary, which the
// first two moves never reach (figures in docs/remat.md). The plans are named
// for the member they come from ("per-use+local"), and only auto reads
// them: the other strategies' pools stay as they were, and so does their
// cost. They are built the first time auto asks (Solver::getAutoPool),
// after every member is estimated, which is what the front is read from;
// the pool is then sorted again in the order above, so it is still one
// pool for every budget. The smallest feasible peak is looked for among
// the other members first, as before, and then among the local plans,
// which cannot raise it.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_SOLVER_H
#define REMAT_PASSES_REMAT_SOLVER_H

#include "passes/remat/CostModel.h"
#include "passes/remat/Rewrite.h"
#include "passes/remat/Segments.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace remat::passes::recompute {

/// What remat's `strategy` option asks for, in the order --help lists them
/// (Note [Monotone budgets]).
enum class Strategy : uint8_t { None, EveryLayer, Sqrt, ChainDp, Selective, Auto };

/// \returns the strategy names in the order --help lists them.
llvm::ArrayRef<std::string> getStrategyNames();
/// \returns the name of \p strategy, as the option spells it.
llvm::StringRef getStrategyName(Strategy strategy);
/// \returns the strategy named \p name, or std::nullopt if none is.
std::optional<Strategy> parseStrategy(llvm::StringRef name);
/// \returns true if \p strategy picks a plan by the budget (chain-dp,
/// selective, auto: they need one), false for a fixed plan (none,
/// every-layer, sqrt: a budget only checks it).
bool isBudgetDriven(Strategy strategy);

/// What a segment does in a plan.
enum class SegmentOption : uint8_t { Keep, Selective, Recompute };
llvm::StringRef segmentOptionName(SegmentOption option);

/// One option per segment. A Recompute segment names the first segment of
/// its group (the group is rebuilt from that segment's input boundary).
struct SegmentChoice {
  SegmentOption option = SegmentOption::Keep;
  unsigned groupStart = 0;
  /// Recompute only: the group is cut again at this segment's input during
  /// its own backward (Note [Nested recompute]).
  bool nested = false;
};

/// A plan and what it costs, measured on a rewritten copy.
struct PlanResult {
  std::string strategy;
  std::vector<SegmentChoice> choices;
  /// Stashed values dropped, then (for a single-tensor plan) those only.
  std::vector<std::string> dropNames;
  std::vector<std::string> keepNames;
  /// Inner boundaries of nested groups (RecomputePlan::innerBoundaries).
  std::vector<std::string> nestedNames;
  /// Each backward node rebuilds the dropped values it reads for itself
  /// (RecomputePlan::rebuildPerUse, Note [Rebuilt per use]).
  bool perUse = false;
  /// perUse only: dropped values rebuilt once all the same
  /// (RecomputePlan::rebuildOnce).
  std::vector<std::string> onceNames;
  /// Dropped values held through part of backward: (value, the first result
  /// of the last backward node that reads the original;
  /// RecomputePlan::heldThrough).
  std::vector<std::pair<std::string, std::string>> heldThroughNames;
  /// persistent + arena of plan-memory on the rewritten graph (0 until
  /// planned).
  uint64_t plannedPeakBytes = 0;
  /// persistent + peak live bytes with plan-memory's in-place sharing: a
  /// lower bound of the planned peak that the search ranks by.
  uint64_t estimatedPeakBytes = 0;
  /// Whether estimatedPeakBytes is filled: pool members whose estimate no
  /// decision has read yet leave it for later (Solver::ensureEstimate).
  bool estimated = false;
  /// Whether the estimate is a bound: false when the lower bound failed (a
  /// value past 2^62 bytes) and the estimate only ranks the member last.
  bool boundedEstimate = true;
  /// Position in the order the pool was built.
  unsigned poolIndex = 0;
  /// Stashed bytes held through backward.
  uint64_t keptStashBytes = 0;
  RecomputeStats stats;
};

/// Chooses and applies remat plans for one training step.
class Solver {
public:
  Solver(ir::Graph &graph, const StashInfo &stash, const SegmentChain &chain,
         const CostProfile &profile);

  /// Plans the graph as it is (the no-remat reference); call once first.
  llvm::Error initialize();

  /// Whether the pool also holds nested plans (Note [Nested recompute]):
  /// on by default; off for a front end whose backward can only read a set
  /// of saved values (remat::planJointGraph). Set before the first solve.
  void setNestedPlans(bool allowed) {
    assert(!poolBuilt_ && "the pool is already built");
    nestedPlansAllowed_ = allowed;
  }

  /// Whether the pool also holds plans rebuilt per use (Note [Rebuilt per
  /// use]): on by default, off with setNestedPlans(false) too. Set before
  /// the first solve.
  void setPerUsePlans(bool allowed) {
    assert(!poolBuilt_ && "the pool is already built");
    perUsePlansAllowed_ = allowed;
  }

  /// Whether plans rebuilt per use also come with variants that rebuild
  /// some values once (addMixedPlans): on by default. Set before the first
  /// solve.
  void setMixedPlans(bool allowed) {
    assert(!poolBuilt_ && "the pool is already built");
    mixedPlansAllowed_ = allowed;
  }

  /// Whether auto also reads the local plans (Note [Local plans]): on by
  /// default. Set before auto's first solve.
  void setLocalPlans(bool allowed) {
    assert(!localPlansAdded_ && "the local plans are already added");
    localPlansAllowed_ = allowed;
  }

  /// The planned peak (persistent + arena) of the graph as it is.
  uint64_t getBasePeakBytes() const { return basePeakBytes_; }
  /// The predicted seconds of a step without remat, and under \p plan.
  double getBaseSeconds() const { return baseSeconds_; }
  double getPredictedSeconds(const PlanResult &plan) const {
    return baseSeconds_ + plan.stats.recomputeSeconds;
  }

  /// \returns the best plan of \p strategy whose planned peak is at most
  /// \p budgetBytes (no bound when unset), or std::nullopt if it has none.
  llvm::Expected<std::optional<PlanResult>>
  solve(Strategy strategy, std::optional<uint64_t> budgetBytes);

  /// \returns the plan of the smallest planned peak any strategy reaches.
  llvm::Expected<PlanResult> smallestPlan();

  /// \returns the plan of the smallest planned peak \p strategy reaches: its
  /// floor. solve(strategy, B) finds a plan for every B at or above it.
  llvm::Expected<PlanResult> smallestPlanOf(Strategy strategy);

  /// smallestPlan() and smallestPlanOf(), when that plan's planned peak is
  /// below \p beat; std::nullopt when it is not. Members whose estimated
  /// peak (a lower bound of the planned peak) is at or above \p beat are
  /// not planned.
  llvm::Expected<std::optional<PlanResult>> smallestPlanBelow(uint64_t beat);
  llvm::Expected<std::optional<PlanResult>>
  smallestPlanOfBelow(Strategy strategy, uint64_t beat);

  /// Applies \p plan to the graph itself. \returns what was cloned.
  RecomputeStats apply(const PlanResult &plan);

  /// Why a stashed value is kept or recomputed under \p plan, for --explain.
  std::string explainValue(const ir::Value *value, const PlanResult &plan) const;

  /// explainValue without what Note [Rebuilt per use] adds.
  std::string explainValueOnce(const ir::Value *value,
                               const PlanResult &plan) const;
  /// The explanation of \p plan: the text of --explain and the JSON of the
  /// report's "remat" section.
  void explain(const PlanResult &plan, std::optional<uint64_t> budgetBytes,
               llvm::raw_ostream &os) const;
  llvm::json::Object explainJson(const PlanResult &plan,
                                 std::optional<uint64_t> budgetBytes) const;
  /// remat's model of the step for checkers outside remat
  /// (remat{dump-model=FILE}, passes/remat/ModelDump.cpp).
  llvm::json::Object describeModel() const;

  /// Stashed values are cheap to rebuild at up to this many memory passes
  /// over their bytes (Note [Chain DP as built]).
  static constexpr double kCheapPasses = 16;

private:
  /// Rewrites a copy under \p choices (or the explicit drop list) and
  /// estimates its peak.
  PlanResult evaluate(llvm::StringRef strategy,
                      std::vector<SegmentChoice> choices,
                      const std::vector<std::string> *drop = nullptr,
                      bool estimate = true, bool perUse = false);
  /// evaluate's first half: \p plan's values (what it drops, keeps, cuts
  /// again) and kept stash bytes, without its rewrite.
  PlanResult describe(llvm::StringRef strategy,
                      std::vector<SegmentChoice> choices,
                      const std::vector<std::string> *drop = nullptr,
                      bool perUse = false) const;
  /// The stashed bytes \p plan holds through backward, and the boundaries
  /// it holds that are not stashed.
  uint64_t keptStashBytes(const PlanResult &plan) const;
  /// evaluate's second half: \p plan's stats from a dry run of its rewrite,
  /// and with \p estimate its estimated peak too.
  void measure(PlanResult &plan, bool estimate);
  /// Fills \p plan's estimated peak (and its stats) if evaluate left it.
  void ensureEstimate(PlanResult &plan);
  /// \returns \p plan's values in the graph.
  RecomputePlan toRewrite(const PlanResult &plan) const;
  /// Fills \p plan's planned peak: plan-memory on the graph rewritten under
  /// it, which is then restored.
  llvm::Error planExactly(PlanResult &plan);
  /// The smallest planned peak among the pool members \p isMember accepts
  /// (smallestPlan, smallestPlanOf), if it is below \p beat.
  /// \p autoPool: among getAutoPool()'s members, not only getPool()'s.
  llvm::Expected<std::optional<PlanResult>>
  smallestMember(llvm::function_ref<bool(const PlanResult &)> isMember,
                 uint64_t beat, bool autoPool);
  /// Every candidate plan, in the fixed order solve() reads them in.
  std::vector<PlanResult> &getPool();
  /// getPool() and, in a small graph, the local plans (addLocalPlans),
  /// which only auto reads; in the same order.
  std::vector<PlanResult> &getAutoPool();
  /// Sorts the pool in the order of Note [Monotone budgets].
  void sortPool();
  /// Adds the local plans of Note [Local plans] to the pool.
  void addLocalPlans();
  /// \returns true if a rebuild of \p value under \p plan reads the value
  /// named \p source: it is on the way from what the plan holds. With
  /// \p direct, only if no other stashed value is on the way and none the
  /// plan drops is read.
  bool isRebuiltFrom(const ir::Value *value, llvm::StringRef source,
                     const PlanResult &plan, bool direct) const;
  /// \returns true if backward nodes read \p value and none after \p last
  /// in the schedule.
  bool isReadOnlyUpTo(const ir::Value *value, const ir::Node *last) const;
  /// The plans one move away from \p base (Note [Local plans]), not yet
  /// measured.
  std::vector<PlanResult> localPlansAround(const PlanResult &base) const;
  static constexpr unsigned kLocalRounds = 6;
  std::vector<SegmentChoice> fixedPlan(Strategy strategy) const;
  /// The plans that hold the least: layer groups with the rest selective or
  /// rebuilt, every segment rebuilt, every segment selective.
  std::vector<std::pair<std::string, std::vector<SegmentChoice>>>
  compactPlans() const;
  /// The plans of \p plans whose recomputed groups of several segments are
  /// cut again at every segment inside (Note [Nested recompute]).
  std::vector<std::pair<std::string, std::vector<SegmentChoice>>>
  nestedPlans(const std::vector<std::pair<std::string,
                                          std::vector<SegmentChoice>>> &plans)
      const;
  /// The plans rebuilt per use (Note [Rebuilt per use]): the compact and
  /// nested ones, the one that drops every stashed value (and in a small
  /// graph those that hold one or two, kHoldFewValues), and their mixed
  /// variants, each when its rewrite clones at most kPerUseClonesPerNode
  /// per node of the graph (at least kPerUseMinClones).
  void addPerUsePlans(llvm::function_ref<void(PlanResult)> add);
  /// Adds to \p members (plans rebuilt per use) their variants that
  /// rebuild some dropped values once: for kMixedSteps - 1 fractions of the
  /// values read by several backward nodes, those whose rebuilds for each
  /// use cost the most per byte.
  void addMixedPlans(std::vector<PlanResult> &members) const;
  static constexpr unsigned kMixedSteps = 4;
  /// A graph (searched wider) of at most this many stashed values also
  /// gets every plan that drops one or two of them and holds the rest
  /// (strategy drop-few): up to 300 more members.
  static constexpr unsigned kDropFewStashed = 24;
  /// Such a graph's plans rebuilt per use also hold one or two of this many
  /// stashed values (those whose rebuilds for each use cost the most per
  /// byte) and drop every other: up to 21 more members, and their mixed
  /// variants.
  static constexpr unsigned kHoldFewValues = 6;
  /// The most clones a plan rebuilt per use may make.
  unsigned perUseCloneLimit() const;
  /// How many flat members get a variant rebuilt per use: at least
  /// kPerUseMembers, more in a small graph, as many as kPerUseMemberNodes
  /// graph nodes allow (each costs a dry run of its rewrite).
  size_t perUseMemberCount() const;
  static constexpr unsigned kPerUseMembers = 8;
  static constexpr unsigned kPerUseMemberNodes = 1 << 14;
  static constexpr unsigned kPerUseClonesPerNode = 1;
  static constexpr unsigned kPerUseMinClones = 4096;
  /// The chain DP's plans under an arena budget: of least predicted time,
  /// and the one holding the fewest bytes at the end of forward, counted in
  /// buckets (least time among those). One table gives both.
  struct DpPlans {
    std::optional<std::vector<SegmentChoice>> leastTime, leastHeld;
  };
  DpPlans runDp(uint64_t arenaBudget, bool allowSelective) const;
  /// T of Note [Chain DP as built]: the arena of the step without remat
  /// beyond all stashes, which the DP adds to every check.
  uint64_t dpTemporaries() const;
  /// Seconds to rebuild \p value from what is held if it alone is dropped.
  double chainSeconds(const ir::Value *value) const;
  bool isCheap(const ir::Value *value) const;

  ir::Graph &graph_;
  const StashInfo &stash_;
  const SegmentChain &chain_;
  const CostProfile &profile_;
  uint64_t persistentBytes_ = 0;
  uint64_t basePeakBytes_ = 0;
  /// Each node's position in the schedule the solver plans (initialize).
  llvm::DenseMap<const ir::Node *, unsigned> position_;
  double baseSeconds_ = 0;
  /// Per stashed value (stash index): rebuild seconds if dropped alone.
  std::vector<double> chainSeconds_;
  /// Per stashed value (stash index): how many backward nodes read it.
  std::vector<unsigned> backwardUses_;
  /// Per segment: bytes held and predicted seconds under selective.
  std::vector<uint64_t> selectiveKeptBytes_;
  std::vector<double> selectiveSeconds_;
  /// Per segment: predicted seconds of its forward nodes.
  std::vector<double> forwardSeconds_;
  std::vector<PlanResult> pool_;
  bool poolBuilt_ = false;
  bool localPlansAdded_ = false;
  /// getPool()'s members: those of poolIndex below are not local plans.
  size_t basePoolSize_ = 0;
  bool localPlansAllowed_ = true;
  bool nestedPlansAllowed_ = true;
  bool perUsePlansAllowed_ = true;
  bool mixedPlansAllowed_ = true;
  /// Rungs of the budget ladder and of the selective prefixes.
  static constexpr unsigned kLadderSteps = 12;
  /// Whether the pool is searched wider (a graph of at most
  /// kWideSearchNodes nodes): the DP at rungs below the fixed plans' peaks,
  /// up to kLevelAttempts runs per rung, its budget corrected by how far its
  /// plan's estimated peak lands over or under the rung until it lands
  /// within 1/kLevelSlack of it, and the nested variants of every distinct
  /// choice of segments the pool was offered (not only of each distinct
  /// rewrite). It doubled the pass's time on bert-large and found the same
  /// plans there (docs/remat.md "How far from the optimum").
  bool searchesWide() const;
  static constexpr unsigned kWideSearchNodes = 2048;
  static constexpr unsigned kLevelAttempts = 4;
  static constexpr uint64_t kLevelSlack = 100;
};

/// \returns \p plan's values in \p graph (which has them by name).
RecomputePlan toRecomputePlan(const ir::Graph &graph, const PlanResult &plan);

/// What the remat pass builds before it chooses a plan: the stash, the
/// segment chain, the cost profile and an initialized Solver over them.
/// remat-sweep asks it for many budgets; the pass asks it once.
struct RematProblem {
  StashInfo stash;
  SegmentChain chain;
  CostProfile profile;
  std::unique_ptr<Solver> solver;
};

/// Checks that \p graph is a scheduled training step without recompute
/// nodes, then analyses it: \p costProfilePath names remat-run --profile's
/// JSON ("" for the built-in rates), \p boundaries the segment boundaries
/// to use instead of the cut points found (empty to find them).
llvm::Expected<std::unique_ptr<RematProblem>>
prepareRematProblem(ir::Graph &graph, llvm::StringRef costProfilePath,
                    llvm::ArrayRef<std::string> boundaries);

/// Calls \p work(i) for each i below \p count, on up to as many threads as
/// the machine has cores (the calling thread is one); returns when all
/// have. Calls for different i must not touch the same data.
void forEachOnThreads(size_t count, llvm::function_ref<void(size_t)> work);

/// The error for a budget no plan of \p strategy fits: the budget (and
/// \p budgetText when it was a percentage), the smallest feasible planned
/// peak (of \p solver, or of one of \p alternatives, each named by its
/// note, when that is smaller) and the peak without remat.
llvm::Error makeInfeasibleError(
    Solver &solver, Strategy strategy, uint64_t budgetBytes,
    llvm::StringRef budgetText,
    llvm::ArrayRef<std::pair<Solver *, std::string>> alternatives = {});

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_SOLVER_H
