//===- tests/unit/OptimizerTest.cpp - the optimizer pass, in-place updates ===//
#include "ir/Graph.h"
#include "ir/Support.h"
#include "ir/UpdateName.h"
#include "ir/Verifier.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"
#include "runtime/Backends.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

using namespace remat;
using namespace remat::ir;
using namespace remat::passes;

namespace {
const TensorType kVec(DType::F32, {4});

/// A training step by hand: loss = ReduceSum(w * x), w_grad = x * 2
/// (any value marked as w's gradient will do for the optimizer), and a
/// backward node %late that reads w after the gradient is complete.
struct Step {
  Graph graph{"step"};
  Value *x, *w, *grad, *late;
  Step() {
    x = graph.addInput("x", kVec);
    w = graph.addInput("w", kVec, /*isWeight=*/true);
    Value *p = graph.createNode(OpKind::Mul, {w, x}, {kVec}, {"p"})->getResult(0);
    AttrList keep;
    keep.set("keepdims", int64_t(0));
    Value *loss = graph.createNode(OpKind::ReduceSum, {p},
                                   {TensorType(DType::F32, {})}, {"loss"},
                                   keep)
                      ->getResult(0);
    Node *g = graph.createNode(OpKind::Add, {x, x}, {kVec}, {"w_grad"});
    g->setStage(Stage::Backward);
    grad = g->getResult(0);
    grad->setGradientOf(w);
    Node *l = graph.createNode(OpKind::Mul, {w, w}, {kVec}, {"late"});
    l->setStage(Stage::Backward);
    late = l->getResult(0);
    graph.addOutput(loss);
    graph.addOutput(grad);
    graph.addOutput(late);
  }
};

std::string schedule(const Graph &graph) {
  std::string names;
  for (const Node &node : graph.getNodes())
    names += (names.empty() ? "" : " ") + node.getResult(0)->getName().str();
  return names;
}

void runOk(Pass &pass, Graph &graph) {
  auto changed = pass.run(graph);
  REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
  llvm::Error err = verify(graph);
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
}
} // namespace

TEST_CASE("optimizer: sgd replaces the gradient output by w_new, after the "
          "last reader of w, and the CPU step writes it over w") {
  Step step;
  OptimizerPass pass;
  REQUIRE(!pass.setOption("kind", "sgd"));
  REQUIRE(!pass.setOption("lr", "0.5"));
  runOk(pass, step.graph);
  std::vector<std::string> outputs;
  for (const Value *output : step.graph.getOutputs())
    outputs.push_back(output->getName().str());
  CHECK(outputs == std::vector<std::string>{"loss", "late", "w_new"});
  const Value *wNew = step.graph.lookup("w_new");
  REQUIRE(wNew);
  CHECK(getUpdatedInput(wNew) == step.w);
  CHECK(getUpdatedInput(step.late) == nullptr);
  // eager: right after %late, the last reader of w.
  CHECK(schedule(step.graph) ==
        "p loss w_grad late optimizer.lr w.update w_new");
  CHECK(!checkUpdateOrder(step.graph));

  // The plan gives w_new no arena bytes: it lies in w's storage.
  PlanMemoryPass plan;
  runOk(plan, step.graph);
  CHECK_FALSE(step.graph.getMemoryPlan()->lookup(wNew).has_value());
  Liveness liveness(step.graph);
  CHECK(llvm::find(liveness.getValues(), wNew) == liveness.getValues().end());

  auto backend = runtime::createBackend("cpu");
  REQUIRE(bool(backend));
  runtime::CompileOptions options;
  options.numThreads = 1;
  auto executable = (*backend)->compile(step.graph, options);
  REQUIRE_MESSAGE(bool(executable), errorToString(executable.takeError()));
  runtime::OwnedTensor x(kVec), w(kVec);
  float xs[] = {1, 2, 3, 4}, ws[] = {10, 20, 30, 40};
  std::memcpy(x.getData(), xs, sizeof(xs));
  std::memcpy(w.getData(), ws, sizeof(ws));
  for (int i = 0; i < 2; ++i) {
    auto result = (*executable)->run({x.view(), w.view()});
    REQUIRE_MESSAGE(bool(result), errorToString(result.takeError()));
  }
  // Two steps of w -= 0.5 * 2x, each written over w itself.
  float *after = static_cast<float *>(w.getData());
  CHECK(after[0] == 10 - 2 * 1.0f);
  CHECK(after[3] == 40 - 2 * 4.0f);
}

TEST_CASE("optimizer: adamw state is persistent and zero, placement=end "
          "appends the updates") {
  Step step;
  OptimizerPass pass;
  REQUIRE(!pass.setOption("placement", "end"));
  runOk(pass, step.graph);
  const Value *m = step.graph.lookup("w.exp_avg");
  REQUIRE(m);
  CHECK(m->isGraphInput());
  CHECK_FALSE(m->isWeight());
  REQUIRE(m->getData());
  CHECK(m->getData()->getDouble(0) == 0);
  CHECK(isOptimizerState(m));
  CHECK(isOptimizerState(step.graph.lookup("optimizer.step")));
  CHECK_FALSE(isOptimizerState(step.w));
  CHECK(getUpdatedInput(step.graph.lookup("w.exp_avg_sq_new")) ==
        step.graph.lookup("w.exp_avg_sq"));
  CHECK(getUpdatedInput(step.graph.lookup("optimizer.step_new")) ==
        step.graph.lookup("optimizer.step"));
  // Everything of the optimizer comes after the step's own nodes.
  CHECK(llvm::StringRef(schedule(step.graph))
            .startswith("p loss w_grad late optimizer."));
}

