//===- passes/Autodiff.cpp - Reverse-mode differentiation -----------------===//
//
// Note [Autodiff]
// ~~~~~~~~~~~~~~~
// The pass walks the forward schedule backwards from the loss and appends,
// for every node on a path from a weight to the loss, the Stage::Backward
// nodes of its gradient rule (standard ONNX opset-17 ops only, so that a
// written training graph runs in onnxruntime). A value with several uses
// gets one contribution per use; they are summed with Add in the order they
// were made, which is the reverse schedule order, so the result is
// deterministic. Contributions to an operand that was broadcast are summed
// over the broadcast dims (ReduceSum + Reshape to the operand's shape).
//
// Gradient rules, one grad<Op> function per op with trait kDifferentiable
// in ir/Ops.def, dispatched through kGradRules: Add Sub Mul Div Pow Sqrt Erf
// Tanh Relu Sigmoid Exp Log Neg Where (x, y) Max Cast (float to float)
// Identity MatMul (batched, broadcast batch dims, 1-D operands) Gemm Softmax
// (as remat.SoftmaxGrad) LogSoftmax LayerNormalization (through its Mean and
// InvStdDev results, added when absent; X's gradient as
// remat.LayerNormalizationGrad when Scale has the normalized shape and the
// statistics X's dtype) Dropout (through its mask, added when absent; as
// remat.DropoutGrad)
// ReduceMean ReduceSum ReduceMax Reshape Transpose Unsqueeze Squeeze Concat
// Slice Split Expand Gather (data) SoftmaxCrossEntropyLoss (scores; log_prob
// added when absent), remat.Gelu (derivative as remat.GeluGrad; export
// decomposes it, and the other remat-domain gradients, into standard ops),
// Sin Cos Abs Min Trilu CumSum
// GatherElements (data) Pad (data, constant_value), Reciprocal and Conv (X
// through ConvTranspose; W for group 1; B). ConvTranspose has no rule (autodiff
// emits it for Conv; it does not differentiate through one).
//
// Only float values carry gradients. Not differentiated through:
// - Shape, Constant, ConstantOfShape (no operand, or an integer one) and
//   Equal, GreaterOrEqual, And, Not, IsNaN, IsInf, Less, LessOrEqual,
//   Greater, Or (boolean results): no rule is needed, since
//   their results never depend on a weight's value.
// - Cast to or from a non-float dtype; any integer or bool value.
// - Index-like operands: Gather/ScatterElements indices, the shape operand of
//   Reshape/Expand, the axes of ReduceSum/Squeeze/Unsqueeze, the starts,
//   ends, axes, steps of Slice, the split operand of Split, Where's
//   condition, Dropout's ratio and training_mode, the labels and class
//   weights of SoftmaxCrossEntropyLoss.
// Any other op without a rule (ScatterElements, Mod, Range, OneHot) whose
// float result depends on a weight and is on a path to the loss is an error
// that names the node, rather than a silent zero gradient.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/GradientName.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <numeric>

namespace remat::passes {

using namespace ir;
using llvm::Error;
using llvm::Expected;

AutodiffPass::AutodiffPass() {
  declareOption("loss", "the output to differentiate (default: the single "
                        "scalar float output)",
                &loss_);
  declareEnumOption("unused-weights",
                    "what to do with weights that do not reach the loss",
                    &unusedWeights_, {"warn", "error", "drop"});
}

namespace {

/// True for ops that have a gradient rule (grad<Op> below).
bool hasRule(OpKind op) { return hasTrait(op, kDifferentiable); }

/// True if operand \p i of \p node (an op with a rule) carries a gradient.
bool isDifferentiableOperand(const Node &node, unsigned i) {
  switch (node.getOp()) {
  case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
  case OpKind::Pow: case OpKind::Max: case OpKind::Concat: case OpKind::Gemm:
  case OpKind::MatMul: case OpKind::LayerNormalization:
  case OpKind::Min: case OpKind::Conv:
    return true;
  case OpKind::Pad:
    return i == 0 || i == 2;
  case OpKind::Where:
    return i != 0;
  default:
    return i == 0;
  }
}

/// Emits backward nodes. A failure to build a node is recorded once and
/// poisons every later emit (they return null), so rules read straight.
class Differentiator {
public:
  Differentiator(Graph &graph) : graph_(graph), builder_(graph) {
    builder_.setStage(Stage::Backward);
  }

  Error run(Value *loss, llvm::ArrayRef<Value *> weights,
            llvm::DenseMap<Value *, Value *> &gradOfWeight,
            const llvm::DenseSet<Value *> &reach);

  // Building blocks of the gradient rules.
  Graph &graph() { return graph_; }
  Value *emit(OpKind op, llvm::ArrayRef<Value *> operands, AttrList attrs = {});
  Node *emitNode(OpKind op, llvm::ArrayRef<Value *> operands, AttrList attrs,
                 unsigned numResults);
  Value *scalar(DType dtype, double value);
  Value *boolean(bool value) { return scalar(DType::Bool, value ? 1 : 0); }
  Value *ints(llvm::ArrayRef<int64_t> values, DType dtype = DType::I64);
  Value *zeros(const TensorType &type);
  Value *reshape(Value *value, llvm::ArrayRef<int64_t> dims);
  Value *sumTo(Value *grad, const TensorType &type);
  Value *castTo(Value *value, DType dtype);
  /// Adds \p grad (null: nothing) to the gradient of \p operand.
  void contribute(Value *operand, Value *grad);
  /// True if operand \p i of \p node needs a gradient.
  bool wants(const Node &node, unsigned i) const {
    return reach_->contains(node.getOperand(i));
  }

private:
  Value *accumulate(Value *value);
  Error backprop(Node &node);

