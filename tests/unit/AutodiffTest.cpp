//===- tests/unit/AutodiffTest.cpp - Gradients against finite differences ===//
//
// Every gradient rule is checked on a small f64 graph: the case's single
// output y gets the loss ReduceSum(y * R) with R a fixed random tensor, so
// every element of y matters; autodiff's weight gradients, run on the CPU
// backend, are compared element by element with central differences
// (step h = 1e-6 * max(1, |w|)). Tolerance: |fd - ad| <= 1e-6 * |ad| + 1e-8.
// The absolute floor covers the difference quotient's roundoff, about
// eps * |terms of the loss| / h ~ 1e-10 for these sizes, with margin.
//
//===----------------------------------------------------------------------===//
#include "driver/RunDriver.h"
#include "frontends/bert/BertBuilder.h"
#include "frontends/bert/BertConfig.h"
#include "frontends/onnx/Einsum.h"
#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "runtime/Backends.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace remat;
using namespace remat::ir;

namespace {

constexpr uint64_t kSeed = 20240611;
const std::string kModelsDir = std::string(REMAT_TEST_DIR) + "/../models";

std::unique_ptr<Graph> parseOk(llvm::StringRef text) {
  auto graph = parseGraph(text, "<test>");
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  llvm::Error err = verify(**graph);
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  return std::move(*graph);
}

/// Replaces the outputs of \p graph with loss = ReduceSum(y * R).
void addLoss(Graph &graph, uint64_t seed) {
  REQUIRE(graph.getOutputs().size() == 1);
  Value *y = graph.getOutputs()[0];
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> r(y->getType().getNumElements());
  for (double &v : r)
    v = dist(rng);
  Builder builder(graph);
  Value *rv = builder.createConstant(
      TensorData::fromDoubles(y->getType(), r), "R");
  auto prod = builder.createValue(OpKind::Mul, {y, rv});
  REQUIRE(bool(prod));
  AttrList attrs;
  attrs.set("keepdims", int64_t(0));
  auto loss = builder.createValue(OpKind::ReduceSum, {*prod}, attrs, "loss");
  REQUIRE(bool(loss));
  graph.removeOutput(0);
  graph.addOutput(*loss);
}

llvm::Expected<bool> runAutodiff(Graph &graph, llvm::StringRef options = "",
                                 llvm::raw_ostream *diag = nullptr) {
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  passes::PassManager pm;
  if (diag)
    pm.setDiagnosticStream(diag);
  std::string pipeline = "autodiff";
  if (!options.empty())
    pipeline += ("{" + options + "}").str();
  if (auto err = passes::parsePassPipeline(pipeline, registry, pm))
    return std::move(err);
  return pm.run(graph);
}

std::unique_ptr<runtime::Executable> compileOk(const Graph &graph) {
  auto backend = runtime::createBackend("cpu");
  REQUIRE(bool(backend));
  runtime::CompileOptions options;
  options.numThreads = 1;
  auto exe = (*backend)->compile(graph, options);
  REQUIRE_MESSAGE(bool(exe), errorToString(exe.takeError()));
  return std::move(*exe);
}

std::vector<runtime::OwnedTensor> runOk(runtime::Executable &exe,
                                        const std::vector<runtime::OwnedTensor> &in) {
  std::vector<runtime::Tensor> views;
  for (const auto &t : in)
    views.push_back(t.view());
  auto result = exe.run(views);
  REQUIRE_MESSAGE(bool(result), errorToString(result.takeError()));
  return std::move(result->outputs);
}

double lossOf(runtime::Executable &exe,
              const std::vector<runtime::OwnedTensor> &in) {
  auto out = runOk(exe, in);
  return out[0].toData()->getDouble(0);
}

/// One weight element to check.
struct Probe {
  unsigned input;
  int64_t element;
};

/// Runs autodiff on a copy of \p forward (whose output is the loss) and
/// compares the gradients at \p probes (every weight element when empty)
/// with central differences. \returns the number of elements compared.
int checkAgainstFD(const Graph &forward, std::vector<runtime::OwnedTensor> inputs,
                   const std::string &label, std::vector<Probe> probes = {},
                   double rtol = 1e-6, double atol = 1e-8) {
  std::unique_ptr<Graph> train = forward.clone();
  auto changed = runAutodiff(*train);
  REQUIRE_MESSAGE(bool(changed), label << ": "
                                       << errorToString(changed.takeError()));
  auto trainExe = compileOk(*train);
  auto fwdExe = compileOk(forward);
  auto grads = runOk(*trainExe, inputs);

  // Outputs: the loss, then one gradient per weight in input order.
  std::vector<int> gradIndex(forward.getNumInputs(), -1);
  unsigned next = 1;
  for (unsigned i = 0; i < forward.getNumInputs(); ++i) {
    Value *in = forward.getInput(i);
    if (!in->isWeight())
      continue;
    REQUIRE_MESSAGE(next < train->getOutputs().size(),
                    label << ": no gradient for " << in->getName().str());
    CHECK(train->getOutputs()[next]->getName() == in->getName().str() + "_grad");
    gradIndex[i] = next++;
  }
  CHECK(train->getOutputs().size() == next);
  CHECK(std::abs(grads[0].toData()->getDouble(0) - lossOf(*fwdExe, inputs)) <=
        1e-12 * std::max(1.0, std::abs(grads[0].toData()->getDouble(0))));

  if (probes.empty())
    for (unsigned i = 0; i < forward.getNumInputs(); ++i)
      if (gradIndex[i] >= 0)
        for (int64_t e = 0; e < inputs[i].getType().getNumElements(); ++e)
          probes.push_back({i, e});
  int compared = 0;
  for (const Probe &p : probes) {
    auto *data = static_cast<double *>(inputs[p.input].getData());
    double saved = data[p.element];
    double h = 1e-6 * std::max(1.0, std::abs(saved));
    data[p.element] = saved + h;
    double plus = lossOf(*fwdExe, inputs);
    data[p.element] = saved - h;
    double minus = lossOf(*fwdExe, inputs);
    data[p.element] = saved;
    double fd = (plus - minus) / (2 * h);
    double ad = grads[gradIndex[p.input]].toData()->getDouble(p.element);
    CHECK_MESSAGE(std::abs(fd - ad) <= rtol * std::abs(ad) + atol,
                  label << " (seed " << kSeed << "): d loss / d "
                        << forward.getInput(p.input)->getName().str() << "["
                        << p.element << "] autodiff " << ad << " fd " << fd);
    ++compared;
  }
  return compared;
}

/// Uniform inputs in [lo, hi] for every f64 input of \p graph.
std::vector<runtime::OwnedTensor> uniformInputs(const Graph &graph,
                                                uint64_t seed, double lo,
                                                double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<runtime::OwnedTensor> inputs;
  for (Value *input : graph.getInputs()) {
    REQUIRE(input->getType().getDType() == DType::F64);
    runtime::OwnedTensor t(input->getType());
    auto *d = static_cast<double *>(t.getData());
    for (int64_t i = 0; i < input->getType().getNumElements(); ++i)
      d[i] = dist(rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

struct RuleCase {
  const char *name;
  const char *rir;
  /// Inputs are uniform in [lo, hi].
  double lo = -1, hi = 1;
};

// clang-format off
const RuleCase kCases[] = {
  {"add", R"(graph @g(%a: f64[2,3] weight, %b: f64[2,3] weight) {
    %y = Add(%a, %b) : f64[2,3]
    return %y })"},
  {"add broadcast both", R"(graph @g(%a: f64[2,1,3] weight, %b: f64[4,1] weight) {
    %y = Add(%a, %b) : f64[2,4,3]
    return %y })"},
  {"sub broadcast", R"(graph @g(%a: f64[2,3] weight, %b: f64[1,3] weight) {
    %y = Sub(%a, %b) : f64[2,3]
    return %y })"},
  {"mul broadcast", R"(graph @g(%a: f64[2,3] weight, %b: f64[2,1] weight) {
    %y = Mul(%a, %b) : f64[2,3]
    return %y })"},
  {"mul scalar", R"(graph @g(%a: f64[2,3] weight, %b: f64[] weight) {
    %y = Mul(%a, %b) : f64[2,3]
    return %y })"},
  {"div broadcast", R"(graph @g(%a: f64[2,3] weight, %b: f64[3] weight) {
    %y = Div(%a, %b) : f64[2,3]
    return %y })", 0.5, 2},
  {"pow broadcast", R"(graph @g(%a: f64[2,3] weight, %b: f64[3] weight) {
    %y = Pow(%a, %b) : f64[2,3]
    return %y })", 0.5, 2},
  {"pow constant exponent", R"(graph @g(%a: f64[2,3] weight) {
    %two = Constant() {value = dense<f64[]: 2.0>} : f64[]
    %y = Pow(%a, %two) : f64[2,3]
    return %y })"},
  {"sqrt", R"(graph @g(%a: f64[2,3] weight) {
    %y = Sqrt(%a) : f64[2,3]
    return %y })", 0.5, 2},
  {"erf", R"(graph @g(%a: f64[2,3] weight) {
    %y = Erf(%a) : f64[2,3]
    return %y })"},
  {"tanh", R"(graph @g(%a: f64[2,3] weight) {
    %y = Tanh(%a) : f64[2,3]
    return %y })"},
  {"relu", R"(graph @g(%a: f64[2,3] weight) {
    %y = Relu(%a) : f64[2,3]
    return %y })"},
  {"sigmoid", R"(graph @g(%a: f64[2,3] weight) {
    %y = Sigmoid(%a) : f64[2,3]
    return %y })"},
  {"exp", R"(graph @g(%a: f64[2,3] weight) {
    %y = Exp(%a) : f64[2,3]
    return %y })"},
  {"log", R"(graph @g(%a: f64[2,3] weight) {
    %y = Log(%a) : f64[2,3]
    return %y })", 0.5, 2},
  {"neg", R"(graph @g(%a: f64[2,3] weight) {
    %y = Neg(%a) : f64[2,3]
    return %y })"},
  {"identity and cast", R"(graph @g(%a: f64[2,3] weight) {
    %i = Identity(%a) : f64[2,3]
    %y = Cast(%i) {to = 11} : f64[2,3]
    return %y })"},
  {"where broadcast", R"(graph @g(%a: f64[2,3] weight, %b: f64[3] weight) {
    %c = Constant() {value = dense<bool[2,3]: [true, false, true, false, false, true]>} : bool[2,3]
    %y = Where(%c, %a, %b) : f64[2,3]
    return %y })"},
  {"max broadcast", R"(graph @g(%a: f64[2,3] weight, %b: f64[3] weight, %c: f64[2,1] weight) {
    %y = Max(%a, %b, %c) : f64[2,3]
    return %y })"},
  {"several uses", R"(graph @g(%a: f64[2,3] weight) {
    %m = Mul(%a, %a) : f64[2,3]
    %e = Exp(%a) : f64[2,3]
    %y = Add(%m, %e) : f64[2,3]
    return %y })"},
  {"matmul", R"(graph @g(%a: f64[2,3] weight, %b: f64[3,4] weight) {
    %y = MatMul(%a, %b) : f64[2,4]
    return %y })"},
  {"matmul batched broadcast", R"(graph @g(%a: f64[2,1,2,3] weight, %b: f64[3,3,2] weight) {
    %y = MatMul(%a, %b) : f64[2,3,2,2]
    return %y })"},
  {"matmul linear on batched rows", R"(graph @g(%a: f64[2,3,4] weight, %b: f64[4,5] weight) {
    %y = MatMul(%a, %b) : f64[2,3,5]
    return %y })"},
  {"matmul batched vector right", R"(graph @g(%a: f64[2,2,3,4] weight, %b: f64[4] weight) {
    %y = MatMul(%a, %b) : f64[2,2,3]
    return %y })"},
  {"matmul vector left", R"(graph @g(%a: f64[3] weight, %b: f64[2,3,4] weight) {
    %y = MatMul(%a, %b) : f64[2,4]
    return %y })"},
  {"matmul vector right", R"(graph @g(%a: f64[2,3] weight, %b: f64[3] weight) {
    %y = MatMul(%a, %b) : f64[2]
    return %y })"},
  {"gemm", R"(graph @g(%a: f64[2,3] weight, %b: f64[3,4] weight, %c: f64[4] weight) {
    %y = Gemm(%a, %b, %c) : f64[2,4]
    return %y })"},
  {"gemm transA transB alpha beta", R"(graph @g(%a: f64[3,2] weight, %b: f64[4,3] weight, %c: f64[2,1] weight) {
    %y = Gemm(%a, %b, %c) {alpha = 0.5, beta = 2.0, transA = 1, transB = 1} : f64[2,4]
    return %y })"},
  {"gemm transB no C", R"(graph @g(%a: f64[2,3] weight, %b: f64[4,3] weight) {
    %y = Gemm(%a, %b) {transB = 1} : f64[2,4]
    return %y })"},
  {"gemm transA scalar C", R"(graph @g(%a: f64[3,2] weight, %b: f64[3,4] weight, %c: f64[] weight) {
    %y = Gemm(%a, %b, %c) {transA = 1, alpha = 1.5} : f64[2,4]
    return %y })"},
  {"softmax", R"(graph @g(%a: f64[2,3,4] weight) {
    %y = Softmax(%a) {axis = 1} : f64[2,3,4]
    return %y })"},
  {"logsoftmax", R"(graph @g(%a: f64[2,3,4] weight) {
    %y = LogSoftmax(%a) : f64[2,3,4]
    return %y })"},
  {"layernorm", R"(graph @g(%x: f64[2,3,4] weight, %s: f64[4] weight, %b: f64[4] weight) {
    %y = LayerNormalization(%x, %s, %b) {epsilon = 0.001, stash_type = 11} : f64[2,3,4]
    return %y })"},
  {"layernorm axis 1 with stats", R"(graph @g(%x: f64[2,3,4] weight, %s: f64[3,4] weight) {
    %y, %mean = LayerNormalization(%x, %s) {axis = 1, epsilon = 0.001, stash_type = 11} : f64[2,3,4], f64[2,1,1]
    return %y })"},
  {"dropout", R"(graph @g(%x: f64[4,5] weight) {
    %ratio = Constant() {value = dense<f64[]: 0.3>} : f64[]
    %t = Constant() {value = dense<bool[]: true>} : bool[]
    %y, %mask = Dropout(%x, %ratio, %t) {seed = 5} : f64[4,5], bool[4,5]
    return %y })"},
  {"dropout no mask result", R"(graph @g(%x: f64[4,5] weight) {
    %ratio = Constant() {value = dense<f32[]: 0.5>} : f32[]
    %t = Constant() {value = dense<bool[]: true>} : bool[]
    %y = Dropout(%x, %ratio, %t) {seed = 9} : f64[4,5]
    return %y })"},
  {"dropout inference", R"(graph @g(%x: f64[4,5] weight) {
    %y = Dropout(%x) : f64[4,5]
    return %y })"},
  {"reducemean", R"(graph @g(%x: f64[2,3,4] weight) {
    %y = ReduceMean(%x) {axes = [1], keepdims = 0} : f64[2,4]
    return %y })"},
  {"reducemean all", R"(graph @g(%x: f64[2,3] weight) {
    %y = ReduceMean(%x) : f64[1,1]
    return %y })"},
  {"reducesum", R"(graph @g(%x: f64[2,3,4] weight) {
    %ax = Constant() {value = dense<i64[2]: [0, -1]>} : i64[2]
    %y = ReduceSum(%x, %ax) : f64[1,3,1]
    return %y })"},
  {"reducesum all", R"(graph @g(%x: f64[2,3] weight) {
    %y = ReduceSum(%x) {keepdims = 0} : f64[]
    return %y })"},
  {"reducemax", R"(graph @g(%x: f64[2,3,4] weight) {
    %y = ReduceMax(%x) {axes = [2], keepdims = 0} : f64[2,3]
    return %y })"},
  {"reshape transpose", R"(graph @g(%x: f64[2,3,4] weight) {
    %s = Constant() {value = dense<i64[2]: [6, -1]>} : i64[2]
    %r = Reshape(%x, %s) : f64[6,4]
    %y = Transpose(%r) {perm = [1, 0]} : f64[4,6]
    return %y })"},
  {"transpose 3d", R"(graph @g(%x: f64[2,3,4] weight) {
    %y = Transpose(%x) {perm = [2, 0, 1]} : f64[4,2,3]
    return %y })"},
  {"unsqueeze squeeze", R"(graph @g(%x: f64[2,3] weight) {
    %ax = Constant() {value = dense<i64[1]: [1]>} : i64[1]
    %u = Unsqueeze(%x, %ax) : f64[2,1,3]
    %e = Exp(%u) : f64[2,1,3]
    %y = Squeeze(%e, %ax) : f64[2,3]
    return %y })"},
  {"concat", R"(graph @g(%a: f64[2,1] weight, %b: f64[2,3] weight, %c: f64[2,2] weight) {
    %y = Concat(%a, %b, %c) {axis = 1} : f64[2,6]
    return %y })"},
  {"slice steps", R"(graph @g(%x: f64[4,6] weight) {
    %st = Constant() {value = dense<i64[2]: [1, -1]>} : i64[2]
    %en = Constant() {value = dense<i64[2]: [4, 0]>} : i64[2]
    %ax = Constant() {value = dense<i64[2]: [0, 1]>} : i64[2]
    %sp = Constant() {value = dense<i64[2]: [2, -2]>} : i64[2]
    %y = Slice(%x, %st, %en, %ax, %sp) : f64[2,3]
    return %y })"},
  {"slice plain", R"(graph @g(%x: f64[4,6] weight) {
    %st = Constant() {value = dense<i64[1]: [2]>} : i64[1]
    %en = Constant() {value = dense<i64[1]: [5]>} : i64[1]
    %y = Slice(%x, %st, %en) : f64[2,6]
    return %y })"},
  {"split one result unused", R"(graph @g(%x: f64[2,6] weight) {
    %sz = Constant() {value = dense<i64[3]: [1, 2, 3]>} : i64[3]
    %p, %q, %r = Split(%x, %sz) {axis = 1} : f64[2,1], f64[2,2], f64[2,3]
    %t = Tanh(%r) : f64[2,3]
    %y = Mul(%t, %p) : f64[2,3]
    return %y })"},
  {"expand", R"(graph @g(%x: f64[3,1] weight) {
    %s = Constant() {value = dense<i64[3]: [2, 3, 4]>} : i64[3]
    %y = Expand(%x, %s) : f64[2,3,4]
    return %y })"},
  {"gather axis 0 repeated", R"(graph @g(%x: f64[4,3] weight) {
    %i = Constant() {value = dense<i64[2,2]: [0, 2, 2, -1]>} : i64[2,2]
    %y = Gather(%x, %i) : f64[2,2,3]
    return %y })"},
  {"gather axis 1", R"(graph @g(%x: f64[2,4,3] weight) {
    %i = Constant() {value = dense<i32[3]: [3, 1, 3]>} : i32[3]
    %y = Gather(%x, %i) {axis = 1} : f64[2,3,3]
    return %y })"},
  {"sce mean ignore_index", R"(graph @g(%s: f64[5,4] weight) {
    %l = Constant() {value = dense<i64[5]: [1, -100, 3, 0, 3]>} : i64[5]
    %y = SoftmaxCrossEntropyLoss(%s, %l) {ignore_index = -100} : f64[]
    return %y })"},
  {"sce sum", R"(graph @g(%s: f64[5,4] weight) {
    %l = Constant() {value = dense<i64[5]: [1, 2, 3, 0, 3]>} : i64[5]
    %y = SoftmaxCrossEntropyLoss(%s, %l) {reduction = "sum"} : f64[]
    return %y })"},
  {"sce none 3d", R"(graph @g(%s: f64[2,4,3] weight) {
    %l = Constant() {value = dense<i64[2,3]: [1, 2, 3, 0, 3, 2]>} : i64[2,3]
    %y, %lp = SoftmaxCrossEntropyLoss(%s, %l) {reduction = "none"} : f64[2,3], f64[2,4,3]
    return %y })"},
  {"sce mean weights ignore_index", R"(graph @g(%s: f64[5,4] weight) {
    %l = Constant() {value = dense<i64[5]: [1, 2, 3, 2, 0]>} : i64[5]
    %w = Constant() {value = dense<f64[4]: [0.5, 1.0, 2.0, 1.5]>} : f64[4]
    %y = SoftmaxCrossEntropyLoss(%s, %l, %w) {ignore_index = 2} : f64[]
    return %y })"},
  // A weight several layers use (ALBERT's shared layer) gets one gradient,
  // the sum of its uses.
  {"shared weight across layers", R"(graph @g(%x: f64[2,3] weight, %w: f64[3,3] weight) {
    %h1 = MatMul(%x, %w) : f64[2,3]
    %a1 = Tanh(%h1) : f64[2,3]
    %h2 = MatMul(%a1, %w) : f64[2,3]
    %a2 = Tanh(%h2) : f64[2,3]
    %y = MatMul(%a2, %w) : f64[2,3]
    return %y })"},
  // Tied input and output embeddings: the table is gathered from and is the
  // (transposed) output projection.
  {"tied embeddings", R"(graph @g(%e: f64[5,3] weight) {
    %i = Constant() {value = dense<i64[4]: [1, 4, 1, 0]>} : i64[4]
    %h = Gather(%e, %i) : f64[4,3]
    %t = Tanh(%h) : f64[4,3]
    %et = Transpose(%e) {perm = [1, 0]} : f64[3,5]
    %y = MatMul(%t, %et) : f64[4,5]
    return %y })"},
  {"gelu", R"(graph @g(%x: f64[2,3] weight) {
    %y = remat.Gelu(%x) : f64[2,3]
    return %y })", -2, 2},
  {"gelu tanh", R"(graph @g(%x: f64[2,3] weight) {
    %y = remat.Gelu(%x) {approximate = "tanh"} : f64[2,3]
    return %y })", -2, 2},
  // The ops of issue 13.
  {"sin cos", R"(graph @g(%x: f64[2,3] weight) {
    %s = Sin(%x) : f64[2,3]
    %c = Cos(%x) : f64[2,3]
    %y = Mul(%s, %c) : f64[2,3]
    return %y })", -3, 3},
  {"reciprocal", R"(graph @g(%x: f64[2,3] weight) {
    %y = Reciprocal(%x) : f64[2,3]
    return %y })", 0.5, 2},
  {"abs", R"(graph @g(%x: f64[2,3] weight) {
    %y = Abs(%x) : f64[2,3]
    return %y })"},
  {"min broadcast", R"(graph @g(%a: f64[2,3] weight, %b: f64[3] weight, %c: f64[2,1] weight) {
    %y = Min(%a, %b, %c) : f64[2,3]
    return %y })"},
  {"trilu upper k", R"(graph @g(%x: f64[2,3,4] weight) {
    %k = Constant() {value = dense<i64[]: 1>} : i64[]
    %y = Trilu(%x, %k) : f64[2,3,4]
    return %y })"},
  {"trilu lower", R"(graph @g(%x: f64[3,3] weight) {
    %y = Trilu(%x) {upper = 0} : f64[3,3]
    return %y })"},
  {"cumsum", R"(graph @g(%x: f64[2,4] weight) {
    %a = Constant() {value = dense<i64[]: 1>} : i64[]
    %y = CumSum(%x, %a) : f64[2,4]
    return %y })"},
  {"cumsum exclusive reverse", R"(graph @g(%x: f64[3,2] weight) {
    %a = Constant() {value = dense<i32[]: 0>} : i32[]
    %y = CumSum(%x, %a) {exclusive = 1, reverse = 1} : f64[3,2]
    return %y })"},
  {"gatherelements repeated negative", R"(graph @g(%x: f64[3,4] weight) {
    %i = Constant() {value = dense<i64[2,4]: [0, 2, -1, 2, 1, 1, 0, -3]>} : i64[2,4]
    %y = GatherElements(%x, %i) : f64[2,4]
    return %y })"},
  {"gatherelements axis 1", R"(graph @g(%x: f64[2,3] weight) {
    %i = Constant() {value = dense<i32[2,2]: [2, 2, 0, 1]>} : i32[2,2]
    %y = GatherElements(%x, %i) {axis = 1} : f64[2,2]
    return %y })"},
  {"scatterelements none axis 1", R"(graph @g(%x: f64[3,4] weight, %u: f64[3,2] weight) {
    %i = Constant() {value = dense<i64[3,2]: [0, 3, 2, -1, 1, 0]>} : i64[3,2]
    %y = ScatterElements(%x, %i, %u) {axis = 1} : f64[3,4]
    return %y })"},
  {"scatterelements add repeated", R"(graph @g(%x: f64[3,2] weight, %u: f64[4,2] weight) {
    %i = Constant() {value = dense<i32[4,2]: [0, 2, 0, 2, 1, 0, -1, 2]>} : i32[4,2]
    %y = ScatterElements(%x, %i, %u) {reduction = "add"} : f64[3,2]
    return %y })"},
  {"scatterelements none run-time indices", R"(graph @g(%x: f64[2,3] weight, %u: f64[1,3] weight) {
    %z = Constant() {value = dense<f64[2,3]: [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]>} : f64[2,3]
    %m = Mul(%x, %z) : f64[2,3]
    %i = ArgMax(%z) {axis = 0, keepdims = 1} : i64[1,3]
    %s = ScatterElements(%m, %i, %u) : f64[2,3]
    %y = Mul(%s, %x) : f64[2,3]
    return %y })"},
  {"pad constant crop", R"(graph @g(%x: f64[3,4] weight, %v: f64[] weight) {
    %p = Constant() {value = dense<i64[4]: [1, -1, 0, 2]>} : i64[4]
    %y = Pad(%x, %p, %v) : f64[4,5]
    return %y })"},
  {"pad reflect axes", R"(graph @g(%x: f64[2,4] weight) {
    %p = Constant() {value = dense<i64[2]: [2, 3]>} : i64[2]
    %v = Constant() {value = dense<f64[]: 0.0>} : f64[]
    %a = Constant() {value = dense<i64[1]: [1]>} : i64[1]
    %y = Pad(%x, %p, %v, %a) {mode = "reflect"} : f64[2,9]
    return %y })"},
  {"pad edge", R"(graph @g(%x: f64[2,3] weight) {
    %p = Constant() {value = dense<i64[4]: [1, 0, 0, 2]>} : i64[4]
    %y = Pad(%x, %p) {mode = "edge"} : f64[3,5]
    return %y })"},
  {"conv patch embedding", R"(graph @g(%x: f64[2,3,4,4] weight, %w: f64[5,3,2,2] weight, %b: f64[5] weight) {
    %y = Conv(%x, %w, %b) {kernel_shape = [2, 2], strides = [2, 2]} : f64[2,5,2,2]
    return %y })"},
  {"conv strides pads dilations", R"(graph @g(%x: f64[1,2,7,6] weight, %w: f64[3,2,3,2] weight) {
    %y = Conv(%x, %w) {dilations = [1, 2], pads = [1, 0, 2, 1], strides = [2, 1]} : f64[1,3,4,5]
    return %y })"},
  // Group > 1: the gradient by X, and (issue 40) by W as a grouped Conv.
  {"conv groups same upper 1d", R"(graph @g(%x: f64[2,4,7] weight) {
    %w = Constant() {value = dense<f64[2,2,3]: [0.5, -1.0, 0.25, 2.0, 1.5, -0.5, 1.0, 0.75, -2.0, 0.5, 1.25, -1.5]>} : f64[2,2,3]
    %y = Conv(%x, %w) {auto_pad = "SAME_UPPER", group = 2, strides = [2]} : f64[2,2,4]
    return %y })"},
  {"conv groups weights 1d", R"(graph @g(%x: f64[2,4,7] weight, %w: f64[6,2,3] weight) {
    %y = Conv(%x, %w) {auto_pad = "SAME_UPPER", group = 2, strides = [2]} : f64[2,6,4]
    return %y })"},
  // ConvBERT's span-based dynamic convolution: a depthwise Conv1d (group ==
  // channels, one filter per channel) padded to keep the length.
  {"conv depthwise 1d", R"(graph @g(%x: f64[2,3,8] weight, %w: f64[3,1,3] weight, %b: f64[3] weight) {
    %y = Conv(%x, %w, %b) {group = 3, pads = [1, 1]} : f64[2,3,8]
    return %y })"},
  {"conv groups strides pads dilations 2d", R"(graph @g(%x: f64[1,4,7,6] weight, %w: f64[6,2,3,2] weight) {
    %y = Conv(%x, %w) {dilations = [1, 2], group = 2, pads = [1, 0, 2, 1], strides = [2, 1]} : f64[1,6,4,5]
    return %y })"},
  // The ops of issue 40. Clip's gradient passes inside the bounds; Ceil's
  // is zero (its result acts as a constant).
  {"clip", R"(graph @g(%x: f64[3,4] weight) {
    %lo = Constant() {value = dense<f64[]: -0.5>} : f64[]
    %hi = Constant() {value = dense<f64[1]: [0.4]>} : f64[1]
    %y = Clip(%x, %lo, %hi) : f64[3,4]
    return %y })"},
  {"clip min only", R"(graph @g(%x: f64[2,3] weight) {
    %lo = Constant() {value = dense<f64[]: 0.1>} : f64[]
    %y = Clip(%x, %lo) : f64[2,3]
    return %y })"},
  {"ceil", R"(graph @g(%x: f64[2,3] weight) {
    %c = Ceil(%x) : f64[2,3]
    %y = Mul(%c, %x) : f64[2,3]
    return %y })", -3, 3},
  {"tile", R"(graph @g(%x: f64[2,1,3] weight) {
    %r = Constant() {value = dense<i64[3]: [2, 3, 1]>} : i64[3]
    %y = Tile(%x, %r) : f64[4,3,3]
    return %y })"},
  {"tile once", R"(graph @g(%x: f64[2,3] weight) {
    %r = Constant() {value = dense<i64[2]: [1, 1]>} : i64[2]
    %t = Tile(%x, %r) : f64[2,3]
    %y = Tanh(%t) : f64[2,3]
    return %y })"},
  // More of issue 40: Softplus's gradient is sigmoid(x); Floor's is zero.
  // ArgMax's i64 result carries none, whether it indexes by a weight's
  // values or by integer data (sequence classification pools the last
  // non-pad token: ArgMax over input_ids == pad).
  {"softplus", R"(graph @g(%x: f64[3,4] weight) {
    %y = Softplus(%x) : f64[3,4]
    return %y })", -6, 6},
  {"floor", R"(graph @g(%x: f64[2,3] weight) {
    %c = Floor(%x) : f64[2,3]
    %y = Mul(%c, %x) : f64[2,3]
    return %y })", -3, 3},
  {"argmax of a weight indexes it", R"(graph @g(%x: f64[2,4,3] weight) {
    %m = ReduceMax(%x) {axes = [2]} : f64[2,4,1]
    %i = ArgMax(%m) {axis = 1} : i64[2,1,1]
    %shape = Constant() {value = dense<i64[3]: [2, 1, 3]>} : i64[3]
    %ix = Expand(%i, %shape) : i64[2,1,3]
    %y = GatherElements(%x, %ix) {axis = 1} : f64[2,1,3]
    return %y })"},
  {"argmax over integer data indexes a weight", R"(graph @g(%x: f64[2,4] weight) {
    %ids = Constant() {value = dense<i64[2,4]: [5, 3, 0, 0, 7, 8, 9, 0]>} : i64[2,4]
    %pad = Constant() {value = dense<i64[]: 0>} : i64[]
    %eq = Equal(%ids, %pad) : bool[2,4]
    %ci = Cast(%eq) {to = 6} : i32[2,4]
    %first = ArgMax(%ci) {axis = -1} : i64[2,1]
    %least = ArgMin(%ci) {axis = -1, select_last_index = 1} : i64[2,1]
    %a = GatherElements(%x, %first) {axis = 1} : f64[2,1]
    %b = GatherElements(%x, %least) {axis = 1} : f64[2,1]
    %t = Tanh(%a) : f64[2,1]
    %y = Mul(%t, %b) : f64[2,1]
    return %y })"},
  // TopK's values take the gradient at the chosen positions (MoE routers
  // weigh experts by them); its indices carry none.
  {"topk", R"(graph @g(%x: f64[3,5] weight) {
    %k = Constant() {value = dense<i64[1]: [2]>} : i64[1]
    %v, %i = TopK(%x, %k) : f64[3,2], i64[3,2]
    %s = Softmax(%v) {axis = -1} : f64[3,2]
    %y = Mul(%s, %v) : f64[3,2]
    return %y })"},
  {"topk smallest on axis 0", R"(graph @g(%x: f64[4,3] weight) {
    %k = Constant() {value = dense<i64[]: 3>} : i64[]
    %v, %i = TopK(%x, %k) {axis = 0, largest = 0} : f64[3,3], i64[3,3]
    %y = Tanh(%v) : f64[3,3]
    return %y })"},
  // Empty tensors (Phi-3 with rotary on the whole head): the part of x
  // that gets no rotary embedding is a Slice of zero elements, concatenated
  // back; its gradient is empty too.
  {"empty slice concat", R"(graph @g(%x: f64[2,2,4] weight) {
    %s0 = Constant() {value = dense<i64[1]: [0]>} : i64[1]
    %s4 = Constant() {value = dense<i64[1]: [4]>} : i64[1]
    %end = Constant() {value = dense<i64[1]: [9223372036854775807]>} : i64[1]
    %ax = Constant() {value = dense<i64[1]: [-1]>} : i64[1]
    %rot = Slice(%x, %s0, %s4, %ax) : f64[2,2,4]
    %pass = Slice(%x, %s4, %end, %ax) : f64[2,2,0]
    %t = Tanh(%rot) : f64[2,2,4]
    %e = Exp(%pass) : f64[2,2,0]
    %y = Concat(%t, %e) {axis = -1} : f64[2,2,4]
    return %y })"},
  {"empty tile", R"(graph @g(%x: f64[2,3] weight) {
    %r = Constant() {value = dense<i64[2]: [0, 1]>} : i64[2]
    %t = Tile(%x, %r) : f64[0,3]
    %s = ReduceSum(%t) {keepdims = 0} : f64[]
    %y = Add(%x, %s) : f64[2,3]
    return %y })"},
  // Pooling (issue 40: Canine, Funnel): MaxPool's gradient goes to each
  // window's maximum (random inputs have no ties), AveragePool's spreads
  // dy / count; pads, strides, dilations, ceil_mode and count_include_pad.
  {"maxpool 1d pads ceil_mode", R"(graph @g(%x: f64[2,3,10] weight) {
    %y = MaxPool(%x) {ceil_mode = 1, kernel_shape = [3], pads = [1, 1], strides = [2]} : f64[2,3,6]
    return %y })"},
  {"maxpool 2d overlapping dilated", R"(graph @g(%x: f64[1,2,6,5] weight) {
    %y = MaxPool(%x) {dilations = [2, 1], kernel_shape = [2, 2], pads = [0, 1, 1, 0], strides = [1, 2]} : f64[1,2,5,3]
    return %y })"},
  {"averagepool 2d pads ceil_mode", R"(graph @g(%x: f64[1,2,5,5] weight) {
    %y = AveragePool(%x) {ceil_mode = 1, kernel_shape = [2, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f64[1,2,3,3]
    return %y })"},
  {"averagepool count_include_pad", R"(graph @g(%x: f64[1,2,5,5] weight) {
    %y = AveragePool(%x) {count_include_pad = 1, kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 1]} : f64[1,2,3,5]
    return %y })"},
  {"averagepool funnel", R"(graph @g(%x: f64[2,1,7,4] weight) {
    %y = AveragePool(%x) {ceil_mode = 1, count_include_pad = 1, kernel_shape = [2, 1], strides = [2, 1]} : f64[2,1,4,4]
    return %y })"},
  // Acos inside (-1, 1) (Yoso); EyeLike's gradient is zero (XLNet).
  {"acos", R"(graph @g(%x: f64[3,4] weight) {
    %y = Acos(%x) : f64[3,4]
    return %y })", -0.9, 0.9},
  {"eyelike", R"(graph @g(%x: f64[3,4] weight) {
    %e = EyeLike(%x) {k = 1} : f64[3,4]
    %y = Mul(%e, %x) : f64[3,4]
    return %y })"},
  // ReduceL2 (Yoso, NeoMME); ReduceLogSumExp (GraniteSWA).
  {"reducel2", R"(graph @g(%x: f64[2,3,4] weight) {
    %y = ReduceL2(%x) {axes = [1]} : f64[2,1,4]
    return %y })"},
  {"reducel2 all", R"(graph @g(%x: f64[2,3] weight) {
    %n = ReduceL2(%x) {keepdims = 0} : f64[]
    %y = Div(%x, %n) : f64[2,3]
    return %y })"},
  {"reducelogsumexp", R"(graph @g(%x: f64[2,3,4] weight) {
    %y = ReduceLogSumExp(%x) {axes = [-1]} : f64[2,3,1]
    return %y })", -4, 4},
  {"reducelogsumexp two axes", R"(graph @g(%x: f64[2,3,4] weight) {
    %y = ReduceLogSumExp(%x) {axes = [0, 2], keepdims = 0} : f64[3]
    return %y })", -4, 4},
};
// clang-format on

} // namespace

