//===- runtime/cpu/Elementwise.cpp - Elementwise CPU kernels --------------===//
//
// Unary and binary arithmetic, comparisons, Where, Max, Mod, Pow, Cast, Gelu,
// Dropout and remat.DropoutGrad. Every op is a small functor inlined into a
// loop that is specialized on the element types and on the broadcast pattern of
// the innermost dim (contiguous or scalar), so the loops vectorize. Ops whose
// f32 math the compiler cannot vectorize (Exp, Erf, Gelu, GeluGrad, Dropout's
// stream) have array forms in runtime/cpu/VectorMath.h with the scalar
// functor's bits, used on contiguous runs. Elements are independent, so the
// work is split across threads freely.
//
// Constant folding computes with these kernels (runtime/cpu/Evaluator.h), so
// a folded constant is what the runtime computes, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/MathF32.h"
#include "runtime/cpu/KernelImpl.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/cuda/KernelBodies.h"

#include "llvm/ADT/Twine.h"

#include <cmath>
#include <limits>
#include <optional>

namespace remat::runtime::cpu::detail {

namespace {

/// Whether Op has an f32 array form with apply's bits (runtime/cpu/
/// VectorMath.h): the kernels call it on contiguous runs.
template <typename Op>
concept HasF32ArrayForm = requires(const float *in, float *out) {
  Op::applyArray(in, out, int64_t(0));
};
template <typename Op>
concept HasF32BinaryArrayForm = requires(const float *in, float *out) {
  Op::applyArray(in, in, out, int64_t(0));
};

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

struct SqrtOp {
  template <typename T> static T apply(T x) { return std::sqrt(x); }
};
/// remat's erf (runtime/MathF32.h), eight lanes at a time in f32.
struct ErfOp {
  template <typename T> static T apply(T x) { return erfOf(x); }
  static void applyArray(const float *in, float *out, int64_t n) {
    erfF32Array(in, out, n);
  }
};
struct TanhOp {
  template <typename T> static T apply(T x) { return std::tanh(x); }
};
/// remat's exp (runtime/MathF32.h): in f32 the same bits on every backend,
/// eight lanes at a time over a contiguous array (applyArray).
struct ExpOp {
  template <typename T> static T apply(T x) { return expOf(x); }
  static void applyArray(const float *in, float *out, int64_t n) {
    expF32Array(in, out, n);
  }
};
struct LogOp {
  template <typename T> static T apply(T x) { return std::log(x); }
};
struct SigmoidOp {
  template <typename T> static T apply(T x) {
    return T(1) / (T(1) + expOf(-x));
  }
};
/// NaN compares false and passes through.
struct ReluOp {
  template <typename T> static T apply(T x) { return x < T(0) ? T(0) : x; }
};
struct NegOp {
  template <typename T> static T apply(T x) {
    if constexpr (std::is_integral_v<T>)
      return wrapSub(T(0), x);
    else
      return -x;
  }
};
/// GELU (ONNX opset 20), approximate = "none".
struct GeluErfOp {
  template <typename T> static T apply(T x) {
    const T sqrtHalf = T(0.70710678118654752440); // 1 / sqrt(2)
    return T(0.5) * x * (T(1) + erfOf(x * sqrtHalf));
  }
  static void applyArray(const float *in, float *out, int64_t n) {
    geluErfF32Array(in, out, n);
  }
};
/// GELU, approximate = "tanh".
struct GeluTanhOp {
  template <typename T> static T apply(T x) {
    const T sqrtTwoOverPi = T(0.79788456080286535588); // sqrt(2 / pi)
    const T cubic = T(0.044715);
    return T(0.5) * x *
           (T(1) + std::tanh(sqrtTwoOverPi * (x + cubic * x * x * x)));
  }
};

template <typename Op, typename T> Kernel makeUnaryKernel() {
  return [](const KernelContext &ctx) -> Error {
    const T *in = ctx.inputs[0].getData<T>();
    T *out = ctx.outputs[0].getData<T>();
    ctx.parallel.run(ctx.outputs[0].getNumElements(), kElementwiseGrain,
                     [&](int64_t begin, int64_t end) {
                       if constexpr (std::is_same_v<T, float> &&
                                     HasF32ArrayForm<Op>) {
                         Op::applyArray(in + begin, out + begin, end - begin);
                       } else {
                         for (int64_t i = begin; i < end; ++i)
                           out[i] = Op::apply(in[i]);
                       }
                     });
    return Error::success();
  };
}

template <typename Op> Kernel unaryForDType(DType dtype) {
  return dispatchNumeric(dtype, [](auto tag) -> Kernel {
    using T = decltype(tag);
    return makeUnaryKernel<Op, T>();
  });
}

bool isSignedInteger(DType dtype) {
  return dtype == DType::I64 || dtype == DType::I32 || dtype == DType::I8;
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

struct AddOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return wrapAdd(a, b);
    else
      return a + b;
  }
};
/// remat.GeluGrad(dy, x): dy * Gelu'(x) in one pass. The math is the CUDA
/// backend's body (plain C++, runtime/cuda/KernelBodies.h), so the two
/// backends cannot drift apart.
struct GeluGradErfOp {
  template <typename T> static T apply(T dy, T x) {
    return cuda::body::geluGradErf(dy, x);
  }
  static void applyArray(const float *dy, const float *x, float *out,
                         int64_t n) {
    geluGradErfF32Array(dy, x, out, n);
  }
};
struct GeluGradTanhOp {
  template <typename T> static T apply(T dy, T x) {
    return cuda::body::geluGradTanh(dy, x);
  }
};
struct SubOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return wrapSub(a, b);
    else
      return a - b;
  }
};
struct MulOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return wrapMul(a, b);
    else
      return a * b;
  }
};
/// Integer division truncates; the kernel has checked that no divisor is 0.
/// The most negative value divided by -1 wraps.
struct DivOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1))
          return wrapSub(T(0), a);
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
/// Pow with a float base; the exponent converts to the base's type.
struct PowOp {
  template <typename T, typename E> static T apply(T a, E b) {
    return std::pow(a, static_cast<T>(b));
  }
};
/// Mod with fmod = 1: C's fmod for floats, the truncated remainder (sign of
/// the dividend) for integers.
struct FmodOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1))
          return T(0); // INT_MIN % -1 overflows; the remainder is 0.
      return static_cast<T>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};
