//===- runtime/cuda/Kernels.cu - The CUDA kernels -------------------------===//
//
// Thin grid-stride loops over the bodies of KernelBodies.h. Each thread owns
// its output elements (or rows), or, in the reductions, threads share an
// output and combine in a fixed tree, so nothing is atomic and every run
// gives the same bits.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/LaunchSupport.cuh"

#include <cuda_runtime.h>

namespace remat::runtime::cuda {

using namespace launch;

namespace {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void unaryKernel(body::UnaryOp op, const T *in, T *out,
                            int64_t count) {
  REMAT_GRID_LOOP(i, count) out[i] = body::unary(op, in[i]);
}

template <typename T>
__global__ void
binaryKernel(body::BinaryOp op, const T *a, const T *b, void *out,
             const __grid_constant__ body::Dims space,
             const __grid_constant__ body::Strides la,
             const __grid_constant__ body::Strides lb, int64_t count) {
  bool pred = body::isPredicate(op);
  REMAT_GRID_LOOP(i, count) {
    T x = a[body::offsetOf(space, la, i)];
    T y = b[body::offsetOf(space, lb, i)];
    if (pred)
      static_cast<uint8_t *>(out)[i] = body::predicate(op, x, y);
    else
      static_cast<T *>(out)[i] = body::binary(op, x, y);
  }
}

template <typename T>
__global__ void whereKernel(const uint8_t *cond, const T *x, const T *y, T *out,
                            const __grid_constant__ body::Dims space,
                            const __grid_constant__ body::Strides lc,
                            const __grid_constant__ body::Strides lx,
                            const __grid_constant__ body::Strides ly,
                            int64_t count) {
  REMAT_GRID_LOOP(i, count) {
    out[i] = cond[body::offsetOf(space, lc, i)]
                 ? x[body::offsetOf(space, lx, i)]
                 : y[body::offsetOf(space, ly, i)];
  }
}

template <typename To, typename From>
__global__ void castKernel(const From *in, To *out, int64_t count) {
  REMAT_GRID_LOOP(i, count) out[i] = body::castValue<To>(in[i]);
}

template <typename From>
__global__ void castToBoolKernel(const From *in, uint8_t *out, int64_t count) {
  REMAT_GRID_LOOP(i, count) out[i] = body::castToBool(in[i]);
}

template <typename T>
__global__ void
stridedCopyKernel(const T *in, T *out, const __grid_constant__ body::Dims space,
                  const __grid_constant__ body::Strides lin,
                  const __grid_constant__ body::Strides lout, int64_t count) {
  REMAT_GRID_LOOP(i, count) {
    out[body::offsetOf(space, lout, i)] = in[body::offsetOf(space, lin, i)];
  }
}

template <typename T>
__global__ void fillKernel(T value, T *out, int64_t count) {
  REMAT_GRID_LOOP(i, count) out[i] = value;
}

template <typename T>
__global__ void dropoutKernel(const T *x, T *y, uint8_t *mask, int64_t count,
                              uint64_t key, uint32_t threshold, T scale) {
  REMAT_GRID_LOOP(i, count) {
    bool keep;
    y[i] = body::dropout(x[i], key, i, threshold, scale, keep);
    if (mask)
      mask[i] = keep;
  }
}

//===----------------------------------------------------------------------===//
// Rows and columns
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void softmaxKernel(const T *x, T *y, int64_t outer, int64_t n,
                              int64_t inner, bool isLog) {
  REMAT_GRID_LOOP(c, outer * inner) {
    int64_t o = c / inner, i = c % inner;
    int64_t start = o * n * inner + i;
    body::softmaxColumn(x + start, y + start, n, inner, isLog);
  }
}

template <typename T>
__global__ void dropoutGradKernel(const T *dy, const uint8_t *mask,
                                  const T *scale, T *dx, int64_t count) {
  REMAT_GRID_LOOP(i, count) {
    dx[i] = body::dropoutGrad(dy[i], mask[i] != 0, *scale);
  }
}

template <typename T>
__global__ void softmaxGradKernel(const T *dy, const T *y, T *dx,
                                  int64_t outer, int64_t n, int64_t inner) {
  REMAT_GRID_LOOP(c, outer * inner) {
    int64_t o = c / inner, i = c % inner;
    int64_t start = o * n * inner + i;
    body::softmaxGradColumn(dy + start, y + start, dx + start, n, inner);
  }
}

template <typename T>
__global__ void layerNormGradKernel(const T *dy, const T *x, const T *scale,
                                    const T *mean, const T *invStdDev, T *dx,
                                    int64_t rows, int64_t n) {
  REMAT_GRID_LOOP(r, rows) {
    body::layerNormGradRow(dy + r * n, x + r * n, scale, dx + r * n, n,
                           mean[r], invStdDev[r]);
  }
}

template <typename T, typename U, typename S>
__global__ void layerNormKernel(const T *x, const T *scale, const T *bias,
                                T *y, S *mean, S *invStdDev, int64_t rows,
                                int64_t n, float epsilon) {
  REMAT_GRID_LOOP(r, rows) {
    body::layerNormRow<T, U, S>(x + r * n, scale, bias, y + r * n, n, epsilon,
                                mean ? mean + r : nullptr,
                                invStdDev ? invStdDev + r : nullptr);
  }
}

template <typename T, typename L>
__global__ void crossEntropyKernel(const T *scores, const L *labels,
                                   const T *weights, T *losses, T *logProb,
                                   int64_t batch, int64_t classes,
                                   int64_t spatial, bool hasIgnore,
                                   int64_t ignoreIndex, int *errorFlag) {
  REMAT_GRID_LOOP(e, batch * spatial) {
    int64_t b = e / spatial, d = e % spatial;
    int64_t start = b * classes * spatial + d;
    L label = labels[e];
    bool ignored = hasIgnore && static_cast<int64_t>(label) == ignoreIndex;
    if (!ignored && (label < 0 || static_cast<int64_t>(label) >= classes)) {
      *errorFlag = 1;
      losses[e] = T(0);
      continue;
    }
    losses[e] = body::crossEntropyColumn(
        scores + start, classes, spatial, label, hasIgnore, ignoreIndex,
        weights, logProb ? logProb + start : nullptr);
  }
}

template <typename T, typename L>
__global__ void reduceCrossEntropyKernel(const T *losses, const L *labels,
                                         T *out, int64_t count, bool mean,
                                         bool hasIgnore, int64_t ignoreIndex,
                                         const T *weights) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *out = body::reduceCrossEntropy(losses, labels, count, mean, hasIgnore,
                                    ignoreIndex, weights);
}

template <typename T>
__global__ void reduceKernel(body::ReduceOp op, const T *x, T *out,
                             const __grid_constant__ body::Dims keptSpace,
                             const __grid_constant__ body::Strides kept,
                             const __grid_constant__ body::Dims reducedSpace,
                             const __grid_constant__ body::Strides reduced,
                             int64_t reduceCount, int64_t count) {
  REMAT_GRID_LOOP(o, count) {
    out[o] = body::reduceElement(op, x, keptSpace, kept, reducedSpace, reduced,
                                 reduceCount, o);
  }
}

/// Reductions whose reduced dims end the input (contiguous): Group threads
/// (a warp, or the whole block) per output, reading consecutive inputs,
/// combined in KernelBodies.h's fixed tree.
template <typename T, int Group>
__global__ void
reduceGroupsKernel(body::ReduceOp op, const T *x, T *out,
                   const __grid_constant__ body::Dims keptSpace,
                   const __grid_constant__ body::Strides kept,
                   const __grid_constant__ body::Dims reducedSpace,
                   const __grid_constant__ body::Strides reduced,
                   int64_t reduceCount, int64_t count) {
  constexpr int kPerBlock = kThreads / Group;
  __shared__ T partial[kThreads];
  int lane = threadIdx.x % Group, slot = threadIdx.x / Group;
  // The trip count is the block's, not the thread's: every thread meets
  // every __syncthreads.
  for (int64_t first = int64_t(blockIdx.x) * kPerBlock; first < count;
       first += int64_t(gridDim.x) * kPerBlock) {
    int64_t o = first + slot;
    T acc = body::reduceIdentity<T>(op);
    if (o < count)
      acc =
          body::reducePartial(op, x, body::offsetOf(keptSpace, kept, o),
                              reducedSpace, reduced, reduceCount, lane, Group);
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = Group / 2; s > 0; s /= 2) {
      if (lane < s)
        partial[threadIdx.x] = body::reduceCombine(op, partial[threadIdx.x],
                                                   partial[threadIdx.x + s]);
      __syncthreads();
    }
    if (lane == 0 && o < count)
      out[o] = body::reduceFinish(op, partial[threadIdx.x], reduceCount);
    __syncthreads();
  }
}

