//===- tests/unit/OpTraitsTest.cpp - The trait columns of ir/Ops.def ------===//
//
// The traits replace lists that passes kept: plan-memory's in-place ops must
// stay exactly the set it had (so plans are bitwise unchanged), and
// kDifferentiable must be exactly the ops autodiff differentiates. The
// latter is checked by running autodiff on one small graph per op of
// Ops.def, in which a weight reaches the op and the op's result reaches the
// loss.
//
//===----------------------------------------------------------------------===//
#include "ir/Ops.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace remat;
using namespace remat::ir;

namespace {

std::set<OpKind> opsWith(OpTrait trait) {
  std::set<OpKind> ops;
  for (OpKind op : allOps())
    if (hasTrait(op, trait))
      ops.insert(op);
  return ops;
}

/// One graph per op: the weight %w reaches the op, and %y (f64) reaches the
/// loss %l = ReduceSum(%y).
struct Sample {
  OpKind op;
  const char *weightType;
  const char *body;
  /// The error autodiff gives; nullptr where it differentiates the graph.
  const char *error = nullptr;
};

constexpr const char *kNoWeight = "no weight reaches the loss 'l'";

// clang-format off
const Sample kSamples[] = {
  {OpKind::Add, "f64[2,3]", "%y = Add(%w, %w) : f64[2,3]"},
  {OpKind::Sub, "f64[2,3]", "%y = Sub(%w, %w) : f64[2,3]"},
  {OpKind::Mul, "f64[2,3]", "%y = Mul(%w, %w) : f64[2,3]"},
  {OpKind::Div, "f64[2,3]", "%y = Div(%w, %w) : f64[2,3]"},
  {OpKind::Pow, "f64[2,3]", "%y = Pow(%w, %w) : f64[2,3]"},
  {OpKind::Sqrt, "f64[2,3]", "%y = Sqrt(%w) : f64[2,3]"},
  {OpKind::Erf, "f64[2,3]", "%y = Erf(%w) : f64[2,3]"},
  {OpKind::Tanh, "f64[2,3]", "%y = Tanh(%w) : f64[2,3]"},
  {OpKind::Relu, "f64[2,3]", "%y = Relu(%w) : f64[2,3]"},
  {OpKind::Sigmoid, "f64[2,3]", "%y = Sigmoid(%w) : f64[2,3]"},
  {OpKind::Exp, "f64[2,3]", "%y = Exp(%w) : f64[2,3]"},
  {OpKind::Log, "f64[2,3]", "%y = Log(%w) : f64[2,3]"},
  {OpKind::Neg, "f64[2,3]", "%y = Neg(%w) : f64[2,3]"},
  {OpKind::Where, "f64[2,3]", R"(%c = Constant() {value = dense<bool[]: true>} : bool[]
    %y = Where(%c, %w, %w) : f64[2,3])"},
  {OpKind::Equal, "f64[2,3]", R"(%e = Equal(%w, %w) : bool[2,3]
    %y = Cast(%e) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::GreaterOrEqual, "f64[2,3]", R"(%e = GreaterOrEqual(%w, %w) : bool[2,3]
    %y = Cast(%e) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::And, "f64[2,3]", R"(%e = Equal(%w, %w) : bool[2,3]
    %a = And(%e, %e) : bool[2,3]
    %y = Cast(%a) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::Max, "f64[2,3]", "%y = Max(%w, %w) : f64[2,3]"},
  {OpKind::Mod, "f64[2,3]", "%y = Mod(%w, %w) {fmod = 1} : f64[2,3]",
   "op Mod has no gradient rule"},
  {OpKind::Cast, "f64[2,3]", "%y = Cast(%w) {to = 11} : f64[2,3]"},
  {OpKind::Identity, "f64[2,3]", "%y = Identity(%w) : f64[2,3]"},
  {OpKind::MatMul, "f64[2,3]", R"(%t = Transpose(%w) : f64[3,2]
    %y = MatMul(%w, %t) : f64[2,2])"},
  {OpKind::Gemm, "f64[2,3]", "%y = Gemm(%w, %w) {transB = 1} : f64[2,2]"},
  {OpKind::Softmax, "f64[2,3]", "%y = Softmax(%w) : f64[2,3]"},
  {OpKind::LogSoftmax, "f64[2,3]", "%y = LogSoftmax(%w) : f64[2,3]"},
  {OpKind::LayerNormalization, "f64[2,3]", R"(%s = Constant() {value = dense<f64[3]: [1.0, 2.0, 3.0]>} : f64[3]
    %y = LayerNormalization(%w, %s) {epsilon = 0.001, stash_type = 11} : f64[2,3])"},
  {OpKind::Dropout, "f64[2,3]", "%y = Dropout(%w) : f64[2,3]"},
  {OpKind::ReduceMean, "f64[2,3]", "%y = ReduceMean(%w) {axes = [1], keepdims = 0} : f64[2]"},
  {OpKind::ReduceSum, "f64[2,3]", "%y = ReduceSum(%w) : f64[1,1]"},
  {OpKind::ReduceMax, "f64[2,3]", "%y = ReduceMax(%w) {axes = [1], keepdims = 0} : f64[2]"},
  {OpKind::Reshape, "f64[2,3]", R"(%s = Constant() {value = dense<i64[1]: [6]>} : i64[1]
    %y = Reshape(%w, %s) : f64[6])"},
  {OpKind::Transpose, "f64[2,3]", "%y = Transpose(%w) {perm = [1, 0]} : f64[3,2]"},
  {OpKind::Unsqueeze, "f64[2,3]", R"(%ax = Constant() {value = dense<i64[1]: [0]>} : i64[1]
    %y = Unsqueeze(%w, %ax) : f64[1,2,3])"},
  {OpKind::Squeeze, "f64[1,2,3]", "%y = Squeeze(%w) : f64[2,3]"},
  {OpKind::Concat, "f64[2,3]", "%y = Concat(%w, %w) {axis = 0} : f64[4,3]"},
  {OpKind::Slice, "f64[2,3]", R"(%st = Constant() {value = dense<i64[1]: [0]>} : i64[1]
    %en = Constant() {value = dense<i64[1]: [1]>} : i64[1]
    %y = Slice(%w, %st, %en) : f64[1,3])"},
  {OpKind::Split, "f64[2,3]", R"(%sz = Constant() {value = dense<i64[2]: [1, 1]>} : i64[2]
    %p, %q = Split(%w, %sz) : f64[1,3], f64[1,3]
    %y = Mul(%p, %q) : f64[1,3])"},
  {OpKind::Expand, "f64[2,3]", R"(%s = Constant() {value = dense<i64[3]: [2, 2, 3]>} : i64[3]
    %y = Expand(%w, %s) : f64[2,2,3])"},
  {OpKind::Gather, "f64[2,3]", R"(%i = Constant() {value = dense<i64[1]: [1]>} : i64[1]
    %y = Gather(%w, %i) : f64[1,3])"},
  {OpKind::ScatterElements, "f64[2,3]", R"(%i = Constant() {value = dense<i64[1,3]: [0, 1, 0]>} : i64[1,3]
    %u = Constant() {value = dense<f64[1,3]: [1.0, 2.0, 3.0]>} : f64[1,3]
    %y = ScatterElements(%w, %i, %u) : f64[2,3])"},
  {OpKind::Shape, "f64[2,3]", R"(%s = Shape(%w) : i64[2]
    %y = Cast(%s) {to = 11} : f64[2])", kNoWeight},
  {OpKind::ConstantOfShape, "f64[2,3]", R"(%s = Shape(%w) : i64[2]
    %y = ConstantOfShape(%s) {value = dense<f64[1]: [1.0]>} : f64[2,3])",
   kNoWeight},
  {OpKind::Constant, "f64[2,3]", "%y = Constant() {value = dense<f64[2]: [1.0, 2.0]>} : f64[2]",
   kNoWeight},
  {OpKind::Range, "f64[]", R"(%lim = Constant() {value = dense<f64[]: 4.0>} : f64[]
    %d = Constant() {value = dense<f64[]: 1.0>} : f64[]
    %y = Range(%w, %lim, %d) : f64[4])",
   "op Range has no gradient rule"},
  {OpKind::OneHot, "f64[2]", R"(%i = Constant() {value = dense<i64[2]: [0, 2]>} : i64[2]
    %n = Constant() {value = dense<i64[]: 3>} : i64[]
    %y = OneHot(%i, %n, %w) : f64[2,3])",
   "op OneHot has no gradient rule"},
  {OpKind::SoftmaxCrossEntropyLoss, "f64[2,3]", R"(%lab = Constant() {value = dense<i64[2]: [0, 2]>} : i64[2]
    %y = SoftmaxCrossEntropyLoss(%w, %lab) : f64[])"},
  {OpKind::Gelu, "f64[2,3]", "%y = remat.Gelu(%w) : f64[2,3]"},
  {OpKind::GeluGrad, "f64[2,3]", "%y = remat.GeluGrad(%w, %w) : f64[2,3]",
   "op remat.GeluGrad has no gradient rule"},
  {OpKind::SoftmaxCrossEntropyGrad, "f64[2,3]",
   "%lab = Constant() {value = dense<i64[2]: [0, 2]>} : i64[2]\n"
   "    %s = Constant() {value = dense<f64[2]: [1.0, 0.5]>} : f64[2]\n"
   "    %y = remat.SoftmaxCrossEntropyGrad(%w, %lab, %s) : f64[2,3]",
   "op remat.SoftmaxCrossEntropyGrad has no gradient rule"},
  {OpKind::SoftmaxGrad, "f64[2,3]",
   "%y = remat.SoftmaxGrad(%w, %w) {axis = 1} : f64[2,3]",
   "op remat.SoftmaxGrad has no gradient rule"},
  {OpKind::LayerNormalizationGrad, "f64[2,3]",
   "%s = Constant() {value = dense<f64[3]: [1.0, 2.0, 3.0]>} : f64[3]\n"
   "    %m = Constant() {value = dense<f64[2,1]: [0.5, -1.0]>} : f64[2,1]\n"
   "    %y = remat.LayerNormalizationGrad(%w, %w, %s, %m, %m) : f64[2,3]",
   "op remat.LayerNormalizationGrad has no gradient rule"},
  {OpKind::DropoutGrad, "f64[2,3]",
   "%m = Constant() {value = dense<bool[2,3]: [true, false, true, true, false, true]>} : bool[2,3]\n"
   "    %s = Constant() {value = dense<f64[]: 2.0>} : f64[]\n"
   "    %y = remat.DropoutGrad(%w, %m, %s) : f64[2,3]",
   "op remat.DropoutGrad has no gradient rule"},
  {OpKind::PermutedMatMul, "f64[2,3]",
   "%y = remat.PermutedMatMul(%w, %w) {perm_b = [1, 0]} : f64[2,2]",
   "op remat.PermutedMatMul has no gradient rule"},
  {OpKind::Extern, "f64[2,3]",
   "%y = remat.Extern(%w) {target = \"aten.cos\"} : f64[2,3]",
   "op remat.Extern has no gradient rule"},
  {OpKind::Sin, "f64[2,3]", "%y = Sin(%w) : f64[2,3]"},
  {OpKind::Cos, "f64[2,3]", "%y = Cos(%w) : f64[2,3]"},
  {OpKind::Abs, "f64[2,3]", "%y = Abs(%w) : f64[2,3]"},
  {OpKind::Not, "f64[2,3]", R"(%e = Equal(%w, %w) : bool[2,3]
    %n = Not(%e) : bool[2,3]
    %y = Cast(%n) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::IsNaN, "f64[2,3]", R"(%e = IsNaN(%w) : bool[2,3]
    %y = Cast(%e) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::Min, "f64[2,3]", "%y = Min(%w, %w) : f64[2,3]"},
  {OpKind::Reciprocal, "f64[2,3]", "%y = Reciprocal(%w) : f64[2,3]"},
  {OpKind::IsInf, "f64[2,3]", R"(%e = IsInf(%w) : bool[2,3]
    %y = Cast(%e) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::Less, "f64[2,3]", R"(%e = Less(%w, %w) : bool[2,3]
    %y = Cast(%e) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::LessOrEqual, "f64[2,3]", R"(%e = LessOrEqual(%w, %w) : bool[2,3]
    %y = Cast(%e) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::Greater, "f64[2,3]", R"(%e = Greater(%w, %w) : bool[2,3]
    %y = Cast(%e) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::Or, "f64[2,3]", R"(%e = Greater(%w, %w) : bool[2,3]
    %o = Or(%e, %e) : bool[2,3]
    %y = Cast(%o) {to = 11} : f64[2,3])", kNoWeight},
  {OpKind::Trilu, "f64[2,3]", "%y = Trilu(%w) : f64[2,3]"},
  {OpKind::CumSum, "f64[2,3]", R"(%a = Constant() {value = dense<i64[]: 1>} : i64[]
    %y = CumSum(%w, %a) : f64[2,3])"},
  {OpKind::GatherElements, "f64[2,3]", R"(%i = Constant() {value = dense<i64[1,3]: [1, 0, 1]>} : i64[1,3]
    %y = GatherElements(%w, %i) : f64[1,3])"},
  {OpKind::Pad, "f64[2,3]", R"(%p = Constant() {value = dense<i64[4]: [0, 1, 0, 1]>} : i64[4]
    %y = Pad(%w, %p) : f64[2,5])"},
  {OpKind::Conv, "f64[1,1,3,3]", R"(%k = Constant() {value = dense<f64[1,1,2,2]: [1.0, 2.0, 3.0, 4.0]>} : f64[1,1,2,2]
    %y = Conv(%w, %k) : f64[1,1,2,2])"},
  {OpKind::ConvTranspose, "f64[1,1,2,2]", R"(%k = Constant() {value = dense<f64[1,1,2,2]: [1.0, 2.0, 3.0, 4.0]>} : f64[1,1,2,2]
    %y = ConvTranspose(%w, %k) : f64[1,1,3,3])",
   "op ConvTranspose has no gradient rule"},
  // Sign's gradient is zero: its result acts as a constant, so the weight
  // reaches the loss only through Mul's second operand.
  {OpKind::Sign, "f64[2,3]", "%s = Sign(%w) : f64[2,3]\n"
   "    %y = Mul(%s, %w) : f64[2,3]"},
  // Issue 40. Ceil's gradient is zero, as Sign's.
  {OpKind::Ceil, "f64[2,3]", "%c = Ceil(%w) : f64[2,3]\n"
   "    %y = Mul(%c, %w) : f64[2,3]"},
  {OpKind::Clip, "f64[2,3]", R"(%lo = Constant() {value = dense<f64[]: -0.5>} : f64[]
    %y = Clip(%w, %lo) : f64[2,3])"},
  {OpKind::Tile, "f64[2,3]", R"(%r = Constant() {value = dense<i64[2]: [1, 2]>} : i64[2]
    %y = Tile(%w, %r) : f64[2,6])"},
  // Floor's gradient is zero, as Ceil's; ArgMax's and ArgMin's i64
  // results carry none.
  {OpKind::Floor, "f64[2,3]", "%c = Floor(%w) : f64[2,3]\n"
   "    %y = Mul(%c, %w) : f64[2,3]"},
  {OpKind::Softplus, "f64[2,3]", "%y = Softplus(%w) : f64[2,3]"},
  {OpKind::ArgMax, "f64[2,3]", R"(%i = ArgMax(%w) {axis = 1} : i64[2,1]
    %y = Cast(%i) {to = 11} : f64[2,1])", kNoWeight},
  {OpKind::ArgMin, "f64[2,3]", R"(%i = ArgMin(%w) : i64[1,3]
    %y = Cast(%i) {to = 11} : f64[1,3])", kNoWeight},
  {OpKind::TopK, "f64[2,3]", R"(%k = Constant() {value = dense<i64[1]: [2]>} : i64[1]
    %y, %i = TopK(%w, %k) : f64[2,2], i64[2,2])"},
  {OpKind::MaxPool, "f64[1,2,5]", "%y = MaxPool(%w) {kernel_shape = [2]} : f64[1,2,4]"},
  {OpKind::AveragePool, "f64[1,2,4,4]", "%y = AveragePool(%w) {kernel_shape = [2, 2], strides = [2, 2]} : f64[1,2,2,2]"},
  {OpKind::MaxPoolGrad, "f64[1,1,4]", R"(%x = Constant() {value = dense<f64[1,1,5]: [1.0, 3.0, 2.0, 5.0, 4.0]>} : f64[1,1,5]
    %y = remat.MaxPoolGrad(%w, %x) {kernel_shape = [2]} : f64[1,1,5])",
   "op remat.MaxPoolGrad has no gradient rule"},
  {OpKind::AveragePoolGrad, "f64[1,1,4]", R"(%s = Constant() {value = dense<i64[3]: [1, 1, 5]>} : i64[3]
    %y = remat.AveragePoolGrad(%w, %s) {kernel_shape = [2]} : f64[1,1,5])",
   "op remat.AveragePoolGrad has no gradient rule"},
  {OpKind::Acos, "f64[2,3]", "%y = Acos(%w) : f64[2,3]"},
  // EyeLike's result does not depend on its operand's values: its gradient
  // is zero, as Ceil's.
  {OpKind::EyeLike, "f64[2,3]", R"(%e = EyeLike(%w) : f64[2,3]
    %y = Mul(%e, %w) : f64[2,3])"},
  {OpKind::ReduceL2, "f64[2,3]", "%y = ReduceL2(%w) {axes = [1]} : f64[2,1]"},
  {OpKind::ReduceLogSumExp, "f64[2,3]", "%y = ReduceLogSumExp(%w) {axes = [0], keepdims = 0} : f64[3]"},
};
// clang-format on

