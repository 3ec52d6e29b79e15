//===- passes/autodiff/Indexing.cpp - Indexing gradient rules -------------===//
//
// Trilu, CumSum, GatherElements, ScatterElements, Pad, Tile and TopK.
//
// Note [Autodiff] (passes/Autodiff.cpp) says what each rule differentiates.
//
//===----------------------------------------------------------------------===//
#include "passes/autodiff/GradRules.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <numeric>

namespace remat::passes::autodiff {

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

/// Reduction "none": the data's gradient is the gradient with the written
/// positions zeroed (the same scatter of zeros into it), the updates' the
/// gradient gathered at their positions. ONNX leaves duplicate indices
/// undefined under "none" (which update lands is up to the kernel; the CUDA
/// one does not say), so constant indices with a duplicate are an error;
/// run-time ones cannot be checked, and every duplicate gets the gradient
/// of its position, as torch's scatter does. Reduction "add": the data's
/// gradient is the gradient itself, the updates' the same gather. "mul"
/// (and "max"/"min") are refused.
template <>
Error grad<OpKind::ScatterElements>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  std::string reduction =
      node.getAttrs().getString("reduction").value_or("none");
  if (reduction != "none" && reduction != "add")
    return makeError(node.describe() +
                     ": autodiff supports reduction "
                     "\"none\" and \"add\", not \"" +
                     reduction + "\"");
  const TensorType &tx = args.typeOf(0);
  int64_t axis = normAxis(intAttr(node, "axis", 0), tx.getRank());
  if (reduction == "none") {
    if (const TensorData *indices = getConstantValue(node.getOperand(1))) {
      // Each update's target as a flat offset into the data.
      const TensorType &ti = indices->getType();
      std::vector<int64_t> raw = indices->getInts();
      llvm::DenseSet<int64_t> targets;
      for (int64_t p = 0; p < int64_t(raw.size()); ++p) {
        int64_t offset = 0, linear = p, stride = 1;
        for (int64_t dim = ti.getRank() - 1; dim >= 0; --dim) {
          int64_t coord = linear % ti.getDim(dim);
          linear /= ti.getDim(dim);
          if (dim == axis)
            coord = raw[p] < 0 ? raw[p] + tx.getDim(dim) : raw[p];
          offset += coord * stride;
          stride *= tx.getDim(dim);
        }
        if (!targets.insert(offset).second)
          return makeError(
              node.describe() +
              ": duplicate indices under reduction \"none\" (ONNX leaves "
              "which update lands undefined), so the gradient is undefined");
      }
    }
    if (d.wants(node, 0)) {
      AttrList attrs;
      attrs.set("axis", axis);
      d.contribute(args.in(0),
                   d.emit(OpKind::ScatterElements,
                          {args.g, args.in(1), d.zeros(args.typeOf(2))},
                          attrs));
    }
  } else if (d.wants(node, 0)) {
    d.contribute(args.in(0), args.g);
  }
  if (d.wants(node, 2)) {
    AttrList attrs;
    attrs.set("axis", axis);
    d.contribute(args.in(2),
                 d.emit(OpKind::GatherElements, {args.g, args.in(1)}, attrs));
  }
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

/// The sum over the repeats: the gradient viewed as [r0, d0, r1, d1, ...]
/// (a dim repeated once keeps just d) summed over the r axes. Empty data
/// or an empty result gets a zero gradient.
template <> Error grad<OpKind::Tile>(Differentiator &d, const GradArgs &args) {
  const TensorType &tx = args.typeOf(0);
  llvm::ArrayRef<int64_t> outDims = args.y->getType().getDims();
  if (tx.getNumElements() == 0 || args.y->getType().getNumElements() == 0) {
    d.contribute(args.in(0), d.zeros(tx));
    return Error::success();
  }
  llvm::SmallVector<int64_t, 8> viewDims;
  std::vector<int64_t> axes;
  for (unsigned i = 0; i < tx.getRank(); ++i) {
    int64_t times = outDims[i] / tx.getDim(i);
    if (times > 1) {
      axes.push_back(int64_t(viewDims.size()));
      viewDims.push_back(times);
    }
    viewDims.push_back(tx.getDim(i));
  }
  if (axes.empty()) {
    d.contribute(args.in(0), args.g);
    return Error::success();
  }
  AttrList keep;
  keep.set("keepdims", int64_t(0));
  d.contribute(args.in(0),
               d.emit(OpKind::ReduceSum,
                      {d.reshape(args.g, viewDims), d.ints(axes)}, keep));
  return Error::success();
}

/// The values' gradient written into zeros at the indices TopK chose: each
/// line's indices are distinct, so a plain scatter. K = 0 gets zeros. The
/// indices result carries no gradient.
template <> Error grad<OpKind::TopK>(Differentiator &d, const GradArgs &args) {
  const TensorType &tx = args.typeOf(0);
  if (args.y->getType().getNumElements() == 0) {
    d.contribute(args.in(0), d.zeros(tx));
    return Error::success();
  }
  int64_t rank = tx.getRank();
  int64_t axis = intAttr(args.node, "axis", -1);
  AttrList attrs;
  attrs.set("axis", axis < 0 ? axis + rank : axis);
  d.contribute(args.in(0),
               d.emit(OpKind::ScatterElements,
                      {d.zeros(tx), args.node.getResult(1), args.g}, attrs));
  return Error::success();
}

} // namespace remat::passes::autodiff
