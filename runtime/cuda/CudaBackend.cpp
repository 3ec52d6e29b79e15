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
#include "ir/Verifier.h"
#include "runtime/Executor.h"
#include "runtime/cpu/Evaluator.h"
#include "runtime/cuda/RunnerImpl.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <string>

namespace remat::runtime::cuda {

using namespace detail;

CublasApi detail::gCublas;

namespace {

/// \returns used device bytes (total - free) per cudaMemGetInfo.
uint64_t usedDeviceBytes() {
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
    return 0;
  return uint64_t(totalBytes - freeBytes);
}

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

/// A cuda op family's runner selection, with the arguments of them all.
using DeviceSelector = MaybeRunner (*)(const ir::Node &, const KnownValues &,
                                       const CompileOptions &, uint64_t &);

MaybeRunner selectNone(const ir::Node &, const KnownValues &,
                       const CompileOptions &, uint64_t &) {
  return std::nullopt;
}
MaybeRunner selectElementwiseOf(const ir::Node &node, const KnownValues &known,
                                const CompileOptions &, uint64_t &) {
  return selectElementwise(node, known);
}
MaybeRunner selectMatMulOf(const ir::Node &node, const KnownValues &,
                           const CompileOptions &options, uint64_t &) {
  return selectMatMul(node, options.allowTF32);
}
MaybeRunner selectGemmOf(const ir::Node &node, const KnownValues &,
                         const CompileOptions &options, uint64_t &) {
  return selectGemm(node, options.allowTF32);
}
MaybeRunner selectNormalizationOf(const ir::Node &node, const KnownValues &,
                                  const CompileOptions &,
                                  uint64_t &scratchBytes) {
  return selectNormalization(node, scratchBytes);
}
MaybeRunner selectReduceOf(const ir::Node &node, const KnownValues &known,
                           const CompileOptions &, uint64_t &) {
  return selectReduce(node, known);
}
MaybeRunner selectArgReduceOf(const ir::Node &node, const KnownValues &known,
                              const CompileOptions &, uint64_t &) {
  return selectArgReduce(node, known);
}
MaybeRunner selectDataMovementOf(const ir::Node &node, const KnownValues &known,
                                 const CompileOptions &,
                                 uint64_t &scratchBytes) {
  return selectDataMovement(node, known, scratchBytes);
}
MaybeRunner selectIndexingOf(const ir::Node &node, const KnownValues &known,
                             const CompileOptions &, uint64_t &) {
  return selectIndexing(node, known);
}
MaybeRunner selectConvOf(const ir::Node &node, const KnownValues &,
                         const CompileOptions &, uint64_t &) {
  return selectConv(node);
}

/// The cuda family of each CPU kernel family (Ops.def's Kernel column):
/// the cuda backend's families are the CPU's, some merged (RunnerImpl.h
/// lists them). A family's selector gives nothing for an op it does not run
/// on the device (Mod, Shape, Range, OneHot, ...).
namespace family {
constexpr DeviceSelector Unary = &selectElementwiseOf;
constexpr DeviceSelector Binary = &selectElementwiseOf;
constexpr DeviceSelector ElementwiseMore = &selectElementwiseOf;
constexpr DeviceSelector Max = &selectElementwiseOf;
constexpr DeviceSelector Where = &selectElementwiseOf;
constexpr DeviceSelector Cast = &selectElementwiseOf;
constexpr DeviceSelector Dropout = &selectElementwiseOf;
constexpr DeviceSelector DropoutGrad = &selectElementwiseOf;
constexpr DeviceSelector MatMul = &selectMatMulOf;
constexpr DeviceSelector Gemm = &selectGemmOf;
constexpr DeviceSelector PermutedMatMul = &selectNone;
constexpr DeviceSelector Softmax = &selectNormalizationOf;
constexpr DeviceSelector SoftmaxGrad = &selectNormalizationOf;
constexpr DeviceSelector LayerNormalization = &selectNormalizationOf;
constexpr DeviceSelector LayerNormalizationGrad = &selectNormalizationOf;
constexpr DeviceSelector SoftmaxCrossEntropyLoss = &selectNormalizationOf;
constexpr DeviceSelector SoftmaxCrossEntropyGrad = &selectNormalizationOf;
constexpr DeviceSelector Reduce = &selectReduceOf;
constexpr DeviceSelector ArgReduce = &selectArgReduceOf;
constexpr DeviceSelector DataMovement = &selectDataMovementOf;
constexpr DeviceSelector Indexing = &selectIndexingOf;
constexpr DeviceSelector Conv = &selectConvOf;
constexpr DeviceSelector Extern = &selectNone;
} // namespace family

/// The device selector of every op, by its Ops.def row, indexed by OpKind.
constexpr DeviceSelector kDeviceSelectors[] = {
#define OP(NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS, \
           TRAITS, COST, INFER, KERNEL, ...)                                   \
  family::KERNEL,
#include "ir/Ops.def"
};

/// The device runner for \p node, or nothing: its op family decides.
MaybeRunner selectDeviceRunner(const ir::Node &node, const KnownValues &known,
                               const CompileOptions &options,
                               uint64_t &scratchBytes) {
  if (!fitsRank(node))
    return std::nullopt;
  return kDeviceSelectors[size_t(node.getOp())](node, known, options,
                                                scratchBytes);
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
