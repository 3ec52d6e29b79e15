//===- passes/autodiff/DataMovement.cpp - Data movement gradient rules ----===//
//
// Identity, Reshape, (Un)Squeeze, Expand, Transpose, Concat, Split, Slice
// and Gather.
//
// Note [Autodiff] (passes/Autodiff.cpp) says what each rule differentiates.
//
//===----------------------------------------------------------------------===//
#include "passes/autodiff/GradRules.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <numeric>

namespace remat::passes::autodiff {

template <>
Error grad<OpKind::Identity>(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  d.contribute(args.in(0), g);
  return Error::success();
}

namespace {

/// The rule of Reshape, Unsqueeze and Squeeze.
Error gradReshape(Differentiator &d, const GradArgs &args) {
  Value *g = args.g;
  d.contribute(args.in(0), d.reshape(g, args.typeOf(0).getDims()));
  return Error::success();
}

} // namespace

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
  Value *updates = d.reshape(g, {outer, n, inner});
  // An embedding's padding row (autodiff's padding-idx option): the lookups
  // of that row add nothing, as in torch's nn.Embedding(padding_idx). Where
  // passes every other update through unchanged, so their sums keep their
  // bits.
  if (auto row = d.getPaddingRow(node.getOperand(0)); row && axis == 0) {
    DType it = args.typeOf(1).getDType();
    Value *isPad = d.emit(OpKind::Equal, {args.in(1), d.ints({*row}, it)});
    updates = d.emit(OpKind::Where, {d.reshape(isPad, {outer, n, 1}),
                                     d.scalar(dt, 0), updates});
  }
  AttrList a;
  a.set("axis", int64_t(1));
  a.set("reduction", std::string("add"));
  Value *scattered =
      d.emit(OpKind::ScatterElements,
             {d.zeros(TensorType(dt, {outer, tx.getDim(axis), inner})), idx,
              updates},
             a);
  d.contribute(args.in(0), d.reshape(scattered, tx.getDims()));
  return Error::success();
}

} // namespace remat::passes::autodiff
