//===- tests/unit/RematTest.cpp - The remat pass ---------------------------===//
//
// Numeric equivalence in the Glow style: remat a copy, run both on the CPU,
// compare bit for bit; and the budget properties: a reported plan fits its
// budget, the planned peak never rises as the budget shrinks, and the arena
// the runtime touches is the planned one.
//
//===----------------------------------------------------------------------===//
#include "doctest/doctest.h"

#include "session/ModelLoader.h"
#include "driver/RunDriver.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "passes/Liveness.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "passes/remat/ChunkAttention.h"
#include "passes/remat/ChunkLoss.h"
#include "passes/remat/CostModel.h"
#include "passes/remat/Rewrite.h"
#include "passes/remat/Stash.h"
#include "passes/remat/Segments.h"
#include "passes/remat/Solver.h"
#include "runtime/Backends.h"
#include "tests/unit/RandomGraphs.h"
#include "runtime/DropoutMask.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

using namespace remat;
using namespace remat::ir;
using namespace remat::passes;
using remat::testing::randomTrainingGraph;

namespace {

llvm::Error runPasses(Graph &graph, llvm::StringRef pipeline) {
  PassRegistry registry;
  registerAllPasses(registry);
  PassManager pm;
  pm.setContext({runtime::cpu::makeCpuEvaluator()});
  pm.setDiagnosticStream(&llvm::nulls());
  if (auto err = parsePassPipeline(pipeline, registry, pm))
    return err;
  return pm.run(graph).takeError();
}

std::unique_ptr<Graph> parseText(llvm::StringRef text) {
  auto graph = ir::parseGraph(text, "test.rir");
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  return std::move(*graph);
}

uint64_t persistentBytes(const Graph &graph) {
  uint64_t bytes = 0;
  for (const Value *input : graph.getInputs())
    bytes += uint64_t(input->getType().getByteSize());
  return bytes;
}

uint64_t plannedPeak(const Graph &graph) {
  REQUIRE(graph.getMemoryPlan());
  return persistentBytes(graph) + graph.getMemoryPlan()->arenaBytes;
}

/// Runs \p graph (planned) on the CPU with inputs from seed 7.
runtime::RunResult run(const Graph &graph) {
  auto backend = runtime::createBackend("cpu");
  REQUIRE(bool(backend));
  runtime::CompileOptions options;
  options.numThreads = 1;
  // A planned graph runs in a poisoned arena checked around each node.
  options.checkArena = true;
  auto executable = (*backend)->compile(graph, options);
  REQUIRE_MESSAGE(bool(executable), errorToString(executable.takeError()));
  auto inputs = driver::makeInputs(graph, {}, /*seed=*/7);
  REQUIRE(bool(inputs));
  std::vector<runtime::Tensor> views;
  for (const runtime::OwnedTensor &input : *inputs)
    views.push_back(input.view());
  auto result = (*executable)->run(views);
  REQUIRE_MESSAGE(bool(result), errorToString(result.takeError()));
  return std::move(*result);
}

/// \returns the index of the first output that differs, or -1.
int firstDifference(const runtime::RunResult &a, const runtime::RunResult &b) {
  REQUIRE(a.outputs.size() == b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    size_t bytes = size_t(a.outputs[i].getType().getByteSize());
    if (a.outputs[i].getType() != b.outputs[i].getType() ||
        (bytes && std::memcmp(a.outputs[i].getData(), b.outputs[i].getData(),
                              bytes) != 0))
      return int(i);
  }
  return -1;
}

/// A training step ready for remat: autodiff, dce, schedule.
std::unique_ptr<Graph> trainingStep(std::unique_ptr<Graph> forward) {
  llvm::Error err = runPasses(*forward, "canonicalize,autodiff,dce,schedule");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  return forward;
}

struct Outcome {
  bool feasible = false;
  uint64_t plannedPeak = 0;
  std::string error;
};

/// Runs remat{strategy budget} and plan-memory on a copy of \p step and,
/// when it fits, checks it against \p reference bit for bit and the arena
/// the runtime touched against the plan.
Outcome checkStrategy(const Graph &step, const runtime::RunResult &reference,
                      llvm::StringRef strategy, std::optional<uint64_t> budget,
                      llvm::StringRef what) {
  std::unique_ptr<Graph> copy = step.clone();
  std::string pipeline = "remat{strategy=" + strategy.str();
  if (budget)
    pipeline += " budget=" + std::to_string(*budget);
  pipeline += "},plan-memory";
  Outcome outcome;
  if (llvm::Error err = runPasses(*copy, pipeline)) {
    outcome.error = errorToString(std::move(err));
    INFO(what << " " << pipeline);
    CHECK_MESSAGE(llvm::StringRef(outcome.error)
                      .contains("the smallest feasible planned peak is"),
                  outcome.error);
    return outcome;
  }
  outcome.feasible = true;
  outcome.plannedPeak = plannedPeak(*copy);
  INFO(what << " " << pipeline << ": planned peak " << outcome.plannedPeak);
  if (budget)
    CHECK(outcome.plannedPeak <= *budget);
  runtime::RunResult result = run(*copy);
  CHECK(result.peakBytes == copy->getMemoryPlan()->arenaBytes);
  // Measured from the poison, not from the allocator's bookkeeping.
  CHECK(result.touchedBytes == copy->getMemoryPlan()->arenaBytes);
  int differs = firstDifference(reference, result);
  CHECK_MESSAGE(differs == -1, "output " << differs << " ('"
                                         << step.getOutputs()[size_t(
                                                std::max(differs, 0))]
                                                ->getName()
                                                .str()
                                         << "') is not bitwise equal");
  return outcome;
}

/// \returns the smallest planned peak remat reports for \p step.
uint64_t smallestPeak(const Graph &step) {
  std::unique_ptr<Graph> copy = step.clone();
  recompute::StashInfo stash = recompute::analyseStash(*copy);
  auto chain = recompute::findSegments(*copy, stash, {});
  REQUIRE(bool(chain));
  recompute::CostProfile profile;
  recompute::Solver solver(*copy, stash, *chain, profile);
  REQUIRE(!solver.initialize());
  auto smallest = solver.smallestPlan();
  REQUIRE(bool(smallest));
  return smallest->plannedPeakBytes;
}

/// Every strategy on \p step, the budget-driven ones at budgets spread
/// between the smallest reachable planned peak (fraction 0) and the
/// no-remat one (fraction 1), each bitwise against no remat.
void checkAllStrategies(std::unique_ptr<Graph> step, llvm::StringRef what,
                        std::initializer_list<double> fractions) {
  std::unique_ptr<Graph> planned = step->clone();
  llvm::Error err = runPasses(*planned, "plan-memory");
  REQUIRE(!err);
  uint64_t base = plannedPeak(*planned);
  uint64_t smallest = smallestPeak(*step);
  runtime::RunResult reference = run(*planned);
  for (llvm::StringRef strategy : {"none", "every-layer", "sqrt"})
    checkStrategy(*step, reference, strategy, std::nullopt, what);
  for (double fraction : fractions) {
    uint64_t budget =
        smallest + uint64_t(double(base - std::min(base, smallest)) * fraction);
    for (llvm::StringRef strategy : {"chain-dp", "selective", "auto"}) {
      Outcome outcome = checkStrategy(*step, reference, strategy, budget, what);
      // auto reaches every budget down to the smallest peak it reports.
      if (strategy == "auto")
        CHECK_MESSAGE(outcome.feasible, what << ": auto at " << budget
                                             << " B (smallest " << smallest
                                             << ", no remat " << base
                                             << "): " << outcome.error);
    }
  }
}

/// The step between the seeds of the random-graph sweeps:
/// REMAT_TEST_SEED_STRIDE, 1 when unset. The sanitizer phase of CI
/// (scripts/sanitize.sh) runs every second seed; the normal build all.
uint64_t seedStride() {
  const char *text = std::getenv("REMAT_TEST_SEED_STRIDE");
  if (!text || !*text)
    return 1;
  uint64_t stride = 0;
  bool bad = llvm::StringRef(text).getAsInteger(10, stride) || stride == 0;
  REQUIRE_MESSAGE(!bad, "REMAT_TEST_SEED_STRIDE='" << text
                                                   << "' is not a positive "
                                                      "integer");
  return stride;
}

} // namespace

