//===- tests/unit/MemoryTest.cpp - Liveness, schedule, plan-memory, arena -===//
#include "driver/Plots.h"
#include "session/MemoryReport.h"
#include "session/ModelLoader.h"
#include "driver/RunDriver.h"
#include "frontends/bert/BertBuilder.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/Liveness.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "runtime/Backends.h"
#include "runtime/Executor.h"
#include "runtime/cpu/Evaluator.h"

#include <doctest/doctest.h>

#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

using namespace remat;
using namespace remat::ir;
using namespace remat::passes;

namespace {

std::unique_ptr<Graph> parse(llvm::StringRef text) {
  auto graph = parseGraph(text, "test");
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  llvm::Error err = verify(**graph);
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  return std::move(*graph);
}

/// Five nodes over f32[16] (64 bytes each); the backward reads %a.
///   pos  node                live after it runs      live bytes
///   0    %a = Mul(x, w)      a                       64
///   1    %b = Relu(a)        a b                     128
///   2    %l = Exp(b)         a b l                   192  <- peak
///   3    %g = Mul(l, a) bwd  a l g                   192
///   4    %w_grad = Neg(g)    l g w_grad              192
const char *kSmall = R"(graph @small(%x: f32[16], %w: f32[16] weight) {
  %a = Mul(%x, %w) : f32[16]
  %b = Relu(%a) : f32[16]
  %l = Exp(%b) : f32[16]
  %g = Mul(%l, %a) : f32[16] bwd
  %w_grad = Neg(%g) : f32[16] bwd grad(%w)
  return %l, %w_grad
}
)";

/// True if \p a and \p b may share memory while both live: \p b is an
/// in-place result over \p a (defined at the node where \p a dies, by an
/// elementwise in-place op, with \p a's type; or by a shape-only op whose
/// data operand \p a is, with \p a's dtype and bytes; or by ScatterElements
/// over its data operand), at the same offset.
/// Only an elementwise op (or a row-wise one that reads a row before
/// writing it) may overwrite its operand: element i is read before it is
/// written, and by no one else; a shape-only op's result is
/// its operand's bytes as they are.
bool isInPlacePair(const Liveness &liveness, const MemoryPlan &plan,
                   const Value *a, const Value *b) {
  if (*plan.lookup(a) != *plan.lookup(b))
    return false;
  auto pair = [&](const Value *from, const Value *to) {
    const Node *node = to->getDefiningNode();
    if (liveness.getRange(from).lastUse != liveness.getRange(to).def ||
        node->getNumResults() != 1)
      return false;
    if (hasTrait(node->getOp(), kShapeOnly))
      return node->getOperand(0) == from &&
             from->getType().getDType() == to->getType().getDType() &&
             Liveness::getBytes(from) == Liveness::getBytes(to);
    if (node->getOp() == OpKind::ScatterElements)
      return node->getOperand(0) == from && from->getType() == to->getType();
    return llvm::is_contained(node->getOperands(), from) &&
           (hasTrait(node->getOp(), kElementwise) ||
            node->getOp() == OpKind::SoftmaxCrossEntropyGrad ||
            node->getOp() == OpKind::SoftmaxGrad ||
            node->getOp() == OpKind::LayerNormalizationGrad) &&
           hasTrait(node->getOp(), kInPlace) &&
           from->getType() == to->getType();
  };
  return pair(a, b) || pair(b, a);
}