TEST_CASE("optimizer: bad options are errors naming the option") {
  auto failure = [](llvm::StringRef key, llvm::StringRef value) {
    Step step;
    OptimizerPass pass;
    if (auto err = pass.setOption(key, value))
      return errorToString(std::move(err));
    auto changed = pass.run(step.graph);
    REQUIRE_FALSE(bool(changed));
    return errorToString(changed.takeError());
  };
  CHECK(failure("lr", "-1") == "option 'lr' must be a finite number >= 0, got -1");
  CHECK(failure("beta1", "1") == "option 'beta1' must be in [0, 1), got 1");
  CHECK(failure("eps", "0") == "option 'eps' must be a finite number > 0, got 0");
  CHECK(failure("momentum", "-0.5") ==
        "option 'momentum' must be in [0, 1), got -0.5");
  CHECK(failure("kind", "adam") ==
        "option 'kind' of pass 'optimizer' must be one of sgd, adamw; got 'adam'");
}

TEST_CASE("optimizer: an update moved before a reader of its input is put "
          "back after it, and the schedule pass keeps that order") {
  Step step;
  OptimizerPass pass;
  REQUIRE(!pass.setOption("kind", "sgd"));
  runOk(pass, step.graph);
  Node *update = step.graph.lookup("w_new")->getDefiningNode();
  update->moveBefore(step.late->getDefiningNode());
  llvm::Error err = checkUpdateOrder(step.graph);
  REQUIRE(bool(err));
  CHECK(llvm::StringRef(errorToString(std::move(err)))
            .contains("writes %w_new over %w, which Mul '%late' reads later"));
  CHECK(orderUpdatesAfterReads(step.graph));
  CHECK(!checkUpdateOrder(step.graph));
  CHECK_FALSE(orderUpdatesAfterReads(step.graph));

  std::vector<Node *> order = computeMemoryAwareOrder(step.graph);
  auto at = [&](const Value *value) {
    return llvm::find(order, value->getDefiningNode()) - order.begin();
  };
  CHECK(at(step.late) < at(step.graph.lookup("w_new")));
}

TEST_CASE("optimizer: a model saved with its state adopts it again") {
  Graph graph("saved");
  Value *w = graph.addInput("w", kVec, /*isWeight=*/true);
  Value *m = graph.addInput("w.exp_avg", kVec, /*isWeight=*/true);
  Value *other = graph.addInput("v.exp_avg", kVec, /*isWeight=*/true);
  auto data = std::make_shared<TensorData>(TensorType(DType::F32, {}));
  data->setDouble(0, 7);
  AttrList attrs;
  attrs.set("value", TensorDataPtr(data));
  graph.createNode(OpKind::Constant, {}, {TensorType(DType::F32, {})},
                   {"optimizer.step"}, attrs);
  CHECK(adoptOptimizerState(graph));
  CHECK(w->isWeight());
  CHECK_FALSE(m->isWeight());
  CHECK(other->isWeight()); // no weight 'v'
  Value *stepCount = graph.lookup("optimizer.step");
  REQUIRE(stepCount);
  CHECK(stepCount->isGraphInput());
  CHECK(stepCount->getData()->getDouble(0) == 7);
  CHECK(graph.getNumNodes() == 0);
}

TEST_CASE("optimizer: resumed state must be whole and sane") {
  // \returns the error of adamw over the Step graph with \p setUp's state,
  // or "ok".
  auto resume = [](auto setUp) {
    Step step;
    setUp(step.graph);
    OptimizerPass pass;
    auto changed = pass.run(step.graph);
    return changed ? std::string("ok") : errorToString(changed.takeError());
  };
  auto addState = [](Graph &graph, const char *name, TensorType type,
                     double value) {
    auto data = std::make_shared<TensorData>(type);
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      data->setDouble(i, value);
    graph.addInput(name, type)->setData(data);
  };
  const TensorType scalar(DType::F32, {});
  auto whole = [&](double step, double avg, double avgSq) {
    return [=](Graph &graph) {
      addState(graph, "optimizer.step", scalar, step);
      addState(graph, "w.exp_avg", kVec, avg);
      addState(graph, "w.exp_avg_sq", kVec, avgSq);
    };
  };
  CHECK(resume(whole(3, 0.5, 0.25)) == "ok");
  CHECK(resume([](Graph &) {}) == "ok");
  CHECK(resume(whole(-1, 0.5, 0.25)) ==
        "resumed optimizer state 'optimizer.step' holds -1 at element 0; it "
        "must be finite and not negative (was the model saved by remat-run "
        "--save-weights?)");
  CHECK(resume(whole(std::nan(""), 0.5, 0.25)) ==
        "resumed optimizer state 'optimizer.step' holds nan at element 0; it "
        "must be finite and not negative (was the model saved by remat-run "
        "--save-weights?)");
  CHECK(resume(whole(3, 0.5, -0.25)) ==
        "resumed optimizer state 'w.exp_avg_sq' holds -0.25 at element 0; it "
        "must be finite and not negative (was the model saved by remat-run "
        "--save-weights?)");
  CHECK(resume(whole(3, INFINITY, 0.25)) ==
        "resumed optimizer state 'w.exp_avg' holds inf at element 0; it must "
        "be finite (was the model saved by remat-run --save-weights?)");
  CHECK(resume([&](Graph &graph) {
          addState(graph, "optimizer.step", scalar, 3);
          addState(graph, "w.exp_avg", kVec, 0.5);
        }) == "the model resumes optimizer state ('optimizer.step') but lacks "
              "'w.exp_avg_sq': give all of the state remat-run "
              "--save-weights wrote, or none of it");
}
