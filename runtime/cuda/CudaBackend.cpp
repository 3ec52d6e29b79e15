//===- runtime/cuda/CudaBackend.cpp - The CUDA backend --------------------===//
//
// Compile: verify, compute the values known without inputs on the host,
// choose per node a device runner (a plan captured by value that queues
// kernels) or, where the device kernels do not cover the node, a host runner
// (download, CPU kernel, upload). Run: the shared Executor walks the
// schedule over a CudaDevice.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaBackend.h"

#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "runtime/Device.h"
#include "runtime/DropoutMask.h"
#include "runtime/Executor.h"
#include "runtime/cpu/Evaluator.h"
#include "runtime/cuda/Kernels.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Twine.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

namespace remat::runtime::cuda {

using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::Twine;

namespace {

Error cudaError(cudaError_t err, const Twine &what) {
  return makeError(what + " failed: " + cudaGetErrorName(err) + " (" +
                   cudaGetErrorString(err) + ")");
}

Error cublasError(cublasStatus_t status, const Twine &what) {
  return makeError(what + " failed: cuBLAS status " + Twine(int(status)));
}

/// \returns used device bytes (total - free) per cudaMemGetInfo.
uint64_t usedDeviceBytes() {
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
    return 0;
  return uint64_t(totalBytes - freeBytes);
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

CublasApi gCublas;

/// Opens libcublas.so.<major of the headers> once. \returns an error naming
/// the library and dlerror()'s message when it or a symbol is missing.
Error loadCublasImpl() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    std::string soname =
        "libcublas.so." + std::to_string(int(CUBLAS_VER_MAJOR));
    void *lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *why = dlerror();
      failure = "the cuda backend cannot load cuBLAS (" + soname +
                "): " + (why ? why : "unknown reason");
      return;
    }
    auto bind = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(lib, name));
      if (!fn && failure.empty())
        failure = "the cuda backend cannot find " + std::string(name) +
                  " in " + soname;
    };
    CublasApi api;
    bind(api.create, "cublasCreate_v2");
    bind(api.destroy, "cublasDestroy_v2");
    bind(api.setStream, "cublasSetStream_v2");
    bind(api.setWorkspace, "cublasSetWorkspace_v2");
    bind(api.setMathMode, "cublasSetMathMode");
    bind(api.sgemm, "cublasSgemm_v2");
    bind(api.dgemm, "cublasDgemm_v2");
    bind(api.sgemmStridedBatched, "cublasSgemmStridedBatched");
    bind(api.dgemmStridedBatched, "cublasDgemmStridedBatched");
    if (failure.empty())
      gCublas = api;
  });
  if (!failure.empty())
    return makeError(failure);
  return Error::success();
}

} // namespace

Error checkCudaDevice() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return makeError(
        Twine("the cuda backend found no usable GPU: cudaGetDeviceCount "
              "(which looks for the NVIDIA driver, libcuda.so.1, and its "
              "devices) returned ") +
        cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  if (count == 0)
    return makeError("the cuda backend found no usable GPU: "
                     "cudaGetDeviceCount found a driver but 0 devices");
  return Error::success();
}