TEST_CASE("autodiff: every gradient rule matches central differences") {
  int total = 0;
  for (const RuleCase &c : kCases) {
    INFO("case '" << std::string(c.name) << "', seed " << kSeed);
    auto graph = parseOk(c.rir);
    addLoss(*graph, kSeed);
    auto inputs = uniformInputs(*graph, kSeed, c.lo, c.hi);
    total += checkAgainstFD(*graph, std::move(inputs), c.name);
  }
  CHECK(total > 400);
}

TEST_CASE("autodiff: lowered Einsums match central differences") {
  // The importer lowers Einsum to Expand, ReduceSum, Transpose, Reshape and
  // MatMul (frontends/onnx/Einsum.h); their rules give its gradient.
  struct EinsumCase {
    const char *equation;
    std::vector<std::vector<int64_t>> dims;
  };
  const EinsumCase cases[] = {
      {"bind,bjnd->bnij", {{2, 3, 2, 4}, {2, 5, 2, 4}}},
      {"...qhd,...khd->...hqk", {{2, 1, 3, 2, 4}, {3, 5, 2, 4}}},
      {"ij,jk,kl->li", {{2, 3}, {3, 4}, {4, 2}}},
      {"ibnd,hnd->ibh", {{3, 1, 2, 4}, {5, 2, 4}}},
  };
  for (const EinsumCase &c : cases) {
    INFO("equation '" << std::string(c.equation) << "', seed " << kSeed);
    Graph graph("einsum");
    std::vector<Value *> operands;
    for (size_t i = 0; i < c.dims.size(); ++i)
      operands.push_back(graph.addInput("x" + std::to_string(i),
                                        TensorType(DType::F64, c.dims[i]),
                                        /*isWeight=*/true));
    auto spec = onnx_frontend::parseEinsum(c.equation, c.dims);
    REQUIRE_MESSAGE(bool(spec), errorToString(spec.takeError()));
    Builder builder(graph);
    auto node = [&](OpKind op, llvm::ArrayRef<Value *> ins, AttrList attrs) {
      return builder.createValue(op, ins, attrs);
    };
    auto ints = [&](llvm::ArrayRef<int64_t> values) {
      return builder.createConstant(TensorData::fromInts(
          TensorType(DType::I64, {int64_t(values.size())}), values));
    };
    auto y = onnx_frontend::emitEinsum(*spec, operands, node, ints);
    REQUIRE_MESSAGE(bool(y), errorToString(y.takeError()));
    graph.addOutput(*y);
    addLoss(graph, kSeed);
    auto inputs = uniformInputs(graph, kSeed, -1, 1);
    CHECK(checkAgainstFD(graph, std::move(inputs), c.equation) >= 26);
  }
}

