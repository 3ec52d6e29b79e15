//===- tests/unit/PrinterTest.cpp - The .rir printer and round trips ------===//
//
// Exact text for every attribute kind, name quoting, tensor forms, weight
// data and stages; then parse(print(g)) == g for hand-built graphs, for
// seeded random float bit patterns, and for every graph in the golden files
// tests/ir/*.rir.
//
//===----------------------------------------------------------------------===//
#include "ir/Printer.h"
#include "ir/Parser.h"
#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace remat;
using namespace remat::ir;

namespace {

std::string typeText(const TensorType &type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printType(type, os);
  return os.str();
}

std::string attrText(const AttrValue &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printAttrValue(value, os);
  return os.str();
}

std::string refText(llvm::StringRef name) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printValueRef(name, os);
  return os.str();
}

std::string floatText(float value) { return attrText(AttrValue(value)); }

template <typename T>
TensorDataPtr makeTensor(TensorType type, const std::vector<T> &values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  REQUIRE(int64_t(bytes.size()) == type.getByteSize());
  return std::make_shared<TensorData>(std::move(type), std::move(bytes));
}

std::string tensorText(const TensorDataPtr &data) {
  return attrText(AttrValue(data));
}

std::unique_ptr<Graph> parseOrFail(llvm::StringRef text,
                                   llvm::StringRef sourceName = "printed",
                                   unsigned lineOffset = 0) {
  auto graph = parseGraph(text, sourceName, lineOffset);
  if (!graph) {
    std::string message = errorToString(graph.takeError());
    INFO("text:\n" << text.str());
    FAIL("parse failed: " << message);
  }
  return std::move(*graph);
}

/// Checks parse(print(g)) == g and that printing is a fixed point.
void checkRoundTrip(const Graph &graph) {
  std::string text = printGraphToString(graph);
  INFO("printed:\n" << text);
  auto reparsed = parseOrFail(text);
  std::string why;
  CHECK_MESSAGE(graphsEqual(graph, *reparsed, &why), why);
  CHECK(printGraphToString(*reparsed) == text);
}

const TensorType kF32x2(DType::F32, {2});

} // namespace

//===----------------------------------------------------------------------===//
// Pieces
//===----------------------------------------------------------------------===//

TEST_CASE("printer prints types") {
  CHECK(typeText(TensorType(DType::F32, {32, 256})) == "f32[32,256]");
  CHECK(typeText(TensorType(DType::I64, {})) == "i64[]");
  CHECK(typeText(TensorType(DType::Bool, {0})) == "bool[0]");
  CHECK(typeText(TensorType(DType::BF16, {1, 2, 3})) == "bf16[1,2,3]");
}

TEST_CASE("printer quotes only names outside [A-Za-z0-9_.$/-]") {
  CHECK(refText("x") == "%x");
  CHECK(refText("0") == "%0");
  CHECK(refText("bert.encoder.layer.0.attention.self.query.weight") ==
        "%bert.encoder.layer.0.attention.self.query.weight");
  CHECK(refText("/bert/Add_output_0") == "%/bert/Add_output_0");
  CHECK(refText("a$b-c") == "%a$b-c");
  CHECK(refText("with space") == "%\"with space\"");
  CHECK(refText("a:b") == "%\"a:b\"");
  CHECK(refText("q\"b\\") == "%\"q\\\"b\\\\\"");
  CHECK(refText("n\nt\t") == "%\"n\\nt\\t\"");
  CHECK(refText(llvm::StringRef("\x01\x7f\xc3\xa9", 4)) ==
        "%\"\\x01\\x7F\\xC3\\xA9\"");
  CHECK(refText("") == "%\"\"");
}

TEST_CASE("printer prints floats in their shortest form, always as floats") {
  CHECK(floatText(0.1f) == "0.1");
  CHECK(floatText(1.0f) == "1.0");
  CHECK(floatText(-2.0f) == "-2.0");
  CHECK(floatText(100.0f) == "100.0");
  CHECK(floatText(1e-5f) == "1e-05");
  CHECK(floatText(1e20f) == "1e+20");
  CHECK(floatText(-0.0f) == "-0.0");
  CHECK(floatText(0.0f) == "0.0");
  CHECK(floatText(std::numeric_limits<float>::max()) == "3.4028235e+38");
  CHECK(floatText(std::numeric_limits<float>::denorm_min()) == "1e-45");
  CHECK(floatText(std::numeric_limits<float>::infinity()) == "inf");
  CHECK(floatText(-std::numeric_limits<float>::infinity()) == "-inf");
  CHECK(floatText(std::numeric_limits<float>::quiet_NaN()) == "nan");
}