llvm::Expected<bool> runAutodiff(Graph &graph) {
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  passes::PassManager pm;
  if (auto err = passes::parsePassPipeline("autodiff", registry, pm))
    return std::move(err);
  return pm.run(graph);
}

} // namespace

TEST_CASE("op traits: a few ops") {
  CHECK(hasTrait(OpKind::Add, kElementwise));
  CHECK(hasTrait(OpKind::Add, kInPlace));
  CHECK_FALSE(hasTrait(OpKind::Add, kShapeOnly));
  CHECK(hasTrait(OpKind::Pow, kElementwise));
  CHECK_FALSE(hasTrait(OpKind::Pow, kInPlace));
  CHECK(hasTrait(OpKind::Reshape, kShapeOnly));
  CHECK_FALSE(hasTrait(OpKind::Reshape, kElementwise));
  CHECK_FALSE(hasTrait(OpKind::Expand, kShapeOnly));
  CHECK_FALSE(hasTrait(OpKind::Transpose, kShapeOnly));
  CHECK(hasTrait(OpKind::Dropout, kRandom));
  CHECK_FALSE(hasTrait(OpKind::Gelu, kRandom));
  CHECK(hasTrait(OpKind::Gelu, kDifferentiable));
  CHECK(hasTrait(OpKind::ScatterElements, kDifferentiable));
  CHECK_FALSE(hasTrait(OpKind::Mod, kDifferentiable));
  CHECK(getOpInfo(OpKind::MatMul).cost == CostClass::Gemm);
  CHECK(getOpInfo(OpKind::Gemm).cost == CostClass::Gemm);
  CHECK(getOpInfo(OpKind::Softmax).cost == CostClass::Reduction);
  CHECK(getOpInfo(OpKind::SoftmaxCrossEntropyLoss).cost == CostClass::Reduction);
  CHECK(getOpInfo(OpKind::Constant).cost == CostClass::Free);
  CHECK(getOpInfo(OpKind::Shape).cost == CostClass::Free);
  CHECK(getOpInfo(OpKind::Unsqueeze).cost == CostClass::Free);
  CHECK(getOpInfo(OpKind::Add).cost == CostClass::MemoryBound);
  CHECK(getOpInfo(OpKind::Transpose).cost == CostClass::MemoryBound);
  CHECK(costClassName(CostClass::Free) == "Free");
  CHECK(costClassName(CostClass::MemoryBound) == "MemoryBound");
  CHECK(costClassName(CostClass::Reduction) == "Reduction");
  CHECK(costClassName(CostClass::Gemm) == "Gemm");
}