  Graph &graph_;
  Builder builder_;
  const llvm::DenseSet<Value *> *reach_ = nullptr;
  std::string base_ = "grad";
  std::optional<std::string> failure_;
  llvm::DenseMap<Value *, llvm::SmallVector<Value *, 2>> contributions_;
  llvm::DenseSet<Value *> created_;
};

Node *Differentiator::emitNode(OpKind op, llvm::ArrayRef<Value *> operands,
                               AttrList attrs, unsigned numResults) {
  if (failure_ || llvm::is_contained(operands, nullptr))
    return nullptr;
  Expected<Node *> node = builder_.create(op, operands, std::move(attrs),
                                          numResults, base_);
  if (!node) {
    failure_ = errorToString(node.takeError());
    return nullptr;
  }
  for (Value *result : (*node)->getResults())
    created_.insert(result);
  return *node;
}

Value *Differentiator::emit(OpKind op, llvm::ArrayRef<Value *> operands,
                            AttrList attrs) {
  Node *node = emitNode(op, operands, std::move(attrs), 1);
  return node ? node->getResult(0) : nullptr;
}

Value *Differentiator::scalar(DType dtype, double value) {
  Value *result = builder_.createConstant(
      TensorData::fromDoubles(TensorType(dtype, {}), {value}), base_);
  created_.insert(result);
  return result;
}

Value *Differentiator::ints(llvm::ArrayRef<int64_t> values, DType dtype) {
  Value *result = builder_.createConstant(
      TensorData::fromInts(
          TensorType(dtype, {static_cast<int64_t>(values.size())}), values),
      base_);
  created_.insert(result);
  return result;
}

Value *Differentiator::zeros(const TensorType &type) {
  AttrList attrs;
  attrs.set("value", TensorDataPtr(std::make_shared<TensorData>(
                         TensorType(type.getDType(), {1}))));
  return emit(OpKind::ConstantOfShape, {ints(type.getDims())}, attrs);
}

Value *Differentiator::reshape(Value *value, llvm::ArrayRef<int64_t> dims) {
  if (!value || value->getType().getDims() == dims)
    return value;
  return emit(OpKind::Reshape, {value, ints(dims)});
}

Value *Differentiator::castTo(Value *value, DType dtype) {
  if (!value || value->getType().getDType() == dtype)
    return value;
  AttrList attrs;
  attrs.set("to", int64_t(onnxCode(dtype)));
  return emit(OpKind::Cast, {value}, attrs);
}

/// Sums \p grad over the dims along which \p type was broadcast to it.
Value *Differentiator::sumTo(Value *grad, const TensorType &type) {
  if (!grad)
    return nullptr;
  llvm::ArrayRef<int64_t> from = grad->getType().getDims();
  llvm::ArrayRef<int64_t> to = type.getDims();
  if (from == to)
    return grad;
  assert(from.size() >= to.size() && "gradient of lower rank than operand");
  size_t lead = from.size() - to.size();
  llvm::SmallVector<int64_t, 4> axes;
  for (size_t i = 0; i < from.size(); ++i)
    if (i < lead || (to[i - lead] == 1 && from[i] != 1))
      axes.push_back(i);
  Value *sum = grad;
  if (!axes.empty())
    sum = emit(OpKind::ReduceSum, {grad, ints(axes)});
  return reshape(sum, to);
}

void Differentiator::contribute(Value *operand, Value *grad) {
  if (!grad)
    return;
  assert(grad->getType() == operand->getType() && "gradient type mismatch");
  // Name a gradient made for this operand after it.
  if (created_.contains(grad) && !grad->isGraphInput() &&
      grad->getDefiningNode()->getOp() != OpKind::Constant &&
      !grad->getName().startswith(ir::gradientName(operand->getName())))
    grad->setName(graph_.uniqueName(ir::gradientName(operand->getName())));
  contributions_[operand].push_back(grad);
}

Value *Differentiator::accumulate(Value *value) {
  auto it = contributions_.find(value);
  if (it == contributions_.end() || it->second.empty())
    return nullptr;
  llvm::SmallVector<Value *, 2> &parts = it->second;
  Value *sum = parts.front();
  std::string saved = base_;
  base_ = ir::gradientName(value->getName());
  for (Value *part : llvm::drop_begin(parts))
    sum = emit(OpKind::Add, {sum, part});
  base_ = saved;
  parts.assign(1, sum);
  return sum;
}

/// Attribute helpers.
int64_t intAttr(const Node &node, llvm::StringRef name, int64_t otherwise) {
  return node.getAttrs().getInt(name).value_or(otherwise);
}

int64_t normAxis(int64_t axis, unsigned rank) {
  return axis < 0 ? axis + rank : axis;
}

/// \returns the dims of \p type with \p axes set to 1.
llvm::SmallVector<int64_t, 4> keepDims(const TensorType &type,
                                       llvm::ArrayRef<int64_t> axes) {
  llvm::SmallVector<int64_t, 4> dims(type.getDims().begin(), type.getDims().end());
  for (int64_t axis : axes)
    dims[normAxis(axis, type.getRank())] = 1;
  return dims;
}

/// What a gradient rule gets: the forward node and the gradients that
/// reached its results.
struct GradArgs {
  Node &node;
  /// The gradient of each result, null where none reached it.
  llvm::ArrayRef<Value *> grads;
  /// grads[0]; null only for Split, whose other results may carry one.
  Value *g;
  /// Result 0 and its dtype.
  Value *y;
  DType dt;

  Value *in(unsigned i) const { return node.getOperand(i); }
  const TensorType &typeOf(unsigned i) const {
    return node.getOperand(i)->getType();
  }
};

/// The gradient rule of op K: emits the backward nodes of one forward node
/// and contributes the gradients of the operands that want one. Defined for
/// exactly the ops with trait kDifferentiable (kGradRules does not compile
/// otherwise); an Error is for what the graph causes, not for bugs.
template <OpKind K>
Error grad(Differentiator &d, const GradArgs &args) = delete;

/// The rule of Add and Sub.
Error gradAddOrSub(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  if (d.wants(node, 0))
    d.contribute(args.in(0), d.sumTo(g, args.typeOf(0)));
  if (d.wants(node, 1))
    d.contribute(
        args.in(1),
        d.sumTo(node.getOp() == OpKind::Add ? g : d.emit(OpKind::Neg, {g}),
                args.typeOf(1)));
  return Error::success();
}

template <> Error grad<OpKind::Add>(Differentiator &d, const GradArgs &args) {
  return gradAddOrSub(d, args);
}

template <> Error grad<OpKind::Sub>(Differentiator &d, const GradArgs &args) {
  return gradAddOrSub(d, args);
}

template <> Error grad<OpKind::Mul>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  if (d.wants(node, 0))
    d.contribute(args.in(0),
                 d.sumTo(d.emit(OpKind::Mul, {g, args.in(1)}), args.typeOf(0)));
  if (d.wants(node, 1))
    d.contribute(args.in(1),
                 d.sumTo(d.emit(OpKind::Mul, {g, args.in(0)}), args.typeOf(1)));
  return Error::success();
}

template <> Error grad<OpKind::Div>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  Value *ga = d.emit(OpKind::Div, {g, args.in(1)});
  if (d.wants(node, 0))
    d.contribute(args.in(0), d.sumTo(ga, args.typeOf(0)));
  // d(a/b)/db = -(a/b)/b.
  if (d.wants(node, 1))
    d.contribute(args.in(1),
                 d.sumTo(d.emit(OpKind::Neg, {d.emit(OpKind::Mul, {ga, y})}),
                         args.typeOf(1)));
  return Error::success();
}

template <> Error grad<OpKind::Pow>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  Value *b = d.castTo(args.in(1), dt);
  if (d.wants(node, 0)) {
    Value *pm1 = d.emit(
        OpKind::Pow, {args.in(0), d.emit(OpKind::Sub, {b, d.scalar(dt, 1)})});
    d.contribute(args.in(0), d.sumTo(d.emit(OpKind::Mul,
                                            {d.emit(OpKind::Mul, {g, b}), pm1}),
                                     args.typeOf(0)));
  }
  if (d.wants(node, 1)) {
    Value *gb = d.emit(OpKind::Mul, {d.emit(OpKind::Mul, {g, y}),
                                     d.emit(OpKind::Log, {args.in(0)})});
    d.contribute(args.in(1), d.sumTo(d.castTo(gb, args.typeOf(1).getDType()),
                                     args.typeOf(1)));
  }
  return Error::success();
}