namespace {

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

Error launched(int code, const ir::Node &node) {
  if (code == 0)
    return Error::success();
  return makeError(node.describe() + ": launching its kernel failed: " +
                   cudaGetErrorName(cudaError_t(code)));
}

std::optional<ElemType> elemType(ir::DType dtype) {
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

bool isFloatType(ir::DType dtype) {
  return dtype == ir::DType::F32 || dtype == ir::DType::F64;
}

/// The loss's scores (and its gradient's log_prob), [N, C, d...], viewed as
/// [batch, classes, spatial] as the cross-entropy kernels take them.
struct ClassView {
  int64_t batch = 0, classes = 0, spatial = 1;

  explicit ClassView(const ir::TensorType &type)
      : batch(type.getDim(0)), classes(type.getDim(1)) {
    for (unsigned d = 2; d < type.getRank(); ++d)
      spatial *= type.getDim(d);
  }
};

std::vector<int64_t> rowMajor(ArrayRef<int64_t> dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t k = dims.size(); k > 1; --k)
    strides[k - 2] = strides[k - 1] * dims[k - 1];
  return strides;
}

body::Dims toDims(ArrayRef<int64_t> dims) {
  body::Dims space;
  space.rank = int(dims.size());
  for (size_t d = 0; d < dims.size(); ++d)
    space.dims[d] = dims[d];
  return space;
}

/// The strides of an operand of \p in dims broadcast to \p out dims.
body::Strides broadcastStrides(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  body::Strides layout;
  std::vector<int64_t> strides = rowMajor(in);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    layout.strides[lead + d] = in[d] == 1 ? 0 : strides[d];
  return layout;
}

body::Strides contiguous(ArrayRef<int64_t> dims) {
  body::Strides layout;
  std::vector<int64_t> strides = rowMajor(dims);
  for (size_t d = 0; d < dims.size(); ++d)
    layout.strides[d] = strides[d];
  return layout;
}

bool fitsRank(const ir::Node &node) {
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

const ir::TensorData *knownOf(const KnownValues &known, const ir::Value *v) {
  auto it = known.find(v);
  return it == known.end() ? nullptr : it->second.get();
}

Runner copyRunner() {
  return [](const RunContext &ctx, ArrayRef<Tensor> in,
            ArrayRef<Tensor> out) -> Error {
    if (in[0].getData() == out[0].getData() || out[0].getByteSize() == 0)
      return Error::success();
    if (cudaError_t err = cudaMemcpyAsync(
            out[0].getData(), in[0].getData(), out[0].getByteSize(),
            cudaMemcpyDeviceToDevice, ctx.device.getStream()))
      return cudaError(err, "copying a tensor");
    return Error::success();
  };
}

/// A strided copy from operand \p operand into result \p result.
struct CopyPlan {
  body::Dims space;
  body::Strides in, out;
  unsigned operand = 0, result = 0;
};

Runner copiesRunner(const ir::Node &node, std::vector<CopyPlan> plans,
                    unsigned elementSize) {
  return [&node, plans, elementSize](const RunContext &ctx,
                                     ArrayRef<Tensor> in,
                                     ArrayRef<Tensor> out) -> Error {
    for (const CopyPlan &p : plans)
      if (auto err = launched(
              launchStridedCopy(ctx.device.getStream(), elementSize,
                                in[p.operand].getData(),
                                out[p.result].getData(), p.space, p.in, p.out),
              node))
        return err;
    return Error::success();
  };
}

MaybeRunner selectMatMul(const ir::Node &node, bool allowTF32) {
  ir::DType dtype = node.getResult(0)->getType().getDType();
  if (!isFloatType(dtype))
    return std::nullopt;
  // 1-D operands as [1, K] and [K, 1]; batch dims padded with 1s in front.
  ArrayRef<int64_t> ad = node.getOperand(0)->getType().getDims();
  ArrayRef<int64_t> bd = node.getOperand(1)->getType().getDims();
  int64_t m = ad.size() == 1 ? 1 : ad[ad.size() - 2], k = ad.back();
  int64_t n = bd.size() == 1 ? 1 : bd.back();
  size_t aRank = ad.size() > 2 ? ad.size() - 2 : 0;
  size_t bRank = bd.size() > 2 ? bd.size() - 2 : 0;
  size_t rank = std::max(aRank, bRank);
  std::vector<int64_t> aBatch(rank, 1), bBatch(rank, 1);
  for (size_t d = 0; d < aRank; ++d)
    aBatch[rank - aRank + d] = ad[d];
  for (size_t d = 0; d < bRank; ++d)
    bBatch[rank - bRank + d] = bd[d];
  std::vector<int64_t> outBatch(rank);
  for (size_t d = 0; d < rank; ++d)
    outBatch[d] = std::max(aBatch[d], bBatch[d]);
  // Per output batch element, the offsets of its A and B matrices.
  std::vector<int64_t> aOff, bOff;
  int64_t batches = 1;
  for (int64_t d : outBatch)
    batches *= d;
  std::vector<int64_t> aStr = rowMajor(aBatch), bStr = rowMajor(bBatch);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t rest = i, ao = 0, bo = 0;
    for (size_t d = rank; d > 0; --d) {
      int64_t idx = rest % outBatch[d - 1];
      rest /= outBatch[d - 1];
      ao += (aBatch[d - 1] == 1 ? 0 : idx) * aStr[d - 1];
      bo += (bBatch[d - 1] == 1 ? 0 : idx) * bStr[d - 1];
    }
    aOff.push_back(ao * m * k);
    bOff.push_back(bo * k * n);
  }
  // One strided-batched call when the offsets are arithmetic progressions.
  auto stride = [&](const std::vector<int64_t> &offs) -> std::optional<int64_t> {
    if (offs.size() < 2)
      return 0;
    int64_t s = offs[1] - offs[0];
    for (size_t i = 1; i < offs.size(); ++i)
      if (offs[i] - offs[i - 1] != s)
        return std::nullopt;
    return s;
  };
  std::optional<int64_t> sa = stride(aOff), sb = stride(bOff);
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return std::nullopt;
  bool isF64 = dtype == ir::DType::F64;
  return Runner([&node, m, n, k, batches, sa, sb, aOff, bOff, isF64,
                 allowTF32](const RunContext &ctx, ArrayRef<Tensor> in,
                            ArrayRef<Tensor> out) -> Error {
    gCublas.setMathMode(ctx.cublas, allowTF32 && !isF64
                                      ? CUBLAS_TF32_TENSOR_OP_MATH
                                      : CUBLAS_DEFAULT_MATH);
    if (batches == 0 || m == 0 || n == 0)
      return Error::success();
    size_t elem = isF64 ? 8 : 4;
    const char *A = static_cast<const char *>(in[0].getData());
    const char *B = static_cast<const char *>(in[1].getData());
    char *C = static_cast<char *>(out[0].getData());
    // Row-major C = A B is column-major C^T = B^T A^T.
    auto gemm = [&](const char *a, const char *b, char *c, long long strideA,
                    long long strideB, int count) -> cublasStatus_t {
      if (isF64) {
        const double one = 1, zero = 0;
        return gCublas.dgemmStridedBatched(
            ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one,
            reinterpret_cast<const double *>(b), int(n), strideB,
            reinterpret_cast<const double *>(a), int(k), strideA, &zero,
            reinterpret_cast<double *>(c), int(n), (long long)(m * n), count);
      }
      const float one = 1, zero = 0;
      return gCublas.sgemmStridedBatched(
          ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one,
          reinterpret_cast<const float *>(b), int(n), strideB,
          reinterpret_cast<const float *>(a), int(k), strideA, &zero,
          reinterpret_cast<float *>(c), int(n), (long long)(m * n), count);
    };
    if (k == 0) {
      if (cudaError_t err = cudaMemsetAsync(C, 0, out[0].getByteSize(),
                                            ctx.device.getStream()))
        return cudaError(err, "zeroing an empty product");
      return Error::success();
    }
    if (sa && sb && batches <= INT32_MAX) {
      if (cublasStatus_t s = gemm(A, B, C, *sa, *sb, int(batches)))
        return cublasError(s, node.describe() + ": cublas gemm");
      return Error::success();
    }
    for (int64_t i = 0; i < batches; ++i)
      if (cublasStatus_t s = gemm(A + aOff[i] * elem, B + bOff[i] * elem,
                                  C + i * m * n * elem, 0, 0, 1))
        return cublasError(s, node.describe() + ": cublas gemm");
    return Error::success();
  });
}

MaybeRunner selectGemm(const ir::Node &node, bool allowTF32) {
  ir::DType dtype = node.getResult(0)->getType().getDType();
  if (!isFloatType(dtype))
    return std::nullopt;
  const ir::AttrList &attrs = node.getAttrs();
  bool transA = attrs.getInt("transA").value_or(0) != 0;
  bool transB = attrs.getInt("transB").value_or(0) != 0;
  double alpha = attrs.getFloat("alpha").value_or(1.0f);
  double beta = attrs.getFloat("beta").value_or(1.0f);
  ArrayRef<int64_t> ad = node.getOperand(0)->getType().getDims();
  ArrayRef<int64_t> bd = node.getOperand(1)->getType().getDims();
  int64_t m = transA ? ad[1] : ad[0], k = transA ? ad[0] : ad[1];
  int64_t n = transB ? bd[0] : bd[1];
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return std::nullopt;
  bool hasC = node.getNumOperands() == 3 && beta != 0;
  CopyPlan cPlan;
  if (hasC) {
    ArrayRef<int64_t> outDims = node.getResult(0)->getType().getDims();
    cPlan.space = toDims(outDims);
    cPlan.in = broadcastStrides(node.getOperand(2)->getType().getDims(),
                                outDims);
    cPlan.out = contiguous(outDims);
    cPlan.operand = 2;
  }
  bool isF64 = dtype == ir::DType::F64;
  return Runner([&node, m, n, k, transA, transB, alpha, beta, hasC, cPlan,
                 isF64, allowTF32](const RunContext &ctx, ArrayRef<Tensor> in,
                                   ArrayRef<Tensor> out) -> Error {
    gCublas.setMathMode(ctx.cublas, allowTF32 && !isF64
                                      ? CUBLAS_TF32_TENSOR_OP_MATH
                                      : CUBLAS_DEFAULT_MATH);
    if (m == 0 || n == 0)
      return Error::success();
    if (hasC) {
      if (auto err = launched(launchStridedCopy(ctx.device.getStream(),
                                                isF64 ? 8 : 4, in[2].getData(),
                                                out[0].getData(), cPlan.space,
                                                cPlan.in, cPlan.out),
                              node))
        return err;
    }
    cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = int(transA ? m : k), ldb = int(transB ? k : n);
    double b = hasC ? beta : 0;
    if (k == 0 && !hasC) {
      if (cudaError_t err = cudaMemsetAsync(out[0].getData(), 0,
                                            out[0].getByteSize(),
                                            ctx.device.getStream()))
        return cudaError(err, "zeroing an empty product");
      return Error::success();
    }
    cublasStatus_t s;
    if (isF64) {
      s = gCublas.dgemm(ctx.cublas, opB, opA, int(n), int(m), int(k), &alpha,
                      static_cast<const double *>(in[1].getData()), ldb,
                      static_cast<const double *>(in[0].getData()), lda, &b,
                      static_cast<double *>(out[0].getData()), int(n));
    } else {
      float af = float(alpha), bf = float(b);
      s = gCublas.sgemm(ctx.cublas, opB, opA, int(n), int(m), int(k), &af,
                      static_cast<const float *>(in[1].getData()), ldb,
                      static_cast<const float *>(in[0].getData()), lda, &bf,
                      static_cast<float *>(out[0].getData()), int(n));
    }
    if (s)
      return cublasError(s, node.describe() + ": cublas gemm");
    return Error::success();
  });
}

std::optional<body::UnaryOp> unaryOpOf(const ir::Node &node) {
  using ir::OpKind;
  switch (node.getOp()) {
  case OpKind::Sqrt:
    return body::UnaryOp::Sqrt;
  case OpKind::Erf:
    return body::UnaryOp::Erf;
  case OpKind::Tanh:
    return body::UnaryOp::Tanh;
  case OpKind::Relu:
    return body::UnaryOp::Relu;
  case OpKind::Sigmoid:
    return body::UnaryOp::Sigmoid;
  case OpKind::Exp:
    return body::UnaryOp::Exp;
  case OpKind::Log:
    return body::UnaryOp::Log;
  case OpKind::Neg:
    return body::UnaryOp::Neg;
  case OpKind::Gelu: {
    auto approx = node.getAttrs().getString("approximate");
    return approx && *approx == "tanh" ? body::UnaryOp::GeluTanh
                                       : body::UnaryOp::GeluErf;
  }
  case OpKind::Sin:
    return body::UnaryOp::Sin;
  case OpKind::Cos:
    return body::UnaryOp::Cos;
  case OpKind::Abs:
    return body::UnaryOp::Abs;
  case OpKind::Reciprocal:
    return body::UnaryOp::Reciprocal;
  default:
    return std::nullopt;
  }
}

std::optional<body::BinaryOp> binaryOpOf(const ir::Node &node) {
  using ir::OpKind;
  switch (node.getOp()) {
  case OpKind::Add:
    return body::BinaryOp::Add;
  case OpKind::Sub:
    return body::BinaryOp::Sub;
  case OpKind::Mul:
    return body::BinaryOp::Mul;
  case OpKind::Div:
    return body::BinaryOp::Div;
  case OpKind::Max:
    return body::BinaryOp::Max;
  case OpKind::Pow:
    return body::BinaryOp::Pow;
  case OpKind::Equal:
    return body::BinaryOp::Equal;
  case OpKind::GreaterOrEqual:
    return body::BinaryOp::GreaterOrEqual;
  case OpKind::And:
    return body::BinaryOp::And;
  case OpKind::Min:
    return body::BinaryOp::Min;
  case OpKind::Less:
    return body::BinaryOp::Less;
  case OpKind::LessOrEqual:
    return body::BinaryOp::LessOrEqual;
  case OpKind::Greater:
    return body::BinaryOp::Greater;
  case OpKind::Or:
    return body::BinaryOp::Or;
  case OpKind::GeluGrad: {
    auto approx = node.getAttrs().getString("approximate");
    return approx && *approx == "tanh" ? body::BinaryOp::GeluGradTanh
                                       : body::BinaryOp::GeluGradErf;
  }
  default:
    return std::nullopt;
  }
}

/// The reduced axes of a Reduce node, or nullopt when not known.
std::optional<std::vector<bool>> reducedAxes(const ir::Node &node,
                                             const KnownValues &known) {
  unsigned rank = node.getOperand(0)->getType().getRank();
  std::vector<int64_t> axes;
  bool noopWithEmpty =
      node.getAttrs().getInt("noop_with_empty_axes").value_or(0) != 0;
  if (node.getOp() == ir::OpKind::ReduceSum) {
    if (node.getNumOperands() == 2) {
      const ir::TensorData *data = knownOf(known, node.getOperand(1));
      if (!data)
        return std::nullopt;
      axes = data->getInts();
    }
  } else if (auto list = node.getAttrs().getInts("axes")) {
    axes.assign(list->begin(), list->end());
  }
  std::vector<bool> reduced(rank, axes.empty() && !noopWithEmpty);
  for (int64_t axis : axes)
    reduced[axis < 0 ? axis + rank : axis] = true;
  return reduced;
}

MaybeRunner selectReduce(const ir::Node &node, const KnownValues &known) {
  ir::DType dtype = node.getOperand(0)->getType().getDType();
  if (!isFloatType(dtype))
    return std::nullopt;
  auto reduced = reducedAxes(node, known);
  if (!reduced)
    return std::nullopt;
  ArrayRef<int64_t> dims = node.getOperand(0)->getType().getDims();
  std::vector<int64_t> strides = rowMajor(dims);
  body::Dims keptSpace, reducedSpace;
  body::Strides kept, red;
  int64_t count = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if ((*reduced)[d]) {
      red.strides[reducedSpace.rank] = strides[d];
      reducedSpace.dims[reducedSpace.rank++] = dims[d];
      count *= dims[d];
    } else {
      kept.strides[keptSpace.rank] = strides[d];
      keptSpace.dims[keptSpace.rank++] = dims[d];
    }
  }
  if (count == 0 && node.getOp() != ir::OpKind::ReduceSum)
    return std::nullopt; // the CPU's error
  body::ReduceOp op = node.getOp() == ir::OpKind::ReduceSum ? body::ReduceOp::Sum
                      : node.getOp() == ir::OpKind::ReduceMean
                          ? body::ReduceOp::Mean
                          : body::ReduceOp::Max;
  ElemType type = *elemType(dtype);
  return Runner([&node, op, type, keptSpace, kept, reducedSpace, red,
                 count](const RunContext &ctx, ArrayRef<Tensor> in,
                        ArrayRef<Tensor> out) -> Error {
    return launched(launchReduce(ctx.device.getStream(), op, type,
                                 in[0].getData(), out[0].getData(), keptSpace,
                                 kept, reducedSpace, red, count),
                    node);
  });
}