TEST_CASE("op traits: in place and shape-only sets") {
  // plan-memory's in-place set before the traits existed: changing it
  // changes every plan.
  // Sin, Cos, Abs, Reciprocal and Not came later (issue 13); no graph from
  // before uses them, so no earlier plan changes. remat.GeluGrad (issue 16)
  // replaced autodiff's dozen elementwise nodes for a Gelu with one, and
  // remat.SoftmaxCrossEntropyGrad its Exp, Equal, Cast, Sub and Mul nodes
  // (Exp, Sub and Mul were in place) for the loss. remat.SoftmaxGrad and
  // remat.LayerNormalizationGrad replaced in-place Mul and Sub chains for
  // Softmax and LayerNormalization, remat.DropoutGrad Dropout's Cast, Mul
  // and Mul. Sign came later still (issue 36), and Ceil, Floor, Softplus and
  // Acos (issue 40).
  std::set<OpKind> inPlace = {
      OpKind::Add,     OpKind::Sub,     OpKind::Mul,  OpKind::Div,
      OpKind::Sqrt,    OpKind::Erf,     OpKind::Tanh, OpKind::Relu,
      OpKind::Sigmoid, OpKind::Exp,     OpKind::Log,  OpKind::Neg,
      OpKind::Sin,     OpKind::Cos,     OpKind::Abs,  OpKind::Reciprocal,
      OpKind::Not,     OpKind::GeluGrad};
  inPlace.insert({OpKind::SoftmaxCrossEntropyGrad, OpKind::SoftmaxGrad,
                  OpKind::LayerNormalizationGrad, OpKind::DropoutGrad,
                  OpKind::Sign, OpKind::Ceil, OpKind::Floor, OpKind::Softplus,
                  OpKind::Acos});
  CHECK(opsWith(kInPlace) == inPlace);
  // Overwriting operand element i with result element i is only safe when
  // nothing else reads operand element i: elementwise ops; the loss
  // gradient, which reads log_prob (its only operand of the result's type)
  // at the index it writes; and the two row-wise gradients, whose kernels
  // read a whole row of each operand of the result's type (and nothing
  // outside that row) before writing the row.
  for (OpKind op : opsWith(kInPlace)) {
    INFO(getOpSpelling(op));
    CHECK((hasTrait(op, kElementwise) ||
           op == OpKind::SoftmaxCrossEntropyGrad || op == OpKind::SoftmaxGrad ||
           op == OpKind::LayerNormalizationGrad));
  }
  CHECK(opsWith(kShapeOnly) ==
        std::set<OpKind>{OpKind::Identity, OpKind::Reshape, OpKind::Unsqueeze,
                         OpKind::Squeeze});
  for (OpKind op : opsWith(kShapeOnly)) {
    INFO(getOpSpelling(op));
    CHECK(getOpInfo(op).cost == CostClass::Free);
  }
  CHECK(opsWith(kRandom) == std::set<OpKind>{OpKind::Dropout});
}

