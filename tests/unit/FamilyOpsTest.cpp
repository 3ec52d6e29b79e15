//===- tests/unit/FamilyOpsTest.cpp - The ops of issues 13 and 40 ---------===//
//
// Sin, Cos, Abs, Not, IsNaN, Min, Trilu, CumSum, GatherElements, Pad, Conv
// and ConvTranspose, and Ceil, Clip, Tile, Floor, Softplus, ArgMax, ArgMin
// and TopK, MaxPool, AveragePool and their gradients, Acos, EyeLike, ReduceL2
// and ReduceLogSumExp (issue 40): shape inference and its errors, the CPU
// kernels against examples from the ONNX operator docs and against
// references written here (Conv in double, loop by loop from the definition;
// ConvTranspose as Conv's adjoint; pooling as torch's 2-D CPU loops), the same
// bits on one and four threads and through evaluateNode (what constant folding
// computes), and value errors at run time. Random cases print their seed.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Evaluator.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include "ir/Graph.h"
#include "ir/Parser.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "runtime/Tensor.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

using namespace remat;
using namespace remat::ir;
using namespace remat::runtime;
using namespace remat::runtime::cpu;

namespace {

using Rng = std::mt19937_64;

ThreadPoolParallelFor &onePool() {
  static ThreadPoolParallelFor pool(1);
  return pool;
}
ThreadPoolParallelFor &fourPool() {
  static ThreadPoolParallelFor pool(4);
  return pool;
}

/// A parsed one-graph test: its graph and the node computing %y.
struct Case {
  std::unique_ptr<Graph> graph;
  const Node *node = nullptr;
};

/// Parses \p text; \returns the graph and the node defining %y, or the
/// parse/inference error in \p error.
Case parse(const std::string &text, std::string *error = nullptr) {
  Case result;
  auto graph = parseGraph(text, "<test>");
  if (!graph) {
    std::string message = errorToString(graph.takeError());
    if (error)
      *error = message;
    else
      FAIL(message);
    return result;
  }
  result.graph = std::move(*graph);
  for (const Node &node : result.graph->getNodes())
    if (node.getResult(0)->getName() == "y")
      result.node = &node;
  REQUIRE(result.node);
  return result;
}

/// \returns \p message without its leading source location
/// ("<test>:3:5: ").
std::string stripLoc(std::string message) {
  if (message.rfind("<test>:", 0) != 0)
    return message;
  size_t colon = message.find(": ");
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

/// \returns the error that checkResultTypes gives for %y of \p text.
std::string inferError(const std::string &text) {
  std::string error;
  Case c = parse(text, &error);
  if (!c.graph)
    return stripLoc(error);
  llvm::Error err = checkResultTypes(*c.node);
  return err ? stripLoc(errorToString(std::move(err))) : "";
}

/// Runs the node of \p c on \p operands (one per operand of the node: the
/// data of its graph inputs and constants) with \p parallel. \returns its
/// results, or fails the test with the error.
std::vector<TensorDataPtr> runWith(const Node &node,
                                   const std::vector<TensorDataPtr> &operands,
                                   ParallelFor &parallel,
                                   std::string *error = nullptr) {
  auto kernel = selectKernel(node);
  if (!kernel) {
    std::string message = "select: " + errorToString(kernel.takeError());
    if (!error)
      FAIL(message);
    *error = message;
    return {};
  }
  std::vector<OwnedTensor> owned, outputs;
  std::vector<Tensor> inViews, outViews;
  for (const TensorDataPtr &data : operands)
    owned.push_back(OwnedTensor::fromData(*data));
  for (const OwnedTensor &tensor : owned)
    inViews.push_back(tensor.view());
  for (unsigned i = 0; i < node.getNumResults(); ++i)
    outputs.emplace_back(node.getResult(i)->getType());
  for (const OwnedTensor &tensor : outputs)
    outViews.push_back(tensor.view());
  KernelContext context{node, inViews, outViews, parallel};
  if (llvm::Error err = (*kernel)(context)) {
    std::string message = "run: " + errorToString(std::move(err));
    if (!error)
      FAIL(message);
    *error = message;
    return {};
  }
  std::vector<TensorDataPtr> results;
  for (const OwnedTensor &tensor : outputs)
    results.push_back(tensor.toData());
  return results;
}

/// The operand data of \p node: constants from their Constant node, graph
/// inputs from \p inputs in input order.
std::vector<TensorDataPtr> operandData(const Node &node,
                                       const std::vector<TensorDataPtr> &inputs) {
  std::vector<TensorDataPtr> data;
  for (const Value *operand : node.getOperands()) {
    if (const TensorData *value = getConstantValue(operand)) {
      data.push_back(std::make_shared<TensorData>(*value));
      continue;
    }
    const Graph &graph = *node.getGraph();
    bool found = false;
    for (unsigned i = 0; i < graph.getNumInputs(); ++i)
      if (graph.getInput(i) == operand) {
        REQUIRE(i < inputs.size());
        data.push_back(inputs[i]);
        found = true;
      }
    REQUIRE_MESSAGE(found, "operand %" << operand->getName().str()
                                       << " is neither constant nor input");
  }
  return data;
}

/// Runs %y of \p c on one and four threads and through evaluateNode;
/// checks that all three agree bit for bit and \returns the result.
TensorDataPtr runAll(const Case &c, const std::vector<TensorDataPtr> &inputs) {
  std::vector<TensorDataPtr> operands = operandData(*c.node, inputs);
  auto serial = runWith(*c.node, operands, onePool());
  auto parallel = runWith(*c.node, operands, fourPool());
  REQUIRE(serial.size() == 1);
  REQUIRE(parallel.size() == 1);
  CHECK(serial[0]->getBytes() == parallel[0]->getBytes());
  std::vector<const TensorData *> pointers;
  for (const TensorDataPtr &data : operands)
    pointers.push_back(data.get());
  auto folded = evaluateNode(*c.node, pointers);
  REQUIRE_MESSAGE(bool(folded), errorToString(folded.takeError()));
  CHECK((*folded)[0]->getBytes() == serial[0]->getBytes());
  return serial[0];
}

/// \returns the run-time error of %y of \p text on \p inputs.
std::string runError(const std::string &text,
                     const std::vector<TensorDataPtr> &inputs) {
  Case c = parse(text);
  std::string error;
  runWith(*c.node, operandData(*c.node, inputs), onePool(), &error);
  return error.substr(0, 5) + stripLoc(error.substr(5));
}

std::vector<double> valuesOf(const TensorData &data) {
  std::vector<double> values;
  for (int64_t i = 0; i < data.getNumElements(); ++i)
    values.push_back(data.getDouble(i));
  return values;
}

TensorDataPtr doubles(TensorType type, llvm::ArrayRef<double> values) {
  return TensorData::fromDoubles(std::move(type), values);
}

TensorDataPtr randomData(TensorType type, Rng &rng) {
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> values(type.getNumElements());
  for (double &value : values)
    value = dist(rng);
  return doubles(std::move(type), values);
}

/// \returns %y of a graph with one f64/f32 input %x of \p type running
/// \p body.
TensorDataPtr runOnX(const std::string &xType, const std::string &body,
                     TensorDataPtr x) {
  Case c = parse("graph @g(%x: " + xType + ") {\n  " + body +
                 "\n  return %y }");
  return runAll(c, {std::move(x)});
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_CASE("Sin, Cos, Abs match libm; Abs on integers wraps INT_MIN") {
  std::vector<double> xs = {-3.5, -1, -0.0, 0, 0.25, 2, 7.5, 1e6};
  TensorType type(DType::F64, {int64_t(xs.size())});
  auto sin = runOnX("f64[8]", "%y = Sin(%x) : f64[8]", doubles(type, xs));
  auto cos = runOnX("f64[8]", "%y = Cos(%x) : f64[8]", doubles(type, xs));
  auto abs = runOnX("f64[8]", "%y = Abs(%x) : f64[8]", doubles(type, xs));
  for (size_t i = 0; i < xs.size(); ++i) {
    CHECK(sin->getDouble(i) == std::sin(xs[i]));
    CHECK(cos->getDouble(i) == std::cos(xs[i]));
    CHECK(abs->getDouble(i) == std::fabs(xs[i]));
  }
  CHECK_FALSE(std::signbit(abs->getDouble(2)));
  auto f32 = runOnX("f32[2]", "%y = Sin(%x) : f32[2]",
                    doubles(TensorType(DType::F32, {2}), {0.5, -2}));
  CHECK(f32->getDouble(0) == double(std::sin(0.5f)));
  auto ints = runOnX(
      "i32[3]", "%y = Abs(%x) : i32[3]",
      TensorData::fromInts(TensorType(DType::I32, {3}),
                           {-5, 7, std::numeric_limits<int32_t>::min()}));
  CHECK(ints->getInts() ==
        std::vector<int64_t>{5, 7, std::numeric_limits<int32_t>::min()});
  auto u8 = runOnX("u8[2]", "%y = Abs(%x) : u8[2]",
                   TensorData::fromInts(TensorType(DType::U8, {2}), {0, 255}));
  CHECK(u8->getInts() == std::vector<int64_t>{0, 255});
}

TEST_CASE("Not and IsNaN give bools; IsNaN reads f16 and bf16") {
  auto notted = runOnX(
      "bool[4]", "%y = Not(%x) : bool[4]",
      TensorData::fromInts(TensorType(DType::Bool, {4}), {1, 0, 0, 1}));
  CHECK(notted->getInts() == std::vector<int64_t>{0, 1, 1, 0});
  double nan = std::numeric_limits<double>::quiet_NaN();
  double inf = std::numeric_limits<double>::infinity();
  for (const char *dtype : {"f64", "f32", "f16", "bf16"}) {
    INFO(dtype);
    std::optional<DType> parsed = parseDType(dtype);
    REQUIRE(parsed);
    auto isnan = runOnX(std::string(dtype) + "[4]",
                        std::string("%y = IsNaN(%x) : bool[4]"),
                        doubles(TensorType(*parsed, {4}), {1, nan, inf, -nan}));
    CHECK(isnan->getInts() == std::vector<int64_t>{0, 1, 0, 1});
  }
}

TEST_CASE("Reciprocal, IsInf, comparisons and Or") {
  double inf = std::numeric_limits<double>::infinity();
  double nan = std::numeric_limits<double>::quiet_NaN();
  TensorType four(DType::F64, {4});
  auto r = runOnX("f64[4]", "%y = Reciprocal(%x) : f64[4]",
                  doubles(four, {2, -0.5, 0, inf}));
  CHECK(valuesOf(*r) == std::vector<double>{0.5, -2, inf, 0});
  auto values = doubles(four, {inf, -inf, nan, 1});
  CHECK(runOnX("f64[4]", "%y = IsInf(%x) : bool[4]", values)->getInts() ==
        std::vector<int64_t>{1, 1, 0, 0});
  CHECK(runOnX("f64[4]", "%y = IsInf(%x) {detect_negative = 0} : bool[4]",
               values)
            ->getInts() == std::vector<int64_t>{1, 0, 0, 0});
  CHECK(runOnX("f64[4]", "%y = IsInf(%x) {detect_positive = 0} : bool[4]",
               values)
            ->getInts() == std::vector<int64_t>{0, 1, 0, 0});
  auto compare = [&](const std::string &op) {
    Case c = parse("graph @g(%a: i64[2,3], %b: i64[3]) {\n  %y = " + op +
                   "(%a, %b) : bool[2,3]\n  return %y }");
    return runAll(c, {TensorData::fromInts(TensorType(DType::I64, {2, 3}),
                                           {1, 2, 3, 4, 5, 6}),
                      TensorData::fromInts(TensorType(DType::I64, {3}),
                                           {2, 2, 5})})
        ->getInts();
  };
  CHECK(compare("Less") == std::vector<int64_t>{1, 0, 1, 0, 0, 0});
  CHECK(compare("LessOrEqual") == std::vector<int64_t>{1, 1, 1, 0, 0, 0});
  CHECK(compare("Greater") == std::vector<int64_t>{0, 0, 0, 1, 1, 1});
  // NaN compares false.
  Case nanLess = parse(R"(graph @g(%a: f32[2]) {
    %z = Constant() {value = dense<f32[]: 0.0>} : f32[]
    %y = Greater(%a, %z) : bool[2]
    return %y })");
  CHECK(runAll(nanLess, {doubles(TensorType(DType::F32, {2}), {nan, 1})})
            ->getInts() == std::vector<int64_t>{0, 1});
  Case orCase = parse(R"(graph @g(%a: bool[2,2], %b: bool[2]) {
    %y = Or(%a, %b) : bool[2,2]
    return %y })");
  CHECK(runAll(orCase,
               {TensorData::fromInts(TensorType(DType::Bool, {2, 2}),
                                     {0, 1, 0, 0}),
                TensorData::fromInts(TensorType(DType::Bool, {2}), {0, 1})})
            ->getInts() == std::vector<int64_t>{0, 1, 0, 1});
}

TEST_CASE("Min broadcasts over several operands and propagates NaN") {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Case c = parse(R"(graph @g(%a: f64[2,3], %b: f64[3], %c: f64[2,1]) {
    %y = Min(%a, %b, %c) : f64[2,3]
    return %y })");
  auto y = runAll(c, {doubles(TensorType(DType::F64, {2, 3}),
                              {1, 5, nan, -2, 4, 0}),
                      doubles(TensorType(DType::F64, {3}), {3, 3, 3}),
                      doubles(TensorType(DType::F64, {2, 1}), {4, -1})});
  std::vector<double> got = valuesOf(*y);
  CHECK(got[0] == 1);
  CHECK(got[1] == 3);
  CHECK(std::isnan(got[2]));
  CHECK(got[3] == -2);
  CHECK(got[4] == -1);
  CHECK(got[5] == -1);
  Case ints = parse(R"(graph @g(%a: i64[3]) {
    %b = Constant() {value = dense<i64[]: 2>} : i64[]
    %y = Min(%a, %b) : i64[3]
    return %y })");
  CHECK(runAll(ints, {TensorData::fromInts(TensorType(DType::I64, {3}),
                                           {5, -7, 2})})
            ->getInts() == std::vector<int64_t>{2, -7, 2});
}

