//===- tests/unit/CudaKernelBodiesTest.cpp - CUDA kernel math on the CPU --===//
//
// The CUDA kernels are loops over the __host__ __device__ functions of
// runtime/cuda/KernelBodies.h. Here those functions run on the host over the
// same inputs as the CPU backend's kernels (runtime::cpu::evaluateNode) and
// must give the same bits: they perform the same operations in the same
// order. Needs no GPU and no CUDA toolkit.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelBodies.h"

#include "ir/Graph.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "runtime/cpu/Evaluator.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

using namespace remat;
using namespace remat::ir;
namespace body = remat::runtime::cuda::body;

namespace {

using Dims = std::vector<int64_t>;

std::shared_ptr<TensorData> randomFloats(Dims dims, uint64_t seed,
                                         double lo = -2, double hi = 2) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  auto data = std::make_shared<TensorData>(TensorType(DType::F32, dims));
  for (int64_t i = 0; i < data->getNumElements(); ++i)
    data->setDouble(i, dist(rng));
  return data;
}

std::shared_ptr<TensorData> ints(DType dtype, Dims dims,
                                 std::vector<int64_t> values) {
  return TensorData::fromInts(TensorType(dtype, dims), values);
}

/// \returns \p prefix followed by \p i.
std::string numbered(const char *prefix, size_t i) {
  std::string name = prefix;
  name += std::to_string(i);
  return name;
}

/// Runs \p op on the CPU over \p operands (constants where \p constant
/// says, so that shape inference can read them) and \returns its results.
std::vector<TensorDataPtr> runCpu(OpKind op,
                                  const std::vector<TensorDataPtr> &operands,
                                  unsigned numResults, AttrList attrs = {},
                                  std::vector<bool> constant = {}) {
  Graph graph("body");
  std::vector<Value *> values;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i < constant.size() && constant[i]) {
      AttrList valueAttr;
      valueAttr.set("value", operands[i]);
      values.push_back(graph
                           .createNode(OpKind::Constant, {},
                                       {operands[i]->getType()},
                                       {numbered("c", i)}, valueAttr)
                           ->getResult(0));
      continue;
    }
    values.push_back(
        graph.addInput(numbered("in", i), operands[i]->getType()));
  }
  std::vector<TensorType> placeholder(numResults, TensorType(DType::F32, {}));
  std::vector<std::string> names;
  for (unsigned i = 0; i < numResults; ++i)
    names.push_back(numbered("y", i));
  Node *node = graph.createNode(op, values, placeholder, names, attrs);
  auto inferred = inferTypes(*node);
  REQUIRE_MESSAGE(bool(inferred), "shape inference failed");
  for (unsigned i = 0; i < numResults; ++i)
    node->getResult(i)->setType((*inferred)[i].type);
  std::vector<const TensorData *> raw;
  for (const TensorDataPtr &data : operands)
    raw.push_back(data.get());
  auto results = runtime::cpu::evaluateNode(*node, raw);
  REQUIRE_MESSAGE(bool(results), (results ? std::string()
                                          : errorToString(results.takeError())));
  return std::vector<TensorDataPtr>(results->begin(), results->end());
}

template <typename T> const T *elems(const TensorDataPtr &data) {
  return reinterpret_cast<const T *>(data->getBytes().data());
}

/// Bitwise equality of floats (NaN equals NaN of the same bits).
bool sameBits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

body::Dims toDims(const Dims &dims) {
  body::Dims space;
  space.rank = int(dims.size());
  for (size_t d = 0; d < dims.size(); ++d)
    space.dims[d] = dims[d];
  return space;
}

std::vector<int64_t> rowMajor(const Dims &dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t k = dims.size(); k > 1; --k)
    strides[k - 2] = strides[k - 1] * dims[k - 1];
  return strides;
}

body::Strides broadcastStrides(const Dims &in, const Dims &out) {
  body::Strides layout;
  std::vector<int64_t> strides = rowMajor(in);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    layout.strides[lead + d] = in[d] == 1 ? 0 : strides[d];
  return layout;
}

} // namespace

TEST_CASE("cuda bodies: unary ops give the CPU kernels' bits") {
  auto x = randomFloats({257}, 1, -4, 4);
  struct Case {
    OpKind op;
    body::UnaryOp body;
    const char *approximate;
  } cases[] = {
      {OpKind::Erf, body::UnaryOp::Erf, nullptr},
      {OpKind::Tanh, body::UnaryOp::Tanh, nullptr},
      {OpKind::Relu, body::UnaryOp::Relu, nullptr},
      {OpKind::Sigmoid, body::UnaryOp::Sigmoid, nullptr},
      {OpKind::Exp, body::UnaryOp::Exp, nullptr},
      {OpKind::Neg, body::UnaryOp::Neg, nullptr},
      {OpKind::Gelu, body::UnaryOp::GeluErf, nullptr},
      {OpKind::Gelu, body::UnaryOp::GeluTanh, "tanh"},
      {OpKind::Sin, body::UnaryOp::Sin, nullptr},
      {OpKind::Cos, body::UnaryOp::Cos, nullptr},
      {OpKind::Abs, body::UnaryOp::Abs, nullptr},
      {OpKind::Reciprocal, body::UnaryOp::Reciprocal, nullptr},
      {OpKind::Ceil, body::UnaryOp::Ceil, nullptr},
      {OpKind::Floor, body::UnaryOp::Floor, nullptr},
      {OpKind::Softplus, body::UnaryOp::Softplus, nullptr},
      {OpKind::Acos, body::UnaryOp::Acos, nullptr},
  };
  for (const Case &c : cases) {
    AttrList attrs;
    if (c.approximate)
      attrs.set("approximate", std::string(c.approximate));
    auto y = runCpu(c.op, {x}, 1, attrs);
    for (int64_t i = 0; i < x->getNumElements(); ++i)
      REQUIRE(sameBits(elems<float>(y[0])[i],
                       body::unary(c.body, elems<float>(x)[i])));
  }
  // Sqrt and Log on positive inputs.
  auto pos = randomFloats({100}, 2, 0.01, 9);
  auto s = runCpu(OpKind::Sqrt, {pos}, 1);
  auto l = runCpu(OpKind::Log, {pos}, 1);
  for (int64_t i = 0; i < 100; ++i) {
    CHECK(sameBits(elems<float>(s[0])[i],
                   body::unary(body::UnaryOp::Sqrt, elems<float>(pos)[i])));
    CHECK(sameBits(elems<float>(l[0])[i],
                   body::unary(body::UnaryOp::Log, elems<float>(pos)[i])));
  }
}

TEST_CASE("cuda bodies: Sign gives the CPU kernel's bits and numpy's sign") {
  // An independent reference: NaN stays NaN, either zero gives +0, else
  // +-1 with x's sign bit.
  auto reference = [](float x) {
    if (std::isnan(x))
      return x;
    return x == 0.0f ? 0.0f : std::copysign(1.0f, x);
  };
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> values = {-3.5f, -1e-30f, -0.0f, 0.0f, 1e-30f,
                               2.0f,  -inf,    inf,   nan,  -tiny};
  auto x = std::make_shared<TensorData>(
      TensorType(DType::F32, {static_cast<int64_t>(values.size())}));
  std::memcpy(x->getMutableBytes(), values.data(),
              values.size() * sizeof(float));
  auto y = runCpu(OpKind::Sign, {x}, 1);
  for (size_t i = 0; i < values.size(); ++i) {
    float got = body::unary(body::UnaryOp::Sign, values[i]);
    CHECK(sameBits(got, reference(values[i])));
    CHECK(sameBits(got, elems<float>(y[0])[i]));
  }
  // Integers: signed ones give -1, 0 or 1; unsigned ones 0 or 1.
  auto si = ints(DType::I32, {5}, {INT32_MIN, -7, 0, 1, INT32_MAX});
  auto sy = runCpu(OpKind::Sign, {si}, 1);
  std::vector<int32_t> want = {-1, -1, 0, 1, 1};
  for (int i = 0; i < 5; ++i) {
    CHECK(body::unary(body::UnaryOp::Sign, elems<int32_t>(si)[i]) == want[i]);
    CHECK(elems<int32_t>(sy[0])[i] == want[i]);
  }
  auto ui = ints(DType::U8, {3}, {0, 1, 255});
  auto uy = runCpu(OpKind::Sign, {ui}, 1);
  std::vector<uint8_t> uwant = {0, 1, 1};
  for (int i = 0; i < 3; ++i) {
    CHECK(body::unary(body::UnaryOp::Sign, elems<uint8_t>(ui)[i]) == uwant[i]);
    CHECK(elems<uint8_t>(uy[0])[i] == uwant[i]);
  }
}

