//===- runtime/cuda/LaunchSupport.cuh - Launch helpers ---------*- CUDA -*-===//
//
// What every .cu file of the cuda backend launches its kernels with: the
// block size and grid of a grid-stride loop, the stream and error
// conversions of Kernels.h's int-returning launchers, and the dispatch from
// an ElemType or an element size to a C++ type. Included by .cu files only.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CUDA_LAUNCHSUPPORT_CUH
#define REMAT_RUNTIME_CUDA_LAUNCHSUPPORT_CUH

#include "runtime/cuda/Kernels.h"

#include <cuda_runtime.h>

namespace remat::runtime::cuda::launch {

inline constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over \p tiles tiles of work, one a block:
/// at least 1, at most 65535 * 16 (the loop takes the rest).
inline unsigned gridFor(int64_t tiles) {
  if (tiles < 1)
    tiles = 1;
  return static_cast<unsigned>(tiles > 65535 * 16 ? 65535 * 16 : tiles);
}

/// Blocks of kThreads for a grid-stride loop over \p count elements: enough
/// for one element a thread, at most 65535 * 16.
inline unsigned blocksFor(int64_t count) {
  return gridFor((count + kThreads - 1) / kThreads);
}

inline cudaStream_t asStream(StreamHandle stream) {
  return static_cast<cudaStream_t>(stream);
}

/// The last launch's cudaError_t as Kernels.h's int.
inline int lastError() { return static_cast<int>(cudaGetLastError()); }

/// The number of elements of \p space.
inline int64_t product(const body::Dims &space) {
  int64_t count = 1;
  for (int d = 0; d < space.rank; ++d)
    count *= space.dims[d];
  return count;
}

/// Calls fn(T()) for a compute type.
template <typename Fn> int dispatchType(ElemType type, Fn &&fn) {
  switch (type) {
  case ElemType::F32:
    return fn(float());
  case ElemType::F64:
    return fn(double());
  case ElemType::I64:
    return fn(int64_t());
  case ElemType::I32:
    return fn(int32_t());
  case ElemType::I8:
    return fn(int8_t());
  case ElemType::U8:
    return fn(uint8_t());
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

/// Calls fn(T()) for f32 or f64.
template <typename Fn> int dispatchFloat(ElemType type, Fn &&fn) {
  if (type == ElemType::F32)
    return fn(float());
  if (type == ElemType::F64)
    return fn(double());
  return static_cast<int>(cudaErrorInvalidValue);
}

/// Calls fn(T()) for the unsigned type of \p size bytes (1, 2, 4 or 8).
template <typename Fn> int dispatchSize(unsigned size, Fn &&fn) {
  switch (size) {
  case 1:
    return fn(uint8_t());
  case 2:
    return fn(uint16_t());
  case 4:
    return fn(uint32_t());
  case 8:
    return fn(uint64_t());
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

} // namespace remat::runtime::cuda::launch

/// for (i over [0, count)) as a grid-stride loop.
#define REMAT_GRID_LOOP(i, count)                                              \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;             \
       i < (count); i += int64_t(blockDim.x) * gridDim.x)

#endif // REMAT_RUNTIME_CUDA_LAUNCHSUPPORT_CUH
