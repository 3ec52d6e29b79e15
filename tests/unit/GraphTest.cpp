//===- tests/unit/GraphTest.cpp - IR mutators -----------------------------===//
//
// One test per mutator, in the Given / Execute / Result form of its comment
// in ir/Graph.h. Each ends with the Verifier, so use lists are checked too.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/GradientName.h"
#include "ir/Graph.h"
#include "ir/Support.h"
#include "ir/Verifier.h"

#include <doctest/doctest.h>

#include <functional>
#include <utility>
#include <vector>

using namespace remat;
using namespace remat::ir;

namespace {
const TensorType kVec(DType::F32, {4});

/// \returns the names of the nodes' first results in schedule order.
std::string schedule(const Graph &graph) {
  std::string names;
  for (const Node &node : graph.getNodes())
    names +=
        (llvm::Twine(names.empty() ? "" : " ") + node.getResult(0)->getName())
            .str();
  return names;
}

void requireValid(const Graph &graph) {
  llvm::Error err = verify(graph);
  INFO((err ? errorToString(std::move(err)) : std::string("ok")));
  REQUIRE(!err);
}

/// graph @g(%x: f32[4], %y: f32[4]) { %a = Add(%x, %y); %b = Relu(%a);
/// return %b }
struct Fixture {
  Graph graph{"g"};
  Value *x = graph.addInput("x", kVec);
  Value *y = graph.addInput("y", kVec);
  Node *add = graph.createNode(OpKind::Add, {x, y}, {kVec}, {"a"});
  Node *relu =
      graph.createNode(OpKind::Relu, {add->getResult(0)}, {kVec}, {"b"});
  Fixture() { graph.addOutput(relu->getResult(0)); }
};
} // namespace

TEST_CASE("createNode links operands and results") {
  Fixture f;
  Value *a = f.add->getResult(0);
  CHECK(a->getDefiningNode() == f.add);
  CHECK(a->getNumUses() == 1);
  CHECK(a->getUses()[0] == Use{f.relu, 0});
  CHECK(f.x->getUses()[0] == Use{f.add, 0});
  CHECK(f.y->getUses()[0] == Use{f.add, 1});
  CHECK(f.relu->getResult(0)->isGraphOutput());
  CHECK(f.graph.lookup("a") == a);
  CHECK(f.graph.lookup("nope") == nullptr);
  requireValid(f.graph);
}

TEST_CASE("createNode inserts before a given node") {
  // Given:   %a = Add(%x, %y); %b = Relu(%a)
  // Execute: createNode(Neg, {%x}, before = node(%b))
  // Result:  %a = Add(%x, %y); %n = Neg(%x); %b = Relu(%a)
  Fixture f;
  f.graph.createNode(OpKind::Neg, {f.x}, {kVec}, {"n"}, {}, f.relu);
  CHECK(schedule(f.graph) == "a n b");
  requireValid(f.graph);
}

TEST_CASE("replaceAllUsesWith rewires operands and outputs") {
  // Given:   %a = Add(%x, %y); %b = Relu(%a); %c = Neg(%a); return %b, %a
  // Execute: %a.replaceAllUsesWith(%x)
  // Result:  %b = Relu(%x); %c = Neg(%x); return %b, %x
  Fixture f;
  Value *a = f.add->getResult(0);
  Node *neg = f.graph.createNode(OpKind::Neg, {a}, {kVec}, {"c"});
  f.graph.addOutput(a);
  a->replaceAllUsesWith(f.x);
  CHECK_FALSE(a->hasUses());
  CHECK_FALSE(a->isGraphOutput());
  CHECK(f.relu->getOperand(0) == f.x);
  CHECK(neg->getOperand(0) == f.x);
  CHECK(f.graph.getOutputs()[1] == f.x);
  CHECK(f.x->isGraphOutput());
  CHECK(f.x->getNumUses() == 3); // Add, Relu, Neg.
  requireValid(f.graph);
}

TEST_CASE("eraseNode drops the node's uses") {
  // Given:   %a = Add(%x, %y); %b = Relu(%a); %d = Neg(%x)
  // Execute: eraseNode(node(%d))
  // Result:  %x has one use again
  Fixture f;
  Node *neg = f.graph.createNode(OpKind::Neg, {f.x}, {kVec}, {"d"});
  CHECK(f.x->getNumUses() == 2);
  f.graph.eraseNode(neg);
  CHECK(f.x->getNumUses() == 1);
  CHECK(f.graph.lookup("d") == nullptr); // The name is free again.
  CHECK(f.graph.uniqueName("d") == "d");
  CHECK(schedule(f.graph) == "a b");
  requireValid(f.graph);
}