//===----------------------------------------------------------------------===//
// Trilu, CumSum, GatherElements, Pad
//===----------------------------------------------------------------------===//

TEST_CASE("Trilu keeps the upper or lower triangle from diagonal k") {
  std::vector<double> x(2 * 3 * 4);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = double(i + 1);
  TensorDataPtr data = doubles(TensorType(DType::F64, {2, 3, 4}), x);
  auto check = [&](const std::string &attrs, const std::string &k, bool upper,
                   int64_t kValue) {
    INFO(attrs << " k=" << k);
    std::string text = "graph @g(%x: f64[2,3,4]) {\n";
    std::string operands = "%x";
    if (!k.empty()) {
      text += "  %k = Constant() {value = dense<i64[]: " + k + ">} : i64[]\n";
      operands += ", %k";
    }
    text += "  %y = Trilu(" + operands + ")" + attrs + " : f64[2,3,4]\n";
    text += "  return %y }";
    auto y = valuesOf(*runAll(parse(text), {data}));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          int64_t e = (b * 3 + i) * 4 + j;
          bool keep = upper ? j - i >= kValue : j - i <= kValue;
          CHECK(y[e] == (keep ? x[e] : 0));
        }
  };
  check("", "", true, 0);
  check("", "1", true, 1);
  check("", "-1", true, -1);
  check(" {upper = 0}", "", false, 0);
  check(" {upper = 0}", "2", false, 2);
  check(" {upper = 0}", "-7", false, -7);
  // A bool mask, k given at run time.
  Case mask = parse(R"(graph @g(%m: bool[3,3], %k: i64[]) {
    %y = Trilu(%m, %k) {upper = 0} : bool[3,3]
    return %y })");
  auto ones = TensorData::fromInts(TensorType(DType::Bool, {3, 3}),
                                   std::vector<int64_t>(9, 1));
  auto k = TensorData::fromInts(TensorType(DType::I64, {}), {0});
  CHECK(runAll(mask, {ones, k})->getInts() ==
        std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
}

TEST_CASE("CumSum: exclusive, reverse, any axis, integers") {
  auto run = [](const std::string &attrs, int64_t axis,
                std::vector<double> x) {
    std::string text = "graph @g(%x: f64[2,3]) {\n  %a = Constant() {value = "
                       "dense<i64[]: " +
                       std::to_string(axis) + ">} : i64[]\n  %y = CumSum(%x, %a)" +
                       attrs + " : f64[2,3]\n  return %y }";
    return valuesOf(
        *runAll(parse(text), {doubles(TensorType(DType::F64, {2, 3}), x)}));
  };
  std::vector<double> x = {1, 2, 3, 4, 5, 6};
  CHECK(run("", 1, x) == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(run("", -1, x) == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(run("", 0, x) == std::vector<double>{1, 2, 3, 5, 7, 9});
  CHECK(run(" {exclusive = 1}", 1, x) ==
        std::vector<double>{0, 1, 3, 0, 4, 9});
  CHECK(run(" {reverse = 1}", 1, x) == std::vector<double>{6, 5, 3, 15, 11, 6});
  CHECK(run(" {exclusive = 1, reverse = 1}", 1, x) ==
        std::vector<double>{5, 3, 0, 11, 6, 0});
  // RoBERTa's position ids: cumsum of an i32 mask, axis given as i32.
  Case ids = parse(R"(graph @g(%m: i32[2,4]) {
    %a = Constant() {value = dense<i32[]: 1>} : i32[]
    %y = CumSum(%m, %a) : i32[2,4]
    return %y })");
  CHECK(runAll(ids, {TensorData::fromInts(TensorType(DType::I32, {2, 4}),
                                          {1, 1, 0, 1, 1, 1, 1, 1})})
            ->getInts() == std::vector<int64_t>{1, 2, 2, 3, 1, 2, 3, 4});
  // The axis as a graph input is read at run time.
  CHECK(runError(R"(graph @g(%x: f64[2,3], %a: i64[]) {
    %y = CumSum(%x, %a) : f64[2,3]
    return %y })",
                 {doubles(TensorType(DType::F64, {2, 3}), x),
                  TensorData::fromInts(TensorType(DType::I64, {}), {2})}) ==
        "run: CumSum '%y': axis 2 is out of range for rank 2");
}

TEST_CASE("CumSum sums each line in order, the same on any thread count") {
  Rng rng(1301);
  INFO("seed 1301");
  Case c = parse(R"(graph @g(%x: f32[7,300,5]) {
    %a = Constant() {value = dense<i64[]: 1>} : i64[]
    %y = CumSum(%x, %a) {reverse = 1} : f32[7,300,5]
    return %y })");
  TensorDataPtr x = randomData(TensorType(DType::F32, {7, 300, 5}), rng);
  auto y = runAll(c, {x});
  for (int64_t o = 0; o < 7; ++o)
    for (int64_t i = 0; i < 5; ++i) {
      float sum = 0;
      for (int64_t s = 299; s >= 0; --s) {
        int64_t e = (o * 300 + s) * 5 + i;
        sum += float(x->getDouble(e));
        REQUIRE(float(y->getDouble(e)) == sum);
      }
    }
}

TEST_CASE("GatherElements follows ONNX's examples, negative indices too") {
  Case c = parse(R"(graph @g(%x: f64[3,3]) {
    %i = Constant() {value = dense<i64[2,3]: [1, 2, 0, 2, 0, -3]>} : i64[2,3]
    %y = GatherElements(%x, %i) : f64[2,3]
    return %y })");
  auto x = doubles(TensorType(DType::F64, {3, 3}), {1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(valuesOf(*runAll(c, {x})) == std::vector<double>{4, 8, 3, 7, 2, 3});
  Case axis1 = parse(R"(graph @g(%x: f64[3,3]) {
    %i = Constant() {value = dense<i32[2,2]: [0, 0, 1, 0]>} : i32[2,2]
    %y = GatherElements(%x, %i) {axis = 1} : f64[2,2]
    return %y })");
  CHECK(valuesOf(*runAll(axis1, {x})) == std::vector<double>{1, 1, 5, 4});
  CHECK(runError(R"(graph @g(%x: f64[3,3], %i: i64[1,1]) {
    %y = GatherElements(%x, %i) {axis = -1} : f64[1,1]
    return %y })",
                 {x, TensorData::fromInts(TensorType(DType::I64, {1, 1}),
                                          {3})}) ==
        "run: GatherElements '%y': index 3 (element 0 of "
        "the indices) is out of range for axis 1 of size 3");
}

