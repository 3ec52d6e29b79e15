//===- runtime/cuda/RunnerImpl.h - Parts the CUDA runners share -*- C++ -*-===//
//
// Internal to runtime/cuda: the device, the runner type, cuBLAS's entry
// points, the layout helpers of the kernels' plans, and the per-family
// selection functions that selectDeviceRunner() (CudaBackend.cpp) hands a
// node to by its CPU kernel family (Ops.def's Kernel column), one file per
// op family as in runtime/cpu:
//
//   Elementwise.cpp    unary and binary arithmetic, comparisons, Where, Cast,
//                      Dropout, remat.DropoutGrad, Not, IsNaN, IsInf, Sign
//   Linalg.cpp         MatMul, Gemm (cuBLAS)
//   Normalization.cpp  Softmax, LogSoftmax, LayerNormalization,
//                      SoftmaxCrossEntropyLoss, remat.SoftmaxGrad,
//                      remat.LayerNormalizationGrad,
//                      remat.SoftmaxCrossEntropyGrad
//   Reductions.cpp     ReduceSum, ReduceMean, ReduceMax, ArgMax, ArgMin
//   DataMovement.cpp   Identity, Reshape, (Un)Squeeze, Transpose, Expand,
//                      Concat, Split, Slice, Gather, ScatterElements,
//                      ConstantOfShape
//   Indexing.cpp       GatherElements, Trilu, CumSum, Pad, Tile, TopK
//   Conv.cpp           Conv, ConvTranspose, MaxPool, AveragePool and their
//                      gradients
//
// Selection runs once per node on the host and touches no device: a runner
// captures its plan by value and only queues kernels. A family returns
// nothing for a node its kernels do not cover (an op, a dtype, an attribute
// value, or an operand known only at run time); that node runs on the host.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CUDA_RUNNERIMPL_H
#define REMAT_RUNTIME_CUDA_RUNNERIMPL_H

#include "ir/Graph.h"
#include "ir/Support.h"
#include "runtime/Device.h"
#include "runtime/Tensor.h"
#include "runtime/cuda/Kernels.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace remat::runtime::cuda::detail {

using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::Twine;

inline Error cudaError(cudaError_t err, const Twine &what) {
  return makeError(what + " failed: " + cudaGetErrorName(err) + " (" +
                   cudaGetErrorString(err) + ")");
}

inline Error cublasError(cublasStatus_t status, const Twine &what) {
  return makeError(what + " failed: cuBLAS status " + Twine(int(status)));
}

/// cuBLAS, opened when the first CUDA executable is compiled rather than
/// linked: libcublasLt alone is half a GiB, and loading it with every tool
/// costs each run (on the CPU too) 150 MiB of resident memory.
struct CublasApi {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) setStream = nullptr;
  decltype(&cublasSetWorkspace) setWorkspace = nullptr;
  decltype(&cublasSetMathMode) setMathMode = nullptr;
  decltype(&cublasSgemm) sgemm = nullptr;
  decltype(&cublasDgemm) dgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemmStridedBatched = nullptr;
  decltype(&cublasDgemmStridedBatched) dgemmStridedBatched = nullptr;
};

/// Bound by loadCublas(), before the first executable is made.
extern CublasApi gCublas;

//===----------------------------------------------------------------------===//
// The device
//===----------------------------------------------------------------------===//

