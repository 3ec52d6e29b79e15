//===- tests/unit/CpuKernelsTest.cpp - The reference CPU kernels ----------===//
//
// Each case builds a one-node graph, selects its kernel and runs it on
// OwnedTensors. Ops that constant folding evaluates are run on random shapes
// (broadcasting included) on one and on four threads and through
// runtime::cpu::evaluateNode, the evaluator fold-constants computes with, and
// the three must agree bit for bit (their expected values are checked by
// hand in FoldConstantsTest.cpp). MatMul, Gemm, Softmax, LayerNormalization,
// the loss, ScatterElements, OneHot and Split are checked against references
// written here from the ONNX definitions (in double, within a tolerance, or
// bitwise where the reference performs the same operations in the same order).
// Dropout is checked for its properties. Random cases print their seed.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Evaluator.h"
#include "runtime/cpu/GemmProvider.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include "ir/Graph.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "runtime/DropoutMask.h"
#include "runtime/Tensor.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>

using namespace remat;
using namespace remat::ir;
using namespace remat::runtime;
using namespace remat::runtime::cpu;

namespace {

using Rng = std::mt19937_64;
using Dims = std::vector<int64_t>;

ThreadPoolParallelFor &onePool() {
  static ThreadPoolParallelFor pool(1);
  return pool;
}
ThreadPoolParallelFor &fourPool() {
  static ThreadPoolParallelFor pool(4);
  return pool;
}

std::string dimsText(llvm::ArrayRef<int64_t> dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (llvm::Twine(i ? "," : "") + llvm::Twine(dims[i])).str();
  return text + "]";
}

std::string number(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

//===----------------------------------------------------------------------===//
// Building and running one node
//===----------------------------------------------------------------------===//

/// An operand: its data, and whether the graph defines it by a Constant node
/// (so that shape inference can read it) or as a graph input.
struct Operand {
  TensorDataPtr data;
  bool constant = false;
};

Operand input(TensorDataPtr data) { return {std::move(data), false}; }
Operand constant(TensorDataPtr data) { return {std::move(data), true}; }

/// A graph holding one node under test, and the data of its operands.
struct OneNode {
  Graph graph{"kernel"};
  Node *node = nullptr;
  std::vector<TensorDataPtr> inputs;
  /// Set when shape inference rejected the node.
  std::string error;
};

/// Result names: %y, %y1, %y2, ...
std::vector<std::string> resultNames(unsigned count) {
  std::vector<std::string> names;
  for (unsigned i = 0; i < count; ++i)
    names.push_back(i == 0 ? "y" : ("y" + llvm::Twine(i)).str());
  return names;
}

/// Builds \p op over \p operands with \p numResults results whose types
/// come from shape inference (every shape-deciding operand must be
/// constant).
std::unique_ptr<OneNode> build(OpKind op, const std::vector<Operand> &operands,
                               unsigned numResults, AttrList attrs = {}) {
  auto one = std::make_unique<OneNode>();
  std::vector<Value *> values;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Operand &operand = operands[i];
    one->inputs.push_back(operand.data);
    if (!operand.constant) {
      values.push_back(one->graph.addInput("in" + std::to_string(i),
                                           operand.data->getType()));
      continue;
    }
    AttrList valueAttr;
    valueAttr.set("value", operand.data);
    values.push_back(one->graph
                         .createNode(OpKind::Constant, {},
                                     {operand.data->getType()},
                                     {"c" + std::to_string(i)}, valueAttr)
                         ->getResult(0));
  }
  std::vector<TensorType> placeholder(numResults, TensorType(DType::F32, {}));
  one->node = one->graph.createNode(op, values, placeholder,
                                    resultNames(numResults), std::move(attrs));
  auto inferred = inferTypes(*one->node);
  if (!inferred) {
    one->error = errorToString(inferred.takeError());
    return one;
  }
  for (unsigned i = 0; i < numResults; ++i) {
    REQUIRE_MESSAGE((*inferred)[i].shapeKnown,
                    "result " << i << " of " << one->node->describe()
                              << " has no inferred shape");
    one->node->getResult(i)->setType((*inferred)[i].type);
  }
  return one;
}

/// Builds \p op with explicitly declared result types (for cases whose
/// shapes inference cannot know, or which the test wants wrong).
std::unique_ptr<OneNode> buildDeclared(OpKind op,
                                       const std::vector<Operand> &operands,
                                       std::vector<TensorType> results,
                                       AttrList attrs = {}) {
  auto one = std::make_unique<OneNode>();
  std::vector<Value *> values;
  for (size_t i = 0; i < operands.size(); ++i) {
    one->inputs.push_back(operands[i].data);
    values.push_back(one->graph.addInput("in" + std::to_string(i),
                                         operands[i].data->getType()));
  }
  one->node = one->graph.createNode(
      op, values, results, resultNames(results.size()), std::move(attrs));
  return one;
}

struct Outcome {
  std::vector<OwnedTensor> outputs;
  /// "select: <message>" or "run: <message>" on failure.
  std::string error;
};

Outcome runNode(const Node &node, const std::vector<TensorDataPtr> &inputs,
                ParallelFor &parallel) {
  Outcome outcome;
  auto kernel = selectKernel(node);
  if (!kernel) {
    outcome.error = "select: " + errorToString(kernel.takeError());
    return outcome;
  }
  std::vector<OwnedTensor> owned;
  std::vector<Tensor> inViews, outViews;
  for (const TensorDataPtr &data : inputs)
    owned.push_back(OwnedTensor::fromData(*data));
  for (const OwnedTensor &tensor : owned)
    inViews.push_back(tensor.view());
  for (unsigned i = 0; i < node.getNumResults(); ++i)
    outcome.outputs.emplace_back(node.getResult(i)->getType());
  for (const OwnedTensor &tensor : outcome.outputs)
    outViews.push_back(tensor.view());
  KernelContext context{node, inViews, outViews, parallel};
  if (llvm::Error err = (*kernel)(context)) {
    outcome.outputs.clear();
    outcome.error = "run: " + errorToString(std::move(err));
  }
  return outcome;
}

Outcome runNode(const OneNode &one, ParallelFor &parallel = fourPool()) {
  REQUIRE_MESSAGE(one.error.empty(), one.error);
  return runNode(*one.node, one.inputs, parallel);
}

/// \returns the error of running \p one ("" when it succeeds).
std::string errorOf(const OneNode &one) {
  if (!one.error.empty())
    return "infer: " + one.error;
  return runNode(*one.node, one.inputs, onePool()).error;
}

//===----------------------------------------------------------------------===//
// Data and comparisons
//===----------------------------------------------------------------------===//

/// Random elements: floats uniform in [lo, hi), integers uniform in
/// [lo, hi], bools fair.
TensorDataPtr randomData(const TensorType &type, Rng &rng, double lo,
                         double hi) {
  auto data = std::make_shared<TensorData>(type);
  DType dtype = type.getDType();
  for (int64_t i = 0; i < data->getNumElements(); ++i) {
    if (dtype == DType::Bool) {
      data->setInt(i, rng() & 1);
    } else if (isFloat(dtype)) {
      data->setDouble(i, std::uniform_real_distribution<double>(lo, hi)(rng));
    } else {
      data->setInt(
          i, std::uniform_int_distribution<int64_t>(
                 static_cast<int64_t>(lo), static_cast<int64_t>(hi))(rng));
    }
  }
  return data;
}

TensorDataPtr ints(llvm::ArrayRef<int64_t> values, DType dtype = DType::I64) {
  return TensorData::fromInts(
      TensorType(dtype, {static_cast<int64_t>(values.size())}), values);
}
TensorDataPtr scalarOf(DType dtype, double value) {
  return TensorData::fromDoubles(TensorType(dtype, {}), {value});
}
TensorDataPtr doubles(TensorType type, llvm::ArrayRef<double> values) {
  return TensorData::fromDoubles(std::move(type), values);
}

/// \returns "" when \p got and \p want have the same type and bytes, else
/// the first difference.
std::string bitwiseDifference(const TensorData &got, const TensorData &want) {
  if (got.getType() != want.getType())
    return "type " + got.getType().str() + " vs " + want.getType().str();
  llvm::ArrayRef<uint8_t> a = got.getBytes(), b = want.getBytes();
  if (a == b)
    return "";
  unsigned size = dtypeSize(got.getType().getDType());
  for (int64_t i = 0; i < got.getNumElements(); ++i)
    if (std::memcmp(a.data() + i * size, b.data() + i * size, size) != 0)
      return "element " + std::to_string(i) + ": got " +
             number(got.getDouble(i)) + ", want " + number(want.getDouble(i));
  return "bytes differ";
}

/// \returns "" when every element of \p got is within atol + rtol * |want|
/// of \p want (NaN only where NaN is wanted), else the first miss.
std::string closeDifference(const TensorData &got,
                            const std::vector<double> &want, double rtol,
                            double atol) {
  if (got.getNumElements() != static_cast<int64_t>(want.size()))
    return "element count " + std::to_string(got.getNumElements()) + " vs " +
           std::to_string(want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.getDouble(i), w = want[i];
    bool ok = std::isnan(w)   ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok)
      return "element " + std::to_string(i) + ": got " + number(g) + ", want " +
             number(w);
  }
  return "";
}

/// Runs \p one on one and on four threads and through evaluateNode (what
/// constant folding computes) and checks that all three agree bit for bit.
/// \p what names the case.
void checkFoldsAsItRuns(const OneNode &one, const std::string &what) {
  INFO(what << " (" << one.node->describe() << ")");
  REQUIRE_MESSAGE(one.error.empty(), one.error);
  std::vector<const TensorData *> operands;
  for (const TensorDataPtr &data : one.inputs)
    operands.push_back(data.get());
  auto expected = evaluateNode(*one.node, operands);
  REQUIRE_MESSAGE(static_cast<bool>(expected),
                  "evaluateNode: " << errorToString(expected.takeError()));
  for (ParallelFor *pool : {static_cast<ParallelFor *>(&onePool()),
                            static_cast<ParallelFor *>(&fourPool())}) {
    Outcome outcome = runNode(*one.node, one.inputs, *pool);
    REQUIRE_MESSAGE(outcome.error.empty(), outcome.error);
    CHECK(bitwiseDifference(*outcome.outputs[0].toData(), *(*expected)[0]) ==
          "");
  }
}

/// Random dims of rank in [minRank, maxRank] with dims in [1, maxDim]
/// (sometimes 0 when \p allowEmpty).
Dims randomDims(Rng &rng, int minRank, int maxRank, int64_t maxDim,
                bool allowEmpty = false) {
  int rank = std::uniform_int_distribution<int>(minRank, maxRank)(rng);
  Dims dims;
  for (int i = 0; i < rank; ++i) {
    int64_t dim = std::uniform_int_distribution<int64_t>(1, maxDim)(rng);
    if (allowEmpty && rng() % 23 == 0)
      dim = 0;
    dims.push_back(dim);
  }
  return dims;
}

/// Dims that broadcast to \p out: some leading dims dropped, some set to 1.
Dims broadcastFrom(Rng &rng, const Dims &out) {
  size_t drop = out.empty() ? 0 : rng() % (out.size() + 1);
  if (rng() % 2)
    drop = 0;
  Dims dims(out.begin() + drop, out.end());
  for (int64_t &dim : dims)
    if (rng() % 3 == 0)
      dim = 1;
  return dims;
}

//===----------------------------------------------------------------------===//
// Counting threads
//===----------------------------------------------------------------------===//

/// A ParallelFor over a ThreadPoolParallelFor that records which threads
/// ran chunks, so a test can show that work really was split.
class RecordingParallelFor final : public ParallelFor {
public:
  explicit RecordingParallelFor(ThreadPoolParallelFor &pool) : pool_(pool) {}
  void run(int64_t count, int64_t grain,
           const std::function<void(int64_t, int64_t)> &body) override {
    pool_.run(count, grain, [&](int64_t begin, int64_t end) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        threads_.insert(std::this_thread::get_id());
        ++chunks_;
      }
      body(begin, end);
    });
  }
  unsigned getNumThreads() const override { return pool_.getNumThreads(); }
  size_t threadsSeen() const { return threads_.size(); }
  /// How many pieces the work was cut into (which thread ran each depends
  /// on timing: the pool's threads claim chunks as they come).
  size_t chunksSeen() const { return chunks_; }