TEST_CASE("Pad in every mode follows numpy.pad; negative pads crop") {
  auto x = doubles(TensorType(DType::F64, {3, 2}), {1, 2, 3, 4, 5, 6});
  auto run = [&](const std::string &mode, const std::string &pads,
                 const std::string &resultType) {
    std::string text =
        "graph @g(%x: f64[3,2]) {\n  %p = Constant() {value = dense<i64[4]: " +
        pads + ">} : i64[4]\n  %v = Constant() {value = dense<f64[]: 9.5>} "
               ": f64[]\n  %y = Pad(%x, %p, %v) {mode = \"" +
        mode + "\"} : " + resultType + "\n  return %y }";
    return valuesOf(*runAll(parse(text), {x}));
  };
  // ONNX's doc examples.
  CHECK(run("constant", "[0, 2, 0, 0]", "f64[3,4]") ==
        std::vector<double>{9.5, 9.5, 1, 2, 9.5, 9.5, 3, 4, 9.5, 9.5, 5, 6});
  CHECK(run("reflect", "[0, 2, 0, 0]", "f64[3,4]") ==
        std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6});
  CHECK(run("edge", "[0, 2, 0, 0]", "f64[3,4]") ==
        std::vector<double>{1, 1, 1, 2, 3, 3, 3, 4, 5, 5, 5, 6});
  CHECK(run("wrap", "[1, 1, 0, 0]", "f64[4,3]") ==
        std::vector<double>{6, 5, 6, 2, 1, 2, 4, 3, 4, 6, 5, 6});
  // Rows padded reflect: numpy.pad(x, ((2, 1), (0, 0)), 'reflect').
  CHECK(run("reflect", "[2, 0, 1, 0]", "f64[6,2]") ==
        std::vector<double>{5, 6, 3, 4, 1, 2, 3, 4, 5, 6, 3, 4});
  CHECK(run("constant", "[-1, 1, 0, -1]", "f64[2,2]") ==
        std::vector<double>{9.5, 3, 9.5, 5});
  // The axes operand (opset 18) and a bool mask.
  Case axes = parse(R"(graph @g(%m: bool[2,2]) {
    %p = Constant() {value = dense<i64[2]: [1, 0]>} : i64[2]
    %v = Constant() {value = dense<bool[]: true>} : bool[]
    %a = Constant() {value = dense<i64[1]: [-1]>} : i64[1]
    %y = Pad(%m, %p, %v, %a) : bool[2,3]
    return %y })");
  CHECK(runAll(axes, {TensorData::fromInts(TensorType(DType::Bool, {2, 2}),
                                           {0, 0, 0, 1})})
            ->getInts() == std::vector<int64_t>{1, 0, 0, 1, 0, 1});
}

//===----------------------------------------------------------------------===//
// Conv and ConvTranspose
//===----------------------------------------------------------------------===//

namespace {

struct ConvCase {
  int64_t n, c, m, group;
  std::vector<int64_t> in, kernel, strides, dilations, pads;
  bool bias;
};

std::string list(const std::vector<int64_t> &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string typeText(const std::string &dtype,
                     const std::vector<int64_t> &dims) {
  std::string text = dtype + "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? "," : "") + std::to_string(dims[i]);
  return text + "]";
}

/// Conv from its definition, in double: y[n, m, o] = b[m] + sum over the
/// group's channels c and kernel positions k of x[n, c, o * s - p + k * d] *
/// w[m, c, k], zero outside x.
std::vector<double> referenceConv(const ConvCase &cc, const TensorData &x,
                                  const TensorData &w, const TensorData *b,
                                  const std::vector<int64_t> &outSpatial) {
  size_t rank = cc.in.size();
  int64_t outSize = 1, inSize = 1, kSize = 1;
  for (size_t d = 0; d < rank; ++d) {
    outSize *= outSpatial[d];
    inSize *= cc.in[d];
    kSize *= cc.kernel[d];
  }
  int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
  std::vector<double> y(cc.n * cc.m * outSize, 0);
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t m = 0; m < cc.m; ++m)
      for (int64_t o = 0; o < outSize; ++o) {
        double sum = b ? b->getDouble(m) : 0;
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t k = 0; k < kSize; ++k) {
            int64_t oRest = o, kRest = k, offset = 0, scale = 1;
            bool inside = true;
            for (size_t d = rank; d > 0; --d) {
              int64_t od = oRest % outSpatial[d - 1];
              oRest /= outSpatial[d - 1];
              int64_t kd = kRest % cc.kernel[d - 1];
              kRest /= cc.kernel[d - 1];
              int64_t i = od * cc.strides[d - 1] - cc.pads[d - 1] +
                          kd * cc.dilations[d - 1];
              inside &= i >= 0 && i < cc.in[d - 1];
              offset += i * scale;
              scale *= cc.in[d - 1];
            }
            if (!inside)
              continue;
            int64_t xc = (m / mg) * cg + c;
            sum += x.getDouble((n * cc.c + xc) * inSize + offset) *
                   w.getDouble((m * cg + c) * kSize + k);
          }
        y[(n * cc.m + m) * outSize + o] = sum;
      }
  return y;
}

} // namespace

TEST_CASE("Conv matches its definition: strides, pads, dilations, groups") {
  const ConvCase cases[] = {
      // ViT's patch embedding: stride = kernel, with bias.
      {2, 3, 8, 1, {8, 8}, {4, 4}, {4, 4}, {1, 1}, {0, 0, 0, 0}, true},
      {1, 2, 3, 1, {7, 6}, {3, 2}, {2, 1}, {1, 2}, {1, 0, 2, 1}, true},
      {2, 4, 6, 2, {5, 5}, {3, 3}, {1, 2}, {1, 1}, {1, 1, 1, 1}, false},
      {1, 3, 3, 3, {9}, {3}, {2}, {2}, {2, 1}, true},
      {1, 2, 2, 1, {4, 3, 3}, {2, 2, 2}, {1, 1, 2}, {1, 1, 1},
       {0, 1, 0, 1, 0, 1}, false},
  };
  Rng rng(1302);
  INFO("seed 1302");
  for (const ConvCase &cc : cases) {
    size_t rank = cc.in.size();
    std::vector<int64_t> xDims{cc.n, cc.c}, wDims{cc.m, cc.c / cc.group},
        outSpatial;
    xDims.insert(xDims.end(), cc.in.begin(), cc.in.end());
    wDims.insert(wDims.end(), cc.kernel.begin(), cc.kernel.end());
    for (size_t d = 0; d < rank; ++d) {
      int64_t extent = cc.dilations[d] * (cc.kernel[d] - 1) + 1;
      outSpatial.push_back(
          (cc.in[d] + cc.pads[d] + cc.pads[d + rank] - extent) /
              cc.strides[d] +
          1);
    }
    std::vector<int64_t> yDims{cc.n, cc.m};
    yDims.insert(yDims.end(), outSpatial.begin(), outSpatial.end());
    std::string text = "graph @g(%x: " + typeText("f64", xDims) +
                       ", %w: " + typeText("f64", wDims);
    if (cc.bias)
      text += ", %b: f64[" + std::to_string(cc.m) + "]";
    text += ") {\n  %y = Conv(%x, %w" + std::string(cc.bias ? ", %b" : "") +
            ") {dilations = " + list(cc.dilations) +
            ", group = " + std::to_string(cc.group) +
            ", pads = " + list(cc.pads) + ", strides = " + list(cc.strides) +
            "} : " + typeText("f64", yDims) + "\n  return %y }";
    INFO(text);
    Case c = parse(text);
    std::vector<TensorDataPtr> inputs{
        randomData(TensorType(DType::F64, xDims), rng),
        randomData(TensorType(DType::F64, wDims), rng)};
    if (cc.bias)
      inputs.push_back(randomData(TensorType(DType::F64, {cc.m}), rng));
    std::vector<double> got = valuesOf(*runAll(c, inputs));
    std::vector<double> want =
        referenceConv(cc, *inputs[0], *inputs[1],
                      cc.bias ? inputs[2].get() : nullptr, outSpatial);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(std::fabs(got[i] - want[i]) <= 1e-12 * (1 + std::fabs(want[i])));
  }
}

TEST_CASE("Conv's auto_pad SAME_UPPER / SAME_LOWER / VALID shapes") {
  // The parser checks each declared type against inference.
  auto shapeError = [](const std::string &attrs, const std::string &type) {
    return inferError("graph @g(%x: f32[1,1,7,7], %w: f32[1,1,3,3]) {\n"
                      "  %y = Conv(%x, %w) {" +
                      attrs + "} : " + type + "\n  return %y }");
  };
  CHECK(shapeError("auto_pad = \"SAME_UPPER\", strides = [2, 2]",
                   "f32[1,1,4,4]") == "");
  CHECK(shapeError("auto_pad = \"SAME_LOWER\"", "f32[1,1,7,7]") == "");
  CHECK(shapeError("auto_pad = \"VALID\", strides = [2, 3]",
                   "f32[1,1,3,2]") == "");
  CHECK(shapeError("auto_pad = \"VALID\"", "f32[1,1,7,7]") ==
        "Conv '%y': declared type f32[1,1,7,7] of result %y does not match "
        "inferred type f32[1,1,5,5]");
  auto geometry = [](const std::string &autoPad) {
    Case c = parse("graph @g(%x: f32[1,1,6,6], %w: f32[1,1,4,4]) {\n"
                   "  %y = Conv(%x, %w) {auto_pad = \"" +
                   autoPad + "\"} : f32[1,1,6,6]\n  return %y }");
    auto g = getConvGeometry(*c.node);
    REQUIRE(bool(g));
    return std::make_pair(g->padBegin[0], g->padEnd[0]);
  };
  CHECK(geometry("SAME_UPPER") == std::make_pair<int64_t, int64_t>(1, 2));
  CHECK(geometry("SAME_LOWER") == std::make_pair<int64_t, int64_t>(2, 1));
}