TEST_CASE("cuda bodies: broadcast binary ops give the CPU kernels' bits") {
  Dims aDims = {3, 1, 4}, bDims = {2, 1}, outDims = {3, 2, 4};
  auto a = randomFloats(aDims, 3, 0.5, 2);
  auto b = randomFloats(bDims, 4, 0.5, 2);
  body::Dims space = toDims(outDims);
  body::Strides la = broadcastStrides(aDims, outDims);
  body::Strides lb = broadcastStrides(bDims, outDims);
  struct Case {
    OpKind op;
    body::BinaryOp body;
  } cases[] = {{OpKind::Add, body::BinaryOp::Add},
               {OpKind::Sub, body::BinaryOp::Sub},
               {OpKind::Mul, body::BinaryOp::Mul},
               {OpKind::Div, body::BinaryOp::Div},
               {OpKind::Pow, body::BinaryOp::Pow},
               {OpKind::Max, body::BinaryOp::Max},
               {OpKind::Equal, body::BinaryOp::Equal},
               {OpKind::GreaterOrEqual, body::BinaryOp::GreaterOrEqual},
               {OpKind::Min, body::BinaryOp::Min},
               {OpKind::Less, body::BinaryOp::Less},
               {OpKind::LessOrEqual, body::BinaryOp::LessOrEqual},
               {OpKind::Greater, body::BinaryOp::Greater}};
  for (const Case &c : cases) {
    auto y = runCpu(c.op, {a, b}, 1);
    REQUIRE(y[0]->getType().getDims() == llvm::ArrayRef<int64_t>(outDims));
    for (int64_t i = 0; i < 24; ++i) {
      float x = elems<float>(a)[body::offsetOf(space, la, i)];
      float z = elems<float>(b)[body::offsetOf(space, lb, i)];
      if (body::isPredicate(c.body))
        REQUIRE(elems<uint8_t>(y[0])[i] == body::predicate(c.body, x, z));
      else
        REQUIRE(sameBits(elems<float>(y[0])[i], body::binary(c.body, x, z)));
    }
  }
  // Or and And on bool bytes; integer Min.
  auto pa = ints(DType::Bool, {4}, {0, 1, 0, 1});
  auto pb = ints(DType::Bool, {4}, {0, 0, 1, 1});
  for (auto [op, bop] : {std::pair(OpKind::Or, body::BinaryOp::Or),
                         std::pair(OpKind::And, body::BinaryOp::And)}) {
    auto py = runCpu(op, {pa, pb}, 1);
    for (int i = 0; i < 4; ++i)
      CHECK(elems<uint8_t>(py[0])[i] ==
            body::predicate(bop, elems<uint8_t>(pa)[i],
                            elems<uint8_t>(pb)[i]));
  }
  auto ma = ints(DType::I64, {3}, {4, -9, 2});
  auto mb = ints(DType::I64, {3}, {1, 3, 2});
  auto my = runCpu(OpKind::Min, {ma, mb}, 1);
  for (int i = 0; i < 3; ++i)
    CHECK(elems<int64_t>(my[0])[i] ==
          body::binary(body::BinaryOp::Min, elems<int64_t>(ma)[i],
                       elems<int64_t>(mb)[i]));
  // Integer Add wraps like the CPU's.
  auto ia = ints(DType::I32, {2}, {INT32_MAX, -5});
  auto ib = ints(DType::I32, {2}, {1, 7});
  auto iy = runCpu(OpKind::Add, {ia, ib}, 1);
  for (int i = 0; i < 2; ++i)
    CHECK(elems<int32_t>(iy[0])[i] ==
          body::binary(body::BinaryOp::Add, elems<int32_t>(ia)[i],
                       elems<int32_t>(ib)[i]));
}

TEST_CASE("cuda bodies: GeluGrad gives the CPU kernel's bits") {
  // dy broadcast over x's rows, x across GELU's curved part.
  Dims dyDims = {1, 5}, xDims = {4, 5};
  auto dy = randomFloats(dyDims, 41, -2, 2);
  auto x = randomFloats(xDims, 42, -5, 5);
  body::Dims space = toDims(xDims);
  body::Strides ldy = broadcastStrides(dyDims, xDims);
  body::Strides lx = broadcastStrides(xDims, xDims);
  for (const char *approximate : {"none", "tanh"}) {
    INFO(approximate);
    AttrList attrs;
    attrs.set("approximate", std::string(approximate));
    auto y = runCpu(OpKind::GeluGrad, {dy, x}, 1, attrs);
    body::BinaryOp op = std::string(approximate) == "tanh"
                            ? body::BinaryOp::GeluGradTanh
                            : body::BinaryOp::GeluGradErf;
    for (int64_t i = 0; i < 20; ++i) {
      float g = elems<float>(dy)[body::offsetOf(space, ldy, i)];
      float v = elems<float>(x)[body::offsetOf(space, lx, i)];
      REQUIRE(sameBits(elems<float>(y[0])[i], body::binary(op, g, v)));
    }
  }
}

TEST_CASE("cuda bodies: Cast saturates and maps NaN like the CPU") {
  auto x = std::make_shared<TensorData>(TensorType(DType::F32, {6}));
  float values[] = {1.7f, -2.9f, std::numeric_limits<float>::quiet_NaN(), 3e9f,
                    -3e9f, 0.0f};
  for (int i = 0; i < 6; ++i)
    x->setDouble(i, values[i]);
  AttrList toI32;
  toI32.set("to", int64_t(onnxCode(DType::I32)));
  auto y = runCpu(OpKind::Cast, {x}, 1, toI32);
  AttrList toBool;
  toBool.set("to", int64_t(onnxCode(DType::Bool)));
  auto z = runCpu(OpKind::Cast, {x}, 1, toBool);
  for (int i = 0; i < 6; ++i) {
    CHECK(elems<int32_t>(y[0])[i] == body::castValue<int32_t>(values[i]));
    CHECK(elems<uint8_t>(z[0])[i] == body::castToBool(values[i]));
  }
}

TEST_CASE("cuda bodies: Softmax and LogSoftmax columns give the CPU's bits") {
  for (bool isLog : {false, true})
    for (int64_t axis : {1, 2}) {
      Dims dims = {2, 5, 3};
      auto x = randomFloats(dims, 5 + axis, -3, 3);
      AttrList attrs;
      attrs.set("axis", axis);
      auto y = runCpu(isLog ? OpKind::LogSoftmax : OpKind::Softmax, {x}, 1,
                      attrs);
      int64_t outer = 1, n = dims[axis], inner = 1;
      for (int64_t d = 0; d < axis; ++d)
        outer *= dims[d];
      for (size_t d = axis + 1; d < dims.size(); ++d)
        inner *= dims[d];
      std::vector<float> out(30);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t start = o * n * inner + i;
          body::softmaxColumn(elems<float>(x) + start, out.data() + start, n,
                              inner, isLog);
        }
      for (int64_t i = 0; i < 30; ++i)
        REQUIRE(sameBits(out[i], elems<float>(y[0])[i]));
    }
}

TEST_CASE("cuda bodies: LayerNormalization rows give the CPU's bits") {
  // 7 rows: the CPU kernel computes a group of four rows' statistics
  // together, then the other three one by one.
  const int64_t rows = 7, n = 37;
  auto x = randomFloats({rows, n}, 7);
  auto scale = randomFloats({n}, 8);
  auto bias = randomFloats({n}, 9);
  AttrList attrs;
  attrs.set("epsilon", 1e-5f);
  auto y = runCpu(OpKind::LayerNormalization, {x, scale, bias}, 3, attrs);
  std::vector<float> out(rows * n), mean(rows), inv(rows);
  for (int64_t r = 0; r < rows; ++r)
    body::layerNormRow<float, float, float>(
        elems<float>(x) + r * n, elems<float>(scale), elems<float>(bias),
        out.data() + r * n, n, 1e-5f, &mean[r], &inv[r]);
  for (int64_t i = 0; i < rows * n; ++i)
    REQUIRE(sameBits(out[i], elems<float>(y[0])[i]));
  for (int64_t r = 0; r < rows; ++r) {
    CHECK(sameBits(mean[r], elems<float>(y[1])[r]));
    CHECK(sameBits(inv[r], elems<float>(y[2])[r]));
  }
}

TEST_CASE("cuda bodies: DropoutGrad gives the CPU kernel's bits") {
  // dy with signed zeros, infinities and NaN: a dropped element is dy * 0.
  auto dy = randomFloats({4, 9}, 31);
  float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
  for (int i = 0; i < 5; ++i)
    dy->setDouble(i * 7, specials[i]);
  std::vector<int64_t> keep(36);
  for (int i = 0; i < 36; ++i)
    keep[i] = (i * 5) % 3 != 0;
  auto mask = ints(DType::Bool, {4, 9}, keep);
  auto scale = std::make_shared<TensorData>(TensorType(DType::F32, {}));
  scale->setDouble(0, 1.0 / 0.9);
  auto dx = runCpu(OpKind::DropoutGrad, {dy, mask, scale}, 1);
  for (int64_t i = 0; i < 36; ++i)
    REQUIRE(sameBits(body::dropoutGrad(elems<float>(dy)[i], keep[i] != 0,
                                       elems<float>(scale)[0]),
                     elems<float>(dx[0])[i]));
}

