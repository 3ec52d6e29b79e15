//===- tests/unit/VerifierTest.cpp - One test per verifier rule -----------===//
#include "ir/Graph.h"
#include "ir/Support.h"
#include "ir/Verifier.h"

#include <doctest/doctest.h>

using namespace remat;
using namespace remat::ir;

namespace {
const TensorType kVec(DType::F32, {4});

std::string verifyMessage(const Graph &graph) {
  llvm::Error err = verify(graph);
  return err ? errorToString(std::move(err)) : std::string("ok");
}
} // namespace

TEST_CASE("a well-formed graph verifies") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Node *relu = graph.createNode(OpKind::Relu, {x}, {kVec}, {"r"});
  graph.addOutput(relu->getResult(0));
  CHECK(verifyMessage(graph) == "ok");
}

TEST_CASE("use before definition: the schedule is not topological") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Node *a = graph.createNode(OpKind::Relu, {x}, {kVec}, {"a"});
  Node *b = graph.createNode(OpKind::Neg, {a->getResult(0)}, {kVec}, {"b"});
  graph.addOutput(b->getResult(0));
  b->moveBefore(a);
  CHECK(verifyMessage(graph) ==
        "graph @g: operand %a of Neg '%b' is used before its definition (the "
        "schedule is not topological)");
}

TEST_CASE("a cycle is named as such") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Node *a = graph.createNode(OpKind::Add, {x, x}, {kVec}, {"a"});
  Node *b = graph.createNode(OpKind::Neg, {a->getResult(0)}, {kVec}, {"b"});
  graph.addOutput(b->getResult(0));
  a->setOperand(1, b->getResult(0));
  CHECK(verifyMessage(graph) == "graph @g: cycle through %a -> %b -> %a");
}

namespace remat::ir {
/// Reaches behind the IR's API to build the inconsistent states that only a
/// buggy pass could make.
struct IRTestAccess {
  static void setOperandWithoutUse(Node *node, unsigned i, Value *value) {
    node->operands_[i] = value;
  }
  static void addStrayUse(Value *value, Node *user, unsigned index) {
    value->uses_.push_back(Use{user, index});
  }
  static void dropUses(Value *value) { value->uses_.clear(); }
};
} // namespace remat::ir

TEST_CASE("use lists inconsistent with operands") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Value *y = graph.addInput("y", kVec);
  Node *a = graph.createNode(OpKind::Relu, {x}, {kVec}, {"a"});
  graph.addOutput(a->getResult(0));
  CHECK(verifyMessage(graph) == "ok");

  // The operand changed but neither use list knows: %x keeps a stale use.
  IRTestAccess::setOperandWithoutUse(a, 0, y);
  CHECK(verifyMessage(graph) ==
        "graph @g: use list of %x names a node that does not use it");
  // Without the stale use, the missing use of %y is what is wrong.
  IRTestAccess::dropUses(x);
  CHECK(verifyMessage(graph) == "graph @g: Relu '%a': operand 0 (%y) does "
                                "not list this node among its uses");
  // Restore %x as the operand with its use; then give %y a use that does
  // not exist.
  IRTestAccess::setOperandWithoutUse(a, 0, x);
  IRTestAccess::addStrayUse(x, a, 0);
  CHECK(verifyMessage(graph) == "ok");
  IRTestAccess::addStrayUse(y, a, 0);
  CHECK(verifyMessage(graph) ==
        "graph @g: use list of %y names a node that does not use it");
  IRTestAccess::dropUses(y);
  // A duplicated use of the right operand.
  IRTestAccess::addStrayUse(x, a, 0);
  CHECK(verifyMessage(graph) ==
        "graph @g: use list of %x names a node that does not use it");
  IRTestAccess::dropUses(x);
  IRTestAccess::addStrayUse(x, a, 0);
  CHECK(verifyMessage(graph) == "ok");
}