TEST_CASE("ConvTranspose is the adjoint of Conv") {
  // <Conv(x, w), y> == <x, ConvTranspose(y, w)> for every x, y: the
  // gradient autodiff takes through Conv.
  Rng rng(1303);
  INFO("seed 1303");
  struct Geometry {
    std::string xType, wType, yType, attrs, outputPadding;
  };
  const Geometry geometries[] = {
      {"f64[2,3,7,6]", "f64[4,3,3,2]", "f64[2,4,3,5]",
       "dilations = [1, 2], pads = [1, 0, 0, 1], strides = [2, 1]", "[1, 0]"},
      {"f64[1,4,8,8]", "f64[6,2,3,3]", "f64[1,6,2,4]",
       "group = 2, pads = [0, 1, 0, 0], strides = [3, 2]", "[2, 0]"},
      {"f64[1,3,8,8]", "f64[5,3,4,4]", "f64[1,5,2,2]", "strides = [4, 4]",
       "[0, 0]"},
  };
  for (const Geometry &g : geometries) {
    INFO(g.attrs);
    Case conv = parse("graph @g(%x: " + g.xType + ", %w: " + g.wType +
                      ") {\n  %y = Conv(%x, %w) {" + g.attrs + "} : " +
                      g.yType + "\n  return %y }");
    Case back = parse("graph @g(%d: " + g.yType + ", %w: " + g.wType +
                      ") {\n  %y = ConvTranspose(%d, %w) {" + g.attrs +
                      ", output_padding = " + g.outputPadding + "} : " +
                      g.xType + "\n  return %y }");
    TensorType xType = conv.graph->getInput(0)->getType();
    TensorType wType = conv.graph->getInput(1)->getType();
    TensorType yType = conv.node->getResult(0)->getType();
    auto x = randomData(xType, rng), w = randomData(wType, rng),
         d = randomData(yType, rng);
    auto y = runAll(conv, {x, w});
    auto t = runAll(back, {d, w});
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < y->getNumElements(); ++i)
      lhs += y->getDouble(i) * d->getDouble(i);
    for (int64_t i = 0; i < x->getNumElements(); ++i)
      rhs += x->getDouble(i) * t->getDouble(i);
    CHECK(std::fabs(lhs - rhs) <= 1e-12 * (1 + std::fabs(lhs)));
  }
}

TEST_CASE("Conv gives the same bits on 1 and 4 threads") {
  Rng rng(1304);
  Case c = parse(R"(graph @g(%x: f32[2,3,32,32], %w: f32[16,3,8,8], %b: f32[16]) {
    %y = Conv(%x, %w, %b) {strides = [8, 8]} : f32[2,16,4,4]
    return %y })");
  runAll(c, {randomData(TensorType(DType::F32, {2, 3, 32, 32}), rng),
             randomData(TensorType(DType::F32, {16, 3, 8, 8}), rng),
             randomData(TensorType(DType::F32, {16}), rng)});
}

//===----------------------------------------------------------------------===//
// MaxPool, AveragePool and their gradients (issue 40)
//===----------------------------------------------------------------------===//

namespace {

/// A 1-D or 2-D pooling case; 1-D cases have one entry per list.
struct PoolCase {
  bool max;
  std::vector<int64_t> x; // [N, C, spatial...]
  std::vector<int64_t> kernel, strides, dilations, pads;
  bool ceil = false, includePad = false;
};

/// The pooled size of one dim, as torch's pooling_output_shape computes it
/// (with a floating-point floor or ceil): a window may start in the begin
/// pads or the input, never in the end pads.
int64_t pooledSize(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb,
                   int64_t pe, bool ceil) {
  double span = double(in + pb + pe - d * (k - 1) - 1) / double(s);
  int64_t out = int64_t(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (out - 1) * s >= in + pb)
    --out;
  return out;
}

/// The reference of a case, written as torch's 2-D CPU kernels are: 1-D
/// cases pool a [H = 1] dim first. For each output position, MaxPool
/// scans its window (the first maximum, a NaN replacing it) and
/// AveragePool divides the sum by torch's divisor (hend - hstart) * (wend -
/// wstart) clipped to the padded input, or to the input without
/// count_include_pad. The gradients scatter: dy into the argmax, or dy /
/// divisor into every position inside. Positions are row-major.
struct PoolReference {
  std::vector<int64_t> yDims;
  std::vector<double> y;
  /// Flat x index of each output's argmax (MaxPool), or -1.
  std::vector<int64_t> argmax;
  std::vector<double> divisor;
  /// For each output, the flat x indices its window covers inside x.
  std::vector<std::vector<int64_t>> window;
};

PoolReference poolReference(const PoolCase &pc, const TensorData &x) {
  bool oneD = pc.kernel.size() == 1;
  auto at = [&](const std::vector<int64_t> &v, int d, int64_t none) {
    return oneD ? (d == 0 ? none : v[0]) : v[d];
  };
  int64_t n = pc.x[0], c = pc.x[1];
  int64_t H = oneD ? 1 : pc.x[2], W = oneD ? pc.x[2] : pc.x[3];
  int64_t kh = at(pc.kernel, 0, 1), kw = at(pc.kernel, 1, 1);
  int64_t sh = at(pc.strides, 0, 1), sw = at(pc.strides, 1, 1);
  int64_t dh = at(pc.dilations, 0, 1), dw = at(pc.dilations, 1, 1);
  int64_t ph = oneD ? 0 : pc.pads[0], pw = oneD ? pc.pads[0] : pc.pads[1];
  int64_t peh = oneD ? 0 : pc.pads[2], pew = oneD ? pc.pads[1] : pc.pads[3];
  int64_t OH = pooledSize(H, kh, sh, dh, ph, peh, pc.ceil);
  int64_t OW = pooledSize(W, kw, sw, dw, pw, pew, pc.ceil);
  PoolReference r;
  r.yDims = {n, c};
  if (!oneD)
    r.yDims.push_back(OH);
  r.yDims.push_back(OW);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t hstart = oh * sh - ph, wstart = ow * sw - pw;
        std::vector<int64_t> cells;
        int64_t best = -1;
        double sum = 0;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            int64_t h = hstart + i * dh, w = wstart + j * dw;
            if (h < 0 || h >= H || w < 0 || w >= W)
              continue;
            int64_t flat = (p * H + h) * W + w;
            double v = x.getDouble(flat);
            if (best < 0 || v > x.getDouble(best) || std::isnan(v))
              best = flat;
            sum += v;
            cells.push_back(flat);
          }
        // torch's avg_pool2d divisor (dilation 1).
        int64_t hend = std::min(hstart + kh, H + peh);
        int64_t wend = std::min(wstart + kw, W + pew);
        int64_t padded = (hend - hstart) * (wend - wstart);
        int64_t inside = (std::min(hend, H) - std::max<int64_t>(hstart, 0)) *
                         (std::min(wend, W) - std::max<int64_t>(wstart, 0));
        double divisor = double(pc.includePad ? padded : inside);
        r.argmax.push_back(best);
        r.divisor.push_back(divisor);
        r.window.push_back(cells);
        r.y.push_back(pc.max ? x.getDouble(best) : sum / divisor);
      }
  return r;
}

std::string poolAttrs(const PoolCase &pc) {
  std::string text = "{";
  if (pc.ceil)
    text += "ceil_mode = 1, ";
  if (pc.includePad)
    text += "count_include_pad = 1, ";
  return text + "dilations = " + list(pc.dilations) +
         ", kernel_shape = " + list(pc.kernel) + ", pads = " + list(pc.pads) +
         ", strides = " + list(pc.strides) + "}";
}