TEST_CASE("printer prints every attribute kind") {
  CHECK(attrText(AttrValue(int64_t(3))) == "3");
  CHECK(attrText(AttrValue(int64_t(-3))) == "-3");
  CHECK(attrText(AttrValue(std::numeric_limits<int64_t>::min())) ==
        "-9223372036854775808");
  CHECK(attrText(AttrValue(0.5f)) == "0.5");
  CHECK(attrText(AttrValue(std::string("tanh"))) == "\"tanh\"");
  CHECK(attrText(AttrValue(std::string("a\"b\\c\nd"))) ==
        "\"a\\\"b\\\\c\\nd\"");
  CHECK(attrText(AttrValue(std::vector<int64_t>{1, -2})) == "[1, -2]");
  CHECK(attrText(AttrValue(std::vector<int64_t>{})) == "[]");
  CHECK(attrText(AttrValue(std::vector<float>{0.5f, 1.0f})) == "[0.5, 1.0]");
  CHECK(attrText(AttrValue(std::vector<std::string>{"a", "b c"})) ==
        "[\"a\", \"b c\"]");
  CHECK(tensorText(makeTensor(kF32x2, std::vector<float>{1.0f, -2.5f})) ==
        "dense<f32[2]: [1.0, -2.5]>");
}

TEST_CASE("printer prints tensors as lists, rank-0 scalars and hex") {
  CHECK(tensorText(
            makeTensor(TensorType(DType::F32, {}), std::vector<float>{0.1f})) ==
        "dense<f32[]: 0.1>");
  CHECK(tensorText(
            makeTensor(TensorType(DType::Bool, {}), std::vector<uint8_t>{1})) ==
        "dense<bool[]: true>");
  CHECK(tensorText(makeTensor(TensorType(DType::Bool, {3}),
                              std::vector<uint8_t>{1, 0, 1})) ==
        "dense<bool[3]: [true, false, true]>");
  CHECK(tensorText(makeTensor(
            TensorType(DType::I64, {2}),
            std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 7})) ==
        "dense<i64[2]: [-9223372036854775808, 7]>");
  CHECK(tensorText(makeTensor(TensorType(DType::I32, {2}),
                              std::vector<int32_t>{-1, 2147483647})) ==
        "dense<i32[2]: [-1, 2147483647]>");
  CHECK(tensorText(makeTensor(TensorType(DType::I8, {2}),
                              std::vector<int8_t>{-128, 127})) ==
        "dense<i8[2]: [-128, 127]>");
  CHECK(tensorText(makeTensor(TensorType(DType::U8, {2}),
                              std::vector<uint8_t>{0, 255})) ==
        "dense<u8[2]: [0, 255]>");
  CHECK(tensorText(makeTensor(TensorType(DType::F64, {2}),
                              std::vector<double>{0.1, 1e300})) ==
        "dense<f64[2]: [0.1, 1e+300]>");
  // f16 0x3800 = 0.5, 0xFBFF = -65504; bf16 0x3F80 = 1, 0x3DCD = 0.100097656.
  CHECK(tensorText(makeTensor(TensorType(DType::F16, {2}),
                              std::vector<uint16_t>{0x3800, 0xFBFF})) ==
        "dense<f16[2]: [0.5, -65504.0]>");
  CHECK(tensorText(makeTensor(TensorType(DType::BF16, {2}),
                              std::vector<uint16_t>{0x3F80, 0x3DCD})) ==
        "dense<bf16[2]: [1.0, 0.100097656]>");
  CHECK(tensorText(makeTensor(TensorType(DType::I64, {0}),
                              std::vector<int64_t>{})) == "dense<i64[0]: []>");

  // 64 elements still print as a list; 65 as the hex of the raw bytes.
  std::vector<float> ones(64, 1.0f);
  std::string list = tensorText(makeTensor(TensorType(DType::F32, {64}), ones));
  CHECK(llvm::StringRef(list).startswith("dense<f32[64]: [1.0, 1.0, "));
  ones.push_back(1.0f);
  std::string hex = tensorText(makeTensor(TensorType(DType::F32, {65}), ones));
  std::string expectedHex = "dense<f32[65]: \"0x";
  for (int i = 0; i < 65; ++i)
    expectedHex += "0000803F";
  expectedHex += "\">";
  CHECK(hex == expectedHex);

  // Text would lose a NaN's payload or a bool byte other than 0/1: hex.
  CHECK(
      tensorText(makeTensor(kF32x2, std::vector<float>{1.0f, std::nanf("")})) ==
      "dense<f32[2]: \"0x0000803F0000C07F\">");
  CHECK(tensorText(makeTensor(TensorType(DType::Bool, {2}),
                              std::vector<uint8_t>{1, 2})) ==
        "dense<bool[2]: \"0x0102\">");
}