private:
  ThreadPoolParallelFor &pool_;
  std::mutex mutex_;
  std::set<std::thread::id> threads_;
  size_t chunks_ = 0;
};

AttrList attrs(std::initializer_list<std::pair<const char *, AttrValue>> list) {
  AttrList result;
  for (const auto &[name, value] : list)
    result.set(name, value);
  return result;
}

} // namespace

//===----------------------------------------------------------------------===//
// Tensors and the thread pool
//===----------------------------------------------------------------------===//

TEST_CASE("OwnedTensor is aligned, zero-filled and round-trips TensorData") {
  OwnedTensor zeros(TensorType(DType::F32, {3, 5}));
  CHECK(reinterpret_cast<uintptr_t>(zeros.getData()) % 64 == 0);
  for (int i = 0; i < 15; ++i)
    CHECK(static_cast<float *>(zeros.getData())[i] == 0.0f);
  OwnedTensor empty(TensorType(DType::I64, {0, 4}));
  CHECK(empty.getData() != nullptr);
  CHECK(empty.toData()->getNumElements() == 0);

  auto data = doubles(TensorType(DType::F64, {2, 2}), {1.5, -2, 3, 4.25});
  OwnedTensor copy = OwnedTensor::fromData(*data);
  CHECK(copy.view().getType() == data->getType());
  CHECK(*copy.toData() == *data);
}

TEST_CASE("ThreadPoolParallelFor runs every index exactly once") {
  for (unsigned threads : {1u, 3u, 4u}) {
    ThreadPoolParallelFor pool(threads);
    CHECK(pool.getNumThreads() == threads);
    for (int64_t count : {0, 1, 7, 1000}) {
      for (int64_t grain : {1, 3, 100}) {
        std::vector<std::atomic<int>> hits(count);
        pool.run(count, grain, [&](int64_t begin, int64_t end) {
          CHECK(begin < end);
          for (int64_t i = begin; i < end; ++i)
            ++hits[i];
          // A nested run executes inline and still covers its range.
          std::atomic<int> inner{0};
          pool.run(10, 1, [&](int64_t b, int64_t e) { inner += int(e - b); });
          CHECK(inner == 10);
        });
        for (int64_t i = 0; i < count; ++i)
          CHECK_MESSAGE(hits[i] == 1, "threads " << threads << " count "
                                                 << count << " grain " << grain
                                                 << " index " << i);
      }
    }
  }
  ThreadPoolParallelFor defaultPool;
  CHECK(defaultPool.getNumThreads() ==
        std::max(1u, std::thread::hardware_concurrency()));
}

TEST_CASE("ThreadPoolParallelFor splits work over its threads") {
  ThreadPoolParallelFor pool(4);
  RecordingParallelFor recording(pool);
  // Each chunk waits until four chunks run at once, so no thread can take
  // two: all four threads must have joined (or the wait times out).
  std::mutex mutex;
  std::condition_variable allIn;
  int running = 0;
  bool timedOut = false;
  recording.run(4, 1, [&](int64_t, int64_t) {
    std::unique_lock<std::mutex> lock(mutex);
    ++running;
    allIn.notify_all();
    if (!allIn.wait_for(lock, std::chrono::seconds(30),
                        [&] { return running == 4; }))
      timedOut = true;
  });
  CHECK_FALSE(timedOut);
  CHECK(recording.threadsSeen() == 4);
  CHECK(recording.chunksSeen() == 4);
}

TEST_CASE("ThreadPoolParallelFor cuts a run into up to 4 chunks per thread") {
  ThreadPoolParallelFor pool(2);
  RecordingParallelFor recording(pool);
  recording.run(1000, 1, [](int64_t, int64_t) {});
  CHECK(recording.chunksSeen() == 8);
  RecordingParallelFor coarse(pool);
  coarse.run(1000, 400, [](int64_t, int64_t) {});
  CHECK(coarse.chunksSeen() == 3); // no chunk below the grain
}

//===----------------------------------------------------------------------===//
// Folding computes what the kernels compute at run time
//===----------------------------------------------------------------------===//

TEST_CASE("binary elementwise kernels fold as they run on broadcast shapes") {
  struct OpCase {
    OpKind op;
    std::vector<DType> dtypes;
  };
  const std::vector<DType> arithmetic = {DType::F32, DType::F64, DType::I64,
                                         DType::I32, DType::I8,  DType::U8};
  const std::vector<OpCase> cases = {
      {OpKind::Add, arithmetic},
      {OpKind::Sub, arithmetic},
      {OpKind::Mul, arithmetic},
      {OpKind::Div, arithmetic},
      {OpKind::Mod, arithmetic},
      {OpKind::Equal,
       {DType::F32, DType::F64, DType::I64, DType::I32, DType::Bool}},
      {OpKind::GreaterOrEqual,
       {DType::F32, DType::F64, DType::I64, DType::I32}},
      {OpKind::And, {DType::Bool}},
      {OpKind::Max, {DType::F32, DType::F64, DType::I64, DType::I32}},
      {OpKind::Pow, {DType::F32, DType::F64, DType::I64, DType::I32}},
  };
  uint64_t seed = 1000;
  for (const OpCase &opCase : cases) {
    for (DType dtype : opCase.dtypes) {
      for (int trial = 0; trial < 25; ++trial, ++seed) {
        Rng rng(seed);
        Dims out = randomDims(rng, 0, 4, trial < 20 ? 5 : 40,
                              /*allowEmpty=*/true);
        // Small integers keep Mul and Pow away from overflow (which wraps,
        // but is less readable when it fails).
        bool isInt = isInteger(dtype);
        double lo = isInt ? (dtype == DType::U8 ? 0 : -9) : -3;
        double hi = isInt ? 9 : 3;
        auto a =
            randomData(TensorType(dtype, broadcastFrom(rng, out)), rng, lo, hi);
        auto bType = TensorType(dtype, broadcastFrom(rng, out));
        TensorDataPtr b;
        AttrList attributes;
        std::vector<Operand> operands;
        if (opCase.op == OpKind::Div || opCase.op == OpKind::Mod) {
          auto divisor = randomData(bType, rng, isInt ? 1 : 0.5, hi);
          // Negative divisors too, but never 0.
          if (dtype != DType::U8)
            for (int64_t i = 0; i < divisor->getNumElements(); ++i)
              if (rng() % 2)
                std::const_pointer_cast<TensorData>(divisor)->setDouble(
                    i, -divisor->getDouble(i));
          b = divisor;
          if (opCase.op == OpKind::Mod)
            attributes.set("fmod", int64_t(isFloat(dtype) ? 1 : trial % 2));
        } else if (opCase.op == OpKind::Pow) {
          // Positive float bases; integer bases with small exponents.
          if (!isInt)
            a = randomData(a->getType(), rng, 0.1, 3);
          b = randomData(
              TensorType(trial % 2 ? DType::I64 : dtype, bType.getDims()), rng,
              isInt ? 0 : -2, isInt ? 4 : 2);
        } else {
          b = randomData(bType, rng, lo, hi);
        }
        operands = {input(a), input(b)};
        if (opCase.op == OpKind::Max && trial % 3 == 0)
          operands.push_back(input(randomData(
              TensorType(dtype, broadcastFrom(rng, out)), rng, lo, hi)));
        auto one = build(opCase.op, operands, 1, attributes);
        checkFoldsAsItRuns(*one, "seed " + std::to_string(seed) + " " +
                                     dtypeName(dtype).str() + " " +
                                     a->getType().str() + " op " +
                                     b->getType().str());
      }
    }
  }
}

TEST_CASE("Where and Max propagate NaN and broadcast, folded as run") {
  uint64_t seed = 5000;
  for (DType dtype :
       {DType::F32, DType::F64, DType::I64, DType::F16, DType::Bool}) {
    for (int trial = 0; trial < 20; ++trial, ++seed) {
      Rng rng(seed);
      Dims out = randomDims(rng, 0, 4, 6, /*allowEmpty=*/true);
      auto cond = randomData(TensorType(DType::Bool, broadcastFrom(rng, out)),
                             rng, 0, 1);
      auto x =
          randomData(TensorType(dtype, broadcastFrom(rng, out)), rng, -5, 5);
      auto y =
          randomData(TensorType(dtype, broadcastFrom(rng, out)), rng, -5, 5);
      auto one = build(OpKind::Where, {input(cond), input(x), input(y)}, 1);
      checkFoldsAsItRuns(*one, "Where seed " + std::to_string(seed));
    }
  }
  double nan = std::numeric_limits<double>::quiet_NaN();
  auto a = doubles(TensorType(DType::F32, {4}), {1, nan, 3, -1});
  auto b = doubles(TensorType(DType::F32, {4}), {nan, 2, 1, -2});
  auto one = build(OpKind::Max, {input(a), input(b)}, 1);
  checkFoldsAsItRuns(*one, "Max with NaN");
  Outcome outcome = runNode(*one);
  auto result = outcome.outputs[0].toData();
  CHECK(std::isnan(result->getDouble(0)));
  CHECK(std::isnan(result->getDouble(1)));
  CHECK(result->getDouble(2) == 3);
  CHECK(result->getDouble(3) == -1);
}

TEST_CASE("unary kernels fold as they run") {
  struct OpCase {
    OpKind op;
    double lo, hi;
    std::vector<DType> dtypes;
    AttrList attributes;
  };
  const std::vector<DType> floats = {DType::F32, DType::F64};
  const std::vector<OpCase> cases = {
      {OpKind::Sqrt, 0, 10, floats, {}},
      {OpKind::Erf, -3, 3, floats, {}},
      {OpKind::Tanh, -5, 5, floats, {}},
      {OpKind::Relu,
       -5,
       5,
       {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8},
       {}},
      {OpKind::Sigmoid, -20, 20, floats, {}},
      {OpKind::Exp, -20, 20, floats, {}},
      {OpKind::Log, 0.001, 100, floats, {}},
      {OpKind::Neg,
       -100,
       100,
       {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8},
       {}},
      {OpKind::Gelu, -6, 6, floats, {}},
      {OpKind::Gelu, -6, 6, floats,
       attrs({{"approximate", std::string("tanh")}})},
      {OpKind::Gelu, -6, 6, floats,
       attrs({{"approximate", std::string("none")}})},
  };
  uint64_t seed = 7000;
  for (const OpCase &opCase : cases)
    for (DType dtype : opCase.dtypes)
      for (int trial = 0; trial < 4; ++trial, ++seed) {
        Rng rng(seed);
        Dims dims = randomDims(rng, 0, 3, trial == 3 ? 70 : 6);
        auto x = randomData(TensorType(dtype, dims), rng, opCase.lo, opCase.hi);
        auto one = build(opCase.op, {input(x)}, 1, opCase.attributes);
        checkFoldsAsItRuns(*one, "seed " + std::to_string(seed));
      }
}