TEST_CASE("remat: 200 random training graphs with dropout, every strategy, "
          "bitwise") {
  const uint64_t stride = seedStride();
  if (stride != 1)
    MESSAGE("REMAT_TEST_SEED_STRIDE=" << stride << ": " << (199 / stride + 1)
                                      << " of the 200 graphs");
  for (uint64_t seed = 1; seed <= 200; seed += stride) {
    std::string text = randomTrainingGraph(seed);
    INFO("seed " << seed << ":\n" << text);
    checkAllStrategies(trainingStep(parseText(text)),
                       "random seed " + std::to_string(seed),
                       {1.0, 0.6, 0.3, 0.0});
  }
}

TEST_CASE("remat: planned peak never rises as the budget shrinks") {
  auto check = [](std::unique_ptr<Graph> step, llvm::StringRef what) {
    std::unique_ptr<Graph> planned = step->clone();
    REQUIRE(!runPasses(*planned, "plan-memory"));
    uint64_t base = plannedPeak(*planned);
    uint64_t previous = UINT64_MAX;
    for (int i = 0; i < 20; ++i) {
      uint64_t budget = uint64_t(double(base) * (1.0 - 0.04 * i));
      std::unique_ptr<Graph> copy = step->clone();
      llvm::Error err = runPasses(
          *copy, "remat{budget=" + std::to_string(budget) + "},plan-memory");
      if (err) {
        llvm::consumeError(std::move(err));
        continue;
      }
      uint64_t peak = plannedPeak(*copy);
      INFO(what << ": budget " << budget << " planned " << peak
                << " previous " << previous);
      CHECK(peak <= budget);
      CHECK(peak <= previous);
      previous = peak;
    }
  };
  const uint64_t stride = seedStride();
  if (stride != 1)
    MESSAGE("REMAT_TEST_SEED_STRIDE=" << stride << ": " << (39 / stride + 1)
                                      << " of the 40 graphs");
  for (uint64_t seed = 1; seed <= 40; seed += stride)
    check(trainingStep(parseText(randomTrainingGraph(seed))),
          "random seed " + std::to_string(seed));
  session::LoadOptions options;
  options.bind = "batch=2,seq=32";
  auto mini = session::loadModel(REMAT_TEST_DIR "/../models/bert-mini.json",
                                options);
  REQUIRE(bool(mini));
  check(trainingStep(std::move(*mini)), "bert-mini");
}

TEST_CASE("remat: bert-tiny and bert-mini, every strategy at four budgets, "
          "bitwise") {
  for (const char *model : {"bert-tiny", "bert-mini"}) {
    session::LoadOptions options;
    options.bind = "batch=2,seq=16";
    auto graph = session::loadModel(
        std::string(REMAT_TEST_DIR "/../models/") + model + ".json", options);
    REQUIRE(bool(graph));
    checkAllStrategies(trainingStep(std::move(*graph)), model,
                       {1.0, 0.6, 0.3, 0.0});
  }
}

TEST_CASE("remat: ONNX fixtures, every strategy at four budgets, bitwise") {
  for (const char *fixture :
       {"bert_ts_op14", "bert_ts_op17", "bert_ts_op17_nodrop", "bert_dynamo",
        "txenc_ts_op17", "txenc_dynamo_op17"}) {
    session::LoadOptions options;
    options.bind = "batch=2,seq=16";
    auto graph = session::loadModel(std::string(REMAT_TEST_DIR "/fixtures/") +
                                       fixture + "/model.onnx",
                                   options);
    REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
    checkAllStrategies(trainingStep(std::move(*graph)), fixture,
                       {1.0, 0.6, 0.3, 0.0});
  }
}

TEST_CASE("remat: values held through part of backward, bitwise") {
  // Every stashed value dropped, each read by two or more backward nodes
  // held through the middle one of them (Note [Held part of backward]),
  // rebuilt once and per use: the step is the step without remat, bit for
  // bit, the originals are read up to that node only, and its arena is the
  // planned one.
  recompute::CostProfile profile;
  unsigned heldValues = 0, heldReads = 0;
  for (uint64_t seed = 1; seed <= 200; seed += 10) {
    std::unique_ptr<Graph> step =
        trainingStep(parseText(randomTrainingGraph(seed)));
    std::unique_ptr<Graph> planned = step->clone();
    REQUIRE(!runPasses(*planned, "plan-memory"));
    runtime::RunResult reference = run(*planned);
    for (bool perUse : {false, true}) {
      std::unique_ptr<Graph> copy = step->clone();
      recompute::StashInfo stash = recompute::analyseStash(*copy);
      llvm::DenseMap<const Node *, unsigned> position;
      for (const Node &node : copy->getNodes())
        position[&node] = unsigned(position.size());
      recompute::RecomputePlan plan;
      plan.rebuildPerUse = perUse;
      for (const Value *value : stash.stashed) {
        plan.drop.insert(value);
        std::vector<const Node *> readers;
        for (const ir::Use &use : value->getUses())
          if (use.user->getStage() == ir::Stage::Backward &&
              !llvm::is_contained(readers, use.user))
            readers.push_back(use.user);
        llvm::sort(readers, [&](const Node *a, const Node *b) {
          return position.lookup(a) < position.lookup(b);
        });
        if (readers.size() >= 2)
          plan.heldThrough[value] = readers[(readers.size() - 1) / 2];
      }
      heldValues += unsigned(plan.heldThrough.size());
      recompute::applyRecomputePlan(*copy, plan, profile);
      // The held originals are read by nothing after their node.
      llvm::DenseSet<const Value *> released;
      for (const Node &node : copy->getNodes()) {
        for (const Value *operand : node.getOperands())
          if (plan.heldThrough.count(operand) &&
              node.getStage() != ir::Stage::Forward) {
            CHECK_MESSAGE(!released.count(operand),
                          "seed " << seed << ": %" << operand->getName().str()
                                  << " read after its node by %"
                                  << node.getResult(0)->getName().str());
            ++heldReads;
          }
        for (const auto &[value, through] : plan.heldThrough)
          if (&node == through)
            released.insert(value);
      }
      REQUIRE(!runPasses(*copy, "plan-memory"));
      runtime::RunResult result = run(*copy);
      CHECK(result.touchedBytes == copy->getMemoryPlan()->arenaBytes);
      CHECK_MESSAGE(firstDifference(reference, result) == -1,
                    "seed " << seed << (perUse ? " per use" : " once"));
    }
  }
  MESSAGE(heldValues << " values held through part of backward, read "
                     << heldReads << " times after forward");
  CHECK(heldValues > 0);
  CHECK(heldReads > 0);
}