//===----------------------------------------------------------------------===//
// Whole graphs
//===----------------------------------------------------------------------===//

namespace {

/// A graph with weight data, a quoted name, a multi-result node, sorted
/// attributes and every stage.
std::unique_ptr<Graph> buildSample() {
  auto graph = std::make_unique<Graph>("sample");
  Value *x = graph->addInput("x", TensorType(DType::F32, {2, 3}));
  Value *w = graph->addInput("layer 0/w", TensorType(DType::F32, {3}),
                             /*isWeight=*/true);
  w->setData(makeTensor(TensorType(DType::F32, {3}),
                        std::vector<float>{0.5f, -1.0f, 2.0f}));
  Value *sum = graph
                   ->createNode(OpKind::Add, {x, w},
                                {TensorType(DType::F32, {2, 3})}, {"sum"})
                   ->getResult(0);
  AttrList softmaxAttrs;
  softmaxAttrs.set("axis", int64_t(1));
  Value *prob =
      graph
          ->createNode(OpKind::Softmax, {sum}, {TensorType(DType::F32, {2, 3})},
                       {"prob"}, softmaxAttrs)
          ->getResult(0);
  AttrList ratioAttrs;
  ratioAttrs.set("value", makeTensor(TensorType(DType::F32, {}),
                                     std::vector<float>{0.25f}));
  Value *ratio =
      graph
          ->createNode(OpKind::Constant, {}, {TensorType(DType::F32, {})},
                       {"ratio"}, ratioAttrs)
          ->getResult(0);
  AttrList dropoutAttrs;
  dropoutAttrs.set("seed", int64_t(7));
  Node *dropout = graph->createNode(
      OpKind::Dropout, {prob, ratio},
      {TensorType(DType::F32, {2, 3}), TensorType(DType::Bool, {2, 3})},
      {"drop", "mask"}, dropoutAttrs);
  Node *recompute = graph->createNode(
      OpKind::Relu, {sum}, {TensorType(DType::F32, {2, 3})}, {"sum.remat"});
  recompute->setStage(Stage::Recompute);
  Node *backward = graph->createNode(
      OpKind::Mul, {dropout->getResult(0), recompute->getResult(0)},
      {TensorType(DType::F32, {2, 3})}, {"grad"});
  backward->setStage(Stage::Backward);
  graph->addOutput(dropout->getResult(0));
  graph->addOutput(backward->getResult(0));
  return graph;
}

const char *kSampleText =
    R"(graph @sample(%x: f32[2,3], %"layer 0/w": f32[3] weight = dense<f32[3]: [0.5, -1.0, 2.0]>) {
  %sum = Add(%x, %"layer 0/w") : f32[2,3]
  %prob = Softmax(%sum) {axis = 1} : f32[2,3]
  %ratio = Constant() {value = dense<f32[]: 0.25>} : f32[]
  %drop, %mask = Dropout(%prob, %ratio) {seed = 7} : f32[2,3], bool[2,3]
  %sum.remat = Relu(%sum) : f32[2,3] remat
  %grad = Mul(%drop, %sum.remat) : f32[2,3] bwd
  return %drop, %grad
}
)";

} // namespace