/// Mod with fmod = 0 (integers only): the remainder with the sign of the
/// divisor, as Python's %.
struct IntModOp {
  template <typename T> static T apply(T a, T b) {
    T r = FmodOp::apply(a, b);
    if constexpr (std::is_signed_v<T>)
      if (r != 0 && ((r < 0) != (b < 0)))
        r = static_cast<T>(r + b);
    return r;
  }
};
struct EqualOp {
  template <typename T> static BoolByte apply(T a, T b) { return a == b; }
};
/// Bool equality compares truth values, not bytes.
struct BoolEqualOp {
  static BoolByte apply(BoolByte a, BoolByte b) { return (a != 0) == (b != 0); }
};
/// NaN compares false, as IEEE has it.
struct GreaterOrEqualOp {
  template <typename T> static BoolByte apply(T a, T b) { return a >= b; }
};
struct AndOp {
  static BoolByte apply(BoolByte a, BoolByte b) { return a != 0 && b != 0; }
};
/// Max (numpy's maximum) or, with \p IsMin, Min (numpy's minimum): NaN
/// propagates (the first NaN operand), otherwise the larger (smaller)
/// operand, \p a on a tie.
template <bool IsMin> struct ExtremumOp {
  template <typename T> static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b))
        return std::isnan(a) ? a : b;
    }
    if constexpr (IsMin)
      return b < a ? b : a;
    else
      return a < b ? b : a;
  }
};
using MaxOp = ExtremumOp<false>;
using MinOp = ExtremumOp<true>;