/// dy/dx = 0.5 / y.
template <> Error grad<OpKind::Sqrt>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  d.contribute(
      args.in(0),
      d.emit(OpKind::Div, {d.emit(OpKind::Mul, {g, d.scalar(dt, 0.5)}), y}));
  return Error::success();
}

/// dy/dx = 2/sqrt(pi) * exp(-x^2).
template <> Error grad<OpKind::Erf>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  DType dt = args.dt;
  Value *x = args.in(0);
  Value *e =
      d.emit(OpKind::Exp, {d.emit(OpKind::Neg, {d.emit(OpKind::Mul, {x, x})})});
  d.contribute(x, d.emit(OpKind::Mul,
                         {g, d.emit(OpKind::Mul,
                                    {e, d.scalar(dt, 2 / std::sqrt(M_PI))})}));
  return Error::success();
}

/// dy/dx = 1 - y^2.
template <> Error grad<OpKind::Tanh>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  d.contribute(args.in(0),
               d.emit(OpKind::Mul,
                      {g, d.emit(OpKind::Sub, {d.scalar(dt, 1),
                                               d.emit(OpKind::Mul, {y, y})})}));
  return Error::success();
}

/// dy/dx = x > 0, i.e. not (0 >= x).
template <> Error grad<OpKind::Relu>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  DType dt = args.dt;
  d.contribute(args.in(0),
               d.emit(OpKind::Where, {d.emit(OpKind::GreaterOrEqual,
                                             {d.scalar(dt, 0), args.in(0)}),
                                      d.scalar(dt, 0), g}));
  return Error::success();
}

/// dy/dx = y (1 - y).
template <>
Error grad<OpKind::Sigmoid>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  d.contribute(args.in(0), d.emit(OpKind::Mul,
                                  {d.emit(OpKind::Mul, {g, y}),
                                   d.emit(OpKind::Sub, {d.scalar(dt, 1), y})}));
  return Error::success();
}

template <> Error grad<OpKind::Exp>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  Value *y = args.y;
  d.contribute(args.in(0), d.emit(OpKind::Mul, {g, y}));
  return Error::success();
}

template <> Error grad<OpKind::Log>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  d.contribute(args.in(0), d.emit(OpKind::Div, {g, args.in(0)}));
  return Error::success();
}

template <> Error grad<OpKind::Neg>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  d.contribute(args.in(0), d.emit(OpKind::Neg, {g}));
  return Error::success();
}

template <>
Error grad<OpKind::Identity>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  d.contribute(args.in(0), g);
  return Error::success();
}

template <> Error grad<OpKind::Cast>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  d.contribute(args.in(0), d.castTo(g, args.typeOf(0).getDType()));
  return Error::success();
}

template <> Error grad<OpKind::Where>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  DType dt = args.dt;
  if (d.wants(node, 1))
    d.contribute(args.in(1), d.sumTo(d.emit(OpKind::Where,
                                            {args.in(0), g, d.scalar(dt, 0)}),
                                     args.typeOf(1)));
  if (d.wants(node, 2))
    d.contribute(args.in(2), d.sumTo(d.emit(OpKind::Where,
                                            {args.in(0), d.scalar(dt, 0), g}),
                                     args.typeOf(2)));
  return Error::success();
}

template <> Error grad<OpKind::Max>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  // The first operand equal to the maximum takes the gradient (ties go to
  // the earliest operand, so the parts sum to g).
  Value *taken = nullptr;
  for (unsigned i = 0; i < node.getNumOperands(); ++i) {
    Value *eq = d.emit(OpKind::Equal, {args.in(i), y});
    Value *pick =
        taken ? d.emit(OpKind::Where, {taken, d.boolean(false), eq}) : eq;
    if (d.wants(node, i))
      d.contribute(args.in(i),
                   d.sumTo(d.emit(OpKind::Where, {pick, g, d.scalar(dt, 0)}),
                           args.typeOf(i)));
    if (i + 1 < node.getNumOperands())
      taken = taken ? d.emit(OpKind::Where, {eq, d.boolean(true), taken}) : eq;
  }
  return Error::success();
}

template <>
Error grad<OpKind::MatMul>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  // Work on rank >= 2 views: a 1-D a is [1, k], a 1-D b is [k, 1].
  TensorType ta = args.typeOf(0), tb = args.typeOf(1);
  Value *a = args.in(0), *b = args.in(1);
  if (ta.getRank() == 1)
    a = d.reshape(a, {1, ta.getDim(0)});
  if (tb.getRank() == 1)
    b = d.reshape(b, {tb.getDim(0), 1});
  if (!a || !b)
    return Error::success();
  llvm::SmallVector<int64_t, 4> gDims;
  {
    llvm::ArrayRef<int64_t> ad = a->getType().getDims();
    llvm::ArrayRef<int64_t> bd = b->getType().getDims();
    auto batch = broadcastShapes(ad.drop_back(2), bd.drop_back(2));
    assert(batch && "MatMul operands do not broadcast");
    gDims.assign(batch->begin(), batch->end());
    gDims.push_back(ad[ad.size() - 2]);
    gDims.push_back(bd.back());
  }
  Value *g2 = d.reshape(g, gDims);
  auto swapLast = [&](Value *v) {
    unsigned rank = v->getType().getRank();
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    AttrList attrs;
    attrs.set("perm", perm);
    return d.emit(OpKind::Transpose, {v}, attrs);
  };
  if (d.wants(node, 0))
    d.contribute(args.in(0),
                 d.reshape(d.sumTo(d.emit(OpKind::MatMul, {g2, swapLast(b)}),
                                   a->getType()),
                           ta.getDims()));
  if (d.wants(node, 1))
    d.contribute(args.in(1),
                 d.reshape(d.sumTo(d.emit(OpKind::MatMul, {swapLast(a), g2}),
                                   b->getType()),
                           tb.getDims()));
  return Error::success();
}

template <> Error grad<OpKind::Gemm>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  DType dt = args.dt;
  const AttrList &attrs = args.node.getAttrs();
  bool transA = intAttr(node, "transA", 0), transB = intAttr(node, "transB", 0);
  float alpha = attrs.getFloat("alpha").value_or(1.0f);
  float beta = attrs.getFloat("beta").value_or(1.0f);
  auto gemm = [&](Value *p, Value *q, bool tp, bool tq) {
    AttrList a;
    if (alpha != 1.0f)
      a.set("alpha", alpha);
    if (tp)
      a.set("transA", int64_t(1));
    if (tq)
      a.set("transB", int64_t(1));
    return d.emit(OpKind::Gemm, {p, q}, a);
  };
  if (d.wants(node, 0))
    d.contribute(args.in(0), transA ? gemm(args.in(1), g, transB, true)
                                    : gemm(g, args.in(1), false, !transB));
  if (d.wants(node, 1))
    d.contribute(args.in(1), transB ? gemm(g, args.in(0), true, transA)
                                    : gemm(args.in(0), g, !transA, false));
  if (node.getNumOperands() > 2 && d.wants(node, 2)) {
    // beta is a float attribute: scale in the element type as Gemm does.
    Value *gc =
        beta == 1.0f ? g : d.emit(OpKind::Mul, {g, d.scalar(dt, double(beta))});
    d.contribute(args.in(2), d.sumTo(gc, args.typeOf(2)));
  }
  return Error::success();
}