TEST_CASE("setOperand, addOperand and removeOperand keep use lists right") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Value *y = graph.addInput("y", kVec);
  AttrList axis;
  axis.set("axis", int64_t(0));
  Node *concat =
      graph.createNode(OpKind::Concat, {x}, {kVec}, {"c"}, axis);
  graph.addOutput(concat->getResult(0));

  // Given: %c = Concat(%x)  Execute: addOperand(%y)  Result: Concat(%x, %y)
  concat->addOperand(y);
  concat->getResult(0)->setType(TensorType(DType::F32, {8}));
  CHECK(y->getUses()[0] == Use{concat, 1});
  requireValid(graph);

  // Given: Concat(%x, %y)  Execute: setOperand(0, %y)  Result: Concat(%y, %y)
  concat->setOperand(0, y);
  CHECK_FALSE(x->hasUses());
  CHECK(y->getNumUses() == 2);
  requireValid(graph);

  // Given: Concat(%y, %y, %x)  Execute: removeOperand(0)
  // Result: Concat(%y, %x), and the use of %x now records index 1.
  concat->addOperand(x);
  concat->getResult(0)->setType(TensorType(DType::F32, {12}));
  concat->removeOperand(0);
  concat->getResult(0)->setType(TensorType(DType::F32, {8}));
  REQUIRE(concat->getNumOperands() == 2);
  CHECK(concat->getOperand(1) == x);
  CHECK(x->getUses()[0] == Use{concat, 1});
  CHECK(y->getUses()[0] == Use{concat, 0});
  requireValid(graph);
}

TEST_CASE("moveBefore and moveAfter reorder the schedule") {
  // Given:   %a = Add(%x, %y); %b = Relu(%a); %n = Neg(%x)
  // Execute: node(%n).moveBefore(node(%a))
  // Result:  %n = Neg(%x); %a = Add(%x, %y); %b = Relu(%a)
  Fixture f;
  Node *neg = f.graph.createNode(OpKind::Neg, {f.x}, {kVec}, {"n"});
  neg->moveBefore(f.add);
  CHECK(schedule(f.graph) == "n a b");
  neg->moveAfter(f.relu);
  CHECK(schedule(f.graph) == "a b n");
  neg->moveAfter(f.add);
  CHECK(schedule(f.graph) == "a n b");
  requireValid(f.graph);
}

TEST_CASE("outputs can be added, replaced and removed") {
  Fixture f;
  Value *a = f.add->getResult(0);
  f.graph.addOutput(a);
  CHECK(a->isGraphOutput());
  f.graph.setOutput(1, f.x);
  CHECK_FALSE(a->isGraphOutput());
  CHECK(f.x->isGraphOutput());
  f.graph.removeOutput(1);
  CHECK_FALSE(f.x->isGraphOutput());
  CHECK(f.graph.getOutputs().size() == 1);
}

TEST_CASE("inputs can be erased when unused") {
  Fixture f;
  Value *z = f.graph.addInput("z", kVec, /*isWeight=*/true);
  CHECK(z->isWeight());
  CHECK(f.graph.getNumInputs() == 3);
  f.graph.eraseInput(z);
  CHECK(f.graph.getNumInputs() == 2);
  CHECK(f.graph.lookup("z") == nullptr);
}

TEST_CASE("every mutator drops the memory plan") {
  // A plan is valid only for the graph it was made for (MemoryPlan in
  // ir/Graph.h): sizes come from types, offsets from the schedule and uses.
  const TensorType kWide(DType::F32, {8});
  std::vector<std::pair<std::string, std::function<void(Fixture &)>>> edits = {
      {"setType", [&](Fixture &f) { f.add->getResult(0)->setType(kWide); }},
      {"setOperand", [](Fixture &f) { f.add->setOperand(1, f.x); }},
      {"createNode",
       [](Fixture &f) {
         f.graph.createNode(OpKind::Neg, {f.x}, {kVec}, {"n"});
       }},
      {"moveBefore", [](Fixture &f) { f.relu->moveBefore(f.add); }},
      {"addOutput", [](Fixture &f) { f.graph.addOutput(f.x); }},
  };
  for (const auto &edit : edits) {
    INFO(edit.first);
    Fixture f;
    MemoryPlan plan;
    f.graph.setMemoryPlan(std::move(plan));
    REQUIRE(f.graph.getMemoryPlan());
    edit.second(f);
    CHECK(f.graph.getMemoryPlan() == nullptr);
  }
}

