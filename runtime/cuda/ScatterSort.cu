//===- runtime/cuda/ScatterSort.cu - Deterministic ScatterElements ---------===//
//
// ScatterElements "add"/"mul" without atomics: every update's target offset
// is computed, the (target, position) pairs are sorted by target with CUB's
// stable radix sort, and one thread per output element applies the updates
// that target it in increasing position order, the order the CPU applies
// them in. The sort's buffers are the workspace the backend sets aside at
// compile time (scatterWorkspaceBytes).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/LaunchSupport.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

namespace remat::runtime::cuda {

using namespace launch;

namespace {

uint64_t alignUp(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

/// CUB's temporary storage for sorting \p count pairs.
uint64_t sortTempBytes(int64_t count) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const int64_t *)nullptr,
                                  (int64_t *)nullptr, (const int64_t *)nullptr,
                                  (int64_t *)nullptr, count);
  return bytes;
}

template <typename I>
__global__ void
targetsKernel(const I *indices, const __grid_constant__ body::Dims updateSpace,
              const __grid_constant__ body::Strides dataStrides, int axis,
              int64_t axisSize, int64_t *targets, int64_t *positions,
              int64_t count, int *errorFlag) {
  REMAT_GRID_LOOP(p, count) {
    int64_t target = body::scatterTarget(indices, updateSpace,
                                         dataStrides.strides, axis, axisSize,
                                         p);
    if (target < 0) {
      *errorFlag = 1;
      target = INT64_MAX; // sorts last; no output element looks it up
    }
    targets[p] = target;
    positions[p] = p;
  }
}

template <typename T>
__global__ void combineKernel(const T *data, const T *updates, T *out,
                              const int64_t *sortedTargets,
                              const int64_t *sortedPositions, int64_t count,
                              int64_t dataCount, bool multiply) {
  REMAT_GRID_LOOP(o, dataCount) {
    int64_t begin = body::lowerBound(sortedTargets, count, o);
    int64_t end = body::lowerBound(sortedTargets, count, o + 1);
    out[o] = body::scatterCombine(data[o], updates, sortedPositions, begin,
                                  end, multiply);
  }
}

template <typename T, typename I>
__global__ void
scatterNoneKernel(const I *indices, const T *updates, T *out,
                  const __grid_constant__ body::Dims updateSpace,
                  const __grid_constant__ body::Strides dataStrides, int axis,
                  int64_t axisSize, int64_t count, int *errorFlag) {
  REMAT_GRID_LOOP(p, count) {
    int64_t target = body::scatterTarget(indices, updateSpace,
                                         dataStrides.strides, axis, axisSize,
                                         p);
    if (target < 0)
      *errorFlag = 1;
    else
      out[target] = updates[p];
  }
}

} // namespace

uint64_t scatterWorkspaceBytes(int64_t count) {
  // targets and positions, each sorted into a second buffer, and CUB's own.
  return 4 * alignUp(uint64_t(count) * sizeof(int64_t)) +
         alignUp(sortTempBytes(count));
}

int launchScatter(StreamHandle streamHandle, ElemType type,
                  unsigned elementSize, int reduction, bool indicesI64,
                  const void *data, const void *indices, const void *updates,
                  void *out, int64_t dataCount, const body::Dims &updateSpace,
                  const int64_t *dataStrides, int axis, int64_t axisSize,
                  void *workspace, int *errorFlag) {
  cudaStream_t stream = asStream(streamHandle);
  int64_t count = product(updateSpace);
  body::Strides strides;
  for (int d = 0; d < updateSpace.rank; ++d)
    strides.strides[d] = dataStrides[d];
  if (reduction == 0) {
    if (out != data && dataCount > 0)
      if (cudaError_t err = cudaMemcpyAsync(out, data, dataCount * elementSize,
                                            cudaMemcpyDeviceToDevice, stream))
        return static_cast<int>(err);
    if (count == 0)
      return 0;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      if (indicesI64)
        scatterNoneKernel<T, int64_t><<<blocksFor(count), kThreads, 0,
                                        stream>>>(
            static_cast<const int64_t *>(indices),
            static_cast<const T *>(updates), static_cast<T *>(out),
            updateSpace, strides, axis, axisSize, count, errorFlag);
      else
        scatterNoneKernel<T, int32_t><<<blocksFor(count), kThreads, 0,
                                        stream>>>(
            static_cast<const int32_t *>(indices),
            static_cast<const T *>(updates), static_cast<T *>(out),
            updateSpace, strides, axis, axisSize, count, errorFlag);
      return lastError();
    };
    return dispatchSize(elementSize, run);
  }

  // add / mul
  char *base = static_cast<char *>(workspace);
  uint64_t slot = alignUp(uint64_t(count) * sizeof(int64_t));
  int64_t *targets = reinterpret_cast<int64_t *>(base);
  int64_t *positions = reinterpret_cast<int64_t *>(base + slot);
  int64_t *sortedTargets = reinterpret_cast<int64_t *>(base + 2 * slot);
  int64_t *sortedPositions = reinterpret_cast<int64_t *>(base + 3 * slot);
  void *temp = base + 4 * slot;
  size_t tempBytes = sortTempBytes(count);
  if (count > 0) {
    if (indicesI64)
      targetsKernel<int64_t><<<blocksFor(count), kThreads, 0, stream>>>(
          static_cast<const int64_t *>(indices), updateSpace, strides, axis,
          axisSize, targets, positions, count, errorFlag);
    else
      targetsKernel<int32_t><<<blocksFor(count), kThreads, 0, stream>>>(
          static_cast<const int32_t *>(indices), updateSpace, strides, axis,
          axisSize, targets, positions, count, errorFlag);
    if (cudaError_t err = cudaGetLastError())
      return static_cast<int>(err);
    if (cudaError_t err = cub::DeviceRadixSort::SortPairs(
            temp, tempBytes, targets, sortedTargets, positions,
            sortedPositions, count, 0, 64, stream))
      return static_cast<int>(err);
  }
  if (dataCount == 0)
    return 0;
  bool multiply = reduction == 2;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    combineKernel<T><<<blocksFor(dataCount), kThreads, 0, stream>>>(
        static_cast<const T *>(data), static_cast<const T *>(updates),
        static_cast<T *>(out), sortedTargets, sortedPositions, count,
        dataCount, multiply);
    return lastError();
  };
  switch (type) {
  case ElemType::F32:
    return run(float());
  case ElemType::F64:
    return run(double());
  case ElemType::I64:
    return run(int64_t());
  case ElemType::I32:
    return run(int32_t());
  default: // The backend asks add and mul of these four types only.
    return static_cast<int>(cudaErrorInvalidValue);
  }
}

} // namespace remat::runtime::cuda