constexpr int kColumnLanes = 32, kColumnRows = 32;

/// Reductions whose kept dims end the input (a bias's gradient: the sum
/// over rows of each column): a block of kColumnLanes consecutive outputs,
/// kColumnRows threads down each, so that a warp reads consecutive inputs;
/// combined in KernelBodies.h's fixed tree. 1024 threads a block leave 64
/// registers a thread: the launch bound holds the compiler to them (it used
/// 58 to 60 on sm_80 without it), or the launch would fail.
template <typename T>
__global__ void __launch_bounds__(kColumnLanes *kColumnRows)
    reduceColumnsKernel(body::ReduceOp op, const T *x, T *out,
                        const __grid_constant__ body::Dims keptSpace,
                        const __grid_constant__ body::Strides kept,
                        const __grid_constant__ body::Dims reducedSpace,
                        const __grid_constant__ body::Strides reduced,
                        int64_t reduceCount, int64_t count) {
  __shared__ T partial[kColumnRows][kColumnLanes + 1];
  int lane = threadIdx.x % kColumnLanes, row = threadIdx.x / kColumnLanes;
  for (int64_t first = int64_t(blockIdx.x) * kColumnLanes; first < count;
       first += int64_t(gridDim.x) * kColumnLanes) {
    int64_t o = first + lane;
    T acc = body::reduceIdentity<T>(op);
    if (o < count)
      acc = body::reducePartial(op, x, body::offsetOf(keptSpace, kept, o),
                                reducedSpace, reduced, reduceCount, row,
                                kColumnRows);
    partial[row][lane] = acc;
    __syncthreads();
    for (int s = kColumnRows / 2; s > 0; s /= 2) {
      if (row < s)
        partial[row][lane] =
            body::reduceCombine(op, partial[row][lane], partial[row + s][lane]);
      __syncthreads();
    }
    if (row == 0 && o < count)
      out[o] = body::reduceFinish(op, partial[0][lane], reduceCount);
    __syncthreads();
  }
}