TEST_CASE("op traits: kDifferentiable is what autodiff differentiates") {
  std::set<OpKind> covered;
  for (const Sample &sample : kSamples) {
    std::string text = std::string("graph @g(%w: ") + sample.weightType +
                       " weight) {\n    " + sample.body +
                       "\n    %l = ReduceSum(%y) {keepdims = 0} : f64[]\n"
                       "    return %l }";
    INFO(getOpSpelling(sample.op) << ":\n" << text);
    auto graph = parseGraph(text, "<test>");
    REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
    llvm::Error err = verify(**graph);
    REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
    bool usesOp = false;
    for (const Node &node : (*graph)->getNodes())
      usesOp |= node.getOp() == sample.op;
    CHECK(usesOp);
    covered.insert(sample.op);

    CHECK(hasTrait(sample.op, kDifferentiable) == (sample.error == nullptr));
    auto changed = runAutodiff(**graph);
    if (sample.error) {
      REQUIRE(!changed);
      std::string message = errorToString(changed.takeError());
      INFO(message);
      CHECK(message.find(sample.error) != std::string::npos);
      continue;
    }
    REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
    llvm::ArrayRef<Value *> outputs = (*graph)->getOutputs();
    REQUIRE(outputs.size() == 2);
    CHECK(outputs[1]->getName() == "w_grad");
  }
  // Every op has a sample, so a new op must state what autodiff does with it.
  CHECK(covered.size() == allOps().size());
}
