//===- tests/unit/ParserTest.cpp - The .rir parser ------------------------===//
//
// What parses into what, and every error path with its message and
// line:col. Sources are named "t.rir" so that messages read
// "t.rir:LINE:COL: ...".
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Support.h"
#include "ir/Verifier.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>

using namespace remat;
using namespace remat::ir;

namespace {

std::unique_ptr<Graph> parseOk(llvm::StringRef text, unsigned lineOffset = 0) {
  auto graph = parseGraph(text, "t.rir", lineOffset);
  if (!graph) {
    std::string message = errorToString(graph.takeError());
    INFO("text:\n" << text.str());
    FAIL("unexpected parse error: " << message);
  }
  return std::move(*graph);
}

/// \returns the error message of parsing \p text, failing if it parses.
std::string parseError(llvm::StringRef text, unsigned lineOffset = 0) {
  auto graph = parseGraph(text, "t.rir", lineOffset);
  if (graph) {
    INFO("text:\n" << text.str());
    FAIL("parsed, but an error was expected");
  }
  return errorToString(graph.takeError());
}

/// \returns the message for a graph with input `%x: f32[2]` whose body is
/// \p body (which starts on line 2).
std::string bodyError(llvm::StringRef body) {
  return parseError(("graph @g(%x: f32[2]) {\n" + body + "\n}\n").str());
}

/// Parses a one-node graph whose node has attributes \p attrs and \returns
/// the value of attribute "a".
AttrValue parseAttr(llvm::StringRef value) {
  std::string text =
      "graph @g(%x: f32[2]) {\n  %y = Identity(%x) {a = " + value.str() +
      "} : f32[2]\n  return %y\n}\n";
  auto graph = parseOk(text);
  const AttrValue *attr = graph->getNodes().front().getAttrs().find("a");
  REQUIRE(attr != nullptr);
  return *attr;
}

/// \returns the tensor of a Constant node written `dense<...>` \p dense of
/// type \p type.
TensorDataPtr parseDense(llvm::StringRef dense, llvm::StringRef type) {
  std::string text = "graph @g() {\n  %c = Constant() {value = " + dense.str() +
                     "} : " + type.str() + "\n  return %c\n}\n";
  auto graph = parseOk(text);
  TensorDataPtr data = graph->getNodes().front().getAttrs().getTensor("value");
  REQUIRE(data != nullptr);
  return data;
}

std::string denseError(llvm::StringRef dense, llvm::StringRef type) {
  return parseError("graph @g() {\n  %c = Constant() {value = " + dense.str() +
                    "} : " + type.str() + "\n  return %c\n}\n");
}

Node &nodeAt(Graph &graph, unsigned index) {
  auto it = graph.getNodes().begin();
  std::advance(it, index);
  return *it;
}

template <typename T> T element(const TensorData &data, int64_t i) {
  T value;
  std::memcpy(&value, data.getBytes().data() + i * sizeof(T), sizeof(T));
  return value;
}

const char *kMlp = R"(// one graph per case
graph @mlp(%x: f32[32,256], %w1: f32[256,256] weight, %w2: f32[256,10] weight) {
  %h = MatMul(%x, %w1) : f32[32,256]
  %a = Relu(%h) : f32[32,256]
  %r = Constant() {value = dense<f32[]: 0.1>} : f32[]
  %t = Constant() {value = dense<bool[]: true>} : bool[]
  %y, %mask = Dropout(%a, %r, %t) {seed = 7} : f32[32,256], bool[32,256]
  %o = MatMul(%y, %w2) : f32[32,10]
  %l = ReduceSum(%o) {keepdims = 0} : f32[]
  %g = Relu(%l) : f32[] bwd
  return %l, %g
}
)";

} // namespace

//===----------------------------------------------------------------------===//
// What parses
//===----------------------------------------------------------------------===//