template <typename T, typename I>
__global__ void gatherKernel(const T *data, const I *indices, T *out,
                             int64_t axisSize, int64_t inner, int64_t n,
                             int64_t total, int *errorFlag) {
  REMAT_GRID_LOOP(o, total) {
    int64_t offset = body::gatherOffset(indices, n, axisSize, inner, o);
    if (offset < 0) {
      *errorFlag = 1;
      out[o] = T(0);
    } else {
      out[o] = data[offset];
    }
  }
}

template <typename T, typename L>
__global__ void crossEntropyGradKernel(const T *logProb, const L *labels,
                                       const T *scale, T *out,
                                       int64_t classes, int64_t spatial,
                                       int64_t total) {
  REMAT_GRID_LOOP(i, total) {
    int64_t s = i % spatial;
    int64_t c = (i / spatial) % classes;
    int64_t row = (i / (spatial * classes)) * spatial + s;
    out[i] = body::crossEntropyGrad(
        logProb[i], static_cast<int64_t>(labels[row]) == c, scale[row]);
  }
}

} // namespace

int launchUnary(StreamHandle stream, body::UnaryOp op, ElemType type,
                const void *in, void *out, int64_t count) {
  if (count == 0)
    return 0;
  return dispatchType(type, [&](auto tag) {
    using T = decltype(tag);
    unaryKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        op, static_cast<const T *>(in), static_cast<T *>(out), count);
    return lastError();
  });
}

int launchBinary(StreamHandle stream, body::BinaryOp op, ElemType type,
                 const void *a, const void *b, void *out,
                 const body::Dims &space, const body::Strides &la,
                 const body::Strides &lb) {
  int64_t count = product(space);
  if (count == 0)
    return 0;
  body::Dims dims = space;
  body::Strides layoutA = la, layoutB = lb;
  body::collapseDims(dims, layoutA, layoutB);
  return dispatchType(type, [&](auto tag) {
    using T = decltype(tag);
    binaryKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        op, static_cast<const T *>(a), static_cast<const T *>(b), out, dims,
        layoutA, layoutB, count);
    return lastError();
  });
}

int launchWhere(StreamHandle stream, unsigned elementSize, const void *cond,
                const void *x, const void *y, void *out,
                const body::Dims &space, const body::Strides &lc,
                const body::Strides &lx, const body::Strides &ly) {
  int64_t count = product(space);
  if (count == 0)
    return 0;
  body::Dims dims = space;
  body::Strides layoutC = lc, layoutX = lx, layoutY = ly;
  body::collapseDims(dims, layoutC, layoutX, layoutY);
  return dispatchSize(elementSize, [&](auto tag) {
    using T = decltype(tag);
    whereKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const uint8_t *>(cond), static_cast<const T *>(x),
        static_cast<const T *>(y), static_cast<T *>(out), dims, layoutC,
        layoutX, layoutY, count);
    return lastError();
  });
}