TEST_CASE("remat: segments of BERT repeat per layer") {
  session::LoadOptions options;
  options.bind = "batch=1,seq=16";
  auto graph = session::loadModel(REMAT_TEST_DIR "/../models/bert-mini.json",
                                 options);
  REQUIRE(bool(graph));
  std::unique_ptr<Graph> step = trainingStep(std::move(*graph));
  recompute::StashInfo stash = recompute::analyseStash(*step);
  auto chain = recompute::findSegments(*step, stash, {});
  REQUIRE(bool(chain));
  // bert-mini has 4 layers; post-LN: attention + residual, LayerNorm, FFN +
  // residual, LayerNorm.
  CHECK(chain->numLayers == 4);
  CHECK(chain->period == 4);
  for (unsigned layer = 1; layer < chain->numLayers; ++layer)
    for (unsigned s = 0; s < chain->period; ++s)
      CHECK(chain->segments[chain->firstLayerSegment + layer * chain->period + s]
                .kind ==
            chain->segments[chain->firstLayerSegment + s].kind);
}

//===----------------------------------------------------------------------===//
// Cost rates fitted to a profile
//===----------------------------------------------------------------------===//

namespace {
/// Two compute-bound MatMuls and a small one that its bytes dominate (at a
/// GEMM rate near the bandwidth in FLOPs per byte), three memory-bound nodes
/// and a ReduceSum.
constexpr llvm::StringLiteral kMlpText = R"(
graph @mlp2(%x: f32[8,16], %w0: f32[16,16] weight, %w1: f32[16,16] weight, %v: f32[16,1] weight) {
  %ratio = Constant() {value = dense<f32[]: 0.25>} : f32[]
  %train = Constant() {value = dense<bool[]: true>} : bool[]
  %m0 = MatMul(%x, %w0) : f32[8,16]
  %t0 = Tanh(%m0) : f32[8,16]
  %d0, %k0 = Dropout(%t0, %ratio, %train) {seed = 11} : f32[8,16], bool[8,16]
  %h0 = Add(%d0, %x) : f32[8,16]
  %m1 = MatMul(%h0, %w1) : f32[8,16]
  %p = MatMul(%x, %v) : f32[8,1]
  %loss = ReduceSum(%m1) {keepdims = 0} : f32[]
  return %loss, %p
}
)";

/// Removes a file when it goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  TempFile() {
    REQUIRE(!llvm::sys::fs::createTemporaryFile("rates", "json", path));
  }
  ~TempFile() { llvm::sys::fs::remove(path); }
  void write(llvm::StringRef text) const {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    REQUIRE(!ec);
    os << text;
  }
};
} // namespace

TEST_CASE("remat: rates fitted to a profile give its GEMM and memory-bound "
          "totals back") {
  std::unique_ptr<Graph> graph = parseText(kMlpText);
  REQUIRE(graph->getNumNodes() == 9);
  recompute::CostProfile base;
  const double overhead = base.nodeOverheadSeconds;
  // Times built from a bandwidth of 1e7 B/s and a GEMM rate of 1e7 FLOP/s
  // under nodeSeconds' formula: Tanh 1024 B, Dropout 1157 B (a bool mask),
  // Add 1536 B; m0 and m1 4096 FLOPs (their 2 KiB would take less), p 256
  // FLOPs but 608 B. The ReduceSum is under the launch overhead, so it is
  // left out.
  std::vector<double> seconds = {5e-3,                  // %ratio (free)
                                 5e-3,                  // %train (free)
                                 overhead + 4096 / 1e7, // %m0
                                 overhead + 1024 / 1e7, // %t0
                                 overhead + 1157 / 1e7, // %d0
                                 overhead + 1536 / 1e7, // %h0
                                 overhead + 4096 / 1e7, // %m1
                                 overhead + 608 / 1e7,  // %p
                                 1e-6};                 // %loss
  recompute::FittedRates fit = recompute::fitRates(*graph, seconds);
  CHECK(fit.gemmNodes == 3);
  CHECK(fit.memoryBoundNodes == 3);
  CHECK(fit.bytesPerSecond == doctest::Approx(1e7).epsilon(1e-12));
  // FLOPs over time alone would give (8192 + 256) / 880e-6 = 9.6e6.
  CHECK(fit.gemmFlopsPerSecond == doctest::Approx(1e7).epsilon(1e-9));

  // Under the fitted rates each kind's predicted total is its measured one.
  auto totals = [&](const recompute::CostProfile &profile,
                    llvm::ArrayRef<double> times) {
    double gemm[2] = {0, 0}, memory[2] = {0, 0};
    size_t i = 0;
    for (const Node &node : graph->getNodes()) {
      double measured = times[i++];
      if (!(measured > profile.nodeOverheadSeconds) || !std::isfinite(measured))
        continue;
      double predicted = recompute::nodeSeconds(node, profile);
      switch (recompute::getCostKind(node.getOp())) {
      case recompute::CostKind::Gemm:
        gemm[0] += measured;
        gemm[1] += predicted;
        break;
      case recompute::CostKind::MemoryBound:
        memory[0] += measured;
        memory[1] += predicted;
        break;
      case recompute::CostKind::Free:
        CHECK(predicted == 0);
        break;
      }
    }
    CHECK(gemm[1] == doctest::Approx(gemm[0]).epsilon(1e-9));
    CHECK(memory[1] == doctest::Approx(memory[0]).epsilon(1e-9));
  };
  auto profileOf = [&](const recompute::FittedRates &rates) {
    recompute::CostProfile profile;
    profile.gemmFlopsPerSecond = rates.gemmFlopsPerSecond;
    profile.bytesPerSecond = rates.bytesPerSecond;
    return profile;
  };
  totals(profileOf(fit), seconds);
  // p is charged for its bytes.
  CHECK(recompute::nodeSeconds(*graph->lookup("p")->getDefiningNode(),
                               profileOf(fit)) ==
        doctest::Approx(overhead + 608 / 1e7).epsilon(1e-9));

  // Other times: no exact rates behind them, the totals still come back.
  std::vector<double> other = {0,    0,    2.5e-4, 7e-5, 9e-5,
                               3e-5, 6e-4, 4e-5,   2e-6};
  totals(profileOf(recompute::fitRates(*graph, other)), other);

  // A node never timed (+inf) is left out like one under the overhead.
  std::vector<double> untimed = seconds;
  untimed[6] = std::numeric_limits<double>::infinity();
  recompute::FittedRates partial = recompute::fitRates(*graph, untimed);
  CHECK(partial.gemmNodes == 2);
  CHECK(std::isfinite(partial.gemmFlopsPerSecond));
  CHECK(partial.gemmFlopsPerSecond > 0);
  totals(profileOf(partial), untimed);

  // A kind with no time keeps the base rate, and counts no node.
  base.gemmFlopsPerSecond = 123e9;
  base.bytesPerSecond = 45e9;
  std::vector<double> noGemm = seconds;
  noGemm[2] = noGemm[6] = noGemm[7] = 0;
  recompute::FittedRates gemmless = recompute::fitRates(*graph, noGemm, base);
  CHECK(gemmless.gemmNodes == 0);
  CHECK(gemmless.gemmFlopsPerSecond == 123e9);
  CHECK(gemmless.bytesPerSecond == fit.bytesPerSecond);
  std::vector<double> noMemory = seconds;
  noMemory[3] = noMemory[4] = noMemory[5] = 0;
  recompute::FittedRates memoryless =
      recompute::fitRates(*graph, noMemory, base);
  CHECK(memoryless.memoryBoundNodes == 0);
  CHECK(memoryless.bytesPerSecond == 45e9);
  CHECK(memoryless.gemmNodes == 3);
  CHECK(std::isfinite(memoryless.gemmFlopsPerSecond));
}