const PoolCase kPoolCases[] = {
    // Canine's downsampling: MaxPool1d, stride = kernel.
    {true, {2, 3, 12}, {4}, {4}, {1}, {0, 0}},
    {true, {2, 2, 10}, {3}, {2}, {1}, {1, 1}, true},
    {true, {1, 2, 7, 6}, {3, 2}, {2, 2}, {1, 2}, {1, 0, 1, 1}, true},
    {true, {1, 1, 6, 5}, {2, 2}, {1, 2}, {2, 1}, {0, 1, 1, 0}},
    // Funnel's pooling: avg_pool2d((2, 1), ceil_mode = True) on odd lengths.
    {false, {2, 1, 7, 4}, {2, 1}, {2, 1}, {1, 1}, {0, 0, 0, 0}, true, true},
    {false, {1, 2, 5, 5}, {2, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
    {false, {1, 2, 5, 5}, {3, 3}, {2, 1}, {1, 1}, {1, 1, 1, 1}, false, true},
    {false, {2, 2, 9}, {3}, {2}, {1}, {1, 1}, true, false},
    {false, {2, 2, 9}, {3}, {2}, {1}, {1, 1}, true, true},
};

} // namespace

TEST_CASE("MaxPool and AveragePool match torch's pooling loops") {
  Rng rng(4001);
  INFO("seed 4001");
  for (const PoolCase &pc : kPoolCases) {
    TensorType xType(DType::F64, pc.x);
    auto x = randomData(xType, rng);
    PoolReference ref = poolReference(pc, *x);
    std::string text = "graph @g(%x: " + typeText("f64", pc.x) +
                       ") {\n  %y = " + (pc.max ? "MaxPool" : "AveragePool") +
                       "(%x) " + poolAttrs(pc) + " : " +
                       typeText("f64", ref.yDims) + "\n  return %y }";
    INFO(text);
    Case c = parse(text);
    std::vector<double> got = valuesOf(*runAll(c, {x}));
    REQUIRE(got.size() == ref.y.size());
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(std::fabs(got[i] - ref.y[i]) <= 1e-15 * (1 + std::fabs(ref.y[i])));
  }
}

TEST_CASE("MaxPoolGrad and AveragePoolGrad scatter dy as torch does") {
  Rng rng(4002);
  INFO("seed 4002");
  for (const PoolCase &pc : kPoolCases) {
    TensorType xType(DType::F64, pc.x);
    auto x = randomData(xType, rng);
    PoolReference ref = poolReference(pc, *x);
    auto dy = randomData(TensorType(DType::F64, ref.yDims), rng);
    std::vector<double> want(xType.getNumElements(), 0.0);
    for (size_t o = 0; o < ref.y.size(); ++o) {
      if (pc.max) {
        want[ref.argmax[o]] += dy->getDouble(o);
        continue;
      }
      for (int64_t cell : ref.window[o])
        want[cell] += dy->getDouble(o) / ref.divisor[o];
    }
    std::string shape = "%s = Constant() {value = dense<i64[" +
                        std::to_string(pc.x.size()) + "]: " + list(pc.x) +
                        ">} : i64[" + std::to_string(pc.x.size()) + "]\n  ";
    std::string text =
        "graph @g(%d: " + typeText("f64", ref.yDims) +
        ", %x: " + typeText("f64", pc.x) + ") {\n  " +
        (pc.max ? "%y = remat.MaxPoolGrad(%d, %x) "
                : shape + "%y = remat.AveragePoolGrad(%d, %s) ") +
        poolAttrs(pc) + " : " + typeText("f64", pc.x) + "\n  return %y }";
    INFO(text);
    Case c = parse(text);
    std::vector<double> got = valuesOf(*runAll(c, {dy, x}));
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(std::fabs(got[i] - want[i]) <= 1e-15 * (1 + std::fabs(want[i])));
  }
}

TEST_CASE("MaxPool: the first of equal maxima and a NaN take the window") {
  double nan = std::numeric_limits<double>::quiet_NaN();
  // Windows [2, 2], [3, nan], [1, 1]; f32 too.
  auto x = doubles(TensorType(DType::F64, {1, 1, 6}), {2, 2, 3, nan, 1, 1});
  auto y = runOnX("f64[1,1,6]",
                  "%y = MaxPool(%x) {kernel_shape = [2], strides = [2]} : "
                  "f64[1,1,3]",
                  x);
  CHECK(y->getDouble(0) == 2);
  CHECK(std::isnan(y->getDouble(1)));
  CHECK(y->getDouble(2) == 1);
  Case c = parse(R"(graph @g(%d: f64[1,1,3], %x: f64[1,1,6]) {
    %y = remat.MaxPoolGrad(%d, %x) {kernel_shape = [2], strides = [2]} : f64[1,1,6]
    return %y })");
  auto dy = doubles(TensorType(DType::F64, {1, 1, 3}), {10, 20, 30});
  CHECK(valuesOf(*runAll(c, {dy, x})) ==
        std::vector<double>{10, 0, 0, 20, 30, 0});
  auto f32 =
      runOnX("f32[1,1,2,2]",
             "%y = AveragePool(%x) {kernel_shape = [2, 2]} : "
             "f32[1,1,1,1]",
             doubles(TensorType(DType::F32, {1, 1, 2, 2}), {1, 2, 3, 4.5}));
  CHECK(f32->getDouble(0) == 2.625);
}

TEST_CASE("pooling shape inference names the node and the attribute") {
  CHECK(inferError(R"(graph @g(%x: f32[1,2,8]) {
    %y = MaxPool(%x) {strides = [2]} : f32[1,2,4]
    return %y })") == "MaxPool '%y': needs attribute 'kernel_shape'");
  CHECK(inferError(R"(graph @g(%x: f32[1,2,8]) {
    %y, %i = MaxPool(%x) {kernel_shape = [2]} : f32[1,2,7], i64[1,2,7]
    return %y })") == "MaxPool '%y': has an Indices result, which remat does "
                      "not support (only Y)");
  CHECK(inferError(R"(graph @g(%x: f32[1,2,8]) {
    %y = AveragePool(%x) {kernel_shape = [2, 2]} : f32[1,2,7]
    return %y })") ==
        "AveragePool '%y': attribute 'kernel_shape' [2,2] must have 1 "
        "entries (one per spatial dim)");
  CHECK(inferError(R"(graph @g(%x: f32[1,2,8]) {
    %y = MaxPool(%x) {kernel_shape = [2], pads = [2, 0]} : f32[1,2,7]
    return %y })") == "MaxPool '%y': pads 2 and 0 of spatial dim 0 must be "
                      "below the window extent 2 (a window of pads only)");
  CHECK(inferError(R"(graph @g(%x: f32[1,2,3]) {
    %y = MaxPool(%x) {kernel_shape = [4]} : f32[1,2,1]
    return %y })") == "MaxPool '%y': the window extent 4 exceeds the padded "
                      "input size 3 in spatial dim 0 of an input of dims "
                      "[1,2,3]");
  CHECK(inferError(R"(graph @g(%x: i64[1,2,3]) {
    %y = MaxPool(%x) {kernel_shape = [2]} : i64[1,2,2]
    return %y })") == "MaxPool '%y': operand 0 (%x) must have a float "
                      "dtype, got i64[1,2,3]");
  CHECK(inferError(R"(graph @g(%x: f32[1,2,8]) {
    %y = AveragePool(%x) {auto_pad = "SAME_UPPER", kernel_shape = [3], strides = [3]} : f32[1,2,3]
    return %y })") == "");
  CHECK(inferError(R"(graph @g(%d: f32[1,2,3], %x: f32[1,2,8]) {
    %y = remat.MaxPoolGrad(%d, %x) {kernel_shape = [2], strides = [2]} : f32[1,2,8]
    return %y })") == "remat.MaxPoolGrad '%y': operand 0 (%d) of type "
                      "f32[1,2,3] must be f32[1,2,4]");
}

//===----------------------------------------------------------------------===//
// Acos, EyeLike (issue 40)
//===----------------------------------------------------------------------===//

TEST_CASE("Acos is libm's acos, NaN outside [-1, 1]") {
  std::vector<double> xs = {-1, -0.5, -0.0, 0.3, 1, 1.5};
  auto y = runOnX("f64[6]", "%y = Acos(%x) : f64[6]",
                  doubles(TensorType(DType::F64, {6}), xs));
  for (size_t i = 0; i + 1 < xs.size(); ++i)
    CHECK(y->getDouble(i) == std::acos(xs[i]));
  CHECK(y->getDouble(0) == M_PI);
  CHECK(std::isnan(y->getDouble(5)));
  auto f32 = runOnX("f32[2]", "%y = Acos(%x) : f32[2]",
                    doubles(TensorType(DType::F32, {2}), {0.25, -1}));
  CHECK(f32->getDouble(0) == double(std::acos(0.25f)));
}

TEST_CASE("EyeLike puts ones on diagonal k in the dtype asked for") {
  auto y = runOnX(
      "f32[3,4]", "%y = EyeLike(%x) {k = 1} : f32[3,4]",
      doubles(TensorType(DType::F32, {3, 4}), std::vector<double>(12, 7.0)));
  CHECK(valuesOf(*y) ==
        std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  // dtype 7 is int64; k below the diagonal.
  auto i64 = runOnX(
      "f32[3,2]", "%y = EyeLike(%x) {dtype = 7, k = -1} : i64[3,2]",
      doubles(TensorType(DType::F32, {3, 2}), std::vector<double>(6, 0.0)));
  CHECK(valuesOf(*i64) == std::vector<double>{0, 0, 1, 0, 0, 1});
  auto b = runOnX("f32[2,2]", "%y = EyeLike(%x) {dtype = 9} : bool[2,2]",
                  doubles(TensorType(DType::F32, {2, 2}), {1, 2, 3, 4}));
  CHECK(valuesOf(*b) == std::vector<double>{1, 0, 0, 1});
  CHECK(inferError(R"(graph @g(%x: f32[2,2,2]) {
    %y = EyeLike(%x) : f32[2,2,2]
    return %y })") == "EyeLike '%y': operand 0 (%x) must have rank 2, got "
                      "f32[2,2,2]");
  CHECK(inferError(R"(graph @g(%x: f32[2,2]) {
    %y = EyeLike(%x) {dtype = 8} : f32[2,2]
    return %y })") == "EyeLike '%y': attribute 'dtype' is 8, which is not "
                      "an ONNX dtype code remat supports");
}

//===----------------------------------------------------------------------===//
// ReduceL2, ReduceLogSumExp (issue 40)
//===----------------------------------------------------------------------===//

