//===- runtime/cpu/Reductions.cpp - Reduce*, ArgMax, ArgMin ---------------===//
//
// Every output element accumulates its inputs in one fixed order: row-major
// over the reduced dims, sequentially, in one thread. Threads split only the
// output elements, so results do not depend on the thread count.
//
// The input is first collapsed: size-1 dims are dropped and adjacent dims
// that are both reduced or both kept are merged. Then one of two loops runs:
//   - inner dim reduced (softmax-like rows, LayerNorm-like statistics): each
//     output element sums a contiguous run per outer reduced index;
//   - inner dim kept (bias gradients: sum over batch and sequence): a thread
//     takes a contiguous chunk of output elements and adds whole input rows
//     into it, one reduced index after another, which vectorizes and still
//     adds each element's inputs in the same row-major order.
//
// Integers accumulate in int64 (wrapping) and are wrapped to the dtype when
// stored; ReduceMean of integers truncates (C's division).
//
// ReduceL2 (issue 40) accumulates squares as Sum does and takes the square
// root at the end. ReduceLogSumExp (issue 40) takes two passes per output
// element, in the row-major order of its reduced dims: the max m, then the
// sum of exp(x - m) (m taken as 0 where it is infinite, as torch), giving
// log(sum) + m; over no elements, -inf.
//
// ArgMax and ArgMin (issue 40) scan their one axis in index order for each
// output element, threads splitting the output elements.
//
//===----------------------------------------------------------------------===//

#include "runtime/MathF32.h"
#include "runtime/cpu/KernelImpl.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace remat::runtime::cpu::detail {

namespace {

enum class ReduceKind { Sum, Mean, Max, L2 };

/// One group of collapsed dims: its size and input stride.
struct Group {
  int64_t size;
  int64_t stride;
};

struct ReducePlan {
  /// Kept groups except the innermost kept one (when innerKept).
  llvm::SmallVector<Group, 4> outerKept;
  /// Reduced groups except the innermost reduced one (when !innerKept).
  llvm::SmallVector<Group, 4> outerReduced;
  bool innerKept = false;
  /// Size of the innermost group (kept or reduced), stride 1.
  int64_t inner = 1;
  int64_t outCount = 1;
  int64_t reduceCount = 1;
};

/// Builds the plan for input \p dims reduced over \p reduced.
ReducePlan makeReducePlan(ArrayRef<int64_t> dims, ArrayRef<bool> reduced) {
  ReducePlan plan;
  // Collapse: drop size-1 dims, merge neighbours with the same flag.
  llvm::SmallVector<int64_t, 6> sizes;
  llvm::SmallVector<bool, 6> flags;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (reduced[d])
      plan.reduceCount *= dims[d];
    else
      plan.outCount *= dims[d];
    if (dims[d] == 1)
      continue;
    if (!sizes.empty() && flags.back() == reduced[d]) {
      sizes.back() *= dims[d];
      continue;
    }
    sizes.push_back(dims[d]);
    flags.push_back(reduced[d]);
  }
  if (sizes.empty()) {
    // One element in, one out.
    plan.innerKept = true;
    return plan;
  }
  Dims strides = rowMajorStrides(sizes);
  plan.innerKept = !flags.back();
  plan.inner = sizes.back();
  for (size_t g = 0; g + 1 < sizes.size(); ++g) {
    Group group{sizes[g], strides[g]};
    if (flags[g])
      plan.outerReduced.push_back(group);
    else
      plan.outerKept.push_back(group);
  }
  return plan;
}

/// Calls \p fn(offset) for every index of \p groups in row-major order, with
/// offset the sum of index * stride.
template <typename Fn> void forEachIndex(ArrayRef<Group> groups, Fn &&fn) {
  size_t rank = groups.size();
  if (rank == 0) {
    fn(int64_t(0));
    return;
  }
  for (const Group &group : groups)
    if (group.size == 0)
      return;
  llvm::SmallVector<int64_t, 4> index(rank, 0);
  int64_t offset = 0;
  while (true) {
    fn(offset);
    size_t d = rank;
    while (d > 0) {
      --d;
      offset += groups[d].stride;
      if (++index[d] < groups[d].size)
        break;
      offset -= groups[d].stride * groups[d].size;
      index[d] = 0;
      if (d == 0)
        return;
    }
  }
}