TEST_CASE("remat: a cost profile's rates reach the nodes it does not name") {
  TempFile file;
  std::unique_ptr<Graph> graph = parseText(kMlpText);
  const Node *matmul = graph->lookup("m1")->getDefiningNode();
  const Node *tanh = graph->lookup("t0")->getDefiningNode();

  file.write(R"({"nodes": [{"name": "m0", "seconds": 0.5}],
                 "rates": {"gemm_flops_per_second": 2048e3,
                           "bytes_per_second": 4096e3}})");
  auto profile = recompute::loadCostProfile(file.path);
  REQUIRE_MESSAGE(bool(profile), errorToString(profile.takeError()));
  CHECK(profile->gemmFlopsPerSecond == 2048e3);
  CHECK(profile->bytesPerSecond == 4096e3);
  CHECK(recompute::nodeSeconds(*graph->lookup("m0")->getDefiningNode(),
                               *profile) == 0.5);
  // m1: 4096 FLOPs at 2048e3 FLOP/s (its 2 KiB at 4096e3 B/s: 0.5 ms).
  CHECK(recompute::nodeSeconds(*matmul, *profile) ==
        doctest::Approx(profile->nodeOverheadSeconds + 2e-3));
  // t0 reads and writes 512 B.
  CHECK(recompute::nodeSeconds(*tanh, *profile) ==
        doctest::Approx(profile->nodeOverheadSeconds + 0.25e-3));

  // A profile without "rates" (or with only one) keeps the built-in ones.
  recompute::CostProfile builtIn;
  file.write(R"({"nodes": []})");
  auto old = recompute::loadCostProfile(file.path);
  REQUIRE_MESSAGE(bool(old), errorToString(old.takeError()));
  CHECK(old->gemmFlopsPerSecond == builtIn.gemmFlopsPerSecond);
  CHECK(old->bytesPerSecond == builtIn.bytesPerSecond);
  file.write(R"({"nodes": [], "rates": {"bytes_per_second": 7e9,
                                        "gemm_nodes": 0}})");
  auto half = recompute::loadCostProfile(file.path);
  REQUIRE_MESSAGE(bool(half), errorToString(half.takeError()));
  CHECK(half->gemmFlopsPerSecond == builtIn.gemmFlopsPerSecond);
  CHECK(half->bytesPerSecond == 7e9);

  // Malformed rates and node times are errors that say what is wrong.
  struct Bad {
    const char *json, *message;
  };
  for (const Bad &bad : {
           Bad{R"({"nodes": [], "rates": [1]})", "\"rates\" must be an object"},
           Bad{R"({"nodes": [], "rates": {"bytes_per_second": -1}})",
               "rates.bytes_per_second must be a finite number of at least 1 per second"},
           Bad{R"({"nodes": [], "rates": {"bytes_per_second": 0}})",
               "rates.bytes_per_second must be a finite number of at least 1 per second"},
           Bad{R"({"nodes": [], "rates": {"gemm_flops_per_second": 0}})",
               "rates.gemm_flops_per_second must be a finite number of at least 1 per second"},
           Bad{R"({"nodes": [], "rates": {"gemm_flops_per_second": "fast"}})",
               "rates.gemm_flops_per_second must be a finite number of at least 1 per second"},
           Bad{R"({"nodes": [], "rates": {"gemm_flops_per_second": 1e999}})",
               "rates.gemm_flops_per_second must be a finite number of at least 1 per second"},
           // Positive but denormal: predicted seconds would overflow to inf.
           Bad{R"({"nodes": [], "rates": {"bytes_per_second": 1e-310}})",
               "rates.bytes_per_second must be a finite number of at least 1 per second"},
           Bad{R"({"nodes": [], "rates": {"gemm_flops_per_second": 0.5}})",
               "rates.gemm_flops_per_second must be a finite number of at least 1 per second"},
           Bad{R"({"nodes": [{"name": "m0", "seconds": 1e999}]})",
               "finite, non-negative \"seconds\""},
           Bad{R"({"nodes": [{"name": "m0", "seconds": -1}]})",
               "finite, non-negative \"seconds\""},
       }) {
    file.write(bad.json);
    auto loaded = recompute::loadCostProfile(file.path);
    REQUIRE_MESSAGE(!loaded, std::string(bad.json));
    std::string message = errorToString(loaded.takeError());
    CHECK_MESSAGE(llvm::StringRef(message).contains(bad.message),
                  bad.json << " gave: " << message);
  }
}