/// out[i] = Op(a[i * sa], b[i * sb]) for i < n, with the contiguous and
/// scalar cases written out so that they vectorize.
template <typename Op, typename R, typename A, typename B>
inline void binaryRun(R *out, const A *a, int64_t sa, const B *b, int64_t sb,
                      int64_t n) {
  if (sa == 1 && sb == 1) {
    if constexpr (std::is_same_v<R, float> && std::is_same_v<A, float> &&
                  std::is_same_v<B, float> && HasF32BinaryArrayForm<Op>)
      Op::applyArray(a, b, out, n);
    else
      for (int64_t i = 0; i < n; ++i)
        out[i] = Op::apply(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const B y = *b;
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::apply(a[i], y);
  } else if (sa == 0 && sb == 1) {
    const A x = *a;
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::apply(x, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::apply(a[i * sa], b[i * sb]);
  }
}

/// The same when \p out may be \p a (Max folds its operands in place).
template <typename Op, typename T>
inline void binaryRunInPlace(T *out, const T *b, int64_t sb, int64_t n) {
  if (sb == 1) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::apply(out[i], b[i]);
  } else {
    const T y = *b;
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::apply(out[i], y);
  }
}

/// Runs Op over the broadcast of inputs[ia] and inputs[ib] into outputs[0].
template <typename Op, typename R, typename A, typename B>
void runBinary(const BroadcastPlan<2> &plan, const Tensor &aTensor,
               const Tensor &bTensor, const Tensor &outTensor,
               ParallelFor &parallel) {
  const A *a = aTensor.getData<A>();
  const B *b = bTensor.getData<B>();
  R *out = outTensor.getData<R>();
  parallel.run(
      plan.numElements, kElementwiseGrain, [&](int64_t begin, int64_t end) {
        forEachRun(plan, begin, end,
                   [&](int64_t o, const std::array<int64_t, 2> &off,
                       const std::array<int64_t, 2> &stride, int64_t n) {
                     binaryRun<Op>(out + o, a + off[0], stride[0], b + off[1],
                                   stride[1], n);
                   });
      });
}

template <typename Op, typename R, typename A, typename B>
Kernel makeBinaryKernel(BroadcastPlan<2> plan) {
  return [plan = std::move(plan)](const KernelContext &ctx) -> Error {
    runBinary<Op, R, A, B>(plan, ctx.inputs[0], ctx.inputs[1], ctx.outputs[0],
                           ctx.parallel);
    return Error::success();
  };
}

/// Integer Div and Mod: refuses a zero divisor before computing.
template <typename Op, typename T>
Kernel makeIntDivisionKernel(BroadcastPlan<2> plan) {
  return [plan = std::move(plan)](const KernelContext &ctx) -> Error {
    const T *b = ctx.inputs[1].getData<T>();
    int64_t count = ctx.inputs[1].getNumElements();
    if (plan.numElements > 0)
      for (int64_t i = 0; i < count; ++i)
        if (b[i] == T(0))
          return nodeError(ctx.node, "integer division by zero (element " +
                                         Twine(i) + " of operand 1 is 0)");
    runBinary<Op, T, T, T>(plan, ctx.inputs[0], ctx.inputs[1], ctx.outputs[0],
                           ctx.parallel);
    return Error::success();
  };
}

/// \returns 1 / d when \p d is a power of two whose reciprocal is a normal
/// float too, else nullopt. Then x / d and x * (1 / d) are the same real
/// number, and IEEE rounds both correctly: the same bits for every x,
/// subnormal, infinite and NaN results included.
template <typename T> std::optional<T> exactReciprocal(T d) {
  if (!std::isnormal(d))
    return std::nullopt;
  int exponent;
  T mantissa = std::frexp(d, &exponent);
  if (std::fabs(mantissa) != T(0.5))
    return std::nullopt;
  T reciprocal = T(1) / d;
  if (!std::isnormal(reciprocal))
    return std::nullopt;
  return reciprocal;
}

/// Float Div. A scalar divisor that is a power of two (attention's 1 /
/// sqrt(64), say) multiplies by its reciprocal instead: the same bits
/// (exactReciprocal), and a multiply costs a fraction of a divide.
template <typename T> Kernel makeFloatDivisionKernel(BroadcastPlan<2> plan) {
  return [plan = std::move(plan)](const KernelContext &ctx) -> Error {
    std::optional<T> reciprocal;
    if (ctx.inputs[1].getNumElements() == 1)
      reciprocal = exactReciprocal(ctx.inputs[1].getData<T>()[0]);
    if (!reciprocal) {
      runBinary<DivOp, T, T, T>(plan, ctx.inputs[0], ctx.inputs[1],
                                ctx.outputs[0], ctx.parallel);
      return Error::success();
    }
    const T *a = ctx.inputs[0].getData<T>();
    const T scale = *reciprocal;
    T *out = ctx.outputs[0].getData<T>();
    ctx.parallel.run(
        plan.numElements, kElementwiseGrain, [&](int64_t begin, int64_t end) {
          forEachRun(plan, begin, end,
                     [&](int64_t o, const std::array<int64_t, 2> &off,
                         const std::array<int64_t, 2> &stride, int64_t n) {
                       binaryRun<MulOp>(out + o, a + off[0], stride[0], &scale,
                                        0, n);
                     });
        });
    return Error::success();
  };
}

/// \returns base^exponent for integers, wrapping on overflow; \p exponent
/// is >= 0.
int64_t intPow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1)
      result = wrapMul(result, base);
    base = wrapMul(base, base);
    exponent >>= 1;
  }
  return result;
}