/// \returns the input offset of output-group index \p linear over \p groups.
int64_t offsetOf(ArrayRef<Group> groups, int64_t linear) {
  int64_t offset = 0;
  for (size_t d = groups.size(); d > 0; --d) {
    offset += (linear % groups[d - 1].size) * groups[d - 1].stride;
    linear /= groups[d - 1].size;
  }
  return offset;
}

/// The accumulator type: T for floats, int64 for integers.
template <typename T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;

template <ReduceKind K, typename T> struct Accumulate {
  using Acc = AccOf<T>;
  static Acc apply(Acc acc, T value) {
    if constexpr (K == ReduceKind::Max) {
      // The first NaN wins, as in numpy.
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(acc))
          return acc;
        if (std::isnan(value))
          return value;
      }
      return value > acc ? value : acc;
    } else if constexpr (K == ReduceKind::L2) {
      return acc + value * value;
    } else if constexpr (std::is_integral_v<T>) {
      return wrapAdd<int64_t>(acc, value);
    } else {
      return acc + value;
    }
  }
  static T finish(Acc acc, int64_t count) {
    if constexpr (K == ReduceKind::Mean) {
      if constexpr (std::is_floating_point_v<T>)
        return acc / static_cast<T>(count);
      else
        return static_cast<T>(acc / count);
    } else if constexpr (K == ReduceKind::L2) {
      return std::sqrt(acc);
    } else {
      return static_cast<T>(acc);
    }
  }
};

constexpr int64_t kReduceGrainElements = 16 * 1024;
/// Output elements a thread accumulates together when the inner dim is kept:
/// 4 KiB of floats per input row, halved down to kMinKeptChunk while there are
/// fewer than kMinKeptTasks tasks. With 1024 alone, a [512, 768] -> [768] bias
/// gradient was one task and did not scale past one thread (and 3072 columns
/// were 3 tasks on 2 threads); 128 alone made the [512, 30522] one slower, each
/// task then reading 512 B per page. In the bert-base step only the 3072-column
/// sums got measurably faster.
constexpr int64_t kKeptChunk = 1024;
constexpr int64_t kMinKeptChunk = 128;
constexpr int64_t kMinKeptTasks = 6;

/// \returns the chunk width for \p outer rows of \p inner kept elements. It
/// depends on the shape only: every output element is summed in one task
/// whatever the width, so it does not change the bits either.
int64_t keptChunkWidth(int64_t outer, int64_t inner) {
  int64_t width = kKeptChunk;
  while (width > kMinKeptChunk &&
         outer * ((inner + width - 1) / width) < kMinKeptTasks)
    width /= 2;
  return width;
}

