//===- tests/unit/FoldConstantsTest.cpp - What constant folding computes --===//
//
// Folding computes through the CPU kernels (runtime::cpu::evaluateNode)
// under the folding policy (passes/FoldingPolicy.h). Expected values are
// computed by hand from ONNX opset-17 semantics; results are compared as
// printed text ("i64[3] [2, 3, 4]") so that a failure shows both sides.
//
//===----------------------------------------------------------------------===//
#include "passes/FoldingPolicy.h"

#include "ir/Graph.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "runtime/cpu/Evaluator.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <limits>

using namespace remat;
using namespace remat::ir;
using namespace remat::passes;

namespace {

TensorType i64(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::I64, dims);
}
TensorType f32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F32, dims);
}

/// \returns "<type> [e0, e1, ...]" with floats in %.9g (%.17g for f64) and
/// bools as true/false.
std::string show(const TensorData &data) {
  const TensorType &type = data.getType();
  DType dtype = type.getDType();
  std::string text = type.str() + " [";
  for (int64_t i = 0; i < data.getNumElements(); ++i) {
    if (i)
      text += ", ";
    if (dtype == DType::Bool) {
      text += data.getInt(i) ? "true" : "false";
    } else if (isFloat(dtype)) {
      char buffer[40];
      std::snprintf(buffer, sizeof(buffer),
                    dtype == DType::F64 ? "%.17g" : "%.9g", data.getDouble(i));
      text += buffer;
    } else {
      text += std::to_string(data.getInt(i));
    }
  }
  return text + "]";
}

/// What fold-constants and the importer evaluate with.
const NodeEvaluator &foldingEvaluator() {
  static const NodeEvaluator evaluator =
      makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
  return evaluator;
}

/// A scratch graph in which one node is built over constant operands and
/// evaluated as folding evaluates it.
class Scratch {
public:
  /// A Constant node holding \p data.
  Value *constant(TensorDataPtr data) {
    AttrList attrs;
    TensorType type = data->getType();
    attrs.set("value", std::move(data));
    return graph.createNode(OpKind::Constant, {}, {type}, {}, std::move(attrs))
        ->getResult(0);
  }
  Value *ints(TensorType type, llvm::ArrayRef<int64_t> values) {
    return constant(TensorData::fromInts(std::move(type), values));
  }
  Value *doubles(TensorType type, llvm::ArrayRef<double> values) {
    return constant(TensorData::fromDoubles(std::move(type), values));
  }
  Value *input(TensorType type) {
    return graph.addInput(graph.uniqueName("in"), std::move(type));
  }

  /// Evaluates \p op on \p operands declaring \p resultType; \returns the
  /// printed result or "error: <message>".
  std::string eval(OpKind op, llvm::ArrayRef<Value *> operands,
                   TensorType resultType, AttrList attrs = {}) {
    Node *node =
        graph.createNode(op, operands, {resultType}, {}, std::move(attrs));
    llvm::SmallVector<const TensorData *, 4> data;
    for (Value *operand : operands)
      data.push_back(getConstantValue(operand));
    auto results = foldingEvaluator()(*node, data);
    if (!results)
      return "error: " + errorToString(results.takeError());
    REQUIRE(results->size() == 1);
    // The result must carry exactly the declared type.
    CHECK((*results)[0]->getType() == resultType);
    return show(*(*results)[0]);
  }

  Graph graph{"scratch"};
};

AttrList attr(llvm::StringRef name, AttrValue value) {
  AttrList attrs;
  attrs.set(name, std::move(value));
  return attrs;
}

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

} // namespace

TEST_CASE("Shape needs only the operand type and honours start and end") {
  Scratch s;
  Value *x = s.input(f32({2, 3, 4}));
  CHECK(s.eval(OpKind::Shape, {x}, i64({3})) == "i64[3] [2, 3, 4]");
  CHECK(s.eval(OpKind::Shape, {x}, i64({2}), attr("start", int64_t(1))) ==
        "i64[2] [3, 4]");
  AttrList range = attr("start", int64_t(-2));
  range.set("end", int64_t(-1));
  CHECK(s.eval(OpKind::Shape, {x}, i64({1}), range) == "i64[1] [3]");
  // Out-of-range start and end clamp to [0, rank]; start > end is empty.
  CHECK(s.eval(OpKind::Shape, {x}, i64({0}), attr("start", int64_t(7))) ==
        "i64[0] []");
  CHECK(s.eval(OpKind::Shape, {x}, i64({3}), attr("start", int64_t(-10))) ==
        "i64[3] [2, 3, 4]");
  CHECK(s.eval(OpKind::Shape, {x}, i64({0}), attr("end", int64_t(-10))) ==
        "i64[0] []");
}