/// Pow with an integer base: exact with an integer exponent (a negative
/// exponent gives the truncated reciprocal), through double with a float
/// exponent. Serial, since it may fail.
template <typename T, typename E>
Kernel makeIntPowKernel(BroadcastPlan<2> plan) {
  return [plan = std::move(plan)](const KernelContext &ctx) -> Error {
    const T *a = ctx.inputs[0].getData<T>();
    const E *b = ctx.inputs[1].getData<E>();
    T *out = ctx.outputs[0].getData<T>();
    Error err = Error::success();
    bool failed = false;
    forEachRun(
        plan, 0, plan.numElements,
        [&](int64_t o, const std::array<int64_t, 2> &off,
            const std::array<int64_t, 2> &stride, int64_t n) {
          for (int64_t i = 0; i < n && !failed; ++i) {
            int64_t x = a[off[0] + i * stride[0]];
            E y = b[off[1] + i * stride[1]];
            int64_t value;
            if constexpr (std::is_integral_v<E>) {
              int64_t e = y;
              if (e >= 0) {
                value = intPow(x, e);
              } else if (x == 0) {
                failed = true;
                err = nodeError(ctx.node, "0 raised to a negative power");
                return;
              } else if (x == 1 || x == -1) {
                value = (e % 2 != 0) ? x : 1;
              } else {
                value = 0;
              }
            } else {
              double result = std::trunc(
                  std::pow(static_cast<double>(x), static_cast<double>(y)));
              if (!(result >=
                        static_cast<double>(std::numeric_limits<T>::min()) &&
                    result <
                        static_cast<double>(std::numeric_limits<T>::max()) +
                            1.0)) {
                failed = true;
                char buffer[32];
                std::snprintf(buffer, sizeof(buffer), "%g", result);
                err = nodeError(
                    ctx.node, "Pow result " + Twine(buffer) + " does not fit " +
                                  ir::dtypeName(ctx.outputs[0].getDType()));
                return;
              }
              value = static_cast<int64_t>(result);
            }
            out[o + i] = static_cast<T>(value);
          }
        });
    return err;
  };
}

Expected<Kernel> selectPow(const ir::Node &node, BroadcastPlan<2> plan) {
  DType base = node.getOperand(0)->getType().getDType();
  DType exponent = node.getOperand(1)->getType().getDType();
  if (!isComputeNumeric(base) || base == DType::I8 || base == DType::U8)
    return unsupportedDType(node, "base", base, "f32, f64, i32, i64");
  if (!isComputeNumeric(exponent))
    return unsupportedDType(node, "exponent", exponent,
                            "f32, f64, i64, i32, i8, u8");
  return dispatchNumeric(base, [&](auto baseTag) -> Kernel {
    using T = decltype(baseTag);
    return dispatchNumeric(exponent, [&](auto exponentTag) -> Kernel {
      using E = decltype(exponentTag);
      if constexpr (std::is_floating_point_v<T>)
        return makeBinaryKernel<PowOp, T, T, E>(std::move(plan));
      else
        return makeIntPowKernel<T, E>(std::move(plan));
    });
  });
}

} // namespace

Expected<Kernel> selectUnary(const ir::Node &node) {
  DType dtype = node.getOperand(0)->getType().getDType();
  OpKind op = node.getOp();
  bool intAllowed = op == OpKind::Relu || op == OpKind::Neg;
  if (!isF32OrF64(dtype) && !(intAllowed && isSignedInteger(dtype)))
    return unsupportedDType(node, "operand", dtype,
                            intAllowed ? "f32, f64, i64, i32, i8" : "f32, f64");
  switch (op) {
  case OpKind::Relu:
    return unaryForDType<ReluOp>(dtype);
  case OpKind::Neg:
    return unaryForDType<NegOp>(dtype);
  default:
    break;
  }
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    switch (op) {
    case OpKind::Sqrt:
      return makeUnaryKernel<SqrtOp, T>();
    case OpKind::Erf:
      return makeUnaryKernel<ErfOp, T>();
    case OpKind::Tanh:
      return makeUnaryKernel<TanhOp, T>();
    case OpKind::Sigmoid:
      return makeUnaryKernel<SigmoidOp, T>();
    case OpKind::Exp:
      return makeUnaryKernel<ExpOp, T>();
    case OpKind::Log:
      return makeUnaryKernel<LogOp, T>();
    case OpKind::Gelu: {
      // Shape inference has checked the value.
      auto approximate = node.getAttrs().getString("approximate");
      if (approximate && *approximate == "tanh")
        return makeUnaryKernel<GeluTanhOp, T>();
      return makeUnaryKernel<GeluErfOp, T>();
    }
    default:
      llvm_unreachable("not a unary op");
    }
  });
}