template <ReduceKind K, typename T>
void runReduce(const ReducePlan &plan, const T *x, T *out,
               ParallelFor &parallel) {
  using Ops = Accumulate<K, T>;
  using Acc = typename Ops::Acc;
  // Max starts from the first reduced element (the reduction is never
  // empty, see selection); Sum and Mean from 0.
  auto initial = [&](int64_t base) -> Acc {
    if constexpr (K == ReduceKind::Max)
      return static_cast<Acc>(x[base]);
    else
      return Acc(0);
  };
  if (!plan.innerKept) {
    int64_t perOutput = std::max<int64_t>(plan.reduceCount, 1);
    parallel.run(plan.outCount,
                 std::max<int64_t>(1, kReduceGrainElements / perOutput),
                 [&](int64_t begin, int64_t end) {
                   int64_t o = begin;
                   // Four outputs at once: four independent chains of
                   // additions instead of one (each still in its order).
                   for (; o + 4 <= end; o += 4) {
                     const T *b0 = x + offsetOf(plan.outerKept, o);
                     const T *b1 = x + offsetOf(plan.outerKept, o + 1);
                     const T *b2 = x + offsetOf(plan.outerKept, o + 2);
                     const T *b3 = x + offsetOf(plan.outerKept, o + 3);
                     Acc a0 = initial(b0 - x), a1 = initial(b1 - x),
                         a2 = initial(b2 - x), a3 = initial(b3 - x);
                     forEachIndex(plan.outerReduced, [&](int64_t offset) {
                       for (int64_t i = 0; i < plan.inner; ++i) {
                         a0 = Ops::apply(a0, b0[offset + i]);
                         a1 = Ops::apply(a1, b1[offset + i]);
                         a2 = Ops::apply(a2, b2[offset + i]);
                         a3 = Ops::apply(a3, b3[offset + i]);
                       }
                     });
                     out[o] = Ops::finish(a0, plan.reduceCount);
                     out[o + 1] = Ops::finish(a1, plan.reduceCount);
                     out[o + 2] = Ops::finish(a2, plan.reduceCount);
                     out[o + 3] = Ops::finish(a3, plan.reduceCount);
                   }
                   for (; o < end; ++o) {
                     int64_t base = offsetOf(plan.outerKept, o);
                     Acc acc = initial(base);
                     forEachIndex(plan.outerReduced, [&](int64_t offset) {
                       const T *run = x + base + offset;
                       for (int64_t i = 0; i < plan.inner; ++i)
                         acc = Ops::apply(acc, run[i]);
                     });
                     out[o] = Ops::finish(acc, plan.reduceCount);
                   }
                 });
    return;
  }
  int64_t outer = plan.outCount / std::max<int64_t>(plan.inner, 1);
  if (plan.inner == 0 || outer == 0)
    return;
  int64_t chunkWidth = keptChunkWidth(outer, plan.inner);
  int64_t chunks = (plan.inner + chunkWidth - 1) / chunkWidth;
  int64_t perTask =
      std::min(plan.inner, chunkWidth) * std::max<int64_t>(plan.reduceCount, 1);
  parallel.run(outer * chunks,
               std::max<int64_t>(1, kReduceGrainElements / perTask),
               [&](int64_t begin, int64_t end) {
                 std::vector<Acc> acc(std::min(plan.inner, chunkWidth));
                 for (int64_t task = begin; task < end; ++task) {
                   int64_t o = task / chunks;
                   int64_t j0 = (task % chunks) * chunkWidth;
                   int64_t width = std::min(chunkWidth, plan.inner - j0);
                   int64_t base = offsetOf(plan.outerKept, o) + j0;
                   for (int64_t j = 0; j < width; ++j)
                     acc[j] = initial(base + j);
                   forEachIndex(plan.outerReduced, [&](int64_t offset) {
                     const T *row = x + base + offset;
                     for (int64_t j = 0; j < width; ++j)
                       acc[j] = Ops::apply(acc[j], row[j]);
                   });
                   T *outRow = out + o * plan.inner + j0;
                   for (int64_t j = 0; j < width; ++j)
                     outRow[j] = Ops::finish(acc[j], plan.reduceCount);
                 }
               });
}

/// \returns the reduced-axis mask for \p axes of a rank-\p rank input, or an
/// error naming the bad axis; empty axes reduce everything.
Expected<llvm::SmallVector<bool, 6>>
reducedMask(const ir::Node &node, ArrayRef<int64_t> axes, int64_t rank) {
  llvm::SmallVector<bool, 6> reduced(rank, axes.empty());
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank)
      return nodeError(node, "axis " + Twine(axis) + " is outside [" +
                                 Twine(-rank) + ", " + Twine(rank) +
                                 ") for rank " + Twine(rank));
    int64_t normalized = axis < 0 ? axis + rank : axis;
    if (reduced[normalized])
      return nodeError(node, "axes " + dimsStr(axes) + " name axis " +
                                 Twine(normalized) + " twice");
    reduced[normalized] = true;
  }
  return reduced;
}

/// \returns the result dims for \p dims reduced over \p reduced.
Dims reducedDims(ArrayRef<int64_t> dims, ArrayRef<bool> reduced,
                 bool keepDims) {
  Dims result;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (!reduced[d])
      result.push_back(dims[d]);
    else if (keepDims)
      result.push_back(1);
  }
  return result;
}

template <ReduceKind K, typename T>
Kernel makeStaticReduceKernel(std::shared_ptr<const ReducePlan> plan) {
  return [plan](const KernelContext &ctx) -> Error {
    runReduce<K, T>(*plan, ctx.inputs[0].getData<T>(),
                    ctx.outputs[0].getData<T>(), ctx.parallel);
    return Error::success();
  };
}

