//===- passes/autodiff/Linalg.cpp - Linear algebra gradient rules ---------===//
//
// MatMul, Gemm and Conv; MaxPool and AveragePool (issue 40).
//
// Note [Autodiff] (passes/Autodiff.cpp) says what each rule differentiates.
//
//===----------------------------------------------------------------------===//
#include "passes/autodiff/GradRules.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace remat::passes::autodiff {

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
  if (d.wants(node, 1)) {
    llvm::ArrayRef<int64_t> ad = a->getType().getDims();
    if (b->getType().getRank() == 2 && ad.size() > 2) {
      // A 2-D b shared by every batch entry of a (a Linear on [batch, seq,
      // features]): its gradient sums a[i]^T g[i] over the batch, which is
      // one product over the rows of every entry, [k, rows] x [rows, n].
      // Summing batched products instead would hold a [batch, k, n]
      // temporary: the weight's size times the batch.
      int64_t rows = 1;
      for (int64_t dim : ad.drop_back())
        rows *= dim;
      Value *a2 = d.reshape(a, {rows, ad.back()});
      Value *flat = d.reshape(g2, {rows, gDims.back()});
      d.contribute(args.in(1),
                   d.reshape(d.emit(OpKind::MatMul, {swapLast(a2), flat}),
                             tb.getDims()));
    } else {
      d.contribute(args.in(1),
                   d.reshape(d.sumTo(d.emit(OpKind::MatMul, {swapLast(a), g2}),
                                     b->getType()),
                             tb.getDims()));
    }
  }
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

/// X: ConvTranspose of the gradient by W, with output_padding making up the
/// input positions no window reached. W: a Conv of X by the gradient with
/// batch and channels swapped, strides and dilations swapped, cut to the
/// kernel; for group > 1 (depthwise included) a grouped Conv of the same
/// kind, each group's channels by its part of the gradient. B: the
/// gradient summed over all but the channels.
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
    int64_t group = geometry->group;
    std::vector<int64_t> swap(tx.getRank());
    std::iota(swap.begin(), swap.end(), 0);
    std::swap(swap[0], swap[1]);
    AttrList perm;
    perm.set("perm", swap);
    AttrList attrs;
    attrs.set("strides", dilations);
    attrs.set("dilations", strides);
    attrs.set("pads", pads);
    Value *xt, *gt;
    if (group == 1) {
      xt = d.emit(OpKind::Transpose, {args.in(0)}, perm);
      gt = d.emit(OpKind::Transpose, {args.g}, perm);
    } else {
      // Per group, the same Conv of the group's channels of X by its part
      // of the gradient, all at once as a grouped Conv: X [N, G*Cg, d...]
      // becomes [Cg, G*N, d...] (batch Cg, group-major channels) and the
      // gradient [N, G*Mg, o...] the weights [G*Mg, N, o...], so output
      // channel m of group m / Mg sums over that group's N channels.
      int64_t n = tx.getDim(0), cg = tx.getDim(1) / group;
      const TensorType &ty = args.y->getType();
      int64_t mg = ty.getDim(1) / group;
      auto dimsOf = [&](llvm::ArrayRef<int64_t> head, const TensorType &type) {
        std::vector<int64_t> dims(head.begin(), head.end());
        dims.insert(dims.end(), type.getDims().begin() + 2,
                    type.getDims().end());
        return dims;
      };
      std::vector<int64_t> order(tx.getRank() + 1);
      std::iota(order.begin(), order.end(), 0);
      AttrList xPerm, gPerm;
      std::swap(order[0], order[2]); // [N, G, Cg, ...] -> [Cg, G, N, ...]
      xPerm.set("perm", order);
      std::iota(order.begin(), order.end(), 0);
      std::rotate(order.begin(), order.begin() + 1, order.begin() + 3);
      gPerm.set("perm", order); // [N, G, Mg, ...] -> [G, Mg, N, ...]
      xt = d.reshape(d.emit(OpKind::Transpose,
                            {d.reshape(args.in(0), dimsOf({n, group, cg}, tx))},
                            xPerm),
                     dimsOf({cg, group * n}, tx));
      gt = d.reshape(d.emit(OpKind::Transpose,
                            {d.reshape(args.g, dimsOf({n, group, mg}, ty))},
                            gPerm),
                     dimsOf({group * mg, n}, ty));
      attrs.set("group", group);
    }
    Value *full = d.emit(OpKind::Conv, {xt, gt}, attrs); // [C/G, M, >= k...]
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

/// dX = remat.MaxPoolGrad(g, X): each window's gradient goes to the position
/// of its maximum (the first of equals, as torch), recomputed from X rather
/// than kept as indices.
template <>
Error grad<OpKind::MaxPool>(Differentiator &d, const GradArgs &args) {
  d.contribute(args.in(0), d.emit(OpKind::MaxPoolGrad, {args.g, args.in(0)},
                                  args.node.getAttrs()));
  return Error::success();
}

/// dX = remat.AveragePoolGrad(g, shape of X): each window's gradient over its
/// count goes to each of its positions inside X; X itself is not needed.
template <>
Error grad<OpKind::AveragePool>(Differentiator &d, const GradArgs &args) {
  d.contribute(args.in(0), d.emit(OpKind::AveragePoolGrad,
                                  {args.g, d.ints(args.typeOf(0).getDims())},
                                  args.node.getAttrs()));
  return Error::success();
}

} // namespace remat::passes::autodiff