/// Checks every plan invariant: alignment, inside the arena, arena >= peak,
/// and no two simultaneously live values overlap (all pairs when \p allPairs,
/// else a sweep over the schedule with an offset-ordered active set).
void checkPlan(const Graph &graph, bool allPairs) {
  const MemoryPlan *plan = graph.getMemoryPlan();
  REQUIRE(plan);
  Liveness liveness(graph);
  llvm::ArrayRef<const Value *> values = liveness.getValues();
  // The arena holds at least the peak, where an in-place result and the
  // operand it overwrites count once: Liveness with the plan equals
  // Liveness without it less the storage of every pair found by offsets,
  // and the plan records exactly those pairs.
  {
    Liveness plain(graph, liveness.getSchedule());
    std::vector<int64_t> shared(liveness.getSchedule().size(), 0);
    size_t pairs = 0;
    for (const Value *value : values)
      for (const Value *operand :
           llvm::SmallPtrSet<const Value *, 4>(
               value->getDefiningNode()->getOperands().begin(),
               value->getDefiningNode()->getOperands().end()))
        if (!operand->isGraphInput() && Liveness::getBytes(operand) != 0 &&
            isInPlacePair(plain, *plan, operand, value)) {
          shared[plain.getRange(value).def] +=
              int64_t(Liveness::getBytes(operand));
          CHECK(plan->inPlaceOf.lookup(value) == operand);
          ++pairs;
        }
    CHECK(pairs == plan->inPlaceOf.size());
    for (size_t i = 0; i < shared.size(); ++i)
      CHECK(liveness.getLiveBytes()[i] ==
            plain.getLiveBytes()[i] - uint64_t(shared[i]));
    CHECK(plan->peakLiveBytes == liveness.getPeakBytes());
    CHECK(plan->arenaBytes >= liveness.getPeakBytes());
  }
  for (const Value *value : values) {
    auto offset = plan->lookup(value);
    REQUIRE(offset);
    CHECK(*offset % MemoryPlan::kAlignment == 0);
    CHECK(*offset + Liveness::getBytes(value) <= plan->arenaBytes);
  }
  auto overlapMemory = [&](const Value *a, const Value *b) {
    uint64_t ao = *plan->lookup(a), bo = *plan->lookup(b);
    uint64_t ab = Liveness::getBytes(a), bb = Liveness::getBytes(b);
    return ab != 0 && bb != 0 && ao < bo + bb && bo < ao + ab;
  };
  if (allPairs) {
    for (size_t i = 0; i < values.size(); ++i)
      for (size_t j = i + 1; j < values.size(); ++j) {
        const Value *a = values[i], *b = values[j];
        if (!liveness.getRange(a).overlaps(liveness.getRange(b)) ||
            !overlapMemory(a, b))
          continue;
        CHECK_MESSAGE(isInPlacePair(liveness, *plan, a, b),
                      "%" << a->getName().str() << " and %"
                          << b->getName().str() << " overlap");
      }
    return;
  }
  // Sweep: values in definition order; the active set holds the values live
  // at the current position by offset. Disjointness of the active set means
  // only the neighbours of a new value can overlap it.
  std::multimap<uint64_t, const Value *> active;
  std::multimap<size_t, const Value *> byEnd;
  size_t errors = 0;
  for (const Value *value : values) {
    if (Liveness::getBytes(value) == 0)
      continue;
    LiveRange range = liveness.getRange(value);
    while (!byEnd.empty() && byEnd.begin()->first < range.def) {
      const Value *dead = byEnd.begin()->second;
      auto [lo, hi] = active.equal_range(*plan->lookup(dead));
      for (auto it = lo; it != hi; ++it)
        if (it->second == dead) {
          active.erase(it);
          break;
        }
      byEnd.erase(byEnd.begin());
    }
    uint64_t offset = *plan->lookup(value);
    uint64_t end = offset + Liveness::getBytes(value);
    auto it = active.upper_bound(offset);
    for (auto next = it; next != active.end() && next->first < end; ++next)
      if (next->second != value && overlapMemory(value, next->second) &&
          !isInPlacePair(liveness, *plan, value, next->second))
        ++errors;
    for (auto prev = it; prev != active.begin();) {
      --prev;
      if (overlapMemory(value, prev->second)) {
        if (!isInPlacePair(liveness, *plan, value, prev->second))
          ++errors;
        continue; // in-place partners share an offset; look further back
      }
      break;
    }
    active.insert({offset, value});
    byEnd.insert({range.lastUse, value});
  }
  CHECK_MESSAGE(errors == 0, errors << " overlapping live values");
}

/// A seeded random DAG over 1-D f32 values: unary ops, same-size binary
/// ops and Concats (which grow sizes), several inputs, several outputs.
std::string randomGraphText(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  std::vector<std::pair<std::string, int64_t>> values;
  std::string text = "graph @random(";
  size_t numInputs = 1 + pick(3);
  for (size_t i = 0; i < numInputs; ++i) {
    int64_t size = 1 + int64_t(pick(64));
    std::string name = "in" + std::to_string(i);
    text += (i ? ", %" : "%") + name + ": f32[" + std::to_string(size) + "]";
    values.push_back({name, size});
  }
  text += ") {\n";
  size_t numNodes = 1 + pick(seed % 4 == 0 ? 300 : 40);
  // Recent values are likelier operands, so graphs have both long and short
  // lived values.
  auto operand = [&]() {
    size_t n = values.size();
    return pick(2) ? n - 1 - pick(std::min<size_t>(n, 4)) : pick(n);
  };
  const char *unary[] = {"Relu", "Neg", "Exp", "Tanh"};
  const char *binary[] = {"Add", "Mul", "Sub"};
  std::vector<bool> used;
  used.resize(values.size(), false);
  for (size_t i = 0; i < numNodes; ++i) {
    std::string name = "v" + std::to_string(i);
    size_t a = operand();
    size_t kind = pick(3);
    std::string line;
    int64_t size = values[a].second;
    if (kind == 1) {
      // A same-size partner, if there is one.
      size_t b = operand();
      if (values[b].second == size) {
        line = std::string(binary[pick(3)]) + "(%" + values[a].first + ", %" +
               values[b].first + ")";
        used[b] = true;
      }
    } else if (kind == 2) {
      size_t b = operand();
      size += values[b].second;
      line = "Concat(%" + values[a].first + ", %" + values[b].first +
             ") {axis = 0}";
      used[b] = true;
    }
    if (line.empty()) {
      size = values[a].second;
      line = std::string(unary[pick(4)]) + "(%" + values[a].first + ")";
    }
    used[a] = true;
    text += "  %" + name + " = " + line + " : f32[" + std::to_string(size) +
            "]\n";
    values.push_back({name, size});
    used.push_back(false);
  }
  // Outputs: every unused node result, plus a random one.
  std::vector<std::string> outputs;
  for (size_t v = numInputs; v < values.size(); ++v)
    if (!used[v])
      outputs.push_back("%" + values[v].first);
  outputs.push_back("%" + values[numInputs + pick(numNodes)].first);
  std::sort(outputs.begin(), outputs.end());
  outputs.erase(std::unique(outputs.begin(), outputs.end()), outputs.end());
  text += "  return " + llvm::join(outputs, ", ") + "\n}\n";
  return text;
}

