//===- tests/unit/PassesTest.cpp - dce and cse ----------------------------===//
#include "ir/Graph.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"

#include <doctest/doctest.h>

using namespace remat;
using namespace remat::ir;
using namespace remat::passes;

namespace {
const TensorType kVec(DType::F32, {4});

bool runPass(Pass &pass, Graph &graph) {
  auto changed = pass.run(graph);
  REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
  llvm::Error err = verify(graph);
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  return *changed;
}

std::string schedule(const Graph &graph) {
  std::string names;
  for (const Node &node : graph.getNodes())
    names +=
        (llvm::Twine(names.empty() ? "" : " ") + node.getResult(0)->getName())
            .str();
  return names;
}
} // namespace

TEST_CASE("dce removes dead chains in one sweep and keeps outputs") {
  // %a = Relu(%x); %d1 = Neg(%a); %d2 = Exp(%d1); %b = Neg(%a); return %b
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Value *a = graph.createNode(OpKind::Relu, {x}, {kVec}, {"a"})->getResult(0);
  Value *d1 = graph.createNode(OpKind::Neg, {a}, {kVec}, {"d1"})->getResult(0);
  graph.createNode(OpKind::Exp, {d1}, {kVec}, {"d2"});
  Value *b = graph.createNode(OpKind::Neg, {a}, {kVec}, {"b"})->getResult(0);
  graph.addOutput(b);
  DcePass dce;
  CHECK(runPass(dce, graph));
  CHECK(schedule(graph) == "a b");
  CHECK(a->getNumUses() == 1);
  CHECK_FALSE(runPass(dce, graph)); // Nothing left to do.
}

TEST_CASE("dce keeps a node if any of its results is used") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Node *drop = graph.createNode(OpKind::Dropout, {x},
                                {kVec, TensorType(DType::Bool, {4})},
                                {"y", "mask"});
  graph.addOutput(drop->getResult(1));
  DcePass dce;
  CHECK_FALSE(runPass(dce, graph));
  CHECK(graph.getNumNodes() == 1);
}

TEST_CASE("dce keeps unused inputs and weights") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  graph.addInput("w", kVec, /*isWeight=*/true);
  graph.addOutput(x);
  DcePass dce;
  CHECK_FALSE(runPass(dce, graph));
  CHECK(graph.getNumInputs() == 2);
}

TEST_CASE("cse merges identical nodes and rewires their uses") {
  // %a = Add(%x, %y); %b = Add(%x, %y); %c = Mul(%a, %b); return %c, %b
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Value *y = graph.addInput("y", kVec);
  Value *a = graph.createNode(OpKind::Add, {x, y}, {kVec}, {"a"})->getResult(0);
  Value *b = graph.createNode(OpKind::Add, {x, y}, {kVec}, {"b"})->getResult(0);
  Node *mul = graph.createNode(OpKind::Mul, {a, b}, {kVec}, {"c"});
  graph.addOutput(mul->getResult(0));
  graph.addOutput(b);
  CsePass cse;
  CHECK(runPass(cse, graph));
  CHECK(schedule(graph) == "a c");
  CHECK(mul->getOperand(0) == a);
  CHECK(mul->getOperand(1) == a);
  CHECK(graph.getOutputs()[1] == a);
  CHECK_FALSE(runPass(cse, graph));
}

TEST_CASE("cse merges transitively in one pass") {
  // Once %b merges into %a, Relu(%a) and Relu(%b) become identical.
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Value *a = graph.createNode(OpKind::Neg, {x}, {kVec}, {"a"})->getResult(0);
  Value *b = graph.createNode(OpKind::Neg, {x}, {kVec}, {"b"})->getResult(0);
  Value *ra = graph.createNode(OpKind::Relu, {a}, {kVec}, {"ra"})->getResult(0);
  Value *rb = graph.createNode(OpKind::Relu, {b}, {kVec}, {"rb"})->getResult(0);
  Node *sum = graph.createNode(OpKind::Add, {ra, rb}, {kVec}, {"s"});
  graph.addOutput(sum->getResult(0));
  CsePass cse;
  CHECK(runPass(cse, graph));
  CHECK(schedule(graph) == "a ra s");
}