/// ReduceSum with an axes operand: the plan is built from its values.
template <typename T>
Kernel makeDynamicSumKernel(bool keepDims, bool noopWithEmptyAxes) {
  return [keepDims, noopWithEmptyAxes](const KernelContext &ctx) -> Error {
    const Tensor &data = ctx.inputs[0];
    std::vector<int64_t> axes = readInts(ctx.inputs[1]);
    if (axes.empty() && noopWithEmptyAxes) {
      if (auto err = checkRuntimeDims(ctx.node, "an empty axes operand",
                                      data.getDims(), ctx.outputs[0].getDims()))
        return err;
      copyTensorBytes(data, ctx.outputs[0]);
      return Error::success();
    }
    auto reduced = reducedMask(ctx.node, axes, data.getRank());
    if (!reduced)
      return reduced.takeError();
    if (auto err =
            checkRuntimeDims(ctx.node, "axes " + dimsStr(axes),
                             reducedDims(data.getDims(), *reduced, keepDims),
                             ctx.outputs[0].getDims()))
      return err;
    ReducePlan plan = makeReducePlan(data.getDims(), *reduced);
    runReduce<ReduceKind::Sum, T>(plan, data.getData<T>(),
                                  ctx.outputs[0].getData<T>(), ctx.parallel);
    return Error::success();
  };
}

/// Whether element \p v replaces the best one so far, \p best, in ArgMax
/// (\p IsMax) or ArgMin: v is strictly beyond best, or equal to it when
/// \p last. NaN is beyond every number and equal to NaN, as numpy's argmax
/// and argmin return the first NaN.
template <bool IsMax, typename T> bool replacesBest(T v, T best, bool last) {
  if constexpr (std::is_floating_point_v<T>) {
    bool vNaN = std::isnan(v), bestNaN = std::isnan(best);
    if (vNaN || bestNaN)
      return vNaN && (last || !bestNaN);
  }
  if (IsMax ? v > best : v < best)
    return true;
  return last && v == best;
}

/// ArgMax or ArgMin of \p outer x \p count x \p inner elements over the
/// middle dim.
template <bool IsMax, typename T>
Kernel makeArgReduceKernel(int64_t outer, int64_t count, int64_t inner,
                           bool last) {
  return [=](const KernelContext &ctx) -> Error {
    const T *x = ctx.inputs[0].getData<T>();
    int64_t *out = ctx.outputs[0].getData<int64_t>();
    ctx.parallel.run(
        outer * inner,
        std::max<int64_t>(1,
                          kReduceGrainElements / std::max<int64_t>(count, 1)),
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            const T *line = x + (o / inner) * count * inner + o % inner;
            int64_t bestIndex = 0;
            T best = line[0];
            for (int64_t k = 1; k < count; ++k)
              if (replacesBest<IsMax>(line[k * inner], best, last)) {
                best = line[k * inner];
                bestIndex = k;
              }
            out[o] = bestIndex;
          }
        });
    return Error::success();
  };
}

/// ReduceLogSumExp of float \p dims over \p reduced: one task per output
/// element, which walks its reduced dims row-major twice (the max, then the
/// sum of exp(x - max)).
template <typename T>
Kernel makeLogSumExpKernel(ArrayRef<int64_t> dims, ArrayRef<bool> reduced) {
  Dims strides = rowMajorStrides(dims);
  Dims keptDims, keptStrides, redDims, redStrides;
  for (size_t d = 0; d < dims.size(); ++d) {
    (reduced[d] ? redDims : keptDims).push_back(dims[d]);
    (reduced[d] ? redStrides : keptStrides).push_back(strides[d]);
  }
  return [=](const KernelContext &ctx) -> Error {
    const T *x = ctx.inputs[0].getData<T>();
    T *out = ctx.outputs[0].getData<T>();
    int64_t count = product(redDims);
    auto offset = [](ArrayRef<int64_t> space, ArrayRef<int64_t> steps,
                     int64_t linear) {
      int64_t at = 0;
      for (size_t d = space.size(); d > 0; --d) {
        at += (linear % space[d - 1]) * steps[d - 1];
        linear /= space[d - 1];
      }
      return at;
    };
    ctx.parallel.run(
        ctx.outputs[0].getNumElements(),
        std::max<int64_t>(1,
                          kReduceGrainElements / std::max<int64_t>(count, 1)),
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            if (count == 0) {
              out[o] = -std::numeric_limits<T>::infinity(); // log(0)
              continue;
            }
            const T *base = x + offset(keptDims, keptStrides, o);
            T m = base[0];
            for (int64_t r = 1; r < count && !std::isnan(m); ++r) {
              T v = base[offset(redDims, redStrides, r)];
              m = std::isnan(v) || v > m ? v : m;
            }
            if (std::isinf(m))
              m = T(0);
            T sum = T(0);
            for (int64_t r = 0; r < count; ++r)
              sum += expOf(base[offset(redDims, redStrides, r)] - m);
            out[o] = std::log(sum) + m;
          }
        });
    return Error::success();
  };
}

} // namespace