/// The device runner for \p node, or nothing.
MaybeRunner selectDeviceRunner(const ir::Node &node, const KnownValues &known,
                               const CompileOptions &options,
                               uint64_t &scratchBytes) {
  using ir::OpKind;
  if (!fitsRank(node))
    return std::nullopt;
  const ir::TensorType &outType = node.getResult(0)->getType();
  ArrayRef<int64_t> outDims = outType.getDims();
  unsigned elementSize = ir::dtypeSize(outType.getDType());
  const ir::AttrList &attrs = node.getAttrs();
  auto axisAttr = [&](int64_t fallback, unsigned rank) {
    int64_t axis = attrs.getInt("axis").value_or(fallback);
    return unsigned(axis < 0 ? axis + rank : axis);
  };

  if (auto op = unaryOpOf(node)) {
    ir::DType dtype = outType.getDType();
    bool intOk = (*op == body::UnaryOp::Neg || *op == body::UnaryOp::Relu) &&
                 (dtype == ir::DType::I64 || dtype == ir::DType::I32);
    if (!isFloatType(dtype) && !intOk)
      return std::nullopt;
    ElemType type = *elemType(dtype);
    body::UnaryOp uop = *op;
    return Runner([&node, uop, type](const RunContext &ctx, ArrayRef<Tensor> in,
                                     ArrayRef<Tensor> out) -> Error {
      return launched(launchUnary(ctx.device.getStream(), uop, type,
                                  in[0].getData(), out[0].getData(),
                                  out[0].getNumElements()),
                      node);
    });
  }

  switch (node.getOp()) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Max:
  case OpKind::Equal:
  case OpKind::GreaterOrEqual:
  case OpKind::And:
  case OpKind::Min:
  case OpKind::Less:
  case OpKind::LessOrEqual:
  case OpKind::Greater:
  case OpKind::Or:
  case OpKind::GeluGrad: {
    if (node.getNumOperands() != 2)
      return std::nullopt; // Max/Min of one or of three or more
    ir::DType dtype = node.getOperand(0)->getType().getDType();
    body::BinaryOp op = *binaryOpOf(node);
    bool floatOnly = op == body::BinaryOp::Div || op == body::BinaryOp::Pow ||
                     op == body::BinaryOp::GeluGradErf ||
                     op == body::BinaryOp::GeluGradTanh;
    if (op == body::BinaryOp::Pow &&
        node.getOperand(1)->getType().getDType() != dtype)
      return std::nullopt;
    bool logical = op == body::BinaryOp::And || op == body::BinaryOp::Or;
    if (logical && dtype != ir::DType::Bool)
      return std::nullopt;
    if (!logical &&
        !(isFloatType(dtype) ||
          (!floatOnly &&
           (dtype == ir::DType::I64 || dtype == ir::DType::I32))))
      return std::nullopt;
    ElemType type = *elemType(dtype);
    body::Dims space = toDims(outDims);
    body::Strides la =
        broadcastStrides(node.getOperand(0)->getType().getDims(), outDims);
    body::Strides lb =
        broadcastStrides(node.getOperand(1)->getType().getDims(), outDims);
    return Runner([&node, op, type, space, la, lb](const RunContext &ctx,
                                                   ArrayRef<Tensor> in,
                                                   ArrayRef<Tensor> out) {
      return launched(launchBinary(ctx.device.getStream(), op, type,
                                   in[0].getData(), in[1].getData(),
                                   out[0].getData(), space, la, lb),
                      node);
    });
  }
  case OpKind::Where: {
    body::Dims space = toDims(outDims);
    body::Strides lc =
        broadcastStrides(node.getOperand(0)->getType().getDims(), outDims);
    body::Strides lx =
        broadcastStrides(node.getOperand(1)->getType().getDims(), outDims);
    body::Strides ly =
        broadcastStrides(node.getOperand(2)->getType().getDims(), outDims);
    return Runner([&node, elementSize, space, lc, lx,
                   ly](const RunContext &ctx, ArrayRef<Tensor> in,
                       ArrayRef<Tensor> out) {
      return launched(launchWhere(ctx.device.getStream(), elementSize,
                                  in[0].getData(), in[1].getData(),
                                  in[2].getData(), out[0].getData(), space, lc,
                                  lx, ly),
                      node);
    });
  }
  case OpKind::Cast: {
    ir::DType from = node.getOperand(0)->getType().getDType();
    ir::DType to = outType.getDType();
    if (from == to)
      return copyRunner();
    if (from == ir::DType::Bool) {
      if (!elemType(to))
        return std::nullopt;
      // bool bytes are u8 0/1: converting them as u8 gives the same values.
      from = ir::DType::U8;
    }
    auto fromType = elemType(from);
    bool toBool = to == ir::DType::Bool;
    auto toType = toBool ? std::optional<ElemType>(ElemType::U8) : elemType(to);
    if (!fromType || !toType)
      return std::nullopt;
    ElemType f = *fromType, t = *toType;
    return Runner([&node, f, t, toBool](const RunContext &ctx,
                                        ArrayRef<Tensor> in,
                                        ArrayRef<Tensor> out) {
      return launched(launchCast(ctx.device.getStream(), f, t, toBool,
                                 in[0].getData(), out[0].getData(),
                                 out[0].getNumElements()),
                      node);
    });
  }
  case OpKind::Dropout: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    double ratio = 0.5;
    bool training = false;
    if (node.getNumOperands() > 1) {
      const ir::TensorData *r = knownOf(known, node.getOperand(1));
      if (!r)
        return std::nullopt;
      ratio = r->getDouble(0);
    }
    if (node.getNumOperands() > 2) {
      const ir::TensorData *t = knownOf(known, node.getOperand(2));
      if (!t)
        return std::nullopt;
      training = t->getInt(0) != 0;
    }
    if (training && ratio != 0 && !(ratio > 0 && ratio < 1))
      return std::nullopt; // the CPU kernel reports it
    bool identity = !training || ratio == 0;
    uint64_t key = dropoutKey(
        static_cast<uint64_t>(attrs.getInt("seed").value_or(0)));
    uint32_t threshold = dropoutThreshold(static_cast<float>(ratio));
    // The scale in the element type, as the CPU computes it.
    double scale = dtype == ir::DType::F32
                       ? double(1.0f / (1.0f - static_cast<float>(ratio)))
                       : 1.0 / (1.0 - ratio);
    ElemType type = *elemType(dtype);
    return Runner([&node, identity, key, threshold, scale,
                   type](const RunContext &ctx, ArrayRef<Tensor> in,
                         ArrayRef<Tensor> out) -> Error {
      uint8_t *mask =
          out.size() > 1 ? static_cast<uint8_t *>(out[1].getData()) : nullptr;
      int64_t count = out[0].getNumElements();
      if (identity) {
        if (in[0].getData() != out[0].getData() && count)
          if (cudaError_t err = cudaMemcpyAsync(
                  out[0].getData(), in[0].getData(), out[0].getByteSize(),
                  cudaMemcpyDeviceToDevice, ctx.device.getStream()))
            return cudaError(err, "copying a tensor");
        if (mask && count)
          if (cudaError_t err =
                  cudaMemsetAsync(mask, 1, count, ctx.device.getStream()))
            return cudaError(err, "filling a mask");
        return Error::success();
      }
      return launched(launchDropout(ctx.device.getStream(), type,
                                    in[0].getData(), out[0].getData(), mask,
                                    count, key, threshold, scale),
                      node);
    });
  }
  case OpKind::MatMul:
    return selectMatMul(node, options.allowTF32);
  case OpKind::Gemm:
    return selectGemm(node, options.allowTF32);
  case OpKind::DropoutGrad: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    ElemType type = *elemType(dtype);
    int64_t count = outType.getNumElements();
    return Runner([&node, type, count](const RunContext &ctx,
                                       ArrayRef<Tensor> in,
                                       ArrayRef<Tensor> out) {
      return launched(
          launchDropoutGrad(ctx.device.getStream(), type, in[0].getData(),
                            static_cast<const uint8_t *>(in[1].getData()),
                            in[2].getData(), out[0].getData(), count),
          node);
    });
  }
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::SoftmaxGrad: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    unsigned axis = axisAttr(-1, outType.getRank());
    int64_t outer = 1, inner = 1, n = outDims[axis];
    for (unsigned d = 0; d < axis; ++d)
      outer *= outDims[d];
    for (unsigned d = axis + 1; d < outDims.size(); ++d)
      inner *= outDims[d];
    ElemType type = *elemType(dtype);
    if (node.getOp() == OpKind::SoftmaxGrad)
      return Runner([&node, type, outer, n, inner](const RunContext &ctx,
                                                   ArrayRef<Tensor> in,
                                                   ArrayRef<Tensor> out) {
        return launched(launchSoftmaxGrad(ctx.device.getStream(), type,
                                          in[0].getData(), in[1].getData(),
                                          out[0].getData(), outer, n, inner),
                        node);
      });
    bool isLog = node.getOp() == OpKind::LogSoftmax;
    return Runner([&node, type, isLog, outer, n,
                   inner](const RunContext &ctx, ArrayRef<Tensor> in,
                          ArrayRef<Tensor> out) {
      return launched(launchSoftmax(ctx.device.getStream(), type, isLog,
                                    in[0].getData(), out[0].getData(), outer,
                                    n, inner),
                      node);
    });
  }
  case OpKind::LayerNormalizationGrad: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    unsigned axis = axisAttr(-1, outType.getRank());
    int64_t rows = 1, n = 1;
    for (unsigned d = 0; d < outDims.size(); ++d)
      (d < axis ? rows : n) *= outDims[d];
    ElemType type = *elemType(dtype);
    return Runner([&node, type, rows, n](const RunContext &ctx,
                                         ArrayRef<Tensor> in,
                                         ArrayRef<Tensor> out) {
      return launched(
          launchLayerNormGrad(ctx.device.getStream(), type, in[0].getData(),
                              in[1].getData(), in[2].getData(), in[3].getData(),
                              in[4].getData(), out[0].getData(), rows, n),
          node);
    });
  }
  case OpKind::LayerNormalization: {
    const ir::TensorType &xType = node.getOperand(0)->getType();
    ir::DType dtype = xType.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    unsigned axis = axisAttr(-1, xType.getRank());
    ArrayRef<int64_t> normalized = xType.getDims().drop_front(axis);
    for (unsigned i = 1; i < node.getNumOperands(); ++i)
      if (node.getOperand(i)->getType().getDims() != normalized)
        return std::nullopt; // broadcast scale/bias: host
    ir::DType statsDType =
        node.getNumResults() > 1 ? node.getResult(1)->getType().getDType()
                                 : dtype;
    if (!isFloatType(statsDType))
      return std::nullopt;
    int64_t stashType = attrs.getInt("stash_type").value_or(1);
    bool computeF64 =
        dtype == ir::DType::F64 || stashType == ir::onnxCode(ir::DType::F64);
    int64_t rows = 1, n = 1;
    for (unsigned d = 0; d < axis; ++d)
      rows *= xType.getDim(d);
    for (int64_t d : normalized)
      n *= d;
    float epsilon = attrs.getFloat("epsilon").value_or(1e-5f);
    ElemType type = *elemType(dtype), stats = *elemType(statsDType);
    bool hasBias = node.getNumOperands() == 3;
    return Runner([&node, type, computeF64, stats, rows, n, epsilon,
                   hasBias](const RunContext &ctx, ArrayRef<Tensor> in,
                            ArrayRef<Tensor> out) {
      return launched(
          launchLayerNorm(ctx.device.getStream(), type, computeF64, stats,
                          in[0].getData(), in[1].getData(),
                          hasBias ? in[2].getData() : nullptr,
                          out[0].getData(),
                          out.size() > 1 ? out[1].getData() : nullptr,
                          out.size() > 2 ? out[2].getData() : nullptr, rows, n,
                          epsilon),
          node);
    });
  }
  case OpKind::SoftmaxCrossEntropyLoss: {
    const ir::TensorType &scores = node.getOperand(0)->getType();
    ir::DType dtype = scores.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    bool labelsI64 =
        node.getOperand(1)->getType().getDType() == ir::DType::I64;
    std::string reduction = attrs.getString("reduction").value_or("mean");
    std::optional<int64_t> ignore = attrs.getInt("ignore_index");
    ClassView view(scores);
    int64_t batch = view.batch, classes = view.classes, spatial = view.spatial;
    bool reduced = reduction != "none";
    bool mean = reduction == "mean";
    uint64_t lossBytes = reduced ? uint64_t(batch * spatial) *
                                       ir::dtypeSize(dtype)
                                 : 0;
    scratchBytes = std::max(scratchBytes, lossBytes);
    ElemType type = *elemType(dtype);
    bool hasWeights = node.getNumOperands() == 3;
    return Runner([&node, type, labelsI64, batch, classes, spatial, reduced,
                   mean, ignore, hasWeights](const RunContext &ctx,
                                             ArrayRef<Tensor> in,
                                             ArrayRef<Tensor> out) {
      void *losses = reduced ? ctx.scratch : out[0].getData();
      return launched(
          launchCrossEntropy(
              ctx.device.getStream(), type, labelsI64, in[0].getData(),
              in[1].getData(), hasWeights ? in[2].getData() : nullptr, losses,
              out.size() > 1 ? out[1].getData() : nullptr,
              reduced ? out[0].getData() : nullptr, mean, batch, classes,
              spatial, ignore.has_value(), ignore.value_or(0),
              ctx.device.getErrorFlag()),
          node);
    });
  }
  case OpKind::SoftmaxCrossEntropyGrad: {
    const ir::TensorType &logProb = node.getOperand(0)->getType();
    ir::DType dtype = logProb.getDType();
    if (!isFloatType(dtype))
      return std::nullopt;
    bool labelsI64 = node.getOperand(1)->getType().getDType() == ir::DType::I64;
    ClassView view(logProb);
    ElemType type = *elemType(dtype);
    return Runner([&node, type, labelsI64, view](const RunContext &ctx,
                                                 ArrayRef<Tensor> in,
                                                 ArrayRef<Tensor> out) {
      return launched(launchCrossEntropyGrad(ctx.device.getStream(), type,
                                             labelsI64, in[0].getData(),
                                             in[1].getData(), in[2].getData(),
                                             out[0].getData(), view.batch,
                                             view.classes, view.spatial),
                      node);
    });
  }
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceMax:
    return selectReduce(node, known);
  case OpKind::Identity:
  case OpKind::Reshape:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    return copyRunner();
  case OpKind::Transpose: {
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    std::vector<int64_t> perm;
    if (auto list = attrs.getInts("perm"))
      perm.assign(list->begin(), list->end());
    else
      for (size_t d = inDims.size(); d > 0; --d)
        perm.push_back(int64_t(d - 1));
    std::vector<int64_t> inStrides = rowMajor(inDims);
    CopyPlan plan;
    plan.space = toDims(outDims);
    for (size_t d = 0; d < perm.size(); ++d)
      plan.in.strides[d] = inStrides[perm[d]];
    plan.out = contiguous(outDims);
    return copiesRunner(node, {plan}, elementSize);
  }
  case OpKind::Expand: {
    CopyPlan plan;
    plan.space = toDims(outDims);
    plan.in = broadcastStrides(node.getOperand(0)->getType().getDims(),
                               outDims);
    plan.out = contiguous(outDims);
    return copiesRunner(node, {plan}, elementSize);
  }
  case OpKind::Concat: {
    unsigned axis = axisAttr(0, outType.getRank());
    std::vector<int64_t> outStrides = rowMajor(outDims);
    std::vector<CopyPlan> plans;
    int64_t offset = 0;
    for (unsigned i = 0; i < node.getNumOperands(); ++i) {
      ArrayRef<int64_t> inDims = node.getOperand(i)->getType().getDims();
      CopyPlan plan;
      plan.operand = i;
      plan.space = toDims(inDims);
      plan.in = contiguous(inDims);
      for (size_t d = 0; d < outDims.size(); ++d)
        plan.out.strides[d] = outStrides[d];
      plan.out.base = offset * outStrides[axis];
      offset += inDims[axis];
      plans.push_back(plan);
    }
    return copiesRunner(node, std::move(plans), elementSize);
  }
  case OpKind::Split: {
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    unsigned axis = axisAttr(0, unsigned(inDims.size()));
    std::vector<int64_t> inStrides = rowMajor(inDims);
    std::vector<CopyPlan> plans;
    int64_t offset = 0;
    for (unsigned r = 0; r < node.getNumResults(); ++r) {
      ArrayRef<int64_t> dims = node.getResult(r)->getType().getDims();
      CopyPlan plan;
      plan.result = r;
      plan.space = toDims(dims);
      for (size_t d = 0; d < dims.size(); ++d)
        plan.in.strides[d] = inStrides[d];
      plan.in.base = offset * inStrides[axis];
      plan.out = contiguous(dims);
      offset += dims[axis];
      plans.push_back(plan);
    }
    return copiesRunner(node, std::move(plans), elementSize);
  }
  case OpKind::Slice: {
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    unsigned rank = unsigned(inDims.size());
    std::vector<const ir::TensorData *> ops;
    for (unsigned i = 1; i < node.getNumOperands(); ++i) {
      ops.push_back(knownOf(known, node.getOperand(i)));
      if (!ops.back())
        return std::nullopt;
    }
    std::vector<int64_t> starts = ops[0]->getInts(), ends = ops[1]->getInts();
    std::vector<int64_t> axes, steps(starts.size(), 1);
    if (ops.size() > 2)
      axes = ops[2]->getInts();
    else
      for (size_t i = 0; i < starts.size(); ++i)
        axes.push_back(int64_t(i));
    if (ops.size() > 3)
      steps = ops[3]->getInts();
    std::vector<int64_t> inStrides = rowMajor(inDims);
    CopyPlan plan;
    plan.space = toDims(outDims);
    plan.out = contiguous(outDims);
    for (unsigned d = 0; d < rank; ++d)
      plan.in.strides[d] = inStrides[d];
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
      int64_t dim = inDims[axis], start = starts[i], step = steps[i];
      if (start < 0)
        start += dim;
      if (step > 0)
        start = std::clamp<int64_t>(start, 0, dim);
      else
        start = std::clamp<int64_t>(start, 0, dim - 1);
      if (outDims[axis] == 0)
        start = 0;
      plan.in.base += start * inStrides[axis];
      plan.in.strides[axis] = inStrides[axis] * step;
    }
    return copiesRunner(node, {plan}, elementSize);
  }
  case OpKind::Gather: {
    ArrayRef<int64_t> dataDims = node.getOperand(0)->getType().getDims();
    unsigned axis = axisAttr(0, unsigned(dataDims.size()));
    int64_t outer = 1, inner = 1;
    for (unsigned d = 0; d < axis; ++d)
      outer *= dataDims[d];
    for (unsigned d = axis + 1; d < dataDims.size(); ++d)
      inner *= dataDims[d];
    int64_t axisSize = dataDims[axis];
    int64_t count = node.getOperand(1)->getType().getNumElements();
    bool i64 = node.getOperand(1)->getType().getDType() == ir::DType::I64;
    return Runner([&node, elementSize, i64, outer, axisSize, inner,
                   count](const RunContext &ctx, ArrayRef<Tensor> in,
                          ArrayRef<Tensor> out) {
      return launched(launchGather(ctx.device.getStream(), elementSize, i64,
                                   in[0].getData(), in[1].getData(),
                                   out[0].getData(), outer, axisSize, inner,
                                   count, ctx.device.getErrorFlag()),
                      node);
    });
  }
  case OpKind::ScatterElements: {
    ArrayRef<int64_t> dataDims = node.getOperand(0)->getType().getDims();
    std::string reduction = attrs.getString("reduction").value_or("none");
    int mode = reduction == "none" ? 0 : reduction == "add" ? 1 : 2;
    if (reduction != "none" && reduction != "add" && reduction != "mul")
      return std::nullopt;
    ir::DType dtype = outType.getDType();
    if (mode != 0 && !(isFloatType(dtype) || dtype == ir::DType::I64 ||
                       dtype == ir::DType::I32))
      return std::nullopt;
    ElemType type = elemType(dtype).value_or(ElemType::U8);
    unsigned axis = axisAttr(0, unsigned(dataDims.size()));
    body::Dims updates = toDims(node.getOperand(2)->getType().getDims());
    std::vector<int64_t> dataStrides = rowMajor(dataDims);
    int64_t dataCount = outType.getNumElements();
    int64_t count = node.getOperand(2)->getType().getNumElements();
    if (mode != 0)
      scratchBytes = std::max(scratchBytes, scatterWorkspaceBytes(count));
    bool i64 = node.getOperand(1)->getType().getDType() == ir::DType::I64;
    int64_t axisSize = dataDims[axis];
    return Runner([&node, type, elementSize, mode, i64, dataCount, updates,
                   dataStrides, axis, axisSize](const RunContext &ctx,
                                                ArrayRef<Tensor> in,
                                                ArrayRef<Tensor> out) {
      return launched(
          launchScatter(ctx.device.getStream(), type, elementSize, mode, i64,
                        in[0].getData(), in[1].getData(), in[2].getData(),
                        out[0].getData(), dataCount, updates,
                        dataStrides.data(), int(axis), axisSize, ctx.scratch,
                        ctx.device.getErrorFlag()),
          node);
    });
  }
  case OpKind::ConstantOfShape: {
    // The result type has the shape; the value is one element (0 of f32 by
    // default, ONNX).
    std::vector<uint8_t> value(elementSize, 0);
    if (ir::TensorDataPtr attr = attrs.getTensor("value")) {
      if (attr->getBytes().size() != elementSize)
        return std::nullopt;
      value.assign(attr->getBytes().begin(), attr->getBytes().end());
    }
    return Runner([&node, elementSize, value](const RunContext &ctx,
                                             ArrayRef<Tensor>,
                                             ArrayRef<Tensor> out) {
      return launched(launchFill(ctx.device.getStream(), elementSize,
                                 value.data(), out[0].getData(),
                                 out[0].getNumElements()),
                      node);
    });
  }
  // Issue 13.
  case OpKind::Not:
    return Runner([&node](const RunContext &ctx, ArrayRef<Tensor> in,
                          ArrayRef<Tensor> out) {
      return launched(launchNot(ctx.device.getStream(), in[0].getData(),
                                out[0].getData(), out[0].getNumElements()),
                      node);
    });
  case OpKind::IsNaN:
  case OpKind::IsInf: {
    ir::DType dtype = node.getOperand(0)->getType().getDType();
    if (dtype != ir::DType::F32 && dtype != ir::DType::F64)
      return std::nullopt;
    ElemType type = *elemType(dtype);
    bool isInf = node.getOp() == OpKind::IsInf;
    bool negative = attrs.getInt("detect_negative").value_or(1) != 0;
    bool positive = attrs.getInt("detect_positive").value_or(1) != 0;
    return Runner([&node, type, isInf, negative, positive](
                      const RunContext &ctx, ArrayRef<Tensor> in,
                      ArrayRef<Tensor> out) {
      return launched(launchFloatClass(ctx.device.getStream(), type, isInf,
                                       negative, positive, in[0].getData(),
                                       out[0].getData(),
                                       out[0].getNumElements()),
                      node);
    });
  }
  case OpKind::Trilu: {
    bool upper = attrs.getInt("upper").value_or(1) != 0;
    int64_t rows = outDims[outDims.size() - 2];
    int64_t cols = outDims.back();
    bool hasK = node.getNumOperands() > 1;
    return Runner([&node, elementSize, upper, rows, cols, hasK](
                      const RunContext &ctx, ArrayRef<Tensor> in,
                      ArrayRef<Tensor> out) {
      const int64_t *k =
          hasK ? static_cast<const int64_t *>(in[1].getData()) : nullptr;
      return launched(launchTrilu(ctx.device.getStream(), elementSize,
                                  in[0].getData(), out[0].getData(), rows,
                                  cols, out[0].getNumElements(), upper, k),
                      node);
    });
  }
  case OpKind::CumSum: {
    ir::DType dtype = outType.getDType();
    if (!isFloatType(dtype) && dtype != ir::DType::I64 &&
        dtype != ir::DType::I32)
      return std::nullopt;
    const ir::TensorData *axisData = knownOf(known, node.getOperand(1));
    if (!axisData)
      return std::nullopt;
    int64_t rank = int64_t(outDims.size());
    int64_t axisValue = axisData->getInts()[0];
    if (axisValue < -rank || axisValue >= rank)
      return std::nullopt; // the host kernel reports it
    unsigned axis = unsigned(axisValue < 0 ? axisValue + rank : axisValue);
    int64_t outer = 1, inner = 1;
    for (unsigned d = 0; d < axis; ++d)
      outer *= outDims[d];
    for (size_t d = axis + 1; d < outDims.size(); ++d)
      inner *= outDims[d];
    int64_t length = outDims[axis];
    ElemType type = *elemType(dtype);
    bool exclusive = attrs.getInt("exclusive").value_or(0) != 0;
    bool reverse = attrs.getInt("reverse").value_or(0) != 0;
    return Runner([&node, type, outer, length, inner, exclusive, reverse](
                      const RunContext &ctx, ArrayRef<Tensor> in,
                      ArrayRef<Tensor> out) {
      return launched(launchCumSum(ctx.device.getStream(), type,
                                   in[0].getData(), out[0].getData(), outer,
                                   length, inner, exclusive, reverse),
                      node);
    });
  }
  case OpKind::GatherElements: {
    ArrayRef<int64_t> dataDims = node.getOperand(0)->getType().getDims();
    int axis = int(axisAttr(0, unsigned(dataDims.size())));
    std::vector<int64_t> strides = rowMajor(dataDims);
    body::Strides dataStrides;
    for (size_t d = 0; d < strides.size(); ++d)
      dataStrides.strides[d] = strides[d];
    body::Dims space = toDims(outDims);
    int64_t axisSize = dataDims[axis];
    bool i64 = node.getOperand(1)->getType().getDType() == ir::DType::I64;
    return Runner([&node, elementSize, i64, space, dataStrides, axis,
                   axisSize](const RunContext &ctx, ArrayRef<Tensor> in,
                             ArrayRef<Tensor> out) {
      return launched(launchGatherElements(
                          ctx.device.getStream(), elementSize, i64,
                          in[0].getData(), in[1].getData(), out[0].getData(),
                          space, dataStrides, axis, axisSize,
                          out[0].getNumElements(), ctx.device.getErrorFlag()),
                      node);
    });
  }
  case OpKind::Conv:
  case OpKind::ConvTranspose: {
    ir::DType dtype = node.getOperand(0)->getType().getDType();
    auto geometry = ir::getConvGeometry(node);
    if (!geometry) {
      llvm::consumeError(geometry.takeError()); // the host kernel reports it
      return std::nullopt;
    }
    if ((dtype != ir::DType::F32 && dtype != ir::DType::F64) ||
        geometry->kernel.size() > size_t(body::kMaxRank))
      return std::nullopt;
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    body::ConvShape shape;
    shape.rank = int(geometry->kernel.size());
    shape.inChannels = inDims[1];
    shape.outChannels = geometry->resultDims[1];
    shape.group = geometry->group;
    shape.transpose = node.getOp() == OpKind::ConvTranspose;
    for (int d = 0; d < shape.rank; ++d) {
      shape.inSpatial[d] = inDims[2 + d];
      shape.outSpatial[d] = geometry->resultDims[2 + d];
      shape.kernel[d] = geometry->kernel[d];
      shape.strides[d] = geometry->strides[d];
      shape.dilations[d] = geometry->dilations[d];
      shape.padBegin[d] = geometry->padBegin[d];
    }
    ElemType type = *elemType(dtype);
    bool hasBias = node.getNumOperands() == 3;
    return Runner([&node, type, shape, hasBias](const RunContext &ctx,
                                               ArrayRef<Tensor> in,
                                               ArrayRef<Tensor> out) {
      return launched(launchConv(ctx.device.getStream(), type, in[0].getData(),
                                 in[1].getData(),
                                 hasBias ? in[2].getData() : nullptr,
                                 out[0].getData(), shape,
                                 out[0].getNumElements()),
                      node);
    });
  }
  case OpKind::Pad: {
    const ir::TensorData *padsData = knownOf(known, node.getOperand(1));
    if (!padsData)
      return std::nullopt;
    ArrayRef<int64_t> inDims = node.getOperand(0)->getType().getDims();
    int64_t rank = int64_t(inDims.size());
    std::vector<int64_t> axes;
    if (node.getNumOperands() > 3) {
      const ir::TensorData *axesData = knownOf(known, node.getOperand(3));
      if (!axesData)
        return std::nullopt;
      for (int64_t axis : axesData->getInts())
        axes.push_back(axis < 0 ? axis + rank : axis);
    } else {
      for (int64_t d = 0; d < rank; ++d)
        axes.push_back(d);
    }
    std::vector<int64_t> pads = padsData->getInts();
    if (pads.size() != 2 * axes.size())
      return std::nullopt;
    body::Strides begin;
    for (size_t k = 0; k < axes.size(); ++k)
      begin.strides[axes[k]] = pads[k];
    std::string modeName = attrs.getString("mode").value_or("constant");
    body::PadMode mode = modeName == "reflect" ? body::PadMode::Reflect
                         : modeName == "edge"  ? body::PadMode::Edge
                         : modeName == "wrap"  ? body::PadMode::Wrap
                                               : body::PadMode::Constant;
    body::Dims outSpace = toDims(outDims), inSpace = toDims(inDims);
    bool hasValue = node.getNumOperands() > 2 && mode == body::PadMode::Constant;
    return Runner([&node, elementSize, outSpace, inSpace, begin, mode,
                   hasValue](const RunContext &ctx, ArrayRef<Tensor> in,
                             ArrayRef<Tensor> out) {
      return launched(launchPad(ctx.device.getStream(), elementSize,
                                in[0].getData(), out[0].getData(), outSpace,
                                inSpace, begin, mode,
                                hasValue ? in[2].getData() : nullptr),
                      node);
    });
  }
  default:
    return std::nullopt;
  }
}

