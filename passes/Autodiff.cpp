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
// Gradient rules: Add Sub Mul Div Pow Sqrt Erf Tanh Relu Sigmoid Exp Log Neg
// Where (x, y) Max Cast (float to float) Identity MatMul (batched, broadcast
// batch dims, 1-D operands) Gemm Softmax LogSoftmax LayerNormalization
// (through its Mean and InvStdDev results, added when absent) Dropout
// (through its mask, added when absent) ReduceMean ReduceSum ReduceMax
// Reshape Transpose Unsqueeze Squeeze Concat Slice Split Expand Gather (data)
// SoftmaxCrossEntropyLoss (scores; log_prob added when absent) and
// remat.Gelu (derivative decomposed into Erf/Tanh/Exp arithmetic).
//
// Not differentiated through (their results are constants to autodiff):
// - Shape, Constant, ConstantOfShape, Range: their values depend on shapes
//   or attributes only, never on the values of their operands.
// - Equal, GreaterOrEqual, And: boolean results, piecewise constant.
// - Mod: piecewise; only used on integer shape arithmetic in practice.
// - OneHot: its result depends on integer indices and constant values.
// - Cast to or from a non-float dtype; any integer or bool value.
// - Index-like operands: Gather/ScatterElements indices, the shape operand of
//   Reshape/Expand, the axes of ReduceSum/Squeeze/Unsqueeze, the starts,
//   ends, axes, steps of Slice, the split operand of Split, Where's
//   condition, Dropout's ratio and training_mode, the labels and class
//   weights of SoftmaxCrossEntropyLoss.
// An op with float results and no rule (ScatterElements) on a path from a
// weight to the loss is an error that names the node.
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
  declareOption("unused-weights",
                "warn, error or drop for weights that do not reach the loss",
                &unusedWeights_);
}