TEST_CASE("printer prints a whole graph") {
  auto graph = buildSample();
  CHECK(printGraphToString(*graph) == kSampleText);
  checkRoundTrip(*graph);
}

TEST_CASE("printer prints attributes sorted by name") {
  Graph graph("g");
  Value *x = graph.addInput("x", kF32x2);
  AttrList attrs;
  attrs.set("z", int64_t(1));
  attrs.set("a", std::string("s"));
  attrs.set("m", std::vector<float>{1.5f});
  Node *node = graph.createNode(OpKind::Identity, {x}, {kF32x2}, {"y"}, attrs);
  graph.addOutput(node->getResult(0));
  CHECK(printGraphToString(graph) ==
        "graph @g(%x: f32[2]) {\n"
        "  %y = Identity(%x) {a = \"s\", m = [1.5], z = 1} : f32[2]\n"
        "  return %y\n"
        "}\n");
}

TEST_CASE("printer round-trips every attribute kind and tensor dtype") {
  Graph graph("attrs");
  Value *x = graph.addInput("x", kF32x2);
  AttrList attrs;
  attrs.set("int", int64_t(-42));
  attrs.set("float", 1e-5f);
  attrs.set("inf", -std::numeric_limits<float>::infinity());
  attrs.set("nan", std::numeric_limits<float>::quiet_NaN());
  attrs.set("negzero", -0.0f);
  attrs.set("string", std::string("odd \"text\"\\\n\t\x01\xff"));
  attrs.set("ints", std::vector<int64_t>{1, -2, 3});
  attrs.set("no_ints", std::vector<int64_t>{});
  attrs.set("floats", std::vector<float>{0.5f, 1.0f, 3e38f});
  attrs.set("strings", std::vector<std::string>{"a", "", "b c"});
  attrs.set("t_f32", makeTensor(kF32x2, std::vector<float>{1.0f, -0.0f}));
  attrs.set("t_f64", makeTensor(TensorType(DType::F64, {2}),
                                std::vector<double>{0.1, -1e-300}));
  attrs.set("t_f16", makeTensor(TensorType(DType::F16, {3}),
                                std::vector<uint16_t>{0x0001, 0x7C00, 0x3555}));
  attrs.set("t_bf16", makeTensor(TensorType(DType::BF16, {2}),
                                 std::vector<uint16_t>{0x0001, 0xFF80}));
  attrs.set("t_i64", makeTensor(TensorType(DType::I64, {1, 2}),
                                std::vector<int64_t>{-1, 1ll << 60}));
  attrs.set("t_i32", makeTensor(TensorType(DType::I32, {1}),
                                std::vector<int32_t>{-2147483647 - 1}));
  attrs.set("t_i8",
            makeTensor(TensorType(DType::I8, {1}), std::vector<int8_t>{-5}));
  attrs.set("t_u8",
            makeTensor(TensorType(DType::U8, {1}), std::vector<uint8_t>{200}));
  attrs.set("t_bool", makeTensor(TensorType(DType::Bool, {2, 1}),
                                 std::vector<uint8_t>{0, 1}));
  attrs.set("t_scalar",
            makeTensor(TensorType(DType::I64, {}), std::vector<int64_t>{9}));
  attrs.set("t_empty",
            makeTensor(TensorType(DType::F32, {0, 4}), std::vector<float>{}));
  attrs.set("t_nan", makeTensor(TensorType(DType::F32, {}),
                                std::vector<float>{-std::nanf("")}));
  std::vector<float> big(100);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = float(i) / 7.0f;
  attrs.set("t_big", makeTensor(TensorType(DType::F32, {10, 10}), big));
  Node *node = graph.createNode(OpKind::Identity, {x}, {kF32x2}, {"y"}, attrs);
  graph.addOutput(node->getResult(0));
  checkRoundTrip(graph);
}