TEST_CASE("evaluateNode runs the kernel on constant data") {
  auto dataOf = [](const OneNode &one) {
    std::vector<const TensorData *> operands;
    for (const TensorDataPtr &data : one.inputs)
      operands.push_back(data.get());
    return operands;
  };
  auto x = doubles(TensorType(DType::F32, {2, 3}), {1, 2, 3, 4, 5, 6});
  // Shape reads only its operand's type: null data is fine.
  auto shape =
      build(OpKind::Shape, {input(x)}, 1, attrs({{"start", int64_t(1)}}));
  auto dims = evaluateNode(*shape->node, {nullptr});
  REQUIRE_MESSAGE(bool(dims), errorToString(dims.takeError()));
  CHECK((*dims)[0]->getInts() == std::vector<int64_t>{3});

  // Any op the CPU backend has, with every result; which ops fold is the
  // folding policy's business (passes/FoldingPolicy.h), not the kernels'.
  auto matmul = build(
      OpKind::MatMul,
      {input(x), input(doubles(TensorType(DType::F32, {3, 1}), {1, 0, -1}))},
      1);
  auto product = evaluateNode(*matmul->node, dataOf(*matmul));
  REQUIRE(bool(product));
  CHECK(closeDifference(*(*product)[0], {-2, -2}, 0, 0) == "");
  auto split = build(OpKind::Split, {input(x), constant(ints({1, 2}))}, 2,
                     attrs({{"axis", int64_t(1)}}));
  auto parts = evaluateNode(*split->node, dataOf(*split));
  REQUIRE(bool(parts));
  REQUIRE(parts->size() == 2);
  CHECK(closeDifference(*(*parts)[0], {1, 4}, 0, 0) == "");
  CHECK(closeDifference(*(*parts)[1], {2, 3, 5, 6}, 0, 0) == "");

  // Empty operands and results.
  auto empty = doubles(TensorType(DType::F32, {2, 0}), {});
  auto concat = build(OpKind::Concat, {input(empty), input(x), input(empty)}, 1,
                      attrs({{"axis", int64_t(1)}}));
  auto joined = evaluateNode(*concat->node, dataOf(*concat));
  REQUIRE(bool(joined));
  CHECK(bitwiseDifference(*(*joined)[0], *x) == "");
  auto sum = build(OpKind::Add, {input(empty), input(empty)}, 1);
  auto nothing = evaluateNode(*sum->node, dataOf(*sum));
  REQUIRE(bool(nothing));
  CHECK((*nothing)[0]->getType().str() == "f32[2,0]");

  // Errors name the node.
  auto add = build(OpKind::Add, {input(x), input(x)}, 1);
  auto missing = evaluateNode(*add->node, {x.get(), nullptr});
  REQUIRE_FALSE(bool(missing));
  CHECK(errorToString(missing.takeError()) ==
        "cannot evaluate Add '%y': operand 1 is not constant");
  auto wrong = evaluateNode(*add->node, {x.get(), empty.get()});
  REQUIRE_FALSE(bool(wrong));
  CHECK(errorToString(wrong.takeError()) ==
        "cannot evaluate Add '%y': operand 1 holds f32[2,0], not f32[2,3]");
  auto div = build(OpKind::Div, {input(ints({7, 8})), input(ints({1, 0}))}, 1);
  auto byZero = evaluateNode(*div->node, dataOf(*div));
  REQUIRE_FALSE(bool(byZero));
  CHECK(errorToString(byZero.takeError()) ==
        "Div '%y': integer division by zero (element 1 of operand 1 is 0)");
  auto half = doubles(TensorType(DType::F16, {2}), {1, 2});
  auto halfAdd = build(OpKind::Add, {input(half), input(half)}, 1);
  auto unsupported = evaluateNode(*halfAdd->node, dataOf(*halfAdd));
  REQUIRE_FALSE(bool(unsupported));
  CHECK(errorToString(unsupported.takeError()) ==
        "Add '%y': the cpu backend has no Add kernel for operands of dtype "
        "f16 (supported: f32, f64, i64, i32, i8, u8)");
  // The evaluator is makeCpuEvaluator()'s.
  auto viaFunction = makeCpuEvaluator()(*shape->node, {nullptr});
  REQUIRE(bool(viaFunction));
  CHECK((*viaFunction)[0]->getInts() == std::vector<int64_t>{3});
}

TEST_CASE("Gelu computes the erf form and the tanh approximation") {
  auto x = doubles(TensorType(DType::F64, {3}), {1.0, -0.5, 0.0});
  auto exact = build(OpKind::Gelu, {input(x)}, 1);
  auto result = runNode(*exact).outputs[0].toData();
  // 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715
  // x^3))), evaluated in Python double precision.
  CHECK(closeDifference(*result, {0.8413447460685429, -0.15426876936299344, 0},
                        1e-15, 0) == "");
  auto approx = build(OpKind::Gelu, {input(x)}, 1,
                      attrs({{"approximate", std::string("tanh")}}));
  result = runNode(*approx).outputs[0].toData();
  CHECK(closeDifference(*result, {0.8411919906082768, -0.15428599017485606, 0},
                        1e-15, 0) == "");
}

TEST_CASE("Cast folds as it runs between every pair of dtypes") {
  const DType all[] = {DType::F32,  DType::F64, DType::F16,
                       DType::BF16, DType::I64, DType::I32,
                       DType::I8,   DType::U8,  DType::Bool};
  // Values every dtype holds (fractions truncate toward zero).
  const std::vector<double> values = {0, 1, 2.5, 7.75, 100, 127, 0.25, 3};
  for (DType from : all)
    for (DType to : all) {
      std::vector<double> source = values;
      if (from == DType::Bool)
        source = {0, 1, 1, 0, 1, 0, 0, 1};
      auto x = doubles(TensorType(from, {8}), source);
      auto one = build(OpKind::Cast, {input(x)}, 1,
                       attrs({{"to", int64_t(onnxCode(to))}}));
      checkFoldsAsItRuns(*one, "cast " + dtypeName(from).str() + " -> " +
                                   dtypeName(to).str());
    }
  // Negative values and integer wrapping, where defined.
  for (DType from : {DType::F32, DType::F64, DType::I64, DType::I32})
    for (DType to :
         {DType::F32, DType::I64, DType::I32, DType::I8, DType::F16}) {
      auto x = doubles(TensorType(from, {4}), {-1, -2.75, -100, -128});
      auto one = build(OpKind::Cast, {input(x)}, 1,
                       attrs({{"to", int64_t(onnxCode(to))}}));
      checkFoldsAsItRuns(*one, "negative cast " + dtypeName(from).str() +
                                   " -> " + dtypeName(to).str());
    }
  auto wide = ints({300, -129, 255, 256}, DType::I64);
  for (DType to : {DType::I8, DType::U8, DType::I32}) {
    auto one = build(OpKind::Cast, {input(wide)}, 1,
                     attrs({{"to", int64_t(onnxCode(to))}}));
    checkFoldsAsItRuns(*one, "wrapping cast to " + dtypeName(to).str());
  }
}

TEST_CASE("Cast from float to integer saturates and maps NaN to 0") {
  double nan = std::numeric_limits<double>::quiet_NaN();
  auto x = doubles(TensorType(DType::F32, {6}),
                   {1e10, -1e10, nan, 300.5, -5.5, 1e30});
  auto toI32 = build(OpKind::Cast, {input(x)}, 1,
                     attrs({{"to", int64_t(onnxCode(DType::I32))}}));
  CHECK(
      runNode(*toI32).outputs[0].toData()->getInts() ==
      std::vector<int64_t>{2147483647, -2147483648LL, 0, 300, -5, 2147483647});
  auto toU8 = build(OpKind::Cast, {input(x)}, 1,
                    attrs({{"to", int64_t(onnxCode(DType::U8))}}));
  CHECK(runNode(*toU8).outputs[0].toData()->getInts() ==
        std::vector<int64_t>{255, 0, 0, 255, 0, 255});
  auto toI64 = build(OpKind::Cast, {input(x)}, 1,
                     attrs({{"to", int64_t(onnxCode(DType::I64))}}));
  CHECK(runNode(*toI64).outputs[0].toData()->getInts() ==
        std::vector<int64_t>{10000000000LL, -10000000000LL, 0, 300, -5,
                             std::numeric_limits<int64_t>::max()});
  auto toBool = build(OpKind::Cast, {input(x)}, 1,
                      attrs({{"to", int64_t(onnxCode(DType::Bool))}}));
  CHECK(runNode(*toBool).outputs[0].toData()->getInts() ==
        std::vector<int64_t>{1, 1, 1, 1, 1, 1});
}

TEST_CASE("reductions fold as they run") {
  uint64_t seed = 9000;
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax})
    for (DType dtype : {DType::F32, DType::F64, DType::I64, DType::I32})
      for (int trial = 0; trial < 30; ++trial, ++seed) {
        Rng rng(seed);
        Dims dims = randomDims(rng, 0, 5, trial < 25 ? 5 : 60);
        std::vector<int64_t> axes;
        for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
          if (rng() % 2)
            axes.push_back(rng() % 2 ? d
                                     : d - static_cast<int64_t>(dims.size()));
        std::shuffle(axes.begin(), axes.end(), rng);
        auto x = randomData(TensorType(dtype, dims), rng, -50, 50);
        if (dtype == DType::F32 && op == OpKind::ReduceMax && trial % 4 == 0 &&
            x->getNumElements() > 0)
          std::const_pointer_cast<TensorData>(x)->setDouble(
              rng() % x->getNumElements(), std::nan(""));
        int64_t keepDims = rng() % 2;
        AttrList attributes = attrs({{"keepdims", keepDims}});
        std::vector<Operand> operands = {input(x)};
        if (op == OpKind::ReduceSum) {
          if (axes.empty() && rng() % 2)
            attributes.set("noop_with_empty_axes", int64_t(1));
          if (!axes.empty() || rng() % 2)
            operands.push_back(constant(ints(axes)));
        } else if (!axes.empty()) {
          attributes.set("axes", axes);
        }
        auto one = build(op, operands, 1, attributes);
        checkFoldsAsItRuns(*one, "seed " + std::to_string(seed) + " dims " +
                                     dimsText(dims) + " axes " +
                                     dimsText(axes));
      }
}