//===----------------------------------------------------------------------===//
// The chunked loss head (Note [Chunked loss head])
//===----------------------------------------------------------------------===//

namespace {

/// \returns how many values of \p graph are [tokens, classes].
unsigned countWholeScores(const Graph &graph, int64_t tokens,
                          int64_t classes) {
  unsigned count = 0;
  for (const Node &node : graph.getNodes())
    for (const Value *result : node.getResults())
      if (result->getType().getDims() == llvm::ArrayRef<int64_t>{tokens, classes})
        ++count;
  return count;
}

/// The training step of the BERT config at \p path, with \p bind.
std::unique_ptr<Graph> bertStepAt(const std::string &path, const char *bind) {
  session::LoadOptions options;
  options.bind = bind;
  auto graph = session::loadModel(path, options);
  REQUIRE_MESSAGE(bool(graph), path);
  return trainingStep(std::move(*graph));
}

std::unique_ptr<Graph> bertStep(const char *model, const char *bind) {
  return bertStepAt(std::string(REMAT_TEST_DIR "/../models/") + model + ".json",
                    bind);
}

/// Runs remat with \p options and plan-memory on a copy of \p step; checks
/// no [tokens, classes] value is left when \p chunked, and every output
/// against \p reference bit for bit. \returns the planned peak.
uint64_t checkChunked(const Graph &step, const runtime::RunResult &reference,
                      llvm::StringRef options, bool chunked, int64_t tokens,
                      llvm::StringRef what) {
  std::unique_ptr<Graph> copy = step.clone();
  std::string pipeline = "remat{" + options.str() + "},plan-memory";
  INFO(what << " " << pipeline);
  llvm::Error err = runPasses(*copy, pipeline);
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  unsigned whole = countWholeScores(*copy, tokens, 30522);
  if (chunked)
    CHECK(whole == 0);
  else
    CHECK(whole > 0);
  runtime::RunResult result = run(*copy);
  CHECK(result.peakBytes == copy->getMemoryPlan()->arenaBytes);
  int differs = firstDifference(reference, result);
  CHECK_MESSAGE(differs == -1,
                "output " << differs << " ('"
                          << step.getOutputs()[size_t(std::max(differs, 0))]
                                 ->getName()
                                 .str()
                          << "') is not bitwise equal");
  return plannedPeak(*copy);
}

runtime::RunResult runUnchanged(const Graph &step) {
  std::unique_ptr<Graph> planned = step.clone();
  llvm::Error err = runPasses(*planned, "plan-memory");
  REQUIRE(!err);
  return run(*planned);
}

} // namespace

TEST_CASE("remat: the chunked loss head gives the whole head's bits") {
  struct Case {
    const char *model, *bind, *options;
    int64_t tokens;
  };
  for (const Case &c : {
           // 512 tokens: two chunks of 256.
           Case{"bert-tiny", "batch=4,seq=128", "strategy=none chunk-loss=2",
                512},
           // 300 tokens: 256 and 44 (the last chunk is not a whole block).
           Case{"bert-tiny", "batch=3,seq=100", "strategy=none chunk-loss=2",
                300},
           // 1024 tokens asked in 3: chunks of 512 (whole blocks), two.
           Case{"bert-tiny", "batch=8,seq=128",
                "strategy=every-layer chunk-loss=3", 1024},
           Case{"bert-mini", "batch=2,seq=384", "strategy=sqrt chunk-loss=4",
                768},
       }) {
    std::unique_ptr<Graph> step = bertStep(c.model, c.bind);
    runtime::RunResult reference = runUnchanged(*step);
    checkChunked(*step, reference, c.options, /*chunked=*/true, c.tokens,
                 std::string(c.model) + " " + c.bind);
  }
}

TEST_CASE("remat: auto chunks the loss head when the budget needs it, and "
          "budgets stay monotone") {
  std::unique_ptr<Graph> step = bertStep("bert-tiny", "batch=4,seq=128");
  runtime::RunResult reference = runUnchanged(*step);
  std::unique_ptr<Graph> planned = step->clone();
  REQUIRE(!runPasses(*planned, "plan-memory"));
  uint64_t base = plannedPeak(*planned);
  // Unchunked, no plan goes below this; the logits keep the floor up.
  uint64_t wholeFloor = smallestPeak(*step);
  // No remat fits: nothing is chunked.
  checkChunked(*step, reference, "budget=" + std::to_string(base),
               /*chunked=*/false, 512, "at no remat's peak");
  // Below the whole head's floor only the chunked head fits.
  std::unique_ptr<Graph> off = step->clone();
  llvm::Error offErr = runPasses(
      *off, "remat{chunk-loss=off budget=" + std::to_string(wholeFloor - 1) +
                "},plan-memory");
  REQUIRE(bool(offErr));
  CHECK(llvm::StringRef(errorToString(std::move(offErr)))
            .contains("the smallest feasible planned peak is"));
  uint64_t previous = base;
  for (double fraction : {0.8, 0.6, 0.4, 0.2, 0.0}) {
    uint64_t budget = wholeFloor - 1 -
                      uint64_t(double(wholeFloor - 1) * (1 - fraction) * 0.5);
    std::unique_ptr<Graph> copy = step->clone();
    llvm::Error err = runPasses(
        *copy, "remat{budget=" + std::to_string(budget) + "},plan-memory");
    if (err) {
      // Below the chunked floor too: the error names a smaller peak.
      std::string message = errorToString(std::move(err));
      CHECK_MESSAGE(llvm::StringRef(message).contains("loss head in 2 chunks"),
                    message);
      break;
    }
    uint64_t peak = checkChunked(*step, reference,
                                 "budget=" + std::to_string(budget),
                                 /*chunked=*/true, 512, "below the floor");
    CHECK(peak <= budget);
    CHECK(peak <= previous);
    previous = peak;
  }
  CHECK(previous < wholeFloor);
}