TEST_CASE("printer round-trips quoted names, weights and empty inputs") {
  Graph graph("weird name: \"q\"");
  Value *w = graph.addInput("w\n1", TensorType(DType::F32, {4, 20}),
                            /*isWeight=*/true);
  std::vector<float> values(80);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(float(i));
  w->setData(makeTensor(TensorType(DType::F32, {4, 20}), values));
  Value *ids = graph.addInput("ids", TensorType(DType::I64, {2}));
  ids->setData(
      makeTensor(TensorType(DType::I64, {2}), std::vector<int64_t>{3, 1}));
  AttrList attrs;
  attrs.set("axis", int64_t(0));
  Node *gather =
      graph.createNode(OpKind::Gather, {w, ids},
                       {TensorType(DType::F32, {2, 20})}, {"%odd,name"}, attrs);
  graph.addOutput(gather->getResult(0));
  graph.addOutput(w);
  std::string text = printGraphToString(graph);
  CHECK(llvm::StringRef(text).startswith(
      "graph @\"weird name: \\\"q\\\"\"(%\"w\\n1\": f32[4,20] weight = "
      "dense<f32[4,20]: \"0x"));
  checkRoundTrip(graph);

  Graph constant("c");
  AttrList value;
  value.set("value",
            makeTensor(TensorType(DType::I64, {}), std::vector<int64_t>{5}));
  Node *c = constant.createNode(OpKind::Constant, {},
                                {TensorType(DType::I64, {})}, {"c"}, value);
  constant.addOutput(c->getResult(0));
  CHECK(printGraphToString(constant) ==
        "graph @c() {\n"
        "  %c = Constant() {value = dense<i64[]: 5>} : i64[]\n"
        "  return %c\n"
        "}\n");
  checkRoundTrip(constant);
}

TEST_CASE("printer round-trips random float bit patterns exactly") {
  const unsigned seed = 20240611;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Graph graph("random");
  Value *x = graph.addInput("x", kF32x2);
  AttrList attrs;
  std::vector<float> floats;
  std::vector<uint16_t> halves, bfloats;
  std::vector<double> doubles;
  while (floats.size() < 4000) {
    uint32_t bits = rng();
    float value;
    std::memcpy(&value, &bits, 4);
    if (!std::isnan(value))
      floats.push_back(value);
  }
  while (halves.size() < 64) {
    auto bits = uint16_t(rng());
    if ((bits & 0x7C00) != 0x7C00 || (bits & 0x3FF) == 0) // not a NaN
      halves.push_back(bits);
  }
  while (bfloats.size() < 64) {
    auto bits = uint16_t(rng());
    if ((bits & 0x7F80) != 0x7F80 || (bits & 0x7F) == 0)
      bfloats.push_back(bits);
  }
  while (doubles.size() < 64) {
    uint64_t bits = (uint64_t(rng()) << 32) | rng();
    double value;
    std::memcpy(&value, &bits, 8);
    if (!std::isnan(value))
      doubles.push_back(value);
  }
  // Lists of at most 64 elements print as text, so every value goes through
  // to_chars and back.
  for (size_t i = 0; i < floats.size(); i += 64) {
    std::vector<float> chunk(floats.begin() + i,
                             floats.begin() + std::min(i + 64, floats.size()));
    attrs.set(
        ("t" + llvm::Twine(i)).str(),
        makeTensor(TensorType(DType::F32, {int64_t(chunk.size())}), chunk));
  }
  attrs.set("floats", floats);
  attrs.set("halves", makeTensor(TensorType(DType::F16, {64}), halves));
  attrs.set("bfloats", makeTensor(TensorType(DType::BF16, {64}), bfloats));
  attrs.set("doubles", makeTensor(TensorType(DType::F64, {64}), doubles));
  Node *node = graph.createNode(OpKind::Identity, {x}, {kF32x2}, {"y"}, attrs);
  graph.addOutput(node->getResult(0));
  checkRoundTrip(graph);
}

//===----------------------------------------------------------------------===//
// Golden files
//===----------------------------------------------------------------------===//