llvm::Error runPipeline(Graph &graph, llvm::StringRef pipeline) {
  PassRegistry registry;
  registerAllPasses(registry);
  PassManager pm;
  pm.setContext({runtime::cpu::makeCpuEvaluator()});
  if (auto err = parsePassPipeline(pipeline, registry, pm))
    return err;
  return pm.run(graph).takeError();
}

/// Checks that the memory report's rows (weights, inputs, activations,
/// gradients, recompute, temporaries, fragmentation) sum exactly to its peak,
/// which is persistent + arena (with a plan) and \p expectedPeak when it is
/// not 0, that its percentages sum to 100.0, and arena / peak live >= 1.
void checkReportSumsToPeak(const Graph &graph, uint64_t expectedPeak = 0) {
  llvm::json::Object report = session::getMemoryReport(graph);
  const llvm::json::Object *breakdown = report.getObject("breakdown");
  REQUIRE(breakdown);
  uint64_t sum = 0;
  for (const auto &entry : *breakdown)
    sum += uint64_t(*entry.second.getAsInteger());
  uint64_t peak = uint64_t(*report.getInteger("peak_bytes"));
  uint64_t arena = uint64_t(*report.getInteger("arena_bytes"));
  uint64_t peakLive = uint64_t(*report.getInteger("peak_live_arena_bytes"));
  CHECK(sum == peak);
  CHECK(peak == uint64_t(*report.getInteger("persistent_bytes")) + arena);
  CHECK(arena >= peakLive);
  if (const MemoryPlan *plan = graph.getMemoryPlan()) {
    CHECK(arena == plan->arenaBytes);
    CHECK(uint64_t(*breakdown->getInteger("fragmentation")) ==
          arena - peakLive);
  }
  if (expectedPeak)
    CHECK(peak == expectedPeak);

  // The table: the percentages of the rows above "peak" sum to 100.0.
  std::string text;
  llvm::raw_string_ostream os(text);
  session::printMemoryReport(graph, os);
  os.flush();
  uint64_t tenths = 0, rows = 0, tableSum = 0;
  for (llvm::StringRef line : llvm::split(text, '\n')) {
    llvm::SmallVector<llvm::StringRef, 8> fields;
    line.split(fields, ' ', -1, /*KeepEmpty=*/false);
    if (fields.size() != 6 || fields[2] != "B" || fields[0] == "peak")
      continue;
    uint64_t bytes = 0, whole = 0, tenth = 0;
    auto [intPart, fracPart] = fields[5].drop_back().split('.');
    REQUIRE(!fields[1].getAsInteger(10, bytes));
    REQUIRE(!intPart.getAsInteger(10, whole));
    REQUIRE(!fracPart.getAsInteger(10, tenth));
    tableSum += bytes;
    tenths += whole * 10 + tenth;
    ++rows;
  }
  CHECK(rows == (graph.getMemoryPlan() ? 7u : 6u));
  CHECK(tableSum == peak);
  if (peak)
    CHECK(tenths == 1000);
}

/// Runs \p graph on the CPU and \returns its result; inputs from seed 1.
/// A planned graph runs in a checked arena (CompileOptions::checkArena).
runtime::RunResult runCpu(const Graph &graph,
                          const std::vector<runtime::OwnedTensor> &inputs) {
  auto backend = runtime::createBackend("cpu");
  REQUIRE(bool(backend));
  runtime::CompileOptions options;
  options.numThreads = 2;
  options.checkArena = true;
  auto executable = (*backend)->compile(graph, options);
  REQUIRE_MESSAGE(bool(executable), errorToString(executable.takeError()));
  std::vector<runtime::Tensor> views;
  for (const runtime::OwnedTensor &input : inputs)
    views.push_back(input.view());
  auto result = (*executable)->run(views);
  REQUIRE_MESSAGE(bool(result), errorToString(result.takeError()));
  return std::move(*result);
}

/// Heap run vs arena run of the same graph: outputs bitwise equal, the
/// arena's high-water mark and the bytes the kernels touched (measured from
/// the poisoned arena) == planned arena.
void checkArenaRun(std::unique_ptr<Graph> graph) {
  auto inputs = driver::makeInputs(*graph, {}, /*seed=*/1);
  REQUIRE(bool(inputs));
  runtime::RunResult heap = runCpu(*graph, *inputs);
  llvm::Error err = runPipeline(*graph, "plan-memory");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  runtime::RunResult arena = runCpu(*graph, *inputs);
  const MemoryPlan *plan = graph->getMemoryPlan();
  REQUIRE(plan);
  CHECK(arena.plannedBytes == plan->arenaBytes);
  CHECK(arena.peakBytes == plan->arenaBytes);
  CHECK(arena.touchedBytes == plan->arenaBytes);
  CHECK(heap.plannedBytes == 0);
  CHECK(heap.touchedBytes == 0);
  MESSAGE(graph->getName().str()
          << ": heap peak " << heap.peakBytes << " B, planned arena "
          << plan->arenaBytes << " B, measured arena " << arena.peakBytes
          << " B");
  REQUIRE(heap.outputs.size() == arena.outputs.size());
  for (size_t i = 0; i < heap.outputs.size(); ++i) {
    const runtime::OwnedTensor &a = heap.outputs[i], &b = arena.outputs[i];
    REQUIRE(a.getType() == b.getType());
    size_t bytes = size_t(a.getType().getByteSize());
    CHECK_MESSAGE(
        (bytes == 0 || std::memcmp(a.getData(), b.getData(), bytes) == 0),
        "output " << i << " differs");
  }
}

} // namespace