Expected<Kernel> selectBinary(const ir::Node &node) {
  const ir::TensorType &aType = node.getOperand(0)->getType();
  const ir::TensorType &bType = node.getOperand(1)->getType();
  const ir::TensorType &outType = node.getResult(0)->getType();
  BroadcastPlan<2> plan = makeBroadcastPlan<2>(
      outType.getDims(), {aType.getDims(), bType.getDims()});
  DType dtype = aType.getDType();
  OpKind op = node.getOp();

  if (op == OpKind::Pow)
    return selectPow(node, std::move(plan));
  if (op == OpKind::GeluGrad) {
    bool tanh =
        node.getAttrs().getString("approximate").value_or("none") == "tanh";
    if (dtype == DType::F32)
      return tanh ? makeBinaryKernel<GeluGradTanhOp, float, float, float>(
                        std::move(plan))
                  : makeBinaryKernel<GeluGradErfOp, float, float, float>(
                        std::move(plan));
    if (dtype == DType::F64)
      return tanh ? makeBinaryKernel<GeluGradTanhOp, double, double, double>(
                        std::move(plan))
                  : makeBinaryKernel<GeluGradErfOp, double, double, double>(
                        std::move(plan));
    return unsupportedDType(node, "operands", dtype, "f32, f64");
  }
  if (op == OpKind::And)
    return makeBinaryKernel<AndOp, BoolByte, BoolByte, BoolByte>(
        std::move(plan));
  if (op == OpKind::Equal && dtype == DType::Bool)
    return makeBinaryKernel<BoolEqualOp, BoolByte, BoolByte, BoolByte>(
        std::move(plan));
  if (!isComputeNumeric(dtype))
    return unsupportedDType(node, "operands", dtype,
                            op == OpKind::Equal
                                ? "f32, f64, i64, i32, i8, u8, bool"
                                : "f32, f64, i64, i32, i8, u8");

  return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    switch (op) {
    case OpKind::Add:
      return makeBinaryKernel<AddOp, T, T, T>(std::move(plan));
    case OpKind::Sub:
      return makeBinaryKernel<SubOp, T, T, T>(std::move(plan));
    case OpKind::Mul:
      return makeBinaryKernel<MulOp, T, T, T>(std::move(plan));
    case OpKind::Div:
      if constexpr (std::is_integral_v<T>)
        return makeIntDivisionKernel<DivOp, T>(std::move(plan));
      else
        return makeFloatDivisionKernel<T>(std::move(plan));
    case OpKind::Mod: {
      // Shape inference has checked fmod (0 or 1, and 1 for floats).
      bool fmod = node.getAttrs().getInt("fmod").value_or(0) != 0;
      if constexpr (std::is_integral_v<T>) {
        if (fmod)
          return makeIntDivisionKernel<FmodOp, T>(std::move(plan));
        return makeIntDivisionKernel<IntModOp, T>(std::move(plan));
      } else {
        return makeBinaryKernel<FmodOp, T, T, T>(std::move(plan));
      }
    }
    case OpKind::Equal:
      return makeBinaryKernel<EqualOp, BoolByte, T, T>(std::move(plan));
    case OpKind::GreaterOrEqual:
      return makeBinaryKernel<GreaterOrEqualOp, BoolByte, T, T>(
          std::move(plan));
    default:
      llvm_unreachable("not a binary op");
    }
  });
}

//===----------------------------------------------------------------------===//
// Max and Min
//===----------------------------------------------------------------------===//