TEST_CASE("autodiff: outputs are the loss then gradients in weight order") {
  auto graph = parseOk(R"(graph @g(%x: f64[2] , %b: f64[2] weight, %a: f64[2] weight) {
    %m = Mul(%x, %a) : f64[2]
    %y = Add(%m, %b) : f64[2]
    %loss = ReduceSum(%y) {keepdims = 0} : f64[]
    %e = Exp(%y) : f64[2]
    return %e, %loss })");
  auto changed = runAutodiff(*graph);
  REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
  auto outs = graph->getOutputs();
  REQUIRE(outs.size() == 3);
  CHECK(outs[0]->getName() == "loss");
  CHECK(outs[1]->getName() == "b_grad");
  CHECK(outs[2]->getName() == "a_grad");
  for (const Node &node : graph->getNodes())
    if (node.getStage() == Stage::Backward)
      CHECK(node.getOpInfo().domain.empty());
}

TEST_CASE("autodiff: errors") {
  auto expectError = [](llvm::StringRef rir, llvm::StringRef options,
                        llvm::StringRef message) {
    auto graph = parseOk(rir);
    auto changed = runAutodiff(*graph, options);
    REQUIRE(!changed);
    std::string text = errorToString(changed.takeError());
    INFO(text);
    CHECK(text.find(message.str()) != std::string::npos);
  };
  const char *noScalar = R"(graph @g(%a: f64[2] weight) {
    %y = Exp(%a) : f64[2]
    return %y })";
  expectError(noScalar, "", "graph has no scalar float output to use as the "
                            "loss; name one with autodiff{loss=NAME}");
  const char *two = R"(graph @g(%a: f64[2] weight) {
    %l1 = ReduceSum(%a) {keepdims = 0} : f64[]
    %l2 = ReduceMax(%a) {keepdims = 0} : f64[]
    return %l1, %l2 })";
  expectError(two, "", "graph has several scalar float outputs ('l1', 'l2'); "
                       "choose the loss with autodiff{loss=NAME}");
  expectError(two, "loss=l3", "loss 'l3' is not an output of the graph");
  {
    auto graph = parseOk(two);
    auto changed = runAutodiff(*graph, "loss=l2");
    REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
    CHECK(graph->getOutputs()[0]->getName() == "l2");
  }
  expectError(R"(graph @g(%a: f64[2] weight, %x: f64[2]) {
    %l = ReduceSum(%x) {keepdims = 0} : f64[]
    %z = Exp(%a) : f64[2]
    return %l, %z })",
              "", "no weight reaches the loss 'l'");
  expectError(R"(graph @g(%a: f64[4] weight) {
    %s = Mod(%a, %a) {fmod = 1} : f64[4]
    %l = ReduceSum(%s) {keepdims = 0} : f64[]
    return %l })",
              "", "op Mod has no gradient rule, but it is on a path from a "
                  "weight to the loss 'l'");
  expectError(R"(graph @g(%a: f64[4] weight) {
    %i = Constant() {value = dense<i64[2]: [0, 1]>} : i64[2]
    %u = Constant() {value = dense<f64[2]: [1.0, 2.0]>} : f64[2]
    %s = ScatterElements(%a, %i, %u) {reduction = "mul"} : f64[4]
    %l = ReduceSum(%s) {keepdims = 0} : f64[]
    return %l })",
              "", "ScatterElements '%s': autodiff supports reduction \"none\" "
                  "and \"add\", not \"mul\"");
  expectError(R"(graph @g(%a: f64[2,4] weight, %u: f64[2,2] weight) {
    %i = Constant() {value = dense<i64[2,2]: [0, 3, 1, -3]>} : i64[2,2]
    %s = ScatterElements(%a, %i, %u) {axis = 1} : f64[2,4]
    %l = ReduceSum(%s) {keepdims = 0} : f64[]
    return %l })",
              "", "ScatterElements '%s': duplicate indices under reduction "
                  "\"none\" (ONNX leaves which update lands undefined), so "
                  "the gradient is undefined");
  expectError(R"(graph @g(%a: f64[2] weight) {
    %l = ReduceSum(%a) {keepdims = 0} : f64[]
    %a_grad = Exp(%a) : f64[2] grad(%a)
    return %l, %a_grad })",
              "", "graph already has gradient outputs ('a_grad')");
}