TEST_CASE("liveness: ranges, peak and breakdown by hand") {
  auto graph = parse(kSmall);
  Liveness liveness(*graph);
  CHECK(liveness.getLiveBytes().vec() ==
        std::vector<uint64_t>{64, 128, 192, 192, 192});
  CHECK(liveness.getPeakBytes() == 192);
  CHECK(liveness.getPeakIndex() == 2);
  CHECK(liveness.getPeakNode()->getResult(0)->getName() == "l");
  auto range = [&](llvm::StringRef name) {
    LiveRange r = liveness.getRange(graph->lookup(name));
    return std::make_pair(r.def, r.lastUse);
  };
  CHECK(range("a") == std::make_pair<size_t, size_t>(0, 3));
  CHECK(range("b") == std::make_pair<size_t, size_t>(1, 2));
  CHECK(range("l") == std::make_pair<size_t, size_t>(2, 4)); // output
  CHECK(range("w_grad") == std::make_pair<size_t, size_t>(4, 4));
  // At position 2: %a and %l (64 B each, read by the backward: kept for
  // it), %b (64 B, a forward temporary); persistent: %w 64 B weight, %x 64 B
  // input.
  MemoryBreakdown breakdown = liveness.getPeakBreakdown();
  CHECK(breakdown[MemoryCategory::Weights] == 64);
  CHECK(breakdown[MemoryCategory::Inputs] == 64);
  CHECK(breakdown[MemoryCategory::Activations] == 128);
  CHECK(breakdown[MemoryCategory::Temporaries] == 64);
  CHECK(breakdown[MemoryCategory::Gradients] == 0);
  CHECK(breakdown[MemoryCategory::Recompute] == 0);
  CHECK(liveness.classify(graph->lookup("w_grad")) ==
        MemoryCategory::Gradients);
  CHECK(liveness.classify(graph->lookup("g")) == MemoryCategory::Temporaries);
}

TEST_CASE("liveness: recompute values and unused results") {
  // f32[2] is 8 B. %r (remat) is a recompute temporary; %u has no use and
  // lives only at its own node.
  auto graph = parse(R"(graph @g(%x: f32[2]) {
  %a = Relu(%x) : f32[2]
  %u = Neg(%a) : f32[2]
  %r = Exp(%a) : f32[2] remat
  %y = Add(%r, %a) : f32[2] bwd
  return %y
}
)");
  Liveness liveness(*graph);
  // pos0: a; pos1: a u; pos2: a r; pos3: a r y.
  CHECK(liveness.getLiveBytes().vec() == std::vector<uint64_t>{8, 16, 16, 24});
  CHECK(liveness.getPeakIndex() == 3);
  MemoryBreakdown breakdown = liveness.getPeakBreakdown();
  CHECK(breakdown[MemoryCategory::Recompute] == 8);
  CHECK(breakdown[MemoryCategory::Activations] == 8);
  CHECK(breakdown[MemoryCategory::Gradients] == 8);
}

TEST_CASE("plan-memory: hand-computed offsets with and without in-place") {
  auto graph = parse(kSmall);
  // In place: {a, g, w_grad} share 256 B at 0 (g overwrites a where a dies,
  // w_grad overwrites g); {b, l} share 256 B at 256. Arena 256 + 64 = 320 B
  // for a peak of 192 B live.
  auto plan = planMemory(*graph, /*inPlace=*/true);
  REQUIRE(bool(plan));
  auto offset = [&](const MemoryPlan &p, llvm::StringRef name) {
    return *p.lookup(graph->lookup(name));
  };
  CHECK(offset(*plan, "a") == 0);
  CHECK(offset(*plan, "g") == 0);
  CHECK(offset(*plan, "w_grad") == 0);
  CHECK(offset(*plan, "b") == 256);
  CHECK(offset(*plan, "l") == 256);
  CHECK(plan->arenaBytes == 320);
  // %l over %b at node 2, %g over %a at node 3, %w_grad over %g at node 4.
  CHECK(plan->inPlaceOf.size() == 3);
  CHECK(plan->inPlaceOf.lookup(graph->lookup("l")) == graph->lookup("b"));
  CHECK(plan->inPlaceOf.lookup(graph->lookup("g")) == graph->lookup("a"));
  CHECK(plan->inPlaceOf.lookup(graph->lookup("w_grad")) == graph->lookup("g"));
  // Shared storage counts once: 64, 128 (a b), 128 (a l), 128 (l g),
  // 128 (l w_grad); 192 without the plan.
  CHECK(plan->peakLiveBytes == 128);
  graph->setMemoryPlan(std::move(*plan));
  checkPlan(*graph, /*allPairs=*/true);
  {
    Liveness liveness(*graph);
    CHECK(liveness.getLiveBytes().vec() ==
          std::vector<uint64_t>{64, 128, 128, 128, 128});
    CHECK(liveness.getPeakIndex() == 1);
    // The true ranges are unchanged; %b stops counting before node 2.
    CHECK(liveness.getRange(graph->lookup("b")).lastUse == 2);
    CHECK(liveness.getCountedRange(graph->lookup("b")).lastUse == 1);
    std::vector<const Value *> atTwo = liveness.getLiveValuesAt(2);
    CHECK(atTwo ==
          std::vector<const Value *>{graph->lookup("a"), graph->lookup("l")});
    checkReportSumsToPeak(*graph, 320 + 128);
  }

  // Without: a@0 [0,3], b@256 [1,2], l@512 [2,4], g@256 [3,4] (b is dead),
  // w_grad@0 [4,4] (a is dead): 512 + 64 = 576 B.
  auto plain = planMemory(*graph, /*inPlace=*/false);
  REQUIRE(bool(plain));
  CHECK(offset(*plain, "l") == 512);
  CHECK(offset(*plain, "g") == 256);
  CHECK(offset(*plain, "w_grad") == 0);
  CHECK(plain->arenaBytes == 576);
  CHECK(plain->inPlaceOf.empty());
  CHECK(plain->peakLiveBytes == 192);
  graph->setMemoryPlan(std::move(*plain));
  checkPlan(*graph, /*allPairs=*/true);
  checkReportSumsToPeak(*graph, 576 + 128);
  // A clone keeps the pairs, mapped to its own values.
  graph->setMemoryPlan(std::move(*planMemory(*graph, /*inPlace=*/true)));
  std::unique_ptr<Graph> copy = graph->clone();
  REQUIRE(copy->getMemoryPlan());
  CHECK(copy->getMemoryPlan()->inPlaceOf.lookup(copy->lookup("l")) ==
        copy->lookup("b"));
  CHECK(Liveness(*copy).getPeakBytes() == 128);
}