TEST_CASE("ReduceSum over leading dims adds each column's rows in order") {
  // The kept-inner loop splits columns into chunks of 1024 halved down to
  // 128 while there are fewer than 6 tasks (runtime/cpu/Reductions.cpp,
  // keptChunkWidth): bias gradients of 768 and 3072 columns, a last chunk
  // narrower than the others, several outer rows. Each column must be its
  // rows summed in order, in float, at any thread count.
  struct Shape {
    Dims dims;
    std::vector<int64_t> axes;
  };
  const Shape shapes[] = {{{600, 768}, {0}},      {{37, 300}, {0}},
                          {{3, 5, 700}, {1}},     {{64, 3072}, {0}},
                          {{2, 9, 2500}, {0, 1}}, {{40, 1}, {0}}};
  uint64_t seed = 9500;
  for (const Shape &shape : shapes) {
    Rng rng(seed++);
    auto x = randomData(TensorType(DType::F32, shape.dims), rng, -50, 50);
    auto one = build(OpKind::ReduceSum, {input(x), constant(ints(shape.axes))},
                     1, attrs({{"keepdims", int64_t(0)}}));
    // Reduced dims lead or sit between kept ones: outer x reduced x inner.
    int64_t inner = shape.dims.back(), reduced = 1, outer = 1;
    for (size_t d = 0; d + 1 < shape.dims.size(); ++d)
      (llvm::is_contained(shape.axes, int64_t(d)) ? reduced : outer) *=
          shape.dims[d];
    std::vector<double> want(outer * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        float sum = 0.0f;
        for (int64_t r = 0; r < reduced; ++r)
          sum +=
              static_cast<float>(x->getDouble((o * reduced + r) * inner + j));
        want[o * inner + j] = sum;
      }
    for (ParallelFor *pool : {static_cast<ParallelFor *>(&onePool()),
                              static_cast<ParallelFor *>(&fourPool())}) {
      INFO("dims " << dimsText(shape.dims) << " axes " << dimsText(shape.axes)
                   << " threads " << pool->getNumThreads());
      Outcome outcome = runNode(*one, *pool);
      REQUIRE_MESSAGE(outcome.error.empty(), outcome.error);
      auto got = outcome.outputs[0].toData();
      REQUIRE(got->getNumElements() == outer * inner);
      int64_t wrong = 0;
      for (int64_t i = 0; i < outer * inner; ++i)
        wrong += got->getDouble(i) != want[i];
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("data-movement kernels fold as they run") {
  const DType dtypes[] = {DType::F32, DType::F64,  DType::I64,
                          DType::F16, DType::Bool, DType::I8};
  uint64_t seed = 12000;
  auto tag = [&](const std::string &what) {
    return what + " seed " + std::to_string(seed);
  };

  SUBCASE("Transpose, including the 4-D permutations of attention") {
    struct Fixed {
      Dims dims;
      std::vector<int64_t> perm;
    };
    const std::vector<Fixed> fixed = {
        {{2, 16, 12, 64}, {0, 2, 1, 3}},
        {{2, 12, 16, 64}, {0, 2, 1, 3}},
        {{2, 12, 64, 16}, {0, 1, 3, 2}},
        {{3, 40, 50}, {0, 2, 1}},
        {{33, 70}, {1, 0}},
        {{9, 1, 40}, {2, 1, 0}},
    };
    for (const Fixed &f : fixed) {
      Rng rng(++seed);
      auto x = randomData(TensorType(DType::F32, f.dims), rng, -1, 1);
      auto one =
          build(OpKind::Transpose, {input(x)}, 1, attrs({{"perm", f.perm}}));
      checkFoldsAsItRuns(*one, tag("transpose " + dimsText(f.dims)));
    }
    for (DType dtype : dtypes)
      for (int trial = 0; trial < 15; ++trial, ++seed) {
        Rng rng(seed);
        Dims dims = randomDims(rng, 1, 5, trial < 10 ? 5 : 20, true);
        std::vector<int64_t> perm(dims.size());
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        auto x = randomData(TensorType(dtype, dims), rng, -9, 9);
        AttrList attributes;
        if (trial % 5 != 0)
          attributes.set("perm", perm);
        auto one = build(OpKind::Transpose, {input(x)}, 1, attributes);
        checkFoldsAsItRuns(*one, tag("transpose " + dimsText(dims)));
      }
  }

  SUBCASE("Reshape, Squeeze, Unsqueeze, Identity") {
    for (DType dtype : dtypes) {
      Rng rng(++seed);
      auto x = randomData(TensorType(dtype, {2, 3, 4}), rng, -9, 9);
      checkFoldsAsItRuns(
          *build(OpKind::Reshape, {input(x), constant(ints({0, -1, 2}))}, 1),
          tag("reshape"));
      checkFoldsAsItRuns(
          *build(OpKind::Unsqueeze, {input(x), constant(ints({-1, 0}))}, 1),
          tag("unsqueeze"));
      checkFoldsAsItRuns(*build(OpKind::Identity, {input(x)}, 1),
                         tag("identity"));
      auto y = randomData(TensorType(dtype, {1, 3, 1, 2}), rng, -9, 9);
      checkFoldsAsItRuns(
          *build(OpKind::Squeeze, {input(y), constant(ints({2}))}, 1),
          tag("squeeze"));
      checkFoldsAsItRuns(*build(OpKind::Squeeze, {input(y)}, 1),
                         tag("squeeze all"));
    }
  }

  SUBCASE("Concat") {
    for (DType dtype : dtypes)
      for (int trial = 0; trial < 10; ++trial, ++seed) {
        Rng rng(seed);
        Dims dims = randomDims(rng, 1, 4, 5);
        int64_t axis = rng() % dims.size();
        std::vector<Operand> operands;
        for (int i = 0, n = 1 + rng() % 3; i < n; ++i) {
          Dims part = dims;
          part[axis] = rng() % 4;
          operands.push_back(
              input(randomData(TensorType(dtype, part), rng, -9, 9)));
        }
        auto one = build(
            OpKind::Concat, operands, 1,
            attrs({{"axis",
                    int64_t(rng() % 2 ? axis : axis - int64_t(dims.size()))}}));
        checkFoldsAsItRuns(*one, tag("concat"));
      }
  }

  SUBCASE("Slice with negative, clamped and reversed bounds") {
    for (DType dtype : dtypes)
      for (int trial = 0; trial < 20; ++trial, ++seed) {
        Rng rng(seed);
        Dims dims = randomDims(rng, 1, 4, 7, true);
        std::vector<int64_t> starts, ends, axes, steps;
        std::vector<int64_t> order(dims.size());
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        size_t count = 1 + rng() % dims.size();
        auto pick = [&](int64_t dim) -> int64_t {
          switch (rng() % 5) {
          case 0:
            return std::numeric_limits<int64_t>::max();
          case 1:
            return std::numeric_limits<int64_t>::min();
          default:
            return std::uniform_int_distribution<int64_t>(-dim - 2,
                                                          dim + 2)(rng);
          }
        };
        for (size_t i = 0; i < count; ++i) {
          int64_t axis = order[i];
          axes.push_back(rng() % 2 ? axis : axis - int64_t(dims.size()));
          starts.push_back(pick(dims[axis]));
          ends.push_back(pick(dims[axis]));
          int64_t step = 1 + rng() % 3;
          steps.push_back(rng() % 2 ? step : -step);
        }
        auto x = randomData(TensorType(dtype, dims), rng, -9, 9);
        std::vector<Operand> operands = {input(x), constant(ints(starts)),
                                         constant(ints(ends))};
        bool identityAxes = true;
        for (size_t i = 0; i < axes.size(); ++i)
          identityAxes &= axes[i] == int64_t(i);
        if (!identityAxes || trial % 2) {
          operands.push_back(constant(ints(axes)));
          operands.push_back(constant(ints(steps)));
        }
        auto one = build(OpKind::Slice, operands, 1);
        checkFoldsAsItRuns(
            *one, tag("slice " + dimsText(dims) + " starts " +
                      dimsText(starts) + " ends " + dimsText(ends) + " axes " +
                      dimsText(axes) + " steps " + dimsText(steps)));
      }
  }

  SUBCASE("Expand") {
    for (DType dtype : dtypes)
      for (int trial = 0; trial < 10; ++trial, ++seed) {
        Rng rng(seed);
        Dims out = randomDims(rng, 0, 4, 6);
        Dims in = broadcastFrom(rng, out);
        // The shape operand may itself broadcast against the input.
        Dims shape = out;
        for (size_t i = 0; i < shape.size(); ++i)
          if (i >= shape.size() - in.size() && rng() % 4 == 0)
            shape[i] = 1;
        auto x = randomData(TensorType(dtype, in), rng, -9, 9);
        auto one = build(OpKind::Expand, {input(x), constant(ints(shape))}, 1);
        checkFoldsAsItRuns(
            *one, tag("expand " + dimsText(in) + " to " + dimsText(shape)));
      }
  }

  SUBCASE("Gather with negative indices") {
    for (DType dtype : dtypes)
      for (DType indexType : {DType::I64, DType::I32})
        for (int trial = 0; trial < 8; ++trial, ++seed) {
          Rng rng(seed);
          Dims dims = randomDims(rng, 1, 4, 6);
          int64_t axis = rng() % dims.size();
          Dims indexDims = randomDims(rng, 0, 2, 4);
          auto indices = randomData(TensorType(indexType, indexDims), rng,
                                    -dims[axis], dims[axis] - 1);
          auto x = randomData(TensorType(dtype, dims), rng, -9, 9);
          auto one = build(OpKind::Gather, {input(x), input(indices)}, 1,
                           attrs({{"axis", axis}}));
          checkFoldsAsItRuns(*one, tag("gather"));
        }
  }

  SUBCASE("Shape, ConstantOfShape, Range, Constant") {
    Rng rng(++seed);
    auto x = randomData(TensorType(DType::F32, {2, 3, 5, 7}), rng, 0, 1);
    for (auto [start, end] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 4}, {1, 3}, {-2, -1}, {3, 1}, {-10, 10}}) {
      auto one = build(OpKind::Shape, {input(x)}, 1,
                       attrs({{"start", start}, {"end", end}}));
      checkFoldsAsItRuns(*one, "shape");
    }
    checkFoldsAsItRuns(
        *build(OpKind::ConstantOfShape, {constant(ints({2, 3}))}, 1),
        "constant of shape, default value");
    auto seven = TensorData::fromInts(TensorType(DType::I32, {1}), {7});
    checkFoldsAsItRuns(*build(OpKind::ConstantOfShape,
                              {constant(ints({4, 0, 2}))}, 1,
                              attrs({{"value", seven}})),
                       "constant of shape, empty");
    checkFoldsAsItRuns(*build(OpKind::ConstantOfShape, {constant(ints({3, 2}))},
                              1, attrs({{"value", seven}})),
                       "constant of shape, i32");
    struct RangeCase {
      DType dtype;
      double start, limit, delta;
    };
    for (const RangeCase &r : std::vector<RangeCase>{{DType::F32, 0, 1, 0.1},
                                                     {DType::F64, 5, -3, -0.7},
                                                     {DType::I64, -4, 11, 3},
                                                     {DType::I32, 10, 10, 1},
                                                     {DType::I32, 9, -9, -4}}) {
      auto one = build(OpKind::Range,
                       {constant(scalarOf(r.dtype, r.start)),
                        constant(scalarOf(r.dtype, r.limit)),
                        constant(scalarOf(r.dtype, r.delta))},
                       1);
      checkFoldsAsItRuns(*one, "range " + dtypeName(r.dtype).str());
    }
    // Constant in each of its forms.
    auto tensor = doubles(TensorType(DType::F64, {2}), {1.5, -2});
    for (AttrList form :
         {attrs({{"value", TensorDataPtr(tensor)}}),
          attrs({{"value_float", 2.5f}}), attrs({{"value_int", int64_t(-3)}}),
          attrs({{"value_floats", std::vector<float>{1, 2, 3}}}),
          attrs({{"value_ints", std::vector<int64_t>{4, 5}}})}) {
      auto one = build(OpKind::Constant, {}, 1, form);
      Outcome outcome = runNode(*one);
      REQUIRE(outcome.error == "");
      auto got = outcome.outputs[0].toData();
      std::vector<double> want =
          form.has("value")          ? std::vector<double>{1.5, -2}
          : form.has("value_float")  ? std::vector<double>{2.5}
          : form.has("value_int")    ? std::vector<double>{-3}
          : form.has("value_floats") ? std::vector<double>{1, 2, 3}
                                     : std::vector<double>{4, 5};
      CHECK(closeDifference(*got, want, 0, 0) == "");
    }
  }
}

//===----------------------------------------------------------------------===//
// MatMul and Gemm against a reference product
//===----------------------------------------------------------------------===//

namespace {

/// numpy matmul in double, from the ONNX definition.
std::vector<double> referenceMatMul(const TensorData &a, const TensorData &b,
                                    const TensorType &outType) {
  Dims aDims(a.getType().getDims().begin(), a.getType().getDims().end());
  Dims bDims(b.getType().getDims().begin(), b.getType().getDims().end());
  if (aDims.size() == 1)
    aDims.insert(aDims.begin(), 1);
  if (bDims.size() == 1)
    bDims.push_back(1);
  int64_t m = aDims[aDims.size() - 2], k = aDims.back(), n = bDims.back();
  size_t rank = std::max(aDims.size(), bDims.size()) - 2;
  auto pad = [&](const Dims &dims) {
    Dims batch(rank, 1);
    std::copy(dims.begin(), dims.end() - 2, batch.end() - (dims.size() - 2));
    return batch;
  };
  Dims aBatch = pad(aDims), bBatch = pad(bDims), batch(rank);
  for (size_t d = 0; d < rank; ++d)
    batch[d] = std::max(aBatch[d], bBatch[d]);
  int64_t count = 1;
  for (int64_t dim : batch)
    count *= dim;
  std::vector<double> out(count * m * n);
  for (int64_t i = 0; i < count; ++i) {
    // Batch multi-index, then each operand's matrix (broadcast dims give 0).
    int64_t rest = i, aIndex = 0, bIndex = 0, aScale = 1, bScale = 1;
    for (size_t d = rank; d > 0; --d) {
      int64_t idx = rest % batch[d - 1];
      rest /= batch[d - 1];
      aIndex += (aBatch[d - 1] == 1 ? 0 : idx) * aScale;
      bIndex += (bBatch[d - 1] == 1 ? 0 : idx) * bScale;
      aScale *= aBatch[d - 1];
      bScale *= bBatch[d - 1];
    }
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += a.getDouble(aIndex * m * k + r * k + p) *
                 b.getDouble(bIndex * k * n + p * n + c);
        out[(i * m + r) * n + c] = sum;
      }
  }
  REQUIRE(static_cast<int64_t>(out.size()) == outType.getNumElements());
  return out;
}

} // namespace