/// The rule of Softmax and LogSoftmax.
Error gradSoftmaxOrLogSoftmax(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  int64_t axis = normAxis(intAttr(node, "axis", -1), y->getType().getRank());
  if (node.getOp() == OpKind::Softmax) {
    // dx = y * (g - ReduceSum(g * y, axis)) as remat.SoftmaxGrad: one pass
    // over the rows instead of four over the tensor; its kernels run the
    // Mul, ReduceSum, Sub and Mul this rule emitted before, in their order,
    // so the bits are that graph's (export writes it back out).
    AttrList attrs;
    attrs.set("axis", axis);
    d.contribute(args.in(0), d.emit(OpKind::SoftmaxGrad, {g, y}, attrs));
  } else {
    Value *s = d.emit(OpKind::ReduceSum, {g, d.ints({axis})});
    d.contribute(
        args.in(0),
        d.emit(OpKind::Sub,
               {g, d.emit(OpKind::Mul, {d.emit(OpKind::Exp, {y}), s})}));
  }
  return Error::success();
}

template <>
Error grad<OpKind::Softmax>(Differentiator &d, const GradArgs &args) {
  return gradSoftmaxOrLogSoftmax(d, args);
}

template <>
Error grad<OpKind::LogSoftmax>(Differentiator &d, const GradArgs &args) {
  return gradSoftmaxOrLogSoftmax(d, args);
}

template <>
Error grad<OpKind::LayerNormalization>(Differentiator &d,
                                       const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  // xhat = (x - Mean) * InvStdDev; dx = InvStdDev * (dxhat - mean(dxhat)
  // - xhat * mean(dxhat * xhat)) over the normalized dims.
  const TensorType &tx = args.typeOf(0);
  int64_t axis = normAxis(intAttr(node, "axis", -1), tx.getRank());
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < tx.getRank(); ++i)
    axes.push_back(i);
  for (unsigned i = node.getNumResults(); i < 3; ++i) {
    const char *suffix = i == 1 ? "_mean" : "_inv_std_dev";
    Value *added = d.graph().addResult(
        &node, d.graph().uniqueName(y->getName().str() + suffix), y->getType());
    (void)added;
  }
  {
    auto inferred = inferTypes(node);
    if (!inferred)
      return inferred.takeError();
    for (unsigned i = 1; i < 3; ++i)
      node.getResult(i)->setType((*inferred)[i].type);
  }
  Value *mean = d.castTo(node.getResult(1), dt);
  Value *inv = d.castTo(node.getResult(2), dt);
  Value *xhat =
      d.emit(OpKind::Mul, {d.emit(OpKind::Sub, {args.in(0), mean}), inv});
  AttrList meanAttrs;
  meanAttrs.set("axes", axes);
  if (node.getNumOperands() > 2 && d.wants(node, 2))
    d.contribute(args.in(2), d.sumTo(g, args.typeOf(2)));
  if (d.wants(node, 1))
    d.contribute(args.in(1),
                 d.sumTo(d.emit(OpKind::Mul, {g, xhat}), args.typeOf(1)));
  if (d.wants(node, 0) && (dt == DType::F32 || dt == DType::F64) &&
      args.typeOf(1).getDims() == tx.getDims().drop_front(axis) &&
      node.getResult(1)->getType().getDType() == dt) {
    // The common case (Scale of the normalized shape, statistics in X's
    // dtype) as remat.LayerNormalizationGrad: one pass over each row
    // instead of ten over the tensor. Its kernels run the operations of the
    // graph below in its order, so the bits are that graph's.
    AttrList attrs;
    attrs.set("axis", axis);
    d.contribute(args.in(0), d.emit(OpKind::LayerNormalizationGrad,
                                    {g, args.in(0), args.in(1),
                                     node.getResult(1), node.getResult(2)},
                                    attrs));
  } else if (d.wants(node, 0)) {
    Value *dxhat = d.emit(OpKind::Mul, {g, args.in(1)});
    Value *m1 = d.emit(OpKind::ReduceMean, {dxhat}, meanAttrs);
    Value *m2 = d.emit(OpKind::ReduceMean, {d.emit(OpKind::Mul, {dxhat, xhat})},
                       meanAttrs);
    Value *inner = d.emit(OpKind::Sub, {d.emit(OpKind::Sub, {dxhat, m1}),
                                        d.emit(OpKind::Mul, {xhat, m2})});
    d.contribute(args.in(0), d.emit(OpKind::Mul, {inner, inv}));
  }
  return Error::success();
}

template <>
Error grad<OpKind::Dropout>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  // y = x * mask / (1 - ratio) in training mode, else x.
  const TensorData *training =
      node.getNumOperands() > 2 ? getConstantValue(args.in(2)) : nullptr;
  if (node.getNumOperands() < 3 || (training && training->getInt(0) == 0)) {
    d.contribute(args.in(0), g);
    return Error::success();
  }
  if (node.getNumResults() < 2)
    d.graph().addResult(&node,
                        d.graph().uniqueName(y->getName().str() + "_mask"),
                        TensorType(DType::Bool, y->getType().getDims()));
  Value *ratio =
      node.getNumOperands() > 1 ? d.castTo(args.in(1), dt) : d.scalar(dt, 0.5);
  Value *scale =
      d.emit(OpKind::Div,
             {d.scalar(dt, 1), d.emit(OpKind::Sub, {d.scalar(dt, 1), ratio})});
  // (g * Cast(mask)) * scale as remat.DropoutGrad, one pass instead of
  // three (its kernels compute those operations in that order: the bits of
  // the Cast, Mul and Mul this rule emitted before; export writes them).
  Value *masked =
      g->getType() == y->getType() && scale->getType().getRank() == 0
          ? d.emit(OpKind::DropoutGrad, {g, node.getResult(1), scale})
          : d.emit(OpKind::Mul,
                   {d.emit(OpKind::Mul, {g, d.castTo(node.getResult(1), dt)}),
                    scale});
  if (!training)
    masked = d.emit(OpKind::Where, {args.in(2), masked, g});
  d.contribute(args.in(0), masked);
  return Error::success();
}

/// The rule of ReduceMean, ReduceSum and ReduceMax.
Error gradReduce(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  const AttrList &attrs = args.node.getAttrs();
  const TensorType &tx = args.typeOf(0);
  std::vector<int64_t> axes;
  bool all = false;
  if (node.getOp() == OpKind::ReduceSum) {
    if (node.getNumOperands() > 1) {
      const TensorData *data = getConstantValue(args.in(1));
      if (!data)
        return makeError(node.describe() +
                         ": autodiff needs constant axes for ReduceSum");
      axes = data->getInts();
    }
    if (axes.empty()) {
      if (intAttr(node, "noop_with_empty_axes", 0)) {
        d.contribute(args.in(0), g);
        return Error::success();
      }
      all = true;
    }
  } else if (auto list = attrs.getInts("axes")) {
    axes = *list;
  } else {
    all = true;
  }
  if (all)
    for (unsigned i = 0; i < tx.getRank(); ++i)
      axes.push_back(i);
  auto kd = keepDims(tx, axes);
  Value *gk = d.reshape(g, kd);
  if (node.getOp() == OpKind::ReduceMax) {
    Value *yk = d.reshape(y, kd);
    d.contribute(args.in(0),
                 d.emit(OpKind::Where, {d.emit(OpKind::Equal, {args.in(0), yk}),
                                        gk, d.scalar(dt, 0)}));
    return Error::success();
  }
  Value *expanded = d.emit(OpKind::Expand, {gk, d.ints(tx.getDims())});
  if (node.getOp() == OpKind::ReduceMean) {
    int64_t count = 1;
    for (int64_t axis : axes)
      count *= tx.getDim(normAxis(axis, tx.getRank()));
    expanded = d.emit(OpKind::Div, {expanded, d.scalar(dt, double(count))});
  }
  d.contribute(args.in(0), expanded);
  return Error::success();
}

