//===- runtime/cpu/ElementwiseMore.cpp - Elementwise ops of issue 13 ------===//
//
// The elementwise ops added for the transformer families (issue 13), kept
// apart from Elementwise.cpp: Sin, Cos, Abs, Reciprocal, Not, IsNaN, IsInf,
// Min, Less, LessOrEqual, Greater and Or; and Sign, Ceil, Clip, Floor and
// Softplus, added since. Min folds its operands as Max does and shares Max's
// kernel (Elementwise.cpp's selectMin). Each element is computed on its own, so
// the work splits across threads freely and the result does not depend on the
// thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/MathF32.h"
#include "runtime/cpu/KernelImpl.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace remat::runtime::cpu::detail {

namespace {

struct SinOp {
  template <typename T> static T apply(T x) { return std::sin(x); }
};
struct CosOp {
  template <typename T> static T apply(T x) { return std::cos(x); }
};
/// |x|; the most negative integer stays itself (two's complement wraps), as
/// numpy's abs.
struct AbsOp {
  template <typename T> static T apply(T x) {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else if constexpr (std::is_integral_v<T>)
      return x < 0 ? wrapSub(T(0), x) : x;
    else
      return std::fabs(x);
  }
};

/// -1, 0 or 1 by the sign of x; -0 gives 0 and NaN stays NaN, as numpy's
/// sign.
struct SignOp {
  template <typename T> static T apply(T x) {
    if (x > T(0))
      return T(1);
    if constexpr (!std::is_unsigned_v<T>)
      if (x < T(0))
        return T(-1);
    return x == T(0) ? T(0) : x;
  }
};

struct CeilOp {
  template <typename T> static T apply(T x) { return std::ceil(x); }
};
struct FloorOp {
  template <typename T> static T apply(T x) { return std::floor(x); }
};
/// log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)), with remat's exp
/// (runtime/MathF32.h): exp never overflows and small results keep their
/// digits. For x <= 0 this is torch's expression, log1p(exp(x)); above 0
/// the two differ by rounding (torch returns x itself above 20).
struct SoftplusOp {
  template <typename T> static T apply(T x) {
    return std::max(x, T(0)) + std::log1p(expOf(-std::fabs(x)));
  }
};

/// acos(x), NaN outside [-1, 1] (issue 40).
struct AcosOp {
  template <typename T> static T apply(T x) { return std::acos(x); }
};

template <typename Op, typename In, typename Out> Kernel makeMapKernel() {
  return [](const KernelContext &ctx) -> Error {
    const In *in = static_cast<const In *>(ctx.inputs[0].getData());
    Out *out = static_cast<Out *>(ctx.outputs[0].getData());
    ctx.parallel.run(ctx.outputs[0].getNumElements(), kElementwiseGrain,
                     [&](int64_t begin, int64_t end) {
                       for (int64_t i = begin; i < end; ++i)
                         out[i] = Op::apply(in[i]);
                     });
    return Error::success();
  };
}

struct NotOp {
  static BoolByte apply(BoolByte x) { return x == 0; }
};
struct IsNaNOp {
  template <typename T> static BoolByte apply(T x) { return std::isnan(x); }
};
struct IsNaNHalfOp {
  static BoolByte apply(uint16_t x) { return std::isnan(ir::halfToFloat(x)); }
};
struct IsNaNBFloat16Op {
  static BoolByte apply(uint16_t x) {
    return std::isnan(ir::bfloat16ToFloat(x));
  }
};

struct ReciprocalOp {
  template <typename T> static T apply(T x) { return T(1) / x; }
};

/// NaN compares false, as IEEE has it.
struct LessOp {
  template <typename T> static BoolByte apply(T a, T b) { return a < b; }
};
struct LessOrEqualOp {
  template <typename T> static BoolByte apply(T a, T b) { return a <= b; }
};
struct GreaterOp {
  template <typename T> static BoolByte apply(T a, T b) { return a > b; }
};
struct OrOp {
  template <typename T> static BoolByte apply(T a, T b) {
    return a != 0 || b != 0;
  }
};

/// out[i] = Op(a[i], b[i]) over the broadcast of operands 0 and 1.
template <typename Op, typename R, typename T>
Kernel makeBroadcastKernel(BroadcastPlan<2> plan) {
  return [plan = std::move(plan)](const KernelContext &ctx) -> Error {
    const T *a = ctx.inputs[0].getData<T>();
    const T *b = ctx.inputs[1].getData<T>();
    R *out = ctx.outputs[0].getData<R>();
    ctx.parallel.run(
        plan.numElements, kElementwiseGrain, [&](int64_t begin, int64_t end) {
          forEachRun(plan, begin, end,
                     [&](int64_t o, const std::array<int64_t, 2> &off,
                         const std::array<int64_t, 2> &stride, int64_t n) {
                       const T *as = a + off[0];
                       const T *bs = b + off[1];
                       R *os = out + o;
                       if (stride[0] == 1 && stride[1] == 1) {
                         for (int64_t i = 0; i < n; ++i)
                           os[i] = Op::apply(as[i], bs[i]);
                       } else {
                         for (int64_t i = 0; i < n; ++i)
                           os[i] = Op::apply(as[i * stride[0]],
                                             bs[i * stride[1]]);
                       }
                     });
        });
    return Error::success();
  };
}

/// Clip: min(max(x, lo), hi) with the bounds that are present (operands 1
/// and 2), as numpy's clip: NaN stays NaN, and hi wins when lo > hi. The
/// bounds are read before any element is written.
template <typename T> Kernel makeClipKernel(bool hasMin, bool hasMax) {
  return [hasMin, hasMax](const KernelContext &ctx) -> Error {
    const T *x = ctx.inputs[0].getData<T>();
    T lo = hasMin ? *ctx.inputs[1].getData<T>() : T(0);
    T hi = hasMax ? *ctx.inputs[2].getData<T>() : T(0);
    T *out = ctx.outputs[0].getData<T>();
    ctx.parallel.run(ctx.outputs[0].getNumElements(), kElementwiseGrain,
                     [&](int64_t begin, int64_t end) {
                       for (int64_t i = begin; i < end; ++i) {
                         T v = x[i];
                         if (hasMin && v < lo)
                           v = lo;
                         if (hasMax && hi < v)
                           v = hi;
                         out[i] = v;
                       }
                     });
    return Error::success();
  };
}

} // namespace