int launchCast(StreamHandle stream, ElemType from, ElemType to, bool toBool,
               const void *in, void *out, int64_t count) {
  if (count == 0)
    return 0;
  return dispatchType(from, [&](auto fromTag) {
    using From = decltype(fromTag);
    if (toBool) {
      castToBoolKernel<From><<<blocksFor(count), kThreads, 0,
                               asStream(stream)>>>(
          static_cast<const From *>(in), static_cast<uint8_t *>(out), count);
      return lastError();
    }
    return dispatchType(to, [&](auto toTag) {
      using To = decltype(toTag);
      castKernel<To, From><<<blocksFor(count), kThreads, 0,
                             asStream(stream)>>>(
          static_cast<const From *>(in), static_cast<To *>(out), count);
      return lastError();
    });
  });
}

int launchStridedCopy(StreamHandle stream, unsigned elementSize,
                      const void *in, void *out, const body::Dims &space,
                      const body::Strides &lin, const body::Strides &lout) {
  int64_t count = product(space);
  if (count == 0)
    return 0;
  body::Dims dims = space;
  body::Strides layoutIn = lin, layoutOut = lout;
  body::collapseDims(dims, layoutIn, layoutOut);
  return dispatchSize(elementSize, [&](auto tag) {
    using T = decltype(tag);
    stridedCopyKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(in), static_cast<T *>(out), dims, layoutIn,
        layoutOut, count);
    return lastError();
  });
}

int launchFill(StreamHandle stream, unsigned elementSize, const void *value,
               void *out, int64_t count) {
  if (count == 0)
    return 0;
  return dispatchSize(elementSize, [&](auto tag) {
    using T = decltype(tag);
    T v;
    memcpy(&v, value, sizeof(T));
    fillKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        v, static_cast<T *>(out), count);
    return lastError();
  });
}

int launchDropout(StreamHandle stream, ElemType type, const void *x, void *y,
                  uint8_t *mask, int64_t count, uint64_t key,
                  uint32_t threshold, double scale) {
  if (count == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    dropoutKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(x), static_cast<T *>(y), mask, count, key,
        threshold, static_cast<T>(scale));
    return lastError();
  });
}

int launchSoftmax(StreamHandle stream, ElemType type, bool isLog,
                  const void *x, void *y, int64_t outer, int64_t n,
                  int64_t inner) {
  if (outer * inner == 0 || n == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    softmaxKernel<T><<<blocksFor(outer * inner), kThreads, 0,
                       asStream(stream)>>>(static_cast<const T *>(x),
                                           static_cast<T *>(y), outer, n,
                                           inner, isLog);
    return lastError();
  });
}

int launchDropoutGrad(StreamHandle stream, ElemType type, const void *dy,
                      const uint8_t *mask, const void *scale, void *dx,
                      int64_t count) {
  if (count == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    dropoutGradKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(dy), mask, static_cast<const T *>(scale),
        static_cast<T *>(dx), count);
    return lastError();
  });
}

int launchSoftmaxGrad(StreamHandle stream, ElemType type, const void *dy,
                      const void *y, void *dx, int64_t outer, int64_t n,
                      int64_t inner) {
  if (outer * inner == 0 || n == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    softmaxGradKernel<T><<<blocksFor(outer * inner), kThreads, 0,
                           asStream(stream)>>>(
        static_cast<const T *>(dy), static_cast<const T *>(y),
        static_cast<T *>(dx), outer, n, inner);
    return lastError();
  });
}

int launchLayerNormGrad(StreamHandle stream, ElemType type, const void *dy,
                        const void *x, const void *scale, const void *mean,
                        const void *invStdDev, void *dx, int64_t rows,
                        int64_t n) {
  if (rows == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    layerNormGradKernel<T><<<blocksFor(rows), kThreads, 0,
                             asStream(stream)>>>(
        static_cast<const T *>(dy), static_cast<const T *>(x),
        static_cast<const T *>(scale), static_cast<const T *>(mean),
        static_cast<const T *>(invStdDev), static_cast<T *>(dx), rows, n);
    return lastError();
  });
}