TEST_CASE("ReduceL2 and ReduceLogSumExp match long double references") {
  Rng rng(4003);
  INFO("seed 4003");
  const std::vector<int64_t> dims = {3, 4, 5};
  auto x = randomData(TensorType(DType::F64, dims), rng);
  struct Axes {
    std::string attr;
    std::vector<bool> reduced;
    std::string yType;
  };
  const Axes cases[] = {
      {"axes = [2]", {false, false, true}, "f64[3,4,1]"},
      {"axes = [0, 2], keepdims = 0", {true, false, true}, "f64[4]"},
      {"axes = [-2]", {false, true, false}, "f64[3,1,5]"},
      {"keepdims = 0", {true, true, true}, "f64[]"},
  };
  for (const Axes &a : cases)
    for (bool l2 : {true, false}) {
      std::string op = l2 ? "ReduceL2" : "ReduceLogSumExp";
      INFO(op << " {" << a.attr << "}");
      auto y = runOnX("f64[3,4,5]",
                      "%y = " + op + "(%x) {" + a.attr + "} : " + a.yType, x);
      // Each output sums the elements whose kept indices match, in long
      // double: sqrt(sum x^2), or log(sum exp(x)) directly.
      std::vector<long double> acc;
      std::vector<int64_t> keyOf(60);
      std::map<std::vector<int64_t>, size_t> slot;
      for (int64_t e = 0; e < 60; ++e) {
        std::vector<int64_t> key;
        int64_t idx[3] = {e / 20, (e / 5) % 4, e % 5};
        for (int d = 0; d < 3; ++d)
          if (!a.reduced[d])
            key.push_back(idx[d]);
        auto [it, fresh] = slot.emplace(key, acc.size());
        if (fresh)
          acc.push_back(0);
        long double v = x->getDouble(e);
        acc[it->second] += l2 ? v * v : std::exp(v);
      }
      REQUIRE(y->getNumElements() == int64_t(acc.size()));
      for (size_t o = 0; o < acc.size(); ++o) {
        double want = double(l2 ? std::sqrt(acc[o]) : std::log(acc[o]));
        CHECK(std::fabs(y->getDouble(o) - want) <=
              1e-14 * (1 + std::fabs(want)));
      }
    }
  // LogSumExp keeps large values finite and an all -inf row at -inf, as
  // torch.logsumexp; L2 of zeros is 0.
  double inf = std::numeric_limits<double>::infinity();
  auto big =
      runOnX("f64[2,2]", "%y = ReduceLogSumExp(%x) {axes = [1]} : f64[2,1]",
             doubles(TensorType(DType::F64, {2, 2}), {1000, 1000, -inf, -inf}));
  CHECK(std::fabs(big->getDouble(0) - (1000 + std::log(2.0))) <= 1e-12);
  CHECK(big->getDouble(1) == -inf);
  auto zero = runOnX("f32[2]", "%y = ReduceL2(%x) {keepdims = 0} : f32[]",
                     doubles(TensorType(DType::F32, {2}), {0, 0}));
  CHECK(zero->getDouble(0) == 0);
  CHECK(runError(R"(graph @g(%x: i64[2]) {
    %y = ReduceL2(%x) : i64[1]
    return %y })",
                 {doubles(TensorType(DType::I64, {2}), {3, 4})})
            .find("ReduceL2 '%y': the cpu backend has no ReduceL2 kernel for "
                  "operand of dtype i64 (supported: f32, f64)") !=
        std::string::npos);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_CASE("shape inference names the node and what is wrong") {
  CHECK(inferError(R"(graph @g(%x: f32[3]) {
    %y = Trilu(%x) : f32[3]
    return %y })") ==
        "Trilu '%y': operand 0 (%x) must have rank >= 2, got f32[3]");
  CHECK(inferError(R"(graph @g(%x: f32[2,2], %k: i32[]) {
    %y = Trilu(%x, %k) : f32[2,2]
    return %y })") ==
        "Trilu '%y': operand 1 (%k) must have dtype i64, got i32[]");
  CHECK(inferError(R"(graph @g(%x: f32[2,2], %a: i64[2]) {
    %y = CumSum(%x, %a) : f32[2,2]
    return %y })") == "CumSum '%y': operand 1 (%a) must be a scalar "
                      "(one element), got i64[2]");
  CHECK(inferError(R"(graph @g(%x: f32[2,2]) {
    %a = Constant() {value = dense<i64[]: 2>} : i64[]
    %y = CumSum(%x, %a) : f32[2,2]
    return %y })") == "CumSum '%y': axis operand 1 (%a) is 2, "
                      "expected a value in [-2, 1] for rank 2");
  CHECK(inferError(R"(graph @g(%x: bool[2]) {
    %y = CumSum(%x, %x) : bool[2]
    return %y })") == "CumSum '%y': operand 0 (%x) must have a "
                      "float, i32 or i64 dtype, got bool[2]");
  CHECK(inferError(R"(graph @g(%x: f32[2,3], %i: i64[2]) {
    %y = GatherElements(%x, %i) : f32[2]
    return %y })") ==
        "GatherElements '%y': operand 1 (%i) of type i64[2] must "
        "have the rank of operand 0 (%x) of type f32[2,3]");
  CHECK(inferError(R"(graph @g(%x: f32[2,3], %i: i64[2,4]) {
    %y = GatherElements(%x, %i) : f32[2,4]
    return %y })") ==
        "GatherElements '%y': operand 1 (%i) of type i64[2,4] "
        "exceeds operand 0 (%x) of type f32[2,3] in dim 1");
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %p = Constant() {value = dense<i64[2]: [1, 1]>} : i64[2]
    %y = Pad(%x, %p) : f32[4,5]
    return %y })") == "Pad '%y': pads operand 1 (%p) of type i64[2] "
                      "must have 4 entries (two per padded axis)");
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %p = Constant() {value = dense<i64[4]: [0, -1, 0, 0]>} : i64[4]
    %y = Pad(%x, %p) {mode = "edge"} : f32[2,2]
    return %y })") ==
        "Pad '%y': pads [0,-1,0,0] has a negative "
        "entry for axis 1, which only mode \"constant\" supports");
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %p = Constant() {value = dense<i64[4]: [0, 0, 0, 0]>} : i64[4]
    %y = Pad(%x, %p) {mode = "circular"} : f32[2,3]
    return %y })") ==
        "Pad '%y': attribute 'mode' is "
        "\"circular\", expected \"constant\", \"reflect\", \"edge\" or "
        "\"wrap\"");
  CHECK(inferError(R"(graph @g(%x: f32[1,4,5,5], %w: f32[2,3,3,3]) {
    %y = Conv(%x, %w) : f32[1,2,3,3]
    return %y })") ==
        "Conv '%y': operand 1 (%w) of type f32[2,3,3,3] must have 4 "
        "input channels (dim 1) for operand 0 (%x) of type f32[1,4,5,5] and "
        "group 1");
  CHECK(inferError(R"(graph @g(%x: f32[1,1,2,2], %w: f32[1,1,3,3]) {
    %y = Conv(%x, %w) : f32[1,1,1,1]
    return %y })") ==
        "Conv '%y': the kernel extent 3 exceeds the padded input size "
        "2 in spatial dim 0 of operand 0 (%x) of type f32[1,1,2,2]");
  CHECK(inferError(R"(graph @g(%x: i64[1,1,2,2], %w: i64[1,1,1,1]) {
    %y = Conv(%x, %w) : i64[1,1,2,2]
    return %y })") == "Conv '%y': operand 0 (%x) must have a float "
                      "dtype, got i64[1,1,2,2]");
  CHECK(inferError(R"(graph @g(%x: f32[2]) {
    %y = Not(%x) : bool[2]
    return %y })") ==
        "Not '%y': operand 0 (%x) must have dtype bool, got f32[2]");
  CHECK(inferError(R"(graph @g(%x: i64[2]) {
    %y = IsNaN(%x) : bool[2]
    return %y })") ==
        "IsNaN '%y': operand 0 (%x) must have a float dtype, got i64[2]");
}

TEST_CASE("the CPU backend refuses what it does not implement, naming it") {
  auto selectError = [](const std::string &text) {
    Case c = parse(text);
    auto kernel = selectKernel(*c.node);
    return kernel ? std::string()
                  : stripLoc(errorToString(kernel.takeError()));
  };
  CHECK(selectError(R"(graph @g(%x: f16[2]) {
    %y = Sin(%x) : f16[2]
    return %y })") == "Sin '%y': the cpu backend has no Sin kernel for "
                      "operand of dtype f16 (supported: f32, f64)");
  CHECK(selectError(R"(graph @g(%x: f16[1,1,2,2], %w: f16[1,1,1,1]) {
    %y = Conv(%x, %w) : f16[1,1,2,2]
    return %y })") == "Conv '%y': the cpu backend has no Conv kernel "
                      "for operands of dtype f16 (supported: f32, f64)");
}

//===----------------------------------------------------------------------===//
// Ceil, Clip, Tile (issue 40)
//===----------------------------------------------------------------------===//

TEST_CASE("Ceil rounds up and keeps -0, inf and NaN") {
  double inf = std::numeric_limits<double>::infinity();
  double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> xs = {-1.5, -0.5, -0.0, 0.2, 1, 2.5, -inf, nan};
  auto y = runOnX("f64[8]", "%y = Ceil(%x) : f64[8]",
                  doubles(TensorType(DType::F64, {8}), xs));
  std::vector<double> got = valuesOf(*y);
  std::vector<double> want = {-1, -0.0, -0.0, 1, 1, 3, -inf};
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i] == want[i]);
    CHECK(std::signbit(got[i]) == std::signbit(want[i]));
  }
  CHECK(std::isnan(got[7]));
  auto f32 = runOnX("f32[2]", "%y = Ceil(%x) : f32[2]",
                    doubles(TensorType(DType::F32, {2}), {0.5, -2.25}));
  CHECK(valuesOf(*f32) == std::vector<double>{1, -2});
}

TEST_CASE("Clip bounds by the operands present, as numpy.clip") {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Case both = parse(R"(graph @g(%x: f64[6]) {
    %lo = Constant() {value = dense<f64[]: -1.0>} : f64[]
    %hi = Constant() {value = dense<f64[1]: [2.0]>} : f64[1]
    %y = Clip(%x, %lo, %hi) : f64[6]
    return %y })");
  auto y = runAll(both, {doubles(TensorType(DType::F64, {6}),
                                 {-3, -1, 0.5, 2, 7, nan})});
  std::vector<double> got = valuesOf(*y);
  CHECK(std::vector<double>(got.begin(), got.begin() + 5) ==
        std::vector<double>{-1, -1, 0.5, 2, 2});
  CHECK(std::isnan(got[5]));
  Case minOnly = parse(R"(graph @g(%x: i64[4]) {
    %lo = Constant() {value = dense<i64[]: 0>} : i64[]
    %y = Clip(%x, %lo) : i64[4]
    return %y })");
  CHECK(runAll(minOnly, {TensorData::fromInts(TensorType(DType::I64, {4}),
                                              {-5, 0, 3, -1})})
            ->getInts() == std::vector<int64_t>{0, 0, 3, 0});
  Case none = parse(R"(graph @g(%x: i8[3]) {
    %y = Clip(%x) : i8[3]
    return %y })");
  CHECK(runAll(none, {TensorData::fromInts(TensorType(DType::I8, {3}),
                                           {-128, 0, 127})})
            ->getInts() == std::vector<int64_t>{-128, 0, 127});
  // min > max: every element becomes max (numpy, onnxruntime).
  Case crossed = parse(R"(graph @g(%x: f32[3]) {
    %lo = Constant() {value = dense<f32[]: 2.0>} : f32[]
    %hi = Constant() {value = dense<f32[]: 1.0>} : f32[]
    %y = Clip(%x, %lo, %hi) : f32[3]
    return %y })");
  CHECK(valuesOf(*runAll(crossed, {doubles(TensorType(DType::F32, {3}),
                                           {0, 1.5, 3})})) ==
        std::vector<double>{1, 1, 1});
}