/// One GPU, one stream, and a flag that kernels set when an index or label
/// is out of range (checked at every synchronize).
class CudaDevice : public Device {
public:
  ~CudaDevice() override {
    uploads_.clear();
    if (errorFlag_)
      cudaFree(errorFlag_);
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  Error init() {
    if (cudaError_t err = cudaSetDevice(0))
      return cudaError(err, "cudaSetDevice");
    if (cudaError_t err = cudaStreamCreateWithFlags(&stream_,
                                                    cudaStreamNonBlocking))
      return cudaError(err, "cudaStreamCreate");
    if (cudaError_t err = cudaMalloc(reinterpret_cast<void **>(&errorFlag_), sizeof(int)))
      return cudaError(err, "cudaMalloc of the error flag");
    if (cudaError_t err = cudaMemset(errorFlag_, 0, sizeof(int)))
      return cudaError(err, "cudaMemset");
    return Error::success();
  }

  llvm::StringRef getName() const override { return "cuda"; }
  cudaStream_t getStream() const { return stream_; }
  int *getErrorFlag() const { return errorFlag_; }
  uint64_t getInputBytes() const { return inputBytes_; }

  Expected<DeviceBuffer> allocate(uint64_t bytes, const Twine &what) override {
    void *data = nullptr;
    if (cudaError_t err = cudaMalloc(&data, std::max<uint64_t>(bytes, 256)))
      return cudaError(err, "cudaMalloc of " + Twine(bytes) + " bytes for " +
                                what);
    return DeviceBuffer(data, [](void *p) { cudaFree(p); });
  }

  /// Graph inputs are uploaded the first time their host memory is seen and
  /// kept: weights cross the bus once. A caller that writes new values into
  /// the same host memory between steps must compile again.
  Expected<Tensor> upload(const Tensor &host, DeviceBuffer &holder) override {
    uint64_t bytes = uint64_t(host.getByteSize());
    auto key = std::make_pair(host.getData(), bytes);
    auto it = uploads_.find(key);
    if (it == uploads_.end()) {
      auto block = allocate(bytes, "an input");
      if (!block)
        return block.takeError();
      if (bytes)
        if (cudaError_t err =
                cudaMemcpyAsync(block->get(), host.getData(), bytes,
                                cudaMemcpyHostToDevice, stream_))
          return cudaError(err, "uploading an input");
      inputBytes_ += bytes;
      it = uploads_.emplace(key, std::move(*block)).first;
    }
    holder = it->second;
    return Tensor(host.getType(), it->second.get());
  }

  Expected<OwnedTensor> download(const Tensor &device,
                                 const DeviceBuffer &buffer) override {
    OwnedTensor host(device.getType());
    uint64_t bytes = uint64_t(device.getByteSize());
    if (bytes) {
      if (cudaError_t err =
              cudaMemcpyAsync(host.getData(), device.getData(), bytes,
                              cudaMemcpyDeviceToHost, stream_))
        return cudaError(err, "downloading an output");
      if (auto err = synchronize())
        return std::move(err);
    }
    return host;
  }

  Error synchronize() override {
    if (cudaError_t err = cudaStreamSynchronize(stream_))
      return cudaError(err, "running the step's kernels");
    int flag = 0;
    if (cudaError_t err =
            cudaMemcpy(&flag, errorFlag_, sizeof(int), cudaMemcpyDeviceToHost))
      return cudaError(err, "reading the error flag");
    if (flag) {
      cudaMemset(errorFlag_, 0, sizeof(int));
      return makeError("a Gather or ScatterElements index or a "
                       "SoftmaxCrossEntropyLoss label was out of range on "
                       "the cuda backend");
    }
    return Error::success();
  }

private:
  cudaStream_t stream_ = nullptr;
  int *errorFlag_ = nullptr;
  uint64_t inputBytes_ = 0;
  std::map<std::pair<void *, uint64_t>, DeviceBuffer> uploads_;
};

//===----------------------------------------------------------------------===//
// Planning kernels
//===----------------------------------------------------------------------===//

/// What a runner needs besides its tensors.
struct RunContext {
  CudaDevice &device;
  cublasHandle_t cublas;
  void *scratch;
};

using Runner = std::function<Error(const RunContext &, ArrayRef<Tensor>,
                                   ArrayRef<Tensor>)>;

/// A node's runner, or nothing when the device kernels do not cover it.
using MaybeRunner = std::optional<Runner>;

inline Error launched(int code, const ir::Node &node) {
  if (code == 0)
    return Error::success();
  return makeError(node.describe() + ": launching its kernel failed: " +
                   cudaGetErrorName(cudaError_t(code)));
}

inline std::optional<ElemType> elemType(ir::DType dtype) {
  switch (dtype) {
  case ir::DType::F32:
    return ElemType::F32;
  case ir::DType::F64:
    return ElemType::F64;
  case ir::DType::I64:
    return ElemType::I64;
  case ir::DType::I32:
    return ElemType::I32;
  case ir::DType::I8:
    return ElemType::I8;
  case ir::DType::U8:
  case ir::DType::Bool:
    return ElemType::U8;
  default:
    return std::nullopt;
  }
}

inline bool isFloatType(ir::DType dtype) {
  return dtype == ir::DType::F32 || dtype == ir::DType::F64;
}

inline std::vector<int64_t> rowMajor(ArrayRef<int64_t> dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t k = dims.size(); k > 1; --k)
    strides[k - 2] = strides[k - 1] * dims[k - 1];
  return strides;
}