namespace {

/// True for ops whose results never carry a gradient (Note [Autodiff]).
bool isNonDifferentiable(OpKind op) {
  switch (op) {
  case OpKind::Shape:
  case OpKind::Constant:
  case OpKind::ConstantOfShape:
  case OpKind::Range:
  case OpKind::Equal:
  case OpKind::GreaterOrEqual:
  case OpKind::And:
  case OpKind::Mod:
  case OpKind::OneHot:
    return true;
  default:
    return false;
  }
}

/// True for ops that have a gradient rule.
bool hasRule(OpKind op) {
  switch (op) {
  case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
  case OpKind::Pow: case OpKind::Sqrt: case OpKind::Erf: case OpKind::Tanh:
  case OpKind::Relu: case OpKind::Sigmoid: case OpKind::Exp: case OpKind::Log:
  case OpKind::Neg: case OpKind::Where: case OpKind::Max: case OpKind::Cast:
  case OpKind::Identity: case OpKind::MatMul: case OpKind::Gemm:
  case OpKind::Softmax: case OpKind::LogSoftmax:
  case OpKind::LayerNormalization: case OpKind::Dropout:
  case OpKind::ReduceMean: case OpKind::ReduceSum: case OpKind::ReduceMax:
  case OpKind::Reshape: case OpKind::Transpose: case OpKind::Unsqueeze:
  case OpKind::Squeeze: case OpKind::Concat: case OpKind::Slice:
  case OpKind::Split: case OpKind::Expand: case OpKind::Gather:
  case OpKind::SoftmaxCrossEntropyLoss: case OpKind::Gelu:
    return true;
  default:
    return false;
  }
}

/// True if operand \p i of \p node (an op with a rule) carries a gradient.
bool isDifferentiableOperand(const Node &node, unsigned i) {
  switch (node.getOp()) {
  case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
  case OpKind::Pow: case OpKind::Max: case OpKind::Concat: case OpKind::Gemm:
  case OpKind::MatMul: case OpKind::LayerNormalization:
    return true;
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

private:
  // Building blocks.
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
  Value *accumulate(Value *value);
  void contribute(Value *operand, Value *grad);

  Error backprop(Node &node);
  Error backpropLoss(Node &node, Value *grad);

  bool wants(const Node &node, unsigned i) const {
    return reach_->contains(node.getOperand(i));
  }

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
  auto in = [&](unsigned i) { return node.getOperand(i); };
  auto typeOf = [&](unsigned i) -> const TensorType & {
    return node.getOperand(i)->getType();
  };
  Value *y = node.getResult(0);
  DType dt = y->getType().getDType();
  const AttrList &attrs = node.getAttrs();

  switch (node.getOp()) {
  case OpKind::Add:
  case OpKind::Sub:
    if (wants(node, 0))
      contribute(in(0), sumTo(g, typeOf(0)));
    if (wants(node, 1))
      contribute(in(1), sumTo(node.getOp() == OpKind::Add
                                  ? g
                                  : emit(OpKind::Neg, {g}),
                              typeOf(1)));
    break;
  case OpKind::Mul:
    if (wants(node, 0))
      contribute(in(0), sumTo(emit(OpKind::Mul, {g, in(1)}), typeOf(0)));
    if (wants(node, 1))
      contribute(in(1), sumTo(emit(OpKind::Mul, {g, in(0)}), typeOf(1)));
    break;
  case OpKind::Div: {
    Value *ga = emit(OpKind::Div, {g, in(1)});
    if (wants(node, 0))
      contribute(in(0), sumTo(ga, typeOf(0)));
    // d(a/b)/db = -(a/b)/b.
    if (wants(node, 1))
      contribute(in(1), sumTo(emit(OpKind::Neg, {emit(OpKind::Mul, {ga, y})}),
                              typeOf(1)));
    break;
  }
  case OpKind::Pow: {
    Value *b = castTo(in(1), dt);
    if (wants(node, 0)) {
      Value *pm1 = emit(OpKind::Pow, {in(0), emit(OpKind::Sub,
                                                  {b, scalar(dt, 1)})});
      contribute(in(0), sumTo(emit(OpKind::Mul, {emit(OpKind::Mul, {g, b}),
                                                 pm1}),
                              typeOf(0)));
    }
    if (wants(node, 1)) {
      Value *gb = emit(OpKind::Mul,
                       {emit(OpKind::Mul, {g, y}), emit(OpKind::Log, {in(0)})});
      contribute(in(1), sumTo(castTo(gb, typeOf(1).getDType()), typeOf(1)));
    }
    break;
  }
  case OpKind::Sqrt: // 0.5 / y
    contribute(in(0), emit(OpKind::Div,
                           {emit(OpKind::Mul, {g, scalar(dt, 0.5)}), y}));
    break;
  case OpKind::Erf: { // 2/sqrt(pi) * exp(-x^2)
    Value *x = in(0);
    Value *e = emit(OpKind::Exp,
                    {emit(OpKind::Neg, {emit(OpKind::Mul, {x, x})})});
    contribute(x, emit(OpKind::Mul,
                       {g, emit(OpKind::Mul,
                                {e, scalar(dt, 2 / std::sqrt(M_PI))})}));
    break;
  }
  case OpKind::Tanh: // 1 - y^2
    contribute(in(0),
               emit(OpKind::Mul, {g, emit(OpKind::Sub,
                                          {scalar(dt, 1),
                                           emit(OpKind::Mul, {y, y})})}));
    break;
  case OpKind::Relu: // x > 0, i.e. not (0 >= x)
    contribute(in(0), emit(OpKind::Where,
                           {emit(OpKind::GreaterOrEqual,
                                 {scalar(dt, 0), in(0)}),
                            scalar(dt, 0), g}));
    break;
  case OpKind::Sigmoid: // y (1 - y)
    contribute(in(0),
               emit(OpKind::Mul, {emit(OpKind::Mul, {g, y}),
                                  emit(OpKind::Sub, {scalar(dt, 1), y})}));
    break;
  case OpKind::Exp:
    contribute(in(0), emit(OpKind::Mul, {g, y}));
    break;
  case OpKind::Log:
    contribute(in(0), emit(OpKind::Div, {g, in(0)}));
    break;
  case OpKind::Neg:
    contribute(in(0), emit(OpKind::Neg, {g}));
    break;
  case OpKind::Identity:
    contribute(in(0), g);
    break;
  case OpKind::Cast:
    contribute(in(0), castTo(g, typeOf(0).getDType()));
    break;
  case OpKind::Where:
    if (wants(node, 1))
      contribute(in(1), sumTo(emit(OpKind::Where, {in(0), g, scalar(dt, 0)}),
                              typeOf(1)));
    if (wants(node, 2))
      contribute(in(2), sumTo(emit(OpKind::Where, {in(0), scalar(dt, 0), g}),
                              typeOf(2)));
    break;
  case OpKind::Max: {
    // The first operand equal to the maximum takes the gradient (ties go to
    // the earliest operand, so the parts sum to g).
    Value *taken = nullptr;
    for (unsigned i = 0; i < node.getNumOperands(); ++i) {
      Value *eq = emit(OpKind::Equal, {in(i), y});
      Value *pick =
          taken ? emit(OpKind::Where, {taken, boolean(false), eq}) : eq;
      if (wants(node, i))
        contribute(in(i), sumTo(emit(OpKind::Where, {pick, g, scalar(dt, 0)}),
                                typeOf(i)));
      if (i + 1 < node.getNumOperands())
        taken = taken ? emit(OpKind::Where, {eq, boolean(true), taken}) : eq;
    }
    break;
  }
  case OpKind::MatMul: {
    // Work on rank >= 2 views: a 1-D a is [1, k], a 1-D b is [k, 1].
    TensorType ta = typeOf(0), tb = typeOf(1);
    Value *a = in(0), *b = in(1);
    if (ta.getRank() == 1)
      a = reshape(a, {1, ta.getDim(0)});
    if (tb.getRank() == 1)
      b = reshape(b, {tb.getDim(0), 1});
    if (!a || !b)
      break;
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
    Value *g2 = reshape(g, gDims);
    auto swapLast = [&](Value *v) {
      unsigned rank = v->getType().getRank();
      std::vector<int64_t> perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[rank - 1], perm[rank - 2]);
      AttrList attrs;
      attrs.set("perm", perm);
      return emit(OpKind::Transpose, {v}, attrs);
    };
    if (wants(node, 0))
      contribute(in(0), reshape(sumTo(emit(OpKind::MatMul, {g2, swapLast(b)}),
                                      a->getType()),
                                ta.getDims()));
    if (wants(node, 1))
      contribute(in(1), reshape(sumTo(emit(OpKind::MatMul, {swapLast(a), g2}),
                                      b->getType()),
                                tb.getDims()));
    break;
  }
  case OpKind::Gemm: {
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
      return emit(OpKind::Gemm, {p, q}, a);
    };
    if (wants(node, 0))
      contribute(in(0), transA ? gemm(in(1), g, transB, true)
                               : gemm(g, in(1), false, !transB));
    if (wants(node, 1))
      contribute(in(1), transB ? gemm(g, in(0), true, transA)
                               : gemm(in(0), g, !transA, false));
    if (node.getNumOperands() > 2 && wants(node, 2)) {
      // beta is a float attribute: scale in the element type as Gemm does.
      Value *gc = beta == 1.0f
                      ? g
                      : emit(OpKind::Mul, {g, scalar(dt, double(beta))});
      contribute(in(2), sumTo(gc, typeOf(2)));
    }
    break;
  }
  case OpKind::Softmax:
  case OpKind::LogSoftmax: {
    int64_t axis = normAxis(intAttr(node, "axis", -1), y->getType().getRank());
    Value *axes = ints({axis});
    if (node.getOp() == OpKind::Softmax) {
      Value *s = emit(OpKind::ReduceSum, {emit(OpKind::Mul, {g, y}), axes});
      contribute(in(0), emit(OpKind::Mul, {y, emit(OpKind::Sub, {g, s})}));
    } else {
      Value *s = emit(OpKind::ReduceSum, {g, axes});
      contribute(in(0), emit(OpKind::Sub,
                             {g, emit(OpKind::Mul,
                                      {emit(OpKind::Exp, {y}), s})}));
    }
    break;
  }
  case OpKind::LayerNormalization: {
    // xhat = (x - Mean) * InvStdDev; dx = InvStdDev * (dxhat - mean(dxhat)
    // - xhat * mean(dxhat * xhat)) over the normalized dims.
    const TensorType &tx = typeOf(0);
    int64_t axis = normAxis(intAttr(node, "axis", -1), tx.getRank());
    std::vector<int64_t> axes;
    for (int64_t i = axis; i < tx.getRank(); ++i)
      axes.push_back(i);
    for (unsigned i = node.getNumResults(); i < 3; ++i) {
      const char *suffix = i == 1 ? "_mean" : "_inv_std_dev";
      Value *added = graph_.addResult(
          &node, graph_.uniqueName(y->getName().str() + suffix), y->getType());
      (void)added;
    }
    {
      auto inferred = inferTypes(node);
      if (!inferred)
        return inferred.takeError();
      for (unsigned i = 1; i < 3; ++i)
        node.getResult(i)->setType((*inferred)[i].type);
    }
    Value *mean = castTo(node.getResult(1), dt);
    Value *inv = castTo(node.getResult(2), dt);
    Value *xhat =
        emit(OpKind::Mul, {emit(OpKind::Sub, {in(0), mean}), inv});
    AttrList meanAttrs;
    meanAttrs.set("axes", axes);
    if (node.getNumOperands() > 2 && wants(node, 2))
      contribute(in(2), sumTo(g, typeOf(2)));
    if (wants(node, 1))
      contribute(in(1), sumTo(emit(OpKind::Mul, {g, xhat}), typeOf(1)));
    if (wants(node, 0)) {
      Value *dxhat = emit(OpKind::Mul, {g, in(1)});
      Value *m1 = emit(OpKind::ReduceMean, {dxhat}, meanAttrs);
      Value *m2 = emit(OpKind::ReduceMean,
                       {emit(OpKind::Mul, {dxhat, xhat})}, meanAttrs);
      Value *inner = emit(OpKind::Sub, {emit(OpKind::Sub, {dxhat, m1}),
                                        emit(OpKind::Mul, {xhat, m2})});
      contribute(in(0), emit(OpKind::Mul, {inner, inv}));
    }
    break;
  }
  case OpKind::Dropout: {
    // y = x * mask / (1 - ratio) in training mode, else x.
    const TensorData *training =
        node.getNumOperands() > 2 ? getConstantValue(in(2)) : nullptr;
    if (node.getNumOperands() < 3 ||
        (training && training->getInt(0) == 0)) {
      contribute(in(0), g);
      break;
    }
    if (node.getNumResults() < 2)
      graph_.addResult(&node, graph_.uniqueName(y->getName().str() + "_mask"),
                       TensorType(DType::Bool, y->getType().getDims()));
    Value *ratio = node.getNumOperands() > 1 ? castTo(in(1), dt)
                                             : scalar(dt, 0.5);
    Value *scale = emit(OpKind::Div, {scalar(dt, 1),
                                      emit(OpKind::Sub,
                                           {scalar(dt, 1), ratio})});
    Value *masked = emit(OpKind::Mul,
                         {emit(OpKind::Mul,
                               {g, castTo(node.getResult(1), dt)}),
                          scale});
    if (!training)
      masked = emit(OpKind::Where, {in(2), masked, g});
    contribute(in(0), masked);
    break;
  }
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
  case OpKind::ReduceMax: {
    const TensorType &tx = typeOf(0);
    std::vector<int64_t> axes;
    bool all = false;
    if (node.getOp() == OpKind::ReduceSum) {
      if (node.getNumOperands() > 1) {
        const TensorData *data = getConstantValue(in(1));
        if (!data)
          return makeError(node.describe() +
                           ": autodiff needs constant axes for ReduceSum");
        axes = data->getInts();
      }
      if (axes.empty()) {
        if (intAttr(node, "noop_with_empty_axes", 0)) {
          contribute(in(0), g);
          break;
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
    Value *gk = reshape(g, kd);
    if (node.getOp() == OpKind::ReduceMax) {
      Value *yk = reshape(y, kd);
      contribute(in(0), emit(OpKind::Where,
                             {emit(OpKind::Equal, {in(0), yk}), gk,
                              scalar(dt, 0)}));
      break;
    }
    Value *expanded = emit(OpKind::Expand, {gk, ints(tx.getDims())});
    if (node.getOp() == OpKind::ReduceMean) {
      int64_t count = 1;
      for (int64_t axis : axes)
        count *= tx.getDim(normAxis(axis, tx.getRank()));
      expanded = emit(OpKind::Div, {expanded, scalar(dt, double(count))});
    }
    contribute(in(0), expanded);
    break;
  }
  case OpKind::Reshape:
  case OpKind::Unsqueeze:
  case OpKind::Squeeze:
    contribute(in(0), reshape(g, typeOf(0).getDims()));
    break;
  case OpKind::Expand:
    contribute(in(0), sumTo(g, typeOf(0)));
    break;
  case OpKind::Transpose: {
    unsigned rank = typeOf(0).getRank();
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
    contribute(in(0), emit(OpKind::Transpose, {g}, a));
    break;
  }
  case OpKind::Concat: {
    unsigned rank = y->getType().getRank();
    int64_t axis = normAxis(intAttr(node, "axis", 0), rank);
    if (node.getNumOperands() == 1) {
      contribute(in(0), g);
      break;
    }
    std::vector<int64_t> sizes;
    for (unsigned i = 0; i < node.getNumOperands(); ++i)
      sizes.push_back(typeOf(i).getDim(axis));
    AttrList a;
    a.set("axis", axis);
    Node *split = emitNode(OpKind::Split, {g, ints(sizes)}, a,
                           node.getNumOperands());
    if (!split)
      break;
    for (unsigned i = 0; i < node.getNumOperands(); ++i)
      if (wants(node, i))
        contribute(in(i), split->getResult(i));
    break;
  }
  case OpKind::Split: {
    unsigned rank = y->getType().getRank();
    int64_t axis = normAxis(intAttr(node, "axis", 0), rank);
    llvm::SmallVector<Value *, 4> parts;
    bool any = false;
    for (unsigned i = 0; i < node.getNumResults(); ++i) {
      any |= grads[i] != nullptr;
      parts.push_back(grads[i] ? grads[i]
                               : zeros(node.getResult(i)->getType()));
    }
    if (!any)
      break;
    AttrList a;
    a.set("axis", axis);
    contribute(in(0), parts.size() == 1 ? parts[0]
                                        : emit(OpKind::Concat, parts, a));
    break;
  }
  case OpKind::Slice: {
    // Scatter g into zeros at the flat positions the same Slice takes from
    // an iota of the data's shape.
    const TensorType &tx = typeOf(0);
    int64_t n = tx.getNumElements();
    Value *iota = emit(OpKind::Range, {scalar(DType::I64, 0),
                                       scalar(DType::I64, double(n)),
                                       scalar(DType::I64, 1)});
    llvm::SmallVector<Value *, 5> operands{reshape(iota, tx.getDims())};
    for (unsigned i = 1; i < node.getNumOperands(); ++i)
      operands.push_back(in(i));
    Value *taken = emit(OpKind::Slice, operands);
    int64_t m = y->getType().getNumElements();
    AttrList a;
    a.set("axis", int64_t(0));
    a.set("reduction", std::string("add"));
    Value *flat = emit(OpKind::ScatterElements,
                       {zeros(TensorType(dt, {n})), reshape(taken, {m}),
                        reshape(g, {m})},
                       a);
    contribute(in(0), reshape(flat, tx.getDims()));
    break;
  }
  case OpKind::Gather: {
    // View data as [outer, A, inner] and the gradient as [outer, n, inner];
    // ScatterElements needs indices of the updates' shape, so the indices
    // are reshaped to [1, n, 1] and expanded.
    const TensorType &tx = typeOf(0);
    int64_t axis = normAxis(intAttr(node, "axis", 0), tx.getRank());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i)
      outer *= tx.getDim(i);
    for (int64_t i = axis + 1; i < tx.getRank(); ++i)
      inner *= tx.getDim(i);
    int64_t n = typeOf(1).getNumElements();
    Value *idx = emit(OpKind::Expand, {reshape(in(1), {1, n, 1}),
                                       ints({outer, n, inner})});
    AttrList a;
    a.set("axis", int64_t(1));
    a.set("reduction", std::string("add"));
    Value *scattered = emit(
        OpKind::ScatterElements,
        {zeros(TensorType(dt, {outer, tx.getDim(axis), inner})), idx,
         reshape(g, {outer, n, inner})},
        a);
    contribute(in(0), reshape(scattered, tx.getDims()));
    break;
  }
  case OpKind::SoftmaxCrossEntropyLoss:
    if (Error err = backpropLoss(node, g))
      return err;
    break;
  case OpKind::Gelu: {
    Value *x = in(0);
    std::string approx = attrs.getString("approximate").value_or("none");
    Value *half = scalar(dt, 0.5), *one = scalar(dt, 1);
    Value *d;
    if (approx == "tanh") {
      // u = c (x + k x^3), d = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3k x^2).
      double c = std::sqrt(2 / M_PI), k = 0.044715;
      Value *x2 = emit(OpKind::Mul, {x, x});
      Value *u = emit(OpKind::Mul,
                      {scalar(dt, c),
                       emit(OpKind::Add,
                            {x, emit(OpKind::Mul,
                                     {scalar(dt, k), emit(OpKind::Mul,
                                                          {x2, x})})})});
      Value *t = emit(OpKind::Tanh, {u});
      Value *du = emit(OpKind::Mul,
                       {scalar(dt, c),
                        emit(OpKind::Add,
                             {one, emit(OpKind::Mul,
                                        {scalar(dt, 3 * k), x2})})});
      Value *sech2 = emit(OpKind::Sub, {one, emit(OpKind::Mul, {t, t})});
      d = emit(OpKind::Add,
               {emit(OpKind::Mul, {half, emit(OpKind::Add, {one, t})}),
                emit(OpKind::Mul,
                     {emit(OpKind::Mul, {half, x}),
                      emit(OpKind::Mul, {sech2, du})})});
    } else {
      // d = Phi(x) + x phi(x).
      Value *cdf = emit(OpKind::Mul,
                        {half, emit(OpKind::Add,
                                    {one, emit(OpKind::Erf,
                                               {emit(OpKind::Mul,
                                                     {x, scalar(dt, M_SQRT1_2)})})})});
      Value *pdf = emit(
          OpKind::Mul,
          {scalar(dt, 1 / std::sqrt(2 * M_PI)),
           emit(OpKind::Exp,
                {emit(OpKind::Mul, {scalar(dt, -0.5),
                                    emit(OpKind::Mul, {x, x})})})});
      d = emit(OpKind::Add, {cdf, emit(OpKind::Mul, {x, pdf})});
    }
    contribute(x, emit(OpKind::Mul, {g, d}));
    break;
  }
  default:
    llvm_unreachable("op without a gradient rule reached backprop");
  }
  if (failure_)
    return makeError("autodiff failed to build the gradient of " +
                     node.describe() + ": " + *failure_);
  return Error::success();
}

/// SoftmaxCrossEntropyLoss w.r.t. scores [N, C, d...]:
///   dscores = g' * w_n * (softmax(scores) - onehot(label_n))
/// with w_n = 0 at ignore_index, else the class weight (or 1), and g' = g per
/// element (none), g (sum), or g / sum(w_n) (mean).
Error Differentiator::backpropLoss(Node &node, Value *g) {
  Value *scores = node.getOperand(0), *labels = node.getOperand(1);
  const TensorType &ts = scores->getType();
  DType dt = ts.getDType();
  DType lt = labels->getType().getDType();
  if (node.getNumResults() < 2)
    graph_.addResult(
        &node,
        graph_.uniqueName(node.getResult(0)->getName().str() + "_log_prob"),
        ts);
  Value *prob = emit(OpKind::Exp, {node.getResult(1)});
  std::optional<int64_t> ignore = node.getAttrs().getInt("ignore_index");
  std::string reduction =
      node.getAttrs().getString("reduction").value_or("mean");
  Value *safe = labels;
  Value *ignored = nullptr;
  if (ignore) {
    ignored = emit(OpKind::Equal, {labels, ints({*ignore}, lt)});
    safe = emit(OpKind::Where, {ignored, ints({0}, lt), labels});
  }
  // w_n, of the labels' shape.
  Value *w;
  if (node.getNumOperands() > 2)
    w = emit(OpKind::Gather, {node.getOperand(2), safe});
  else
    w = emit(OpKind::Expand, {scalar(dt, 1),
                              ints(labels->getType().getDims())});
  if (ignored)
    w = emit(OpKind::Where, {ignored, scalar(dt, 0), w});
  Value *scale = w;
  if (reduction == "mean")
    scale = emit(OpKind::Div, {w, emit(OpKind::ReduceSum, {w})});
  scale = emit(OpKind::Mul, {scale, g}); // g is [] or labels-shaped.
  // One-hot along axis 1: labels [N, 1, d...] == classes [1, C, 1...].
  std::vector<int64_t> classDims(ts.getRank(), 1);
  classDims[1] = ts.getDim(1);
  std::vector<int64_t> classes(ts.getDim(1));
  std::iota(classes.begin(), classes.end(), 0);
  Value *classValues = reshape(ints(classes, lt), classDims);
  Value *axis1 = ints({1});
  Value *onehot = castTo(emit(OpKind::Equal,
                              {emit(OpKind::Unsqueeze, {safe, axis1}),
                               classValues}),
                         dt);
  Value *diff = emit(OpKind::Sub, {prob, onehot});
  contribute(scores,
             emit(OpKind::Mul, {diff, emit(OpKind::Unsqueeze, {scale, axis1})}));
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
  if (unusedWeights_ != "warn" && unusedWeights_ != "error" &&
      unusedWeights_ != "drop")
    return makeError("autodiff option 'unused-weights' is '" + unusedWeights_ +
                     "', expected warn, error or drop");
  for (Value *output : graph.getOutputs())
    if (ir::isGradientName(output->getName()))
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
    if (isNonDifferentiable(node.getOp()))
      continue;
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