TEST_CASE("plan-memory: zero-sized tensors and scalars") {
  auto graph = parse(R"(graph @z(%x: f32[0], %s: f32[]) {
  %a = Relu(%x) : f32[0]
  %b = Neg(%s) : f32[]
  %c = Exp(%b) : f32[]
  return %a, %c
}
)");
  llvm::Error err = runPipeline(*graph, "plan-memory");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  checkPlan(*graph, /*allPairs=*/true);
  CHECK(graph->getMemoryPlan()->arenaBytes == 4);
  CHECK(!verify(*graph));
}

TEST_CASE("plan-memory: an arena over 2^62 bytes is an error") {
  // Three outputs of f32[2^59] (2^61 bytes each) live at once: 3 * 2^61
  // bytes exceed the 2^62 addressable.
  auto graph = parse(R"(graph @huge(%x: f32[576460752303423488]) {
  %a = Relu(%x) : f32[576460752303423488]
  %b = Neg(%x) : f32[576460752303423488]
  %c = Add(%a, %b) : f32[576460752303423488]
  return %a, %b, %c
}
)");
  auto plan = planMemory(*graph);
  REQUIRE(!plan);
  std::string message = errorToString(plan.takeError());
  CHECK(llvm::StringRef(message).contains("2^62 bytes addressable"));
}

TEST_CASE("plan-memory: live bytes past 2^64 are an error, not a wrapped "
          "bound") {
  // Eight outputs of 2^61 bytes live at once: 2^64 bytes, which a 64-bit
  // sum wraps to 0.
  std::string text = "graph @huge(%x: f32[576460752303423488]) {\n";
  for (int i = 0; i < 8; ++i)
    text += "  %a" + std::to_string(i) + " = Neg(%x) : f32[576460752303423488]\n";
  text += "  return %a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7\n}\n";
  auto graph = parse(text);
  auto bound = lowerBoundArenaBytes(*graph);
  REQUIRE(!bound);
  std::string message = errorToString(bound.takeError());
  CHECK(llvm::StringRef(message).contains("live at once need more than the 2^62"));
  auto plan = planMemory(*graph);
  REQUIRE(!plan);
  CHECK(llvm::StringRef(errorToString(plan.takeError()))
            .contains("2^62 bytes addressable"));
}

TEST_CASE("plan-memory: the plan is dropped when the graph changes") {
  auto graph = parse(kSmall);
  llvm::Error err = runPipeline(*graph, "plan-memory");
  REQUIRE(!err);
  REQUIRE(graph->getMemoryPlan());
  CHECK(graph->clone()->getMemoryPlan());
  Node &last = graph->getNodes().back();
  graph->createNode(OpKind::Relu, {last.getResult(0)},
                    {last.getResult(0)->getType()}, {"extra"});
  CHECK(!graph->getMemoryPlan());
}

TEST_CASE("schedule: a wide graph gets a lower peak") {
  // f32[1024] is 4096 B. The given order computes all three branches before
  // reducing any: peak 3 * 4096 + 4 B (at %s1). The greedy order reduces
  // each branch right after computing it: 4096 + 2 * 4 B.
  auto graph = parse(R"(graph @wide(%x: f32[1024]) {
  %a1 = Exp(%x) : f32[1024]
  %a2 = Exp(%x) : f32[1024]
  %a3 = Exp(%x) : f32[1024]
  %s1 = ReduceSum(%a1) {keepdims = 0} : f32[]
  %s2 = ReduceSum(%a2) {keepdims = 0} : f32[]
  %s3 = ReduceSum(%a3) {keepdims = 0} : f32[]
  %t = Add(%s1, %s2) : f32[]
  %u = Add(%t, %s3) : f32[]
  return %u
}
)");
  uint64_t before = Liveness(*graph).getPeakBytes();
  llvm::Error err = runPipeline(*graph, "schedule");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  uint64_t after = Liveness(*graph).getPeakBytes();
  CHECK(before == 3 * 4096 + 4);
  CHECK(after == 4096 + 8);
}