TEST_CASE("uniqueName picks fresh names") {
  Fixture f;
  CHECK(f.graph.uniqueName("q") == "q");
  CHECK(f.graph.uniqueName("a") == "a.1");
  f.graph.createNode(OpKind::Neg, {f.x}, {kVec}, {"a.1"});
  CHECK(f.graph.uniqueName("a") == "a.2");
  std::string t0 = f.graph.uniqueName("");
  CHECK(f.graph.lookup(t0) == nullptr);
  // Renaming a value updates lookup.
  f.add->getResult(0)->setName("sum");
  CHECK(f.graph.lookup("sum") == f.add->getResult(0));
  CHECK(f.graph.lookup("a") == nullptr);
}

TEST_CASE("gradientName and isGradientName spell the _grad rule") {
  CHECK(gradientName("w") == "w_grad");
  CHECK(gradientName("layer.0.bias") == "layer.0.bias_grad");
  CHECK(isGradientName("w_grad"));
  CHECK(isGradientName(gradientName("loss")));
  CHECK_FALSE(isGradientName("w_grad.1"));
  CHECK_FALSE(isGradientName("grad"));
  CHECK_FALSE(isGradientName("w"));
}

TEST_CASE("clone is a deep, equal copy") {
  Fixture f;
  f.x->setData(TensorData::fromDoubles(kVec, {1, 2, 3, 4}));
  f.relu->setStage(Stage::Backward);
  f.relu->getAttrs().set("note", std::string("hi"));
  std::unique_ptr<Graph> copy = f.graph.clone();
  std::string why;
  CHECK_MESSAGE(graphsEqual(f.graph, *copy, &why), why);
  requireValid(*copy);
  // The copy is independent.
  Node &copiedRelu = copy->getNodes().back();
  CHECK(&copiedRelu != f.relu);
  copiedRelu.setStage(Stage::Forward);
  CHECK_FALSE(graphsEqual(f.graph, *copy, &why));
  CHECK(why == "node Relu '%b': stages differ");
}

TEST_CASE("graphsEqual reports the first difference") {
  Fixture f, g;
  std::string why;
  CHECK(graphsEqual(f.graph, g.graph, &why));
  g.add->getResult(0)->setType(TensorType(DType::F32, {5}));
  CHECK_FALSE(graphsEqual(f.graph, g.graph, &why));
  CHECK(why == "node Add '%a': result 0 differs (%a: f32[4] vs %a: f32[5])");
  Fixture h;
  h.relu->setOperand(0, h.x);
  CHECK_FALSE(graphsEqual(f.graph, h.graph, &why));
  CHECK(why == "node Relu '%b': operand 0 differs (%a vs %x)");
}

TEST_CASE("a long chain is destroyed without deep recursion") {
  Graph graph("chain");
  Value *v = graph.addInput("x", kVec);
  for (int i = 0; i < 200000; ++i)
    v = graph.createNode(OpKind::Relu, {v}, {kVec})->getResult(0);
  graph.addOutput(v);
  CHECK(graph.getNumNodes() == 200000);
}

TEST_CASE("Builder infers result types and takes stage and layer") {
  // Given:   graph @g(%x: f32[2,3], %w: f32[3,4] weight)
  // Execute: b.createValue(MatMul, {%x, %w}); then Relu, in Backward, layer 2
  // Result:  %t0 = MatMul(%x, %w) : f32[2,4]; %r = Relu(%t0) : f32[2,4] bwd
  Graph graph("g");
  Value *x = graph.addInput("x", TensorType(DType::F32, {2, 3}));
  Value *w = graph.addInput("w", TensorType(DType::F32, {3, 4}), true);
  Builder builder(graph);
  auto mm = builder.createValue(OpKind::MatMul, {x, w});
  REQUIRE(bool(mm));
  CHECK((*mm)->getType() == TensorType(DType::F32, {2, 4}));
  builder.setStage(Stage::Backward);
  builder.setLayer(2);
  auto relu = builder.createValue(OpKind::Relu, {*mm}, {}, "r");
  REQUIRE(bool(relu));
  CHECK((*relu)->getName() == "r");
  CHECK((*relu)->getDefiningNode()->getStage() == Stage::Backward);
  CHECK((*relu)->getDefiningNode()->getLayer() == 2);
  graph.addOutput(*relu);
  requireValid(graph);

  // Multi-result nodes get distinct names from one base.
  auto dropout = builder.create(OpKind::Dropout, {*relu}, {}, 2, "r");
  REQUIRE(bool(dropout));
  CHECK((*dropout)->getResult(0)->getName() == "r.1");
  CHECK((*dropout)->getResult(1)->getName() == "r.1.1");
  CHECK((*dropout)->getResult(1)->getType() == TensorType(DType::Bool, {2, 4}));

  // Insertion point: before the Relu.
  builder.setInsertionPoint((*relu)->getDefiningNode());
  Value *c = builder.createConstant(
      TensorData::fromDoubles(TensorType(DType::F32, {}), {0.5}), "half");
  CHECK(std::next(c->getDefiningNode()->getIterator()) ==
        (*relu)->getDefiningNode()->getIterator());
  requireValid(graph);
}

