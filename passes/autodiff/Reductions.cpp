//===- passes/autodiff/Reductions.cpp - Reduction gradient rules ----------===//
//
// ReduceMean, ReduceSum and ReduceMax; ReduceL2 and ReduceLogSumExp
// (issue 40).
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

/// The rule of ReduceMean, ReduceSum, ReduceMax, ReduceL2 and
/// ReduceLogSumExp. As torch: ReduceL2's is x * (dy / norm), zero where the
/// norm is 0; ReduceLogSumExp's dy * exp(x - result), softmax(x) * dy.
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
  if (node.getOp() == OpKind::ReduceL2) {
    Value *yk = d.reshape(y, kd);
    Value *scale =
        d.emit(OpKind::Where, {d.emit(OpKind::Equal, {yk, d.scalar(dt, 0)}),
                               d.scalar(dt, 0), d.emit(OpKind::Div, {gk, yk})});
    d.contribute(args.in(0), d.emit(OpKind::Mul, {args.in(0), scale}));
    return Error::success();
  }
  if (node.getOp() == OpKind::ReduceLogSumExp) {
    Value *yk = d.reshape(y, kd);
    d.contribute(args.in(0),
                 d.emit(OpKind::Mul,
                        {gk, d.emit(OpKind::Exp,
                                    {d.emit(OpKind::Sub, {args.in(0), yk})})}));
    return Error::success();
  }
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

} // namespace

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

template <>
Error grad<OpKind::ReduceL2>(Differentiator &d, const GradArgs &args) {
  return gradReduce(d, args);
}

template <>
Error grad<OpKind::ReduceLogSumExp>(Differentiator &d, const GradArgs &args) {
  return gradReduce(d, args);
}

} // namespace remat::passes::autodiff
