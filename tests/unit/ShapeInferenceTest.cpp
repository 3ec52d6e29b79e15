//===- tests/unit/ShapeInferenceTest.cpp - Types of op results ------------===//
//
// Every op in Ops.def at least once, with ONNX opset-17 semantics: the
// inferred types, each error path (checked by a message substring), and the
// data-dependent shapes with and without Constant operands.
//
//===----------------------------------------------------------------------===//
#include "ir/ShapeInference.h"
#include "ir/Support.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace remat;
using namespace remat::ir;

namespace {

TensorType f32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F32, dims);
}
TensorType f16(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F16, dims);
}
TensorType f64(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F64, dims);
}
TensorType i64(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::I64, dims);
}
TensorType i32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::I32, dims);
}
TensorType u8(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::U8, dims);
}
TensorType boolean(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::Bool, dims);
}

AttrList attrs(std::initializer_list<std::pair<const char *, AttrValue>> list) {
  AttrList result;
  for (const auto &[name, value] : list)
    result.set(name, value);
  return result;
}

/// "f32[2,3]" for a known type, "f32[?]" or "f32[?] (6 elements)" otherwise.
std::string describe(const InferredType &type) {
  if (type.shapeKnown)
    return type.type.str();
  std::string text = dtypeName(type.type.getDType()).str() + "[?]";
  if (type.numElements)
    text += " (" + std::to_string(*type.numElements) + " elements)";
  return text;
}

/// \returns the inferred result types joined by ", ", or "error: <message>".
std::string infer(const Node *node) {
  auto results = inferTypes(*node);
  if (!results)
    return "error: " + errorToString(results.takeError());
  std::string text;
  for (const InferredType &type : *results)
    text += (text.empty() ? "" : ", ") + describe(type);
  return text;
}

std::string errorOf(llvm::Error err) {
  return err ? "error: " + errorToString(std::move(err)) : "ok";
}

/// Builds small graphs: inputs and nodes get fresh names in0, r1, ...
struct Fixture {
  Graph graph{"g"};
  unsigned next = 0;

  Value *in(TensorType type) {
    return graph.addInput("in" + std::to_string(next++), std::move(type));
  }

  /// A node of \p op with \p numResults results declared f32[] (inference
  /// does not read declared types).
  Node *node(OpKind op, llvm::ArrayRef<Value *> operands,
             AttrList attributes = {}, unsigned numResults = 1) {
    std::vector<TensorType> types(numResults, f32({}));
    std::vector<std::string> names;
    for (unsigned i = 0; i < numResults; ++i)
      names.push_back(("r" + llvm::Twine(next++)).str());
    return graph.createNode(op, operands, types, names, std::move(attributes));
  }

  /// A node whose results are declared \p types.
  Node *declared(OpKind op, llvm::ArrayRef<Value *> operands,
                 llvm::ArrayRef<TensorType> types, AttrList attributes = {}) {
    std::vector<std::string> names;
    for (size_t i = 0; i < types.size(); ++i)
      names.push_back(("r" + llvm::Twine(next++)).str());
    return graph.createNode(op, operands, types, names, std::move(attributes));
  }

  Value *constant(TensorDataPtr data) {
    TensorType type = data->getType();
    return declared(OpKind::Constant, {}, {type}, attrs({{"value", data}}))
        ->getResult(0);
  }
  /// A Constant i64[n] holding \p values.
  Value *ints(std::vector<int64_t> values) {
    return constant(TensorData::fromInts(
        i64({static_cast<int64_t>(values.size())}), values));
  }
  /// A Constant i32[n] holding \p values.
  Value *ints32(std::vector<int64_t> values) {
    return constant(TensorData::fromInts(
        i32({static_cast<int64_t>(values.size())}), values));
  }
  /// A scalar Constant of \p dtype holding \p value.
  Value *scalar(DType dtype, double value) {
    return constant(TensorData::fromDoubles(TensorType(dtype, {}), {value}));
  }
};

} // namespace

/// Checks that \p text is an error message containing \p substring.
#define CHECK_ERROR(text, substring)                                           \
  do {                                                                         \
    std::string message_ = (text);                                             \
    CHECK_MESSAGE(message_.rfind("error: ", 0) == 0, message_);                \
    CHECK_MESSAGE(message_.find(substring) != std::string::npos,               \
                  "expected '" << (substring) << "' in: " << message_);        \
  } while (false)

//===----------------------------------------------------------------------===//
// Helpers and arity
//===----------------------------------------------------------------------===//

TEST_CASE("broadcastShapes follows numpy") {
  auto shape = [](llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
    auto dims = broadcastShapes(a, b);
    return dims ? f32(*dims).str() : std::string("incompatible");
  };
  CHECK(shape({2, 3}, {3}) == "f32[2,3]");
  CHECK(shape({3}, {2, 3}) == "f32[2,3]");
  CHECK(shape({4, 1, 3}, {5, 1}) == "f32[4,5,3]");
  CHECK(shape({}, {2}) == "f32[2]");
  CHECK(shape({}, {}) == "f32[]");
  CHECK(shape({0}, {1}) == "f32[0]");
  CHECK(shape({1}, {0}) == "f32[0]");
  CHECK(shape({2}, {3}) == "incompatible");
  CHECK(shape({0}, {2}) == "incompatible");
  CHECK(shape({2, 3}, {2, 1, 4}) == "incompatible");
}

TEST_CASE_FIXTURE(Fixture, "checkArity counts operands and results") {
  Value *x = in(f32({3}));
  Node *add = node(OpKind::Add, {x, x, x});
  CHECK(errorOf(checkArity(*add)) == "error: Add '%" +
                                         add->getResult(0)->getName().str() +
                                         "': expects 2 operands, got 3");
  CHECK_ERROR(infer(add), "expects 2 operands, got 3");

  Node *relu = node(OpKind::Relu, {});
  CHECK_ERROR(errorOf(checkArity(*relu)), "expects 1 operand, got 0");

  Node *norm = node(OpKind::LayerNormalization, {x, x}, {}, 4);
  CHECK_ERROR(errorOf(checkArity(*norm)), "expects 1 to 3 results, got 4");

  Node *concat = node(OpKind::Concat, {});
  CHECK_ERROR(errorOf(checkArity(*concat)),
              "expects at least 1 operand, got 0");

  Node *split = node(OpKind::Split, {x}, {}, 0);
  CHECK_ERROR(errorOf(checkArity(*split)), "expects at least 1 result, got 0");

  Node *constant =
      node(OpKind::Constant, {x}, attrs({{"value_int", int64_t{1}}}));
  CHECK_ERROR(errorOf(checkArity(*constant)), "expects 0 operands, got 1");

  CHECK(errorOf(checkArity(*node(OpKind::Concat, {x, x, x, x}))) == "ok");
  CHECK(errorOf(checkArity(*node(OpKind::Split, {x}, {}, 5))) == "ok");
}

TEST_CASE_FIXTURE(Fixture, "operand types with invalid sizes are rejected") {
  Value *bad = in(f32({-1}));
  CHECK_ERROR(infer(node(OpKind::Relu, {bad})), "negative dim");
}

TEST_CASE_FIXTURE(Fixture, "results whose size overflows are rejected") {
  Value *x = in(f32({1}));
  int64_t huge = int64_t(1) << 40;
  Node *expand = node(OpKind::Expand, {x, ints({huge, huge})});
  CHECK_ERROR(infer(expand),
              "inferred result %" + expand->getResult(0)->getName().str());
  CHECK_ERROR(infer(expand), "overflows");
}