TEST_CASE("memory report: the breakdown sums to the peak on bert-tiny "
          "training") {
  auto config =
      bert::loadBertConfig(REMAT_TEST_DIR "/../models/bert-tiny.json");
  REQUIRE_MESSAGE(bool(config), errorToString(config.takeError()));
  auto graph =
      bert::buildBert(*config, bert::BertBuildOptions{/*initWeights=*/false});
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  checkReportSumsToPeak(**graph); // liveness only
  llvm::Error err =
      runPipeline(**graph, "canonicalize,autodiff,dce,schedule,plan-memory");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  const MemoryPlan *plan = (*graph)->getMemoryPlan();
  REQUIRE(plan);
  // bert-tiny's training step overwrites many operands in place.
  CHECK(!plan->inPlaceOf.empty());
  Liveness liveness(**graph);
  Liveness plain(**graph, liveness.getSchedule());
  CHECK(liveness.getPeakBytes() < plain.getPeakBytes());
  CHECK(plan->arenaBytes >= liveness.getPeakBytes());
  checkPlan(**graph, /*allPairs=*/false);
  checkReportSumsToPeak(**graph, liveness.getWeightBytes() +
                                     liveness.getInputBytes() +
                                     plan->arenaBytes);
  MemoryBreakdown breakdown = liveness.getPeakBreakdown();
  uint64_t arenaRows = 0;
  for (MemoryCategory category :
       {MemoryCategory::Activations, MemoryCategory::Gradients,
        MemoryCategory::Recompute, MemoryCategory::Temporaries})
    arenaRows += breakdown[category];
  CHECK(arenaRows == liveness.getPeakBytes());
}

TEST_CASE("memory timeline: an SVG with stages, legend and peak") {
  auto graph = parse(kSmall);
  graph->setMemoryPlan(std::move(*planMemory(*graph, /*inPlace=*/true)));
  std::string svg = driver::getMemoryTimelineSvg(*graph);
  llvm::StringRef text(svg);
  CHECK(text.startswith("<?xml"));
  CHECK(text.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(text.contains(">@small</text>"));
  CHECK(text.contains("<rect class=\"fwd\""));
  CHECK(text.contains("<rect class=\"bwd\""));
  CHECK(text.contains(">forward</text>"));
  CHECK(text.contains(">backward</text>"));
  CHECK(text.contains(">recompute</text>"));
  CHECK(text.contains("(256 B) at node 1: %b = Relu [fwd]</text>"));
  CHECK(text.contains("(448 B)</text>"));
  CHECK(text.rtrim().endswith("</svg>"));
  // Deterministic.
  CHECK(svg == driver::getMemoryTimelineSvg(*graph));
  // An empty graph still gives a well-formed plot.
  auto empty = parse("graph @empty(%x: f32[2]) {\n  return %x\n}\n");
  CHECK(
      llvm::StringRef(driver::getMemoryTimelineSvg(*empty)).contains("</svg>"));
}

TEST_CASE("schedule + plan-memory: 200 random DAGs") {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    CAPTURE(seed);
    std::string text = randomGraphText(seed);
    auto parsed = parseGraph(text, "random");
    REQUIRE_MESSAGE(bool(parsed), errorToString(parsed.takeError()) << "\n"
                                                                    << text);
    std::unique_ptr<Graph> graph = std::move(*parsed);
    std::unique_ptr<Graph> original = graph->clone();
    uint64_t before = Liveness(*graph).getPeakBytes();
    llvm::Error err = runPipeline(*graph, "schedule,plan-memory");
    REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
    CHECK(!verify(*graph));
    CHECK(Liveness(*graph).getPeakBytes() <= before);
    // Outputs unchanged: same names, in order.
    REQUIRE(graph->getOutputs().size() == original->getOutputs().size());
    for (size_t i = 0; i < graph->getOutputs().size(); ++i)
      CHECK(graph->getOutputs()[i]->getName() ==
            original->getOutputs()[i]->getName());
    CHECK(graph->getNumNodes() == original->getNumNodes());
    checkPlan(*graph, /*allPairs=*/graph->getNumNodes() < 100);
    checkReportSumsToPeak(*graph);
  }
}

TEST_CASE("arena allocator: bert-tiny matches the heap bitwise") {
  session::LoadOptions options;
  options.bind = "batch=2,seq=16";
  auto graph = session::loadModel(REMAT_TEST_DIR "/../models/bert-tiny.json",
                                 options);
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  checkArenaRun(std::move(*graph));
}

TEST_CASE("arena allocator: ONNX fixture matches the heap bitwise") {
  session::LoadOptions options;
  options.bind = "batch=2,seq=16";
  auto graph = session::loadModel(
      REMAT_TEST_DIR "/fixtures/bert_ts_op17_nodrop/model.onnx", options);
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  checkArenaRun(std::move(*graph));
}