TEST_CASE("cuda bodies: SoftmaxGrad columns give the CPU kernel's bits") {
  // Along the last axis with 7 rows (the CPU sums a group of four rows
  // together, then three one by one) and along an inner axis (columns).
  for (int64_t axis : {1, 2}) {
    Dims dims = {1, 7, 37};
    if (axis == 1)
      dims = {2, 5, 3};
    int64_t count = dims[0] * dims[1] * dims[2];
    auto dy = randomFloats(dims, 11 + axis);
    auto y = randomFloats(dims, 13 + axis, 0, 1);
    AttrList attrs;
    attrs.set("axis", axis);
    auto dx = runCpu(OpKind::SoftmaxGrad, {dy, y}, 1, attrs);
    int64_t outer = dims[0], n = dims[axis], inner = axis == 1 ? dims[2] : 1;
    if (axis == 2)
      outer *= dims[1];
    std::vector<float> out(count);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t start = o * n * inner + i;
        body::softmaxGradColumn(elems<float>(dy) + start,
                                elems<float>(y) + start, out.data() + start, n,
                                inner);
      }
    for (int64_t i = 0; i < count; ++i)
      REQUIRE(sameBits(out[i], elems<float>(dx[0])[i]));
  }
}

TEST_CASE("cuda bodies: LayerNormalizationGrad rows give the CPU kernel's "
          "bits") {
  // 7 rows: the CPU sums a group of four rows together, then three one by
  // one.
  const int64_t rows = 7, n = 37;
  auto dy = randomFloats({rows, n}, 21);
  auto x = randomFloats({rows, n}, 22);
  auto scale = randomFloats({n}, 23);
  auto mean = randomFloats({rows, 1}, 24, -0.5, 0.5);
  auto inv = randomFloats({rows, 1}, 25, 0.5, 2);
  auto dx =
      runCpu(OpKind::LayerNormalizationGrad, {dy, x, scale, mean, inv}, 1);
  std::vector<float> out(rows * n);
  for (int64_t r = 0; r < rows; ++r)
    body::layerNormGradRow(elems<float>(dy) + r * n, elems<float>(x) + r * n,
                           elems<float>(scale), out.data() + r * n, n,
                           elems<float>(mean)[r], elems<float>(inv)[r]);
  for (int64_t i = 0; i < rows * n; ++i)
    REQUIRE(sameBits(out[i], elems<float>(dx[0])[i]));
}

TEST_CASE("cuda bodies: SoftmaxCrossEntropyLoss with ignore_index gives the "
          "CPU's bits") {
  // scores [3, 5, 2] (spatial 2), labels [3, 2] with two ignored.
  auto scores = randomFloats({3, 5, 2}, 10, -3, 3);
  auto labels = ints(DType::I64, {3, 2}, {1, -100, 4, 0, -100, 2});
  for (const char *reduction : {"mean", "sum", "none"}) {
    AttrList attrs;
    attrs.set("reduction", std::string(reduction));
    attrs.set("ignore_index", int64_t(-100));
    auto y = runCpu(OpKind::SoftmaxCrossEntropyLoss, {scores, labels}, 2,
                    attrs);
    std::vector<float> losses(6), logProb(30);
    for (int64_t e = 0; e < 6; ++e) {
      int64_t b = e / 2, d = e % 2;
      int64_t start = b * 10 + d;
      losses[e] = body::crossEntropyColumn<float, int64_t>(
          elems<float>(scores) + start, 5, 2, elems<int64_t>(labels)[e], true,
          -100, nullptr, logProb.data() + start);
    }
    for (int64_t i = 0; i < 30; ++i)
      REQUIRE(sameBits(logProb[i], elems<float>(y[1])[i]));
    if (std::string(reduction) == "none") {
      for (int64_t i = 0; i < 6; ++i)
        REQUIRE(sameBits(losses[i], elems<float>(y[0])[i]));
      continue;
    }
    float loss = body::reduceCrossEntropy<float, int64_t>(
        losses.data(), elems<int64_t>(labels), 6,
        std::string(reduction) == "mean", true, -100, nullptr);
    CHECK(sameBits(loss, elems<float>(y[0])[0]));
  }
}

TEST_CASE("cuda bodies: SoftmaxCrossEntropyLoss over contiguous rows gives "
          "the CPU's bits") {
  // scores [6, 37] (no spatial dims: the CPU's contiguous-row loops), one
  // label ignored.
  auto scores = randomFloats({6, 37}, 12, -4, 4);
  auto labels = ints(DType::I64, {6}, {3, 36, -100, 0, 17, 9});
  AttrList attrs;
  attrs.set("reduction", std::string("none"));
  attrs.set("ignore_index", int64_t(-100));
  auto y = runCpu(OpKind::SoftmaxCrossEntropyLoss, {scores, labels}, 2, attrs);
  std::vector<float> logProb(6 * 37);
  for (int64_t b = 0; b < 6; ++b) {
    float loss = body::crossEntropyColumn<float, int64_t>(
        elems<float>(scores) + b * 37, 37, 1, elems<int64_t>(labels)[b], true,
        -100, nullptr, logProb.data() + b * 37);
    REQUIRE(sameBits(loss, elems<float>(y[0])[b]));
  }
  for (int64_t i = 0; i < 6 * 37; ++i)
    REQUIRE(sameBits(logProb[i], elems<float>(y[1])[i]));
}

TEST_CASE("cuda bodies: SoftmaxCrossEntropyGrad gives the CPU kernel's bits") {
  // log_prob [3, 5, 2] (spatial 2), labels and scale [3, 2]; label 7 is
  // outside the classes and matches none.
  auto logProb = randomFloats({3, 5, 2}, 11, -6, 0);
  auto labels = ints(DType::I32, {3, 2}, {1, 0, 4, 7, 2, 2});
  auto scale = randomFloats({3, 2}, 12, -2, 2);
  auto y = runCpu(OpKind::SoftmaxCrossEntropyGrad, {logProb, labels, scale}, 1);
  for (int64_t i = 0; i < 30; ++i) {
    int64_t n = i / 10, c = (i / 2) % 5, row = n * 2 + i % 2;
    float expected = body::crossEntropyGrad(elems<float>(logProb)[i],
                                            elems<int32_t>(labels)[row] == c,
                                            elems<float>(scale)[row]);
    REQUIRE(sameBits(elems<float>(y[0])[i], expected));
  }
}

/// A reduction op and the body's name for it.
struct ReduceCase {
  OpKind op;
  body::ReduceOp body;
};
constexpr ReduceCase kReduceCases[] = {
    {OpKind::ReduceSum, body::ReduceOp::Sum},
    {OpKind::ReduceMean, body::ReduceOp::Mean},
    {OpKind::ReduceMax, body::ReduceOp::Max},
    {OpKind::ReduceL2, body::ReduceOp::L2},
    {OpKind::ReduceLogSumExp, body::ReduceOp::LogSumExp}};

/// The CPU's \p op of \p x over \p axes (ReduceSum's axes an operand, the
/// others' an attribute), dims kept.
TensorDataPtr reduceOnCpu(OpKind op, const TensorDataPtr &x,
                          const std::vector<int64_t> &axes) {
  AttrList attrs;
  bool axesOperand = op == OpKind::ReduceSum;
  std::vector<TensorDataPtr> operands = {x};
  if (axesOperand)
    operands.push_back(ints(DType::I64, {int64_t(axes.size())}, axes));
  else
    attrs.set("axes", axes);
  return runCpu(op, operands, 1, attrs, {false, true})[0];
}

TEST_CASE("cuda bodies: reductions sum in the CPU's order") {
  Dims dims = {3, 4, 5};
  auto x = randomFloats(dims, 11);
  std::vector<int64_t> strides = rowMajor(dims);
  for (const ReduceCase &c : kReduceCases) {
    // Reduce axes 0 and 2, keep dims.
    auto y = std::vector<TensorDataPtr>{reduceOnCpu(c.op, x, {0, 2})};
    body::Dims keptSpace = toDims({4}), reducedSpace = toDims({3, 5});
    body::Strides kept, reduced;
    kept.strides[0] = strides[1];
    reduced.strides[0] = strides[0];
    reduced.strides[1] = strides[2];
    for (int64_t o = 0; o < 4; ++o)
      REQUIRE(sameBits(body::reduceElement(c.body, elems<float>(x), keptSpace,
                                           kept, reducedSpace, reduced, 15, o),
                       elems<float>(y[0])[o]));
  }
}

