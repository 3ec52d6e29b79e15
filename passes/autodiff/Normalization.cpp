//===- passes/autodiff/Normalization.cpp - Normalization gradient rules ---===//
//
// Softmax, LogSoftmax, LayerNormalization and SoftmaxCrossEntropyLoss.
//
// Note [Autodiff] (passes/Autodiff.cpp) says what each rule differentiates.
//
//===----------------------------------------------------------------------===//
#include "passes/autodiff/GradRules.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <numeric>

namespace remat::passes::autodiff {

namespace {

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

} // namespace

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

} // namespace remat::passes::autodiff
