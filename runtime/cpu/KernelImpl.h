//===- runtime/cpu/KernelImpl.h - Shared parts of CPU kernels -*- C++ -*-===//
//
// Internal to runtime/cpu: dtype dispatch, error helpers, the broadcast
// iterator of the elementwise ops, the strided copy of the data-movement ops,
// and the per-family selection functions that selectKernel() dispatches to.
//
// Selection runs once per node and does everything that depends only on
// static types and attributes (broadcast plans, collapsed strides, tiling);
// the kernels it returns capture that plan by value and do only the loops.
// Operands whose values decide a shape at run time (Reshape's shape, Slice's
// starts, ...) are read when the kernel runs, and the kernel checks that they
// agree with the result type the node declares.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CPU_KERNELIMPL_H
#define REMAT_RUNTIME_CPU_KERNELIMPL_H

#include "runtime/DropoutMask.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Support.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace remat::runtime::cpu::detail {

// The names every kernel file uses (they all live in this namespace).
using ir::DType;
using ir::OpKind;
using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::Twine;

using Dims = llvm::SmallVector<int64_t, 6>;

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

/// \returns an error "<node>: <message>".
inline llvm::Error nodeError(const ir::Node &node, const llvm::Twine &message) {
  return makeError(node.describe() + ": " + message);
}

/// \returns "[2, 3]".
std::string dimsStr(llvm::ArrayRef<int64_t> dims);

/// \returns the error for operand/result dtype \p dtype that the CPU kernel
/// of \p node does not implement; \p supported lists what it does.
llvm::Error unsupportedDType(const ir::Node &node, const llvm::Twine &what,
                             ir::DType dtype, const llvm::Twine &supported);

/// \returns an error when \p computed (dims derived at run time from operand
/// values) differs from \p declared (the result type the node declares).
llvm::Error checkRuntimeDims(const ir::Node &node, const llvm::Twine &what,
                             llvm::ArrayRef<int64_t> computed,
                             llvm::ArrayRef<int64_t> declared);

//===----------------------------------------------------------------------===//
// Types and dispatch
//===----------------------------------------------------------------------===//

/// Bool elements are one byte, 0 or 1; kernels read them as uint8_t and treat
/// any nonzero byte as true.
using BoolByte = uint8_t;

/// f32 and f64 are the float dtypes the compute kernels implement.
inline bool isF32OrF64(ir::DType dtype) {
  return dtype == ir::DType::F32 || dtype == ir::DType::F64;
}
/// f32, f64, i64, i32, i8, u8: the dtypes of the arithmetic kernels.
inline bool isComputeNumeric(ir::DType dtype) {
  return dtype != ir::DType::Bool && dtype != ir::DType::F16 &&
         dtype != ir::DType::BF16;
}

/// Calls \p fn(T()) with T = float for f32 and double for f64.
template <typename Fn> decltype(auto) dispatchFloat(ir::DType dtype, Fn &&fn) {
  switch (dtype) {
  case ir::DType::F32:
    return fn(float());
  case ir::DType::F64:
    return fn(double());
  default:
    llvm_unreachable("not f32 or f64");
  }
}

/// Calls \p fn(T()) with the C++ element type of a compute-numeric dtype.
template <typename Fn>
decltype(auto) dispatchNumeric(ir::DType dtype, Fn &&fn) {
  switch (dtype) {
  case ir::DType::F32:
    return fn(float());
  case ir::DType::F64:
    return fn(double());
  case ir::DType::I64:
    return fn(int64_t());
  case ir::DType::I32:
    return fn(int32_t());
  case ir::DType::I8:
    return fn(int8_t());
  case ir::DType::U8:
    return fn(uint8_t());
  default:
    llvm_unreachable("not a compute-numeric dtype");
  }
}

/// Calls \p fn(T()) with an unsigned integer type of \p size bytes, for
/// kernels that only move elements.
template <typename Fn> decltype(auto) dispatchBySize(unsigned size, Fn &&fn) {
  switch (size) {
  case 1:
    return fn(uint8_t());
  case 2:
    return fn(uint16_t());
  case 4:
    return fn(uint32_t());
  case 8:
    return fn(uint64_t());
  default:
    llvm_unreachable("unexpected element size");
  }
}