namespace {

struct Chunk {
  std::string text;
  unsigned lineOffset;
};

/// Splits \p text on lines starting with "// -----", as --split-input-file
/// does, keeping the line each chunk starts on.
std::vector<Chunk> splitChunks(llvm::StringRef text) {
  std::vector<Chunk> chunks;
  unsigned line = 0, chunkLine = 0;
  size_t chunkStart = 0, pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t next = eol == llvm::StringRef::npos ? text.size() : eol + 1;
    if (text.substr(pos, next - pos).startswith("// -----")) {
      chunks.push_back({text.slice(chunkStart, pos).str(), chunkLine});
      chunkStart = next;
      chunkLine = line + 1;
    }
    pos = next;
    ++line;
  }
  chunks.push_back({text.substr(chunkStart).str(), chunkLine});
  return chunks;
}

} // namespace

/// The marker of a tests/ir chunk that is meant not to parse.
const std::string kExpectParseError = "// expect-parse-error";

TEST_CASE("printer round-trips every graph in tests/ir/*.rir") {
  std::string dir = std::string(REMAT_TEST_DIR) + "/ir";
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".rir")
      files.push_back(it->path());
  REQUIRE_MESSAGE(!ec, "cannot list " << dir << ": " << ec.message());
  std::sort(files.begin(), files.end());
  REQUIRE_MESSAGE(!files.empty(), "no .rir files in " << dir);

  unsigned numGraphs = 0, numRejected = 0;
  for (const std::string &path : files) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    REQUIRE_MESSAGE(bool(buffer), "cannot read " << path);
    for (const Chunk &chunk : splitChunks((*buffer)->getBuffer())) {
      auto graph = parseGraph(chunk.text, path, chunk.lineOffset);
      if (!graph) {
        // A chunk that shows a parse error on purpose says so; any other
        // that fails to parse is a failure, not a graph silently skipped.
        std::string message = errorToString(graph.takeError());
        ++numRejected;
        if (!llvm::StringRef(chunk.text).contains(kExpectParseError))
          FAIL_CHECK(path << ":" << chunk.lineOffset + 1
                          << ": chunk does not parse (mark it with '"
                          << kExpectParseError << "' if it should not): "
                          << message);
        continue;
      }
      ++numGraphs;
      INFO(path << ":" << chunk.lineOffset + 1);
      std::string printed = printGraphToString(**graph);
      INFO("printed:\n" << printed);
      auto reparsed = parseGraph(printed, "printed");
      if (!reparsed) {
        FAIL_CHECK("printed text does not parse: "
                   << errorToString(reparsed.takeError()));
        continue;
      }
      std::string why;
      CHECK_MESSAGE(graphsEqual(**graph, **reparsed, &why), why);
      CHECK(printGraphToString(**reparsed) == printed);
    }
  }
  MESSAGE(files.size() << " files, " << numGraphs << " graphs round-tripped, "
                       << numRejected
                       << " chunks rejected by the parser (marked)");
  REQUIRE(numGraphs > 0);
}

TEST_CASE("printer and parser keep origins and gradient marks") {
  const char *text =
      R"(graph @marks(%x: f32[4], %w: f32[4] weight, %b: f32[4] weight) {
  %h = Mul(%x, %w) : f32[4]
  %l = ReduceSum(%h) {keepdims = 0} : f32[]
  %ratio = Constant() {value = dense<f32[]: 0.25>} : f32[]
  %h.remat = Mul(%x, %w) : f32[4] remat origin(%h)
  %w_grad = Mul(%x, %h.remat) : f32[4] bwd grad(%w)
  %b_grad, %mask = Dropout(%x, %ratio) {seed = 7} : f32[4], bool[4] bwd grad(%b, _)
  %c = Neg(%x) : f32[4] origin(%h) grad(%b)
  return %l, %w_grad, %b_grad, %c
}
)";
  std::unique_ptr<Graph> graph = parseOrFail(text);
  CHECK(graph->lookup("h.remat")->getDefiningNode()->getOrigin() ==
        graph->lookup("h")->getDefiningNode());
  CHECK(graph->lookup("w_grad")->getGradientOf() == graph->lookup("w"));
  CHECK(graph->lookup("b_grad")->getGradientOf() == graph->lookup("b"));
  CHECK(graph->lookup("mask")->getGradientOf() == nullptr);
  CHECK(graph->lookup("h")->getDefiningNode()->getOrigin() == nullptr);
  CHECK(printGraphToString(*graph) == text);
  checkRoundTrip(*graph);
}