/// What reduceGroupsKernel and reduceColumnsKernel compute for output
/// \p o with \p group threads: each thread's partial, then the fixed tree.
float parallelReduce(body::ReduceOp op, const float *x, int64_t base,
                     const body::Dims &reducedSpace,
                     const body::Strides &reduced, int64_t reduceCount,
                     int group) {
  std::vector<float> partial(size_t(group), 0.f);
  for (int t = 0; t < group; ++t)
    partial[size_t(t)] = body::reducePartial(op, x, base, reducedSpace, reduced,
                                             reduceCount, t, group);
  for (int s = group / 2; s > 0; s /= 2)
    for (int t = 0; t < s; ++t)
      partial[size_t(t)] =
          body::reduceCombine(op, partial[size_t(t)], partial[size_t(t + s)]);
  return body::reduceFinish(op, partial[0], reduceCount);
}

TEST_CASE("cuda bodies: the parallel reductions' tree against the CPU") {
  // 3 x 70 x 5, reducing axes 0 and 2 (15 per output, fewer than some
  // groups' threads) and axis 1 (70).
  Dims dims = {3, 70, 5};
  auto x = randomFloats(dims, 21);
  std::vector<int64_t> strides = rowMajor(dims);
  for (const ReduceCase &c : kReduceCases) {
    if (c.body == body::ReduceOp::LogSumExp)
      continue; // reduceElement's two passes, not the tree
    for (bool middle : {false, true}) {
      std::vector<int64_t> axes =
          middle ? std::vector<int64_t>{1} : std::vector<int64_t>{0, 2};
      auto y = std::vector<TensorDataPtr>{reduceOnCpu(c.op, x, axes)};
      body::Dims keptSpace, reducedSpace;
      body::Strides kept, reduced;
      for (int d = 0; d < 3; ++d) {
        bool isReduced = middle ? d == 1 : d != 1;
        body::Dims &space = isReduced ? reducedSpace : keptSpace;
        body::Strides &layout = isReduced ? reduced : kept;
        layout.strides[space.rank] = strides[size_t(d)];
        space.dims[space.rank++] = dims[size_t(d)];
      }
      int64_t reduceCount = middle ? 70 : 15, count = middle ? 15 : 70;
      for (int group : {1, 32, 256}) {
        for (int64_t o = 0; o < count; ++o) {
          float got = parallelReduce(c.body, elems<float>(x),
                                     body::offsetOf(keptSpace, kept, o),
                                     reducedSpace, reduced, reduceCount, group);
          float expected = elems<float>(y[0])[o];
          INFO(int(c.op), " middle ", middle, " group ", group, " o ", o);
          if (c.body == body::ReduceOp::Max || group == 1)
            REQUIRE(sameBits(got, expected)); // Max, and the CPU's order
          else
            REQUIRE(got == doctest::Approx(expected).epsilon(1e-6));
        }
      }
    }
  }
}

TEST_CASE("cuda bodies: the parallel Max lets NaN win, starting from -inf") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  body::Dims space;
  space.rank = 1;
  space.dims[0] = 5;
  body::Strides layout;
  layout.strides[0] = 1;
  std::vector<float> withNaN = {1, 2, nan, 7, 3};
  for (int group : {1, 2, 4, 32})
    CHECK(std::isnan(parallelReduce(body::ReduceOp::Max, withNaN.data(), 0,
                                    space, layout, 5, group)));
  std::vector<float> allLow = {-inf, -inf, -inf, -inf, -inf};
  CHECK(parallelReduce(body::ReduceOp::Max, allLow.data(), 0, space, layout, 5,
                       32) == -inf);
}

TEST_CASE("cuda bodies: collapseDims merges what every layout steps alike") {
  // A same-shape Add of [2, 3, 4]: one dim of 24.
  body::Dims space = toDims({2, 3, 4});
  body::Strides a, b;
  for (int d = 0; d < 3; ++d)
    a.strides[d] = b.strides[d] = rowMajor({2, 3, 4})[size_t(d)];
  body::collapseDims(space, a, b);
  CHECK(space.rank == 1);
  CHECK(space.dims[0] == 24);
  CHECK(a.strides[0] == 1);
  CHECK(b.strides[0] == 1);

  // A bias [4] broadcast over [2, 3, 4], size-1 dims dropped: [6, 4].
  space = toDims({2, 1, 3, 4});
  body::Strides full, bias;
  for (int d = 0; d < 4; ++d)
    full.strides[d] = rowMajor({2, 1, 3, 4})[size_t(d)];
  bias.strides[3] = 1;
  body::collapseDims(space, full, bias);
  REQUIRE(space.rank == 2);
  CHECK(space.dims[0] == 6);
  CHECK(space.dims[1] == 4);
  CHECK(full.strides[0] == 4);
  CHECK(full.strides[1] == 1);
  CHECK(bias.strides[0] == 0);
  CHECK(bias.strides[1] == 1);
  CHECK(bias.strides[2] == 0);

  // A transpose [2, 3, 4] -> [3, 2, 4] read through permuted strides keeps
  // three dims apart from ... nothing: dims 1 and 2 of the space (2, 4) do
  // not merge for the input (stride 12 then 1).
  space = toDims({3, 2, 4});
  body::Strides in, out;
  in.strides[0] = 4, in.strides[1] = 12, in.strides[2] = 1;
  for (int d = 0; d < 3; ++d)
    out.strides[d] = rowMajor({3, 2, 4})[size_t(d)];
  body::Strides before = in;
  body::collapseDims(space, in, out);
  CHECK(space.rank == 3);
  CHECK(in.strides[1] == before.strides[1]);

  // The same elements in the same order: every offset of a random layout.
  body::Dims original = toDims({3, 1, 4, 5, 1});
  body::Strides layoutA, layoutB;
  std::vector<int64_t> rm = rowMajor({3, 1, 4, 5, 1});
  for (int d = 0; d < 5; ++d) {
    layoutA.strides[d] = rm[size_t(d)];
    layoutB.strides[d] = d == 2 ? 0 : rm[size_t(d)] * 2;
  }
  layoutB.base = 7;
  body::Dims merged = original;
  body::Strides mergedA = layoutA, mergedB = layoutB;
  body::collapseDims(merged, mergedA, mergedB);
  CHECK(merged.rank < original.rank);
  for (int64_t i = 0; i < 60; ++i) {
    CHECK(body::offsetOf(merged, mergedA, i) ==
          body::offsetOf(original, layoutA, i));
    CHECK(body::offsetOf(merged, mergedB, i) ==
          body::offsetOf(original, layoutB, i));
  }
}

TEST_CASE("cuda bodies: offsetOf's 32-bit path splits indices as 64-bit does") {
  // 64-bit reference: the plain division.
  auto reference = [](const body::Dims &space, const body::Strides &layout,
                      int64_t linear) {
    int64_t offset = layout.base;
    for (int d = space.rank - 1; d >= 0; --d) {
      offset += (linear % space.dims[d]) * layout.strides[d];
      linear /= space.dims[d];
    }
    return offset;
  };
  body::Dims space = toDims({7, 3, 11, 2});
  body::Strides layout;
  layout.base = 5;
  layout.strides[0] = 1000, layout.strides[1] = 0, layout.strides[2] = 3,
  layout.strides[3] = -1;
  for (int64_t i = 0; i < 7 * 3 * 11 * 2; ++i)
    REQUIRE(body::offsetOf(space, layout, i) == reference(space, layout, i));
  // Dims of 2^32 and more, and indices past 2^32 (the 64-bit path).
  body::Dims huge = toDims({3, int64_t(1) << 33});
  body::Strides hugeLayout;
  hugeLayout.strides[0] = int64_t(1) << 33, hugeLayout.strides[1] = 1;
  for (int64_t i : {int64_t(0), int64_t(5), int64_t(UINT32_MAX),
                    (int64_t(1) << 33) + 9, 3 * (int64_t(1) << 33) - 1})
    CHECK(body::offsetOf(huge, hugeLayout, i) ==
          reference(huge, hugeLayout, i));
}

TEST_CASE("cuda bodies: Gather and Transpose offsets") {
  auto data = randomFloats({2, 5, 3}, 12);
  auto indices = ints(DType::I64, {2, 2}, {4, -1, 0, 2});
  AttrList attrs;
  attrs.set("axis", int64_t(1));
  auto y = runCpu(OpKind::Gather, {data, indices}, 1, attrs);
  REQUIRE(y[0]->getNumElements() == 24);
  for (int64_t o = 0; o < 24; ++o) {
    int64_t offset =
        body::gatherOffset(elems<int64_t>(indices), 4, 5, 3, o);
    REQUIRE(offset >= 0);
    REQUIRE(sameBits(elems<float>(data)[offset], elems<float>(y[0])[o]));
  }
  CHECK(body::wrapIndex(5, 5) == -1);
  CHECK(body::wrapIndex(-6, 5) == -1);

  AttrList perm;
  perm.set("perm", std::vector<int64_t>{2, 0, 1});
  auto t = runCpu(OpKind::Transpose, {data}, 1, perm);
  std::vector<int64_t> strides = rowMajor({2, 5, 3});
  body::Dims space = toDims({3, 2, 5});
  body::Strides in;
  in.strides[0] = strides[2];
  in.strides[1] = strides[0];
  in.strides[2] = strides[1];
  for (int64_t o = 0; o < 30; ++o)
    REQUIRE(sameBits(elems<float>(data)[body::offsetOf(space, in, o)],
                     elems<float>(t[0])[o]));
}