/// Copies the host value \p data into the node's result.
Runner constantRunner(ir::TensorDataPtr data) {
  return [data](const RunContext &ctx, ArrayRef<Tensor>,
                ArrayRef<Tensor> out) -> Error {
    uint64_t bytes = data->getBytes().size();
    if (!bytes)
      return Error::success();
    if (cudaError_t err =
            cudaMemcpyAsync(out[0].getData(), data->getBytes().data(), bytes,
                            cudaMemcpyHostToDevice, ctx.device.getStream()))
      return cudaError(err, "copying a constant to the device");
    return Error::success();
  };
}

/// Runs the node on the host with the CPU kernels: downloads its operands,
/// evaluates, uploads its results. Synchronizes the stream.
Runner hostRunner(const ir::Node &node) {
  return [&node](const RunContext &ctx, ArrayRef<Tensor> in,
                 ArrayRef<Tensor> out) -> Error {
    if (auto err = ctx.device.synchronize())
      return err;
    std::vector<std::shared_ptr<ir::TensorData>> hosts;
    std::vector<const ir::TensorData *> operands;
    for (const Tensor &t : in) {
      auto data = std::make_shared<ir::TensorData>(t.getType());
      // On the executor's stream (not the legacy default stream, which a
      // non-blocking stream does not wait for).
      if (t.getByteSize())
        if (cudaError_t err = cudaMemcpyAsync(
                data->getMutableBytes(), t.getData(), t.getByteSize(),
                cudaMemcpyDeviceToHost, ctx.device.getStream()))
          return cudaError(err, "downloading an operand");
      operands.push_back(data.get());
      hosts.push_back(std::move(data));
    }
    if (auto err = ctx.device.synchronize())
      return err;
    auto results = cpu::evaluateNode(node, operands);
    if (!results)
      return results.takeError();
    for (size_t i = 0; i < out.size(); ++i) {
      uint64_t bytes = (*results)[i]->getBytes().size();
      if (bytes)
        if (cudaError_t err = cudaMemcpyAsync(
                out[i].getData(), (*results)[i]->getBytes().data(), bytes,
                cudaMemcpyHostToDevice, ctx.device.getStream()))
          return cudaError(err, "uploading a result");
    }
    // The results' host memory goes when this returns: let the copies end.
    return ctx.device.synchronize();
  };
}

