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
#include "passes/remat/CostModel.h"
#include "passes/remat/Segments.h"
#include "passes/remat/Solver.h"
#include "runtime/Backend.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace remat;
using namespace remat::ir;
using namespace remat::passes;

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

//===----------------------------------------------------------------------===//
// Seeded random training graphs with dropout
//===----------------------------------------------------------------------===//

/// A random chain of blocks over activations f32[R, C]: each block is a
/// MatMul with a weight, then some of bias Add, Relu/Tanh/Sigmoid/Exp-free
/// elementwise ops, Softmax, LayerNormalization, Dropout (own seed), and a
/// residual Add; side branches join back. The loss is a
/// SoftmaxCrossEntropyLoss or a ReduceSum.
std::string randomTrainingGraph(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  int64_t rows = 2 + int64_t(pick(4)), cols = 4 + 4 * int64_t(pick(3));
  std::string type = "f32[" + std::to_string(rows) + "," +
                     std::to_string(cols) + "]";
  std::string weightType =
      "f32[" + std::to_string(cols) + "," + std::to_string(cols) + "]";
  std::string biasType = "f32[" + std::to_string(cols) + "]";
  size_t blocks = 1 + pick(6);
  std::string head = "graph @random(%x: " + type;
  std::string body;
  int counter = 0;
  auto fresh = [&] { return "%v" + std::to_string(counter++); };
  std::string current = "%x";
  body += "  %ratio = Constant() {value = dense<f32[]: 0.25>} : f32[]\n";
  body += "  %train = Constant() {value = dense<bool[]: true>} : bool[]\n";
  for (size_t b = 0; b < blocks; ++b) {
    std::string w = "%w" + std::to_string(b);
    head += ", " + w + ": " + weightType + " weight";
    std::string blockInput = current;
    std::string v = fresh();
    body += "  " + v + " = MatMul(" + current + ", " + w + ") : " + type + "\n";
    current = v;
    size_t ops = 1 + pick(5);
    for (size_t k = 0; k < ops; ++k) {
      std::string out = fresh();
      switch (pick(7)) {
      case 0: {
        std::string bias = "%b" + std::to_string(b) + "_" + std::to_string(k);
        head += ", " + bias + ": " + biasType + " weight";
        body += "  " + out + " = Add(" + current + ", " + bias + ") : " +
                type + "\n";
        break;
      }
      case 1:
        body += "  " + out + " = " +
                std::string(pick(2) ? "Tanh" : "Sigmoid") + "(" + current +
                ") : " + type + "\n";
        break;
      case 2:
        body += "  " + out + " = Softmax(" + current + ") {axis = -1} : " +
                type + "\n";
        break;
      case 3: {
        std::string scale = "%g" + std::to_string(b) + "_" + std::to_string(k);
        head += ", " + scale + ": " + biasType + " weight";
        body += "  " + out + " = LayerNormalization(" + current + ", " +
                scale + ") {axis = -1, epsilon = 0.00001} : " + type + "\n";
        break;
      }
      case 4:
        body += "  " + out + ", " + out + "_mask = Dropout(" + current +
                ", %ratio, %train) {seed = " + std::to_string(seed * 31 + k) +
                "} : " + type + ", bool[" + std::to_string(rows) + "," +
                std::to_string(cols) + "]\n";
        break;
      case 5:
        body += "  " + out + " = Mul(" + current + ", " + current + ") : " +
                type + "\n";
        break;
      default:
        body += "  " + out + " = Add(" + current + ", " + blockInput + ") : " +
                type + "\n";
        break;
      }
      current = out;
    }
  }
  std::string loss = fresh();
  if (pick(2)) {
    head += ", %labels: i64[" + std::to_string(rows) + "]";
    body += "  " + loss + " = SoftmaxCrossEntropyLoss(" + current +
            ", %labels) {reduction = \"mean\"} : f32[]\n";
  } else {
    body += "  " + loss + " = ReduceSum(" + current + ") {keepdims = 0} : f32[]\n";
  }
  return head + ") {\n" + body + "  return " + loss + "\n}\n";
}

} // namespace

TEST_CASE("remat: 200 random training graphs with dropout, every strategy, "
          "bitwise") {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
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
  for (uint64_t seed = 1; seed <= 40; ++seed)
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
               "rates.bytes_per_second must be a positive number"},
           Bad{R"({"nodes": [], "rates": {"bytes_per_second": 0}})",
               "rates.bytes_per_second must be a positive number"},
           Bad{R"({"nodes": [], "rates": {"gemm_flops_per_second": 0}})",
               "rates.gemm_flops_per_second must be a positive number"},
           Bad{R"({"nodes": [], "rates": {"gemm_flops_per_second": "fast"}})",
               "rates.gemm_flops_per_second must be a positive number"},
           Bad{R"({"nodes": [], "rates": {"gemm_flops_per_second": 1e999}})",
               "rates.gemm_flops_per_second must be a positive number"},
           Bad{R"({"nodes": [{"name": "m0", "seconds": 1e999}]})",
               "finite, non-negative \"seconds\""},
           Bad{R"({"nodes": [{"name": "m0", "seconds": -1}]})",
               "finite, non-negative \"seconds\""},
       }) {
    file.write(bad.json);
    auto loaded = recompute::loadCostProfile(file.path);
    REQUIRE_MESSAGE(!loaded, bad.json);
    std::string message = errorToString(loaded.takeError());
    CHECK_MESSAGE(llvm::StringRef(message).contains(bad.message),
                  bad.json << " gave: " << message);
  }
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