int launchLayerNorm(StreamHandle stream, ElemType type, bool computeF64,
                    ElemType statsType, const void *x, const void *scale,
                    const void *bias, void *y, void *mean, void *invStdDev,
                    int64_t rows, int64_t n, float epsilon) {
  if (rows == 0)
    return 0;
  auto run = [&](auto tTag, auto uTag, auto sTag) {
    using T = decltype(tTag);
    using U = decltype(uTag);
    using S = decltype(sTag);
    layerNormKernel<T, U, S><<<blocksFor(rows), kThreads, 0,
                               asStream(stream)>>>(
        static_cast<const T *>(x), static_cast<const T *>(scale),
        static_cast<const T *>(bias), static_cast<T *>(y),
        static_cast<S *>(mean), static_cast<S *>(invStdDev), rows, n, epsilon);
    return lastError();
  };
  auto withStats = [&](auto tTag, auto uTag) {
    if (statsType == ElemType::F32)
      return run(tTag, uTag, float());
    return run(tTag, uTag, double());
  };
  if (type == ElemType::F64)
    return withStats(double(), double());
  if (computeF64)
    return withStats(float(), double());
  return withStats(float(), float());
}

int launchCrossEntropy(StreamHandle stream, ElemType type, bool labelsI64,
                       const void *scores, const void *labels,
                       const void *weights, void *losses, void *logProb,
                       void *reduced, bool mean, int64_t batch,
                       int64_t classes, int64_t spatial, bool hasIgnore,
                       int64_t ignoreIndex, int *errorFlag) {
  auto run = [&](auto tTag, auto lTag) {
    using T = decltype(tTag);
    using L = decltype(lTag);
    int64_t count = batch * spatial;
    if (count > 0)
      crossEntropyKernel<T, L><<<blocksFor(count), kThreads, 0,
                                 asStream(stream)>>>(
          static_cast<const T *>(scores), static_cast<const L *>(labels),
          static_cast<const T *>(weights), static_cast<T *>(losses),
          static_cast<T *>(logProb), batch, classes, spatial, hasIgnore,
          ignoreIndex, errorFlag);
    if (reduced)
      reduceCrossEntropyKernel<T, L><<<1, 1, 0, asStream(stream)>>>(
          static_cast<const T *>(losses), static_cast<const L *>(labels),
          static_cast<T *>(reduced), count, mean, hasIgnore, ignoreIndex,
          static_cast<const T *>(weights));
    return lastError();
  };
  return dispatchFloat(type, [&](auto tTag) {
    if (labelsI64)
      return run(tTag, int64_t());
    return run(tTag, int32_t());
  });
}

int launchCrossEntropyGrad(StreamHandle stream, ElemType type,
                           bool labelsI64, const void *logProb,
                           const void *labels, const void *scale, void *out,
                           int64_t batch, int64_t classes, int64_t spatial) {
  int64_t total = batch * classes * spatial;
  if (total == 0)
    return 0;
  auto run = [&](auto tTag, auto lTag) {
    using T = decltype(tTag);
    using L = decltype(lTag);
    crossEntropyGradKernel<T, L><<<blocksFor(total), kThreads, 0,
                                   asStream(stream)>>>(
        static_cast<const T *>(logProb), static_cast<const L *>(labels),
        static_cast<const T *>(scale), static_cast<T *>(out), classes,
        spatial, total);
    return lastError();
  };
  return dispatchFloat(type, [&](auto tTag) {
    if (labelsI64)
      return run(tTag, int64_t());
    return run(tTag, int32_t());
  });
}