TEST_CASE("cuda bodies: GatherElements, Trilu, CumSum and Pad give the CPU's "
          "bits") {
  // GatherElements reads where ScatterElements would write.
  auto data = randomFloats({3, 4}, 21);
  auto indices = ints(DType::I64, {2, 4}, {2, 0, -1, 1, 1, 1, 0, -3});
  auto g = runCpu(OpKind::GatherElements, {data, indices}, 1);
  std::vector<int64_t> dataStrides = rowMajor({3, 4});
  for (int64_t o = 0; o < 8; ++o) {
    int64_t offset = body::scatterTarget(elems<int64_t>(indices),
                                         toDims({2, 4}), dataStrides.data(), 0,
                                         3, o);
    REQUIRE(offset >= 0);
    REQUIRE(sameBits(elems<float>(data)[offset], elems<float>(g[0])[o]));
  }

  auto x = randomFloats({2, 3, 5}, 22);
  for (int64_t upper : {0, 1})
    for (int64_t k : {-2, 0, 1, 4}) {
      AttrList attrs;
      attrs.set("upper", upper);
      auto t = runCpu(OpKind::Trilu, {x, ints(DType::I64, {}, {k})}, 1, attrs);
      for (int64_t o = 0; o < 30; ++o) {
        bool keep = body::triluKeeps(upper != 0, k, (o / 5) % 3, o % 5);
        REQUIRE(sameBits(elems<float>(t[0])[o],
                         keep ? elems<float>(x)[o] : 0.0f));
      }
    }

  for (int64_t flags = 0; flags < 4; ++flags) {
    AttrList attrs;
    attrs.set("exclusive", flags & 1);
    attrs.set("reverse", flags >> 1);
    auto c = runCpu(OpKind::CumSum, {x, ints(DType::I64, {}, {1})}, 1, attrs);
    std::vector<float> line(30);
    // Axis 1 of [2, 3, 5]: 10 lines of 3, stride 5.
    for (int64_t outer = 0; outer < 2; ++outer)
      for (int64_t inner = 0; inner < 5; ++inner) {
        int64_t base = outer * 15 + inner;
        body::cumSumLine(elems<float>(x) + base, line.data() + base, 3, 5,
                         (flags & 1) != 0, (flags >> 1) != 0);
      }
    for (int64_t o = 0; o < 30; ++o)
      REQUIRE(sameBits(line[o], elems<float>(c[0])[o]));
  }

  const std::pair<const char *, body::PadMode> modes[] = {
      {"constant", body::PadMode::Constant},
      {"reflect", body::PadMode::Reflect},
      {"edge", body::PadMode::Edge},
      {"wrap", body::PadMode::Wrap}};
  auto small = randomFloats({3, 2}, 23);
  for (const auto &entry : modes) {
    // Not a structured binding: clang 14 cannot capture one in INFO's lambda.
    const char *name = entry.first;
    body::PadMode mode = entry.second;
    INFO(name);
    AttrList attrs;
    attrs.set("mode", std::string(name));
    // Pads [2, 1] before, [1, 2] after: output [6, 5].
    auto pads = ints(DType::I64, {4}, {2, 1, 1, 2});
    auto value = randomFloats({}, 24);
    auto p = runCpu(OpKind::Pad, {small, pads, value}, 1, attrs,
                    {false, true, false});
    REQUIRE(p[0]->getNumElements() == 30);
    int64_t begin[2] = {2, 1};
    for (int64_t o = 0; o < 30; ++o) {
      int64_t offset =
          body::padOffset(toDims({6, 5}), toDims({3, 2}), begin, mode, o);
      float want = offset < 0 ? elems<float>(value)[0]
                              : elems<float>(small)[offset];
      REQUIRE(sameBits(want, elems<float>(p[0])[o]));
    }
  }
}

TEST_CASE("cuda bodies: Clip and Tile give the CPU's bits") {
  auto x = randomFloats({5, 7}, 25, -2, 2);
  auto lo = randomFloats({}, 26, -1, 0);
  auto hi = randomFloats({1}, 27, 0, 1);
  auto both = runCpu(OpKind::Clip, {x, lo, hi}, 1);
  auto minOnly = runCpu(OpKind::Clip, {x, lo}, 1);
  for (int64_t i = 0; i < 35; ++i) {
    float xi = elems<float>(x)[i];
    REQUIRE(sameBits(elems<float>(both[0])[i],
                     body::clipElement(xi, elems<float>(lo),
                                       elems<float>(hi))));
    REQUIRE(sameBits(elems<float>(minOnly[0])[i],
                     body::clipElement(xi, elems<float>(lo),
                                       static_cast<const float *>(nullptr))));
  }
  auto small = randomFloats({2, 1, 3}, 28);
  auto t = runCpu(OpKind::Tile, {small, ints(DType::I64, {3}, {3, 2, 2})}, 1,
                  {}, {false, true});
  REQUIRE(t[0]->getNumElements() == 72);
  for (int64_t o = 0; o < 72; ++o)
    REQUIRE(sameBits(
        elems<float>(small)[body::tileOffset(toDims({6, 2, 6}),
                                             toDims({2, 1, 3}), o)],
        elems<float>(t[0])[o]));
}

TEST_CASE("cuda bodies: ArgMax, ArgMin and TopK give the CPU's results") {
  // Small integers as floats tie often; two NaNs and a -0 beside 0.
  Dims dims = {3, 5, 4};
  std::mt19937_64 rng(41);
  std::uniform_int_distribution<int> small(0, 3);
  auto x = std::make_shared<TensorData>(TensorType(DType::F32, dims));
  for (int64_t i = 0; i < 60; ++i)
    x->setDouble(i, small(rng));
  x->setDouble(9, std::numeric_limits<double>::quiet_NaN());
  x->setDouble(29, std::numeric_limits<double>::quiet_NaN());
  x->setDouble(30, -0.0);
  for (int64_t axis = 0; axis < 3; ++axis) {
    int64_t outer = 1, inner = 1, count = dims[axis];
    for (int64_t d = 0; d < axis; ++d)
      outer *= dims[d];
    for (int64_t d = axis + 1; d < 3; ++d)
      inner *= dims[d];
    for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin})
      for (int64_t last : {0, 1}) {
        INFO(getOpSpelling(op) << " axis " << axis << " last " << last);
        AttrList attrs;
        attrs.set("axis", axis);
        attrs.set("select_last_index", last);
        auto y = runCpu(op, {x}, 1, attrs);
        for (int64_t o = 0; o < outer * inner; ++o)
          CHECK(elems<int64_t>(y[0])[o] ==
                body::argReduceElement(op == OpKind::ArgMax, last != 0,
                                       elems<float>(x), count, inner, o));
      }
    for (int64_t largest : {0, 1})
      for (int64_t k : {int64_t(1), count - 1, count}) {
        INFO("TopK axis " << axis << " largest " << largest << " k " << k);
        AttrList attrs;
        attrs.set("axis", axis);
        attrs.set("largest", largest);
        auto y = runCpu(OpKind::TopK, {x, ints(DType::I64, {1}, {k})}, 2, attrs,
                        {false, true});
        // Every input element at its place below K gives the CPU's value
        // and index there; together they fill the result.
        int64_t filled = 0;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i)
            for (int64_t j = 0; j < count; ++j) {
              const float *line = elems<float>(x) + o * count * inner + i;
              int64_t place =
                  body::topKPlace(line, count, inner, j, largest != 0);
              if (place >= k)
                continue;
              int64_t at = (o * k + place) * inner + i;
              CHECK(elems<int64_t>(y[1])[at] == j);
              CHECK(sameBits(elems<float>(y[0])[at], line[j * inner]));
              ++filled;
            }
        CHECK(filled == outer * k * inner);
      }
  }
}