TEST_CASE("Tile repeats every dim, any dtype, empty results too") {
  std::vector<double> x = {1, 2, 3, 4, 5, 6};
  Case c = parse(R"(graph @g(%x: f64[2,1,3]) {
    %r = Constant() {value = dense<i64[3]: [2, 3, 1]>} : i64[3]
    %y = Tile(%x, %r) : f64[4,3,3]
    return %y })");
  auto y = runAll(c, {doubles(TensorType(DType::F64, {2, 1, 3}), x)});
  std::vector<double> got = valuesOf(*y);
  REQUIRE(got.size() == 36);
  // numpy.tile: y[i, j, k] = x[i % 2, 0, k].
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 3; ++k)
        CHECK(got[(i * 3 + j) * 3 + k] == x[(i % 2) * 3 + k]);
  Case last = parse(R"(graph @g(%x: bool[2,2]) {
    %r = Constant() {value = dense<i64[2]: [1, 3]>} : i64[2]
    %y = Tile(%x, %r) : bool[2,6]
    return %y })");
  CHECK(runAll(last, {TensorData::fromInts(TensorType(DType::Bool, {2, 2}),
                                           {1, 0, 0, 1})})
            ->getInts() ==
        std::vector<int64_t>{1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1});
  Case empty = parse(R"(graph @g(%x: i64[2,3]) {
    %r = Constant() {value = dense<i64[2]: [1, 0]>} : i64[2]
    %y = Tile(%x, %r) : i64[2,0]
    return %y })");
  CHECK(runAll(empty, {TensorData::fromInts(TensorType(DType::I64, {2, 3}),
                                            {1, 2, 3, 4, 5, 6})})
            ->getNumElements() == 0);
  Case fromEmpty = parse(R"(graph @g(%x: f32[0,2]) {
    %r = Constant() {value = dense<i64[2]: [3, 2]>} : i64[2]
    %y = Tile(%x, %r) : f32[0,4]
    return %y })");
  CHECK(runAll(fromEmpty, {doubles(TensorType(DType::F32, {0, 2}), {})})
            ->getNumElements() == 0);
  Case scalar = parse(R"(graph @g(%x: f64[]) {
    %r = Constant() {value = dense<i64[0]: []>} : i64[0]
    %y = Tile(%x, %r) : f64[]
    return %y })");
  CHECK(valuesOf(*runAll(scalar, {doubles(TensorType(DType::F64, {}), {7})})) ==
        std::vector<double>{7});
  // Repeats that are not constants are checked against the result type
  // when the kernel runs.
  CHECK(runError(R"(graph @g(%x: f64[2,3], %r: i64[2]) {
    %y = Tile(%x, %r) : f64[4,3]
    return %y })",
                 {doubles(TensorType(DType::F64, {2, 3}), x),
                  TensorData::fromInts(TensorType(DType::I64, {2}), {1, 1})})
            .find("the repeats operand") != std::string::npos);
}

TEST_CASE("Clip and Tile shape inference names what is wrong") {
  CHECK(inferError(R"(graph @g(%x: f32[3], %lo: f32[2]) {
    %y = Clip(%x, %lo) : f32[3]
    return %y })") == "Clip '%y': operand 1 (%lo) must be a scalar (one "
                      "element), got f32[2]");
  CHECK(inferError(R"(graph @g(%x: f32[3], %lo: f64[]) {
    %y = Clip(%x, %lo) : f32[3]
    return %y })") == "Clip '%y': operand 1 (%lo) has type f64[], expected "
                      "dtype f32 (the dtype of operand 0 (%x))");
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %r = Constant() {value = dense<i64[1]: [2]>} : i64[1]
    %y = Tile(%x, %r) : f32[4,3]
    return %y })") == "Tile '%y': operand 1 (%r) of type i64[1] must have "
                      "one entry per dim of f32[2,3]");
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %r = Constant() {value = dense<i64[2]: [1, -2]>} : i64[2]
    %y = Tile(%x, %r) : f32[2,3]
    return %y })") == "Tile '%y': repeats [1,-2] has negative entry -2");
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %r = Constant() {value = dense<i64[2]: [2, 1]>} : i64[2]
    %y = Tile(%x, %r) : f32[2,3]
    return %y })")
            .find("f32[4,3]") != std::string::npos);
}

//===----------------------------------------------------------------------===//
// Floor, Softplus, ArgMax, ArgMin (issue 40)
//===----------------------------------------------------------------------===//

TEST_CASE("Floor rounds down and keeps -0, inf and NaN") {
  double inf = std::numeric_limits<double>::infinity();
  double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> xs = {-1.5, -0.5, -0.0, 0.2, 1, 2.5, inf, nan};
  auto y = runOnX("f64[8]", "%y = Floor(%x) : f64[8]",
                  doubles(TensorType(DType::F64, {8}), xs));
  std::vector<double> got = valuesOf(*y);
  std::vector<double> want = {-2, -1, -0.0, 0, 1, 2, inf};
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i] == want[i]);
    CHECK(std::signbit(got[i]) == std::signbit(want[i]));
  }
  CHECK(std::isnan(got[7]));
  auto f32 = runOnX("f32[2]", "%y = Floor(%x) : f32[2]",
                    doubles(TensorType(DType::F32, {2}), {0.5, -2.25}));
  CHECK(valuesOf(*f32) == std::vector<double>{0, -3});
}

TEST_CASE("Softplus is log(1 + exp(x)) without overflow or lost digits") {
  double inf = std::numeric_limits<double>::infinity();
  double nan = std::numeric_limits<double>::quiet_NaN();
  // The reference: log1p(exp(x)) in long double, where exp(1000) does not
  // overflow and 1 + exp(-700) keeps exp(-700)'s digits.
  auto reference = [](double x) {
    return static_cast<double>(
        std::log1p(std::exp(static_cast<long double>(x))));
  };
  std::vector<double> xs = {-700, -40, -3, -0.5, -0.0, 0,   1e-8, 0.5,
                            3,    17,  40, 1000, -inf, inf, nan};
  auto y = runOnX("f64[15]", "%y = Softplus(%x) : f64[15]",
                  doubles(TensorType(DType::F64, {15}), xs));
  std::vector<double> got = valuesOf(*y);
  for (size_t i = 0; i + 3 < xs.size(); ++i) {
    INFO("x = " << xs[i]);
    double want = reference(xs[i]);
    CHECK(got[i] > 0);
    CHECK(std::fabs(got[i] - want) <= 1e-15 * want);
  }
  CHECK(got[12] == 0);
  CHECK(got[13] == inf);
  CHECK(std::isnan(got[14]));
  // f32: exp(100) overflows f32, exp(-80) is below 1 + FLT_EPSILON.
  std::vector<double> fs = {-80, -5, 0, 0.75, 5, 100};
  auto f32 = runOnX("f32[6]", "%y = Softplus(%x) : f32[6]",
                    doubles(TensorType(DType::F32, {6}), fs));
  for (size_t i = 0; i < fs.size(); ++i) {
    INFO("x = " << fs[i]);
    double want = reference(fs[i]);
    CHECK(std::fabs(f32->getDouble(i) - want) <= 1e-6 * want);
  }
}

namespace {

/// numpy's argmax/argmin of one line (the values \p line, in order), as a
/// reference written apart from the kernel: the extreme value first, then
/// its first (or, with \p last, its last) position; any NaN is the extreme.
int64_t referenceArg(const std::vector<double> &line, bool isMax, bool last) {
  int64_t nanAt = -1;
  for (size_t k = 0; k < line.size(); ++k)
    if (std::isnan(line[k]) && (nanAt < 0 || last))
      nanAt = int64_t(k);
  if (nanAt >= 0)
    return nanAt;
  double extreme = line[0];
  for (double v : line)
    extreme = isMax ? std::max(extreme, v) : std::min(extreme, v);
  int64_t at = -1;
  for (size_t k = 0; k < line.size(); ++k)
    if (line[k] == extreme && (at < 0 || last))
      at = int64_t(k);
  return at;
}

} // namespace

TEST_CASE("ArgMax and ArgMin match numpy on every axis, dtype and attribute") {
  Rng rng(40);
  INFO("seed 40");
  std::uniform_int_distribution<int> small(0, 3);
  std::vector<int64_t> dims = {3, 4, 5};
  int64_t count = 60;
  double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char *dtypeName : {"f64", "f32", "i64", "i32", "i8", "u8"}) {
    DType dtype = *parseDType(dtypeName);
    // Values in {0..3} tie often; floats also get NaNs and -0 beside 0.
    std::vector<double> values(count);
    for (double &v : values)
      v = small(rng);
    if (isFloat(dtype)) {
      values[7] = nan;
      values[31] = nan;
      values[44] = -0.0;
    }
    auto x = doubles(TensorType(dtype, dims), values);
    for (const char *op : {"ArgMax", "ArgMin"})
      for (int64_t axis = -3; axis < 3; ++axis)
        for (int keep : {0, 1})
          for (int last : {0, 1}) {
            int64_t a = axis < 0 ? axis + 3 : axis;
            std::vector<int64_t> outDims;
            for (int64_t d = 0; d < 3; ++d)
              if (d != a)
                outDims.push_back(dims[d]);
              else if (keep)
                outDims.push_back(1);
            std::string text = "graph @g(%x: " + std::string(dtypeName) +
                               "[3,4,5]) {\n" + "  %y = " + op +
                               "(%x) {axis = " + std::to_string(axis) +
                               ", keepdims = " + std::to_string(keep) +
                               ", select_last_index = " + std::to_string(last) +
                               "} : " + TensorType(DType::I64, outDims).str() +
                               "\n  return %y }";
            INFO(text);
            auto y = runAll(parse(text), {x});
            std::vector<int64_t> got = y->getInts();
            REQUIRE(got.size() == size_t(count / dims[a]));
            int64_t inner = 1;
            for (int64_t d = a + 1; d < 3; ++d)
              inner *= dims[d];
            for (int64_t o = 0; o < int64_t(got.size()); ++o) {
              int64_t base = (o / inner) * dims[a] * inner + o % inner;
              std::vector<double> line;
              for (int64_t k = 0; k < dims[a]; ++k)
                line.push_back(x->getDouble(base + k * inner));
              CHECK(got[o] ==
                    referenceArg(line, std::string(op) == "ArgMax", last != 0));
            }
          }
  }
}