int launchReduce(StreamHandle stream, body::ReduceOp op, ElemType type,
                 const void *x, void *out, const body::Dims &keptSpace,
                 const body::Strides &kept, const body::Dims &reducedSpace,
                 const body::Strides &reduced, int64_t reduceCount) {
  int64_t count = product(keptSpace);
  if (count == 0)
    return 0;
  body::Dims keptDims = keptSpace, reducedDims = reducedSpace;
  body::Strides keptLayout = kept, reducedLayout = reduced;
  body::collapseDims(keptDims, keptLayout);
  body::collapseDims(reducedDims, reducedLayout);
  bool rows =
      reducedDims.rank > 0 && reducedLayout.strides[reducedDims.rank - 1] == 1;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *result = static_cast<T *>(out);
    if (op == body::ReduceOp::LogSumExp || reduceCount == 0) {
      // One thread an output, the CPU's order.
      reduceKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
          op, in, result, keptDims, keptLayout, reducedDims, reducedLayout,
          reduceCount, count);
    } else if (rows && count < 1024) {
      reduceGroupsKernel<T, kThreads>
          <<<gridFor(count), kThreads, 0, asStream(stream)>>>(
              op, in, result, keptDims, keptLayout, reducedDims, reducedLayout,
              reduceCount, count);
    } else if (rows) {
      constexpr int kPerBlock = kThreads / 32;
      reduceGroupsKernel<T, 32><<<gridFor((count + kPerBlock - 1) / kPerBlock),
                                  kThreads, 0, asStream(stream)>>>(
          op, in, result, keptDims, keptLayout, reducedDims, reducedLayout,
          reduceCount, count);
    } else {
      reduceColumnsKernel<T>
          <<<gridFor((count + kColumnLanes - 1) / kColumnLanes),
             kColumnLanes * kColumnRows, 0, asStream(stream)>>>(
              op, in, result, keptDims, keptLayout, reducedDims, reducedLayout,
              reduceCount, count);
    }
    return lastError();
  });
}

namespace {

template <typename T>
__global__ void argReduceKernel(bool isMax, bool last, const T *x, int64_t *out,
                                int64_t count, int64_t inner, int64_t total) {
  REMAT_GRID_LOOP(o, total)
  out[o] = body::argReduceElement(isMax, last, x, count, inner, o);
}

} // namespace

int launchArgReduce(StreamHandle stream, bool isMax, bool last, ElemType type,
                    const void *x, void *out, int64_t outer, int64_t count,
                    int64_t inner) {
  int64_t total = outer * inner;
  if (total == 0)
    return 0;
  return dispatchType(type, [&](auto tag) {
    using T = decltype(tag);
    argReduceKernel<T><<<blocksFor(total), kThreads, 0, asStream(stream)>>>(
        isMax, last, static_cast<const T *>(x), static_cast<int64_t *>(out),
        count, inner, total);
    return lastError();
  });
}

int launchGather(StreamHandle stream, unsigned elementSize, bool indicesI64,
                 const void *data, const void *indices, void *out,
                 int64_t outer, int64_t axisSize, int64_t inner,
                 int64_t count, int *errorFlag) {
  int64_t total = outer * count * inner;
  if (total == 0)
    return 0;
  return dispatchSize(elementSize, [&](auto tag) {
    using T = decltype(tag);
    if (indicesI64)
      gatherKernel<T, int64_t><<<blocksFor(total), kThreads, 0,
                                 asStream(stream)>>>(
          static_cast<const T *>(data), static_cast<const int64_t *>(indices),
          static_cast<T *>(out), axisSize, inner, count, total, errorFlag);
    else
      gatherKernel<T, int32_t><<<blocksFor(total), kThreads, 0,
                                 asStream(stream)>>>(
          static_cast<const T *>(data), static_cast<const int32_t *>(indices),
          static_cast<T *>(out), axisSize, inner, count, total, errorFlag);
    return lastError();
  });
}

//===----------------------------------------------------------------------===//
// Issue 13: Not, IsNaN, IsInf, Trilu, CumSum, GatherElements, Pad
//===----------------------------------------------------------------------===//

namespace {

__global__ void notKernel(const uint8_t *in, uint8_t *out, int64_t count) {
  REMAT_GRID_LOOP(i, count) out[i] = in[i] == 0;
}

template <typename T>
__global__ void floatClassKernel(const T *in, uint8_t *out, bool isInf,
                                 bool negative, bool positive, int64_t count) {
  REMAT_GRID_LOOP(i, count) {
    T x = in[i];
    if (!isInf)
      out[i] = x != x;
    else
      out[i] = (positive && x > T(0) && isinf(x)) ||
               (negative && x < T(0) && isinf(x));
  }
}

template <typename T>
__global__ void triluKernel(const T *in, T *out, int64_t rows, int64_t cols,
                            int64_t count, bool upper, const int64_t *k) {
  int64_t diagonal = k ? *k : 0;
  REMAT_GRID_LOOP(o, count) {
    bool keep = body::triluKeeps(upper, diagonal, (o / cols) % rows, o % cols);
    out[o] = keep ? in[o] : T(0);
  }
}

template <typename T>
__global__ void cumSumKernel(const T *x, T *y, int64_t length, int64_t inner,
                             int64_t lines, bool exclusive, bool reverse) {
  REMAT_GRID_LOOP(line, lines) {
    int64_t base = (line / inner) * length * inner + line % inner;
    body::cumSumLine(x + base, y + base, length, inner, exclusive, reverse);
  }
}

template <typename T, typename I>
__global__ void
gatherElementsKernel(const T *data, const I *indices, T *out,
                     const __grid_constant__ body::Dims space,
                     const __grid_constant__ body::Strides strides, int axis,
                     int64_t axisSize, int64_t count, int *errorFlag) {
  REMAT_GRID_LOOP(o, count) {
    int64_t offset = body::scatterTarget(indices, space, strides.strides,
                                         axis, axisSize, o);
    if (offset < 0) {
      *errorFlag = 1;
      out[o] = T(0);
    } else {
      out[o] = data[offset];
    }
  }
}

template <typename T>
__global__ void padKernel(const T *in, T *out,
                          const __grid_constant__ body::Dims outSpace,
                          const __grid_constant__ body::Dims inSpace,
                          const __grid_constant__ body::Strides begin,
                          body::PadMode mode, const T *value, int64_t count) {
  T fill = value ? *value : T(0);
  REMAT_GRID_LOOP(o, count) {
    int64_t offset =
        body::padOffset(outSpace, inSpace, begin.strides, mode, o);
    out[o] = offset < 0 ? fill : in[offset];
  }
}

} // namespace