TEST_CASE("MatMul matches numpy matmul, batched and 1-D") {
  struct Shapes {
    Dims a, b;
  };
  const std::vector<Shapes> shapes = {
      {{3, 4}, {4, 5}},
      {{2, 3, 4}, {4, 5}},
      {{2, 1, 3, 4}, {5, 4, 6}},
      {{5, 4, 6}, {2, 1, 6, 3}},
      {{4}, {4, 5}},
      {{3, 4}, {4}},
      {{4}, {4}},
      {{2, 3, 4}, {4}},
      {{4}, {2, 4, 5}},
      {{3, 0}, {0, 4}},
      {{0, 3}, {3, 2}},
      {{1, 1}, {1, 1}},
      {{300, 200}, {200, 270}},
      {{2, 130, 70}, {2, 70, 300}},
      {{7, 13, 9}, {9, 1}},
      {{1, 9}, {9, 600}},
      // Two rows of column strips (304 and 297 rows) that read their op(A)
      // packed once for the node (remat's own kernel).
      {{601, 70}, {70, 300}},
  };
  uint64_t seed = 20000;
  for (DType dtype : {DType::F32, DType::F64, DType::I64, DType::I32})
    for (const Shapes &s : shapes) {
      Rng rng(++seed);
      bool isInt = isInteger(dtype);
      auto a = randomData(TensorType(dtype, s.a), rng, isInt ? -20 : -1,
                          isInt ? 20 : 1);
      auto b = randomData(TensorType(dtype, s.b), rng, isInt ? -20 : -1,
                          isInt ? 20 : 1);
      auto one = build(OpKind::MatMul, {input(a), input(b)}, 1);
      INFO("seed " << seed << " " << a->getType().str() << " @ "
                   << b->getType().str());
      REQUIRE(one->error == "");
      Outcome outcome = runNode(*one);
      REQUIRE(outcome.error == "");
      std::vector<double> want =
          referenceMatMul(*a, *b, one->node->getResult(0)->getType());
      double tolerance = dtype == DType::F32 ? 1e-5 : isInt ? 0 : 1e-13;
      // Sums of k products of magnitude <= 1: absolute tolerance grows with k.
      int64_t k = s.a.back();
      CHECK(closeDifference(*outcome.outputs[0].toData(), want, tolerance,
                            tolerance * k) == "");
    }
}

TEST_CASE("Gemm applies transA, transB, alpha, beta and broadcasts C") {
  struct GemmCase {
    int64_t m, n, k;
    int64_t transA, transB;
    float alpha, beta;
    std::optional<Dims> c;
  };
  const std::vector<GemmCase> cases = {
      {3, 5, 4, 0, 0, 1.0f, 1.0f, Dims{3, 5}},
      {3, 5, 4, 1, 0, 0.5f, 2.0f, Dims{5}},
      {3, 5, 4, 0, 1, -1.0f, 0.25f, Dims{3, 1}},
      {3, 5, 4, 1, 1, 2.0f, 1.0f, Dims{}},
      {3, 5, 4, 7, 1, 1.0f, 1.0f, std::nullopt},
      {300, 270, 33, 0, 1, 1.0f, 1.0f, Dims{270}},
      // Two rows of column strips, op(A) packed once for the node and the
      // bias row started inside remat's own kernel.
      {601, 300, 70, 0, 1, 1.0f, 0.5f, Dims{300}},
      {601, 300, 70, 1, 0, -1.0f, 1.0f, Dims{300}},
      // The MLM decoder's shape, narrower: strips of 256 columns (512 KiB
      // of C, kMaxStripCFloats) instead of 1024, the last one 160 wide.
      {512, 4000, 40, 0, 1, 1.0f, 1.0f, Dims{4000}},
      {2, 3, 0, 0, 0, 1.0f, 3.0f, Dims{2, 3}},
  };
  uint64_t seed = 21000;
  for (DType dtype : {DType::F32, DType::F64, DType::I64})
    for (const GemmCase &g : cases) {
      Rng rng(++seed);
      bool isInt = isInteger(dtype);
      if (isInt &&
          (g.alpha != std::trunc(g.alpha) || g.beta != std::trunc(g.beta)))
        continue;
      Dims aDims = g.transA ? Dims{g.k, g.m} : Dims{g.m, g.k};
      Dims bDims = g.transB ? Dims{g.n, g.k} : Dims{g.k, g.n};
      auto a = randomData(TensorType(dtype, aDims), rng, -9, 9);
      auto b = randomData(TensorType(dtype, bDims), rng, -9, 9);
      std::vector<Operand> operands = {input(a), input(b)};
      TensorDataPtr c;
      if (g.c) {
        c = randomData(TensorType(dtype, *g.c), rng, -9, 9);
        operands.push_back(input(c));
      }
      auto one = build(OpKind::Gemm, operands, 1,
                       attrs({{"transA", g.transA},
                              {"transB", g.transB},
                              {"alpha", g.alpha},
                              {"beta", g.beta}}));
      INFO("seed " << seed << " " << dtypeName(dtype).str() << " m " << g.m
                   << " n " << g.n << " k " << g.k);
      Outcome outcome = runNode(*one);
      REQUIRE(outcome.error == "");
      std::vector<double> want(g.m * g.n);
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < g.k; ++p)
            sum += a->getDouble(g.transA ? p * g.m + i : i * g.k + p) *
                   b->getDouble(g.transB ? j * g.k + p : p * g.n + j);
          double value = g.alpha * sum;
          if (c) {
            // Unidirectional broadcast of C to [m, n].
            const Dims &cd = *g.c;
            int64_t ci = cd.size() == 2 ? (cd[0] == 1 ? 0 : i) * cd[1] +
                                              (cd[1] == 1 ? 0 : j)
                         : cd.size() == 1 ? (cd[0] == 1 ? 0 : j)
                                          : 0;
            value += g.beta * c->getDouble(ci);
          }
          want[i * g.n + j] = value;
        }
      double tolerance = dtype == DType::F32 ? 1e-5 : isInt ? 0 : 1e-13;
      CHECK(closeDifference(*outcome.outputs[0].toData(), want, tolerance,
                            tolerance * 81 * std::max<int64_t>(g.k, 1)) == "");
    }
}

//===----------------------------------------------------------------------===//
// Softmax, LayerNormalization, SoftmaxCrossEntropyLoss
//===----------------------------------------------------------------------===//

namespace {

/// Softmax (or log-softmax) along \p axis in double.
std::vector<double> referenceSoftmax(const TensorData &x, int64_t axis,
                                     bool log) {
  llvm::ArrayRef<int64_t> dims = x.getType().getDims();
  int64_t rank = dims.size();
  if (axis < 0)
    axis += rank;
  int64_t outer = 1, inner = 1, n = dims[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= dims[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= dims[d];
  std::vector<double> out(x.getNumElements());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
      double mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j)
        mx = std::max(mx, x.getDouble(at(j)));
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(x.getDouble(at(j)) - mx);
      for (int64_t j = 0; j < n; ++j)
        out[at(j)] = log ? x.getDouble(at(j)) - mx - std::log(sum)
                         : std::exp(x.getDouble(at(j)) - mx) / sum;
    }
  return out;
}

} // namespace

TEST_CASE("Softmax and LogSoftmax match the definition along every axis") {
  uint64_t seed = 30000;
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax})
    for (DType dtype : {DType::F32, DType::F64})
      for (int trial = 0; trial < 20; ++trial, ++seed) {
        Rng rng(seed);
        Dims dims = randomDims(rng, 1, 4, trial < 15 ? 6 : 70);
        int64_t rank = dims.size();
        int64_t axis =
            std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
        // Large magnitudes: the max subtraction must keep exp finite.
        double scale = trial % 3 == 0 ? 500 : 5;
        auto x = randomData(TensorType(dtype, dims), rng, -scale, scale);
        AttrList attributes;
        if (trial % 4 != 0)
          attributes.set("axis", axis);
        else
          axis = -1;
        auto one = build(op, {input(x)}, 1, attributes);
        INFO("seed " << seed << " dims " << dimsText(dims) << " axis " << axis);
        Outcome outcome = runNode(*one);
        REQUIRE(outcome.error == "");
        double tolerance = dtype == DType::F32 ? 2e-5 : 1e-12;
        CHECK(closeDifference(
                  *outcome.outputs[0].toData(),
                  referenceSoftmax(*x, axis, op == OpKind::LogSoftmax),
                  tolerance, tolerance) == "");
      }
}

TEST_CASE("LayerNormalization matches ONNX's function body") {
  struct LnCase {
    Dims dims;
    int64_t axis;
    Dims scaleDims;
    bool bias;
    unsigned results;
    int64_t stashType;
  };
  const std::vector<LnCase> cases = {
      {{4, 8}, -1, {8}, true, 3, 1},
      {{2, 3, 16}, -1, {16}, false, 1, 1},
      {{2, 3, 4, 5}, 2, {4, 5}, true, 3, 1},
      {{2, 3, 4, 5}, 1, {1, 5}, true, 2, 1},
      {{2, 3, 4, 5}, -3, {1}, true, 3, 1},
      {{3, 7}, 0, {3, 7}, true, 3, 1},
      {{64, 768}, -1, {768}, true, 3, 1},
      {{5, 6}, -1, {6}, true, 3, 11},
  };
  uint64_t seed = 31000;
  for (DType dtype : {DType::F32, DType::F64})
    for (const LnCase &c : cases) {
      Rng rng(++seed);
      auto x = randomData(TensorType(dtype, c.dims), rng, -3, 5);
      auto scale = randomData(TensorType(dtype, c.scaleDims), rng, 0.5, 2);
      std::vector<Operand> operands = {input(x), input(scale)};
      TensorDataPtr bias;
      if (c.bias) {
        bias = randomData(TensorType(dtype, c.scaleDims), rng, -1, 1);
        operands.push_back(input(bias));
      }
      float epsilon = 1e-3f;
      auto one = build(OpKind::LayerNormalization, operands, c.results,
                       attrs({{"axis", c.axis},
                              {"epsilon", epsilon},
                              {"stash_type", c.stashType}}));
      INFO("seed " << seed << " " << x->getType().str() << " axis " << c.axis);
      Outcome outcome = runNode(*one);
      REQUIRE(outcome.error == "");

      int64_t rank = c.dims.size();
      int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
      int64_t rows = 1, n = 1;
      for (int64_t d = 0; d < rank; ++d)
        (d < axis ? rows : n) *= c.dims[d];
      // Scale and bias index: broadcast over the normalized dims.
      Dims normalized(c.dims.begin() + axis, c.dims.end());
      auto paramIndex = [&](int64_t i) {
        int64_t index = 0, stride = 1;
        for (size_t d = normalized.size(); d > 0; --d) {
          int64_t coord = i % normalized[d - 1];
          i /= normalized[d - 1];
          size_t lead = normalized.size() - c.scaleDims.size();
          if (d - 1 >= lead) {
            int64_t pd = c.scaleDims[d - 1 - lead];
            index += (pd == 1 ? 0 : coord) * stride;
            stride *= pd;
          }
        }
        return index;
      };
      std::vector<double> y(rows * n), means(rows), invStds(rows);
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; ++i)
          mean += x->getDouble(r * n + i);
        mean /= n;
        for (int64_t i = 0; i < n; ++i)
          var += std::pow(x->getDouble(r * n + i) - mean, 2);
        var /= n;
        double invStd = 1 / std::sqrt(var + double(epsilon));
        means[r] = mean;
        invStds[r] = invStd;
        for (int64_t i = 0; i < n; ++i)
          y[r * n + i] = (x->getDouble(r * n + i) - mean) * invStd *
                             scale->getDouble(paramIndex(i)) +
                         (bias ? bias->getDouble(paramIndex(i)) : 0);
      }
      double tolerance = dtype == DType::F32 ? 1e-5 : 1e-12;
      CHECK(closeDifference(*outcome.outputs[0].toData(), y, tolerance,
                            tolerance) == "");
      if (c.results > 1)
        CHECK(closeDifference(*outcome.outputs[1].toData(), means, tolerance,
                              tolerance) == "");
      if (c.results > 2)
        CHECK(closeDifference(*outcome.outputs[2].toData(), invStds, tolerance,
                              tolerance) == "");
    }
}