namespace {

/// Max or Min (\p Op) of one or more operands.
template <typename Op> Expected<Kernel> selectFold(const ir::Node &node) {
  DType dtype = node.getOperand(0)->getType().getDType();
  if (!isComputeNumeric(dtype))
    return unsupportedDType(node, "operands", dtype,
                            "f32, f64, i64, i32, i8, u8");
  ArrayRef<int64_t> outDims = node.getResult(0)->getType().getDims();
  if (node.getNumOperands() == 1) {
    // One operand: its own type is the result type.
    return Kernel([](const KernelContext &ctx) -> Error {
      copyTensorBytes(ctx.inputs[0], ctx.outputs[0]);
      return Error::success();
    });
  }
  // Fold left to right: out = op(x0, x1), then out = op(out, xk).
  std::vector<BroadcastPlan<2>> plans;
  plans.push_back(
      makeBroadcastPlan<2>(outDims, {node.getOperand(0)->getType().getDims(),
                                     node.getOperand(1)->getType().getDims()}));
  for (unsigned k = 2; k < node.getNumOperands(); ++k)
    plans.push_back(makeBroadcastPlan<2>(
        outDims, {outDims, node.getOperand(k)->getType().getDims()}));
  return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [plans](const KernelContext &ctx) -> Error {
      runBinary<Op, T, T, T>(plans[0], ctx.inputs[0], ctx.inputs[1],
                             ctx.outputs[0], ctx.parallel);
      T *out = ctx.outputs[0].getData<T>();
      for (size_t k = 1; k < plans.size(); ++k) {
        const BroadcastPlan<2> &plan = plans[k];
        const T *b = ctx.inputs[k + 1].getData<T>();
        ctx.parallel.run(
            plan.numElements, kElementwiseGrain,
            [&](int64_t begin, int64_t end) {
              forEachRun(plan, begin, end,
                         [&](int64_t o, const std::array<int64_t, 2> &off,
                             const std::array<int64_t, 2> &stride, int64_t n) {
                           binaryRunInPlace<Op>(out + o, b + off[1], stride[1],
                                                n);
                         });
            });
      }
      return Error::success();
    };
  });
}

} // namespace

Expected<Kernel> selectMax(const ir::Node &node) {
  return selectFold<MaxOp>(node);
}

Expected<Kernel> selectMin(const ir::Node &node) {
  return selectFold<MinOp>(node);
}

//===----------------------------------------------------------------------===//
// Where
//===----------------------------------------------------------------------===//

Expected<Kernel> selectWhere(const ir::Node &node) {
  const ir::TensorType &outType = node.getResult(0)->getType();
  BroadcastPlan<3> plan = makeBroadcastPlan<3>(
      outType.getDims(), {node.getOperand(0)->getType().getDims(),
                          node.getOperand(1)->getType().getDims(),
                          node.getOperand(2)->getType().getDims()});
  return dispatchBySize(
      ir::dtypeSize(outType.getDType()), [&](auto tag) -> Kernel {
        using T = decltype(tag);
        return [plan](const KernelContext &ctx) -> Error {
          const BoolByte *cond = ctx.inputs[0].getData<BoolByte>();
          const T *x = static_cast<const T *>(ctx.inputs[1].getData());
          const T *y = static_cast<const T *>(ctx.inputs[2].getData());
          T *out = static_cast<T *>(ctx.outputs[0].getData());
          ctx.parallel.run(
              plan.numElements, kElementwiseGrain,
              [&](int64_t begin, int64_t end) {
                forEachRun(plan, begin, end,
                           [&](int64_t o, const std::array<int64_t, 3> &off,
                               const std::array<int64_t, 3> &s, int64_t n) {
                             const BoolByte *c = cond + off[0];
                             const T *xs = x + off[1];
                             const T *ys = y + off[2];
                             T *os = out + o;
                             if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
                               for (int64_t i = 0; i < n; ++i)
                                 os[i] = c[i] ? xs[i] : ys[i];
                             } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {
                               const T yv = *ys;
                               for (int64_t i = 0; i < n; ++i)
                                 os[i] = c[i] ? xs[i] : yv;
                             } else {
                               for (int64_t i = 0; i < n; ++i)
                                 os[i] =
                                     c[i * s[0]] ? xs[i * s[1]] : ys[i * s[2]];
                             }
                           });
              });
          return Error::success();
        };
      });
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