TEST_CASE("remat: chunk-loss rejects what it cannot do") {
  std::unique_ptr<Graph> step = bertStep("bert-tiny", "batch=2,seq=16");
  struct Bad {
    const char *options, *message;
  };
  for (const Bad &bad : {
           Bad{"chunk-loss=0", "chunk-loss: expected auto, off or a number of "
                               "chunks of at least 1, got '0'"},
           Bad{"chunk-loss=some", "got 'some'"},
           Bad{"chunk-loss=-2", "got '-2'"},
           // 32 tokens cannot be split in whole blocks of 256.
           Bad{"chunk-loss=2",
               "chunk-loss=2: the loss head of @bert is left whole: "
               "%loss: its 32 tokens make fewer than two chunks"},
       }) {
    std::unique_ptr<Graph> copy = step->clone();
    llvm::Error err = runPasses(
        *copy, "remat{strategy=none " + std::string(bad.options) + "}");
    REQUIRE_MESSAGE(bool(err), bad.options);
    std::string message = errorToString(std::move(err));
    CHECK_MESSAGE(llvm::StringRef(message).contains(bad.message),
                  bad.options << " gave: " << message);
  }
  // A head that is not a Gemm is left whole, and says so.
  std::unique_ptr<Graph> matmul = trainingStep(parseText(R"(
graph @head(%x: f32[512,8], %w: f32[8,16] weight, %labels: i64[512]) {
  %s = MatMul(%x, %w) : f32[512,16]
  %loss = SoftmaxCrossEntropyLoss(%s, %labels) : f32[]
  return %loss
})"));
  std::string whyNot;
  CHECK(!recompute::findLossHead(*matmul, whyNot));
  CHECK(whyNot == "%loss: its scores come from %s (MatMul), not a Gemm");
  llvm::Error err = runPasses(*matmul, "remat{strategy=none chunk-loss=2}");
  REQUIRE(bool(err));
  CHECK(errorToString(std::move(err)) ==
        "pass 'remat' failed: chunk-loss=2: the loss head of @head is left "
        "whole: %loss: its scores come from %s (MatMul), not a Gemm");
}

TEST_CASE("remat: nested recompute goes below every layer's working set, "
          "bitwise") {
  // bert-mini at 768 tokens: every-layer holds one layer's whole rebuilt
  // stash during its backward; cut again at its 4 segments, one segment's.
  std::unique_ptr<Graph> step = bertStep("bert-mini", "batch=2,seq=384");
  runtime::RunResult reference = runUnchanged(*step);
  std::unique_ptr<Graph> copy = step->clone();
  auto problem = recompute::prepareRematProblem(*copy, "", {});
  REQUIRE(bool(problem));
  recompute::Solver &solver = *(*problem)->solver;
  // The nested plans' floor; with plans rebuilt per use, below.
  solver.setPerUsePlans(false);
  auto everyLayer = solver.solve(recompute::Strategy::EveryLayer, std::nullopt);
  REQUIRE(bool(everyLayer));
  REQUIRE(bool(*everyLayer));
  auto smallest = solver.smallestPlan();
  REQUIRE(bool(smallest));
  INFO("every-layer " << (*everyLayer)->plannedPeakBytes << " B, smallest "
                      << smallest->plannedPeakBytes << " B ("
                      << smallest->strategy << ")");
  CHECK(smallest->strategy == "nested");
  CHECK(!smallest->nestedNames.empty());
  CHECK(smallest->plannedPeakBytes < (*everyLayer)->plannedPeakBytes);
  uint64_t peak = checkChunked(
      *step, reference,
      "chunk-loss=off budget=" + std::to_string(smallest->plannedPeakBytes),
      /*chunked=*/false, 768, "nested");
  CHECK(peak == smallest->plannedPeakBytes);

  std::unique_ptr<Graph> again = step->clone();
  auto perUse = recompute::prepareRematProblem(*again, "", {});
  REQUIRE(bool(perUse));
  auto lowest = (*perUse)->solver->smallestPlan();
  REQUIRE(bool(lowest));
  INFO("with plans rebuilt per use: " << lowest->plannedPeakBytes << " B ("
                                      << lowest->strategy << ")");
  CHECK(lowest->plannedPeakBytes <= smallest->plannedPeakBytes);
  peak = checkChunked(
      *step, reference,
      "chunk-loss=off budget=" + std::to_string(lowest->plannedPeakBytes),
      /*chunked=*/false, 768, lowest->strategy);
  CHECK(peak == lowest->plannedPeakBytes);
}

TEST_CASE("remat: a clone costs its original's measured time, whatever its "
          "name") {
  std::unique_ptr<Graph> graph = parseText(kMlpText);
  Node *m0 = graph->lookup("m0")->getDefiningNode();
  recompute::CostProfile profile;
  profile.nodeSeconds["m0"] = 0.5;
  llvm::DenseMap<const Value *, Value *> map;
  Node *clone =
      graph->cloneNode(*m0, map, nullptr, Stage::Recompute, ".again");
  CHECK(clone->getOrigin() == m0);
  CHECK(recompute::nodeSeconds(*clone, profile) == 0.5);
  // A node named like a clone that is none costs what it computes.
  Node *lookalike =
      graph->cloneNode(*m0, map, nullptr, Stage::Recompute, ".remat");
  lookalike->setOrigin(nullptr);
  CHECK(lookalike->getResult(0)->getName() == "m0.remat");
  CHECK(recompute::nodeSeconds(*lookalike, profile) != 0.5);
}

//===----------------------------------------------------------------------===//
// The chunked attention core (Note [Chunked attention core])
//===----------------------------------------------------------------------===//

TEST_CASE("remat: a chunk's Dropout seed draws the whole Dropout's elements") {
  for (uint64_t seed : {uint64_t{0}, uint64_t{101}, ~uint64_t{0} - 6})
    for (uint64_t offset :
         {uint64_t{0}, uint64_t{1}, uint64_t{786432}, uint64_t{1} << 40}) {
      uint64_t chunk = recompute::getChunkSeed(seed, offset);
      for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{12345}})
        CHECK_MESSAGE(
            runtime::dropoutBits24(runtime::dropoutKey(chunk), i) ==
                runtime::dropoutBits24(runtime::dropoutKey(seed), offset + i),
            "seed " << seed << " offset " << offset << " i " << i);
    }
}

namespace {

/// \returns how many values of \p graph have the dims \p dims.
unsigned countValuesOf(const Graph &graph, llvm::ArrayRef<int64_t> dims) {
  unsigned count = 0;
  for (const Node &node : graph.getNodes())
    for (const Value *result : node.getResults())
      if (result->getType().getDims() == dims)
        ++count;
  return count;
}

} // namespace