namespace {

/// ONNX's reference softmaxcrossentropy (onnx/backend/test/case/node/
/// softmaxcrossentropy.py) in double: loss l = -log_softmax(x)[label] *
/// w[label], 0 where ignored; "mean" divides by the sum of the gathered
/// weights (the count of kept labels without weights).
struct LossReference {
  std::vector<double> loss;
  std::vector<double> logProb;
};

LossReference referenceLoss(const TensorData &scores, const TensorData &labels,
                            const TensorData *weights,
                            const std::string &reduction,
                            std::optional<int64_t> ignoreIndex) {
  llvm::ArrayRef<int64_t> dims = scores.getType().getDims();
  int64_t n = dims[0], c = dims[1], d = 1;
  for (size_t i = 2; i < dims.size(); ++i)
    d *= dims[i];
  LossReference ref;
  ref.logProb.resize(n * c * d);
  std::vector<double> losses(n * d), gathered(n * d);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t s = 0; s < d; ++s) {
      auto at = [&](int64_t k) { return (b * c + k) * d + s; };
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < c; ++k)
        mx = std::max(mx, scores.getDouble(at(k)));
      for (int64_t k = 0; k < c; ++k)
        sum += std::exp(scores.getDouble(at(k)) - mx);
      for (int64_t k = 0; k < c; ++k)
        ref.logProb[at(k)] = scores.getDouble(at(k)) - mx - std::log(sum);
      int64_t label = labels.getInt(b * d + s);
      bool ignored = ignoreIndex && label == *ignoreIndex;
      double w = ignored ? 0 : weights ? weights->getDouble(label) : 1;
      gathered[b * d + s] = w;
      losses[b * d + s] = ignored ? 0 : -ref.logProb[at(label)] * w;
    }
  if (reduction == "none") {
    ref.loss = losses;
  } else {
    double total = std::accumulate(losses.begin(), losses.end(), 0.0);
    if (reduction == "sum")
      ref.loss = {total};
    else
      ref.loss = {total /
                  std::accumulate(gathered.begin(), gathered.end(), 0.0)};
  }
  return ref;
}

} // namespace

TEST_CASE("SoftmaxCrossEntropyLoss matches ONNX's reference implementation") {
  struct LossCase {
    Dims scores;
    std::string reduction;
    bool weights;
    std::optional<int64_t> ignoreIndex;
    bool logProb;
    DType labelType;
  };
  const std::vector<LossCase> cases = {
      {{5, 7}, "mean", false, std::nullopt, false, DType::I64},
      {{5, 7}, "mean", true, std::nullopt, true, DType::I64},
      {{5, 7}, "sum", false, 2, true, DType::I32},
      {{5, 7}, "none", true, -100, true, DType::I64},
      {{6, 4, 3}, "mean", true, -1, true, DType::I64},
      {{2, 5, 3, 2}, "mean", false, 1, false, DType::I32},
      {{2, 5, 3, 2}, "none", false, std::nullopt, true, DType::I64},
      {{64, 1000}, "mean", false, -100, false, DType::I64},
  };
  uint64_t seed = 32000;
  for (DType dtype : {DType::F32, DType::F64})
    for (const LossCase &c : cases) {
      Rng rng(++seed);
      auto scores = randomData(TensorType(dtype, c.scores), rng, -4, 4);
      Dims labelDims = {c.scores[0]};
      labelDims.insert(labelDims.end(), c.scores.begin() + 2, c.scores.end());
      auto labels = randomData(TensorType(c.labelType, labelDims), rng, 0,
                               c.scores[1] - 1);
      // Ignore some positions (an ignore_index outside [0, C) is never a
      // valid label otherwise).
      if (c.ignoreIndex)
        for (int64_t i = 0; i < labels->getNumElements(); ++i)
          if (rng() % 3 == 0)
            std::const_pointer_cast<TensorData>(labels)->setInt(i,
                                                                *c.ignoreIndex);
      std::vector<Operand> operands = {input(scores), input(labels)};
      TensorDataPtr weights;
      if (c.weights) {
        weights = randomData(TensorType(dtype, {c.scores[1]}), rng, 0.1, 2);
        operands.push_back(input(weights));
      }
      AttrList attributes = attrs({{"reduction", c.reduction}});
      if (c.ignoreIndex)
        attributes.set("ignore_index", *c.ignoreIndex);
      auto one = build(OpKind::SoftmaxCrossEntropyLoss, operands,
                       c.logProb ? 2 : 1, attributes);
      INFO("seed " << seed << " scores " << scores->getType().str() << " "
                   << c.reduction);
      Outcome outcome = runNode(*one);
      REQUIRE(outcome.error == "");
      LossReference ref = referenceLoss(*scores, *labels, weights.get(),
                                        c.reduction, c.ignoreIndex);
      double tolerance = dtype == DType::F32 ? 2e-5 : 1e-12;
      CHECK(closeDifference(*outcome.outputs[0].toData(), ref.loss, tolerance,
                            tolerance) == "");
      if (c.logProb)
        CHECK(closeDifference(*outcome.outputs[1].toData(), ref.logProb,
                              tolerance, tolerance) == "");
    }
}

TEST_CASE("SoftmaxCrossEntropyLoss with every label ignored") {
  auto scores = doubles(TensorType(DType::F32, {2, 3}), {1, 2, 3, 4, 5, 6});
  auto labels = ints({-100, -100});
  // mean: 0 / 0 is NaN, as in ONNX's reference and PyTorch; sum: 0.
  auto mean =
      build(OpKind::SoftmaxCrossEntropyLoss, {input(scores), input(labels)}, 1,
            attrs({{"ignore_index", int64_t(-100)}}));
  CHECK(std::isnan(runNode(*mean).outputs[0].toData()->getDouble(0)));
  auto sum =
      build(OpKind::SoftmaxCrossEntropyLoss, {input(scores), input(labels)}, 1,
            attrs({{"ignore_index", int64_t(-100)},
                   {"reduction", std::string("sum")}}));
  CHECK(runNode(*sum).outputs[0].toData()->getDouble(0) == 0);
}

//===----------------------------------------------------------------------===//
// ScatterElements, OneHot, Split
//===----------------------------------------------------------------------===//

TEST_CASE("ScatterElements applies updates in row-major order") {
  uint64_t seed = 33000;
  for (const char *reduction : {"none", "add", "mul"})
    for (DType dtype : {DType::F32, DType::F64, DType::I64})
      for (int trial = 0; trial < 12; ++trial, ++seed) {
        Rng rng(seed);
        Dims dataDims = randomDims(rng, 1, 4, 6);
        // Wide rows: the kernel splits the last dim into column blocks.
        if (trial >= 9)
          dataDims.back() = 60 + rng() % 150;
        int64_t rank = dataDims.size();
        int64_t axis = rng() % rank;
        Dims indexDims = dataDims;
        for (int64_t d = 0; d < rank; ++d)
          indexDims[d] = d == axis ? 1 + rng() % 8 : 1 + rng() % dataDims[d];
        auto data = randomData(TensorType(dtype, dataDims), rng, -3, 3);
        // Few distinct targets, so indices repeat; negative ones too.
        auto indices = randomData(TensorType(DType::I64, indexDims), rng,
                                  -dataDims[axis], dataDims[axis] - 1);
        auto updates = randomData(TensorType(dtype, indexDims), rng, -3, 3);
        AttrList attributes = attrs({{"reduction", std::string(reduction)}});
        attributes.set("axis", rng() % 2 ? axis : axis - rank);
        auto one =
            build(OpKind::ScatterElements,
                  {input(data), input(indices), input(updates)}, 1, attributes);
        // The reference: a sequential walk in the element type.
        auto want = std::make_shared<TensorData>(*data);
        std::vector<int64_t> indexStrides(rank, 1), dataStrides(rank, 1);
        for (int64_t d = rank - 1; d > 0; --d) {
          indexStrides[d - 1] = indexStrides[d] * indexDims[d];
          dataStrides[d - 1] = dataStrides[d] * dataDims[d];
        }
        for (int64_t u = 0; u < updates->getNumElements(); ++u) {
          int64_t target = 0;
          for (int64_t d = 0; d < rank; ++d) {
            int64_t coord = u / indexStrides[d] % indexDims[d];
            if (d == axis) {
              coord = indices->getInt(u);
              if (coord < 0)
                coord += dataDims[axis];
            }
            target += coord * dataStrides[d];
          }
          std::string r = reduction;
          if (dtype == DType::F32) {
            float old = float(want->getDouble(target));
            float value = float(updates->getDouble(u));
            want->setDouble(target, r == "none"  ? value
                                    : r == "add" ? old + value
                                                 : old * value);
          } else if (dtype == DType::F64) {
            double old = want->getDouble(target), value = updates->getDouble(u);
            want->setDouble(target, r == "none"  ? value
                                    : r == "add" ? old + value
                                                 : old * value);
          } else {
            int64_t old = want->getInt(target), value = updates->getInt(u);
            want->setInt(target, r == "none"  ? value
                                 : r == "add" ? old + value
                                              : old * value);
          }
        }
        INFO("seed " << seed << " " << std::string(reduction) << " data "
                     << data->getType().str() << " indices "
                     << indices->getType().str() << " axis " << axis);
        for (ParallelFor *pool : {static_cast<ParallelFor *>(&onePool()),
                                  static_cast<ParallelFor *>(&fourPool())}) {
          Outcome outcome = runNode(*one, *pool);
          REQUIRE(outcome.error == "");
          CHECK(bitwiseDifference(*outcome.outputs[0].toData(), *want) == "");
        }
      }
}

TEST_CASE("OneHot writes on values at indices and off values elsewhere") {
  auto values = doubles(TensorType(DType::F32, {2}), {-1, 5});
  // indices [2, 2]: -1 means depth - 1; 4 is out of range (all off).
  auto indices = ints({0, -1, 4, 2});
  auto indexData = std::make_shared<TensorData>(
      TensorType(DType::I64, {2, 2}),
      std::vector<uint8_t>(indices->getBytes().begin(),
                           indices->getBytes().end()));
  auto last = build(
      OpKind::OneHot,
      {input(indexData), constant(scalarOf(DType::I64, 3)), input(values)}, 1);
  REQUIRE(last->node->getResult(0)->getType().str() == "f32[2,2,3]");
  CHECK(closeDifference(*runNode(*last).outputs[0].toData(),
                        {5, -1, -1, -1, -1, 5, -1, -1, -1, -1, -1, 5}, 0,
                        0) == "");
  auto first = build(
      OpKind::OneHot,
      {input(indexData), constant(scalarOf(DType::F32, 3.7)), input(values)}, 1,
      attrs({{"axis", int64_t(0)}}));
  REQUIRE(first->node->getResult(0)->getType().str() == "f32[3,2,2]");
  // out[c, i, j] = on where indices[i, j] == c.
  CHECK(closeDifference(*runNode(*first).outputs[0].toData(),
                        {5, -1, -1, -1, -1, -1, -1, -1, -1, 5, -1, 5}, 0,
                        0) == "");
  // Float indices truncate toward zero; i32 values.
  auto floatIndices = doubles(TensorType(DType::F64, {3}), {1.9, -0.5, -1.2});
  auto intValues = TensorData::fromInts(TensorType(DType::I32, {2}), {0, 1});
  auto truncated = build(OpKind::OneHot,
                         {input(floatIndices),
                          constant(scalarOf(DType::I64, 2)), input(intValues)},
                         1);
  CHECK(runNode(*truncated).outputs[0].toData()->getInts() ==
        std::vector<int64_t>{0, 1, 1, 0, 0, 1});
}