int launchNot(StreamHandle stream, const void *in, void *out, int64_t count) {
  if (count == 0)
    return 0;
  notKernel<<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
      static_cast<const uint8_t *>(in), static_cast<uint8_t *>(out), count);
  return lastError();
}

int launchFloatClass(StreamHandle stream, ElemType type, bool isInf,
                     bool detectNegative, bool detectPositive, const void *in,
                     void *out, int64_t count) {
  if (count == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    floatClassKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(in), static_cast<uint8_t *>(out), isInf,
        detectNegative, detectPositive, count);
    return lastError();
  });
}

int launchTrilu(StreamHandle stream, unsigned elementSize, const void *in,
                void *out, int64_t rows, int64_t cols, int64_t count,
                bool upper, const int64_t *k) {
  if (count == 0)
    return 0;
  return dispatchSize(elementSize, [&](auto tag) {
    using T = decltype(tag);
    triluKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(in), static_cast<T *>(out), rows, cols, count,
        upper, k);
    return lastError();
  });
}

int launchCumSum(StreamHandle stream, ElemType type, const void *x, void *y,
                 int64_t outer, int64_t length, int64_t inner, bool exclusive,
                 bool reverse) {
  int64_t lines = outer * inner;
  if (lines == 0 || length == 0)
    return 0;
  return dispatchType(type, [&](auto tag) {
    using T = decltype(tag);
    cumSumKernel<T><<<blocksFor(lines), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(x), static_cast<T *>(y), length, inner, lines,
        exclusive, reverse);
    return lastError();
  });
}

int launchGatherElements(StreamHandle stream, unsigned elementSize,
                         bool indicesI64, const void *data,
                         const void *indices, void *out,
                         const body::Dims &indexSpace,
                         const body::Strides &dataStrides, int axis,
                         int64_t axisSize, int64_t count, int *errorFlag) {
  if (count == 0)
    return 0;
  return dispatchSize(elementSize, [&](auto tag) {
    using T = decltype(tag);
    if (indicesI64)
      gatherElementsKernel<T, int64_t>
          <<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
              static_cast<const T *>(data),
              static_cast<const int64_t *>(indices), static_cast<T *>(out),
              indexSpace, dataStrides, axis, axisSize, count, errorFlag);
    else
      gatherElementsKernel<T, int32_t>
          <<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
              static_cast<const T *>(data),
              static_cast<const int32_t *>(indices), static_cast<T *>(out),
              indexSpace, dataStrides, axis, axisSize, count, errorFlag);
    return lastError();
  });
}

int launchPad(StreamHandle stream, unsigned elementSize, const void *in,
              void *out, const body::Dims &outSpace, const body::Dims &inSpace,
              const body::Strides &begin, body::PadMode mode,
              const void *value) {
  int64_t count = product(outSpace);
  if (count == 0)
    return 0;
  return dispatchSize(elementSize, [&](auto tag) {
    using T = decltype(tag);
    padKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(in), static_cast<T *>(out), outSpace, inSpace,
        begin, mode, static_cast<const T *>(value), count);
    return lastError();
  });
}

//===----------------------------------------------------------------------===//
// Issue 40: Clip, Tile, TopK
//===----------------------------------------------------------------------===//