TEST_CASE("autodiff: a Dropout mask depends only on the seed") {
  const char *rir = R"(graph @g(%x: f64[64]) {
    %ratio = Constant() {value = dense<f64[]: 0.5>} : f64[]
    %t = Constant() {value = dense<bool[]: true>} : bool[]
    %y1, %m1 = Dropout(%x, %ratio, %t) {seed = 7} : f64[64], bool[64]
    %y2, %m2 = Dropout(%x, %ratio, %t) {seed = 7} : f64[64], bool[64]
    %y3, %m3 = Dropout(%x, %ratio, %t) {seed = 8} : f64[64], bool[64]
    return %m1, %m2, %m3 })";
  auto graph = parseOk(rir);
  auto exe = compileOk(*graph);
  auto inputs = uniformInputs(*graph, kSeed, -1, 1);
  auto first = runOk(*exe, inputs);
  auto second = runOk(*exe, inputs);
  auto bytes = [](const runtime::OwnedTensor &t) {
    std::shared_ptr<TensorData> data = t.toData();
    return std::vector<uint8_t>(data->getBytes().begin(),
                                data->getBytes().end());
  };
  CHECK(bytes(first[0]) == bytes(first[1]));  // Same seed, same node shape.
  CHECK(bytes(first[0]) == bytes(second[0])); // Two runs.
  CHECK(bytes(first[0]) != bytes(first[2]));  // Another seed.
}