/// Integer arithmetic that wraps (two's complement) instead of overflowing.
template <typename T> T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T> T wrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T> T wrapMul(T a, T b) {
  // uint8_t * uint8_t promotes to int and may overflow it; widen first.
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                               std::make_unsigned_t<T>>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

/// \returns the elements of \p tensor, an integer tensor (i64 or i32, any
/// rank), as int64.
std::vector<int64_t> readInts(const Tensor &tensor);
/// \returns element 0 of a numeric tensor as double.
double readScalarAsDouble(const Tensor &tensor);

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

int64_t product(llvm::ArrayRef<int64_t> dims);
Dims rowMajorStrides(llvm::ArrayRef<int64_t> dims);

/// Maps \p axis from [-rank, rank) to [0, rank); the caller has validated it
/// (shape inference does for attributes).
inline unsigned normalizeAxis(int64_t axis, int64_t rank) {
  assert(axis >= -rank && axis < rank && "axis out of range");
  return static_cast<unsigned>(axis < 0 ? axis + rank : axis);
}

//===----------------------------------------------------------------------===//
// Broadcast iteration (elementwise ops)
//===----------------------------------------------------------------------===//

/// How N operands broadcast to one output, with size-1 output dims dropped
/// and adjacent dims merged where every operand allows it. After collapsing,
/// each operand's innermost stride is 0 (broadcast) or 1 (contiguous), so the
/// inner loops specialize on those two cases.
template <unsigned N> struct BroadcastPlan {
  Dims dims;                   ///< collapsed output dims, rank >= 1
  std::array<Dims, N> strides; ///< per operand, in elements; 0 broadcasts
  int64_t numElements = 0;
};

/// Builds the plan for operands of dims \p inDims broadcast (numpy rules,
/// already checked by shape inference) to \p outDims.
template <unsigned N>
BroadcastPlan<N>
makeBroadcastPlan(llvm::ArrayRef<int64_t> outDims,
                  const std::array<llvm::ArrayRef<int64_t>, N> &inDims) {
  BroadcastPlan<N> plan;
  plan.numElements = product(outDims);
  size_t rank = outDims.size();
  std::array<Dims, N> aligned;
  for (unsigned k = 0; k < N; ++k) {
    llvm::ArrayRef<int64_t> in = inDims[k];
    assert(in.size() <= rank && "operand rank exceeds the output rank");
    Dims inStrides = rowMajorStrides(in);
    aligned[k].assign(rank, 0);
    size_t lead = rank - in.size();
    for (size_t d = 0; d < in.size(); ++d) {
      assert((in[d] == outDims[lead + d] || in[d] == 1) &&
             "operand does not broadcast");
      aligned[k][lead + d] = in[d] == 1 ? 0 : inStrides[d];
    }
  }
  for (size_t d = 0; d < rank; ++d) {
    if (outDims[d] == 1)
      continue;
    bool merge = !plan.dims.empty();
    for (unsigned k = 0; merge && k < N; ++k)
      merge = plan.strides[k].back() == aligned[k][d] * outDims[d];
    if (merge) {
      plan.dims.back() *= outDims[d];
      for (unsigned k = 0; k < N; ++k)
        plan.strides[k].back() = aligned[k][d];
      continue;
    }
    plan.dims.push_back(outDims[d]);
    for (unsigned k = 0; k < N; ++k)
      plan.strides[k].push_back(aligned[k][d]);
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(plan.numElements); // 1, or 0 for an empty output
    for (unsigned k = 0; k < N; ++k)
      plan.strides[k].push_back(0);
  }
  return plan;
}

/// Calls \p fn(outOffset, inOffsets, innerStrides, length) for every run of
/// consecutive output elements in [\p begin, \p end) along the innermost
/// collapsed dim. Offsets are in elements.
template <unsigned N, typename Fn>
void forEachRun(const BroadcastPlan<N> &plan, int64_t begin, int64_t end,
                Fn &&fn) {
  if (begin >= end)
    return;
  const size_t rank = plan.dims.size();
  const int64_t inner = plan.dims.back();
  std::array<int64_t, N> innerStrides;
  for (unsigned k = 0; k < N; ++k)
    innerStrides[k] = plan.strides[k].back();
  // The multi-index of `begin` over the outer dims.
  Dims index(rank, 0);
  int64_t rest = begin;
  for (size_t d = rank; d > 0; --d) {
    index[d - 1] = rest % plan.dims[d - 1];
    rest /= plan.dims[d - 1];
  }
  std::array<int64_t, N> offsets;
  auto computeOffsets = [&] {
    for (unsigned k = 0; k < N; ++k) {
      int64_t offset = 0;
      for (size_t d = 0; d < rank; ++d)
        offset += index[d] * plan.strides[k][d];
      offsets[k] = offset;
    }
  };
  computeOffsets();
  int64_t position = begin;
  while (position < end) {
    int64_t length = std::min(inner - index[rank - 1], end - position);
    fn(position, offsets, innerStrides, length);
    position += length;
    if (position >= end)
      break;
    // Advance to the start of the next row.
    index[rank - 1] = 0;
    for (size_t d = rank - 1; d > 0; --d) {
      if (++index[d - 1] < plan.dims[d - 1])
        break;
      index[d - 1] = 0;
    }
    computeOffsets();
  }
}

/// Elements per chunk below which elementwise work stays on one thread.
constexpr int64_t kElementwiseGrain = 32 * 1024;

//===----------------------------------------------------------------------===//
// Strided copies (Transpose, Slice, Expand)
//===----------------------------------------------------------------------===//

/// out[i] = in[base + sum(index_d(i) * strides[d])] over output dims \p dims,
/// collapsed like a broadcast plan.
struct StridedCopyPlan {
  Dims dims;
  Dims strides;
  int64_t base = 0;
  int64_t numElements = 0;
  unsigned elementSize = 0;
};

/// \returns the plan for an output of \p outDims whose dim d steps the input
/// by \p inStrides[d] elements, starting at \p base.
StridedCopyPlan makeStridedCopyPlan(llvm::ArrayRef<int64_t> outDims,
                                    llvm::ArrayRef<int64_t> inStrides,
                                    int64_t base, unsigned elementSize);

/// Runs \p plan from \p in to \p out on \p parallel.
void runStridedCopy(const StridedCopyPlan &plan, const void *in, void *out,
                    ParallelFor &parallel);

/// Copies \p tensor's bytes into \p out unless they are the same memory.
void copyTensorBytes(const Tensor &in, const Tensor &out);
/// The same, split over \p parallel's threads in blocks of fixed size.
void copyTensorBytes(const Tensor &in, const Tensor &out,
                     ParallelFor &parallel);

//===----------------------------------------------------------------------===//
// Selection, one function per family
//===----------------------------------------------------------------------===//

llvm::Expected<Kernel> selectUnary(const ir::Node &node);
llvm::Expected<Kernel> selectBinary(const ir::Node &node);
llvm::Expected<Kernel> selectWhere(const ir::Node &node);
llvm::Expected<Kernel> selectMax(const ir::Node &node);
/// Min of one or more operands, as selectMax (ElementwiseMore.cpp's Min).
llvm::Expected<Kernel> selectMin(const ir::Node &node);
llvm::Expected<Kernel> selectCast(const ir::Node &node);
llvm::Expected<Kernel> selectDropout(const ir::Node &node);

llvm::Expected<Kernel> selectMatMul(const ir::Node &node);
llvm::Expected<Kernel> selectGemm(const ir::Node &node);

llvm::Expected<Kernel> selectPermutedMatMul(const ir::Node &node);
llvm::Expected<Kernel> selectDropoutGrad(const ir::Node &node);
llvm::Expected<Kernel> selectSoftmax(const ir::Node &node);
llvm::Expected<Kernel> selectLayerNormalization(const ir::Node &node);
llvm::Expected<Kernel> selectSoftmaxGrad(const ir::Node &node);
llvm::Expected<Kernel> selectLayerNormalizationGrad(const ir::Node &node);
llvm::Expected<Kernel> selectSoftmaxCrossEntropyLoss(const ir::Node &node);
llvm::Expected<Kernel> selectSoftmaxCrossEntropyGrad(const ir::Node &node);

llvm::Expected<Kernel> selectReduce(const ir::Node &node);
/// ArgMax, ArgMin (Reductions.cpp).
llvm::Expected<Kernel> selectArgReduce(const ir::Node &node);

llvm::Expected<Kernel> selectDataMovement(const ir::Node &node);

/// Sin, Cos, Abs, Reciprocal, Not, IsNaN, IsInf, Min, Less, LessOrEqual,
/// Greater, Or, Sign, Ceil, Clip, Floor, Softplus, Acos (ElementwiseMore.cpp).
llvm::Expected<Kernel> selectElementwiseMore(const ir::Node &node);
/// GatherElements, Trilu, CumSum, Pad, Tile, TopK, EyeLike (Indexing.cpp).
llvm::Expected<Kernel> selectIndexing(const ir::Node &node);
/// Conv, ConvTranspose, MaxPool, AveragePool, remat.MaxPoolGrad and
/// remat.AveragePoolGrad (Conv.cpp).
llvm::Expected<Kernel> selectConv(const ir::Node &node);

} // namespace remat::runtime::cpu::detail

#endif // REMAT_RUNTIME_CPU_KERNELIMPL_H