inline body::Dims toDims(ArrayRef<int64_t> dims) {
  body::Dims space;
  space.rank = int(dims.size());
  for (size_t d = 0; d < dims.size(); ++d)
    space.dims[d] = dims[d];
  return space;
}

/// The strides of an operand of \p in dims broadcast to \p out dims.
inline body::Strides broadcastStrides(ArrayRef<int64_t> in,
                                      ArrayRef<int64_t> out) {
  body::Strides layout;
  std::vector<int64_t> strides = rowMajor(in);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    layout.strides[lead + d] = in[d] == 1 ? 0 : strides[d];
  return layout;
}

inline body::Strides contiguous(ArrayRef<int64_t> dims) {
  body::Strides layout;
  std::vector<int64_t> strides = rowMajor(dims);
  for (size_t d = 0; d < dims.size(); ++d)
    layout.strides[d] = strides[d];
  return layout;
}

inline bool fitsRank(const ir::Node &node) {
  for (const ir::Value *v : node.getOperands())
    if (v->getType().getRank() > unsigned(body::kMaxRank))
      return false;
  for (const ir::Value *v : node.getResults())
    if (v->getType().getRank() > unsigned(body::kMaxRank))
      return false;
  return true;
}

/// Values known when compiling.
using KnownValues = llvm::DenseMap<const ir::Value *, ir::TensorDataPtr>;

inline const ir::TensorData *knownOf(const KnownValues &known,
                                     const ir::Value *v) {
  auto it = known.find(v);
  return it == known.end() ? nullptr : it->second.get();
}

/// The node's 'axis' attribute (\p fallback when it has none) as an axis
/// of a tensor of rank \p rank.
inline unsigned axisAttr(const ir::Node &node, int64_t fallback,
                         unsigned rank) {
  int64_t axis = node.getAttrs().getInt("axis").value_or(fallback);
  return unsigned(axis < 0 ? axis + rank : axis);
}

/// Copies the operand into the result (nothing when they share memory).
Runner copyRunner();

/// A strided copy from operand \p operand into result \p result.
struct CopyPlan {
  body::Dims space;
  body::Strides in, out;
  unsigned operand = 0, result = 0;
};

//===----------------------------------------------------------------------===//
// The families
//===----------------------------------------------------------------------===//

/// The runner of an elementwise node (Elementwise.cpp).
MaybeRunner selectElementwise(const ir::Node &node, const KnownValues &known);
/// MatMul and Gemm through cuBLAS; TF32 tensor cores when \p allowTF32
/// (Linalg.cpp).
MaybeRunner selectMatMul(const ir::Node &node, bool allowTF32);
MaybeRunner selectGemm(const ir::Node &node, bool allowTF32);
/// Softmax, LayerNormalization, the loss and their gradients; raises
/// \p scratchBytes to what the loss's reduction needs (Normalization.cpp).
MaybeRunner selectNormalization(const ir::Node &node, uint64_t &scratchBytes);
/// ReduceSum, ReduceMean, ReduceMax; ArgMax, ArgMin (Reductions.cpp).
MaybeRunner selectReduce(const ir::Node &node, const KnownValues &known);
MaybeRunner selectArgReduce(const ir::Node &node, const KnownValues &known);
/// Copies, views and gathers; raises \p scratchBytes to what
/// ScatterElements' sort needs (DataMovement.cpp).
MaybeRunner selectDataMovement(const ir::Node &node, const KnownValues &known,
                               uint64_t &scratchBytes);
/// GatherElements, Trilu, CumSum, Pad, Tile, TopK (Indexing.cpp).
MaybeRunner selectIndexing(const ir::Node &node, const KnownValues &known);
/// Conv, ConvTranspose, MaxPool, AveragePool and their gradients (Conv.cpp).
MaybeRunner selectConv(const ir::Node &node);

} // namespace remat::runtime::cuda::detail

#endif // REMAT_RUNTIME_CUDA_RUNNERIMPL_H