template <>
Error grad<OpKind::ReduceMean>(Differentiator &d, const GradArgs &args) {
  return gradReduce(d, args);
}

template <>
Error grad<OpKind::ReduceSum>(Differentiator &d, const GradArgs &args) {
  return gradReduce(d, args);
}

template <>
Error grad<OpKind::ReduceMax>(Differentiator &d, const GradArgs &args) {
  return gradReduce(d, args);
}

/// The rule of Reshape, Unsqueeze and Squeeze.
Error gradReshape(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  d.contribute(args.in(0), d.reshape(g, args.typeOf(0).getDims()));
  return Error::success();
}

template <>
Error grad<OpKind::Reshape>(Differentiator &d, const GradArgs &args) {
  return gradReshape(d, args);
}

template <>
Error grad<OpKind::Unsqueeze>(Differentiator &d, const GradArgs &args) {
  return gradReshape(d, args);
}

template <>
Error grad<OpKind::Squeeze>(Differentiator &d, const GradArgs &args) {
  return gradReshape(d, args);
}

template <>
Error grad<OpKind::Expand>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  d.contribute(args.in(0), d.sumTo(g, args.typeOf(0)));
  return Error::success();
}

template <>
Error grad<OpKind::Transpose>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  const AttrList &attrs = args.node.getAttrs();
  unsigned rank = args.typeOf(0).getRank();
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  if (auto given = attrs.getInts("perm"))
    perm = *given;
  else
    std::reverse(perm.begin(), perm.end());
  std::vector<int64_t> inverse(rank);
  for (unsigned i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  AttrList a;
  a.set("perm", inverse);
  d.contribute(args.in(0), d.emit(OpKind::Transpose, {g}, a));
  return Error::success();
}

template <>
Error grad<OpKind::Concat>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  unsigned rank = y->getType().getRank();
  int64_t axis = normAxis(intAttr(node, "axis", 0), rank);
  if (node.getNumOperands() == 1) {
    d.contribute(args.in(0), g);
    return Error::success();
  }
  std::vector<int64_t> sizes;
  for (unsigned i = 0; i < node.getNumOperands(); ++i)
    sizes.push_back(args.typeOf(i).getDim(axis));
  AttrList a;
  a.set("axis", axis);
  Node *split =
      d.emitNode(OpKind::Split, {g, d.ints(sizes)}, a, node.getNumOperands());
  if (!split)
    return Error::success();
  for (unsigned i = 0; i < node.getNumOperands(); ++i)
    if (d.wants(node, i))
      d.contribute(args.in(i), split->getResult(i));
  return Error::success();
}

template <> Error grad<OpKind::Split>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *y = args.y;
  unsigned rank = y->getType().getRank();
  int64_t axis = normAxis(intAttr(node, "axis", 0), rank);
  llvm::SmallVector<Value *, 4> parts;
  bool any = false;
  for (unsigned i = 0; i < node.getNumResults(); ++i) {
    any |= args.grads[i] != nullptr;
    parts.push_back(args.grads[i] ? args.grads[i]
                                  : d.zeros(node.getResult(i)->getType()));
  }
  if (!any)
    return Error::success();
  AttrList a;
  a.set("axis", axis);
  d.contribute(args.in(0),
               parts.size() == 1 ? parts[0] : d.emit(OpKind::Concat, parts, a));
  return Error::success();
}

template <> Error grad<OpKind::Slice>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *y = args.y;
  DType dt = args.dt;
  // Scatter g into zeros at the flat positions the same Slice takes from
  // an iota of the data's shape.
  const TensorType &tx = args.typeOf(0);
  int64_t n = tx.getNumElements();
  Value *iota = d.emit(OpKind::Range, {d.scalar(DType::I64, 0),
                                       d.scalar(DType::I64, double(n)),
                                       d.scalar(DType::I64, 1)});
  llvm::SmallVector<Value *, 5> operands{d.reshape(iota, tx.getDims())};
  for (unsigned i = 1; i < node.getNumOperands(); ++i)
    operands.push_back(args.in(i));
  Value *taken = d.emit(OpKind::Slice, operands);
  int64_t m = y->getType().getNumElements();
  AttrList a;
  a.set("axis", int64_t(0));
  a.set("reduction", std::string("add"));
  Value *flat = d.emit(
      OpKind::ScatterElements,
      {d.zeros(TensorType(dt, {n})), d.reshape(taken, {m}), d.reshape(g, {m})},
      a);
  d.contribute(args.in(0), d.reshape(flat, tx.getDims()));
  return Error::success();
}

template <>
Error grad<OpKind::Gather>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  DType dt = args.dt;
  // View data as [outer, A, inner] and the gradient as [outer, n, inner];
  // ScatterElements needs indices of the updates' shape, so the indices
  // are reshaped to [1, n, 1] and expanded.
  const TensorType &tx = args.typeOf(0);
  int64_t axis = normAxis(intAttr(node, "axis", 0), tx.getRank());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= tx.getDim(i);
  for (int64_t i = axis + 1; i < tx.getRank(); ++i)
    inner *= tx.getDim(i);
  int64_t n = args.typeOf(1).getNumElements();
  Value *idx = d.emit(OpKind::Expand, {d.reshape(args.in(1), {1, n, 1}),
                                       d.ints({outer, n, inner})});
  AttrList a;
  a.set("axis", int64_t(1));
  a.set("reduction", std::string("add"));
  Value *scattered =
      d.emit(OpKind::ScatterElements,
             {d.zeros(TensorType(dt, {outer, tx.getDim(axis), inner})), idx,
              d.reshape(g, {outer, n, inner})},
             a);
  d.contribute(args.in(0), d.reshape(scattered, tx.getDims()));
  return Error::success();
}

/// dx = remat.GeluGrad(g, x): one pass instead of a dozen elementwise ops
/// (its kernels compute the same operations, in the same order, as the
/// Erf/Tanh/Exp/Mul/Add graph this rule emitted before, so the bits are
/// those of that graph; export writes that graph back out).
template <> Error grad<OpKind::Gelu>(Differentiator &d, const GradArgs &args) {
  AttrList attrs;
  if (auto approximate = args.node.getAttrs().getString("approximate"))
    attrs.set("approximate", *approximate);
  d.contribute(args.in(0),
               d.emit(OpKind::GeluGrad, {args.g, args.in(0)}, attrs));
  return Error::success();
}