TEST_CASE("arena allocator: a bert-tiny training step with in-place reuse "
          "matches the heap bitwise") {
  // The backward pass is where in-place reuse happens most (gradients of
  // elementwise ops): run the training step, not only the forward graph.
  session::LoadOptions options;
  options.bind = "batch=2,seq=16";
  auto graph = session::loadModel(REMAT_TEST_DIR "/../models/bert-tiny.json",
                                 options);
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  llvm::Error err =
      runPipeline(**graph, "canonicalize,disable-dropout,autodiff,dce");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  std::unique_ptr<Graph> planned = (*graph)->clone();
  err = runPipeline(*planned, "plan-memory");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  REQUIRE(planned->getMemoryPlan());
  size_t inPlace = planned->getMemoryPlan()->inPlaceOf.size();
  MESSAGE("bert-tiny training step: " << inPlace << " in-place results");
  CHECK(inPlace > 10);
  checkPlan(*planned, /*allPairs=*/false);
  checkArenaRun(std::move(*graph));
}

TEST_CASE("fold-transpose: the peak does not grow and the arena run matches "
          "the heap bitwise") {
  // Note [fold-transpose]: every folded Transpose goes, its source living
  // instead of it, so no point of the schedule holds more bytes.
  session::LoadOptions options;
  options.bind = "batch=2,seq=16";
  auto graph =
      session::loadModel(REMAT_TEST_DIR "/../models/bert-tiny.json", options);
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  llvm::Error err = runPipeline(
      **graph, "canonicalize,disable-dropout,autodiff,dce,schedule");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  std::unique_ptr<Graph> copied = (*graph)->clone();
  err = runPipeline(*copied, "plan-memory");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  err = runPipeline(**graph, "fold-transpose");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  std::unique_ptr<Graph> unplanned = (*graph)->clone();
  err = runPipeline(**graph, "plan-memory");
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  size_t transposes = 0, permuted = 0;
  for (const Node &node : (*graph)->getNodes()) {
    transposes += node.getOp() == OpKind::Transpose;
    permuted += node.getOp() == OpKind::PermutedMatMul;
  }
  // Two layers: 2 forward and 4 backward batched MatMuls each.
  CHECK(transposes == 0);
  CHECK(permuted == 12);
  uint64_t foldedPeak = Liveness(**graph).getPeakBytes();
  uint64_t copiedPeak = Liveness(*copied).getPeakBytes();
  MESSAGE("bert-tiny b2s16 training step: peak "
          << copiedPeak << " B, " << foldedPeak << " B with fold-transpose");
  CHECK(foldedPeak <= copiedPeak);
  CHECK((*graph)->getMemoryPlan()->peakLiveBytes <=
        copied->getMemoryPlan()->peakLiveBytes);
  checkPlan(**graph, /*allPairs=*/false);
  checkArenaRun(std::move(unplanned));
}

namespace {

/// A random graph of batched MatMuls whose operands come from inputs
/// stored in a random layout through one or two Transposes, some of them
/// shared by a second MatMul or read by a Relu (which keeps them), and whose
/// results go out directly or through a random Transpose: every case
/// fold-transpose folds or must leave alone.
std::string randomTransposeGraphText(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  using Dims = std::vector<int64_t>;
  auto typeOf = [](const Dims &dims) {
    std::string text = "f32[";
    for (size_t i = 0; i < dims.size(); ++i)
      text += (i ? "," : "") + std::to_string(dims[i]);
    return text + "]";
  };
  auto permText = [](const Dims &perm) {
    std::string text = "[";
    for (size_t i = 0; i < perm.size(); ++i)
      text += (i ? ", " : "") + std::to_string(perm[i]);
    return text + "]";
  };
  auto randomPerm = [&](size_t rank) {
    Dims perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    return perm;
  };
  std::string inputs, body;
  std::vector<std::string> outputs;
  int counter = 0;
  auto fresh = [&](const char *prefix) {
    return std::string(prefix) + std::to_string(counter++);
  };
  auto transpose = [&](const std::string &x, const Dims &dims, const Dims &perm,
                       Dims &out) {
    out.clear();
    for (int64_t d : perm)
      out.push_back(dims[d]);
    std::string name = fresh("t");
    body += "  %" + name + " = Transpose(%" + x +
            ") {perm = " + permText(perm) + "} : " + typeOf(out) + "\n";
    return name;
  };
  // A value of dims \p target: an input holding it in a random layout,
  // transposed back in one or two steps (none when the layout is the
  // target's).
  auto operand = [&](const Dims &target) {
    size_t rank = target.size();
    Dims perm = randomPerm(rank), stored(rank);
    for (size_t i = 0; i < rank; ++i)
      stored[perm[i]] = target[i];
    std::string name = fresh("in");
    inputs += std::string(inputs.empty() ? "%" : ", %") + name + ": " +
              typeOf(stored);
    // target[i] = stored[perm[i]]: Transpose(stored, perm).
    bool identity = std::is_sorted(perm.begin(), perm.end());
    if (identity)
      return name;
    Dims out;
    if (pick(3) == 0) {
      // Two steps: perm = first[second[i]].
      Dims first = randomPerm(rank), mid, second(rank);
      for (size_t i = 0; i < rank; ++i)
        second[i] =
            std::find(first.begin(), first.end(), perm[i]) - first.begin();
      std::string t = transpose(name, stored, first, mid);
      return transpose(t, mid, second, out);
    }
    return transpose(name, stored, perm, out);
  };
  size_t rank = 2 + pick(3);
  size_t numMatMuls = 1 + pick(3);
  for (size_t m = 0; m < numMatMuls; ++m) {
    Dims batch;
    for (size_t d = 0; d + 2 < rank; ++d)
      batch.push_back(1 + int64_t(pick(3)));
    // Sizes where BLAS's transposed kernels would round differently from
    // its plain ones (K >= 64 with a small M or N), and small ones.
    const int64_t sizes[] = {1, 2, 5, 9, 17, 64, 65};
    int64_t rows = sizes[pick(7)], inner = sizes[pick(7)],
            cols = sizes[pick(7)];
    Dims aDims = batch, bDims = batch, yDims = batch;
    aDims.insert(aDims.end(), {rows, inner});
    bDims.insert(bDims.end(), {inner, cols});
    yDims.insert(yDims.end(), {rows, cols});
    std::string a = operand(aDims), b = operand(bDims);
    std::vector<std::pair<std::string, Dims>> products;
    std::string y = fresh("y");
    body += "  %" + y + " = MatMul(%" + a + ", %" + b + ") : " + typeOf(yDims) +
            "\n";
    products.push_back({y, yDims});
    if (pick(3) == 0) {
      // A's view read by a second MatMul.
      Dims b2Dims = batch, y2Dims = batch;
      int64_t cols2 = sizes[pick(7)];
      b2Dims.insert(b2Dims.end(), {inner, cols2});
      y2Dims.insert(y2Dims.end(), {rows, cols2});
      std::string b2 = operand(b2Dims), y2 = fresh("y");
      body += "  %" + y2 + " = MatMul(%" + a + ", %" + b2 +
              ") : " + typeOf(y2Dims) + "\n";
      products.push_back({y2, y2Dims});
    }
    if (pick(4) == 0) {
      // A use that does not fold.
      std::string r = fresh("r");
      body += "  %" + r + " = Relu(%" + b + ") : " + typeOf(bDims) + "\n";
      outputs.push_back(r);
    }
    for (auto &[product, dims] : products) {
      if (pick(2) == 0) {
        outputs.push_back(product);
        continue;
      }
      Dims out;
      outputs.push_back(transpose(product, dims, randomPerm(rank), out));
    }
  }
  std::string text = "graph @transposes(" + inputs + ") {\n" + body;
  text += "  return";
  for (size_t i = 0; i < outputs.size(); ++i)
    text += (i ? ", %" : " %") + outputs[i];
  return text + "\n}\n";
}

} // namespace