namespace {

/// Storage and compute types of each dtype: f16/bf16 compute in float,
/// integers in int64, bool as bool.
template <DType D> struct DTypeTraits;
template <> struct DTypeTraits<DType::F32> {
  using Storage = float;
  using Compute = float;
  static Compute load(Storage v) { return v; }
  static Storage store(Compute v) { return v; }
};
template <> struct DTypeTraits<DType::F64> {
  using Storage = double;
  using Compute = double;
  static Compute load(Storage v) { return v; }
  static Storage store(Compute v) { return v; }
};
template <> struct DTypeTraits<DType::F16> {
  using Storage = uint16_t;
  using Compute = float;
  static Compute load(Storage v) { return ir::halfToFloat(v); }
  static Storage store(Compute v) { return ir::floatToHalf(v); }
};
template <> struct DTypeTraits<DType::BF16> {
  using Storage = uint16_t;
  using Compute = float;
  static Compute load(Storage v) { return ir::bfloat16ToFloat(v); }
  static Storage store(Compute v) { return ir::floatToBFloat16(v); }
};
template <typename S> struct IntTraits {
  using Storage = S;
  using Compute = int64_t;
  static Compute load(Storage v) { return v; }
  /// Wraps (modular since C++20).
  static Storage store(Compute v) { return static_cast<Storage>(v); }
};
template <> struct DTypeTraits<DType::I64> : IntTraits<int64_t> {};
template <> struct DTypeTraits<DType::I32> : IntTraits<int32_t> {};
template <> struct DTypeTraits<DType::I8> : IntTraits<int8_t> {};
template <> struct DTypeTraits<DType::U8> : IntTraits<uint8_t> {};
template <> struct DTypeTraits<DType::Bool> {
  using Storage = uint8_t;
  using Compute = bool;
  static Compute load(Storage v) { return v != 0; }
  static Storage store(Compute v) { return v ? 1 : 0; }
};

/// Converts \p value (in From's compute type) to To's storage type.
template <DType From, DType To>
typename DTypeTraits<To>::Storage
convertElement(typename DTypeTraits<From>::Compute value) {
  using FromC = typename DTypeTraits<From>::Compute;
  using ToC = typename DTypeTraits<To>::Compute;
  using ToS = typename DTypeTraits<To>::Storage;
  if constexpr (std::is_same_v<ToC, bool>) {
    return DTypeTraits<To>::store(value != FromC(0)); // NaN is true
  } else if constexpr (std::is_floating_point_v<FromC> &&
                       std::is_integral_v<ToC>) {
    // Saturate to the target dtype; NaN becomes 0.
    if (std::isnan(value))
      return ToS(0);
    double truncated = std::trunc(static_cast<double>(value));
    if (truncated < static_cast<double>(std::numeric_limits<ToS>::min()))
      return std::numeric_limits<ToS>::min();
    if (truncated >= static_cast<double>(std::numeric_limits<ToS>::max()) + 1.0)
      return std::numeric_limits<ToS>::max();
    return static_cast<ToS>(truncated);
  } else {
    return DTypeTraits<To>::store(static_cast<ToC>(value));
  }
}

template <DType From, DType To> Kernel makeCastKernel() {
  return [](const KernelContext &ctx) -> Error {
    using FromS = typename DTypeTraits<From>::Storage;
    using ToS = typename DTypeTraits<To>::Storage;
    const FromS *in = static_cast<const FromS *>(ctx.inputs[0].getData());
    ToS *out = static_cast<ToS *>(ctx.outputs[0].getData());
    ctx.parallel.run(ctx.outputs[0].getNumElements(), kElementwiseGrain,
                     [&](int64_t begin, int64_t end) {
                       for (int64_t i = begin; i < end; ++i)
                         out[i] = convertElement<From, To>(
                             DTypeTraits<From>::load(in[i]));
                     });
    return Error::success();
  };
}

/// Calls fn(std::integral_constant<DType, D>()) for \p dtype.
template <typename Fn> Kernel dispatchDType(DType dtype, Fn &&fn) {
  switch (dtype) {
#define REMAT_CASE(NAME)                                                       \
  case DType::NAME:                                                            \
    return fn(std::integral_constant<DType, DType::NAME>());
    REMAT_CASE(F32)
    REMAT_CASE(F64)
    REMAT_CASE(F16)
    REMAT_CASE(BF16)
    REMAT_CASE(I64)
    REMAT_CASE(I32)
    REMAT_CASE(I8)
    REMAT_CASE(U8)
    REMAT_CASE(Bool)
#undef REMAT_CASE
  }
  llvm_unreachable("unknown dtype");
}

} // namespace