TEST_CASE_FIXTURE(Fixture, "attributes of the wrong kind are named") {
  Value *x = in(f32({2, 3}));
  Node *softmax =
      node(OpKind::Softmax, {x}, attrs({{"axis", std::vector<float>{1.0f}}}));
  CHECK_ERROR(infer(softmax), "attribute 'axis' must be an int, got floats");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_CASE_FIXTURE(Fixture,
                  "arithmetic broadcasts and needs one numeric dtype") {
  Value *a = in(f32({2, 3}));
  Value *row = in(f32({3}));
  Value *column = in(f32({4, 1, 1}));
  CHECK(infer(node(OpKind::Add, {a, row})) == "f32[2,3]");
  CHECK(infer(node(OpKind::Sub, {row, a})) == "f32[2,3]");
  CHECK(infer(node(OpKind::Mul, {a, column})) == "f32[4,2,3]");
  CHECK(infer(node(OpKind::Div, {a, in(f32({}))})) == "f32[2,3]");
  CHECK(infer(node(OpKind::Add, {in(u8({2})), in(u8({2}))})) == "u8[2]");

  CHECK_ERROR(infer(node(OpKind::Add, {in(boolean({2})), in(boolean({2}))})),
              "must have a numeric dtype, got bool[2]");
  CHECK_ERROR(infer(node(OpKind::Mul, {a, in(i64({3}))})),
              "has type i64[3], expected dtype f32");
  CHECK_ERROR(infer(node(OpKind::Sub, {a, in(f32({4}))})),
              "cannot broadcast operands");
  CHECK_ERROR(infer(node(OpKind::Sub, {a, in(f32({4}))})), "f32[2,3]");
}

TEST_CASE_FIXTURE(Fixture, "Pow keeps the base's dtype") {
  Value *base = in(f32({2, 3}));
  CHECK(infer(node(OpKind::Pow, {base, in(i64({}))})) == "f32[2,3]");
  CHECK(infer(node(OpKind::Pow, {in(i32({3})), in(f16({2, 1}))})) ==
        "i32[2,3]");
  CHECK_ERROR(infer(node(OpKind::Pow, {in(u8({3})), base})),
              "must have a float, i32 or i64 dtype, got u8[3]");
  CHECK_ERROR(infer(node(OpKind::Pow, {base, in(boolean({}))})),
              "must have a numeric dtype, got bool[]");
  CHECK_ERROR(infer(node(OpKind::Pow, {base, in(f32({2}))})),
              "cannot broadcast");
}

TEST_CASE_FIXTURE(Fixture, "float unary ops keep the type") {
  Value *half = in(f16({4, 2}));
  Value *integer = in(i32({4}));
  for (OpKind op : {OpKind::Sqrt, OpKind::Erf, OpKind::Tanh, OpKind::Sigmoid,
                    OpKind::Exp, OpKind::Log}) {
    INFO(getOpSpelling(op));
    CHECK(infer(node(op, {half})) == "f16[4,2]");
    CHECK_ERROR(infer(node(op, {integer})),
                "must have a float dtype, got i32[4]");
  }
}

TEST_CASE_FIXTURE(Fixture, "remat.Gelu keeps a float type") {
  CHECK(infer(node(OpKind::Gelu, {in(f16({4, 2}))})) == "f16[4,2]");
  CHECK(infer(node(OpKind::Gelu, {in(f32({3}))},
                   attrs({{"approximate", std::string("tanh")}}))) == "f32[3]");
  CHECK(infer(node(OpKind::Gelu, {in(f64({}))},
                   attrs({{"approximate", std::string("none")}}))) == "f64[]");
  CHECK_ERROR(infer(node(OpKind::Gelu, {in(i32({4}))})),
              "must have a float dtype, got i32[4]");
  CHECK_ERROR(infer(node(OpKind::Gelu, {in(f32({3}))},
                         attrs({{"approximate", std::string("fast")}}))),
              "attribute 'approximate' is \"fast\", expected \"none\" or "
              "\"tanh\"");
  CHECK_ERROR(infer(node(OpKind::Gelu, {in(f32({3}))},
                         attrs({{"approximate", int64_t{1}}}))),
              "attribute 'approximate' must be a string, got int");
  CHECK(getOpSpelling(OpKind::Gelu) == "remat.Gelu");
  CHECK(lookupOp("remat", "Gelu") == OpKind::Gelu);
  CHECK_FALSE(lookupOp("", "Gelu").has_value());
}

TEST_CASE_FIXTURE(Fixture, "remat.GeluGrad broadcasts two float operands") {
  CHECK(infer(node(OpKind::GeluGrad, {in(f32({1, 5})), in(f32({4, 5}))})) ==
        "f32[4,5]");
  CHECK(infer(node(OpKind::GeluGrad, {in(f64({3})), in(f64({3}))},
                   attrs({{"approximate", std::string("tanh")}}))) == "f64[3]");
  CHECK_ERROR(infer(node(OpKind::GeluGrad, {in(i64({3})), in(i64({3}))})),
              "must have a float dtype, got i64[3]");
  CHECK_ERROR(infer(node(OpKind::GeluGrad, {in(f32({3})), in(f64({3}))})),
              "has type f64[3], expected dtype f32 (the dtype of operand 0");
  CHECK_ERROR(infer(node(OpKind::GeluGrad, {in(f32({3})), in(f32({4}))})),
              "cannot broadcast operands");
  CHECK_ERROR(infer(node(OpKind::GeluGrad, {in(f32({3})), in(f32({3}))},
                         attrs({{"approximate", std::string("fast")}}))),
              "attribute 'approximate' is \"fast\", expected \"none\" or "
              "\"tanh\"");
  CHECK(getOpSpelling(OpKind::GeluGrad) == "remat.GeluGrad");
}

TEST_CASE_FIXTURE(Fixture,
                  "remat.SoftmaxCrossEntropyGrad has log_prob's type") {
  auto grad = [&](TensorType logProb, TensorType labels, TensorType scale) {
    return infer(node(OpKind::SoftmaxCrossEntropyGrad,
                      {in(logProb), in(labels), in(scale)}));
  };
  CHECK(grad(f32({5, 7}), i64({5}), f32({5})) == "f32[5,7]");
  CHECK(grad(f64({2, 4, 3}), i32({2, 3}), f64({2, 3})) == "f64[2,4,3]");
  CHECK_ERROR(grad(i64({5, 7}), i64({5}), f32({5})),
              "must have a float dtype, got i64[5,7]");
  CHECK_ERROR(grad(f32({5}), i64({5}), f32({5})), "rank");
  CHECK_ERROR(grad(f32({5, 7}), f32({5}), f32({5})), "dtype i32 or i64");
  CHECK_ERROR(grad(f32({5, 7}), i64({7}), f32({5})),
              "must have shape [5] for scores f32[5,7]");
  CHECK_ERROR(grad(f32({5, 7}), i64({5}), f64({5})),
              "has type f64[5], expected dtype f32 (the dtype of operand 0");
  CHECK_ERROR(grad(f32({2, 4, 3}), i64({2, 3}), f32({2, 4})),
              "of type f32[2,4] must have the labels' shape [2,3]");
  CHECK(getOpSpelling(OpKind::SoftmaxCrossEntropyGrad) ==
        "remat.SoftmaxCrossEntropyGrad");
}

TEST_CASE_FIXTURE(Fixture, "remat.SoftmaxGrad has the type of dy and y") {
  auto grad = [&](TensorType dy, TensorType y, int64_t axis = -1) {
    return infer(
        node(OpKind::SoftmaxGrad, {in(dy), in(y)}, attrs({{"axis", axis}})));
  };
  CHECK(grad(f32({2, 5}), f32({2, 5})) == "f32[2,5]");
  CHECK(grad(f64({2, 5, 3}), f64({2, 5, 3}), 1) == "f64[2,5,3]");
  CHECK_ERROR(grad(i64({2, 5}), i64({2, 5})),
              "must have a float dtype, got i64[2,5]");
  CHECK_ERROR(grad(f32({2, 5}), f32({1, 5})),
              "of type f32[1,5] must have the type of operand 0");
  CHECK_ERROR(grad(f32({2, 5}), f64({2, 5})), "must have the type of");
  CHECK_ERROR(grad(f32({2, 5}), f32({2, 5}), 2),
              "attribute 'axis' is 2, expected a value in [-2, 1]");
  CHECK(getOpSpelling(OpKind::SoftmaxGrad) == "remat.SoftmaxGrad");
}

TEST_CASE_FIXTURE(Fixture,
                  "remat.LayerNormalizationGrad has X's type; Scale and the "
                  "statistics have their exact shapes") {
  auto grad = [&](TensorType dy, TensorType x, TensorType scale,
                  TensorType mean, TensorType inv, int64_t axis = -1) {
    return infer(node(OpKind::LayerNormalizationGrad,
                      {in(dy), in(x), in(scale), in(mean), in(inv)},
                      attrs({{"axis", axis}})));
  };
  CHECK(grad(f32({2, 3, 8}), f32({2, 3, 8}), f32({8}), f32({2, 3, 1}),
             f32({2, 3, 1})) == "f32[2,3,8]");
  CHECK(grad(f64({2, 3, 4}), f64({2, 3, 4}), f64({3, 4}), f64({2, 1, 1}),
             f64({2, 1, 1}), 1) == "f64[2,3,4]");
  CHECK_ERROR(
      grad(i64({2, 8}), i64({2, 8}), i64({8}), i64({2, 1}), i64({2, 1})),
      "must have a float dtype, got i64[2,8]");
  CHECK_ERROR(
      grad(f32({2, 8}), f32({2, 8}), f32({1}), f32({2, 1}), f32({2, 1})),
      "of type f32[1] must be f32[8]");
  CHECK_ERROR(
      grad(f32({2, 8}), f32({2, 8}), f32({8}), f32({2, 8}), f32({2, 1})),
      "of type f32[2,8] must be f32[2,1]");
  CHECK_ERROR(
      grad(f32({2, 8}), f32({2, 8}), f32({8}), f32({2, 1}), f64({2, 1})),
      "of type f64[2,1] must be f32[2,1]");
  CHECK_ERROR(
      grad(f32({3, 8}), f32({2, 8}), f32({8}), f32({2, 1}), f32({2, 1})),
      "of type f32[3,8] must be f32[2,8]");
  CHECK(getOpSpelling(OpKind::LayerNormalizationGrad) ==
        "remat.LayerNormalizationGrad");
}

TEST_CASE_FIXTURE(Fixture, "remat.DropoutGrad has dy's type") {
  auto grad = [&](TensorType dy, TensorType mask, TensorType scale) {
    return infer(node(OpKind::DropoutGrad, {in(dy), in(mask), in(scale)}));
  };
  CHECK(grad(f32({2, 5}), TensorType(DType::Bool, {2, 5}), f32({})) ==
        "f32[2,5]");
  CHECK(grad(f64({3}), TensorType(DType::Bool, {3}), f64({})) == "f64[3]");
  CHECK_ERROR(grad(i64({3}), TensorType(DType::Bool, {3}), i64({})),
              "must have a float dtype, got i64[3]");
  CHECK_ERROR(grad(f32({2, 5}), TensorType(DType::Bool, {5}), f32({})),
              "of type bool[5] must be bool[2,5]");
  CHECK_ERROR(grad(f32({2, 5}), f32({2, 5}), f32({})),
              "of type f32[2,5] must be bool[2,5]");
  CHECK_ERROR(grad(f32({2, 5}), TensorType(DType::Bool, {2, 5}), f32({1})),
              "of type f32[1] must be f32[]");
  CHECK_ERROR(grad(f32({2, 5}), TensorType(DType::Bool, {2, 5}), f64({})),
              "of type f64[] must be f32[]");
  CHECK(getOpSpelling(OpKind::DropoutGrad) == "remat.DropoutGrad");
}

TEST_CASE_FIXTURE(Fixture, "remat.PermutedMatMul permutes, multiplies and "
                           "permutes back") {
  auto mm = [&](TensorType a, TensorType b, AttrList attrs) {
    return infer(node(OpKind::PermutedMatMul, {in(a), in(b)}, attrs));
  };
  using Ints = std::vector<int64_t>;
  CHECK(mm(f32({2, 5, 3, 4}), f32({2, 6, 3, 4}),
           attrs({{"perm_a", Ints{0, 2, 1, 3}},
                  {"perm_b", Ints{0, 2, 3, 1}}})) == "f32[2,3,5,6]");
  CHECK(mm(f32({2, 3, 5, 6}), f32({2, 6, 3, 4}),
           attrs({{"perm_b", Ints{0, 2, 1, 3}},
                  {"perm_y", Ints{0, 2, 1, 3}}})) == "f32[2,5,3,4]");
  CHECK(mm(f64({5, 9}), f64({6, 9}), attrs({{"perm_b", Ints{1, 0}}})) ==
        "f64[5,6]");
  CHECK_ERROR(mm(i64({2, 2}), i64({2, 2}), {}),
              "must have a float dtype, got i64[2,2]");
  CHECK_ERROR(mm(f32({2, 3, 4}), f32({4, 5}), {}), "must have one rank");
  CHECK_ERROR(mm(f32({3, 4}), f32({4, 5}), attrs({{"perm_a", Ints{0, 0}}})),
              "attribute 'perm_a' [0,0] is not a permutation of the 2 dims");
  CHECK_ERROR(
      mm(f32({3, 5, 4}), f32({4, 4, 5}), attrs({{"perm_a", Ints{2, 0, 1}}})),
      "attribute 'perm_a' [2,0,1] moves the operand's last dim out "
      "of the matrix dims");
  CHECK(mm(f32({1, 5, 6}), f32({1, 6, 4}),
           attrs({{"perm_y", Ints{0, 2, 1}}})) == "f32[1,4,5]");
  CHECK_ERROR(
      mm(f32({2, 5, 6}), f32({2, 6, 4}), attrs({{"perm_y", Ints{1, 2, 0}}})),
      "makes a batch dim of the product the result's last");
  CHECK_ERROR(mm(f32({2, 3, 4}), f32({2, 5, 6}), {}),
              "contraction dims 4 and 5 differ");
  CHECK_ERROR(mm(f32({2, 3, 4}), f32({1, 4, 6}), {}),
              "must have the same batch dims");
  CHECK(getOpSpelling(OpKind::PermutedMatMul) == "remat.PermutedMatMul");
}

TEST_CASE_FIXTURE(Fixture, "Relu and Neg take signed types, Identity any") {
  CHECK(infer(node(OpKind::Relu, {in(i32({3}))})) == "i32[3]");
  CHECK(infer(node(OpKind::Neg, {in(f64({}))})) == "f64[]");
  CHECK_ERROR(infer(node(OpKind::Relu, {in(u8({3}))})),
              "must have a float or signed integer dtype, got u8[3]");
  CHECK_ERROR(infer(node(OpKind::Neg, {in(u8({3}))})), "got u8[3]");
  CHECK_ERROR(infer(node(OpKind::Neg, {in(boolean({3}))})), "got bool[3]");
  CHECK(infer(node(OpKind::Identity, {in(boolean({2, 2}))})) == "bool[2,2]");
}

TEST_CASE_FIXTURE(Fixture, "Where broadcasts three ways") {
  Value *cond = in(boolean({2, 1}));
  Value *x = in(f32({3}));
  Value *y = in(f32({}));
  CHECK(infer(node(OpKind::Where, {cond, x, y})) == "f32[2,3]");
  CHECK(infer(node(OpKind::Where,
                   {in(boolean({})), in(i64({})), in(i64({5}))})) == "i64[5]");
  CHECK_ERROR(infer(node(OpKind::Where, {x, x, y})),
              "operand 0 (%" + x->getName().str() +
                  ") must have dtype bool, got f32[3]");
  CHECK_ERROR(infer(node(OpKind::Where, {cond, x, in(i64({}))})),
              "expected dtype f32");
  CHECK_ERROR(infer(node(OpKind::Where, {cond, x, in(f32({4}))})),
              "cannot broadcast operands");
}

TEST_CASE_FIXTURE(Fixture, "GreaterOrEqual and And give bool") {
  CHECK(infer(node(OpKind::GreaterOrEqual, {in(i64({2, 3})), in(i64({3}))})) ==
        "bool[2,3]");
  CHECK(infer(node(OpKind::GreaterOrEqual, {in(f16({1})), in(f16({4, 1}))})) ==
        "bool[4,1]");
  CHECK_ERROR(
      infer(node(OpKind::GreaterOrEqual, {in(boolean({2})), in(boolean({2}))})),
      "must have a numeric dtype, got bool[2]");
  CHECK_ERROR(infer(node(OpKind::GreaterOrEqual, {in(i64({2})), in(i32({2}))})),
              "expected dtype i64");
  CHECK_ERROR(infer(node(OpKind::GreaterOrEqual, {in(i64({2})), in(i64({3}))})),
              "cannot broadcast");

  CHECK(infer(node(OpKind::And,
                   {in(boolean({1, 1, 16, 1})), in(boolean({2, 1, 1, 16}))})) ==
        "bool[2,1,16,16]");
  CHECK_ERROR(infer(node(OpKind::And, {in(boolean({2})), in(u8({2}))})),
              "operand 1 (%in");
  CHECK_ERROR(infer(node(OpKind::And, {in(boolean({2})), in(u8({2}))})),
              "must have dtype bool, got u8[2]");
}

TEST_CASE_FIXTURE(Fixture, "Max broadcasts any number of operands") {
  CHECK(infer(node(OpKind::Max, {in(f32({2, 1}))})) == "f32[2,1]");
  CHECK(infer(node(OpKind::Max, {in(i64({2, 1, 1})), in(i64({1, 1, 16})),
                                 in(i64({}))})) == "i64[2,1,16]");
  CHECK_ERROR(infer(node(OpKind::Max, {in(f32({2})), in(f64({2}))})),
              "expected dtype f32");
  CHECK_ERROR(infer(node(OpKind::Max, {in(boolean({2}))})),
              "must have a numeric dtype");
  CHECK_ERROR(infer(node(OpKind::Max, {in(f32({2})), in(f32({3}))})),
              "cannot broadcast");
  CHECK_ERROR(infer(node(OpKind::Max, {})),
              "expects at least 1 operand, got 0");
}

TEST_CASE_FIXTURE(Fixture, "Mod: fmod 1 for floats") {
  CHECK(infer(node(OpKind::Mod, {in(i64({3})), in(i64({}))})) == "i64[3]");
  CHECK(infer(node(OpKind::Mod, {in(f32({3})), in(f32({3}))},
                   attrs({{"fmod", int64_t{1}}}))) == "f32[3]");
  CHECK_ERROR(infer(node(OpKind::Mod, {in(f32({3})), in(f32({3}))})),
              "attribute 'fmod' must be 1 for operand 0 (%in");
  CHECK_ERROR(infer(node(OpKind::Mod, {in(i64({3})), in(i64({3}))},
                         attrs({{"fmod", int64_t{2}}}))),
              "attribute 'fmod' is 2, expected 0 or 1");
  CHECK_ERROR(infer(node(OpKind::Mod, {in(i64({3})), in(i32({3}))})),
              "expected dtype i64");
}

TEST_CASE_FIXTURE(Fixture, "Equal gives bool") {
  CHECK(infer(node(OpKind::Equal, {in(i64({2, 3})), in(i64({3}))})) ==
        "bool[2,3]");
  CHECK(infer(node(OpKind::Equal, {in(boolean({2})), in(boolean({}))})) ==
        "bool[2]");
  CHECK_ERROR(infer(node(OpKind::Equal, {in(i64({2})), in(i32({2}))})),
              "expected dtype i64");
}

TEST_CASE_FIXTURE(Fixture, "Cast takes the dtype from 'to'") {
  Value *x = in(f32({2, 3}));
  CHECK(infer(node(OpKind::Cast, {x}, attrs({{"to", int64_t{10}}}))) ==
        "f16[2,3]");
  CHECK(infer(node(OpKind::Cast, {x}, attrs({{"to", int64_t{7}}}))) ==
        "i64[2,3]");
  CHECK(infer(node(OpKind::Cast, {x}, attrs({{"to", int64_t{9}}}))) ==
        "bool[2,3]");
  CHECK_ERROR(infer(node(OpKind::Cast, {x})), "attribute 'to' is required");
  CHECK_ERROR(infer(node(OpKind::Cast, {x}, attrs({{"to", int64_t{8}}}))),
              "attribute 'to' is 8");
  CHECK_ERROR(infer(node(OpKind::Cast, {x}, attrs({{"to", 1.0f}}))),
              "attribute 'to' must be an int, got float");
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalization
//===----------------------------------------------------------------------===//

TEST_CASE_FIXTURE(Fixture, "MatMul follows numpy matmul") {
  auto matmul = [&](TensorType a, TensorType b) {
    return infer(node(OpKind::MatMul, {in(a), in(b)}));
  };
  CHECK(matmul(f32({2, 3}), f32({3, 4})) == "f32[2,4]");
  CHECK(matmul(f32({3}), f32({3, 4})) == "f32[4]");
  CHECK(matmul(f32({2, 3}), f32({3})) == "f32[2]");
  CHECK(matmul(f32({3}), f32({3})) == "f32[]");
  CHECK(matmul(f32({5, 1, 2, 3}), f32({4, 3, 6})) == "f32[5,4,2,6]");
  CHECK(matmul(f32({7, 3}), f32({2, 3, 4})) == "f32[2,7,4]");
  CHECK(matmul(f32({3}), f32({2, 3, 4})) == "f32[2,4]");
  CHECK(matmul(i64({2, 3}), i64({3, 4})) == "i64[2,4]");

  CHECK_ERROR(matmul(f32({2, 3}), f32({4, 5})),
              "cannot multiply f32[2,3] by f32[4,5]: contraction dims 3 and 4 "
              "differ");
  CHECK_ERROR(matmul(f32({2, 2, 3}), f32({3, 3, 4})),
              "cannot broadcast the batch dims");
  CHECK_ERROR(matmul(f32({}), f32({3})), "must have rank >= 1, got f32[]");
  CHECK_ERROR(matmul(u8({2, 3}), u8({3, 4})),
              "must have a float, i32 or i64 dtype, got u8[2,3]");
  CHECK_ERROR(matmul(f32({2, 3}), f16({3, 4})), "expected dtype f32");
}

TEST_CASE_FIXTURE(Fixture, "Gemm transposes and broadcasts C") {
  Value *a = in(f32({2, 3}));
  Value *aT = in(f32({3, 2}));
  Value *b = in(f32({3, 4}));
  Value *bT = in(f32({4, 3}));
  CHECK(infer(node(OpKind::Gemm, {a, b})) == "f32[2,4]");
  CHECK(infer(node(OpKind::Gemm, {aT, b}, attrs({{"transA", int64_t{1}}}))) ==
        "f32[2,4]");
  CHECK(
      infer(node(
          OpKind::Gemm, {a, bT},
          attrs({{"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}))) ==
      "f32[2,4]");
  CHECK(infer(node(OpKind::Gemm, {a, b, in(f32({4}))})) == "f32[2,4]");
  CHECK(infer(node(OpKind::Gemm, {a, b, in(f32({2, 1}))})) == "f32[2,4]");
  CHECK(infer(node(OpKind::Gemm, {a, b, in(f32({}))})) == "f32[2,4]");

  CHECK_ERROR(infer(node(OpKind::Gemm, {a, b, in(f32({3}))})),
              "does not broadcast to the product shape [2,4]");
  CHECK_ERROR(infer(node(OpKind::Gemm, {a, b, in(f32({1, 2, 4}))})),
              "does not broadcast");
  CHECK_ERROR(infer(node(OpKind::Gemm, {in(f32({1, 2, 3})), b})),
              "must have rank 2, got f32[1,2,3]");
  CHECK_ERROR(infer(node(OpKind::Gemm, {a, bT})),
              "contraction dims 3 and 4 differ");
  CHECK_ERROR(infer(node(OpKind::Gemm, {a, b}, attrs({{"alpha", int64_t{1}}}))),
              "attribute 'alpha' must be a float, got int");
  CHECK_ERROR(infer(node(OpKind::Gemm, {a, in(f64({3, 4}))})),
              "expected dtype f32");
}

TEST_CASE_FIXTURE(Fixture, "Softmax and LogSoftmax check the axis") {
  Value *x = in(f32({2, 5}));
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax}) {
    INFO(getOpSpelling(op));
    CHECK(infer(node(op, {x})) == "f32[2,5]");
    CHECK(infer(node(op, {x}, attrs({{"axis", int64_t{0}}}))) == "f32[2,5]");
    CHECK(infer(node(op, {x}, attrs({{"axis", int64_t{-2}}}))) == "f32[2,5]");
    CHECK_ERROR(
        infer(node(op, {x}, attrs({{"axis", int64_t{2}}}))),
        "attribute 'axis' is 2, expected a value in [-2, 1] for rank 2");
    CHECK_ERROR(infer(node(op, {x}, attrs({{"axis", int64_t{-3}}}))),
                "attribute 'axis' is -3");
    CHECK_ERROR(infer(node(op, {in(i32({2}))})), "must have a float dtype");
    CHECK_ERROR(infer(node(op, {in(f32({}))})), "but the operand is a scalar");
  }
}

TEST_CASE_FIXTURE(Fixture, "LayerNormalization results and stash dtype") {
  Value *x = in(f32({2, 3, 4}));
  Value *scale = in(f32({4}));
  Value *bias = in(f32({4}));
  CHECK(infer(node(OpKind::LayerNormalization, {x, scale, bias}, {}, 3)) ==
        "f32[2,3,4], f32[2,3,1], f32[2,3,1]");
  CHECK(infer(node(OpKind::LayerNormalization, {x, scale})) == "f32[2,3,4]");
  CHECK(infer(node(OpKind::LayerNormalization, {x, in(f32({3, 4}))},
                   attrs({{"axis", int64_t{1}}, {"epsilon", 1e-6f}}), 2)) ==
        "f32[2,3,4], f32[2,1,1]");
  // A scale that broadcasts to the normalized shape is accepted.
  CHECK(infer(node(OpKind::LayerNormalization, {x, in(f32({1}))})) ==
        "f32[2,3,4]");

  // Statistics are f32 for narrower floats, and keep f64.
  Value *half = in(f16({2, 4}));
  Value *halfScale = in(f16({4}));
  CHECK(infer(node(OpKind::LayerNormalization, {half, halfScale}, {}, 3)) ==
        "f16[2,4], f32[2,1], f32[2,1]");
  CHECK(infer(node(OpKind::LayerNormalization, {in(f64({2, 4})), in(f64({4}))},
                   {}, 3)) == "f64[2,4], f64[2,1], f64[2,1]");
  CHECK(infer(node(OpKind::LayerNormalization, {half, halfScale},
                   attrs({{"stash_type", int64_t{10}}}), 2)) ==
        "f16[2,4], f16[2,1]");

  CHECK_ERROR(infer(node(OpKind::LayerNormalization, {x, in(f32({3}))})),
              "does not match the normalized shape [4] of f32[2,3,4]");
  CHECK_ERROR(infer(node(OpKind::LayerNormalization, {x, in(f32({1, 4}))})),
              "does not match the normalized shape");
  CHECK_ERROR(infer(node(OpKind::LayerNormalization, {x, scale, in(f32({5}))})),
              "operand 2");
  CHECK_ERROR(infer(node(OpKind::LayerNormalization, {x, in(f16({4}))})),
              "expected dtype f32");
  CHECK_ERROR(infer(node(OpKind::LayerNormalization, {x, scale},
                         attrs({{"stash_type", int64_t{7}}}))),
              "attribute 'stash_type' is 7");
  CHECK_ERROR(infer(node(OpKind::LayerNormalization, {x, scale},
                         attrs({{"axis", int64_t{3}}}))),
              "attribute 'axis' is 3");
  CHECK_ERROR(infer(node(OpKind::LayerNormalization, {x, scale},
                         attrs({{"epsilon", int64_t{0}}}))),
              "attribute 'epsilon' must be a float, got int");
  CHECK_ERROR(
      infer(node(OpKind::LayerNormalization, {in(i32({2, 4})), in(i32({4}))})),
      "must have a float dtype");
}

TEST_CASE_FIXTURE(Fixture, "Dropout output and mask") {
  Value *x = in(f32({2, 3}));
  CHECK(infer(node(OpKind::Dropout, {x})) == "f32[2,3]");
  CHECK(infer(node(OpKind::Dropout, {x}, attrs({{"seed", int64_t{7}}}), 2)) ==
        "f32[2,3], bool[2,3]");
  Value *ratio = scalar(DType::F32, 0.1);
  Value *training = in(boolean({}));
  CHECK(infer(node(OpKind::Dropout, {x, ratio, training}, {}, 2)) ==
        "f32[2,3], bool[2,3]");
  // A non-constant ratio is not range-checked.
  CHECK(infer(node(OpKind::Dropout, {x, in(f32({}))})) == "f32[2,3]");

  CHECK_ERROR(infer(node(OpKind::Dropout, {x, scalar(DType::F32, 1.0)})),
              "is 1, expected a value in [0, 1)");
  CHECK_ERROR(infer(node(OpKind::Dropout, {x, scalar(DType::F64, -0.5)})),
              "is -0.5");
  CHECK_ERROR(infer(node(OpKind::Dropout, {x, in(f32({1}))})),
              "must have rank 0, got f32[1]");
  CHECK_ERROR(infer(node(OpKind::Dropout, {x, ratio, in(f32({}))})),
              "must have dtype bool, got f32[]");
  CHECK_ERROR(infer(node(OpKind::Dropout, {x}, attrs({{"seed", 1.5f}}))),
              "attribute 'seed' must be an int, got float");
  CHECK_ERROR(infer(node(OpKind::Dropout, {in(i64({2}))})),
              "must have a float dtype");
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST_CASE_FIXTURE(Fixture, "ReduceMean and ReduceMax take axes attributes") {
  Value *x = in(f32({2, 3, 4}));
  for (OpKind op : {OpKind::ReduceMean, OpKind::ReduceMax}) {
    INFO(getOpSpelling(op));
    CHECK(infer(node(op, {x}, attrs({{"axes", std::vector<int64_t>{1}}}))) ==
          "f32[2,1,4]");
    CHECK(infer(node(op, {x},
                     attrs({{"axes", std::vector<int64_t>{-1, 0}},
                            {"keepdims", int64_t{0}}}))) == "f32[3]");
    CHECK(infer(node(op, {x})) == "f32[1,1,1]");
    CHECK(infer(node(op, {x}, attrs({{"keepdims", int64_t{0}}}))) == "f32[]");
    CHECK(infer(node(op, {x}, attrs({{"axes", std::vector<int64_t>{}}}))) ==
          "f32[1,1,1]");
    CHECK_ERROR(
        infer(node(op, {x}, attrs({{"axes", std::vector<int64_t>{1, -2}}}))),
        "attribute 'axes' [1,-2] names axis 1 twice");
    CHECK_ERROR(
        infer(node(op, {x}, attrs({{"axes", std::vector<int64_t>{3}}}))),
        "attribute 'axes' entry is 3, expected a value in [-3, 2]");
    CHECK_ERROR(
        infer(node(op, {x}, attrs({{"axes", std::vector<float>{1.0f}}}))),
        "attribute 'axes' must be ints, got floats");
    CHECK_ERROR(infer(node(op, {in(boolean({2}))})), "numeric dtype");
  }
  CHECK(infer(node(OpKind::ReduceMax, {in(i32({5}))})) == "i32[1]");
}

TEST_CASE_FIXTURE(Fixture, "ReduceSum takes axes as an operand") {
  Value *x = in(f32({2, 3, 4}));
  CHECK(infer(node(OpKind::ReduceSum, {x},
                   attrs({{"keepdims", int64_t{0}}}))) == "f32[]");
  CHECK(infer(node(OpKind::ReduceSum, {x, ints({1})})) == "f32[2,1,4]");
  CHECK(infer(node(OpKind::ReduceSum, {x, ints({0, 2})},
                   attrs({{"keepdims", int64_t{0}}}))) == "f32[3]");
  // Empty axes reduce everything unless noop_with_empty_axes is set.
  CHECK(infer(node(OpKind::ReduceSum, {x, ints({})})) == "f32[1,1,1]");
  CHECK(infer(node(OpKind::ReduceSum, {x, ints({})},
                   attrs({{"noop_with_empty_axes", int64_t{1}}}))) ==
        "f32[2,3,4]");
  CHECK(infer(node(OpKind::ReduceSum, {x},
                   attrs({{"noop_with_empty_axes", int64_t{1}}}))) ==
        "f32[2,3,4]");
  // Axes from a Constant in the value_ints form.
  Value *listAxes = declared(OpKind::Constant, {}, {i64({1})},
                             attrs({{"value_ints", std::vector<int64_t>{-1}}}))
                        ->getResult(0);
  CHECK(infer(node(OpKind::ReduceSum, {x, listAxes})) == "f32[2,3,1]");
  // Axes that are not constant leave the shape unknown.
  CHECK(infer(node(OpKind::ReduceSum, {x, in(i64({1}))})) == "f32[?]");

  CHECK_ERROR(infer(node(OpKind::ReduceSum, {x, ints({1, 1})})),
              "names axis 1 twice");
  CHECK_ERROR(infer(node(OpKind::ReduceSum, {x, ints({-4})})),
              "entry is -4, expected a value in [-3, 2]");
  CHECK_ERROR(infer(node(OpKind::ReduceSum, {x, ints32({1})})),
              "must have dtype i64, got i32[1]");
  CHECK_ERROR(infer(node(OpKind::ReduceSum, {x, in(i64({}))})),
              "must have rank 1, got i64[]");
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

TEST_CASE_FIXTURE(Fixture, "Reshape with a constant shape") {
  Value *x = in(f32({2, 3, 4}));
  CHECK(infer(node(OpKind::Reshape, {x, ints({0, -1})})) == "f32[2,12]");
  CHECK(infer(node(OpKind::Reshape, {x, ints({-1})})) == "f32[24]");
  CHECK(infer(node(OpKind::Reshape, {x, ints({4, 0, 2})})) == "f32[4,3,2]");
  CHECK(infer(node(OpKind::Reshape, {x, ints({2, 3, 4, 1})})) ==
        "f32[2,3,4,1]");
  CHECK(infer(node(OpKind::Reshape, {in(f32({0, 3})), ints({0, 3})},
                   attrs({{"allowzero", int64_t{1}}}))) == "f32[0,3]");
  CHECK(infer(node(OpKind::Reshape, {in(f32({1})), ints({})})) == "f32[]");

  CHECK_ERROR(infer(node(OpKind::Reshape, {x, ints({4, 5})})),
              "cannot reshape f32[2,3,4] (24 elements) to shape [4,5] (20 "
              "elements)");
  CHECK_ERROR(infer(node(OpKind::Reshape, {x, ints({5, -1})})),
              "cannot reshape f32[2,3,4] to shape [5,-1]");
  CHECK_ERROR(infer(node(OpKind::Reshape, {x, ints({-1, -1})})),
              "shape [-1,-1] has more than one -1");
  CHECK_ERROR(infer(node(OpKind::Reshape, {x, ints({-2, 12})})),
              "shape [-2,12] has invalid dim -2");
  CHECK_ERROR(infer(node(OpKind::Reshape, {x, ints({1, 1, 24, 0})})),
              "copies dim 3 with 0, but f32[2,3,4] has rank 3");
  CHECK_ERROR(infer(node(OpKind::Reshape, {x, ints({0, -1})},
                         attrs({{"allowzero", int64_t{1}}}))),
              "has both 0 and -1 with allowzero = 1");
  CHECK_ERROR(infer(node(OpKind::Reshape, {x, ints({0, 24})},
                         attrs({{"allowzero", int64_t{1}}}))),
              "(0 elements)");
  CHECK_ERROR(infer(node(OpKind::Reshape, {x, ints({INT64_MAX, 4})})),
              "has too many elements");
  CHECK_ERROR(infer(node(OpKind::Reshape, {x, in(f32({2}))})),
              "must have dtype i64, got f32[2]");
}

TEST_CASE_FIXTURE(Fixture, "Reshape with a shape known only at run time") {
  Value *x = in(f32({2, 3, 4}));
  Node *reshape = declared(OpKind::Reshape, {x, in(i64({2}))}, {f32({6, 4})});
  CHECK(infer(reshape) == "f32[?] (24 elements)");
  CHECK(errorOf(checkResultTypes(*reshape)) == "ok");

  Node *wrongCount =
      declared(OpKind::Reshape, {x, in(i64({2}))}, {f32({5, 4})});
  CHECK(errorOf(checkResultTypes(*wrongCount)) ==
        "error: Reshape '%" + wrongCount->getResult(0)->getName().str() +
            "': declared type f32[5,4] of result %" +
            wrongCount->getResult(0)->getName().str() +
            " does not match inferred element count 24");
  Node *wrongDType =
      declared(OpKind::Reshape, {x, in(i64({2}))}, {f16({6, 4})});
  CHECK_ERROR(errorOf(checkResultTypes(*wrongDType)),
              "declared type f16[6,4] of result %" +
                  wrongDType->getResult(0)->getName().str() +
                  " does not match inferred dtype f32");
}

TEST_CASE_FIXTURE(Fixture, "Transpose permutes dims") {
  Value *x = in(f32({2, 3, 4}));
  CHECK(infer(node(OpKind::Transpose, {x})) == "f32[4,3,2]");
  CHECK(infer(node(OpKind::Transpose, {x},
                   attrs({{"perm", std::vector<int64_t>{0, 2, 1}}}))) ==
        "f32[2,4,3]");
  CHECK(infer(node(OpKind::Transpose, {in(i64({}))})) == "i64[]");
  CHECK_ERROR(infer(node(OpKind::Transpose, {x},
                         attrs({{"perm", std::vector<int64_t>{0, 0, 1}}}))),
              "attribute 'perm' [0,0,1] is not a permutation of the 3 dims of "
              "f32[2,3,4]");
  CHECK_ERROR(infer(node(OpKind::Transpose, {x},
                         attrs({{"perm", std::vector<int64_t>{0, 1}}}))),
              "is not a permutation");
  CHECK_ERROR(infer(node(OpKind::Transpose, {x},
                         attrs({{"perm", std::vector<int64_t>{0, 1, 3}}}))),
              "is not a permutation");
  CHECK_ERROR(infer(node(OpKind::Transpose, {x},
                         attrs({{"perm", std::vector<int64_t>{-1, 0, 1}}}))),
              "is not a permutation");
}

TEST_CASE_FIXTURE(Fixture, "Unsqueeze inserts dims at the axes") {
  Value *x = in(f32({3, 4}));
  CHECK(infer(node(OpKind::Unsqueeze, {x, ints({0, -1})})) == "f32[1,3,4,1]");
  CHECK(infer(node(OpKind::Unsqueeze, {x, ints({1})})) == "f32[3,1,4]");
  CHECK(infer(node(OpKind::Unsqueeze, {x, ints({3, 0})})) == "f32[1,3,4,1]");
  CHECK(infer(node(OpKind::Unsqueeze, {in(f32({})), ints({0})})) == "f32[1]");
  CHECK(infer(node(OpKind::Unsqueeze, {x, in(i64({1}))})) ==
        "f32[?] (12 elements)");
  CHECK_ERROR(infer(node(OpKind::Unsqueeze, {x, ints({3})})),
              "entry is 3, expected a value in [-3, 2] for rank 3");
  CHECK_ERROR(infer(node(OpKind::Unsqueeze, {x, ints({0, -4})})),
              "names axis 0 twice");
  CHECK_ERROR(infer(node(OpKind::Unsqueeze, {x, in(i64({1, 1}))})),
              "must have rank 1, got i64[1,1]");
}

TEST_CASE_FIXTURE(Fixture, "Squeeze removes size-1 dims") {
  Value *x = in(f32({1, 3, 1, 4}));
  CHECK(infer(node(OpKind::Squeeze, {x})) == "f32[3,4]");
  CHECK(infer(node(OpKind::Squeeze, {x, ints({0})})) == "f32[3,1,4]");
  CHECK(infer(node(OpKind::Squeeze, {x, ints({-2, 0})})) == "f32[3,4]");
  CHECK(infer(node(OpKind::Squeeze, {in(f32({3}))})) == "f32[3]");
  CHECK(infer(node(OpKind::Squeeze, {x, in(i64({1}))})) ==
        "f32[?] (12 elements)");
  CHECK_ERROR(infer(node(OpKind::Squeeze, {x, ints({1})})),
              "cannot squeeze dim 1 of size 3 in f32[1,3,1,4]");
  CHECK_ERROR(infer(node(OpKind::Squeeze, {x, ints({4})})), "entry is 4");
  CHECK_ERROR(infer(node(OpKind::Squeeze, {x, ints({0, 0})})), "twice");
}

TEST_CASE_FIXTURE(Fixture, "Concat joins along the axis") {
  Value *a = in(f32({2, 3}));
  Value *b = in(f32({2, 5}));
  CHECK(infer(node(OpKind::Concat, {a, b}, attrs({{"axis", int64_t{1}}}))) ==
        "f32[2,8]");
  CHECK(infer(node(OpKind::Concat, {a, b, a},
                   attrs({{"axis", int64_t{-1}}}))) == "f32[2,11]");
  CHECK(infer(node(OpKind::Concat, {a}, attrs({{"axis", int64_t{0}}}))) ==
        "f32[2,3]");
  CHECK(infer(node(OpKind::Concat, {a, a}, attrs({{"axis", int64_t{0}}}))) ==
        "f32[4,3]");
  CHECK_ERROR(infer(node(OpKind::Concat, {a, b})),
              "attribute 'axis' is required");
  CHECK_ERROR(
      infer(node(OpKind::Concat, {a, b}, attrs({{"axis", int64_t{0}}}))),
      "of type f32[2,5] does not match operand 0");
  CHECK_ERROR(infer(node(OpKind::Concat, {a, in(f32({2}))},
                         attrs({{"axis", int64_t{0}}}))),
              "does not match");
  CHECK_ERROR(infer(node(OpKind::Concat, {a, in(i64({2, 3}))},
                         attrs({{"axis", int64_t{0}}}))),
              "expected dtype f32");
  CHECK_ERROR(infer(node(OpKind::Concat, {a}, attrs({{"axis", int64_t{2}}}))),
              "attribute 'axis' is 2");
  // Each operand fits (one byte per element), their concatenation does not.
  TensorType half(DType::I8, {INT64_MAX / 2 + 1});
  CHECK_ERROR(infer(node(OpKind::Concat, {in(half), in(half)},
                         attrs({{"axis", int64_t{0}}}))),
              "concatenated dim 0 overflows int64");
}

TEST_CASE_FIXTURE(Fixture, "Slice clamps like ONNX") {
  Value *x = in(f32({10, 20}));
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  auto slice = [&](std::vector<Value *> operands) {
    operands.insert(operands.begin(), x);
    return infer(node(OpKind::Slice, operands));
  };
  CHECK(slice({ints({1}), ints({8})}) == "f32[7,20]");
  CHECK(slice({ints({1, 2}), ints({8, -2})}) == "f32[7,16]");
  CHECK(slice({ints({0}), ints({kMax}), ints({1}), ints({2})}) == "f32[10,10]");
  CHECK(slice({ints({0}), ints({kMax}), ints({1}), ints({3})}) == "f32[10,7]");
  CHECK(slice({ints({-1}), ints({kMin}), ints({0}), ints({-1})}) ==
        "f32[10,20]");
  CHECK(slice({ints({8}), ints({1}), ints({0}), ints({-2})}) == "f32[4,20]");
  CHECK(slice({ints({100}), ints({-100}), ints({0}), ints({-3})}) ==
        "f32[4,20]");
  CHECK(slice({ints({5}), ints({2})}) == "f32[0,20]");
  CHECK(slice({ints({-3}), ints({-1})}) == "f32[2,20]");
  CHECK(slice({ints({0}), ints({5}), ints({-1}), ints({kMax})}) == "f32[10,1]");
  CHECK(slice({ints({kMin}), ints({kMax}), ints({0}), ints({kMin})}) ==
        "f32[0,20]");
  CHECK(slice({ints({kMax}), ints({kMin}), ints({0}), ints({kMin})}) ==
        "f32[1,20]");
  CHECK(slice({ints32({2}), ints32({std::numeric_limits<int32_t>::max()})}) ==
        "f32[8,20]");
  CHECK(infer(node(OpKind::Slice, {in(f32({0, 4})), ints({0}), ints({5}),
                                   ints({0}), ints({-1})})) == "f32[0,4]");
  // Operands known only at run time leave the shape unknown.
  CHECK(slice({in(i64({1})), ints({8})}) == "f32[?]");

  CHECK_ERROR(slice({ints({0}), ints({5}), ints({0}), ints({0})}),
              "has a zero step");
  CHECK_ERROR(slice({ints({0}), ints32({5})}),
              "has type i32[1], expected dtype i64");
  CHECK_ERROR(slice({ints({0, 1}), ints({5})}),
              "must have as many entries as operand 1");
  CHECK_ERROR(slice({ints({0, 0}), ints({5, 5}), ints({1, -1})}),
              "names axis 1 twice");
  CHECK_ERROR(slice({ints({0}), ints({5}), ints({2})}), "entry is 2");
  CHECK_ERROR(slice({ints({0, 0, 0}), ints({1, 1, 1})}),
              "has 3 entries, but f32[10,20] has rank 2");
  CHECK_ERROR(slice({in(f32({1})), ints({5})}),
              "must have dtype i32 or i64, got f32[1]");
}

TEST_CASE_FIXTURE(Fixture, "Split evenly or by the split operand") {
  Value *x = in(f32({6, 4}));
  CHECK(infer(node(OpKind::Split, {x}, {}, 3)) ==
        "f32[2,4], f32[2,4], f32[2,4]");
  CHECK(infer(node(OpKind::Split, {x, ints({1, 3})},
                   attrs({{"axis", int64_t{1}}}), 2)) == "f32[6,1], f32[6,3]");
  CHECK(infer(node(OpKind::Split, {x, ints({6, 0})}, {}, 2)) ==
        "f32[6,4], f32[0,4]");
  CHECK(infer(node(OpKind::Split, {x, in(i64({2}))}, {}, 2)) ==
        "f32[?], f32[?]");

  CHECK_ERROR(infer(node(OpKind::Split, {x}, {}, 4)),
              "cannot split dim 0 of f32[6,4] evenly into 4 results");
  CHECK_ERROR(infer(node(OpKind::Split, {x, ints({2, 3})}, {}, 2)),
              "split [2,3] sums to 5, but dim 0 of f32[6,4] is 6");
  CHECK_ERROR(infer(node(OpKind::Split, {x, ints({2, 2, 2})}, {}, 2)),
              "has 3 entries for 2 results");
  CHECK_ERROR(infer(node(OpKind::Split, {x, ints({-1, 7})}, {}, 2)),
              "negative");
  CHECK_ERROR(infer(node(OpKind::Split, {x}, attrs({{"axis", int64_t{2}}}), 2)),
              "attribute 'axis' is 2");
}

TEST_CASE_FIXTURE(Fixture, "Expand broadcasts to the shape operand") {
  Value *x = in(f32({3, 1}));
  CHECK(infer(node(OpKind::Expand, {x, ints({2, 1, 4})})) == "f32[2,3,4]");
  CHECK(infer(node(OpKind::Expand, {x, ints({1})})) == "f32[3,1]");
  CHECK(infer(node(OpKind::Expand, {x, ints({})})) == "f32[3,1]");
  CHECK(infer(node(OpKind::Expand, {x, in(i64({3}))})) == "f32[?]");
  CHECK_ERROR(infer(node(OpKind::Expand, {x, ints({4, 4})})),
              "cannot expand f32[3,1] to shape [4,4]");
  CHECK_ERROR(infer(node(OpKind::Expand, {x, ints({-1, 1})})),
              "has negative dim -1");
  CHECK_ERROR(infer(node(OpKind::Expand, {x, ints32({3})})),
              "must have dtype i64");
}

TEST_CASE_FIXTURE(Fixture, "Gather replaces the axis by the index dims") {
  Value *data = in(f32({5, 4}));
  Value *indices = in(i64({2, 3}));
  CHECK(infer(node(OpKind::Gather, {data, indices})) == "f32[2,3,4]");
  CHECK(infer(node(OpKind::Gather, {data, indices},
                   attrs({{"axis", int64_t{1}}}))) == "f32[5,2,3]");
  CHECK(infer(node(OpKind::Gather, {data, in(i32({}))},
                   attrs({{"axis", int64_t{-1}}}))) == "f32[5]");
  CHECK_ERROR(infer(node(OpKind::Gather, {data, in(f32({2}))})),
              "must have dtype i32 or i64, got f32[2]");
  CHECK_ERROR(infer(node(OpKind::Gather, {data, indices},
                         attrs({{"axis", int64_t{2}}}))),
              "attribute 'axis' is 2");
  CHECK_ERROR(infer(node(OpKind::Gather, {in(f32({})), indices})),
              "but the operand is a scalar");
}

TEST_CASE_FIXTURE(Fixture, "ScatterElements writes into data") {
  Value *data = in(f32({4, 3}));
  Value *indices = in(i64({2, 3}));
  Value *updates = in(f32({2, 3}));
  CHECK(infer(node(OpKind::ScatterElements, {data, indices, updates},
                   attrs({{"reduction", std::string("add")}}))) == "f32[4,3]");
  CHECK(infer(node(OpKind::ScatterElements,
                   {data, in(i32({6, 2})), in(f32({6, 2}))})) == "f32[4,3]");
  CHECK_ERROR(infer(node(OpKind::ScatterElements, {data, indices, updates},
                         attrs({{"reduction", std::string("max")}}))),
              "attribute 'reduction' is \"max\"");
  CHECK_ERROR(
      infer(node(OpKind::ScatterElements, {data, in(i64({6})), in(f32({6}))})),
      "must have the rank of operand 0");
  CHECK_ERROR(
      infer(node(OpKind::ScatterElements, {data, indices, in(f32({3, 2}))})),
      "must have the shape of operand 1");
  CHECK_ERROR(infer(node(OpKind::ScatterElements,
                         {data, in(i64({2, 4})), in(f32({2, 4}))})),
              "in dim 1");
  CHECK_ERROR(
      infer(node(OpKind::ScatterElements, {data, indices, in(f16({2, 3}))})),
      "expected dtype f32");
  CHECK_ERROR(infer(node(OpKind::ScatterElements, {data, indices, updates},
                         attrs({{"axis", int64_t{-3}}}))),
              "attribute 'axis' is -3");
}

//===----------------------------------------------------------------------===//
// Shape-producing and constant ops
//===----------------------------------------------------------------------===//

TEST_CASE_FIXTURE(Fixture, "Shape slices the dims with start and end") {
  Value *x = in(f32({2, 3, 4}));
  auto shape = [&](AttrList attributes) {
    return infer(node(OpKind::Shape, {x}, std::move(attributes)));
  };
  CHECK(shape({}) == "i64[3]");
  CHECK(shape(attrs({{"start", int64_t{1}}})) == "i64[2]");
  CHECK(shape(attrs({{"start", int64_t{-1}}})) == "i64[1]");
  CHECK(shape(attrs({{"end", int64_t{-1}}})) == "i64[2]");
  CHECK(shape(attrs({{"start", int64_t{-10}}, {"end", int64_t{10}}})) ==
        "i64[3]");
  CHECK(shape(attrs({{"start", int64_t{5}}})) == "i64[0]");
  CHECK(shape(attrs({{"start", int64_t{2}}, {"end", int64_t{1}}})) == "i64[0]");
  CHECK(infer(node(OpKind::Shape, {in(f32({}))})) == "i64[0]");
  CHECK_ERROR(shape(attrs({{"start", std::string("0")}})),
              "attribute 'start' must be an int, got string");
}

TEST_CASE_FIXTURE(Fixture, "ConstantOfShape takes dtype from value") {
  CHECK(infer(node(OpKind::ConstantOfShape, {ints({2, 3})})) == "f32[2,3]");
  CHECK(infer(node(OpKind::ConstantOfShape, {ints({})})) == "f32[]");
  TensorDataPtr one = TensorData::fromInts(i64({1}), {1});
  CHECK(infer(node(OpKind::ConstantOfShape, {ints({4})},
                   attrs({{"value", one}}))) == "i64[4]");
  CHECK(infer(node(OpKind::ConstantOfShape, {in(i64({2}))},
                   attrs({{"value", one}}))) == "i64[?]");
  TensorDataPtr two = TensorData::fromDoubles(f32({2}), {1.0, 2.0});
  CHECK_ERROR(infer(node(OpKind::ConstantOfShape, {ints({4})},
                         attrs({{"value", two}}))),
              "attribute 'value' of type f32[2] must have exactly one element");
  CHECK_ERROR(infer(node(OpKind::ConstantOfShape, {ints({4})},
                         attrs({{"value", 1.0f}}))),
              "attribute 'value' must be a tensor, got float");
  CHECK_ERROR(infer(node(OpKind::ConstantOfShape, {ints({2, -3})})),
              "shape [2,-3] has negative dim -3");
  CHECK_ERROR(infer(node(OpKind::ConstantOfShape, {in(i32({2}))})),
              "must have dtype i64");
}

TEST_CASE_FIXTURE(Fixture, "Constant accepts five forms") {
  TensorDataPtr data = TensorData::fromDoubles(f16({2, 2}), {1, 2, 3, 4});
  CHECK(infer(node(OpKind::Constant, {}, attrs({{"value", data}}))) ==
        "f16[2,2]");
  CHECK(infer(node(OpKind::Constant, {}, attrs({{"value_float", 0.5f}}))) ==
        "f32[]");
  CHECK(infer(node(OpKind::Constant, {}, attrs({{"value_int", int64_t{3}}}))) ==
        "i64[]");
  CHECK(infer(node(OpKind::Constant, {},
                   attrs({{"value_floats", std::vector<float>{1, 2}}}))) ==
        "f32[2]");
  CHECK(infer(node(OpKind::Constant, {},
                   attrs({{"value_ints", std::vector<int64_t>{1, 2, 3}}}))) ==
        "i64[3]");
  // An empty list parses as ints; as value_floats it is an empty f32 list.
  CHECK(infer(node(OpKind::Constant, {},
                   attrs({{"value_floats", std::vector<int64_t>{}}}))) ==
        "f32[0]");

  CHECK_ERROR(infer(node(OpKind::Constant, {})),
              "expects exactly one of 'value', 'value_float', 'value_int', "
              "'value_floats', 'value_ints', got none");
  CHECK_ERROR(infer(node(OpKind::Constant, {},
                         attrs({{"value", data}, {"value_int", int64_t{1}}}))),
              "got 'value', 'value_int'");
  CHECK_ERROR(infer(node(OpKind::Constant, {},
                         attrs({{"value_string", std::string("a")}}))),
              "attribute 'value_string' is not supported");
  CHECK_ERROR(infer(node(OpKind::Constant, {},
                         attrs({{"value_ints", std::vector<float>{1.0f}}}))),
              "attribute 'value_ints' must be ints, got floats");
  CHECK_ERROR(infer(node(OpKind::Constant, {}, attrs({{"value", 1.0f}}))),
              "attribute 'value' must be a tensor, got float");
}

TEST_CASE_FIXTURE(Fixture, "getConstantValue reads value tensors only") {
  TensorDataPtr data = TensorData::fromInts(i64({2}), {4, 5});
  Value *constant =
      declared(OpKind::Constant, {}, {i64({2})}, attrs({{"value", data}}))
          ->getResult(0);
  CHECK(getConstantValue(constant) == data.get());

  Value *list = declared(OpKind::Constant, {}, {i64({2})},
                         attrs({{"value_ints", std::vector<int64_t>{4, 5}}}))
                    ->getResult(0);
  CHECK(getConstantValue(list) == nullptr);
  // ... but shape inference reads the list form too.
  CHECK(infer(node(OpKind::Reshape, {in(f32({20})), list})) == "f32[4,5]");

  CHECK(getConstantValue(in(i64({2}))) == nullptr);
  CHECK(getConstantValue(node(OpKind::Relu, {constant})->getResult(0)) ==
        nullptr);
  // A Constant whose declared type disagrees with its data is not trusted.
  Value *mistyped =
      declared(OpKind::Constant, {}, {i64({3})}, attrs({{"value", data}}))
          ->getResult(0);
  CHECK(getConstantValue(mistyped) == nullptr);
  CHECK(infer(node(OpKind::Reshape, {in(f32({20})), mistyped})) ==
        "f32[?] (20 elements)");
}

TEST_CASE_FIXTURE(Fixture, "Range length from constant bounds") {
  auto range = [&](DType dtype, double start, double limit, double delta) {
    return infer(
        node(OpKind::Range, {scalar(dtype, start), scalar(dtype, limit),
                             scalar(dtype, delta)}));
  };
  CHECK(range(DType::I64, 0, 10, 3) == "i64[4]");
  CHECK(range(DType::I64, 0, 9, 3) == "i64[3]");
  CHECK(range(DType::I32, 10, 0, -3) == "i32[4]");
  CHECK(range(DType::I64, 5, 0, 1) == "i64[0]");
  CHECK(range(DType::F32, 0, 1, 0.3) == "f32[4]");
  CHECK(range(DType::F64, 1, 2, 0.25) == "f64[4]");
  CHECK(range(DType::F32, 0, -1, 0.5) == "f32[0]");

  Value *start = scalar(DType::I64, 0);
  Value *delta = scalar(DType::I64, 1);
  CHECK(infer(node(OpKind::Range, {start, in(i64({})), delta})) == "i64[?]");
  Node *wide =
      node(OpKind::Range, {constant(TensorData::fromInts(i64({}), {INT64_MIN})),
                           constant(TensorData::fromInts(i64({}), {INT64_MAX})),
                           constant(TensorData::fromInts(i64({}), {1}))});
  CHECK_ERROR(infer(wide), "has too many elements");

  CHECK_ERROR(range(DType::I64, 0, 10, 0), "is zero");
  CHECK_ERROR(range(DType::F32, 0, 10, 0), "is zero");
  CHECK_ERROR(infer(node(OpKind::Range, {start, scalar(DType::I32, 4), delta})),
              "expected dtype i64");
  CHECK_ERROR(infer(node(OpKind::Range, {start, ints({4}), delta})),
              "must have rank 0, got i64[1]");
  CHECK_ERROR(infer(node(OpKind::Range, {in(u8({})), in(u8({})), in(u8({}))})),
              "must have dtype f32, f64, i32 or i64, got u8[]");
}

TEST_CASE_FIXTURE(Fixture, "OneHot inserts the depth at the axis") {
  Value *indices = in(i64({2, 3}));
  Value *depth = scalar(DType::I64, 5);
  Value *values = in(f32({2}));
  CHECK(infer(node(OpKind::OneHot, {indices, depth, values})) == "f32[2,3,5]");
  CHECK(infer(node(OpKind::OneHot, {indices, depth, values},
                   attrs({{"axis", int64_t{0}}}))) == "f32[5,2,3]");
  CHECK(infer(node(OpKind::OneHot, {indices, depth, values},
                   attrs({{"axis", int64_t{-2}}}))) == "f32[2,5,3]");
  CHECK(infer(node(OpKind::OneHot, {indices, scalar(DType::F32, 4.0),
                                    in(i64({2}))})) == "i64[2,3,4]");
  CHECK(infer(node(OpKind::OneHot, {indices, ints({7}), values})) ==
        "f32[2,3,7]");
  CHECK(infer(node(OpKind::OneHot, {indices, in(i64({})), values})) ==
        "f32[?]");

  CHECK_ERROR(infer(node(OpKind::OneHot, {indices, depth, values},
                         attrs({{"axis", int64_t{3}}}))),
              "attribute 'axis' is 3, expected a value in [-3, 2]");
  CHECK_ERROR(infer(node(OpKind::OneHot, {indices, depth, in(f32({3}))})),
              "must have shape [2]");
  CHECK_ERROR(infer(node(OpKind::OneHot, {indices, ints({2, 3}), values})),
              "must be a scalar or have one element");
  CHECK_ERROR(
      infer(node(OpKind::OneHot, {indices, scalar(DType::I64, 0), values})),
      "is 0, expected a positive count");
  CHECK_ERROR(infer(node(OpKind::OneHot, {in(boolean({2})), depth, values})),
              "must have a numeric dtype");
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

TEST_CASE_FIXTURE(Fixture, "SoftmaxCrossEntropyLoss reductions") {
  Value *scores = in(f32({8, 10}));
  Value *labels = in(i64({8}));
  CHECK(infer(node(OpKind::SoftmaxCrossEntropyLoss, {scores, labels})) ==
        "f32[]");
  CHECK(infer(node(OpKind::SoftmaxCrossEntropyLoss, {scores, labels},
                   attrs({{"reduction", std::string("sum")}}), 2)) ==
        "f32[], f32[8,10]");
  CHECK(infer(node(OpKind::SoftmaxCrossEntropyLoss, {scores, labels},
                   attrs({{"reduction", std::string("none")},
                          {"ignore_index", int64_t{-100}}}))) == "f32[8]");
  CHECK(infer(node(OpKind::SoftmaxCrossEntropyLoss,
                   {in(f16({8, 10, 4})), in(i32({8, 4})), in(f16({10}))},
                   attrs({{"reduction", std::string("none")}}), 2)) ==
        "f16[8,4], f16[8,10,4]");

  CHECK_ERROR(
      infer(node(OpKind::SoftmaxCrossEntropyLoss, {scores, in(i64({8, 10}))})),
      "labels operand 1");
  CHECK_ERROR(
      infer(node(OpKind::SoftmaxCrossEntropyLoss, {scores, in(i64({8, 10}))})),
      "must have shape [8] for scores f32[8,10]");
  CHECK_ERROR(infer(node(OpKind::SoftmaxCrossEntropyLoss,
                         {scores, labels, in(f32({9}))})),
              "must have shape [10]");
  CHECK_ERROR(infer(node(OpKind::SoftmaxCrossEntropyLoss,
                         {scores, labels, in(f64({10}))})),
              "expected dtype f32");
  CHECK_ERROR(infer(node(OpKind::SoftmaxCrossEntropyLoss, {scores, labels},
                         attrs({{"reduction", std::string("avg")}}))),
              "attribute 'reduction' is \"avg\"");
  CHECK_ERROR(
      infer(node(OpKind::SoftmaxCrossEntropyLoss, {scores, in(f32({8}))})),
      "must have dtype i32 or i64");
  CHECK_ERROR(
      infer(node(OpKind::SoftmaxCrossEntropyLoss, {in(f32({8})), labels})),
      "must have rank >= 2");
  CHECK_ERROR(infer(node(OpKind::SoftmaxCrossEntropyLoss, {scores, labels},
                         attrs({{"ignore_index", 1.0f}}))),
              "attribute 'ignore_index' must be an int");
}

//===----------------------------------------------------------------------===//
// checkResultTypes
//===----------------------------------------------------------------------===//

TEST_CASE_FIXTURE(Fixture, "checkResultTypes compares declared types") {
  Value *x = in(f32({3}));
  Node *good = declared(OpKind::Add, {x, x}, {f32({3})});
  CHECK(errorOf(checkResultTypes(*good)) == "ok");

  Node *bad = declared(OpKind::Add, {x, x}, {f32({4})});
  std::string name = bad->getResult(0)->getName().str();
  CHECK(errorOf(checkResultTypes(*bad)) ==
        "error: Add '%" + name + "': declared type f32[4] of result %" + name +
            " does not match inferred type f32[3]");

  // The second result of a multi-result node is named.
  Node *dropout = declared(OpKind::Dropout, {x}, {f32({3}), f32({3})});
  CHECK_ERROR(errorOf(checkResultTypes(*dropout)),
              "declared type f32[3] of result %" +
                  dropout->getResult(1)->getName().str() +
                  " does not match inferred type bool[3]");

  // Inference errors come through.
  Node *illTyped = declared(OpKind::Add, {x, in(i64({3}))}, {f32({3})});
  CHECK_ERROR(errorOf(checkResultTypes(*illTyped)), "expected dtype f32");

  // Unknown shapes check the dtype only.
  Node *expand = declared(OpKind::Expand, {x, in(i64({2}))}, {f32({7, 3})});
  CHECK(errorOf(checkResultTypes(*expand)) == "ok");
  Node *expandWrong =
      declared(OpKind::Expand, {x, in(i64({2}))}, {i64({7, 3})});
  CHECK_ERROR(errorOf(checkResultTypes(*expandWrong)),
              "does not match inferred dtype f32");
}