//===----------------------------------------------------------------------===//
// The executable
//===----------------------------------------------------------------------===//

/// cuBLAS's workspace: 32 MiB, what NVIDIA recommends for Hopper.
constexpr uint64_t kCublasWorkspaceBytes = 32ull << 20;

class CudaExecutable : public Executable {
public:
  ~CudaExecutable() override {
    executor_.reset();
    allocator_.reset();
    cublasWorkspace_.reset();
    scratch_.reset();
    if (cublas_)
      gCublas.destroy(cublas_);
  }

  Error init(std::unique_ptr<ir::Graph> graph, std::vector<Runner> runners,
             uint64_t scratchBytes, const CompileOptions &options) {
    graph_ = std::move(graph);
    device_ = std::make_unique<CudaDevice>();
    if (auto err = device_->init())
      return err;
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
      stats_.deviceName = std::string(prop.name) + ", sm_" +
                          std::to_string(prop.major * 10 + prop.minor);
    if (cublasStatus_t s = gCublas.create(&cublas_))
      return cublasError(s, "cublasCreate");
    gCublas.setStream(cublas_, device_->getStream());
    auto workspace = device_->allocate(kCublasWorkspaceBytes,
                                       "the cuBLAS workspace");
    if (!workspace)
      return workspace.takeError();
    cublasWorkspace_ = std::move(*workspace);
    if (cublasStatus_t s = gCublas.setWorkspace(
            cublas_, cublasWorkspace_.get(), kCublasWorkspaceBytes))
      return cublasError(s, "cublasSetWorkspace");
    stats_.cublasWorkspaceBytes = kCublasWorkspaceBytes;
    if (scratchBytes) {
      auto scratch = device_->allocate(scratchBytes, "the kernel workspace");
      if (!scratch)
        return scratch.takeError();
      scratch_ = std::move(*scratch);
    }
    stats_.scratchBytes = scratchBytes;
    if (const ir::MemoryPlan *plan = graph_->getMemoryPlan()) {
      allocator_ = std::make_unique<ArenaAllocator>(*plan, *device_);
      stats_.arenaBytes = plan->arenaBytes;
    } else {
      allocator_ = std::make_unique<HeapAllocator>(*device_);
    }
    std::vector<NodeRunner> nodeRunners;
    for (Runner &runner : runners)
      nodeRunners.push_back(
          [this, runner = std::move(runner)](const ir::Node &,
                                             ArrayRef<Tensor> in,
                                             ArrayRef<Tensor> out) {
            return runner(RunContext{*device_, cublas_, scratch_.get()}, in,
                          out);
          });
    executor_ = std::make_unique<Executor>(*graph_, std::move(nodeRunners),
                                           *allocator_, *device_,
                                           options.profile);
    if (cudaError_t err = cudaDeviceSynchronize())
      return cudaError(err, "initializing the device");
    stats_.usedBytesAtCompile = usedDeviceBytes();
    return Error::success();
  }