TEST_CASE("parser reads the DESIGN.md example") {
  auto graph = parseOk(kMlp);
  CHECK(graph->getName() == "mlp");
  CHECK(graph->getSourceName() == "t.rir");

  REQUIRE(graph->getNumInputs() == 3);
  Value *x = graph->getInput(0);
  CHECK(x->getName() == "x");
  CHECK(x->getType() == TensorType(DType::F32, {32, 256}));
  CHECK(!x->isWeight());
  CHECK(graph->getInput(1)->isWeight());
  CHECK(graph->getInput(2)->getType() == TensorType(DType::F32, {256, 10}));
  CHECK(x->getLoc().line == 2);
  CHECK(x->getLoc().col == 12);

  REQUIRE(graph->getNumNodes() == 8);
  Node &matmul = nodeAt(*graph, 0);
  CHECK(matmul.getOp() == OpKind::MatMul);
  CHECK(matmul.getOperand(0) == x);
  CHECK(matmul.getOperand(1) == graph->getInput(1));
  CHECK(matmul.getLoc().line == 3);
  CHECK(matmul.getLoc().col == 3);

  Node &dropout = nodeAt(*graph, 4);
  CHECK(dropout.getOp() == OpKind::Dropout);
  REQUIRE(dropout.getNumResults() == 2);
  CHECK(dropout.getResult(1)->getName() == "mask");
  CHECK(dropout.getResult(1)->getType() == TensorType(DType::Bool, {32, 256}));
  CHECK(dropout.getResult(1)->getLoc().col == 7);
  CHECK(dropout.getAttrs().getInt("seed") == 7);

  TensorDataPtr ratio = nodeAt(*graph, 2).getAttrs().getTensor("value");
  REQUIRE(ratio);
  CHECK(ratio->getType() == TensorType(DType::F32, {}));
  CHECK(element<float>(*ratio, 0) == 0.1f);

  CHECK(nodeAt(*graph, 6).getStage() == Stage::Forward);
  CHECK(nodeAt(*graph, 7).getStage() == Stage::Backward);

  REQUIRE(graph->getOutputs().size() == 2);
  CHECK(graph->getOutputs()[0]->getName() == "l");
  CHECK(graph->getOutputs()[1]->getName() == "g");
  llvm::Error err = verify(*graph);
  INFO((err ? errorToString(std::move(err)) : std::string("ok")));
  CHECK(!err);
}

TEST_CASE("parser adds the line offset to locations and messages") {
  auto graph = parseOk("graph @g(%x: f32[2]) {\n  %y = Relu(%x) : f32[2]\n"
                       "  return %y\n}\n",
                       /*lineOffset=*/10);
  CHECK(graph->getInput(0)->getLoc().line == 11);
  CHECK(graph->getNodes().front().getLoc().line == 12);
  CHECK(parseError("graph @g(%x: f32[2]) {\n  %y = Foo(%x) : f32[2]\n"
                   "  return %y\n}\n",
                   /*lineOffset=*/10) == "t.rir:12:8: unknown op 'Foo'");
}

TEST_CASE("parser ignores whitespace, newlines and comments") {
  auto graph =
      parseOk("// leading comment\n graph@g( %x :f32 [ 2 ] ){%y=Relu(%x):f32[2]"
              "   // trailing comment\n return %y }  // after the graph\n\n");
  CHECK(graph->getNumNodes() == 1);
  CHECK(graph->getNodes().front().getLoc().line == 2);
}

TEST_CASE("parser reads stages") {
  auto graph = parseOk(R"(graph @g(%x: f32[2]) {
  %a = Relu(%x) : f32[2] fwd
  %b = Relu(%a) : f32[2] bwd
  %c = Relu(%a) : f32[2] remat
  %d = Relu(%c) : f32[2]
  return %b, %d
})");
  CHECK(nodeAt(*graph, 0).getStage() == Stage::Forward);
  CHECK(nodeAt(*graph, 1).getStage() == Stage::Backward);
  CHECK(nodeAt(*graph, 2).getStage() == Stage::Recompute);
  CHECK(nodeAt(*graph, 3).getStage() == Stage::Forward);
  CHECK(bodyError("  %a = Relu(%x) : f32[2] later\n  return %a") ==
        "t.rir:2:26: unknown stage 'later' (expected 'fwd', 'bwd' or "
        "'remat')");
}

TEST_CASE("parser reads plain and quoted names") {
  auto graph = parseOk(
      R"(graph @"my graph"(%bert.encoder.layer.0.attention.self.query.weight: f32[2], %"odd: \"name\"\\ \x41\n\t": f32[2]) {
  %/bert/Add_output_0 = Add(%bert.encoder.layer.0.attention.self.query.weight, %"odd: \"name\"\\ \x41\n\t") : f32[2]
  %a$b-c = Relu(%/bert/Add_output_0) : f32[2]
  return %a$b-c
})");
  CHECK(graph->getName() == "my graph");
  CHECK(graph->getInput(0)->getName() ==
        "bert.encoder.layer.0.attention.self.query.weight");
  CHECK(graph->getInput(1)->getName() == "odd: \"name\"\\ A\n\t");
  CHECK(nodeAt(*graph, 0).getResult(0)->getName() == "/bert/Add_output_0");
  CHECK(nodeAt(*graph, 0).getOperand(1) == graph->getInput(1));
  CHECK(graph->getOutputs()[0]->getName() == "a$b-c");
}