Expected<Kernel> selectArgReduce(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  DType dtype = type.getDType();
  if (!isComputeNumeric(dtype))
    return unsupportedDType(node, "operand", dtype,
                            "f32, f64, i64, i32, i8, u8");
  const ir::AttrList &attrs = node.getAttrs();
  int64_t rank = type.getRank();
  int64_t axis = attrs.getInt("axis").value_or(0);
  axis = axis < 0 ? axis + rank : axis;
  bool last = attrs.getInt("select_last_index").value_or(0) != 0;
  ArrayRef<int64_t> dims = type.getDims();
  int64_t outer = product(dims.take_front(axis));
  int64_t count = dims[axis];
  int64_t inner = product(dims.drop_front(axis + 1));
  if (count == 0 && outer * inner > 0)
    return nodeError(node, "reduces over an empty axis of " + type.str() +
                               " (the index of the extreme of nothing is "
                               "undefined)");
  bool isMax = node.getOp() == OpKind::ArgMax;
  return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    if (isMax)
      return makeArgReduceKernel<true, T>(outer, count, inner, last);
    return makeArgReduceKernel<false, T>(outer, count, inner, last);
  });
}

Expected<Kernel> selectReduce(const ir::Node &node) {
  const ir::TensorType &type = node.getOperand(0)->getType();
  DType dtype = type.getDType();
  if (!isComputeNumeric(dtype))
    return unsupportedDType(node, "operand", dtype,
                            "f32, f64, i64, i32, i8, u8");
  const ir::AttrList &attrs = node.getAttrs();
  bool keepDims = attrs.getInt("keepdims").value_or(1) != 0;
  OpKind op = node.getOp();

  if (op == OpKind::ReduceSum) {
    bool noop = attrs.getInt("noop_with_empty_axes").value_or(0) != 0;
    if (node.getNumOperands() == 2)
      return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
        return makeDynamicSumKernel<decltype(tag)>(keepDims, noop);
      });
    if (noop)
      return Kernel([](const KernelContext &ctx) -> Error {
        copyTensorBytes(ctx.inputs[0], ctx.outputs[0]);
        return Error::success();
      });
  }

  std::vector<int64_t> axes;
  if (op != OpKind::ReduceSum)
    axes = attrs.getInts("axes").value_or(std::vector<int64_t>());
  auto reduced = reducedMask(node, axes, type.getRank());
  if (!reduced)
    return reduced.takeError();
  auto plan =
      std::make_shared<ReducePlan>(makeReducePlan(type.getDims(), *reduced));
  // The sum of nothing is 0, its L2 norm 0 and its log-sum-exp -inf.
  bool emptyDefined = op == OpKind::ReduceSum || op == OpKind::ReduceL2 ||
                      op == OpKind::ReduceLogSumExp;
  if (!emptyDefined && plan->reduceCount == 0 && plan->outCount > 0)
    return nodeError(node, "reduces over an empty axis of " + type.str() +
                               " (the " +
                               (op == OpKind::ReduceMean ? "mean" : "max") +
                               " of nothing is undefined in opset 17)");
  if (op == OpKind::ReduceL2 || op == OpKind::ReduceLogSumExp) {
    if (!isF32OrF64(dtype))
      return unsupportedDType(node, "operand", dtype, "f32, f64");
    return dispatchFloat(dtype, [&](auto tag) -> Kernel {
      using T = decltype(tag);
      if (op == OpKind::ReduceL2)
        return makeStaticReduceKernel<ReduceKind::L2, T>(plan);
      return makeLogSumExpKernel<T>(type.getDims(), *reduced);
    });
  }
  return dispatchNumeric(dtype, [&](auto tag) -> Kernel {
    using T = decltype(tag);
    switch (op) {
    case OpKind::ReduceSum:
      return makeStaticReduceKernel<ReduceKind::Sum, T>(plan);
    case OpKind::ReduceMean:
      return makeStaticReduceKernel<ReduceKind::Mean, T>(plan);
    default:
      return makeStaticReduceKernel<ReduceKind::Max, T>(plan);
    }
  });
}

} // namespace remat::runtime::cpu::detail