namespace {

template <typename T>
__global__ void clipKernel(const T *in, const T *lo, const T *hi, T *out,
                           int64_t count) {
  REMAT_GRID_LOOP(i, count) out[i] = body::clipElement(in[i], lo, hi);
}

template <typename T>
__global__ void
tileKernel(const T *in, T *out, const __grid_constant__ body::Dims outSpace,
           const __grid_constant__ body::Dims inSpace, int64_t count) {
  REMAT_GRID_LOOP(o, count) out[o] = in[body::tileOffset(outSpace, inSpace, o)];
}

template <typename T>
__global__ void topKKernel(const T *in, T *values, int64_t *indices,
                           int64_t count, int64_t inner, int64_t k,
                           bool largest, int64_t total) {
  REMAT_GRID_LOOP(e, total) {
    int64_t i = e % inner, rest = e / inner;
    int64_t j = rest % count, o = rest / count;
    const T *line = in + o * count * inner + i;
    int64_t place = body::topKPlace(line, count, inner, j, largest);
    if (place < k) {
      int64_t at = (o * k + place) * inner + i;
      values[at] = line[j * inner];
      indices[at] = j;
    }
  }
}

} // namespace

int launchClip(StreamHandle stream, ElemType type, const void *in,
               const void *lo, const void *hi, void *out, int64_t count) {
  if (count == 0)
    return 0;
  return dispatchType(type, [&](auto tag) {
    using T = decltype(tag);
    clipKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(in), static_cast<const T *>(lo),
        static_cast<const T *>(hi), static_cast<T *>(out), count);
    return lastError();
  });
}

int launchTopK(StreamHandle stream, ElemType type, const void *in, void *values,
               void *indices, int64_t outer, int64_t count, int64_t inner,
               int64_t k, bool largest) {
  int64_t total = outer * count * inner;
  if (total == 0 || k == 0)
    return 0;
  return dispatchType(type, [&](auto tag) {
    using T = decltype(tag);
    topKKernel<T><<<blocksFor(total), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(in), static_cast<T *>(values),
        static_cast<int64_t *>(indices), count, inner, k, largest, total);
    return lastError();
  });
}

int launchTile(StreamHandle stream, unsigned elementSize, const void *in,
               void *out, const body::Dims &outSpace,
               const body::Dims &inSpace) {
  int64_t count = product(outSpace);
  if (count == 0)
    return 0;
  return dispatchSize(elementSize, [&](auto tag) {
    using T = decltype(tag);
    tileKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(in), static_cast<T *>(out), outSpace, inSpace,
        count);
    return lastError();
  });
}

namespace {

template <typename T>
__global__ void convKernel(const T *x, const T *w, const T *bias, T *y,
                           const __grid_constant__ body::ConvShape shape,
                           int64_t count) {
  REMAT_GRID_LOOP(e, count) { y[e] = body::convElement(shape, x, w, bias, e); }
}

} // namespace

int launchConv(StreamHandle stream, ElemType type, const void *x,
               const void *w, const void *bias, void *y,
               const body::ConvShape &shape, int64_t count) {
  if (count == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    convKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(x), static_cast<const T *>(w),
        static_cast<const T *>(bias), static_cast<T *>(y), shape, count);
    return lastError();
  });
}

namespace {

template <typename T>
__global__ void poolKernel(const T *x, T *y,
                           const __grid_constant__ body::PoolShape shape,
                           bool max, int64_t count) {
  REMAT_GRID_LOOP(e, count) { y[e] = body::poolElement(shape, max, x, e); }
}

template <typename T>
__global__ void poolGradKernel(const T *dy, const T *x, T *dx,
                               const __grid_constant__ body::PoolShape shape,
                               int64_t count) {
  REMAT_GRID_LOOP(e, count) { dx[e] = body::poolGradElement(shape, dy, x, e); }
}

} // namespace

int launchPool(StreamHandle stream, ElemType type, const void *x, void *y,
               const body::PoolShape &shape, bool max, int64_t count) {
  if (count == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    poolKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(x), static_cast<T *>(y), shape, max, count);
    return lastError();
  });
}

int launchPoolGrad(StreamHandle stream, ElemType type, const void *dy,
                   const void *x, void *dx, const body::PoolShape &shape,
                   int64_t count) {
  if (count == 0)
    return 0;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    poolGradKernel<T><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
        static_cast<const T *>(dy), static_cast<const T *>(x),
        static_cast<T *>(dx), shape, count);
    return lastError();
  });
}

} // namespace remat::runtime::cuda