TEST_CASE("parser reads domain-qualified op names") {
  // No op of domain remat exists yet; ai.onnx is ONNX's default domain.
  auto graph = parseOk("graph @g(%x: f32[2]) {\n  %y = ai.onnx.Relu(%x) : "
                       "f32[2]\n  return %y\n}\n");
  CHECK(graph->getNodes().front().getOp() == OpKind::Relu);
  CHECK(bodyError("  %y = remat.Relu(%x) : f32[2]\n  return %y") ==
        "t.rir:2:8: unknown op 'remat.Relu'");
}

TEST_CASE("parser reads every attribute kind") {
  CHECK(std::get<int64_t>(parseAttr("3")) == 3);
  CHECK(std::get<int64_t>(parseAttr("-3")) == -3);
  CHECK(std::get<int64_t>(parseAttr("-9223372036854775808")) ==
        std::numeric_limits<int64_t>::min());
  CHECK(std::get<int64_t>(parseAttr("9223372036854775807")) ==
        std::numeric_limits<int64_t>::max());
  CHECK(std::get<float>(parseAttr("0.1")) == 0.1f);
  CHECK(std::get<float>(parseAttr("1e-5")) == 1e-5f);
  CHECK(std::get<float>(parseAttr("-2.0")) == -2.0f);
  CHECK(std::get<float>(parseAttr("2E+3")) == 2000.0f);
  CHECK(std::get<float>(parseAttr("inf")) == INFINITY);
  CHECK(std::get<float>(parseAttr("-inf")) == -INFINITY);
  CHECK(std::isnan(std::get<float>(parseAttr("nan"))));
  CHECK(std::signbit(std::get<float>(parseAttr("-0.0"))));
  // Underflow gives zero, as strtof does.
  CHECK(std::get<float>(parseAttr("1e-50")) == 0.0f);
  CHECK(std::get<std::string>(parseAttr("\"tanh\"")) == "tanh");
  CHECK(std::get<std::string>(parseAttr(R"("a\"b\\c\n\t\x7F")")) ==
        "a\"b\\c\n\t\x7F");
  CHECK(std::get<std::vector<int64_t>>(parseAttr("[1, -2]")) ==
        std::vector<int64_t>{1, -2});
  CHECK(std::get<std::vector<int64_t>>(parseAttr("[]")).empty());
  CHECK(std::get<std::vector<float>>(parseAttr("[0.5, 1.0]")) ==
        std::vector<float>{0.5f, 1.0f});
  // One float makes the whole list floats.
  CHECK(std::get<std::vector<float>>(parseAttr("[1, 2.5, -inf]")) ==
        std::vector<float>{1.0f, 2.5f, -INFINITY});
  CHECK(std::get<std::vector<std::string>>(parseAttr(R"(["a", "b"])")) ==
        std::vector<std::string>{"a", "b"});
  TensorDataPtr tensor =
      std::get<TensorDataPtr>(parseAttr("dense<i64[2]: [4, -5]>"));
  REQUIRE(tensor);
  CHECK(tensor->getInts() == std::vector<int64_t>{4, -5});
}

TEST_CASE("parser keeps attributes sorted by name") {
  auto graph = parseOk("graph @g(%x: f32[2,3]) {\n  %y = Softmax(%x) {z = 1, "
                       "axis = 1, b = \"s\"} : f32[2,3]\n  return %y\n}\n");
  llvm::ArrayRef<AttrList::Entry> entries =
      graph->getNodes().front().getAttrs().entries();
  REQUIRE(entries.size() == 3);
  CHECK(entries[0].first == "axis");
  CHECK(entries[1].first == "b");
  CHECK(entries[2].first == "z");
}

TEST_CASE("parser reads dense tensors as lists, splats and hex") {
  TensorDataPtr list =
      parseDense("dense<f32[2,2]: [1.0, 2, -3.5, 1e3]>", "f32[2,2]");
  CHECK(list->getType() == TensorType(DType::F32, {2, 2}));
  CHECK(element<float>(*list, 0) == 1.0f);
  CHECK(element<float>(*list, 1) == 2.0f);
  CHECK(element<float>(*list, 2) == -3.5f);
  CHECK(element<float>(*list, 3) == 1000.0f);

  TensorDataPtr splat = parseDense("dense<i32[3]: -7>", "i32[3]");
  for (int64_t i = 0; i < 3; ++i)
    CHECK(element<int32_t>(*splat, i) == -7);

  TensorDataPtr hex =
      parseDense(R"(dense<f32[2]: "0x0000803F000000c0">)", "f32[2]");
  CHECK(element<float>(*hex, 0) == 1.0f);
  CHECK(element<float>(*hex, 1) == -2.0f);

  TensorDataPtr bools =
      parseDense("dense<bool[4]: [true, false, 1, 0]>", "bool[4]");
  CHECK(std::vector<uint8_t>(bools->getBytes().begin(),
                             bools->getBytes().end()) ==
        std::vector<uint8_t>{1, 0, 1, 0});

  TensorDataPtr halves = parseDense("dense<f16[2]: [0.5, -65504.0]>", "f16[2]");
  CHECK(element<uint16_t>(*halves, 0) == 0x3800);
  CHECK(element<uint16_t>(*halves, 1) == 0xFBFF);
  TensorDataPtr bf16 = parseDense("dense<bf16[1]: [1.0]>", "bf16[1]");
  CHECK(element<uint16_t>(*bf16, 0) == 0x3F80);

  TensorDataPtr f64 = parseDense("dense<f64[1]: [0.1]>", "f64[1]");
  CHECK(element<double>(*f64, 0) == 0.1);
  TensorDataPtr small = parseDense("dense<i8[2]: [-128, 127]>", "i8[2]");
  CHECK(element<int8_t>(*small, 0) == -128);
  CHECK(element<int8_t>(*small, 1) == 127);
  TensorDataPtr bytes = parseDense("dense<u8[1]: [255]>", "u8[1]");
  CHECK(bytes->getBytes()[0] == 255);
  TensorDataPtr empty = parseDense("dense<i64[0]: []>", "i64[0]");
  CHECK(empty->getNumElements() == 0);
}

TEST_CASE("parser reads weight data") {
  auto graph = parseOk("graph @g(%w: f32[2] weight = dense<f32[2]: [1.5, "
                       "2.5]>, %b: i64[] = dense<i64[]: 3>) {\n"
                       "  %y = Relu(%w) : f32[2]\n  return %y\n}\n");
  Value *w = graph->getInput(0);
  CHECK(w->isWeight());
  REQUIRE(w->getData());
  CHECK(element<float>(*w->getData(), 1) == 2.5f);
  Value *b = graph->getInput(1);
  CHECK(!b->isWeight());
  REQUIRE(b->getData());
  CHECK(b->getData()->getInts() == std::vector<int64_t>{3});

  CHECK(parseError("graph @g(%w: f32[2] weight = dense<f32[3]: 0.0>) {\n"
                   "  return %w\n}\n") ==
        "t.rir:1:30: data of type f32[3] does not match input '%w' of type "
        "f32[2]");
}

TEST_CASE("parser accepts forward references and leaves them to the "
          "verifier") {
  auto graph = parseOk(R"(graph @g(%x: f32[2]) {
  %b = Relu(%a) : f32[2]
  %a = Relu(%x) : f32[2]
  return %b
})");
  Node &b = nodeAt(*graph, 0);
  Node &a = nodeAt(*graph, 1);
  REQUIRE(b.getNumOperands() == 1);
  CHECK(b.getOperand(0) == a.getResult(0));
  CHECK(a.getResult(0)->getNumUses() == 1);
  CHECK(a.getResult(0)->getUses()[0] == Use{&b, 0});
  // The schedule is wrong, which is the Verifier's to say.
  llvm::Error err = verify(*graph);
  CHECK(bool(err));
  llvm::consumeError(std::move(err));

  // A cycle parses too, and so does a wrong type on a node whose operand is
  // defined later (inference needs the operands in order).
  auto cycle = parseOk(R"(graph @g(%x: f32[2]) {
  %p = Add(%x, %q) : f32[7]
  %q = Relu(%p) : f32[7]
  return %q
})");
  CHECK(nodeAt(*cycle, 0).getOperand(1) == nodeAt(*cycle, 1).getResult(0));
  CHECK(nodeAt(*cycle, 1).getOperand(0) == nodeAt(*cycle, 0).getResult(0));

  // Operands of a deferred node keep their order, including the ones that
  // were already defined.
  auto mixed = parseOk(R"(graph @g(%x: f32[2], %y: f32[2]) {
  %s = Where(%c, %x, %y) : f32[2]
  %c = Equal(%x, %y) : bool[2]
  return %s
})");
  Node &where = nodeAt(*mixed, 0);
  REQUIRE(where.getNumOperands() == 3);
  CHECK(where.getOperand(0)->getName() == "c");
  CHECK(where.getOperand(1)->getName() == "x");
  CHECK(where.getOperand(2)->getName() == "y");
}

