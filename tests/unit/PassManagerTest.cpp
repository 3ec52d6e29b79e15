//===- tests/unit/PassManagerTest.cpp - Registry, pipelines, options ------===//
// GCC 12 at -O2 reports the std::variant inside a moved EnumOptionStorage
// as maybe uninitialized once OptionsPass's constructor is inlined into
// std::make_unique below: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "ir/Graph.h"
#include "ir/Support.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <doctest/doctest.h>

using namespace remat;
using namespace remat::ir;
using namespace remat::passes;

namespace {
PassRegistry makeRegistry() {
  PassRegistry registry;
  registerAllPasses(registry);
  return registry;
}

std::string parseMessage(llvm::StringRef pipeline) {
  PassRegistry registry = makeRegistry();
  PassManager pm;
  llvm::Error err = parsePassPipeline(pipeline, registry, pm);
  return err ? errorToString(std::move(err)) : "ok";
}

/// A pass that breaks Note [Schedule], to show the PassManager verifies.
class BreakSchedulePass : public Pass {
public:
  llvm::StringRef getName() const override { return "break-schedule"; }
  llvm::StringRef getSummary() const override { return "test only"; }
  llvm::Expected<bool> run(Graph &graph) override {
    graph.getNodes().back().moveBefore(&graph.getNodes().front());
    return true;
  }
};

/// A pass that fails.
class FailingPass : public Pass {
public:
  llvm::StringRef getName() const override { return "fail"; }
  llvm::StringRef getSummary() const override { return "test only"; }
  llvm::Expected<bool> run(Graph &) override {
    return makeError("no luck today");
  }
};

/// A pass with one option of each kind.
class OptionsPass : public Pass {
public:
  OptionsPass() {
    declareOption("count", "an int", &count);
    declareOption("scale", "a float", &scale);
    declareOption("enable", "a bool", &enable);
    declareOption("mode", "a string", &mode);
  }
  llvm::StringRef getName() const override { return "options"; }
  llvm::StringRef getSummary() const override { return "test only"; }
  llvm::Expected<bool> run(Graph &) override { return false; }
  int64_t count = 1;
  double scale = 1.0;
  bool enable = false;
  std::string mode = "a";
};

/// A pass that reports a plan without being the remat pass: a caller reads
/// what passes report from PassResults, never by a pass's name.
class ReportingPass : public Pass {
public:
  llvm::StringRef getName() const override { return "reporting"; }
  llvm::StringRef getSummary() const override { return "test only"; }
  llvm::Expected<bool> run(Graph &) override {
    ++runs;
    return false;
  }
  void addResults(PassResults &results) const override {
    results.rematReport = llvm::json::Object{{"runs", runs}};
  }
  int64_t runs = 0;
};

Graph *makeChain(Graph &graph) {
  TensorType vec(DType::F32, {4});
  Value *x = graph.addInput("x", vec);
  Node *a = graph.createNode(OpKind::Relu, {x}, {vec}, {"a"});
  Node *b = graph.createNode(OpKind::Neg, {a->getResult(0)}, {vec}, {"b"});
  graph.addOutput(b->getResult(0));
  return &graph;
}
} // namespace

TEST_CASE("every pass of Passes.def is registered, in order") {
  PassRegistry registry = makeRegistry();
  CHECK(registry.getNames() ==
        std::vector<std::string>{"dce", "cse", "fold-constants", "canonicalize",
                                 "disable-dropout", "autodiff", "optimizer",
                                 "schedule", "fold-transpose", "remat",
                                 "plan-memory"});
  std::string listing;
  llvm::raw_string_ostream os(listing);
  registry.printPasses(os);
  CHECK(listing.find("dce") != std::string::npos);
  CHECK(listing.find("{max-elements=int}") != std::string::npos);
}