TEST_CASE("Gather takes entries along an axis with negative indices") {
  Scratch s;
  Value *v = s.ints(i64({3}), {10, 20, 30});
  CHECK(s.eval(OpKind::Gather, {v, s.ints(i64({}), {2})}, i64({})) ==
        "i64[] [30]");
  CHECK(s.eval(OpKind::Gather, {v, s.ints(i64({2}), {-1, 0})}, i64({2})) ==
        "i64[2] [30, 10]");
  Value *m = s.doubles(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  Value *idx =
      s.constant(TensorData::fromInts(TensorType(DType::I32, {2, 1}), {2, 0}));
  CHECK(s.eval(OpKind::Gather, {m, idx}, f32({2, 2, 1}),
               attr("axis", int64_t(1))) == "f32[2,2,1] [3, 1, 6, 4]");
  CHECK(
      s.eval(OpKind::Gather, {m, idx}, f32({2, 1, 3}))
          .ends_with("': index 2 at position 0 of the indices is out of range "
                     "[-2, 2) for axis 0"));
}

TEST_CASE("Unsqueeze and Squeeze move size-1 dims") {
  Scratch s;
  CHECK(s.eval(OpKind::Unsqueeze, {s.ints(i64({}), {5}), s.ints(i64({1}), {0})},
               i64({1})) == "i64[1] [5]");
  Value *m = s.doubles(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  // Axes count in the output rank (4): -1 is 3.
  CHECK(s.eval(OpKind::Unsqueeze, {m, s.ints(i64({2}), {-1, 0})},
               f32({1, 2, 3, 1})) == "f32[1,2,3,1] [1, 2, 3, 4, 5, 6]");
  CHECK(s.eval(OpKind::Unsqueeze, {m, s.ints(i64({2}), {0, -4})},
               f32({1, 1, 2, 3}))
            .ends_with("[0,-4] names axis 0 twice"));

  Value *t = s.doubles(f32({1, 3, 1}), {7, 8, 9});
  CHECK(s.eval(OpKind::Squeeze, {t, s.ints(i64({1}), {0})}, f32({3, 1})) ==
        "f32[3,1] [7, 8, 9]");
  CHECK(s.eval(OpKind::Squeeze, {t}, f32({3})) == "f32[3] [7, 8, 9]");
  CHECK(s.eval(OpKind::Squeeze, {t, s.ints(i64({1}), {1})}, f32({1, 1}))
            .ends_with("': cannot squeeze dim 1 of size 3 in f32[1,3,1]"));
}

TEST_CASE("Concat joins along an axis") {
  Scratch s;
  CHECK(s.eval(OpKind::Concat,
               {s.ints(i64({1}), {2}), s.ints(i64({2}), {3, 4})}, i64({3}),
               attr("axis", int64_t(0))) == "i64[3] [2, 3, 4]");
  Value *a = s.doubles(f32({2, 1}), {1, 2});
  Value *b = s.doubles(f32({2, 2}), {3, 4, 5, 6});
  CHECK(s.eval(OpKind::Concat, {a, b}, f32({2, 3}),
               attr("axis", int64_t(-1))) == "f32[2,3] [1, 3, 4, 2, 5, 6]");
  Value *none = s.constant(std::make_shared<TensorData>(f32({2, 0})));
  CHECK(s.eval(OpKind::Concat, {none, a, none}, f32({2, 1}),
               attr("axis", int64_t(1))) == "f32[2,1] [1, 2]");
  CHECK(s.eval(OpKind::Concat, {a, b}, f32({4, 1}), attr("axis", int64_t(0)))
            .ends_with("of type f32[2,2] does not match operand 0 (%t2) of "
                       "type f32[2,1] outside axis 0"));
}

TEST_CASE("Slice clamps and walks negative steps as ONNX does") {
  Scratch s;
  Value *v = s.ints(i64({5}), {0, 1, 2, 3, 4});
  auto slice = [&](std::vector<int64_t> starts, std::vector<int64_t> ends,
                   std::vector<int64_t> steps, int64_t length) {
    int64_t n = starts.size();
    return s.eval(OpKind::Slice,
                  {v, s.ints(i64({n}), starts), s.ints(i64({n}), ends),
                   s.ints(i64({n}), {0}), s.ints(i64({n}), steps)},
                  i64({length}));
  };
  CHECK(slice({1}, {4}, {1}, 3) == "i64[3] [1, 2, 3]");
  CHECK(slice({-100}, {100}, {2}, 3) == "i64[3] [0, 2, 4]");
  CHECK(slice({3}, {1}, {1}, 0) == "i64[0] []");
  // Negative steps: start clamps to dim - 1, end to -1 (INT64_MIN = "past
  // the front").
  CHECK(slice({-1}, {kInt64Min}, {-1}, 5) == "i64[5] [4, 3, 2, 1, 0]");
  CHECK(slice({10}, {0}, {-2}, 2) == "i64[2] [4, 2]");
  CHECK(slice({-2}, {-5}, {-1}, 3) == "i64[3] [3, 2, 1]");
  CHECK(slice({0}, {5}, {kInt64Min}, 0) == "i64[0] []");
  CHECK(slice({4}, {0}, {kInt64Min}, 1) == "i64[1] [4]");
  CHECK(slice({0}, {5}, {0}, 5).ends_with("[0] has a zero step"));

  // Axis 1 only, reversed, with i32 index operands and without steps: the
  // default axes are 0..n-1.
  Value *m = s.doubles(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  auto i32 = [&](llvm::ArrayRef<int64_t> values) {
    return s.constant(TensorData::fromInts(
        TensorType(DType::I32, {int64_t(values.size())}), values));
  };
  CHECK(s.eval(OpKind::Slice, {m, i32({-1}), i32({-1000}), i32({1}), i32({-1})},
               f32({2, 3})) == "f32[2,3] [3, 2, 1, 6, 5, 4]");
  CHECK(s.eval(OpKind::Slice, {m, i32({1, 1}), i32({2, 3})}, f32({1, 2})) ==
        "f32[1,2] [5, 6]");
}

TEST_CASE("Reshape copies 0 dims and infers -1") {
  Scratch s;
  Value *x = s.constant(std::make_shared<TensorData>(f32({2, 3, 4})));
  CHECK(s.eval(OpKind::Reshape, {x, s.ints(i64({2}), {0, -1})}, f32({2, 12}))
            .starts_with("f32[2,12] "));
  CHECK(
      s.eval(OpKind::Reshape, {x, s.ints(i64({3}), {-1, 0, 2})}, f32({4, 3, 2}))
          .starts_with("f32[4,3,2] "));
  Value *small = s.ints(i64({2, 2}), {1, 2, 3, 4});
  CHECK(s.eval(OpKind::Reshape, {small, s.ints(i64({1}), {-1})}, i64({4})) ==
        "i64[4] [1, 2, 3, 4]");
  CHECK(s.eval(OpKind::Reshape, {small, s.ints(i64({2}), {-1, -1})}, i64({4}))
            .find("more than one -1") != std::string::npos);
  CHECK(s.eval(OpKind::Reshape, {small, s.ints(i64({2}), {3, -1})}, i64({4}))
            .find("cannot reshape i64[2,2] to shape [3,-1]") !=
        std::string::npos);
  // allowzero: 0 is a literal zero dim.
  Value *empty = s.constant(std::make_shared<TensorData>(f32({0, 3})));
  CHECK(s.eval(OpKind::Reshape, {empty, s.ints(i64({2}), {3, 0})}, f32({3, 0}),
               attr("allowzero", int64_t(1))) == "f32[3,0] []");
  CHECK(s.eval(OpKind::Reshape, {empty, s.ints(i64({2}), {0, 5})},
               f32({0, 5})) == "f32[0,5] []");
}

TEST_CASE("Expand and Identity") {
  Scratch s;
  Value *col = s.doubles(f32({3, 1}), {1, 2, 3});
  CHECK(s.eval(OpKind::Expand, {col, s.ints(i64({3}), {2, 1, 2})},
               f32({2, 3, 2})) ==
        "f32[2,3,2] [1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3]");
  CHECK(s.eval(OpKind::Expand, {col, s.ints(i64({1}), {2})}, f32({3, 2})) ==
        "f32[3,2] [1, 1, 2, 2, 3, 3]");
  // A shape dim of 1 keeps the operand's larger dim.
  CHECK(s.eval(OpKind::Expand, {col, s.ints(i64({2}), {1, 1})}, f32({3, 1})) ==
        "f32[3,1] [1, 2, 3]");
  CHECK(s.eval(OpKind::Expand, {col, s.ints(i64({2}), {2, 2})}, f32({3, 2}))
            .find("cannot expand f32[3,1] to shape [2,2]") !=
        std::string::npos);
  CHECK(s.eval(OpKind::Identity, {col}, f32({3, 1})) == "f32[3,1] [1, 2, 3]");
}

TEST_CASE("Cast converts every dtype pair the ONNX way") {
  Scratch s;
  auto cast = [&](Value *v, DType to) {
    TensorType type = v->getType().withDType(to);
    return s.eval(OpKind::Cast, {v}, type, attr("to", int64_t(onnxCode(to))));
  };
  // Float to int truncates toward zero.
  Value *f = s.doubles(f32({4}), {1.7, -1.7, 2.5, -0.0});
  CHECK(cast(f, DType::I64) == "i64[4] [1, -1, 2, 0]");
  CHECK(cast(f, DType::I8) == "i8[4] [1, -1, 2, 0]");
  CHECK(cast(f, DType::Bool) == "bool[4] [true, true, true, false]");
  CHECK(cast(s.doubles(f32({1}), {3e9}), DType::I32)
            .find("cannot cast 3e+09 to i32") != std::string::npos);
  CHECK(cast(s.doubles(f32({1}), {-1.5}), DType::U8)
            .find("cannot cast -1.5 to u8") != std::string::npos);
  CHECK(cast(s.doubles(f32({1}), {NAN}), DType::I64).find("cannot cast nan") !=
        std::string::npos);
  CHECK(cast(s.doubles(f32({1}), {NAN}), DType::Bool) == "bool[1] [true]");
  CHECK(cast(s.doubles(f32({1}), {-0.5}), DType::U8) == "u8[1] [0]");

  // Float to float rounds to nearest even.
  Value *third = s.doubles(TensorType(DType::F64, {1}), {1.0 / 3});
  CHECK(cast(third, DType::F32) == "f32[1] [0.333333343]");
  Value *halfTie = s.doubles(f32({2}), {1 + 0x1p-11, 1 + 3 * 0x1p-11});
  CHECK(cast(halfTie, DType::F16) == "f16[2] [1, 1.00195312]");
  CHECK(cast(s.doubles(f32({1}), {1 + 0x1p-8}), DType::BF16) == "bf16[1] [1]");
  CHECK(cast(s.doubles(f32({1}), {1e6}), DType::F16) == "f16[1] [inf]");
  Value *h = s.doubles(TensorType(DType::F16, {1}), {-2.5});
  CHECK(cast(h, DType::F64) == "f64[1] [-2.5]");
  CHECK(cast(h, DType::I32) == "i32[1] [-2]");

  // Int to int wraps; int to float rounds; bool is 0 or 1.
  Value *n = s.ints(i64({4}), {257, -1, 0, 16777217});
  CHECK(cast(n, DType::U8) == "u8[4] [1, 255, 0, 1]");
  CHECK(cast(n, DType::I8) == "i8[4] [1, -1, 0, 1]");
  CHECK(cast(n, DType::I32) == "i32[4] [257, -1, 0, 16777217]");
  CHECK(cast(n, DType::F32) == "f32[4] [257, -1, 0, 16777216]");
  CHECK(cast(n, DType::F64) == "f64[4] [257, -1, 0, 16777217]");
  CHECK(cast(n, DType::Bool) == "bool[4] [true, true, false, true]");
  Value *b =
      s.constant(TensorData::fromInts(TensorType(DType::Bool, {2}), {1, 0}));
  CHECK(cast(b, DType::F32) == "f32[2] [1, 0]");
  CHECK(cast(b, DType::I64) == "i64[2] [1, 0]");
  CHECK(cast(b, DType::Bool) == "bool[2] [true, false]");
  CHECK(cast(s.ints(TensorType(DType::U8, {1}), {200}), DType::I8) ==
        "i8[1] [-56]");
}

TEST_CASE("Range and ConstantOfShape") {
  Scratch s;
  auto range = [&](DType dtype, double start, double limit, double delta,
                   int64_t length) {
    TensorType scalar(dtype, {});
    return s.eval(OpKind::Range,
                  {s.doubles(scalar, {start}), s.doubles(scalar, {limit}),
                   s.doubles(scalar, {delta})},
                  TensorType(dtype, {length}));
  };
  CHECK(range(DType::I64, 0, 10, 3, 4) == "i64[4] [0, 3, 6, 9]");
  CHECK(range(DType::I32, 10, 0, -3, 4) == "i32[4] [10, 7, 4, 1]");
  CHECK(range(DType::I64, 5, 0, 1, 0) == "i64[0] []");
  CHECK(range(DType::F32, 0, 1, 0.25, 4) == "f32[4] [0, 0.25, 0.5, 0.75]");
  CHECK(range(DType::F64, 1, 0, -0.5, 2) == "f64[2] [1, 0.5]");
  CHECK(range(DType::I64, 0, 1, 0, 0).ends_with(") is zero"));

  Value *shape = s.ints(i64({2}), {2, 3});
  auto seven = TensorData::fromInts(TensorType(DType::I32, {1}), {7});
  CHECK(s.eval(OpKind::ConstantOfShape, {shape}, TensorType(DType::I32, {2, 3}),
               attr("value", seven)) == "i32[2,3] [7, 7, 7, 7, 7, 7]");
  CHECK(s.eval(OpKind::ConstantOfShape, {s.ints(i64({1}), {2})}, f32({2})) ==
        "f32[2] [0, 0]");
  CHECK(s.eval(OpKind::ConstantOfShape, {s.ints(i64({0}), {})},
               TensorType(DType::I32, {}),
               attr("value", seven)) == "i32[] [7]");
}

TEST_CASE("Equal and Where broadcast") {
  Scratch s;
  TensorType b3(DType::Bool, {3});
  CHECK(s.eval(OpKind::Equal,
               {s.ints(i64({3}), {1, 2, 3}), s.ints(i64({1}), {2})},
               b3) == "bool[3] [false, true, false]");
  CHECK(s.eval(OpKind::Equal,
               {s.doubles(f32({2}), {NAN, 1}), s.doubles(f32({2}), {NAN, 1})},
               TensorType(DType::Bool, {2})) == "bool[2] [false, true]");

  Value *cond =
      s.constant(TensorData::fromInts(TensorType(DType::Bool, {2, 1}), {1, 0}));
  Value *x = s.doubles(f32({3}), {1, 2, 3});
  Value *y = s.doubles(f32({}), {0});
  CHECK(s.eval(OpKind::Where, {cond, x, y}, f32({2, 3})) ==
        "f32[2,3] [1, 2, 3, 0, 0, 0]");
}

TEST_CASE("GreaterOrEqual, And, Max and Mod") {
  Scratch s;
  TensorType b3(DType::Bool, {3});
  CHECK(s.eval(OpKind::GreaterOrEqual,
               {s.ints(i64({3}), {1, 2, 3}), s.ints(i64({}), {2})},
               b3) == "bool[3] [false, true, true]");
  // NaN compares false.
  CHECK(s.eval(OpKind::GreaterOrEqual,
               {s.doubles(f32({2}), {NAN, 1}), s.doubles(f32({2}), {0, 1})},
               TensorType(DType::Bool, {2})) == "bool[2] [false, true]");
  CHECK(s.eval(OpKind::GreaterOrEqual,
               {s.constant(TensorData::fromInts(b3, {1, 0, 1})),
                s.constant(TensorData::fromInts(b3, {1, 0, 1}))},
               b3)
            .ends_with("must have a numeric dtype, got bool[3]"));

  Value *column =
      s.constant(TensorData::fromInts(TensorType(DType::Bool, {2, 1}), {1, 0}));
  Value *row =
      s.constant(TensorData::fromInts(TensorType(DType::Bool, {2}), {1, 0}));
  CHECK(s.eval(OpKind::And, {column, row}, TensorType(DType::Bool, {2, 2})) ==
        "bool[2,2] [true, false, false, false]");
  CHECK(s.eval(OpKind::And, {column, s.ints(i64({1}), {1})},
               TensorType(DType::Bool, {2, 1}))
            .ends_with("must have dtype bool, got i64[1]"));

  // Max over three operands, broadcast; NaN propagates.
  CHECK(s.eval(OpKind::Max,
               {s.ints(i64({2, 1}), {0, 5}), s.ints(i64({3}), {1, 2, 9}),
                s.ints(i64({}), {3})},
               i64({2, 3})) == "i64[2,3] [3, 3, 9, 5, 5, 9]");
  CHECK(s.eval(OpKind::Max,
               {s.doubles(f32({3}), {1, NAN, -1}),
                s.doubles(f32({3}), {NAN, 2, -2})},
               f32({3})) == "f32[3] [nan, nan, -1]");
  CHECK(s.eval(OpKind::Max, {s.ints(i64({2}), {4, -4})}, i64({2})) ==
        "i64[2] [4, -4]");

  // fmod 0: the sign of the divisor; fmod 1: the sign of the dividend.
  Value *a = s.ints(i64({4}), {7, -7, 7, -7});
  Value *b = s.ints(i64({4}), {3, 3, -3, -3});
  CHECK(s.eval(OpKind::Mod, {a, b}, i64({4})) == "i64[4] [1, 2, -2, -1]");
  CHECK(s.eval(OpKind::Mod, {a, b}, i64({4}), attr("fmod", int64_t{1})) ==
        "i64[4] [1, -1, 1, -1]");
  CHECK(s.eval(OpKind::Mod,
               {s.ints(i64({1}), {std::numeric_limits<int64_t>::min()}),
                s.ints(i64({1}), {-1})},
               i64({1})) == "i64[1] [0]");
  CHECK(s.eval(OpKind::Mod,
               {s.doubles(f32({2}), {5.5, -5.5}), s.doubles(f32({}), {2})},
               f32({2}), attr("fmod", int64_t{1})) == "f32[2] [1.5, -1.5]");
  CHECK(s.eval(OpKind::Mod, {a, s.ints(i64({1}), {0})}, i64({4}))
            .ends_with("integer division by zero (element 0 of operand 1 is "
                       "0)"));
  CHECK(s.eval(OpKind::Mod,
               {s.doubles(f32({1}), {1}), s.doubles(f32({1}), {1})}, f32({1}))
            .ends_with("of float type f32[1]"));
}

TEST_CASE("Add, Sub, Mul and Div broadcast and keep the dtype's arithmetic") {
  Scratch s;
  Value *col = s.doubles(f32({2, 1}), {10, 20});
  Value *row = s.doubles(f32({3}), {1, 2, 4});
  CHECK(s.eval(OpKind::Add, {col, row}, f32({2, 3})) ==
        "f32[2,3] [11, 12, 14, 21, 22, 24]");
  CHECK(s.eval(OpKind::Sub, {col, row}, f32({2, 3})) ==
        "f32[2,3] [9, 8, 6, 19, 18, 16]");
  CHECK(s.eval(OpKind::Mul, {row, col}, f32({2, 3})) ==
        "f32[2,3] [10, 20, 40, 20, 40, 80]");
  CHECK(s.eval(OpKind::Div, {col, row}, f32({2, 3})) ==
        "f32[2,3] [10, 5, 2.5, 20, 10, 5]");
  CHECK(s.eval(OpKind::Div, {row, s.doubles(f32({}), {0})}, f32({3})) ==
        "f32[3] [inf, inf, inf]");
  CHECK(
      s.eval(OpKind::Add, {col, s.doubles(f32({3, 1}), {1, 2, 3})}, f32({2, 1}))
          .ends_with("cannot broadcast operands operand 0 (%t): f32[2,1], "
                     "operand 1 (%t7): f32[3,1]"));

  // f64 keeps double precision; f16 arithmetic is not folded (see
  // "fold-constants leaves f16 and bf16 arithmetic to the runtime").
  TensorType d1(DType::F64, {1});
  CHECK(s.eval(OpKind::Add, {s.doubles(d1, {0.1}), s.doubles(d1, {0.2})}, d1) ==
        "f64[1] [0.30000000000000004]");
  CHECK(s.eval(OpKind::Add,
               {s.doubles(f32({1}), {1}), s.doubles(f32({1}), {0x1p-11})},
               f32({1})) == "f32[1] [1.00048828]");

  // Integers wrap and divide toward zero.
  TensorType i32x1(DType::I32, {1});
  CHECK(s.eval(OpKind::Add, {s.ints(i32x1, {2147483647}), s.ints(i32x1, {1})},
               i32x1) == "i32[1] [-2147483648]");
  CHECK(s.eval(OpKind::Mul,
               {s.ints(i64({1}), {kInt64Min}), s.ints(i64({1}), {-1})},
               i64({1})) == "i64[1] [-9223372036854775808]");
  CHECK(s.eval(OpKind::Div,
               {s.ints(i64({4}), {7, -7, 7, kInt64Min}),
                s.ints(i64({4}), {2, 2, -2, -1})},
               i64({4})) == "i64[4] [3, -3, -3, -9223372036854775808]");
  std::string divZero =
      s.eval(OpKind::Div, {s.ints(i64({2}), {1, 2}), s.ints(i64({2}), {1, 0})},
             i64({2}));
  CHECK(divZero.starts_with("error: Div '"));
  CHECK(divZero.ends_with("': integer division by zero (element 1 of operand "
                          "1 is 0)"));
  CHECK(s.eval(OpKind::Add, {s.ints(i64({1}), {1}), s.doubles(f32({1}), {1})},
               i64({1}))
            .find("has type f32[1], expected dtype i64") != std::string::npos);
}

TEST_CASE("Pow takes the base's dtype") {
  Scratch s;
  CHECK(s.eval(OpKind::Pow,
               {s.doubles(f32({2}), {2, 3}), s.doubles(f32({}), {2})},
               f32({2})) == "f32[2] [4, 9]");
  CHECK(s.eval(OpKind::Pow,
               {s.doubles(f32({2}), {4, 9}), s.ints(i64({}), {-1})},
               f32({2})) == "f32[2] [0.25, 0.111111112]");
  CHECK(s.eval(
            OpKind::Pow,
            {s.ints(i64({4}), {2, 3, -1, 2}), s.ints(i64({4}), {10, 3, 3, -1})},
            i64({4})) == "i64[4] [1024, 27, -1, 0]");
  CHECK(s.eval(OpKind::Pow,
               {s.ints(i64({2}), {4, 10}), s.doubles(f32({}), {0.5})},
               i64({2})) == "i64[2] [2, 3]");
  CHECK(s.eval(OpKind::Pow, {s.ints(i64({1}), {0}), s.ints(i64({}), {-1})},
               i64({1}))
            .find("0 raised to a negative power") != std::string::npos);
}

TEST_CASE("unary ops") {
  Scratch s;
  auto unary = [&](OpKind op, Value *v) {
    return s.eval(op, {v}, v->getType());
  };
  CHECK(unary(OpKind::Neg, s.doubles(f32({2}), {1.5, -0.0})) ==
        "f32[2] [-1.5, 0]");
  CHECK(unary(OpKind::Neg, s.ints(TensorType(DType::I8, {2}), {-128, 5})) ==
        "i8[2] [-128, -5]");
  CHECK(unary(OpKind::Neg, s.ints(TensorType(DType::U8, {1}), {1}))
            .ends_with("must have a float or signed integer dtype, got u8[1]"));
  CHECK(unary(OpKind::Sqrt, s.doubles(f32({2}), {4, 2})) ==
        "f32[2] [2, 1.41421354]");
  CHECK(unary(OpKind::Exp, s.doubles(f32({2}), {0, 1})) ==
        "f32[2] [1, 2.71828175]");
  CHECK(unary(OpKind::Log, s.doubles(f32({2}), {1, 0})) == "f32[2] [0, -inf]");
  CHECK(unary(OpKind::Erf, s.doubles(f32({2}), {0, 1})) ==
        "f32[2] [0, 0.842700779]");
  CHECK(unary(OpKind::Tanh, s.doubles(f32({2}), {0, 1})) ==
        "f32[2] [0, 0.761594176]");
  CHECK(unary(OpKind::Sigmoid, s.doubles(f32({2}), {0, -200})) ==
        "f32[2] [0.5, 0]");
  CHECK(unary(OpKind::Relu, s.doubles(f32({3}), {-1, 0, 2})) ==
        "f32[3] [0, 0, 2]");
  CHECK(unary(OpKind::Relu, s.ints(TensorType(DType::I32, {2}), {-3, 3})) ==
        "i32[2] [0, 3]");
  CHECK(unary(OpKind::Sqrt, s.ints(i64({1}), {4}))
            .ends_with("must have a float dtype, got i64[1]"));
  // f64 is computed in double.
  CHECK(unary(OpKind::Exp, s.doubles(TensorType(DType::F64, {1}), {1})) ==
        "f64[1] [2.7182818284590451]");
}

TEST_CASE("remat.Gelu with and without the tanh approximation") {
  Scratch s;
  Value *x = s.doubles(f32({4}), {-1, 0, 1, 3});
  // 0.5 x (1 + erf(x / sqrt(2))); in double 0.841344746 at 1, 2.99595031
  // at 3.
  CHECK(s.eval(OpKind::Gelu, {x}, f32({4})) ==
        "f32[4] [-0.158655256, 0, 0.841344714, 2.99595022]");
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); in double 0.841191991
  // at 1.
  CHECK(s.eval(OpKind::Gelu, {x}, f32({4}),
               attr("approximate", std::string("tanh"))) ==
        "f32[4] [-0.158807993, 0, 0.841192007, 2.99636269]");
  // f64 is computed in double (0.8413447460685429 to 16 digits).
  Value *d = s.doubles(TensorType(DType::F64, {1}), {1});
  CHECK(s.eval(OpKind::Gelu, {d}, TensorType(DType::F64, {1})) ==
        "f64[1] [0.84134474606854304]");
  CHECK(s.eval(OpKind::Gelu, {x}, f32({4}),
               attr("approximate", std::string("exact")))
            .ends_with("attribute 'approximate' is \"exact\", expected "
                       "\"none\" or \"tanh\""));
  CHECK(s.eval(OpKind::Gelu, {s.ints(i64({1}), {1})}, i64({1}))
            .ends_with("must have a float dtype, got i64[1]"));
  CHECK(isFoldable(OpKind::Gelu));
}

TEST_CASE("Transpose permutes dims") {
  Scratch s;
  Value *m = s.doubles(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  CHECK(s.eval(OpKind::Transpose, {m}, f32({3, 2})) ==
        "f32[3,2] [1, 4, 2, 5, 3, 6]");
  Value *c = s.ints(i64({2, 2, 2}), {0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(s.eval(OpKind::Transpose, {c}, i64({2, 2, 2}),
               attr("perm", std::vector<int64_t>{1, 0, 2})) ==
        "i64[2,2,2] [0, 1, 4, 5, 2, 3, 6, 7]");
  CHECK(s.eval(OpKind::Transpose, {c}, i64({2, 2, 2}),
               attr("perm", std::vector<int64_t>{1, 1, 0}))
            .find("is not a permutation") != std::string::npos);
}

TEST_CASE("ReduceSum, ReduceMean and ReduceMax") {
  Scratch s;
  Value *m = s.doubles(f32({2, 3}), {1, 2, 3, 4, 5, 9});
  CHECK(s.eval(OpKind::ReduceSum, {m, s.ints(i64({1}), {1})}, f32({2, 1})) ==
        "f32[2,1] [6, 18]");
  CHECK(s.eval(OpKind::ReduceSum, {m}, f32({}), attr("keepdims", int64_t(0))) ==
        "f32[] [24]");
  CHECK(s.eval(OpKind::ReduceSum, {m, s.ints(i64({0}), {})}, f32({1, 1})) ==
        "f32[1,1] [24]");
  CHECK(s.eval(OpKind::ReduceSum, {m, s.ints(i64({0}), {})}, f32({2, 3}),
               attr("noop_with_empty_axes", int64_t(1))) ==
        "f32[2,3] [1, 2, 3, 4, 5, 9]");
  CHECK(s.eval(OpKind::ReduceMean, {m}, f32({3}), [] {
    AttrList attrs = attr("axes", std::vector<int64_t>{0});
    attrs.set("keepdims", int64_t(0));
    return attrs;
  }()) == "f32[3] [2.5, 3.5, 6]");
  CHECK(s.eval(OpKind::ReduceMax, {m}, f32({2, 1}),
               attr("axes", std::vector<int64_t>{-1})) == "f32[2,1] [3, 9]");
  CHECK(s.eval(OpKind::ReduceMax, {s.doubles(f32({3}), {1, NAN, 2})},
               f32({1})) == "f32[1] [nan]");
  // Integer mean truncates.
  CHECK(s.eval(OpKind::ReduceMean, {s.ints(i64({2}), {2, 5})}, i64({1})) ==
        "i64[1] [3]");
  CHECK(s.eval(OpKind::ReduceMax, {s.ints(i64({2}), {-7, -3})}, i64({1})) ==
        "i64[1] [-3]");
  Value *empty = s.constant(std::make_shared<TensorData>(f32({2, 0})));
  CHECK(s.eval(OpKind::ReduceSum, {empty, s.ints(i64({1}), {1})},
               f32({2, 1})) == "f32[2,1] [0, 0]");
  CHECK(s.eval(OpKind::ReduceMax, {empty}, f32({2, 1}),
               attr("axes", std::vector<int64_t>{1}))
            .find("reduces over an empty axis of f32[2,0]") !=
        std::string::npos);
  CHECK(s.eval(OpKind::ReduceSum, {m, s.ints(i64({2}), {1, -1})}, f32({2, 1}))
            .ends_with("[1,-1] names axis 1 twice"));
}

TEST_CASE("folding refuses other ops, missing data and wrong types") {
  Scratch s;
  Value *a = s.doubles(f32({1, 1}), {2});
  CHECK(s.eval(OpKind::MatMul, {a, a}, f32({1, 1}))
            .ends_with("': constant folding does not evaluate MatMul"));
  CHECK(s.eval(OpKind::Softmax, {a}, f32({1, 1}))
            .ends_with("': constant folding does not evaluate Softmax"));
  Value *x = s.input(f32({1, 1}));
  std::string notConstant = s.eval(OpKind::Add, {a, x}, f32({1, 1}));
  CHECK(notConstant.starts_with("error: cannot evaluate Add '%"));
  CHECK(notConstant.ends_with("': operand 1 is not constant"));
  std::string mismatch = s.eval(OpKind::Add, {a, a}, f32({2, 1}));
  CHECK(mismatch.starts_with("error: Add '%"));
  CHECK(mismatch.ends_with("': declared type f32[2,1] of result %t3 does not "
                           "match inferred type f32[1,1]"));
  CHECK_FALSE(isFoldable(OpKind::Dropout));
  CHECK(isFoldable(OpKind::Shape));
}

//===----------------------------------------------------------------------===//
// The fold-constants pass
//===----------------------------------------------------------------------===//

namespace {

/// A context with the CPU kernels, as the driver gives.
const PassContext &cpuContext() {
  static const PassContext context{runtime::cpu::makeCpuEvaluator()};
  return context;
}

bool runPass(Pass &pass, Graph &graph) {
  pass.setContext(cpuContext());
  auto changed = pass.run(graph);
  REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
  llvm::Error err = verify(graph);
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  return *changed;
}

Value *addConstant(Graph &graph, llvm::StringRef name, TensorDataPtr data) {
  TensorType type = data->getType();
  return graph
      .createNode(OpKind::Constant, {}, {type}, {name.str()},
                  attr("value", std::move(data)))
      ->getResult(0);
}

std::string schedule(const Graph &graph) {
  std::string text;
  for (const Node &node : graph.getNodes())
    text += (llvm::Twine(text.empty() ? "" : " ") + node.getOpSpelling() + ":" +
             node.getResult(0)->getName())
                .str();
  return text;
}

} // namespace

TEST_CASE("fold-constants collapses a shape subgraph feeding Reshape") {
  // %s = Shape(%x); %d0 = Gather(%s, 0); %u = Unsqueeze(%d0, [0]);
  // %shape = Concat(%u, [-1]); %y = Reshape(%x, %shape)
  Graph graph("g");
  Value *x = graph.addInput("x", f32({2, 3, 4}));
  Value *s =
      graph.createNode(OpKind::Shape, {x}, {i64({3})}, {"s"})->getResult(0);
  Value *i0 = addConstant(graph, "i0", TensorData::fromInts(i64({}), {0}));
  Value *d0 = graph.createNode(OpKind::Gather, {s, i0}, {i64({})}, {"d0"})
                  ->getResult(0);
  Value *ax = addConstant(graph, "ax", TensorData::fromInts(i64({1}), {0}));
  Value *u = graph.createNode(OpKind::Unsqueeze, {d0, ax}, {i64({1})}, {"u"})
                 ->getResult(0);
  Value *m = addConstant(graph, "m", TensorData::fromInts(i64({1}), {-1}));
  Node *concat = graph.createNode(OpKind::Concat, {u, m}, {i64({2})}, {"shape"},
                                  attr("axis", int64_t(0)));
  concat->setStage(Stage::Backward);
  concat->setLayer(3);
  Node *reshape = graph.createNode(OpKind::Reshape, {x, concat->getResult(0)},
                                   {f32({2, 12})}, {"y"});
  graph.addOutput(reshape->getResult(0));

  FoldConstantsPass fold;
  CHECK(runPass(fold, graph));
  CHECK(schedule(graph) == "Constant:s Constant:i0 Constant:d0 Constant:ax "
                           "Constant:u Constant:m Constant:shape Reshape:y");
  const Value *shape = reshape->getOperand(1);
  CHECK(shape->getName() == "shape");
  REQUIRE(getConstantValue(shape) != nullptr);
  CHECK(show(*getConstantValue(shape)) == "i64[2] [2, -1]");
  CHECK(shape->getDefiningNode()->getStage() == Stage::Backward);
  CHECK(shape->getDefiningNode()->getLayer() == 3);
  CHECK(graph.lookup("shape") == shape);
  // The Reshape itself keeps a non-constant operand, so nothing else folds.
  CHECK_FALSE(runPass(fold, graph));
}

TEST_CASE("fold-constants respects max-elements") {
  // Two 2000-element constants: their sum (2000 elements, 8000 bytes) is
  // over the default limit of 1024 elements and under 4096.
  auto build = [](Graph &graph) {
    std::vector<double> ones(2000, 1.0), ramp(2000);
    for (size_t i = 0; i < ramp.size(); ++i)
      ramp[i] = double(i);
    Value *a =
        addConstant(graph, "a", TensorData::fromDoubles(f32({2000}), ones));
    Value *b =
        addConstant(graph, "b", TensorData::fromDoubles(f32({2000}), ramp));
    Value *sum = graph.createNode(OpKind::Add, {a, b}, {f32({2000})}, {"sum"})
                     ->getResult(0);
    graph.addOutput(sum);
  };

  Graph byDefault("g");
  build(byDefault);
  FoldConstantsPass fold;
  CHECK_FALSE(runPass(fold, byDefault));
  CHECK(schedule(byDefault) == "Constant:a Constant:b Add:sum");

  Graph raised("g");
  build(raised);
  FoldConstantsPass bigFold;
  REQUIRE_FALSE(bool(bigFold.setOption("max-elements", "4096")));
  CHECK(runPass(bigFold, raised));
  CHECK(schedule(raised) == "Constant:a Constant:b Constant:sum");
  const TensorData *sum = getConstantValue(raised.getOutputs()[0]);
  REQUIRE(sum != nullptr);
  CHECK(sum->getDouble(0) == 1.0);
  CHECK(sum->getDouble(1999) == 2000.0);
}

TEST_CASE("fold-constants exempts shape-like i64 vectors from max-elements") {
  Graph graph("g");
  Value *x = graph.addInput("x", f32({2, 3, 4, 5}));
  Value *s =
      graph.createNode(OpKind::Shape, {x}, {i64({4})}, {"s"})->getResult(0);
  Value *one = addConstant(graph, "one", TensorData::fromInts(i64({}), {1}));
  Value *plus = graph.createNode(OpKind::Add, {s, one}, {i64({4})}, {"plus"})
                    ->getResult(0);
  Value *f = graph
                 .createNode(OpKind::Cast, {plus}, {f32({4})}, {"f"},
                             attr("to", int64_t(onnxCode(DType::F32))))
                 ->getResult(0);
  graph.addOutput(f);
  FoldConstantsPass fold;
  REQUIRE_FALSE(bool(fold.setOption("max-elements", "2")));
  CHECK(runPass(fold, graph));
  // Shape and the i64 Add fold; the 4-element f32 Cast is over the limit.
  CHECK(schedule(graph) == "Constant:s Constant:one Constant:plus Cast:f");
  CHECK(show(*getConstantValue(graph.lookup("plus"))) == "i64[4] [3, 4, 5, 6]");
}

TEST_CASE("fold-constants leaves non-constant and refused nodes alone") {
  Graph graph("g");
  Value *x = graph.addInput("x", i64({2}));
  Value *c = addConstant(graph, "c", TensorData::fromInts(i64({2}), {1, 0}));
  Value *mixed = graph.createNode(OpKind::Add, {x, c}, {i64({2})}, {"mixed"})
                     ->getResult(0);
  // Integer division by zero is undefined, so it stays for the runtime.
  Value *div =
      graph.createNode(OpKind::Div, {c, c}, {i64({2})}, {"div"})->getResult(0);
  Value *prod = graph.createNode(OpKind::MatMul, {c, c}, {i64({})}, {"prod"})
                    ->getResult(0);
  graph.addOutput(mixed);
  graph.addOutput(div);
  graph.addOutput(prod);
  FoldConstantsPass fold;
  CHECK_FALSE(runPass(fold, graph));
  CHECK(schedule(graph) == "Constant:c Add:mixed Div:div MatMul:prod");
}

TEST_CASE("fold-constants folds graph outputs and recompute nodes") {
  Graph graph("g");
  Value *c = addConstant(graph, "c", TensorData::fromDoubles(f32({2}), {1, 4}));
  Node *sqrt = graph.createNode(OpKind::Sqrt, {c}, {f32({2})}, {"r.remat"});
  sqrt->setStage(Stage::Recompute);
  graph.addOutput(sqrt->getResult(0));
  FoldConstantsPass fold;
  CHECK(runPass(fold, graph));
  Value *out = graph.getOutputs()[0];
  CHECK(out->getName() == "r.remat");
  CHECK(out->getDefiningNode()->getStage() == Stage::Recompute);
  REQUIRE(getConstantValue(out) != nullptr);
  CHECK(show(*getConstantValue(out)) == "f32[2] [1, 2]");
}

TEST_CASE("fold-constants rejects a negative max-elements") {
  Graph graph("g");
  FoldConstantsPass fold;
  REQUIRE_FALSE(bool(fold.setOption("max-elements", "-1")));
  auto changed = fold.run(graph);
  REQUIRE_FALSE(bool(changed));
  CHECK(errorToString(changed.takeError()) ==
        "option max-elements must not be negative, got -1");
}

TEST_CASE("fold-constants and canonicalize need a constant evaluator") {
  Graph graph("g");
  graph.addOutput(graph.addInput("x", f32({2})));
  std::string needs = " needs a constant evaluator; give its PassManager a "
                      "PassContext whose evaluator is "
                      "runtime::cpu::makeCpuEvaluator()";
  FoldConstantsPass fold;
  auto folded = fold.run(graph);
  REQUIRE_FALSE(bool(folded));
  CHECK(errorToString(folded.takeError()) == "fold-constants" + needs);
  CanonicalizePass canonicalize;
  auto canonicalized = canonicalize.run(graph);
  REQUIRE_FALSE(bool(canonicalized));
  CHECK(errorToString(canonicalized.takeError()) == "canonicalize" + needs);

  // Through a PassManager that was given no context.
  PassRegistry registry;
  registerAllPasses(registry);
  PassManager pm;
  REQUIRE_FALSE(bool(parsePassPipeline("dce,canonicalize", registry, pm)));
  auto ran = pm.run(graph);
  REQUIRE_FALSE(bool(ran));
  CHECK(errorToString(ran.takeError()) ==
        "pass 'canonicalize' failed: canonicalize" + needs);
}

TEST_CASE("fold-constants computes with the PassManager's evaluator") {
  // %c = Constant [1, 4]; %r = Sqrt(%c); %n = Neg(%r); return %n
  auto build = [](Graph &graph) {
    Value *c =
        addConstant(graph, "c", TensorData::fromDoubles(f32({2}), {1, 4}));
    Value *r =
        graph.createNode(OpKind::Sqrt, {c}, {f32({2})}, {"r"})->getResult(0);
    graph.addOutput(
        graph.createNode(OpKind::Neg, {r}, {f32({2})}, {"n"})->getResult(0));
  };
  PassRegistry registry;
  registerAllPasses(registry);

  // The evaluator sees each node in schedule order, once its operands are
  // constants; canonicalize hands its context on to its fold-constants.
  for (const char *pipeline : {"fold-constants", "canonicalize"}) {
    INFO(pipeline);
    Graph graph("g");
    build(graph);
    std::vector<std::string> seen;
    PassManager pm;
    pm.setContext(
        {[&](const Node &node, llvm::ArrayRef<const TensorData *> operands) {
          seen.push_back(node.getOpSpelling() + ":" +
                         node.getResult(0)->getName().str());
          return runtime::cpu::evaluateNode(node, operands);
        }});
    REQUIRE_FALSE(bool(parsePassPipeline(pipeline, registry, pm)));
    auto changed = pm.run(graph);
    REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
    CHECK(*changed);
    CHECK(seen == std::vector<std::string>{"Sqrt:r", "Neg:n"});
    CHECK(show(*getConstantValue(graph.getOutputs()[0])) == "f32[2] [-1, -2]");
  }

  // What the evaluator refuses stays for the runtime.
  Graph graph("g");
  build(graph);
  PassManager pm;
  pm.setContext({[](const Node &node, llvm::ArrayRef<const TensorData *>)
                     -> llvm::Expected<llvm::SmallVector<TensorDataPtr, 1>> {
    return makeError(node.describe() + ": refused");
  }});
  REQUIRE_FALSE(bool(parsePassPipeline("fold-constants", registry, pm)));
  auto changed = pm.run(graph);
  REQUIRE(bool(changed));
  CHECK_FALSE(*changed);
  CHECK(schedule(graph) == "Constant:c Sqrt:r Neg:n");
}

TEST_CASE("fold-constants folds in-range float casts and leaves the rest") {
  // The CPU kernel saturates 1e10 to i32 max; folding refuses to bake that
  // in, and leaves NaN alone too.
  Graph graph("g");
  auto castOf = [&](const char *name, std::vector<double> values, DType to) {
    Value *c = addConstant(
        graph, std::string(name) + ".in",
        TensorData::fromDoubles(f32({int64_t(values.size())}), values));
    Value *cast = graph
                      .createNode(OpKind::Cast, {c},
                                  {TensorType(to, {int64_t(values.size())})},
                                  {name}, attr("to", int64_t(onnxCode(to))))
                      ->getResult(0);
    graph.addOutput(cast);
  };
  castOf("fits", {2.75, -128.5, 127.9}, DType::I8);
  castOf("over", {1, 1e10}, DType::I32);
  castOf("nan", {NAN}, DType::I64);
  castOf("negative", {-1}, DType::U8);
  castOf("flag", {NAN}, DType::Bool);
  FoldConstantsPass fold;
  CHECK(runPass(fold, graph));
  CHECK(schedule(graph) ==
        "Constant:fits.in Constant:fits Constant:over.in Cast:over "
        "Constant:nan.in Cast:nan Constant:negative.in Cast:negative "
        "Constant:flag.in Constant:flag");
  CHECK(show(*getConstantValue(graph.lookup("fits"))) ==
        "i8[3] [2, -128, 127]");
  CHECK(show(*getConstantValue(graph.lookup("flag"))) == "bool[1] [true]");
}

TEST_CASE("fold-constants leaves f16 and bf16 arithmetic to the runtime") {
  // The CPU kernels compute in f32 and f64 only (Note [CPU dtypes]), so
  // folding, which computes with them, leaves such nodes as they are; casts
  // and data movement on f16 fold.
  Graph graph("g");
  Value *h = addConstant(
      graph, "h",
      TensorData::fromDoubles(TensorType(DType::F16, {2}), {1, 0.5}));
  graph.addOutput(graph
                      .createNode(OpKind::Add, {h, h},
                                  {TensorType(DType::F16, {2})}, {"sum"})
                      ->getResult(0));
  graph.addOutput(graph
                      .createNode(OpKind::Cast, {h}, {f32({2})}, {"wide"},
                                  attr("to", int64_t(onnxCode(DType::F32))))
                      ->getResult(0));
  FoldConstantsPass fold;
  CHECK(runPass(fold, graph));
  CHECK(schedule(graph) == "Constant:h Add:sum Constant:wide");
  CHECK(show(*getConstantValue(graph.lookup("wide"))) == "f32[2] [1, 0.5]");
}