namespace {

/// Changes every f32 in \p graph to f64: value types, constants, weight
/// data, Cast targets and LayerNormalization stash types.
void convertToF64(Graph &graph) {
  auto convertType = [](Value *v) {
    if (v->getType().getDType() == DType::F32)
      v->setType(v->getType().withDType(DType::F64));
  };
  auto convertData = [](const TensorDataPtr &data) -> TensorDataPtr {
    if (!data || data->getType().getDType() != DType::F32)
      return data;
    std::vector<double> values(data->getNumElements());
    for (int64_t i = 0; i < data->getNumElements(); ++i)
      values[i] = data->getDouble(i);
    return TensorData::fromDoubles(data->getType().withDType(DType::F64),
                                   values);
  };
  for (Value *input : graph.getInputs()) {
    convertType(input);
    input->setData(convertData(input->getData()));
  }
  for (Node &node : graph.getNodes()) {
    for (Value *result : node.getResults())
      convertType(result);
    AttrList attrs = node.getAttrs();
    for (const auto &[name, value] : node.getAttrs().entries())
      if (auto *tensor = std::get_if<TensorDataPtr>(&value))
        attrs.set(name, convertData(*tensor));
    if (node.getOp() == OpKind::Cast &&
        attrs.getInt("to") == onnxCode(DType::F32))
      attrs.set("to", int64_t(onnxCode(DType::F64)));
    if (node.getOp() == OpKind::LayerNormalization)
      attrs.set("stash_type", int64_t(onnxCode(DType::F64)));
    node.setAttrs(attrs);
  }
}

std::unique_ptr<Graph> bertTinyF64() {
  auto config = bert::loadBertConfig(kModelsDir + "/bert-tiny.json");
  REQUIRE_MESSAGE(bool(config), errorToString(config.takeError()));
  config->batch = 2;
  config->seq = 8;
  auto graph = bert::buildBert(*config);
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  convertToF64(**graph);
  llvm::Error err = verify(**graph);
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  return std::move(*graph);
}

} // namespace