TEST_CASE("pipelines parse, with options") {
  CHECK(parseMessage("dce") == "ok");
  CHECK(parseMessage("dce,cse,fold-constants") == "ok");
  CHECK(parseMessage(" dce , cse ") == "ok");
  CHECK(parseMessage("fold-constants{max-elements=64}") == "ok");
  CHECK(parseMessage("fold-constants{ max-elements=64 },dce") == "ok");
}

TEST_CASE("bad pipelines say what exists") {
  CHECK(parseMessage("dce,frobnicate") ==
        "unknown pass 'frobnicate' (available: dce, cse, fold-constants, "
        "canonicalize, disable-dropout, autodiff, optimizer, schedule, "
        "fold-transpose, remat, plan-memory)");
  CHECK(parseMessage("fold-constants{limit=3}") ==
        "unknown option 'limit' for pass 'fold-constants' (its options: "
        "max-elements)");
  CHECK(parseMessage("dce{x=1}") ==
        "unknown option 'x' for pass 'dce' (it takes no options)");
  CHECK(parseMessage("fold-constants{max-elements=many}") ==
        "option 'max-elements' of pass 'fold-constants' expects int, got "
        "'many'");
  CHECK(parseMessage("dce,,cse") ==
        "pipeline 'dce,,cse' column 5: expected a pass name");
  CHECK(parseMessage("dce cse") ==
        "pipeline 'dce cse' column 5: expected ',' between passes, got 'c'");
  CHECK(parseMessage("fold-constants{max-elements=3") ==
        "pipeline 'fold-constants{max-elements=3' column 16: missing '}' "
        "after the options of 'fold-constants'");
  CHECK(parseMessage("fold-constants{64}") ==
        "pipeline 'fold-constants{64}' column 16: expected key=value in the "
        "options of 'fold-constants', got '64'");
}

TEST_CASE("typed options are checked when the pipeline is parsed") {
  CHECK(parseMessage("autodiff{unused-weights=maybe}") ==
        "option 'unused-weights' of pass 'autodiff' must be one of warn, "
        "error, drop; got 'maybe'");
  CHECK(parseMessage("remat{strategy=fastest}") ==
        "option 'strategy' of pass 'remat' must be one of none, every-layer, "
        "sqrt, chain-dp, selective, auto; got 'fastest'");
  CHECK(parseMessage("remat{budget=6gigs}") ==
        "option 'budget' of pass 'remat': '6gigs' is not a byte size or a "
        "percentage (e.g. 6GiB, 512MiB or 40%)");
  CHECK(parseMessage("remat{budget=0%}") ==
        "option 'budget' of pass 'remat': '0%' is not a percentage in (0%, "
        "1000%], e.g. 40%");
  CHECK(parseMessage("remat{budget=6GiB strategy=auto}") == "ok");
}

TEST_CASE("byte sizes and percentages") {
  auto bytes = [](llvm::StringRef text) {
    auto parsed = passes::parseByteSize(text);
    REQUIRE_MESSAGE(bool(parsed), text.str());
    return *parsed;
  };
  CHECK(bytes("6GiB") == 6ull << 30);
  CHECK(bytes("512MiB") == 512ull << 20);
  CHECK(bytes("1.5 KiB") == 1536);
  CHECK(bytes("1000") == 1000);
  CHECK(bytes("2GB") == 2000000000ull);
  CHECK(bytes("7B") == 7);
  for (const char *bad : {"", "GiB", "6 GIB", "-1GiB", "6GiBs", "1e3"})
    CHECK_MESSAGE(!passes::parseByteSize(bad), bad);
  auto percent = passes::parseByteAmount("40%", /*allowPercent=*/true);
  REQUIRE(bool(percent));
  CHECK(percent->isPercent);
  CHECK(percent->resolve(1000) == 400);
  CHECK(!passes::parseByteAmount("40%", /*allowPercent=*/false));
}