/// The .rir text of a chain of \p numNodes Relu nodes.
static std::string chainText(int numNodes) {
  std::string text = "graph @chain(%v0: f32[8]) {\n";
  for (int i = 1; i <= numNodes; ++i)
    text += "  %v" + std::to_string(i) + " = Relu(%v" + std::to_string(i - 1) +
            ") : f32[8]\n";
  text += "  return %v" + std::to_string(numNodes) + "\n}\n";
  return text;
}

/// The fastest of three parses of \p text, in this thread's CPU seconds
/// (which other processes on a loaded machine do not inflate).
static double bestParseSeconds(const std::string &text, size_t numNodes) {
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    timespec start{}, end{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    auto graph = parseOk(text);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
    REQUIRE(graph->getNumNodes() == numNodes);
    best = std::min(best, double(end.tv_sec - start.tv_sec) +
                              1e-9 * double(end.tv_nsec - start.tv_nsec));
  }
  return best;
}

TEST_CASE("parsing a chain takes time linear in its length") {
  // 4x the nodes: linear parsing takes ~4x the time, quadratic 16x. A
  // ratio, in CPU time, so that neither a loaded machine nor a sanitizer
  // build makes the test fail (a wall-clock bound did).
  double small = bestParseSeconds(chainText(25000), 25000);
  double large = bestParseSeconds(chainText(100000), 100000);
  INFO("25000 nodes: " << small << " s, 100000 nodes: " << large << " s");
  CHECK(large < 8.0 * small + 0.05);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_CASE("parser reports the first use of an undefined value") {
  REQUIRE(bodyError("  %a = Relu(%nope) : f32[2]\n  %b = Add(%a, %nope) : "
                    "f32[2]\n  return %b") ==
          "t.rir:2:13: use of undefined value '%nope'");
  REQUIRE(bodyError("  %a = Relu(%x) : f32[2]\n  return %a, %nope") ==
          "t.rir:3:14: use of undefined value '%nope'");
  CHECK(bodyError("  %a = Relu(%\"no pe\") : f32[2]\n  return %a") ==
        "t.rir:2:13: use of undefined value '%\"no pe\"'");
}

TEST_CASE("parser reports a redefinition at the second definition") {
  REQUIRE(bodyError("  %a = Relu(%x) : f32[2]\n  %a = Relu(%x) : f32[2]\n"
                    "  return %a") == "t.rir:3:3: redefinition of value '%a'");
  // A node result may not reuse an input name, nor two results one name.
  CHECK(bodyError("  %x = Relu(%x) : f32[2]\n  return %x") ==
        "t.rir:2:3: redefinition of value '%x'");
  CHECK(parseError("graph @g(%x: f32[2], %x: f32[2]) {\n  return %x\n}\n") ==
        "t.rir:1:22: redefinition of value '%x'");
  CHECK(bodyError("  %r = Constant() {value = dense<f32[]: 0.5>} : f32[]\n"
                  "  %y, %y = Dropout(%x, %r) : f32[2], bool[2]\n"
                  "  return %y") == "t.rir:3:7: redefinition of value '%y'");
  // Defined after a forward use, then again.
  CHECK(bodyError("  %b = Relu(%a) : f32[2]\n  %a = Relu(%x) : f32[2]\n"
                  "  %a = Relu(%x) : f32[2]\n  return %b") ==
        "t.rir:4:3: redefinition of value '%a'");
}

TEST_CASE("parser reports unknown ops and dtypes") {
  REQUIRE(bodyError("  %y = Foo(%x) : f32[2]\n  return %y") ==
          "t.rir:2:8: unknown op 'Foo'");
  REQUIRE(bodyError("  %y = Relu(%x) : f31[2]\n  return %y") ==
          "t.rir:2:19: unknown dtype 'f31'");
  CHECK(parseError("graph @g(%x: float[2]) {\n  return %x\n}\n") ==
        "t.rir:1:14: unknown dtype 'float'");
  CHECK(bodyError("  %y = Relu(%x) : [2]\n  return %y") ==
        "t.rir:2:19: expected a type but found '['");
}

TEST_CASE("parser reports bad syntax with what it expected") {
  REQUIRE(bodyError("  %y = Relu(%x {axis = 1} : f32[2]\n  return %y") ==
          "t.rir:2:16: expected ')' but found '{'");
  CHECK(parseError("graph g(%x: f32[2]) {\n  return %x\n}\n") ==
        "t.rir:1:7: expected a graph name but found 'g'");
  CHECK(parseError("func @g(%x: f32[2]) {\n  return %x\n}\n") ==
        "t.rir:1:1: expected 'graph' but found 'func'");
  CHECK(parseError("graph @g(%x f32[2]) {\n  return %x\n}\n") ==
        "t.rir:1:13: expected ':' but found 'f32'");
  CHECK(bodyError("  %y = Relu(%x) f32[2]\n  return %y") ==
        "t.rir:2:17: expected ':' but found 'f32'");
  CHECK(bodyError("  %y Relu(%x) : f32[2]\n  return %y") ==
        "t.rir:2:6: expected '=' but found 'Relu'");
  CHECK(bodyError("  Relu(%x) : f32[2]\n  return %y") ==
        "t.rir:2:3: expected a value name or 'return' but found 'Relu'");
  CHECK(bodyError("  %y = Relu(%x) : f32[2]") ==
        "t.rir:3:1: expected a value name or 'return' but found '}'");
  CHECK(bodyError("  return") ==
        "t.rir:3:1: expected a value name but found '}'");
  CHECK(bodyError("  return %x,") ==
        "t.rir:3:1: expected a value name but found '}'");
  CHECK(parseError("graph @g(%x: f32[2]) {\n  return %x\n") ==
        "t.rir:3:1: expected '}' but found end of input");
  CHECK(parseError("") == "t.rir:1:1: expected 'graph' but found end of input");
  CHECK(bodyError("  %y = Relu(%x) : f32[2,]\n  return %y") ==
        "t.rir:2:25: expected a dim but found ']'");
  CHECK(bodyError("  %y = Relu(%\"\") : f32[2]\n  return %y") ==
        "t.rir:2:13: empty name");
}

TEST_CASE("parser rejects anything after the graph") {
  REQUIRE(parseError("graph @g(%x: f32[2]) {\n  return %x\n}\n// fine\n"
                     "graph @h(%x: f32[2]) {\n  return %x\n}\n") ==
          "t.rir:5:1: expected end of input but found 'graph'");
  CHECK(parseError("graph @g(%x: f32[2]) {\n  return %x\n} }") ==
        "t.rir:3:3: expected end of input but found '}'");
}

TEST_CASE("parser reports bad attribute syntax") {
  REQUIRE(bodyError("  %y = Identity(%x) {axis 1} : f32[2]\n  return %y") ==
          "t.rir:2:27: expected '=' but found '1'");
  CHECK(bodyError("  %y = Identity(%x) {axis = } : f32[2]\n  return %y") ==
        "t.rir:2:29: expected an attribute value but found '}'");
  CHECK(bodyError("  %y = Identity(%x) {axis = 1 : f32[2]\n  return %y") ==
        "t.rir:2:31: expected '}' but found ':'");
  CHECK(bodyError("  %y = Identity(%x) {1 = 1} : f32[2]\n  return %y") ==
        "t.rir:2:22: expected an attribute name but found '1'");
  CHECK(bodyError("  %y = Identity(%x) {a = 1, a = 2} : f32[2]\n  return %y") ==
        "t.rir:2:29: duplicate attribute 'a'");
  CHECK(bodyError("  %y = Identity(%x) {a = [1, \"s\"]} : f32[2]\n"
                  "  return %y") ==
        "t.rir:2:30: list mixes numbers and strings");
  CHECK(bodyError("  %y = Identity(%x) {a = [\"s\", 1]} : f32[2]\n"
                  "  return %y") ==
        "t.rir:2:32: expected a string but found '1'");
  CHECK(bodyError("  %y = Identity(%x) {a = [1 2]} : f32[2]\n  return %y") ==
        "t.rir:2:29: expected ']' but found '2'");
  CHECK(bodyError("  %y = Identity(%x) {a = true} : f32[2]\n  return %y") ==
        "t.rir:2:26: expected an attribute value but found 'true'");
  CHECK(bodyError("  %y = Identity(%x) {a = -} : f32[2]\n  return %y") ==
        "t.rir:2:27: expected a number but found '}'");
  CHECK(bodyError("  %y = Identity(%x) {a = 1e40} : f32[2]\n  return %y") ==
        "t.rir:2:26: value '1e40' is out of range for f32");
  CHECK(bodyError("  %y = Identity(%x) {a = 9223372036854775808} : f32[2]\n"
                  "  return %y") ==
        "t.rir:2:26: integer '9223372036854775808' does not fit in 64 bits");
}

TEST_CASE("parser reports bad dense tensors") {
  REQUIRE(denseError("dense<f32[3]: [1.0, 2.0]>", "f32[3]") ==
          "t.rir:2:42: expected 3 elements for f32[3] but found 2");
  CHECK(denseError("dense<f32[1]: [1.0, 2.0]>", "f32[1]") ==
        "t.rir:2:42: expected 1 elements for f32[1] but found 2");
  CHECK(denseError(R"(dense<f32[2]: "0x0000803F">)", "f32[2]") ==
        "t.rir:2:42: hex data has 4 bytes but f32[2] needs 8");
  CHECK(denseError(R"(dense<f32[1]: "0x0000803G">)", "f32[1]") ==
        "t.rir:2:42: invalid hex digit in tensor data");
  CHECK(denseError(R"(dense<f32[1]: "1.0">)", "f32[1]") ==
        "t.rir:2:42: expected tensor values or a \"0x...\" string");
  CHECK(denseError("dense<u8[1]: [256]>", "u8[1]") ==
        "t.rir:2:42: value 256 is out of range for u8");
  CHECK(denseError("dense<i8[1]: [-129]>", "i8[1]") ==
        "t.rir:2:42: value -129 is out of range for i8");
  CHECK(denseError("dense<i32[1]: [2147483648]>", "i32[1]") ==
        "t.rir:2:43: value 2147483648 is out of range for i32");
  CHECK(denseError("dense<i64[1]: [1.5]>", "i64[1]") ==
        "t.rir:2:43: expected an integer for i64 but found '1.5'");
  CHECK(denseError("dense<f32[1]: [true]>", "f32[1]") ==
        "t.rir:2:43: expected a number for f32 but found 'true'");
  CHECK(denseError("dense<bool[1]: [2]>", "bool[1]") ==
        "t.rir:2:44: expected true or false for bool but found '2'");
  CHECK(denseError("dense<f16[1]: [70000.0]>", "f16[1]") ==
        "t.rir:2:43: value '70000.0' is out of range for f16");
  CHECK(denseError("dense<f64[1]: [1e400]>", "f64[1]") ==
        "t.rir:2:43: value '1e400' is out of range for f64");
  CHECK(denseError("dense<f32[2] [1.0, 2.0]>", "f32[2]") ==
        "t.rir:2:41: expected ':' but found '['");
  CHECK(denseError("dense<f32[1]: [1.0]", "f32[1]") ==
        "t.rir:2:47: expected '>' but found '}'");
  CHECK(denseError("dense<f32[1000000000000]: 0.0>", "f32[1000000000000]") ==
        "t.rir:2:54: splat tensor f32[1000000000000] is larger than "
        "2147483648 bytes");
}

TEST_CASE("parser reports bad dims") {
  REQUIRE(bodyError("  %y = Relu(%x) : f32[2,-1]\n  return %y") ==
          "t.rir:2:25: dims must be non-negative");
  // The message after the location comes from TensorType::checkSize().
  std::string message =
      bodyError("  %y = Relu(%x) : f32[4611686018427387904,4]\n  return %y");
  INFO(message);
  CHECK(llvm::StringRef(message).startswith("t.rir:2:19: "));
  CHECK(message.find("f32[4611686018427387904,4]") != std::string::npos);
  CHECK(message.find("overflow") != std::string::npos);
  CHECK(bodyError("  %y = Relu(%x) : f32[99999999999999999999]\n  return %y") ==
        "t.rir:2:23: integer '99999999999999999999' does not fit in 64 bits");
}

TEST_CASE("parser reports result count mismatches") {
  REQUIRE(bodyError("  %a, %b = Relu(%x) : f32[2]\n  return %a") ==
          "t.rir:2:3: 2 results but 1 result type");
  CHECK(bodyError("  %a = Relu(%x) : f32[2], f32[2]\n  return %a") ==
        "t.rir:2:3: 1 result but 2 result types");
}

TEST_CASE("parser checks arity at the node") {
  // The text after the location is checkArity's.
  std::string operands = bodyError("  %a = Relu(%x, %x) : f32[2]\n  return %a");
  INFO(operands);
  CHECK(llvm::StringRef(operands).startswith("t.rir:2:3: "));
  CHECK(operands.find("Relu") != std::string::npos);
  CHECK(operands.find("operand") != std::string::npos);
  CHECK(operands.find("t.rir", 1) == std::string::npos);

  std::string results =
      bodyError("  %a, %b = Relu(%x) : f32[2], f32[2]\n  return %a");
  INFO(results);
  CHECK(llvm::StringRef(results).startswith("t.rir:2:3: "));
  CHECK(results.find("result") != std::string::npos);

  // Zero operands, on a node whose operands are resolved late.
  std::string deferred = bodyError(
      "  %a = Add(%b) : f32[2]\n  %b = Relu(%x) : f32[2]\n  return %a");
  INFO(deferred);
  CHECK(llvm::StringRef(deferred).startswith("t.rir:2:3: "));
  CHECK(deferred.find("operand") != std::string::npos);
}

TEST_CASE("parser checks declared types against inference") {
  std::string message = bodyError("  %a = Relu(%x) : f32[3]\n  return %a");
  INFO(message);
  CHECK(llvm::StringRef(message).startswith("t.rir:2:3: "));
  CHECK(message.find("f32[3]") != std::string::npos);
  CHECK(message.find("f32[2]") != std::string::npos);
  // The location appears once.
  CHECK(message.find("t.rir", 1) == std::string::npos);

  std::string dtype = bodyError("  %a = Relu(%x) : f32[2]\n"
                                "  %b = Relu(%a) : i64[2] bwd\n  return %b");
  INFO(dtype);
  CHECK(llvm::StringRef(dtype).startswith("t.rir:3:3: "));
  // With the line offset of a split file.
  std::string offset = parseError(
      "graph @g(%x: f32[2]) {\n  %a = Relu(%x) : f32[3]\n  return %a\n}\n",
      /*lineOffset=*/4);
  CHECK(llvm::StringRef(offset).startswith("t.rir:6:3: "));
}

TEST_CASE("lexer errors carry their location") {
  REQUIRE(bodyError("  %y = Identity(%x) {a = \"abc} : f32[2]\n  return %y") ==
          "t.rir:2:26: unterminated string");
  CHECK(
      bodyError("  %y = Identity(%x) {a = \"a\\qb\"} : f32[2]\n  return %y") ==
      "t.rir:2:28: invalid escape sequence in string");
  CHECK(bodyError("  %y = Identity(%x) {a = \"\\x4\"} : f32[2]\n  return %y") ==
        "t.rir:2:27: invalid escape sequence in string");
  REQUIRE(bodyError("  %y = Relu(%x) # : f32[2]\n  return %y") ==
          "t.rir:2:17: unexpected character '#'");
  CHECK(bodyError("  %y = Relu(%x) \x01 : f32[2]\n  return %y") ==
        "t.rir:2:17: unexpected character '\\x01'");
  CHECK(bodyError("  %y = Relu(%x) : f32[12abc]\n  return %y") ==
        "t.rir:2:23: invalid number '12abc'");
  CHECK(bodyError("  %y = Identity(%x) {a = 1e} : f32[2]\n  return %y") ==
        "t.rir:2:26: invalid number '1e'");
  CHECK(bodyError("  %y = Identity(%x) {a = 1.5.2} : f32[2]\n  return %y") ==
        "t.rir:2:26: invalid number '1.5.2'");
  REQUIRE(bodyError("  %y = Identity(%x) {a = 99999999999999999999} : "
                    "f32[2]\n  return %y") ==
          "t.rir:2:26: integer '99999999999999999999' does not fit in 64 "
          "bits");
  CHECK(bodyError("  % = Relu(%x) : f32[2]\n  return %y") ==
        "t.rir:2:3: expected a name after '%'");
  CHECK(bodyError("  %y = Relu(%x) : f32[2] /\n  return %y") ==
        "t.rir:2:26: unexpected character '/'");
  // A lexer error after the graph is reported as itself.
  CHECK(parseError("graph @g(%x: f32[2]) {\n  return %x\n}\n$") ==
        "t.rir:4:1: unexpected character '$'");
}

TEST_CASE("parser checks origins and gradient marks") {
  llvm::StringRef header = "graph @g(%x: f32[2], %w: f32[2] weight) {\n";
  auto error = [&](llvm::StringRef body) {
    return parseError((header + body + "\n}\n").str());
  };
  CHECK(error("  %a = Neg(%x) : f32[2] grad(%x)\n  return %a") ==
        "t.rir:2:30: grad(%x) must name a weight input of the graph");
  CHECK(error("  %a = Neg(%x) : f32[2] grad(%w, %w)\n  return %a") ==
        "t.rir:2:25: grad(...) of Neg '%a' has more entries than its 1 "
        "results");
  CHECK(error("  %a, %m = Dropout(%x) : f32[2], bool[2] grad(%w)\n"
              "  return %a") ==
        "t.rir:2:42: grad(...) of Dropout '%a' has 1 entries for 2 results");
  CHECK(error("  %a = Neg(%x) : f32[2]\n"
              "  %b = Neg(%x) : f32[2] remat origin(%a)\n"
              "  %c = Neg(%x) : f32[2] remat origin(%b)\n  return %c") ==
        "t.rir:4:38: origin(%b) must name the first result of another node "
        "that is not a copy itself");
  CHECK(error("  %a = Neg(%x) : f32[2] origin(%x)\n  return %a") ==
        "t.rir:2:32: origin(%x) must name the first result of another node "
        "that is not a copy itself");
  CHECK(error("  %a = Neg(%x) : f32[2] origin(%z)\n  return %a") ==
        "t.rir:2:32: use of undefined value '%z'");
}