Expected<Kernel> selectCast(const ir::Node &node) {
  DType from = node.getOperand(0)->getType().getDType();
  DType to = node.getResult(0)->getType().getDType();
  if (from == to)
    return Kernel([](const KernelContext &ctx) -> Error {
      copyTensorBytes(ctx.inputs[0], ctx.outputs[0]);
      return Error::success();
    });
  return dispatchDType(from, [&](auto fromTag) -> Kernel {
    return dispatchDType(to, [&](auto toTag) -> Kernel {
      return makeCastKernel<decltype(fromTag)::value, decltype(toTag)::value>();
    });
  });
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

Expected<Kernel> selectDropout(const ir::Node &node) {
  DType dtype = node.getOperand(0)->getType().getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "data", dtype, "f32, f64");
  // A node without a seed uses 0 (the importer seeds every Dropout).
  uint64_t seed =
      static_cast<uint64_t>(node.getAttrs().getInt("seed").value_or(0));
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [seed](const KernelContext &ctx) -> Error {
      const T *x = ctx.inputs[0].getData<T>();
      T *y = ctx.outputs[0].getData<T>();
      BoolByte *mask =
          ctx.outputs.size() > 1 ? ctx.outputs[1].getData<BoolByte>() : nullptr;
      int64_t count = ctx.outputs[0].getNumElements();
      // ONNX defaults: ratio 0.5, training_mode false.
      double ratio =
          ctx.inputs.size() > 1 ? readScalarAsDouble(ctx.inputs[1]) : 0.5;
      bool training =
          ctx.inputs.size() > 2 && *ctx.inputs[2].getData<BoolByte>() != 0;
      if (!training || ratio == 0) {
        copyTensorBytes(ctx.inputs[0], ctx.outputs[0]);
        if (mask && count > 0)
          std::memset(mask, 1, count);
        return Error::success();
      }
      if (!(ratio > 0 && ratio < 1)) {
        char buffer[32];
        std::snprintf(buffer, sizeof(buffer), "%g", ratio);
        return nodeError(ctx.node,
                         "ratio " + Twine(buffer) + " is outside [0, 1)");
      }
      // Keep iff u >= ratio with u = bits / 2^24 (see dropoutKeep); kept
      // elements scale by 1 / (1 - ratio) in the element type, as ONNX's
      // reference and onnxruntime compute it (mask * x * scale).
      uint32_t threshold = dropoutThreshold(static_cast<float>(ratio));
      const T scale = T(1) / (T(1) - static_cast<T>(ratio));
      uint64_t key = dropoutKey(seed);
      ctx.parallel.run(
          count, kElementwiseGrain, [&](int64_t begin, int64_t end) {
            if constexpr (std::is_same_v<T, float>) {
              dropoutF32Array(x, y, mask, begin, end, key, threshold, scale);
              return;
            }
            if (!mask) {
              for (int64_t i = begin; i < end; ++i)
                y[i] = dropoutBits24(key, i) >= threshold ? x[i] * scale : T(0);
              return;
            }
            for (int64_t i = begin; i < end; ++i) {
              bool keep = dropoutBits24(key, i) >= threshold;
              y[i] = keep ? x[i] * scale : T(0);
              mask[i] = keep;
            }
          });
      return Error::success();
    };
  });
}

/// remat.DropoutGrad: cuda::body::dropoutGrad per element, split over
/// threads in blocks whose bounds do not change a value.
Expected<Kernel> selectDropoutGrad(const ir::Node &node) {
  DType dtype = node.getOperand(0)->getType().getDType();
  if (!isF32OrF64(dtype))
    return unsupportedDType(node, "dy", dtype, "f32, f64");
  return dispatchFloat(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    return [](const KernelContext &ctx) -> Error {
      const T *dy = ctx.inputs[0].getData<T>();
      const BoolByte *mask = ctx.inputs[1].getData<BoolByte>();
      const T scale = *ctx.inputs[2].getData<T>();
      T *dx = ctx.outputs[0].getData<T>();
      ctx.parallel.run(ctx.outputs[0].getNumElements(), kElementwiseGrain,
                       [&](int64_t begin, int64_t end) {
                         for (int64_t i = begin; i < end; ++i)
                           dx[i] = cuda::body::dropoutGrad(dy[i], mask[i] != 0,
                                                           scale);
                       });
      return Error::success();
    };
  });
}

} // namespace remat::runtime::cpu::detail