TEST_CASE("remat: chunked attention cores give the whole cores' bits, and no "
          "[batch, heads, seq, seq] value is left, also with their MatMuls "
          "folded into remat.PermutedMatMul") {
  struct Case {
    const char *model, *bind, *options;
    std::vector<int64_t> scores;
  };
  for (const Case &c : {
           Case{"bert-tiny",
                "batch=4,seq=48",
                "strategy=none chunk-attention=2",
                {4, 2, 48, 48}},
           // 3 chunks of a batch of 4: 2 and 2.
           Case{"bert-tiny",
                "batch=4,seq=48",
                "strategy=every-layer chunk-attention=3",
                {4, 2, 48, 48}},
           // Chunks of one entry, with the loss head chunked too.
           Case{"bert-tiny",
                "batch=5,seq=128",
                "strategy=sqrt chunk-attention=5 chunk-loss=2",
                {5, 2, 128, 128}},
           Case{"bert-mini",
                "batch=3,seq=96",
                "strategy=chain-dp budget=90% chunk-attention=2",
                {3, 4, 96, 96}},
       }) {
    std::unique_ptr<Graph> step = bertStep(c.model, c.bind);
    REQUIRE(countValuesOf(*step, c.scores) > 0);
    runtime::RunResult reference = runUnchanged(*step);
    // remat-run's CPU pipeline folds the Transposes first: then the cores'
    // MatMuls, forward and backward, are remat.PermutedMatMul.
    for (bool fold : {false, true}) {
      std::string pipeline = std::string(fold ? "fold-transpose," : "") +
                             "remat{" + c.options + "},plan-memory";
      INFO(std::string(c.model)
           << " " << std::string(c.bind) << " " << pipeline);
      std::unique_ptr<Graph> copy = step->clone();
      if (fold) {
        llvm::Error err = runPasses(*copy, "fold-transpose");
        REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
        std::string whyNot;
        std::vector<recompute::AttentionCore> cores =
            recompute::findAttentionCores(*copy, whyNot);
        CHECK(whyNot.empty());
        REQUIRE(!cores.empty());
        for (const recompute::AttentionCore &core : cores) {
          CHECK(core.forward.front()->getOp() == OpKind::PermutedMatMul);
          CHECK(core.forward.back()->getOp() == OpKind::PermutedMatMul);
          CHECK(llvm::count_if(core.backward, [](const Node *node) {
                  return node->getOp() == OpKind::PermutedMatMul;
                }) == 4);
        }
        copy = step->clone();
      }
      llvm::Error err = runPasses(*copy, pipeline);
      REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
      CHECK(countValuesOf(*copy, c.scores) == 0);
      runtime::RunResult result = run(*copy);
      int differs = firstDifference(reference, result);
      CHECK_MESSAGE(differs == -1,
                    "output "
                        << differs << " ('"
                        << step->getOutputs()[size_t(std::max(differs, 0))]
                               ->getName()
                               .str()
                        << "') is not bitwise equal");
    }
  }
}

TEST_CASE("remat: a remat.PermutedMatMul in an attention core reads each "
          "operand's batch where its perm puts it, bitwise") {
  // Q stored sequence first, [seq, batch, dim], and no weight: fold-transpose
  // makes the scores remat.PermutedMatMul(Q, K^T) {perm_a = [1, 0, 2]} and
  // dK^T's remat.PermutedMatMul(Q, dS) {perm_a = [1, 2, 0]}: each chunk
  // slices Q's dim 1.
  const char *text = R"(
graph @seqfirst(%q: f32[8,5,16], %k: f32[5,16,8] weight, %v: f32[5,8,16] weight) {
  %qb = Transpose(%q) {perm = [1, 0, 2]} : f32[5,8,16]
  %kt = Mul(%k, %k) : f32[5,16,8]
  %s = MatMul(%qb, %kt) : f32[5,8,8]
  %p = Softmax(%s) {axis = -1} : f32[5,8,8]
  %o = MatMul(%p, %v) : f32[5,8,16]
  %o2 = Mul(%o, %o) : f32[5,8,16]
  %loss = ReduceSum(%o2) {keepdims = 0} : f32[]
  return %loss
})";
  std::unique_ptr<Graph> step = trainingStep(parseText(text));
  runtime::RunResult reference = runUnchanged(*step);
  const std::vector<int64_t> scores{5, 8, 8};
  for (const char *chunks : {"2", "5"}) {
    INFO("chunk-attention=" << std::string(chunks));
    std::unique_ptr<Graph> copy = step->clone();
    llvm::Error err = runPasses(*copy, "fold-transpose");
    REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
    std::string whyNot;
    std::vector<recompute::AttentionCore> cores =
        recompute::findAttentionCores(*copy, whyNot);
    REQUIRE_MESSAGE(cores.size() == 1, whyNot);
    const Node &product = *cores[0].forward.front();
    REQUIRE(product.getOp() == OpKind::PermutedMatMul);
    CHECK(product.getOperand(0) == copy->lookup("q"));
    err = runPasses(*copy, "remat{strategy=none chunk-attention=" +
                               std::string(chunks) + "},plan-memory");
    REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
    CHECK(countValuesOf(*copy, scores) == 0);
    CHECK(firstDifference(reference, run(*copy)) == -1);
  }
}