TEST_CASE("Split evenly and by the split operand") {
  Rng rng(34000);
  auto x = randomData(TensorType(DType::F32, {4, 6, 3}), rng, -1, 1);
  auto even =
      build(OpKind::Split, {input(x)}, 3, attrs({{"axis", int64_t(1)}}));
  Outcome outcome = runNode(*even);
  REQUIRE(outcome.error == "");
  auto sliceOf = [&](int64_t begin, int64_t size) {
    std::vector<double> values;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = begin; j < begin + size; ++j)
        for (int64_t k = 0; k < 3; ++k)
          values.push_back(x->getDouble((i * 6 + j) * 3 + k));
    return values;
  };
  for (int r = 0; r < 3; ++r) {
    CHECK(outcome.outputs[r].getType().str() == "f32[4,2,3]");
    CHECK(closeDifference(*outcome.outputs[r].toData(), sliceOf(2 * r, 2), 0,
                          0) == "");
  }
  auto bySizes = build(OpKind::Split, {input(x), constant(ints({1, 0, 5}))}, 3,
                       attrs({{"axis", int64_t(-2)}}));
  outcome = runNode(*bySizes);
  REQUIRE(outcome.error == "");
  CHECK(closeDifference(*outcome.outputs[0].toData(), sliceOf(0, 1), 0, 0) ==
        "");
  CHECK(outcome.outputs[1].getType().str() == "f32[4,0,3]");
  CHECK(closeDifference(*outcome.outputs[2].toData(), sliceOf(1, 5), 0, 0) ==
        "");
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

namespace {

std::unique_ptr<OneNode> dropoutNode(TensorDataPtr x, double ratio,
                                     std::optional<bool> training,
                                     std::optional<int64_t> seed,
                                     unsigned results = 2) {
  DType dtype = x->getType().getDType();
  std::vector<Operand> operands = {input(std::move(x)),
                                   input(scalarOf(dtype, ratio))};
  if (training)
    operands.push_back(input(TensorData::fromInts(TensorType(DType::Bool, {}),
                                                  {*training ? 1 : 0})));
  AttrList attributes;
  if (seed)
    attributes.set("seed", *seed);
  return build(OpKind::Dropout, operands, results, attributes);
}

} // namespace

TEST_CASE("Dropout masks are a pure function of seed and element index") {
  Rng rng(35000);
  const int64_t count = 200000;
  auto x = randomData(TensorType(DType::F32, {count}), rng, 0.5, 1.5);
  const double ratio = 0.3;
  auto first = dropoutNode(x, ratio, true, 1234);
  Outcome a = runNode(*first, fourPool());
  Outcome b = runNode(*first, onePool());
  REQUIRE(a.error == "");
  REQUIRE(b.error == "");
  // Same seed: the same mask and output, bit for bit, on any thread count.
  CHECK(bitwiseDifference(*a.outputs[1].toData(), *b.outputs[1].toData()) ==
        "");
  CHECK(bitwiseDifference(*a.outputs[0].toData(), *b.outputs[0].toData()) ==
        "");
  // A second node with the same seed (a recomputed Dropout) too.
  auto again = dropoutNode(x, ratio, true, 1234);
  CHECK(bitwiseDifference(*runNode(*again).outputs[1].toData(),
                          *a.outputs[1].toData()) == "");

  auto mask = a.outputs[1].toData();
  auto y = a.outputs[0].toData();
  int64_t kept = 0;
  const float scale = 1.0f / (1.0f - float(ratio));
  bool consistent = true;
  for (int64_t i = 0; i < count && consistent; ++i) {
    bool keep = mask->getInt(i) != 0;
    kept += keep;
    // The kernel agrees with the exported dropoutKeep, and scales kept
    // elements by 1 / (1 - ratio).
    consistent = keep == dropoutKeep(1234, i, float(ratio)) &&
                 float(y->getDouble(i)) ==
                     (keep ? float(x->getDouble(i)) * scale : 0.0f);
    CHECK_MESSAGE(consistent, "element " << i);
  }
  // 200000 draws at p = 0.7: the standard deviation of the fraction is
  // about 0.001.
  double fraction = double(kept) / count;
  CHECK(fraction > 0.7 - 0.006);
  CHECK(fraction < 0.7 + 0.006);

  // Another seed: another mask.
  auto other = dropoutNode(x, ratio, true, 1235);
  auto otherMask = runNode(*other).outputs[1].toData();
  int64_t differing = 0;
  for (int64_t i = 0; i < count; ++i)
    differing += otherMask->getInt(i) != mask->getInt(i);
  // Independent masks differ at 2 * 0.3 * 0.7 = 42% of the elements.
  CHECK(differing > count * 0.40);
  CHECK(differing < count * 0.44);

  // Neighbouring seeds and indices are not correlated: a mask shifted by one
  // element agrees with itself like an independent one.
  int64_t shifted = 0;
  for (int64_t i = 1; i < count; ++i)
    shifted += mask->getInt(i) != mask->getInt(i - 1);
  CHECK(shifted > count * 0.40);
  CHECK(shifted < count * 0.44);
}

TEST_CASE("Dropout's generator is pinned") {
  // The CUDA backend and recomputation rely on these exact bits; changing
  // the generator must be deliberate.
  std::string bits;
  for (uint64_t i = 0; i < 48; ++i)
    bits += dropoutKeep(42, i, 0.5f) ? '1' : '0';
  CHECK(bits == "010010010110001110101110111111111010111101111001");
  // ratio 0 keeps everything; the threshold test is u >= ratio.
  for (uint64_t i = 0; i < 1000; ++i)
    CHECK(dropoutKeep(7, i, 0.0f));
  // The kernels' integer threshold decides exactly like u >= ratio.
  uint64_t key = dropoutKey(7);
  for (float ratio : {1e-8f, 0.1f, 0.3f, 0.5f, 0.9f, 0.99999994f}) {
    uint32_t threshold = dropoutThreshold(ratio);
    for (uint64_t i = 0; i < 20000; ++i)
      CHECK_MESSAGE(dropoutKeep(7, i, ratio) ==
                        (dropoutBits24(key, i) >= threshold),
                    "ratio " << ratio << " index " << i);
  }
}