TEST_CASE("cuda bodies: Conv and ConvTranspose give the CPU's bits") {
  struct Case {
    const char *name;
    OpKind op;
    Dims x, w;
    std::vector<int64_t> strides, pads, dilations;
    int64_t group;
    bool bias;
  } cases[] = {
      // ViT's patch embedding: stride = kernel.
      {"patches", OpKind::Conv, {2, 3, 8, 8}, {5, 3, 4, 4}, {4, 4},
       {0, 0, 0, 0}, {1, 1}, 1, true},
      {"padded, strided", OpKind::Conv, {1, 2, 7, 6}, {3, 2, 3, 3}, {2, 1},
       {1, 0, 1, 2}, {1, 1}, 1, false},
      {"1-d, dilated, groups", OpKind::Conv, {2, 4, 11}, {6, 2, 3}, {1},
       {2, 1}, {2}, 2, true},
      {"transpose", OpKind::ConvTranspose, {2, 3, 4, 5}, {3, 2, 3, 3}, {2, 2},
       {1, 1, 1, 1}, {1, 1}, 1, true},
  };
  uint64_t seed = 40;
  for (const Case &c : cases) {
    INFO(c.name);
    size_t rank = c.x.size() - 2;
    AttrList attrs;
    attrs.set("strides", c.strides);
    attrs.set("pads", c.pads);
    attrs.set("dilations", c.dilations);
    attrs.set("group", c.group);
    int64_t outChannels =
        c.op == OpKind::Conv ? c.w[0] : c.w[1] * c.group;
    std::vector<TensorDataPtr> operands = {randomFloats(c.x, ++seed),
                                           randomFloats(c.w, ++seed)};
    if (c.bias)
      operands.push_back(randomFloats({outChannels}, ++seed));
    auto y = runCpu(c.op, operands, 1, attrs);
    const Dims &yDims = y[0]->getType().getDims();
    body::ConvShape shape;
    shape.rank = int(rank);
    shape.inChannels = c.x[1];
    shape.outChannels = outChannels;
    shape.group = c.group;
    shape.transpose = c.op == OpKind::ConvTranspose;
    for (size_t d = 0; d < rank; ++d) {
      shape.inSpatial[d] = c.x[2 + d];
      shape.outSpatial[d] = yDims[2 + d];
      shape.kernel[d] = c.w[2 + d];
      shape.strides[d] = c.strides[d];
      shape.dilations[d] = c.dilations[d];
      shape.padBegin[d] = c.pads[d];
    }
    int64_t count = y[0]->getNumElements();
    REQUIRE(count > 0);
    for (int64_t e = 0; e < count; ++e)
      REQUIRE(sameBits(body::convElement(shape, elems<float>(operands[0]),
                                         elems<float>(operands[1]),
                                         c.bias ? elems<float>(operands[2])
                                                : nullptr,
                                         e),
                       elems<float>(y[0])[e]));
  }
}

TEST_CASE("cuda bodies: pooling and its gradients give the CPU's bits") {
  struct Case {
    const char *name;
    OpKind op;
    Dims x;
    std::vector<int64_t> kernel, strides, pads, dilations;
    bool ceil, includePad;
  } cases[] = {
      {"canine max 1-d",
       OpKind::MaxPool,
       {2, 3, 12},
       {4},
       {4},
       {0, 0},
       {1},
       false,
       false},
      {"max 2-d padded dilated ceil",
       OpKind::MaxPool,
       {1, 2, 7, 6},
       {3, 2},
       {2, 1},
       {1, 0, 1, 1},
       {1, 2},
       true,
       false},
      {"funnel avg",
       OpKind::AveragePool,
       {2, 1, 7, 4},
       {2, 1},
       {2, 1},
       {0, 0, 0, 0},
       {1, 1},
       true,
       true},
      {"avg padded",
       OpKind::AveragePool,
       {1, 2, 5, 5},
       {3, 3},
       {2, 1},
       {1, 1, 1, 1},
       {1, 1},
       true,
       false},
  };
  uint64_t seed = 400;
  for (const Case &c : cases) {
    INFO(c.name);
    size_t rank = c.x.size() - 2;
    bool max = c.op == OpKind::MaxPool;
    AttrList attrs;
    attrs.set("kernel_shape", c.kernel);
    attrs.set("strides", c.strides);
    attrs.set("pads", c.pads);
    attrs.set("dilations", c.dilations);
    attrs.set("ceil_mode", int64_t(c.ceil));
    if (!max)
      attrs.set("count_include_pad", int64_t(c.includePad));
    auto x = randomFloats(c.x, ++seed);
    auto y = runCpu(c.op, {x}, 1, attrs);
    const Dims &yDims = y[0]->getType().getDims();
    body::PoolShape shape;
    shape.rank = int(rank);
    shape.countIncludePad = c.includePad;
    for (size_t d = 0; d < rank; ++d) {
      shape.inSpatial[d] = c.x[2 + d];
      shape.outSpatial[d] = yDims[2 + d];
      shape.kernel[d] = c.kernel[d];
      shape.strides[d] = c.strides[d];
      shape.dilations[d] = c.dilations[d];
      shape.padBegin[d] = c.pads[d];
      shape.padEnd[d] = c.pads[rank + d];
    }
    int64_t count = y[0]->getNumElements();
    REQUIRE(count > 0);
    for (int64_t e = 0; e < count; ++e)
      REQUIRE(sameBits(body::poolElement(shape, max, elems<float>(x), e),
                       elems<float>(y[0])[e]));
    // The gradient, of a random dy.
    auto dy = randomFloats(yDims, ++seed);
    auto dx = max ? runCpu(OpKind::MaxPoolGrad, {dy, x}, 1, attrs)
                  : runCpu(OpKind::AveragePoolGrad,
                           {dy, ints(DType::I64, {int64_t(c.x.size())}, c.x)},
                           1, attrs, {false, true});
    REQUIRE(dx[0]->getNumElements() == x->getNumElements());
    for (int64_t e = 0; e < x->getNumElements(); ++e)
      REQUIRE(
          sameBits(body::poolGradElement(shape, elems<float>(dy),
                                         max ? elems<float>(x) : nullptr, e),
                   elems<float>(dx[0])[e]));
  }
}

TEST_CASE("cuda bodies: ScatterElements add, sorted by target, gives the "
          "CPU's bits") {
  // data [4, 3], updates [5, 3] along axis 0 with repeated targets: the
  // embedding gradient's shape.
  auto data = randomFloats({4, 3}, 13);
  auto updates = randomFloats({5, 3}, 14);
  auto indices = ints(DType::I64, {5, 3},
                      {1, 1, 1, 3, 3, 3, 1, 1, 1, -4, -4, -4, 1, 2, 1});
  AttrList attrs;
  attrs.set("axis", int64_t(0));
  attrs.set("reduction", std::string("add"));
  auto y = runCpu(OpKind::ScatterElements, {data, indices, updates}, 1, attrs);
  body::Dims space = toDims({5, 3});
  std::vector<int64_t> dataStrides = rowMajor({4, 3});
  std::vector<int64_t> targets(15), positions(15);
  for (int64_t p = 0; p < 15; ++p) {
    targets[p] = body::scatterTarget(elems<int64_t>(indices), space,
                                     dataStrides.data(), 0, 4, p);
    REQUIRE(targets[p] >= 0);
  }
  // What the device's stable radix sort by target gives.
  std::iota(positions.begin(), positions.end(), 0);
  std::stable_sort(positions.begin(), positions.end(),
                   [&](int64_t a, int64_t b) { return targets[a] < targets[b]; });
  std::vector<int64_t> sortedTargets;
  for (int64_t p : positions)
    sortedTargets.push_back(targets[p]);
  for (int64_t o = 0; o < 12; ++o) {
    int64_t begin = body::lowerBound(sortedTargets.data(), 15, o);
    int64_t end = body::lowerBound(sortedTargets.data(), 15, o + 1);
    float value = body::scatterCombine(elems<float>(data)[o],
                                       elems<float>(updates), positions.data(),
                                       begin, end, /*multiply=*/false);
    REQUIRE(sameBits(value, elems<float>(y[0])[o]));
  }
}

TEST_CASE("cuda bodies: Dropout draws the CPU's mask and values") {
  auto x = randomFloats({1000}, 15);
  auto ratio = std::make_shared<TensorData>(TensorType(DType::F32, {}));
  ratio->setDouble(0, 0.3);
  auto training = ints(DType::Bool, {}, {1});
  AttrList attrs;
  attrs.set("seed", int64_t(1234));
  auto y = runCpu(OpKind::Dropout, {x, ratio, training}, 2, attrs,
                  {false, true, true});
  uint64_t key = runtime::dropoutKey(1234);
  uint32_t threshold = runtime::dropoutThreshold(0.3f);
  float scale = 1.0f / (1.0f - 0.3f);
  int64_t dropped = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    bool keep;
    float value =
        body::dropout(elems<float>(x)[i], key, i, threshold, scale, keep);
    REQUIRE(sameBits(value, elems<float>(y[0])[i]));
    REQUIRE(uint8_t(keep) == elems<uint8_t>(y[1])[i]);
    dropped += !keep;
  }
  CHECK(dropped > 200);
  CHECK(dropped < 400);
}

#if REMAT_HAVE_CUDA
#include "session/ModelLoader.h"
#include "session/Pipeline.h"
#include "runtime/cuda/CudaBackend.h"

namespace {

/// The training step of \p model in its planned arena, as remat-run runs it.
std::unique_ptr<Graph> trainingStep(const std::string &model,
                                    const std::string &bind) {
  session::LoadOptions load;
  load.bind = bind;
  auto graph = session::loadModel(model, load);
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  auto ran = session::runPipeline(
      **graph, std::string(session::kTrainingPipeline) + ",schedule,plan-memory",
      session::PipelineOptions(), llvm::nulls());
  REQUIRE_MESSAGE(bool(ran), errorToString(ran.takeError()));
  return std::move(*graph);
}

} // namespace