TEST_CASE("remat: chunk-attention rejects what it cannot do") {
  struct Bad {
    const char *bind, *options, *message;
  };
  for (const Bad &bad : {
           Bad{"batch=2,seq=16", "chunk-attention=0",
               "chunk-attention: expected auto, off or a number of chunks of "
               "at least 1, got '0'"},
           Bad{"batch=2,seq=16", "chunk-attention=half", "got 'half'"},
           Bad{"batch=2,seq=16", "chunk-attention=1",
               "chunk-attention=1: no attention core of @bert can be chunked: "
               "a batch of 2 in 1 chunk is left whole"},
           Bad{"batch=1,seq=16", "chunk-attention=2",
               "chunk-attention=2: no attention core of @bert can be chunked: "
               "%bert.encoder.layer.0.attention.self.attention_probs: its "
               "batch of 1 makes fewer than two chunks"},
       }) {
    std::unique_ptr<Graph> step = bertStep("bert-tiny", bad.bind);
    llvm::Error err = runPasses(*step, "remat{strategy=none " +
                                           std::string(bad.options) + "}");
    REQUIRE_MESSAGE(bool(err), bad.options);
    std::string message = errorToString(std::move(err));
    CHECK_MESSAGE(llvm::StringRef(message).contains(bad.message),
                  bad.options << " gave: " << message);
  }
  // A softmax that is not between two batched MatMuls is left whole.
  std::unique_ptr<Graph> plain = trainingStep(parseText(R"(
graph @plain(%x: f32[4,8,16], %w: f32[16,16] weight) {
  %s = MatMul(%x, %w) : f32[4,8,16]
  %p = Softmax(%s) {axis = -1} : f32[4,8,16]
  %loss = ReduceSum(%p) {keepdims = 0} : f32[]
  return %loss
})"));
  std::string whyNot;
  CHECK(recompute::findAttentionCores(*plain, whyNot).empty());
  CHECK(whyNot == "%p: its probabilities are not read by one MatMul(P, V) in "
                  "forward");
  // Scores whose dim 0 a remat.PermutedMatMul takes from a matrix dim of its
  // product: each batch entry of %st reads every entry of %q.
  std::unique_ptr<Graph> moved = parseText(R"(
graph @moved(%q: f32[4,4,8] weight, %k: f32[4,8,4] weight, %v: f32[4,4,8] weight) {
  %st = remat.PermutedMatMul(%q, %k) {perm_y = [1, 0, 2]} : f32[4,4,4]
  %p = Softmax(%st) {axis = -1} : f32[4,4,4]
  %o = MatMul(%p, %v) : f32[4,4,8]
  %loss = ReduceSum(%o) {keepdims = 0} : f32[]
  %one = Constant() {value = dense<f32[4,4,8]: 1.0>} : f32[4,4,8] bwd
  %p_grad = remat.PermutedMatMul(%one, %v) {perm_b = [0, 2, 1]} : f32[4,4,4] bwd
  %v_grad = remat.PermutedMatMul(%p, %one) {perm_a = [0, 2, 1]} : f32[4,4,8] bwd grad(%v)
  %st_grad = remat.SoftmaxGrad(%p_grad, %p) {axis = 2} : f32[4,4,4] bwd
  %q_grad = remat.PermutedMatMul(%st_grad, %k) {perm_a = [1, 0, 2], perm_b = [0, 2, 1]} : f32[4,4,8] bwd grad(%q)
  %k_grad = remat.PermutedMatMul(%q, %st_grad) {perm_a = [0, 2, 1], perm_b = [1, 0, 2]} : f32[4,8,4] bwd grad(%k)
  %q_sq = Mul(%q_grad, %q_grad) : f32[4,4,8] bwd
  return %loss, %q_sq, %k_grad, %v_grad
})");
  CHECK(recompute::findAttentionCores(*moved, whyNot).empty());
  CHECK(whyNot == "%p: the MatMul %st (PermutedMatMul) permutes the batch dim: "
                  "its result's dim 0 is a matrix dim of its product");
  // The forward keeps the batch, but a backward product reads the scores'
  // gradient with its batch in dim 1 (mixing the entries of a chunk's dim 0).
  std::unique_ptr<Graph> mixed = parseText(R"(
graph @mixed(%q: f32[4,4,8] weight, %k: f32[4,8,4] weight, %v: f32[4,4,8] weight) {
  %s = MatMul(%q, %k) : f32[4,4,4]
  %p = Softmax(%s) {axis = -1} : f32[4,4,4]
  %o = MatMul(%p, %v) : f32[4,4,8]
  %loss = ReduceSum(%o) {keepdims = 0} : f32[]
  %one = Constant() {value = dense<f32[4,4,8]: 1.0>} : f32[4,4,8] bwd
  %p_grad = remat.PermutedMatMul(%one, %v) {perm_b = [0, 2, 1]} : f32[4,4,4] bwd
  %v_grad = remat.PermutedMatMul(%p, %one) {perm_a = [0, 2, 1]} : f32[4,4,8] bwd grad(%v)
  %s_grad = remat.SoftmaxGrad(%p_grad, %p) {axis = 2} : f32[4,4,4] bwd
  %q_grad = remat.PermutedMatMul(%s_grad, %k) {perm_a = [1, 0, 2], perm_b = [0, 2, 1]} : f32[4,4,8] bwd grad(%q)
  %k_grad = remat.PermutedMatMul(%q, %s_grad) {perm_a = [0, 2, 1]} : f32[4,8,4] bwd grad(%k)
  %q_sq = Mul(%q_grad, %q_grad) : f32[4,4,8] bwd
  return %loss, %q_sq, %k_grad, %v_grad
})");
  CHECK(recompute::findAttentionCores(*mixed, whyNot).empty());
  CHECK(whyNot == "%p: the MatMul %q_grad (PermutedMatMul) reads the core's "
                  "%s_grad with its batch in dim 1, not dim 0");
}

TEST_CASE("remat: auto chunks the attention cores when the budget needs it, "
          "and budgets stay monotone") {
  // tests/tools/Inputs/bert-attention.json: its [8, 4, 128, 128] scores, not
  // the loss head, set the floor (14.80 MiB without remat, 13.97 MiB with
  // the cores whole, 5.23 MiB with them chunked).
  std::unique_ptr<Graph> step = bertStepAt(
      REMAT_TEST_DIR "/tools/Inputs/bert-attention.json", "batch=8,seq=128");
  const std::vector<int64_t> scores{8, 4, 128, 128};
  runtime::RunResult reference = runUnchanged(*step);
  std::unique_ptr<Graph> planned = step->clone();
  REQUIRE(!runPasses(*planned, "plan-memory"));
  uint64_t base = plannedPeak(*planned);
  auto floorOf = [&](llvm::StringRef options) {
    std::unique_ptr<Graph> copy = step->clone();
    llvm::Error err =
        runPasses(*copy, "remat{budget=1 " + options.str() + "}");
    REQUIRE(bool(err));
    std::string message = errorToString(std::move(err));
    llvm::StringRef rest =
        llvm::StringRef(message).split("planned peak is ").second;
    uint64_t bytes = 0;
    REQUIRE_MESSAGE(!rest.split('(').second.split(' ').first.getAsInteger(
                        10, bytes),
                    message);
    return bytes;
  };
  uint64_t wholeFloor = floorOf("chunk-attention=off");
  uint64_t chunkedFloor = floorOf("");
  INFO("no remat " << base << " B, floor with the cores whole " << wholeFloor
                   << " B, chunked " << chunkedFloor << " B");
  REQUIRE(chunkedFloor < wholeFloor);
  uint64_t previous = base;
  for (int step16 = 0; step16 <= 16; ++step16) {
    // From no remat's peak down to just below the chunked floor.
    uint64_t budget =
        base - (base - chunkedFloor + 1) * uint64_t(step16) / 16;
    std::unique_ptr<Graph> copy = step->clone();
    INFO("budget " << budget);
    llvm::Error err = runPasses(
        *copy, "remat{budget=" + std::to_string(budget) + "},plan-memory");
    if (budget < chunkedFloor) {
      REQUIRE(bool(err));
      CHECK(llvm::StringRef(errorToString(std::move(err)))
                .contains("2 attention cores chunked"));
      continue;
    }
    REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
    uint64_t peak = plannedPeak(*copy);
    CHECK(peak <= budget);
    CHECK(peak <= previous);
    previous = peak;
    // Below the whole cores' floor no [batch, heads, seq, seq] value is left.
    if (budget < wholeFloor)
      CHECK(countValuesOf(*copy, scores) == 0);
    runtime::RunResult result = run(*copy);
    int differs = firstDifference(reference, result);
    CHECK_MESSAGE(differs == -1,
                  "output " << differs << " ('"
                            << step->getOutputs()[size_t(std::max(differs, 0))]
                                   ->getName()
                                   .str()
                            << "') is not bitwise equal");
  }
}