TEST_CASE("ArgMax and ArgMin: ONNX's examples, defaults, empty tensors") {
  // onnx's ArgMax docs: [[2, 1], [3, 10]] over axis 1 with keepdims.
  auto x = TensorData::fromInts(TensorType(DType::I32, {2, 2}), {2, 1, 3, 10});
  CHECK(runOnX("i32[2,2]", "%y = ArgMax(%x) {axis = 1} : i64[2,1]", x)
            ->getInts() == std::vector<int64_t>{0, 1});
  // The defaults: axis 0, keepdims 1, the first of equals.
  auto ties = doubles(TensorType(DType::F32, {2, 2}), {2, 2, 2, 10});
  CHECK(runOnX("f32[2,2]", "%y = ArgMin(%x) : i64[1,2]", ties)->getInts() ==
        std::vector<int64_t>{0, 0});
  CHECK(runOnX("f32[2,2]", "%y = ArgMin(%x) {select_last_index = 1} : i64[1,2]",
               ties)
            ->getInts() == std::vector<int64_t>{1, 0});
  // An empty result needs no element of the axis; an axis of size 1 is
  // index 0 everywhere.
  auto empty = doubles(TensorType(DType::F64, {0, 3}), {});
  CHECK(runOnX("f64[0,3]", "%y = ArgMax(%x) {axis = 1} : i64[0,1]", empty)
            ->getNumElements() == 0);
  auto column = doubles(TensorType(DType::F64, {3, 1}), {5, -1, 7});
  CHECK(runOnX("f64[3,1]", "%y = ArgMax(%x) {axis = -1, keepdims = 0} : i64[3]",
               column)
            ->getInts() == std::vector<int64_t>{0, 0, 0});
  // An empty axis with a non-empty result has no answer.
  CHECK(runError(R"(graph @g(%x: f64[2,0]) {
    %y = ArgMax(%x) {axis = 1} : i64[2,1]
    return %y })",
                 {doubles(TensorType(DType::F64, {2, 0}), {})})
            .find("ArgMax '%y': reduces over an empty axis of f64[2,0] (the "
                  "index of the extreme of nothing is undefined)") !=
        std::string::npos);
}

TEST_CASE("ArgMax and ArgMin shape inference names what is wrong") {
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %y = ArgMax(%x) {axis = 2} : i64[2,1]
    return %y })")
            .find("attribute 'axis'") != std::string::npos);
  CHECK(inferError(R"(graph @g(%x: bool[2,3]) {
    %y = ArgMax(%x) : i64[1,3]
    return %y })") == "ArgMax '%y': operand 0 (%x) must have a numeric "
                      "dtype, got bool[2,3]");
  CHECK(inferError(R"(graph @g(%x: f32[]) {
    %y = ArgMin(%x) : i64[]
    return %y })")
            .find("rank") != std::string::npos);
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %y = ArgMin(%x) {select_last_index = 2} : i64[1,3]
    return %y })") == "ArgMin '%y': attribute 'select_last_index' is 2, "
                      "expected 0 or 1");
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %y = ArgMax(%x) {axis = 1, keepdims = 0} : i64[2,1]
    return %y })")
            .find("i64[2]") != std::string::npos);
}

namespace {

/// TopK of one line by repeated selection, a reference written apart from
/// the kernel's sort: K times the best element not taken yet, scanning in
/// index order and keeping the first of equals; NaN above every number.
std::vector<int64_t> referenceTopK(const std::vector<double> &line, int64_t k,
                                   bool largest) {
  auto beats = [&](double a, double b) {
    if (std::isnan(a) || std::isnan(b))
      return largest ? std::isnan(a) && !std::isnan(b)
                     : std::isnan(b) && !std::isnan(a);
    return largest ? a > b : a < b;
  };
  std::vector<bool> taken(line.size(), false);
  std::vector<int64_t> chosen;
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (size_t i = 0; i < line.size(); ++i)
      if (!taken[i] && (best < 0 || beats(line[i], line[best])))
        best = int64_t(i);
    taken[best] = true;
    chosen.push_back(best);
  }
  return chosen;
}

/// Runs %y, %i of \p text on \p x and \p k; \returns both results.
std::vector<TensorDataPtr> runTopK(const std::string &text, TensorDataPtr x) {
  Case c = parse(text);
  std::vector<TensorDataPtr> operands = operandData(*c.node, {std::move(x)});
  auto serial = runWith(*c.node, operands, onePool());
  auto parallel = runWith(*c.node, operands, fourPool());
  REQUIRE(serial.size() == 2);
  REQUIRE(parallel.size() == 2);
  CHECK(serial[0]->getBytes() == parallel[0]->getBytes());
  CHECK(serial[1]->getBytes() == parallel[1]->getBytes());
  return serial;
}

} // namespace

TEST_CASE("TopK: ONNX's example, and a reference on every axis and dtype") {
  // onnx's TopK docs: the 3 largest of each row of 0..11 as [3, 4].
  std::vector<double> counting(12);
  std::iota(counting.begin(), counting.end(), 0.0);
  auto example = runTopK(R"(graph @g(%x: f32[3,4]) {
    %k = Constant() {value = dense<i64[1]: [3]>} : i64[1]
    %y, %i = TopK(%x, %k) {axis = 1} : f32[3,3], i64[3,3]
    return %y, %i })",
                         doubles(TensorType(DType::F32, {3, 4}), counting));
  CHECK(valuesOf(*example[0]) ==
        std::vector<double>{3, 2, 1, 7, 6, 5, 11, 10, 9});
  CHECK(example[1]->getInts() ==
        std::vector<int64_t>{3, 2, 1, 3, 2, 1, 3, 2, 1});

  Rng rng(42);
  INFO("seed 42");
  std::uniform_int_distribution<int> small(0, 3);
  std::vector<int64_t> dims = {3, 4, 5};
  double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char *dtypeName : {"f64", "f32", "i64", "i8"}) {
    DType dtype = *parseDType(dtypeName);
    std::vector<double> values(60);
    for (double &v : values)
      v = small(rng);
    if (isFloat(dtype)) {
      values[3] = nan;
      values[17] = nan;
      values[18] = nan;
      values[40] = -0.0;
    }
    auto x = doubles(TensorType(dtype, dims), values);
    for (int64_t axis = 0; axis < 3; ++axis)
      for (int largest : {0, 1})
        for (int64_t k : {int64_t(0), int64_t(1), dims[axis] - 1, dims[axis]}) {
          std::vector<int64_t> outDims = dims;
          outDims[axis] = k;
          std::string text =
              "graph @g(%x: " + std::string(dtypeName) + "[3,4,5]) {\n" +
              "  %k = Constant() {value = dense<i64[1]: [" + std::to_string(k) +
              "]>} : i64[1]\n" +
              "  %y, %i = TopK(%x, %k) {axis = " + std::to_string(axis) +
              ", largest = " + std::to_string(largest) +
              "} : " + TensorType(dtype, outDims).str() + ", " +
              TensorType(DType::I64, outDims).str() + "\n  return %y, %i }";
          INFO(text);
          auto y = runTopK(text, x);
          int64_t inner = 1;
          for (int64_t d = axis + 1; d < 3; ++d)
            inner *= dims[d];
          int64_t lines = 60 / dims[axis];
          for (int64_t line = 0; line < lines; ++line) {
            int64_t o = line / inner, i = line % inner;
            std::vector<double> in;
            for (int64_t j = 0; j < dims[axis]; ++j)
              in.push_back(x->getDouble((o * dims[axis] + j) * inner + i));
            std::vector<int64_t> want = referenceTopK(in, k, largest != 0);
            for (int64_t j = 0; j < k; ++j) {
              int64_t at = (o * k + j) * inner + i;
              CHECK(y[1]->getInts()[at] == want[j]);
              double got = y[0]->getDouble(at), expected = in[want[j]];
              CHECK((got == expected ||
                     (std::isnan(got) && std::isnan(expected))));
              CHECK(std::signbit(got) == std::signbit(expected));
            }
          }
        }
  }
}

TEST_CASE("TopK shape inference and run-time K name what is wrong") {
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %k = Constant() {value = dense<i64[1]: [4]>} : i64[1]
    %y, %i = TopK(%x, %k) : f32[2,4], i64[2,4]
    return %y })") == "TopK '%y': K 4 is outside [0, 3], the dim of axis 1 "
                      "of f32[2,3]");
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %k = Constant() {value = dense<i32[1]: [2]>} : i32[1]
    %y, %i = TopK(%x, %k) : f32[2,2], i64[2,2]
    return %y })")
            .find("dtype i64") != std::string::npos);
  CHECK(inferError(R"(graph @g(%x: f32[2,3]) {
    %k = Constant() {value = dense<i64[1]: [2]>} : i64[1]
    %y, %i = TopK(%x, %k) {largest = 2} : f32[2,2], i64[2,2]
    return %y })") == "TopK '%y': attribute 'largest' is 2, expected 0 or 1");
  CHECK(inferError(R"(graph @g(%x: bool[2,3]) {
    %k = Constant() {value = dense<i64[1]: [2]>} : i64[1]
    %y, %i = TopK(%x, %k) : bool[2,2], i64[2,2]
    return %y })")
            .find("numeric dtype") != std::string::npos);
  // K known only at run time is checked against the results' type there.
  CHECK(runError(R"(graph @g(%x: f64[2,3], %k: i64[1]) {
    %y, %i = TopK(%x, %k) : f64[2,2], i64[2,2]
    return %y })",
                 {doubles(TensorType(DType::F64, {2, 3}), {1, 2, 3, 4, 5, 6}),
                  TensorData::fromInts(TensorType(DType::I64, {1}), {3})}) ==
        "run: TopK '%y': K is 3, but the node's results have 2 along the "
        "axis");
}