TEST_CASE("an option for a pass the pipeline lacks is an error") {
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  passes::PassManager pm;
  REQUIRE(!passes::parsePassPipeline("dce", registry, pm));
  llvm::Error err = pm.setPassOption("autodiff", "unused-weights", "drop");
  REQUIRE(bool(err));
  CHECK(errorToString(std::move(err)) ==
        "option 'unused-weights' is for pass 'autodiff', which the pipeline "
        "does not run");
}

TEST_CASE("options of every kind parse") {
  OptionsPass pass;
  CHECK_FALSE(bool(pass.setOption("count", "42")));
  CHECK_FALSE(bool(pass.setOption("scale", "0.25")));
  CHECK_FALSE(bool(pass.setOption("enable", "true")));
  CHECK_FALSE(bool(pass.setOption("mode", "fast")));
  CHECK(pass.count == 42);
  CHECK(pass.scale == 0.25);
  CHECK(pass.enable);
  CHECK(pass.mode == "fast");
  llvm::Error err = pass.setOption("enable", "maybe");
  REQUIRE(bool(err));
  CHECK(errorToString(std::move(err)) ==
        "option 'enable' of pass 'options' expects bool, got 'maybe'");
}

TEST_CASE("the pass manager verifies after every pass") {
  Graph graph("g");
  makeChain(graph);
  PassManager pm;
  pm.addPass(std::make_unique<BreakSchedulePass>());
  auto result = pm.run(graph);
  REQUIRE_FALSE(bool(result));
  CHECK(errorToString(result.takeError()) ==
        "invalid IR after pass 'break-schedule': graph @g: operand %a of Neg "
        "'%b' is used before its definition (the schedule is not "
        "topological)");
}

TEST_CASE("a failing pass names itself") {
  Graph graph("g");
  makeChain(graph);
  PassManager pm;
  pm.addPass(std::make_unique<FailingPass>());
  auto result = pm.run(graph);
  REQUIRE_FALSE(bool(result));
  CHECK(errorToString(result.takeError()) ==
        "pass 'fail' failed: no luck today");
}

TEST_CASE("timing and print-after-all report each pass") {
  Graph graph("g");
  makeChain(graph);
  PassRegistry registry = makeRegistry();
  PassManager pm;
  REQUIRE_FALSE(bool(parsePassPipeline("dce,cse", registry, pm)));
  std::string timing, printed;
  llvm::raw_string_ostream timingStream(timing), printedStream(printed);
  pm.enableTiming(&timingStream);
  pm.enablePrintAfterAll(&printedStream);
  auto changed = pm.run(graph);
  REQUIRE(bool(changed));
  CHECK_FALSE(*changed);
  timingStream.flush();
  printedStream.flush();
  CHECK(timing.find("dce\n") != std::string::npos);
  CHECK(timing.find("cse\n") != std::string::npos);
  CHECK(timing.find("(verifier)") != std::string::npos);
  CHECK(printed.find("// -----// IR after 'dce' //----- //") !=
        std::string::npos);
  CHECK(printed.find("// -----// IR after 'cse' //----- //") !=
        std::string::npos);
  CHECK(printed.find("graph @g") != std::string::npos);
}

TEST_CASE("the pass manager hands back what its passes report, typed") {
  Graph graph("g");
  makeChain(graph);
  PassManager pm;
  pm.addPass(std::make_unique<OptionsPass>());
  REQUIRE(bool(pm.run(graph)));
  CHECK_FALSE(pm.getResults().rematReport);

  // Whatever the pass is called, its typed result reaches the caller; each
  // run starts afresh.
  pm.addPass(std::make_unique<ReportingPass>());
  REQUIRE(bool(pm.run(graph)));
  REQUIRE(pm.getResults().rematReport);
  CHECK(pm.getResults().rematReport->getInteger("runs").getValueOr(0) == 1);
  PassManager empty;
  REQUIRE(bool(empty.run(graph)));
  CHECK_FALSE(empty.getResults().rematReport);
}