TEST_CASE("cuda: cuBLAS opens and has every function the backend calls") {
  // Needs the toolkit's libcublas on the loader's path, not a GPU. Where it
  // is not found the case says so; a missing function is a failure.
  if (auto err = runtime::cuda::loadCublas()) {
    std::string message = errorToString(std::move(err));
    if (message.find("cannot load") != std::string::npos) {
      MESSAGE("skipped: " << message);
      return;
    }
    FAIL(message);
  }
}

TEST_CASE("cuda coverage: training steps run every node on the device") {
  // Which nodes need the host is decided without a GPU: BERT built from its
  // config and the torch exports must need none (a host node synchronizes
  // the stream and copies its operands over the bus).
  struct Case {
    std::string model, bind;
  } cases[] = {
      {REMAT_TEST_DIR "/../models/bert-tiny.json",
       "batch=2,seq=16"},
      {REMAT_TEST_DIR "/fixtures/bert_ts_op17/model.onnx",
       "batch=2,seq=16"},
      {REMAT_TEST_DIR "/fixtures/bert_dynamo/model.onnx",
       "batch=2,seq=16"},
      // ViT's patch embedding is a Conv, trained through ConvTranspose.
      {REMAT_TEST_DIR "/fixtures/fam_vit_ts_op17/model.onnx", "batch=2"},
      {REMAT_TEST_DIR "/fixtures/fam_vit_dynamo/model.onnx", "batch=2"},
  };
  for (const Case &c : cases) {
    CAPTURE(c.model);
    auto graph = trainingStep(c.model, c.bind);
    auto coverage = runtime::cuda::planCudaCoverage(*graph);
    REQUIRE_MESSAGE(bool(coverage), errorToString(coverage.takeError()));
    std::string hosts;
    for (const std::string &node : coverage->hostNodes)
      hosts += node + "\n";
    CHECK_MESSAGE(coverage->hostNodes.empty(), hosts);
    CHECK(coverage->deviceNodes > 100);
  }
}
#endif

//===----------------------------------------------------------------------===//
// The fused gradient ops against plain f64 formulas. The tests above hold
// the CUDA bodies to the CPU kernels' bits, and several CPU kernels call
// those bodies: alone they cannot catch a wrong body. Here each body, and
// the CPU kernel in f32 (rows long enough for its SIMD paths and short
// ones) and in f64, is held to the formula written out below, independent
// of both. Tolerances (|got - want| <= tol * (1 + |want|)): the f64 kernel
// 1e-12; f32 elementwise ops 2e-6 (a few f32 roundings); f32 row ops over
// up to 37 elements 2e-5 (sums of 37 rounded terms).
//===----------------------------------------------------------------------===//

namespace {

/// \p data as f64.
TensorDataPtr toF64(const TensorDataPtr &data) {
  auto out = std::make_shared<TensorData>(
      TensorType(DType::F64, data->getType().getDims()));
  for (int64_t i = 0; i < data->getNumElements(); ++i)
    out->setDouble(i, data->getDouble(i));
  return out;
}

/// Checks \p got (\p what, element \p i) against \p want within \p tol
/// relative to 1 + |want|; a NaN or infinity must be matched exactly.
void checkNear(double got, double want, double tol, const std::string &what,
               int64_t i) {
  INFO(what << " element " << i << ": got " << got << ", want " << want);
  if (!std::isfinite(want)) {
    CHECK((std::isnan(want) ? std::isnan(got) : got == want));
    return;
  }
  REQUIRE(std::abs(got - want) <= tol * (1 + std::abs(want)));
}

/// Checks the f32 and f64 CPU kernel outputs \p f32 and \p f64 of \p op
/// against \p want.
void checkKernels(const TensorDataPtr &f32, const TensorDataPtr &f64,
                  const std::vector<double> &want, double tol,
                  const std::string &what) {
  REQUIRE(f32->getNumElements() == int64_t(want.size()));
  REQUIRE(f64->getNumElements() == int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    checkNear(f64->getDouble(int64_t(i)), want[i], 1e-12, what + " f64 kernel",
              int64_t(i));
    checkNear(f32->getDouble(int64_t(i)), want[i], tol, what + " f32 kernel",
              int64_t(i));
  }
}

/// Gelu'(x) in f64: exact ("none") or the tanh approximation.
double geluDerivative(double x, bool tanhForm) {
  if (!tanhForm) {
    double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    double pdf = std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
    return cdf + x * pdf;
  }
  double c = std::sqrt(2 / M_PI), k = 0.044715;
  double t = std::tanh(c * (x + k * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * k * x * x);
}

} // namespace

TEST_CASE("fused gradients against f64: GeluGrad") {
  // Contiguous rows of 67 (the CPU's SIMD loop and its tail) and of 5 (the
  // scalar path), and dy broadcast over x's rows.
  struct Shape {
    Dims dy, x;
  } shapes[] = {{{3, 67}, {3, 67}}, {{4, 5}, {4, 5}}, {{1, 5}, {4, 5}}};
  for (const Shape &shape : shapes)
    for (bool tanhForm : {false, true}) {
      std::string what = std::string("GeluGrad ") +
                         (tanhForm ? "tanh " : "none ") +
                         std::to_string(shape.x[1]) + "-wide rows";
      auto dy = randomFloats(shape.dy, 51, -2, 2);
      auto x = randomFloats(shape.x, 52, -6, 6);
      AttrList attrs;
      attrs.set("approximate", std::string(tanhForm ? "tanh" : "none"));
      auto f32 = runCpu(OpKind::GeluGrad, {dy, x}, 1, attrs);
      auto f64 = runCpu(OpKind::GeluGrad, {toF64(dy), toF64(x)}, 1, attrs);
      body::Dims space = toDims(shape.x);
      body::Strides ldy = broadcastStrides(shape.dy, shape.x);
      std::vector<double> want;
      for (int64_t i = 0; i < x->getNumElements(); ++i) {
        double g = dy->getDouble(body::offsetOf(space, ldy, i));
        double v = x->getDouble(i);
        want.push_back(g * geluDerivative(v, tanhForm));
        float got = body::binary(tanhForm ? body::BinaryOp::GeluGradTanh
                                          : body::BinaryOp::GeluGradErf,
                                 float(g), float(v));
        checkNear(got, want.back(), 2e-6, what + " body", i);
      }
      checkKernels(f32[0], f64[0], want, 2e-6, what);
    }
}

TEST_CASE("fused gradients against f64: DropoutGrad") {
  // 75 elements (SIMD loop and tail), dy with infinities and NaN.
  auto dy = randomFloats({3, 25}, 53);
  dy->setDouble(3, INFINITY);
  dy->setDouble(4, -INFINITY);
  dy->setDouble(9, NAN);
  std::vector<int64_t> keep(75);
  for (int i = 0; i < 75; ++i)
    keep[size_t(i)] = (i * 7) % 4 != 0;
  keep[3] = 0; // infinity * 0
  keep[4] = 1;
  auto mask = ints(DType::Bool, {3, 25}, keep);
  auto scale = std::make_shared<TensorData>(TensorType(DType::F32, {}));
  scale->setDouble(0, 1.0 / 0.7);
  auto f32 = runCpu(OpKind::DropoutGrad, {dy, mask, scale}, 1);
  auto f64 = runCpu(OpKind::DropoutGrad, {toF64(dy), mask, toF64(scale)}, 1);
  std::vector<double> want;
  for (int64_t i = 0; i < 75; ++i) {
    double g = dy->getDouble(i), s = scale->getDouble(0);
    // A dropped element passes nothing: 0, or NaN where dy is not finite.
    want.push_back(keep[size_t(i)] ? g * s : (std::isfinite(g) ? 0.0 : NAN));
    checkNear(body::dropoutGrad(float(g), keep[size_t(i)] != 0, float(s)),
              want.back(), 2e-6, "DropoutGrad body", i);
  }
  checkKernels(f32[0], f64[0], want, 2e-6, "DropoutGrad");
}

TEST_CASE("fused gradients against f64: SoftmaxCrossEntropyGrad") {
  // log_prob [4, 37] (contiguous rows) and [3, 5, 2] (spatial 2).
  for (bool spatial : {false, true}) {
    Dims dims = spatial ? Dims{3, 5, 2} : Dims{4, 37};
    Dims rowDims = spatial ? Dims{3, 2} : Dims{4};
    int64_t classes = dims[1], inner = spatial ? 2 : 1;
    auto logProb = randomFloats(dims, 54, -6, 0);
    std::vector<int64_t> labelValues = spatial
                                           ? std::vector<int64_t>{1, 0, 4, 7, 2, 2}
                                           : std::vector<int64_t>{3, 36, 0, 40};
    auto labels = ints(DType::I64, rowDims, labelValues);
    auto scale = randomFloats(rowDims, 55, -2, 2);
    auto f32 = runCpu(OpKind::SoftmaxCrossEntropyGrad, {logProb, labels, scale},
                      1);
    auto f64 = runCpu(OpKind::SoftmaxCrossEntropyGrad,
                      {toF64(logProb), labels, toF64(scale)}, 1);
    std::vector<double> want;
    for (int64_t i = 0; i < logProb->getNumElements(); ++i) {
      int64_t n = i / (classes * inner), c = (i / inner) % classes;
      int64_t row = n * inner + i % inner;
      bool isLabel = labelValues[size_t(row)] == c;
      double s = scale->getDouble(row);
      want.push_back((std::exp(logProb->getDouble(i)) - (isLabel ? 1 : 0)) * s);
      checkNear(body::crossEntropyGrad(float(logProb->getDouble(i)), isLabel,
                                       float(s)),
                want.back(), 2e-6, "SoftmaxCrossEntropyGrad body", i);
    }
    checkKernels(f32[0], f64[0], want, 2e-6,
                 std::string("SoftmaxCrossEntropyGrad ") +
                     (spatial ? "spatial" : "rows"));
  }
}

TEST_CASE("fused gradients against f64: LayerNormalization rows") {
  // 7 rows of 37 (the CPU's four-row group, then single rows) and of 5.
  for (int64_t n : {37, 5}) {
    const int64_t rows = 7;
    auto x = randomFloats({rows, n}, 56, -3, 3);
    auto scale = randomFloats({n}, 57);
    auto bias = randomFloats({n}, 58);
    AttrList attrs;
    attrs.set("epsilon", 1e-5f);
    auto f32 = runCpu(OpKind::LayerNormalization, {x, scale, bias}, 3, attrs);
    auto f64 = runCpu(OpKind::LayerNormalization,
                      {toF64(x), toF64(scale), toF64(bias)}, 3, attrs);
    std::vector<double> y, means, invs;
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i)
        mean += x->getDouble(r * n + i) / double(n);
      for (int64_t i = 0; i < n; ++i)
        var += std::pow(x->getDouble(r * n + i) - mean, 2) / double(n);
      double inv = 1 / std::sqrt(var + double(1e-5f));
      means.push_back(mean);
      invs.push_back(inv);
      for (int64_t i = 0; i < n; ++i)
        y.push_back((x->getDouble(r * n + i) - mean) * inv *
                        scale->getDouble(i) +
                    bias->getDouble(i));
      std::vector<float> out(static_cast<size_t>(n));
      float m, s;
      body::layerNormRow<float, float, float>(
          elems<float>(x) + r * n, elems<float>(scale), elems<float>(bias),
          out.data(), n, 1e-5f, &m, &s);
      for (int64_t i = 0; i < n; ++i)
        checkNear(out[size_t(i)], y[size_t(r * n + i)], 2e-5,
                  "LayerNormalization body", r * n + i);
      checkNear(m, mean, 2e-5, "LayerNormalization body mean", r);
      checkNear(s, inv, 2e-5, "LayerNormalization body inv_std", r);
    }
    std::string what = "LayerNormalization " + std::to_string(n) + "-wide";
    checkKernels(f32[0], f64[0], y, 2e-5, what);
    checkKernels(f32[1], f64[1], means, 2e-5, what + " mean");
    checkKernels(f32[2], f64[2], invs, 2e-5, what + " inv_std");
  }
}