Expected<Kernel> selectElementwiseMore(const ir::Node &node) {
  DType dtype = node.getOperand(0)->getType().getDType();
  auto binaryPlan = [&] {
    return makeBroadcastPlan<2>(node.getResult(0)->getType().getDims(),
                                {node.getOperand(0)->getType().getDims(),
                                 node.getOperand(1)->getType().getDims()});
  };
  switch (node.getOp()) {
  case OpKind::Reciprocal:
    if (!isF32OrF64(dtype))
      return unsupportedDType(node, "operand", dtype, "f32, f64");
    return dispatchFloat(dtype, [](auto tag) -> Kernel {
      using T = decltype(tag);
      return makeMapKernel<ReciprocalOp, T, T>();
    });
  case OpKind::IsInf: {
    // Only reads its operand, so f16 and bf16 work too (through float).
    bool negative = node.getAttrs().getInt("detect_negative").value_or(1) != 0;
    bool positive = node.getAttrs().getInt("detect_positive").value_or(1) != 0;
    auto make = [&](auto tag, auto load) -> Kernel {
      using S = decltype(tag);
      return [negative, positive, load](const KernelContext &ctx) -> Error {
        const S *in = static_cast<const S *>(ctx.inputs[0].getData());
        BoolByte *out = ctx.outputs[0].getData<BoolByte>();
        ctx.parallel.run(
            ctx.outputs[0].getNumElements(), kElementwiseGrain,
            [&](int64_t begin, int64_t end) {
              for (int64_t i = begin; i < end; ++i) {
                auto x = load(in[i]);
                using T = decltype(x);
                const T inf = std::numeric_limits<T>::infinity();
                out[i] = (positive && x == inf) || (negative && x == -inf);
              }
            });
        return Error::success();
      };
    };
    switch (dtype) {
    case DType::F32:
      return make(float(), [](float x) { return x; });
    case DType::F64:
      return make(double(), [](double x) { return x; });
    case DType::F16:
      return make(uint16_t(), [](uint16_t x) { return ir::halfToFloat(x); });
    case DType::BF16:
      return make(uint16_t(),
                  [](uint16_t x) { return ir::bfloat16ToFloat(x); });
    default:
      llvm_unreachable("shape inference admits float dtypes only");
    }
  }
  case OpKind::Or:
    return makeBroadcastKernel<OrOp, BoolByte, BoolByte>(binaryPlan());
  case OpKind::Less:
  case OpKind::LessOrEqual:
  case OpKind::Greater: {
    if (!isComputeNumeric(dtype))
      return unsupportedDType(node, "operands", dtype,
                              "f32, f64, i64, i32, i8, u8");
    BroadcastPlan<2> plan = binaryPlan();
    OpKind op = node.getOp();
    return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
      using T = decltype(tag);
      if (op == OpKind::Less)
        return makeBroadcastKernel<LessOp, BoolByte, T>(std::move(plan));
      if (op == OpKind::LessOrEqual)
        return makeBroadcastKernel<LessOrEqualOp, BoolByte, T>(
            std::move(plan));
      return makeBroadcastKernel<GreaterOp, BoolByte, T>(std::move(plan));
    });
  }
  case OpKind::Sin:
  case OpKind::Cos:
    if (!isF32OrF64(dtype))
      return unsupportedDType(node, "operand", dtype, "f32, f64");
    return dispatchFloat(dtype, [&](auto tag) -> Kernel {
      using T = decltype(tag);
      if (node.getOp() == OpKind::Sin)
        return makeMapKernel<SinOp, T, T>();
      return makeMapKernel<CosOp, T, T>();
    });
  case OpKind::Ceil:
  case OpKind::Floor:
  case OpKind::Softplus:
  case OpKind::Acos:
    if (!isF32OrF64(dtype))
      return unsupportedDType(node, "operand", dtype, "f32, f64");
    return dispatchFloat(dtype, [&](auto tag) -> Kernel {
      using T = decltype(tag);
      if (node.getOp() == OpKind::Ceil)
        return makeMapKernel<CeilOp, T, T>();
      if (node.getOp() == OpKind::Floor)
        return makeMapKernel<FloorOp, T, T>();
      if (node.getOp() == OpKind::Acos)
        return makeMapKernel<AcosOp, T, T>();
      return makeMapKernel<SoftplusOp, T, T>();
    });
  case OpKind::Clip: {
    if (!isComputeNumeric(dtype))
      return unsupportedDType(node, "operands", dtype,
                              "f32, f64, i64, i32, i8, u8");
    // An operand of an empty name is absent: the importer gives a missing
    // min the dtype's lowest value, so only a trailing bound is absent here.
    bool hasMin = node.getNumOperands() > 1;
    bool hasMax = node.getNumOperands() > 2;
    return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
      using T = decltype(tag);
      return makeClipKernel<T>(hasMin, hasMax);
    });
  }
  case OpKind::Abs:
  case OpKind::Sign:
    if (!isComputeNumeric(dtype))
      return unsupportedDType(node, "operand", dtype,
                              "f32, f64, i64, i32, i8, u8");
    return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
      using T = decltype(tag);
      if (node.getOp() == OpKind::Sign)
        return makeMapKernel<SignOp, T, T>();
      return makeMapKernel<AbsOp, T, T>();
    });
  case OpKind::Not:
    return makeMapKernel<NotOp, BoolByte, BoolByte>();
  case OpKind::IsNaN:
    // IsNaN only reads its operand, so f16 and bf16 work too.
    if (dtype == DType::F16)
      return makeMapKernel<IsNaNHalfOp, uint16_t, BoolByte>();
    if (dtype == DType::BF16)
      return makeMapKernel<IsNaNBFloat16Op, uint16_t, BoolByte>();
    return dispatchFloat(dtype, [](auto tag) -> Kernel {
      using T = decltype(tag);
      return makeMapKernel<IsNaNOp, T, BoolByte>();
    });
  case OpKind::Min:
    return selectMin(node);
  default:
    llvm_unreachable("not an op of ElementwiseMore.cpp");
  }
}

} // namespace remat::runtime::cpu::detail