TEST_CASE("Div by a power-of-two scalar gives the division's bits") {
  // The kernel multiplies by the reciprocal when the divisor is one element
  // and a power of two; compare with x / d computed here, element by element.
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::F32, DType::F64}) {
    std::mt19937 gen(37000);
    std::uniform_real_distribution<double> wide(-1e3, 1e3);
    std::vector<double> values(1000);
    for (double &v : values)
      v = wide(gen);
    // Results that overflow, turn subnormal, or are special.
    const double specials[] = {inf,   -inf,   nan,      0.0,      -0.0,
                               1e-40, -3e-39, 1e-310,   1.5e38,   3e38,
                               1e308, -1e308, 1.17e-38, 2.2e-308, 7.0};
    std::copy(std::begin(specials), std::end(specials), values.begin());
    auto x = doubles(TensorType(dtype, {1000}), values);
    for (double divisor : {8.0, 0.125, -2.0, 0x1p-100, 0x1p100, 1.0, 3.0, 0.1,
                           0.0, -0.0, inf, nan}) {
      INFO(dtypeName(dtype).str() << " / " << divisor);
      Outcome outcome = runNode(
          *build(OpKind::Div, {input(x), input(scalarOf(dtype, divisor))}, 1));
      REQUIRE(outcome.error == "");
      auto y = outcome.outputs[0].toData();
      int64_t wrong = 0;
      for (int64_t i = 0; i < 1000; ++i) {
        if (dtype == DType::F32) {
          float want =
              static_cast<float>(x->getDouble(i)) / static_cast<float>(divisor);
          float got = static_cast<float>(y->getDouble(i));
          wrong += std::memcmp(&want, &got, sizeof(float)) != 0 &&
                   !(std::isnan(want) && std::isnan(got));
        } else {
          double want = x->getDouble(i) / divisor, got = y->getDouble(i);
          wrong += std::memcmp(&want, &got, sizeof(double)) != 0 &&
                   !(std::isnan(want) && std::isnan(got));
        }
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("Dropout outside training mode is the identity") {
  Rng rng(36000);
  auto x = randomData(TensorType(DType::F64, {3, 50}), rng, -2, 2);
  std::vector<std::unique_ptr<OneNode>> identities;
  identities.push_back(dropoutNode(x, 0.5, false, 9));
  identities.push_back(dropoutNode(x, 0.5, std::nullopt, 9));
  identities.push_back(dropoutNode(x, 0.0, true, 9));
  identities.push_back(dropoutNode(x, 0.5, false, std::nullopt));
  for (const auto &one : identities) {
    Outcome outcome = runNode(*one);
    REQUIRE(outcome.error == "");
    CHECK(bitwiseDifference(*outcome.outputs[0].toData(), *x) == "");
    for (int64_t i = 0; i < 150; ++i)
      CHECK(outcome.outputs[1].toData()->getInt(i) == 1);
  }
  // Training with the default ratio 0.5 and without a mask result.
  auto noMask =
      build(OpKind::Dropout,
            {input(x), input(scalarOf(DType::F64, 0.5)),
             input(TensorData::fromInts(TensorType(DType::Bool, {}), {1}))},
            1, attrs({{"seed", int64_t(3)}}));
  Outcome outcome = runNode(*noMask);
  REQUIRE(outcome.error == "");
  auto y = outcome.outputs[0].toData();
  for (int64_t i = 0; i < 150; ++i)
    CHECK(y->getDouble(i) ==
          (dropoutKeep(3, i, 0.5f) ? x->getDouble(i) * 2.0 : 0.0));
}

//===----------------------------------------------------------------------===//
// Determinism across thread counts
//===----------------------------------------------------------------------===//

TEST_CASE("kernels give the same bits on 1 and 4 threads") {
  ThreadPoolParallelFor one(1), four(4);
  Rng rng(40000);
  struct Case {
    std::string name;
    std::unique_ptr<OneNode> node;
  };
  std::vector<Case> cases;
  auto f32 = [&](Dims dims) {
    return randomData(TensorType(DType::F32, dims), rng, -2, 2);
  };
  cases.push_back(
      {"MatMul", build(OpKind::MatMul,
                       {input(f32({300, 200})), input(f32({200, 700}))}, 1)});
  // 6 tiles of 208 x 560 with OpenBLAS, 12 column strips of 304 x 192 with
  // remat's kernel, which read their row's op(A) packed once for the node,
  // its blocks spread over the threads (runtime/cpu/Linalg.cpp's finishPlan
  // and prepackA), edge tiles in both dims.
  cases.push_back(
      {"MatMul in large tiles",
       build(OpKind::MatMul, {input(f32({600, 100})), input(f32({100, 1100}))},
             1)});
  cases.push_back(
      {"batched MatMul",
       build(OpKind::MatMul, {input(f32({8, 64, 96})), input(f32({8, 96, 64}))},
             1)});
  cases.push_back({"MatMul with N = 1",
                   build(OpKind::MatMul,
                         {input(f32({1000, 1000})), input(f32({1000}))}, 1)});
  cases.push_back({"Gemm", build(OpKind::Gemm,
                                 {input(f32({500, 300})),
                                  input(f32({400, 300})), input(f32({400}))},
                                 1, attrs({{"transB", int64_t(1)}}))});
  cases.push_back(
      {"Softmax", build(OpKind::Softmax, {input(f32({256, 1000}))}, 1)});
  cases.push_back({"Softmax on a middle axis",
                   build(OpKind::Softmax, {input(f32({64, 50, 40}))}, 1,
                         attrs({{"axis", int64_t(1)}}))});
  cases.push_back({"ReduceSum over rows",
                   build(OpKind::ReduceSum,
                         {input(f32({2000, 500})), constant(ints({1}))}, 1)});
  cases.push_back({"ReduceSum over leading dims",
                   build(OpKind::ReduceSum,
                         {input(f32({50, 40, 3000})), constant(ints({0, 1}))},
                         1, attrs({{"keepdims", int64_t(0)}}))});
  cases.push_back(
      {"ReduceMean", build(OpKind::ReduceMean, {input(f32({300, 777}))}, 1,
                           attrs({{"axes", std::vector<int64_t>{-1}}}))});
  cases.push_back(
      {"LayerNormalization",
       build(OpKind::LayerNormalization,
             {input(f32({256, 768})), input(f32({768})), input(f32({768}))},
             3)});
  cases.push_back(
      {"SoftmaxCrossEntropyLoss",
       build(OpKind::SoftmaxCrossEntropyLoss,
             {input(f32({512, 300})),
              input(randomData(TensorType(DType::I64, {512}), rng, 0, 299))},
             2)});
  // Tasks are (n, c) pairs: chunks start and end inside rows.
  cases.push_back(
      {"SoftmaxCrossEntropyGrad",
       build(OpKind::SoftmaxCrossEntropyGrad,
             {input(f32({512, 300})),
              input(randomData(TensorType(DType::I64, {512}), rng, 0, 299)),
              input(f32({512}))},
             1)});
  cases.push_back(
      {"SoftmaxCrossEntropyGrad with a spatial dim",
       build(OpKind::SoftmaxCrossEntropyGrad,
             {input(f32({4, 7, 40000})),
              input(randomData(TensorType(DType::I32, {4, 40000}), rng, 0, 6)),
              input(f32({4, 40000}))},
             1)});
  for (Case &c : cases) {
    INFO(c.name);
    REQUIRE(c.node->error == "");
    Outcome serial = runNode(*c.node, one);
    RecordingParallelFor recording(four);
    Outcome parallel = runNode(*c.node, recording);
    REQUIRE(serial.error == "");
    REQUIRE(parallel.error == "");
    // The four-thread run really split the work.
    CHECK(recording.chunksSeen() >= 2);
    for (size_t i = 0; i < serial.outputs.size(); ++i)
      CHECK(bitwiseDifference(*parallel.outputs[i].toData(),
                              *serial.outputs[i].toData()) == "");
  }
}

extern "C" int openblas_get_num_threads(void);

TEST_CASE("selecting a MatMul pins OpenBLAS to one thread") {
  // Note [OpenBLAS threads] in runtime/cpu/Linalg.cpp: OpenBLAS's own
  // threading changes bits, so remat splits GEMMs itself.
  Rng rng(41000);
  auto a = randomData(TensorType(DType::F32, {4, 4}), rng, -1, 1);
  auto one = build(OpKind::MatMul, {input(a), input(a)}, 1);
  auto kernel = selectKernel(*one->node);
  if (!kernel)
    FAIL(errorToString(kernel.takeError()));
  CHECK(openblas_get_num_threads() == 1);
}

extern "C" char *openblas_get_corename(void);

TEST_CASE("the tools' main picks OpenBLAS's kernels from the CPU") {
  // Note [OpenBLAS core type] in runtime/cpu/GemmProvider.cpp: this binary's
  // main, like every tool's, calls selectOpenBlasCore (tools/GemmOption.h).
  bool userSet = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  Rng rng(41001);
  auto a = randomData(TensorType(DType::F32, {4, 4}), rng, -1, 1);
  auto one = build(OpKind::MatMul, {input(a), input(a)}, 1);
  auto kernel = selectKernel(*one->node);
  if (!kernel)
    FAIL(errorToString(kernel.takeError()));
  std::string core = openblas_get_corename();
  std::string again = selectOpenBlasCore();
  CHECK(again == core); // idempotent
  // The environment is as the user left it.
  CHECK((std::getenv("OPENBLAS_CORETYPE") != nullptr) == userSet);
#if defined(__x86_64__)
  if (!userSet && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && !__builtin_cpu_supports("avx512f")) {
    INFO("OpenBLAS core " << core);
    // Not one of OpenBLAS's pre-AVX2 cores (Zen is Haswell's kernels, a
    // newer OpenBLAS may name a newer core).
    CHECK((core == "Haswell" || core == "Zen"));
  }
#endif
}

TEST_CASE("f32 Softmax rows: masked entries are exactly 0, rows sum to 1") {
  // Rows of lengths around a vector width (the loops vectorise, see
  // CMakeLists.txt), with a -inf mask on every third element.
  for (int64_t n : {2, 15, 16, 17, 33, 512, 1000}) {
    Rng rng(42000 + n);
    auto x = std::make_shared<TensorData>(TensorType(DType::F32, {3, n}));
    for (int64_t i = 0; i < 3 * n; ++i)
      x->setDouble(i, i % 3 == 1
                          ? -std::numeric_limits<double>::infinity()
                          : std::uniform_real_distribution<double>(-20, 20)(rng));
    auto one = build(OpKind::Softmax, {input(x)}, 1);
    Outcome outcome = runNode(*one);
    REQUIRE(outcome.error == "");
    auto y = outcome.outputs[0].toData();
    for (int64_t r = 0; r < 3; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        if ((r * n + j) % 3 == 1)
          CHECK(y->getDouble(r * n + j) == 0.0);
        sum += y->getDouble(r * n + j);
      }
      CHECK(std::fabs(sum - 1) < 1e-5);
    }
  }
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_CASE("unsupported combinations are refused at selection, naming them") {
  Rng rng(50000);
  auto h = randomData(TensorType(DType::F16, {2, 2}), rng, -1, 1);
  CHECK(errorOf(*build(OpKind::Add, {input(h), input(h)}, 1)) ==
        "select: Add '%y': the cpu backend has no Add kernel for operands of "
        "dtype f16 (supported: f32, f64, i64, i32, i8, u8)");
  CHECK(errorOf(*build(OpKind::MatMul, {input(h), input(h)}, 1)) ==
        "select: MatMul '%y': the cpu backend has no MatMul kernel for "
        "operands of dtype f16 (supported: f32, f64, i64, i32)");
  CHECK(errorOf(*build(OpKind::Softmax, {input(h)}, 1)) ==
        "select: Softmax '%y': the cpu backend has no Softmax kernel for "
        "operand of dtype f16 (supported: f32, f64)");

  auto data = randomData(TensorType(DType::F32, {3, 3}), rng, -1, 1);
  auto indices = ints({0, 1, 2, 0, 1, 2, 0, 1, 2});
  auto indexData =
      TensorData::fromInts(TensorType(DType::I64, {3, 3}), indices->getInts());
  for (const char *reduction : {"max", "min"}) {
    auto one = buildDeclared(
        OpKind::ScatterElements, {input(data), input(indexData), input(data)},
        {data->getType()}, attrs({{"reduction", std::string(reduction)}}));
    CHECK(errorOf(*one) ==
          std::string("select: ScatterElements '%y': attribute 'reduction' is "
                      "\"") +
              reduction +
              "\", which is ONNX opset 18; remat implements opset 17 "
              "(\"none\", \"add\", \"mul\")");
  }
  auto flags = randomData(TensorType(DType::Bool, {3, 3}), rng, 0, 1);
  CHECK(errorOf(*build(OpKind::ScatterElements,
                       {input(flags), input(indexData), input(flags)}, 1,
                       attrs({{"reduction", std::string("add")}}))) ==
        "select: ScatterElements '%y': the cpu backend has no ScatterElements "
        "kernel for reduction \"add\" on dtype bool (supported: f32, f64, "
        "i64, i32, i8, u8)");
  auto empty = randomData(TensorType(DType::F32, {3, 0}), rng, -1, 1);
  CHECK(errorOf(*build(OpKind::ReduceMax, {input(empty)}, 1,
                       attrs({{"axes", std::vector<int64_t>{1}}}))) ==
        "select: ReduceMax '%y': reduces over an empty axis of f32[3,0] (the "
        "max of nothing is undefined in opset 17)");
  // Declared types that contradict inference are refused before any kernel.
  auto wrong = buildDeclared(OpKind::Add, {input(data), input(data)},
                             {TensorType(DType::F32, {3, 4})});
  CHECK(errorOf(*wrong) ==
        "select: Add '%y': declared type f32[3,4] of result %y does not match "
        "inferred type f32[3,3]");
}

TEST_CASE("value-dependent errors are reported when the kernel runs") {
  Rng rng(51000);
  auto data = randomData(TensorType(DType::F32, {5, 2}), rng, -1, 1);
  CHECK(errorOf(
            *build(OpKind::Gather, {input(data), input(ints({0, 5, 1}))}, 1)) ==
        "run: Gather '%y': index 5 at position 1 of the indices is out of "
        "range [-5, 5) for axis 0");
  CHECK(errorOf(*build(OpKind::Gather,
                       {input(data), input(ints({-6}, DType::I32))}, 1)) ==
        "run: Gather '%y': index -6 at position 0 of the indices is out of "
        "range [-5, 5) for axis 0");

  auto numerators = ints({7, 8, 9});
  CHECK(
      errorOf(*build(OpKind::Div, {input(numerators), input(ints({1, 0, 2}))},
                     1)) ==
      "run: Div '%y': integer division by zero (element 1 of operand 1 is 0)");
  CHECK(
      errorOf(*build(OpKind::Mod, {input(numerators), input(ints({0}))}, 1)) ==
      "run: Mod '%y': integer division by zero (element 0 of operand 1 is 0)");

  auto scores = randomData(TensorType(DType::F32, {2, 3}), rng, -1, 1);
  CHECK(errorOf(*build(OpKind::SoftmaxCrossEntropyLoss,
                       {input(scores), input(ints({1, 3}))}, 1)) ==
        "run: SoftmaxCrossEntropyLoss '%y': label 3 at position 1 is outside "
        "[0, 3)");
  CHECK(errorOf(*build(OpKind::SoftmaxCrossEntropyLoss,
                       {input(scores), input(ints({-1, 0}))}, 1,
                       attrs({{"ignore_index", int64_t(-100)}}))) ==
        "run: SoftmaxCrossEntropyLoss '%y': label -1 at position 0 is outside "
        "[0, 3) and is not ignore_index -100");

  // A runtime shape operand that contradicts the declared result.
  auto reshape =
      buildDeclared(OpKind::Reshape, {input(data), input(ints({5, 2}))},
                    {TensorType(DType::F32, {2, 5})});
  CHECK(errorOf(*reshape) ==
        "run: Reshape '%y': shape [5, 2] gives dims [5, 2], but the node "
        "declares [2, 5]");
  auto ratio = buildDeclared(
      OpKind::Dropout,
      {input(data), input(scalarOf(DType::F32, 1.0)),
       input(TensorData::fromInts(TensorType(DType::Bool, {}), {1}))},
      {data->getType()}, attrs({{"seed", int64_t(1)}}));
  CHECK(errorOf(*ratio) == "run: Dropout '%y': ratio 1 is outside [0, 1)");
  auto range = buildDeclared(OpKind::Range,
                             {input(scalarOf(DType::I64, 0)),
                              input(scalarOf(DType::I64, 5)),
                              input(scalarOf(DType::I64, 0))},
                             {TensorType(DType::I64, {5})});
  CHECK(errorOf(*range) == "run: Range '%y': delta is zero");
  auto pow = build(OpKind::Pow, {input(ints({0, 2})), input(ints({-1, 2}))}, 1);
  CHECK(errorOf(*pow) == "run: Pow '%y': 0 raised to a negative power");
}
