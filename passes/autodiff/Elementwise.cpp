//===- passes/autodiff/Elementwise.cpp - Elementwise gradient rules -------===//
//
// Arithmetic, unary ops, Cast, Where, Max/Min, Gelu, Dropout, Clip and
// Softplus, Acos.
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

} // namespace

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

/// dy/dx = sigmoid(x), as torch's softplus_backward below its threshold
/// (above, torch passes the gradient through; sigmoid(x) rounds to 1 there).
template <>
Error grad<OpKind::Softplus>(Differentiator &d, const GradArgs &args) {
  d.contribute(args.in(0), d.emit(OpKind::Mul, {args.g, d.emit(OpKind::Sigmoid,
                                                               {args.in(0)})}));
  return Error::success();
}

/// The gradient passes where min <= x <= max (the bounds present), zero
/// elsewhere and at NaN, as torch's clamp; the bounds get none.
template <> Error grad<OpKind::Clip>(Differentiator &d, const GradArgs &args) {
  Node &node = args.node;
  Value *x = args.in(0);
  Value *inside = nullptr;
  if (node.getNumOperands() > 1)
    inside = d.emit(OpKind::GreaterOrEqual, {x, d.reshape(args.in(1), {})});
  if (node.getNumOperands() > 2) {
    Value *below = d.emit(OpKind::LessOrEqual, {x, d.reshape(args.in(2), {})});
    inside = inside ? d.emit(OpKind::And, {inside, below}) : below;
  }
  d.contribute(
      x, inside ? d.emit(OpKind::Where, {inside, args.g, d.scalar(args.dt, 0)})
                : args.g);
  return Error::success();
}

/// dy/dx = -1 / sqrt(1 - x^2), as torch's acos backward (infinite at +-1).
template <> Error grad<OpKind::Acos>(Differentiator &d, const GradArgs &args) {
  Value *x = args.in(0);
  Value *root = d.emit(OpKind::Sqrt,
                       {d.emit(OpKind::Sub, {d.scalar(args.dt, 1),
                                             d.emit(OpKind::Mul, {x, x})})});
  d.contribute(x, d.emit(OpKind::Neg, {d.emit(OpKind::Div, {args.g, root})}));
  return Error::success();
}

} // namespace remat::passes::autodiff