TEST_CASE("autodiff: bert-tiny in f64 matches central differences") {
  auto graph = bertTinyF64();
  // Keep only the loss as output (the pooler is checked below).
  while (graph->getOutputs().size() > 1)
    graph->removeOutput(1);
  auto made = driver::makeInputs(*graph, {}, kSeed);
  REQUIRE_MESSAGE(bool(made), errorToString(made.takeError()));
  std::vector<runtime::OwnedTensor> inputs = std::move(*made);
  // Probe 24 weight elements, seeded, spread over all weights.
  std::mt19937_64 rng(kSeed);
  std::vector<unsigned> weights;
  for (unsigned i = 0; i < graph->getNumInputs(); ++i)
    if (graph->getInput(i)->isWeight() &&
        !graph->getInput(i)->getName().startswith("bert.pooler"))
      weights.push_back(i);
  std::vector<Probe> probes;
  for (int k = 0; k < 24; ++k) {
    unsigned input = weights[rng() % weights.size()];
    int64_t n = graph->getInput(input)->getType().getNumElements();
    probes.push_back({input, int64_t(rng() % n)});
  }
  // Rebuild the forward graph without the pooler inputs.
  std::vector<runtime::OwnedTensor> kept;
  std::vector<Probe> keptProbes;
  std::vector<int> newIndex(graph->getNumInputs(), -1);
  std::vector<Value *> pooler;
  for (unsigned i = 0; i < graph->getNumInputs(); ++i) {
    if (graph->getInput(i)->getName().startswith("bert.pooler")) {
      pooler.push_back(graph->getInput(i));
      continue;
    }
    newIndex[i] = kept.size();
    kept.push_back(std::move(inputs[i]));
  }
  // Remove the pooler nodes and inputs from the forward graph.
  std::vector<Node *> nodes;
  for (Node &node : graph->getNodes())
    nodes.push_back(&node);
  for (Node *node : llvm::reverse(nodes))
    if (!node->hasUsedResults())
      graph->eraseNode(node);
  for (Value *v : pooler)
    graph->eraseInput(v);
  for (Probe p : probes)
    keptProbes.push_back({unsigned(newIndex[p.input]), p.element});
  int compared = checkAgainstFD(*graph, std::move(kept), "bert-tiny f64",
                                keptProbes, 1e-6, 1e-8);
  CHECK(compared == 24);
}