  Expected<RunResult> run(ArrayRef<Tensor> inputs) override {
    auto result = executor_->run(inputs);
    if (result) {
      stats_.usedBytesAfterStep = usedDeviceBytes();
      stats_.inputBytes = device_->getInputBytes();
      if (!graph_->getMemoryPlan())
        stats_.arenaBytes = result->peakBytes;
    }
    return result;
  }
  const ir::Graph &getGraph() const override { return *graph_; }

  CudaStats stats_;

private:
  std::unique_ptr<ir::Graph> graph_;
  std::unique_ptr<CudaDevice> device_;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublasWorkspace_, scratch_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Executor> executor_;
};

/// \returns the values of \p graph known without its inputs, up to 64 KiB
/// each: results of Constant, Shape, ConstantOfShape and Range, and the
/// integer and bool results (shapes, axes, masks) of nodes whose operands
/// are all known. Float arithmetic on known values still runs on the device.
KnownValues computeKnownValues(const ir::Graph &graph) {
  constexpr int64_t kMaxKnownBytes = 64 * 1024;
  KnownValues known;
  for (const ir::Node &node : graph.getNodes()) {
    ir::OpKind op = node.getOp();
    bool source = op == ir::OpKind::Constant || op == ir::OpKind::Shape ||
                  op == ir::OpKind::ConstantOfShape ||
                  op == ir::OpKind::Range;
    bool integral = true;
    for (const ir::Value *result : node.getResults())
      integral &= !ir::isFloat(result->getType().getDType());
    if (ir::hasTrait(op, ir::OpTrait::kRandom) || !(source || integral))
      continue;
    // A Constant's bytes are in the graph already; a large ConstantOfShape
    // (the zeros a gradient accumulates into) is filled on the device.
    bool tooLarge = false;
    for (const ir::Value *result : node.getResults())
      tooLarge |= result->getType().getByteSize() > kMaxKnownBytes &&
                  op != ir::OpKind::Constant;
    if (tooLarge)
      continue;
    std::vector<const ir::TensorData *> operands;
    bool all = true;
    for (const ir::Value *operand : node.getOperands()) {
      const ir::TensorData *data = knownOf(known, operand);
      if (!data && node.getOp() != ir::OpKind::Shape) {
        all = false;
        break;
      }
      operands.push_back(data);
    }
    if (!all)
      continue;
    auto results = cpu::evaluateNode(node, operands);
    if (!results) {
      llvm::consumeError(results.takeError()); // the node reports it when run
      continue;
    }
    for (unsigned i = 0; i < node.getNumResults(); ++i)
      known[node.getResult(i)] = (*results)[i];
  }
  return known;
}