/// SoftmaxCrossEntropyLoss w.r.t. scores [N, C, d...]:
///   dscores = g' * w_n * (softmax(scores) - onehot(label_n))
/// with w_n = 0 at ignore_index, else the class weight (or 1), and g' = g per
/// element (none), g (sum), or g / sum(w_n) (mean).
template <>
Error grad<OpKind::SoftmaxCrossEntropyLoss>(Differentiator &d,
                                            const GradArgs &args) {
  Node &node = args.node;
  Value *g = args.g;
  Value *scores = node.getOperand(0), *labels = node.getOperand(1);
  const TensorType &ts = scores->getType();
  DType dt = ts.getDType();
  DType lt = labels->getType().getDType();
  if (node.getNumResults() < 2)
    d.graph().addResult(
        &node,
        d.graph().uniqueName(node.getResult(0)->getName().str() + "_log_prob"),
        ts);
  std::optional<int64_t> ignore = node.getAttrs().getInt("ignore_index");
  std::string reduction =
      node.getAttrs().getString("reduction").value_or("mean");
  Value *safe = labels;
  Value *ignored = nullptr;
  if (ignore) {
    ignored = d.emit(OpKind::Equal, {labels, d.ints({*ignore}, lt)});
    safe = d.emit(OpKind::Where, {ignored, d.ints({0}, lt), labels});
  }
  // w_n, of the labels' shape.
  Value *w;
  if (node.getNumOperands() > 2)
    w = d.emit(OpKind::Gather, {node.getOperand(2), safe});
  else
    w = d.emit(OpKind::Expand,
               {d.scalar(dt, 1), d.ints(labels->getType().getDims())});
  if (ignored)
    w = d.emit(OpKind::Where, {ignored, d.scalar(dt, 0), w});
  Value *scale = w;
  if (reduction == "mean")
    scale = d.emit(OpKind::Div, {w, d.emit(OpKind::ReduceSum, {w})});
  scale = d.emit(OpKind::Mul, {scale, g}); // g is [] or labels-shaped.
  // (exp(log_prob) - onehot(label)) * scale in one pass; its kernels do the
  // operations of the Exp, Equal, Cast, Sub and Mul nodes this rule emitted
  // before, so the bits are the same; export writes them back (with Where
  // in place of Cast, the same 1 or 0).
  d.contribute(scores, d.emit(OpKind::SoftmaxCrossEntropyGrad,
                              {node.getResult(1), safe, scale}));
  return Error::success();
}

/// dy/dx = cos(x).
template <> Error grad<OpKind::Sin>(Differentiator &d, const GradArgs &args) {
  d.contribute(args.in(0),
               d.emit(OpKind::Mul, {args.g, d.emit(OpKind::Cos, {args.in(0)})}));
  return Error::success();
}

/// dy/dx = -sin(x).
template <> Error grad<OpKind::Cos>(Differentiator &d, const GradArgs &args) {
  d.contribute(args.in(0),
               d.emit(OpKind::Neg, {d.emit(OpKind::Mul,
                                           {args.g, d.emit(OpKind::Sin,
                                                           {args.in(0)})})}));
  return Error::success();
}

/// dy/dx = sign(x), 0 at 0 (as PyTorch): g where x > 0, -g where x < 0.
template <> Error grad<OpKind::Abs>(Differentiator &d, const GradArgs &args) {
  Value *x = args.in(0);
  Value *zero = d.scalar(args.dt, 0);
  Value *positive =
      d.emit(OpKind::Not, {d.emit(OpKind::GreaterOrEqual, {zero, x})});
  Value *negative =
      d.emit(OpKind::Not, {d.emit(OpKind::GreaterOrEqual, {x, zero})});
  d.contribute(x, d.emit(OpKind::Where,
                         {positive, args.g,
                          d.emit(OpKind::Where,
                                 {negative, d.emit(OpKind::Neg, {args.g}),
                                  zero})}));
  return Error::success();
}

/// dy/dx = -1 / x^2 = -y^2.
template <>
Error grad<OpKind::Reciprocal>(Differentiator &d, const GradArgs &args) {
  d.contribute(args.in(0),
               d.emit(OpKind::Neg,
                      {d.emit(OpKind::Mul,
                              {args.g, d.emit(OpKind::Mul, {args.y, args.y})})}));
  return Error::success();
}

/// As Max: the first operand equal to the minimum takes the gradient.
template <> Error grad<OpKind::Min>(Differentiator &d, const GradArgs &args) {
  return grad<OpKind::Max>(d, args);
}

/// The same triangle of the gradient.
template <> Error grad<OpKind::Trilu>(Differentiator &d, const GradArgs &args) {
  llvm::SmallVector<Value *, 2> operands{args.g};
  if (args.node.getNumOperands() > 1)
    operands.push_back(args.in(1));
  d.contribute(args.in(0),
               d.emit(OpKind::Trilu, operands, args.node.getAttrs()));
  return Error::success();
}

/// The running sum of the gradient in the other direction: x_j reaches
/// y_i for i >= j (i > j when exclusive).
template <>
Error grad<OpKind::CumSum>(Differentiator &d, const GradArgs &args) {
  AttrList attrs = args.node.getAttrs();
  attrs.set("reverse", int64_t(intAttr(args.node, "reverse", 0) == 0));
  d.contribute(args.in(0),
               d.emit(OpKind::CumSum, {args.g, args.in(1)}, attrs));
  return Error::success();
}

/// Scatter-add of the gradient into zeros at the gathered positions.
template <>
Error grad<OpKind::GatherElements>(Differentiator &d, const GradArgs &args) {
  AttrList attrs;
  attrs.set("axis", int64_t(intAttr(args.node, "axis", 0)));
  attrs.set("reduction", std::string("add"));
  d.contribute(args.in(0), d.emit(OpKind::ScatterElements,
                                  {d.zeros(args.typeOf(0)), args.in(1), args.g},
                                  attrs));
  return Error::success();
}