TEST_CASE("operand or result types that contradict inference") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Node *relu = graph.createNode(OpKind::Relu, {x}, {TensorType(DType::F32, {3})},
                                {"r"});
  graph.addOutput(relu->getResult(0));
  std::string message = verifyMessage(graph);
  CHECK(message.rfind("graph @g: Relu '%r'", 0) == 0);
  CHECK(message.find("declared type f32[3] of result %r does not match "
                     "inferred type f32[4]") != std::string::npos);

  Graph mixed("m");
  Value *f = mixed.addInput("f", kVec);
  Value *i = mixed.addInput("i", TensorType(DType::I64, {4}));
  Node *add = mixed.createNode(OpKind::Add, {f, i}, {kVec}, {"s"});
  mixed.addOutput(add->getResult(0));
  std::string mixedMessage = verifyMessage(mixed);
  CHECK(mixedMessage.rfind("graph @m: Add '%s'", 0) == 0);
  CHECK(mixedMessage.find("i64") != std::string::npos);
}

TEST_CASE("wrong arity") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Node *relu = graph.createNode(OpKind::Relu, {x, x}, {kVec}, {"r"});
  graph.addOutput(relu->getResult(0));
  std::string message = verifyMessage(graph);
  CHECK(message.rfind("graph @g: Relu '%r'", 0) == 0);
  CHECK(message.find("2") != std::string::npos);

  Graph results("h");
  Value *y = results.addInput("y", kVec);
  Node *neg = results.createNode(OpKind::Neg, {y}, {kVec, kVec}, {"n", "m"});
  results.addOutput(neg->getResult(0));
  CHECK(verifyMessage(results).rfind("graph @h: Neg '%n'", 0) == 0);
}

TEST_CASE("graph outputs not defined in the graph") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  graph.addOutput(x);
  CHECK(verifyMessage(graph) == "ok");

  Graph other("o");
  Value *foreign = other.addInput("foreign", kVec);
  Graph empty("e");
  empty.addInput("x", kVec);
  CHECK(verifyMessage(empty) == "graph @e: graph has no outputs");
  // A value of another graph used as an operand (Graph::addOutput asserts
  // against foreign outputs, so a bug can only smuggle one in this way).
  Node *neg = graph.createNode(OpKind::Neg, {x}, {kVec}, {"n"});
  neg->setOperand(0, foreign);
  CHECK(verifyMessage(graph) ==
        "graph @g: Neg '%n': operand 0 (%foreign) is not a value of this graph");
  neg->setOperand(0, x);
}

TEST_CASE("duplicate value names") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Node *a = graph.createNode(OpKind::Relu, {x}, {kVec}, {"a"});
  Node *b = graph.createNode(OpKind::Neg, {a->getResult(0)}, {kVec}, {"b"});
  graph.addOutput(b->getResult(0));
  b->getResult(0)->setName("a");
  CHECK(verifyMessage(graph) == "graph @g: duplicate value name %a");
  b->getResult(0)->setName("x");
  CHECK(verifyMessage(graph) == "graph @g: duplicate value name %x");
}

TEST_CASE("unknown op") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec);
  Node *bogus =
      graph.createNode(static_cast<OpKind>(allOps().size() + 7), {x}, {kVec},
                       {"u"});
  graph.addOutput(bogus->getResult(0));
  CHECK(verifyMessage(graph) == "graph @g: unknown op (kind " +
                                    std::to_string(allOps().size() + 7) + ")");
}

TEST_CASE("weights must be inputs, and input data must match the type") {
  Graph graph("g");
  Value *x = graph.addInput("x", kVec, /*isWeight=*/true);
  Node *relu = graph.createNode(OpKind::Relu, {x}, {kVec}, {"r"});
  graph.addOutput(relu->getResult(0));
  relu->getResult(0)->setWeight(true);
  CHECK(verifyMessage(graph) == "graph @g: Relu '%r': result %r is flagged "
                                "weight, but weights are graph inputs");
  relu->getResult(0)->setWeight(false);
  x->setData(TensorData::fromDoubles(TensorType(DType::F32, {2}), {1, 2}));
  CHECK(verifyMessage(graph) ==
        "graph @g: data of input %x has type f32[2] but the input is f32[4]");
}