/// Chooses every node's runner: the plan compile() runs, and the coverage
/// planCudaCoverage() reports. Touches no device.
Error selectRunners(const ir::Graph &graph, const CompileOptions &options,
                    std::vector<Runner> &runners, uint64_t &scratchBytes,
                    CudaCoverage &coverage) {
  KnownValues known = computeKnownValues(graph);
  for (const ir::Node &node : graph.getNodes()) {
    if (node.getNumResults() == 1) {
      auto it = known.find(node.getResult(0));
      if (it != known.end()) {
        runners.push_back(constantRunner(it->second));
        ++coverage.constantNodes;
        continue;
      }
    }
    if (auto err = ir::checkResultTypes(node))
      return err;
    if (MaybeRunner runner =
            selectDeviceRunner(node, known, options, scratchBytes)) {
      runners.push_back(std::move(*runner));
      ++coverage.deviceNodes;
      continue;
    }
    runners.push_back(hostRunner(node));
    coverage.hostNodes.push_back(node.describe());
  }
  return Error::success();
}

class CudaBackend : public Backend {
public:
  llvm::StringRef getName() const override { return "cuda"; }

  Expected<std::unique_ptr<Executable>>
  compile(const ir::Graph &graph, const CompileOptions &options) override {
    if (auto err = ir::verify(graph))
      return std::move(err);
    if (auto err = checkCudaDevice())
      return std::move(err);
    if (auto err = loadCublasImpl())
      return std::move(err);
    std::unique_ptr<ir::Graph> copy = graph.clone();
    std::vector<Runner> runners;
    uint64_t scratchBytes = 0;
    CudaCoverage coverage;
    if (auto err =
            selectRunners(*copy, options, runners, scratchBytes, coverage))
      return std::move(err);
    auto executable = std::make_unique<CudaExecutable>();
    if (auto err = executable->init(std::move(copy), std::move(runners),
                                    scratchBytes, options))
      return std::move(err);
    executable->stats_.constantNodes = coverage.constantNodes;
    executable->stats_.hostNodes = unsigned(coverage.hostNodes.size());
    return std::unique_ptr<Executable>(std::move(executable));
  }
};

} // namespace

Error loadCublas() { return loadCublasImpl(); }

std::unique_ptr<Backend> createCudaBackend() {
  return std::make_unique<CudaBackend>();
}

Expected<CudaCoverage> planCudaCoverage(const ir::Graph &graph) {
  if (auto err = ir::verify(graph))
    return std::move(err);
  std::vector<Runner> runners;
  uint64_t scratchBytes = 0;
  CudaCoverage coverage;
  if (auto err = selectRunners(graph, CompileOptions(), runners, scratchBytes,
                               coverage))
    return std::move(err);
  return coverage;
}

const CudaStats *getCudaStats(const Executable &executable) {
  if (auto *cuda = dynamic_cast<const CudaExecutable *>(&executable))
    return &cuda->stats_;
  return nullptr;
}

} // namespace remat::runtime::cuda