/// Mode constant: the data's gradient is the gradient padded by the negated
/// pads (a crop where the forward padded, zeros where it cropped); the
/// constant's is the sum of the gradient over the padding. Modes reflect,
/// edge and wrap: scatter-add the gradient at the input positions the same
/// Pad takes from an iota of the data's shape.
template <> Error grad<OpKind::Pad>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  const TensorType &tx = args.typeOf(0);
  std::string mode = node.getAttrs().getString("mode").value_or("constant");
  const TensorData *padsData = getConstantValue(node.getOperand(1));
  if (!padsData)
    return makeError(node.describe() +
                     ": autodiff needs a constant pads operand");
  std::vector<int64_t> pads = padsData->getInts();
  Value *axes = node.getNumOperands() > 3 ? args.in(3) : nullptr;
  if (mode == "constant") {
    std::vector<int64_t> negated;
    for (int64_t pad : pads)
      negated.push_back(-pad);
    llvm::SmallVector<Value *, 4> operands{args.g, d.ints(negated),
                                           d.scalar(args.dt, 0)};
    if (axes)
      operands.push_back(axes);
    Value *gx = d.emit(OpKind::Pad, operands);
    if (d.wants(node, 0))
      d.contribute(args.in(0), gx);
    if (node.getNumOperands() > 2 && d.wants(node, 2)) {
      AttrList keep;
      keep.set("keepdims", int64_t(0));
      Value *outside = d.emit(OpKind::Sub, {d.emit(OpKind::ReduceSum, {args.g}, keep),
                                            d.emit(OpKind::ReduceSum, {gx}, keep)});
      d.contribute(args.in(2), d.reshape(outside, args.typeOf(2).getDims()));
    }
    return Error::success();
  }
  if (!d.wants(node, 0))
    return Error::success();
  int64_t n = tx.getNumElements();
  Value *iota = d.emit(OpKind::Range, {d.scalar(DType::I64, 0),
                                       d.scalar(DType::I64, double(n)),
                                       d.scalar(DType::I64, 1)});
  llvm::SmallVector<Value *, 4> operands{d.reshape(iota, tx.getDims()),
                                         args.in(1)};
  if (axes) {
    operands.push_back(d.scalar(DType::I64, 0));
    operands.push_back(axes);
  }
  AttrList attrs;
  attrs.set("mode", mode);
  Value *taken = d.emit(OpKind::Pad, operands, attrs);
  int64_t m = args.y->getType().getNumElements();
  AttrList scatter;
  scatter.set("axis", int64_t(0));
  scatter.set("reduction", std::string("add"));
  Value *flat = d.emit(OpKind::ScatterElements,
                       {d.zeros(TensorType(args.dt, {n})),
                        d.reshape(taken, {m}), d.reshape(args.g, {m})},
                       scatter);
  d.contribute(args.in(0), d.reshape(flat, tx.getDims()));
  return Error::success();
}

/// X: ConvTranspose of the gradient by W, with output_padding making up the
/// input positions no window reached. W (group 1): a Conv of X by the
/// gradient with batch and channels swapped, strides and dilations swapped,
/// cut to the kernel. B: the gradient summed over all but the channels.
template <> Error grad<OpKind::Conv>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  auto geometry = getConvGeometry(node);
  if (!geometry)
    return geometry.takeError();
  const TensorType &tx = args.typeOf(0);
  const TensorType &tw = args.typeOf(1);
  size_t spatial = tx.getRank() - 2;
  std::vector<int64_t> strides(geometry->strides.begin(),
                               geometry->strides.end());
  std::vector<int64_t> dilations(geometry->dilations.begin(),
                                 geometry->dilations.end());
  std::vector<int64_t> pads(geometry->padBegin.begin(),
                            geometry->padBegin.end());
  pads.insert(pads.end(), geometry->padEnd.begin(), geometry->padEnd.end());
  if (d.wants(node, 0)) {
    std::vector<int64_t> outputPadding;
    for (size_t i = 0; i < spatial; ++i) {
      int64_t extent = dilations[i] * (geometry->kernel[i] - 1) + 1;
      int64_t reached = strides[i] * (geometry->resultDims[i + 2] - 1) +
                        extent - pads[i] - pads[i + spatial];
      outputPadding.push_back(tx.getDim(i + 2) - reached);
    }
    AttrList attrs;
    attrs.set("strides", strides);
    attrs.set("dilations", dilations);
    attrs.set("pads", pads);
    attrs.set("output_padding", outputPadding);
    attrs.set("group", geometry->group);
    d.contribute(args.in(0),
                 d.emit(OpKind::ConvTranspose, {args.g, args.in(1)}, attrs));
  }
  if (d.wants(node, 1)) {
    if (geometry->group != 1)
      return makeError(node.describe() +
                       ": autodiff differentiates Conv by its weights only "
                       "for group 1, got group " +
                       llvm::Twine(geometry->group));
    std::vector<int64_t> swap(tx.getRank());
    std::iota(swap.begin(), swap.end(), 0);
    std::swap(swap[0], swap[1]);
    AttrList perm;
    perm.set("perm", swap);
    Value *xt = d.emit(OpKind::Transpose, {args.in(0)}, perm);
    Value *gt = d.emit(OpKind::Transpose, {args.g}, perm);
    AttrList attrs;
    attrs.set("strides", dilations);
    attrs.set("dilations", strides);
    attrs.set("pads", pads);
    Value *full = d.emit(OpKind::Conv, {xt, gt}, attrs); // [C, M, >= k...]
    std::vector<int64_t> starts(spatial, 0), ends, axes;
    for (size_t i = 0; i < spatial; ++i) {
      ends.push_back(geometry->kernel[i]);
      axes.push_back(int64_t(i + 2));
    }
    Value *cut = full;
    if (full && full->getType().getDims().drop_front(2) !=
                    llvm::ArrayRef<int64_t>(geometry->kernel))
      cut = d.emit(OpKind::Slice, {full, d.ints(starts), d.ints(ends),
                                   d.ints(axes)});
    Value *gw = d.emit(OpKind::Transpose, {cut}, perm);
    d.contribute(args.in(1), d.reshape(gw, tw.getDims()));
  }
  if (node.getNumOperands() > 2 && d.wants(node, 2)) {
    std::vector<int64_t> axes{0};
    for (size_t i = 0; i < spatial; ++i)
      axes.push_back(int64_t(i + 2));
    AttrList keep;
    keep.set("keepdims", int64_t(0));
    d.contribute(args.in(2),
                 d.emit(OpKind::ReduceSum, {args.g, d.ints(axes)}, keep));
  }
  return Error::success();
}

using GradRule = Error (*)(Differentiator &, const GradArgs &);

/// grad<Op> for an op with trait kDifferentiable, else null.
template <OpKind K, uint32_t Traits> constexpr GradRule ruleFor() {
  if constexpr ((Traits & kDifferentiable) != 0)
    return &grad<K>;
  else
    return nullptr;
}

/// The gradient rules, indexed by OpKind.
constexpr GradRule kGradRules[] = {
#define OP(NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS, \
           TRAITS, COST, SUMMARY)                                              \
  ruleFor<OpKind::NAME, uint32_t(TRAITS)>(),
#include "ir/Ops.def"
};

Error Differentiator::backprop(Node &node) {
  llvm::SmallVector<Value *, 2> grads;
  for (Value *result : node.getResults())
    grads.push_back(accumulate(result));
  // Only Split has several results that carry gradients.
  for (unsigned i = 1; i < grads.size(); ++i)
    if (grads[i] && node.getOp() != OpKind::Split)
      return makeError(node.describe() + ": autodiff cannot differentiate "
                       "through result " + llvm::Twine(i) + " ('" +
                       node.getResult(i)->getName() + "') of " +
                       node.getOpSpelling());
  Value *g = grads.front();
  if (!g && node.getOp() != OpKind::Split)
    return Error::success();
  base_ = ir::gradientName(node.getResult(0)->getName());
  builder_.setLayer(node.getLayer());
  GradRule rule = kGradRules[size_t(node.getOp())];
  assert(rule && "op without a gradient rule reached backprop");
  Value *y = node.getResult(0);
  if (Error err = rule(*this, {node, grads, g, y, y->getType().getDType()}))
    return err;
  if (failure_)
    return makeError("autodiff failed to build the gradient of " +
                     node.describe() + ": " + *failure_);
  return Error::success();
}