TEST_CASE("fold-transpose: 300 random graphs keep their bits and peak") {
  size_t folded = 0, kept = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    CAPTURE(seed);
    std::string text = randomTransposeGraphText(seed);
    CAPTURE(text);
    auto parsed = parseGraph(text, "random");
    REQUIRE_MESSAGE(bool(parsed), errorToString(parsed.takeError()));
    std::unique_ptr<Graph> graph = std::move(*parsed);
    std::unique_ptr<Graph> original = graph->clone();
    llvm::Error err = runPipeline(*graph, "fold-transpose");
    REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
    CHECK(!verify(*graph));
    CHECK(Liveness(*graph).getPeakBytes() <=
          Liveness(*original).getPeakBytes());
    for (const Node &node : graph->getNodes()) {
      folded += node.getOp() == OpKind::PermutedMatMul;
      kept += node.getOp() == OpKind::Transpose;
    }
    auto inputs = driver::makeInputs(*original, {}, seed);
    REQUIRE(bool(inputs));
    runtime::RunResult a = runCpu(*original, *inputs);
    runtime::RunResult b = runCpu(*graph, *inputs);
    REQUIRE(a.outputs.size() == b.outputs.size());
    for (size_t i = 0; i < a.outputs.size(); ++i) {
      REQUIRE(a.outputs[i].getType() == b.outputs[i].getType());
      size_t bytes = size_t(a.outputs[i].getType().getByteSize());
      CHECK_MESSAGE(std::memcmp(a.outputs[i].getData(), b.outputs[i].getData(),
                                bytes) == 0,
                    "output " << i << " differs");
    }
  }
  // Both sides of the rules were exercised.
  MESSAGE(folded << " PermutedMatMuls made, " << kept << " Transposes kept");
  CHECK(folded > 100);
  CHECK(kept > 50);
}

TEST_CASE("plan-memory: bert-base and bert-large, batch 8 seq 512") {
  for (const char *model : {"bert-base", "bert-large"}) {
    session::LoadOptions options;
    options.bind = "batch=8,seq=512";
    options.initWeights = false;
    auto graph = session::loadModel(
        std::string(REMAT_TEST_DIR "/../models/") + model + ".json", options);
    REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
    using Clock = std::chrono::steady_clock;
    uint64_t before = Liveness(**graph).getPeakBytes();
    auto start = Clock::now();
    llvm::Error err = runPipeline(**graph, "schedule,plan-memory");
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
    checkPlan(**graph, /*allPairs=*/false);
    const MemoryPlan *plan = (*graph)->getMemoryPlan();
    MESSAGE(std::string(model) << " forward b8 s512: " << (*graph)->getNumNodes()
                  << " nodes, peak " << before << " B before schedule, "
                  << plan->peakLiveBytes << " B after, arena "
                  << plan->arenaBytes << " B, arena/peak "
                  << double(plan->arenaBytes) / double(plan->peakLiveBytes)
                  << ", schedule+plan-memory+verify "
                  << seconds << " s");
  }
}