TEST_CASE("cse keeps nodes that differ in attributes, operands or stage") {
  Graph graph("g");
  Value *x = graph.addInput("x", TensorType(DType::F32, {2, 4}));
  AttrList axis0, axis1;
  axis0.set("axis", int64_t(0));
  axis1.set("axis", int64_t(1));
  TensorType shape(DType::F32, {2, 4});
  Value *s0 = graph.createNode(OpKind::Softmax, {x}, {shape}, {"s0"}, axis0)
                  ->getResult(0);
  Value *s1 = graph.createNode(OpKind::Softmax, {x}, {shape}, {"s1"}, axis1)
                  ->getResult(0);
  Node *fwd = graph.createNode(OpKind::Relu, {x}, {shape}, {"f"});
  Node *bwd = graph.createNode(OpKind::Relu, {x}, {shape}, {"b"});
  bwd->setStage(Stage::Backward);
  Value *sub = graph.createNode(OpKind::Sub, {s0, s1}, {shape}, {"d1"})
                   ->getResult(0);
  Value *subSwapped = graph.createNode(OpKind::Sub, {s1, s0}, {shape}, {"d2"})
                          ->getResult(0);
  Value *total = graph.createNode(OpKind::Add, {sub, subSwapped}, {shape},
                                  {"t1"})->getResult(0);
  Value *both = graph.createNode(OpKind::Add, {fwd->getResult(0),
                                               bwd->getResult(0)},
                                 {shape}, {"t2"})->getResult(0);
  graph.addOutput(total);
  graph.addOutput(both);
  CsePass cse;
  CHECK_FALSE(runPass(cse, graph));
  CHECK(graph.getNumNodes() == 8);
}

TEST_CASE("cse never merges Stage::Recompute nodes") {
  // %h = Relu(%x) (forward); %h.remat = Relu(%x) remat; a second
  // %h.remat.1 = Relu(%x) remat. All three survive: merging a recompute
  // clone into its original would undo rematerialization.
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Value *h = graph.createNode(OpKind::Relu, {x}, {kVec}, {"h"})->getResult(0);
  Node *r1 = graph.createNode(OpKind::Relu, {x}, {kVec}, {"h.remat"});
  Node *r2 = graph.createNode(OpKind::Relu, {x}, {kVec}, {"h.remat.1"});
  r1->setStage(Stage::Recompute);
  r2->setStage(Stage::Recompute);
  Value *s1 = graph.createNode(OpKind::Add, {h, r1->getResult(0)}, {kVec},
                               {"s1"})->getResult(0);
  Value *s2 = graph.createNode(OpKind::Add, {s1, r2->getResult(0)}, {kVec},
                               {"s2"})->getResult(0);
  graph.addOutput(s2);
  CsePass cse;
  CHECK_FALSE(runPass(cse, graph));
  CHECK(schedule(graph) == "h h.remat h.remat.1 s1 s2");

  // The same graph with forward clones instead does merge.
  for (Node *node : {r1, r2})
    node->setStage(Stage::Forward);
  CHECK(runPass(cse, graph));
  CHECK(schedule(graph) == "h s1 s2");
}

TEST_CASE("cse merges equal constants by contents") {
  Graph graph("g");
  TensorType type(DType::I64, {2});
  auto makeConstant = [&](std::string name, int64_t last) {
    AttrList attrs;
    attrs.set("value", TensorDataPtr(TensorData::fromInts(type, {1, last})));
    return graph.createNode(OpKind::Constant, {}, {type}, {name}, attrs)
        ->getResult(0);
  };
  Value *c1 = makeConstant("c1", 2);
  Value *c2 = makeConstant("c2", 2);
  Value *c3 = makeConstant("c3", 3);
  Value *s = graph.createNode(OpKind::Add, {c1, c2}, {type}, {"s"})->getResult(0);
  Value *t = graph.createNode(OpKind::Add, {s, c3}, {type}, {"t"})->getResult(0);
  graph.addOutput(t);
  CsePass cse;
  CHECK(runPass(cse, graph));
  CHECK(schedule(graph) == "c1 c3 s t");
}