Error Differentiator::run(Value *loss, llvm::ArrayRef<Value *> weights,
                          llvm::DenseMap<Value *, Value *> &gradOfWeight,
                          const llvm::DenseSet<Value *> &reach) {
  reach_ = &reach;
  std::vector<Node *> forward;
  for (Node &node : graph_.getNodes())
    forward.push_back(&node);
  base_ = ir::gradientName(loss->getName());
  contributions_[loss].push_back(scalar(loss->getType().getDType(), 1));
  for (Node *node : llvm::reverse(forward)) {
    bool reached = llvm::any_of(node->getResults(), [&](Value *result) {
      return reach.contains(result);
    });
    if (reached)
      if (Error err = backprop(*node))
        return err;
  }
  for (Value *weight : weights)
    if (Value *grad = accumulate(weight))
      gradOfWeight[weight] = grad;
  if (failure_)
    return makeError("autodiff failed: " + *failure_);
  return Error::success();
}

} // namespace

Expected<bool> AutodiffPass::run(Graph &graph) {
  assert((unusedWeights_ == "warn" || unusedWeights_ == "error" ||
          unusedWeights_ == "drop") &&
         "checked when the option was parsed");
  for (Value *output : graph.getOutputs())
    if (output->getGradientOf())
      return makeError("graph already has gradient outputs ('" +
                       output->getName() + "')");

  // The loss.
  Value *loss = nullptr;
  auto isScalarFloat = [](const Value *value) {
    return value->getType().getRank() == 0 &&
           isFloat(value->getType().getDType());
  };
  if (!loss_.empty()) {
    loss = graph.lookup(loss_);
    if (!loss || !llvm::is_contained(graph.getOutputs(), loss))
      return makeError("loss '" + loss_ + "' is not an output of the graph");
    if (!isScalarFloat(loss))
      return makeError("loss '" + loss_ + "' has type " +
                       loss->getType().str() + ", expected a float scalar");
  } else {
    llvm::SmallVector<std::string, 2> scalars;
    for (Value *output : graph.getOutputs())
      if (isScalarFloat(output) &&
          !llvm::is_contained(scalars, output->getName().str())) {
        scalars.push_back(("'" + output->getName() + "'").str());
        loss = output;
      }
    if (scalars.empty())
      return makeError("graph has no scalar float output to use as the loss; "
                       "name one with autodiff{loss=NAME}");
    if (scalars.size() > 1)
      return makeError("graph has several scalar float outputs (" +
                       llvm::join(scalars, ", ") +
                       "); choose the loss with autodiff{loss=NAME}");
  }

  // Values that depend on a weight through differentiable operands.
  llvm::DenseSet<Value *> active;
  llvm::SmallVector<Value *, 8> weights;
  for (Value *input : graph.getInputs())
    if (input->isWeight() && isFloat(input->getType().getDType())) {
      weights.push_back(input);
      active.insert(input);
    }
  auto carries = [&](const Node &node, unsigned i) {
    if (!active.contains(node.getOperand(i)))
      return false;
    return !hasRule(node.getOp()) || isDifferentiableOperand(node, i);
  };
  for (Node &node : graph.getNodes()) {
    bool any = false;
    for (unsigned i = 0; i < node.getNumOperands(); ++i)
      any |= carries(node, i);
    if (!any)
      continue;
    for (Value *result : node.getResults())
      if (isFloat(result->getType().getDType()))
        active.insert(result);
  }
  if (!active.contains(loss))
    return makeError("no weight reaches the loss '" + loss->getName() + "'");

  // Active values from which the loss is reachable.
  llvm::DenseSet<Value *> reach{loss};
  for (Node &node : llvm::reverse(graph.getNodes())) {
    bool reached = llvm::any_of(node.getResults(), [&](Value *result) {
      return reach.contains(result);
    });
    if (!reached)
      continue;
    if (!hasRule(node.getOp()))
      return makeError(node.describe() + ": op " + node.getOpSpelling() +
                       " has no gradient rule, but it is on a path from a "
                       "weight to the loss '" + loss->getName() + "'");
    for (unsigned i = 0; i < node.getNumOperands(); ++i)
      if (carries(node, i))
        reach.insert(node.getOperand(i));
  }

  // Weights without a gradient.
  llvm::SmallVector<Value *, 4> unused;
  for (Value *weight : weights)
    if (!reach.contains(weight))
      unused.push_back(weight);
  if (!unused.empty() && unusedWeights_ == "error") {
    llvm::SmallVector<std::string, 4> names;
    for (Value *weight : unused)
      names.push_back(("'" + weight->getName() + "'").str());
    return makeError("weights that do not reach the loss '" + loss->getName() +
                     "': " + llvm::join(names, ", ") +
                     " (use autodiff{unused-weights=warn} or drop)");
  }
  if (unusedWeights_ == "warn")
    for (Value *weight : unused)
      emitWarning("weight '" + weight->getName() + "' does not reach the loss '" +
                  loss->getName() + "' and gets no gradient");

  Differentiator diff(graph);
  llvm::DenseMap<Value *, Value *> gradOf;
  if (Error err = diff.run(loss, weights, gradOf, reach))
    return std::move(err);

  // Outputs: the loss, then the gradients in weight-input order.
  while (!graph.getOutputs().empty())
    graph.removeOutput(graph.getOutputs().size() - 1);
  graph.addOutput(loss);
  llvm::DenseSet<Value *> used;
  for (Value *weight : weights) {
    auto it = gradOf.find(weight);
    if (it == gradOf.end())
      continue;
    Value *grad = it->second;
    std::string name = ir::gradientName(weight->getName());
    bool owned = !grad->isGraphInput() &&
                 grad->getDefiningNode()->getStage() == Stage::Backward &&
                 !used.contains(grad) && grad != loss;
    if (grad->getName() != name) {
      if (Value *other = graph.lookup(name))
        other->setName(graph.uniqueName(name));
      if (owned) {
        grad->setName(name);
      } else {
        Builder builder(graph);
        builder.setStage(Stage::Backward);
        auto copy = builder.createValue(OpKind::Identity, {grad}, {}, name);
        if (!copy)
          return copy.takeError();
        grad = *copy;
        if (grad->getName() != name)
          grad->setName(name);
      }
    }
    used.insert(grad);
    grad->setGradientOf(weight);
    graph.addOutput(grad);
  }

  if (unusedWeights_ == "drop" && !unused.empty()) {
    // Remove every dead node, then the unused weights that are left unused.
    std::vector<Node *> nodes;
    for (Node &node : graph.getNodes())
      nodes.push_back(&node);
    for (Node *node : llvm::reverse(nodes))
      if (!node->hasUsedResults())
        graph.eraseNode(node);
    for (Value *weight : unused) {
      std::string name = weight->getName().str();
      if (weight->hasUses()) {
        emitWarning("weight '" + name + "' does not reach the loss '" +
                    loss->getName() + "' but is still used; kept");
        continue;
      }
      graph.eraseInput(weight);
      emitNote("dropped weight '" + name + "', which does not reach the loss '" +
               loss->getName() + "'");
    }
  }
  return true;
}

} // namespace remat::passes