TEST_CASE("autodiff: unused weights on bert-tiny (pooler)") {
  const std::string warnW =
      "warning: weight 'bert.pooler.dense.weight' does not reach the loss "
      "'loss' and gets no gradient";
  {
    auto graph = bertTinyF64();
    std::string diag;
    llvm::raw_string_ostream os(diag);
    auto changed = runAutodiff(*graph, "", &os);
    REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
    os.flush();
    CHECK(diag.find(warnW) != std::string::npos);
    CHECK(diag.find("'bert.pooler.dense.bias'") != std::string::npos);
    CHECK(graph->lookup("bert.pooler.dense.weight") != nullptr);
    CHECK(graph->lookup("bert.pooler.dense.weight_grad") == nullptr);
    CHECK(graph->getOutputs()[0]->getName() == "loss");
    CHECK(graph->lookup("bert.embeddings.word_embeddings.weight_grad") != nullptr);
  }
  {
    auto graph = bertTinyF64();
    auto changed = runAutodiff(*graph, "unused-weights=error");
    REQUIRE(!changed);
    std::string text = errorToString(changed.takeError());
    CHECK(text.find("weights that do not reach the loss 'loss': "
                    "'bert.pooler.dense.weight', 'bert.pooler.dense.bias'") !=
          std::string::npos);
  }
  {
    auto graph = bertTinyF64();
    std::string diag;
    llvm::raw_string_ostream os(diag);
    auto changed = runAutodiff(*graph, "unused-weights=drop", &os);
    REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
    os.flush();
    CHECK(diag.find("note: dropped weight 'bert.pooler.dense.weight'") !=
          std::string::npos);
    CHECK(graph->lookup("bert.pooler.dense.weight") == nullptr);
    CHECK(graph->lookup("bert.pooler.dense.bias") == nullptr);
    CHECK(graph->lookup("pooled_output") == nullptr);
  }
}