TEST_CASE("Builder creates nothing when inference fails") {
  Graph graph("g");
  Value *x = graph.addInput("x", TensorType(DType::F32, {2, 3}));
  Value *y = graph.addInput("y", TensorType(DType::F32, {4, 5}));
  Builder builder(graph);
  auto bad = builder.createValue(OpKind::MatMul, {x, y}, {}, "m");
  REQUIRE_FALSE(bool(bad));
  std::string message = errorToString(bad.takeError());
  CHECK(message.find("MatMul '%m'") != std::string::npos);
  CHECK(graph.getNumNodes() == 0);
  CHECK_FALSE(x->hasUses());
  CHECK(graph.lookup("m") == nullptr);

  // A shape that depends on a non-constant operand.
  Value *shape = graph.addInput("shape", TensorType(DType::I64, {2}));
  auto reshaped = builder.createValue(OpKind::Reshape, {x, shape}, {}, "r");
  REQUIRE_FALSE(bool(reshaped));
  CHECK(errorToString(reshaped.takeError()) ==
        "Reshape '%r': result shape depends on an operand that is not a "
        "constant");
  CHECK(graph.getNumNodes() == 0);
  CHECK_FALSE(shape->hasUses());
}

TEST_CASE("cloneNode records the original; erasing it clears the mark") {
  Fixture f;
  llvm::DenseMap<const Value *, Value *> map;
  Node *copy =
      f.graph.cloneNode(*f.add, map, f.relu, Stage::Recompute, ".remat");
  CHECK(copy->getOrigin() == f.add);
  CHECK(f.add->getOrigin() == nullptr);
  // A copy of a copy is a copy of the original.
  Node *again =
      f.graph.cloneNode(*copy, map, f.relu, Stage::Recompute, ".remat");
  CHECK(again->getOrigin() == f.add);

  // Graph::clone keeps the marks, and graphsEqual compares them.
  std::unique_ptr<Graph> cloned = f.graph.clone();
  CHECK(cloned->lookup("a.remat")->getDefiningNode()->getOrigin() ==
        cloned->lookup("a")->getDefiningNode());
  std::string why;
  CHECK_MESSAGE(graphsEqual(f.graph, *cloned, &why), why);
  copy->setOrigin(nullptr);
  CHECK_FALSE(graphsEqual(f.graph, *cloned, &why));
  CHECK(why == "node Add '%a.remat': origins differ (none vs %a)");
  copy->setOrigin(f.add);

  // Once the original is erased, its copies are originals themselves.
  f.add->getResult(0)->replaceAllUsesWith(copy->getResult(0));
  f.graph.eraseNode(f.add);
  CHECK(copy->getOrigin() == nullptr);
  CHECK(again->getOrigin() == nullptr);
  requireValid(f.graph);
}

TEST_CASE("a gradient mark follows the uses and goes with its weight") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Value *w = graph.addInput("w", kVec, /*isWeight=*/true);
  Value *v = graph.addInput("v", kVec, /*isWeight=*/true);
  Value *g =
      graph.createNode(OpKind::Mul, {x, w}, {kVec}, {"w_grad"})->getResult(0);
  Value *h = graph.createNode(OpKind::Add, {x, w}, {kVec}, {"h"})->getResult(0);
  graph.addOutput(g);
  g->setGradientOf(w);
  // The name alone makes nothing a gradient.
  CHECK(graph.lookup("h")->getGradientOf() == nullptr);

  // Replacing the gradient hands its mark on (fold-constants and
  // fold-transpose replace a node and keep its name this way).
  g->replaceAllUsesWith(h);
  CHECK(h->getGradientOf() == w);
  CHECK(g->getGradientOf() == nullptr);
  std::unique_ptr<Graph> cloned = graph.clone();
  CHECK(cloned->lookup("h")->getGradientOf() == cloned->lookup("w"));
  std::string why;
  CHECK_MESSAGE(graphsEqual(graph, *cloned, &why), why);
  h->setGradientOf(v);
  CHECK_FALSE(graphsEqual(graph, *cloned, &why));
  CHECK(why == "node Add '%h': result 0 is the gradient of %v vs %w");

  // Erasing the weight clears the marks that name it.
  graph.eraseInput(v);
  CHECK(h->getGradientOf() == nullptr);
  requireValid(graph);
}