TEST_CASE("fused gradients against f64: LayerNormalizationGrad rows") {
  // dx = invStd (g - mean(g) - xhat mean(g xhat)), g = dy scale, xhat =
  // (x - mean) invStd, with mean and invStd as given.
  for (int64_t n : {37, 5}) {
    const int64_t rows = 7;
    auto dy = randomFloats({rows, n}, 59);
    auto x = randomFloats({rows, n}, 60);
    auto scale = randomFloats({n}, 61);
    auto mean = randomFloats({rows, 1}, 62, -0.5, 0.5);
    auto inv = randomFloats({rows, 1}, 63, 0.5, 2);
    auto f32 =
        runCpu(OpKind::LayerNormalizationGrad, {dy, x, scale, mean, inv}, 1);
    auto f64 = runCpu(OpKind::LayerNormalizationGrad,
                      {toF64(dy), toF64(x), toF64(scale), toF64(mean),
                       toF64(inv)},
                      1);
    std::vector<double> want;
    for (int64_t r = 0; r < rows; ++r) {
      double mu = mean->getDouble(r), s = inv->getDouble(r);
      double meanG = 0, meanGX = 0;
      for (int64_t i = 0; i < n; ++i) {
        double g = dy->getDouble(r * n + i) * scale->getDouble(i);
        double xhat = (x->getDouble(r * n + i) - mu) * s;
        meanG += g / double(n);
        meanGX += g * xhat / double(n);
      }
      for (int64_t i = 0; i < n; ++i) {
        double g = dy->getDouble(r * n + i) * scale->getDouble(i);
        double xhat = (x->getDouble(r * n + i) - mu) * s;
        want.push_back(s * (g - meanG - xhat * meanGX));
      }
      std::vector<float> out(static_cast<size_t>(n));
      body::layerNormGradRow(elems<float>(dy) + r * n, elems<float>(x) + r * n,
                             elems<float>(scale), out.data(), n, float(mu),
                             float(s));
      for (int64_t i = 0; i < n; ++i)
        checkNear(out[size_t(i)], want[size_t(r * n + i)], 2e-5,
                  "LayerNormalizationGrad body", r * n + i);
    }
    checkKernels(f32[0], f64[0], want, 2e-5,
                 "LayerNormalizationGrad " + std::to_string(n) + "-wide");
  }
}

TEST_CASE("fused gradients against f64: Softmax and SoftmaxGrad") {
  // Along the last axis (7 rows of 37, and of 5) and an inner axis.
  struct Case {
    Dims dims;
    int64_t axis;
  } cases[] = {{{1, 7, 37}, 2}, {{1, 7, 5}, 2}, {{2, 5, 3}, 1}};
  for (const Case &c : cases) {
    int64_t count = c.dims[0] * c.dims[1] * c.dims[2];
    int64_t n = c.dims[size_t(c.axis)], inner = c.axis == 1 ? c.dims[2] : 1;
    int64_t outer = count / (n * inner);
    auto x = randomFloats(c.dims, 64, -3, 3);
    auto dy = randomFloats(c.dims, 65);
    AttrList attrs;
    attrs.set("axis", c.axis);
    auto y32 = runCpu(OpKind::Softmax, {x}, 1, attrs);
    auto y64 = runCpu(OpKind::Softmax, {toF64(x)}, 1, attrs);
    // SoftmaxGrad reads the f32 softmax, so both sides see the same y.
    auto dx32 = runCpu(OpKind::SoftmaxGrad, {dy, y32[0]}, 1, attrs);
    auto dx64 =
        runCpu(OpKind::SoftmaxGrad, {toF64(dy), toF64(y32[0])}, 1, attrs);
    size_t elements = static_cast<size_t>(count);
    std::vector<double> y(elements), dx(elements);
    std::vector<float> yBody(elements), dxBody(elements);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t start = o * n * inner + i;
        auto at = [&](int64_t j) { return size_t(start + j * inner); };
        double m = -INFINITY, sum = 0, dot = 0;
        for (int64_t j = 0; j < n; ++j)
          m = std::max(m, x->getDouble(int64_t(at(j))));
        for (int64_t j = 0; j < n; ++j)
          sum += std::exp(x->getDouble(int64_t(at(j))) - m);
        for (int64_t j = 0; j < n; ++j) {
          y[at(j)] = std::exp(x->getDouble(int64_t(at(j))) - m) / sum;
          dot += dy->getDouble(int64_t(at(j))) *
                 y32[0]->getDouble(int64_t(at(j)));
        }
        for (int64_t j = 0; j < n; ++j)
          dx[at(j)] = y32[0]->getDouble(int64_t(at(j))) *
                      (dy->getDouble(int64_t(at(j))) - dot);
        body::softmaxColumn(elems<float>(x) + start, yBody.data() + start, n,
                            inner, false);
        body::softmaxGradColumn(elems<float>(dy) + start,
                                elems<float>(y32[0]) + start,
                                dxBody.data() + start, n, inner);
      }
    std::string what = "axis " + std::to_string(c.axis) + ", " +
                       std::to_string(n) + " long";
    for (int64_t i = 0; i < count; ++i) {
      checkNear(yBody[size_t(i)], y[size_t(i)], 2e-5, "Softmax body " + what, i);
      checkNear(dxBody[size_t(i)], dx[size_t(i)], 2e-5,
                "SoftmaxGrad body " + what, i);
    }
    checkKernels(y32[0], y64[0], y, 2e-5, "Softmax " + what);
    checkKernels(dx32[0], dx64[0], dx, 2e-5, "SoftmaxGrad " + what);
  }
}