TEST_CASE("autodiff: frozen weights get no gradient") {
  // %a reaches the loss only through Mod, which has no gradient rule:
  // refused while %a trains, accepted once it is frozen. %d reaches nothing.
  const char *text = R"(graph @g(%a: f64[4] weight, %b: f64[4] weight,
                                 %c: f64[4] weight, %d: f64[4] weight) {
    %s = Mod(%a, %a) {fmod = 1} : f64[4]
    %t = Mul(%s, %b) : f64[4]
    %u = Mul(%t, %c) : f64[4]
    %l = ReduceSum(%u) {keepdims = 0} : f64[]
    %e = Exp(%d) : f64[4]
    return %l, %e })";
  auto run = [&](llvm::StringRef options, std::string &diag) {
    auto graph = parseOk(text);
    llvm::raw_string_ostream os(diag);
    auto changed = runAutodiff(*graph, options, &os);
    os.flush();
    if (!changed)
      diag = "error: " + errorToString(changed.takeError());
    return graph;
  };
  {
    std::string diag;
    run("", diag);
    CHECK(diag.find("op Mod has no gradient rule") != std::string::npos);
  }
  {
    std::string diag;
    auto graph = run("freeze=a", diag);
    INFO(diag);
    CHECK(diag.find("note: froze 1 weight (32 B): no gradient, no update") !=
          std::string::npos);
    CHECK(diag.find("warning: weight 'd' does not reach the loss") !=
          std::string::npos);
    CHECK(graph->lookup("a")->isWeight());
    CHECK(graph->lookup("a_grad") == nullptr);
    REQUIRE(graph->getOutputs().size() == 3);
    CHECK(graph->getOutputs()[1]->getName() == "b_grad");
    CHECK(graph->getOutputs()[2]->getName() == "c_grad");
  }
  {
    // A list with a glob; a frozen weight is not reported as unused.
    std::string diag;
    auto graph = run("freeze=a,[cd]", diag);
    INFO(diag);
    CHECK(diag.find("note: froze 3 weights (96 B)") != std::string::npos);
    CHECK(diag.find("warning") == std::string::npos);
    REQUIRE(graph->getOutputs().size() == 2);
    CHECK(graph->getOutputs()[1]->getName() == "b_grad");
  }
  auto expectError = [&](llvm::StringRef options, llvm::StringRef message) {
    std::string diag;
    run(options, diag);
    INFO(diag);
    CHECK(diag.find(("error: pass 'autodiff' failed: " + message).str()) !=
          std::string::npos);
  };
  expectError("freeze=*", "no weight reaches the loss 'l' (4 frozen by "
                          "option 'freeze')");
  expectError("freeze=a,x*", "option 'freeze': 'x*' names no weight of the "
                             "graph (its weights: 'a', 'b', 'c', ... (4 "
                             "weights))");
  expectError("freeze=a,,b", "option 'freeze': an entry of 'a,,b' is empty");
  expectError("freeze=[a", "option 'freeze': '[a' is not a glob");
}

TEST_CASE("autodiff: padding-idx rows get no gradient from their lookups") {
  // loss = sum(Gather(w, idx) * c1) + sum(w * c2): w's gradient is c1's rows
  // scattered at idx plus c2. With padding-idx=w=2 the lookups of row 2 add
  // nothing, so row 2 is c2's (the tied use still counts) and every other
  // row keeps its bits.
  const char *text = R"(graph @g(%w: f64[5,3] weight, %c1: f64[4,3],
                                 %c2: f64[5,3] weight) {
    %idx = Constant() {value = dense<i64[4]: [2, 0, 2, 4]>} : i64[4]
    %e = Gather(%w, %idx) {axis = 0} : f64[4,3]
    %p = Mul(%e, %c1) : f64[4,3]
    %q = Mul(%w, %c2) : f64[5,3]
    %s1 = ReduceSum(%p) {keepdims = 0} : f64[]
    %s2 = ReduceSum(%q) {keepdims = 0} : f64[]
    %l = Add(%s1, %s2) : f64[]
    return %l })";
  auto gradient = [&](llvm::StringRef options) {
    auto graph = parseOk(text);
    auto changed = runAutodiff(*graph, options);
    REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
    auto exe = compileOk(*graph);
    auto out = runOk(*exe, uniformInputs(*graph, kSeed, -1, 1));
    REQUIRE(out.size() == 3);
    auto data = out[1].toData();
    std::vector<double> values;
    for (int64_t i = 0; i < 15; ++i)
      values.push_back(data->getDouble(i));
    return values;
  };
  std::vector<double> plain = gradient(""), padded = gradient("padding-idx=w=2");
  auto inputs = uniformInputs(*parseOk(text), kSeed, -1, 1);
  const double *c2 = static_cast<const double *>(inputs[2].getData());
  for (int64_t i = 0; i < 15; ++i) {
    INFO("element " << i);
    if (i / 3 == 2) {
      CHECK(padded[i] == c2[i]);
      CHECK(plain[i] != c2[i]);
    } else {
      CHECK(padded[i] == plain[i]);
    }
  }

  auto expectError = [&](llvm::StringRef options, llvm::StringRef message) {
    auto graph = parseOk(text);
    auto changed = runAutodiff(*graph, options);
    REQUIRE(!changed);
    std::string error = errorToString(changed.takeError());
    INFO(error);
    CHECK(error.find(("pass 'autodiff' failed: option 'padding-idx': " +
                      message)
                         .str()) != std::string::npos);
  };
  expectError("padding-idx=w=5", "'w' has no row 5 (f64[5,3])");
  expectError("padding-idx=c1=0", "'c1' is not a weight of the graph");
  expectError("padding-idx=w=2 freeze=w",
              "'w' is frozen (option 'freeze'), so it gets no gradient");
  expectError("padding-idx=w", "'w' is not NAME=ROW with a row number >= 0");
  expectError("padding-idx=w=-1",
              "'w=-1' is not NAME=ROW with a row number >= 0");
  auto other = parseOk(R"(graph @g(%w: f64[5,3] weight) {
    %l = ReduceSum(%w) {keepdims = 0} : f64[]
    return %l })");
  auto changed = runAutodiff(*other, "padding-idx=w=1");
  REQUIRE(!changed);
  CHECK(errorToString(changed.takeError()) ==
        "pass 'autodiff' failed: option 'padding-idx': 'w' is not looked up "
        "by a Gather on axis 0");
}

TEST_CASE("autodiff: a Linear's weight gradient holds nothing batch times "
          "its size") {
  // MatMul of [batch, seq, k] rows by a shared [k, n] weight: the gradient
  // is one [k, rows] x [rows, n] product, not batched products summed.
  auto graph = parseOk(R"(graph @g(%x: f32[8,16,32], %w: f32[32,64] weight) {
    %y = MatMul(%x, %w) : f32[8,16,64]
    %l = ReduceSum(%y) {keepdims = 0} : f32[]
    return %l })");
  auto changed = runAutodiff(*graph);
  REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
  int64_t largest = 0;
  for (Node &node : graph->getNodes())
    if (node.getStage() == Stage::Backward)
      for (Value *result : node.getResults())
        largest = std::max(largest, result->getType().getNumElements());
  CHECK(largest == 8 * 16 * 64); // the output's gradient, not 8 x 32 x 64
  CHECK(graph->lookup("w_grad")->getType().str() == "f32[32,64]");
}
