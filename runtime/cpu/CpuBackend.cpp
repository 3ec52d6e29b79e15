//===- runtime/cpu/CpuBackend.cpp - The reference backend -----------------===//
#include "runtime/cpu/CpuBackend.h"

#include "ir/Support.h"
#include "ir/Verifier.h"
#include "runtime/Device.h"
#include "runtime/Executor.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include <stdexcept>
#include <system_error>
#include <thread>

namespace remat::runtime {

namespace cpu {
namespace {

class CpuExecutable : public Executable {
public:
  CpuExecutable(std::unique_ptr<ir::Graph> graph, unsigned numThreads,
                bool profile, bool checkArena, std::vector<Kernel> kernels)
      : graph_(std::move(graph)), device_(createHostDevice()),
        parallel_(numThreads) {
    // A planned graph runs in its arena; others take tensors from the heap.
    if (const ir::MemoryPlan *plan = graph_->getMemoryPlan())
      allocator_ = std::make_unique<ArenaAllocator>(
          *plan, *device_, checkArena ? kArenaGuardBytes : 0);
    else
      allocator_ = std::make_unique<HeapAllocator>(*device_);
    std::vector<NodeRunner> runners;
    for (Kernel &kernel : kernels)
      runners.push_back([this, kernel = std::move(kernel)](
                            const ir::Node &node, llvm::ArrayRef<Tensor> inputs,
                            llvm::ArrayRef<Tensor> outputs) {
        return kernel(KernelContext{node, inputs, outputs, parallel_});
      });
    executor_ = std::make_unique<Executor>(*graph_, std::move(runners),
                                           *allocator_, *device_, profile,
                                           checkArena);
  }

  llvm::Expected<RunResult> run(llvm::ArrayRef<Tensor> inputs) override {
    return executor_->run(inputs);
  }
  const ir::Graph &getGraph() const override { return *graph_; }

private:
  /// A copy of the compiled graph; its weights share their TensorData with
  /// the caller's graph (Graph::clone copies TensorDataPtr, not bytes).
  std::unique_ptr<ir::Graph> graph_;
  std::unique_ptr<Device> device_;
  ThreadPoolParallelFor parallel_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Executor> executor_;
};

class CpuBackend : public Backend {
public:
  llvm::StringRef getName() const override { return "cpu"; }

  llvm::Expected<std::unique_ptr<Executable>>
  compile(const ir::Graph &graph, const CompileOptions &options) override {
    if (auto err = ir::verify(graph))
      return std::move(err);
    std::unique_ptr<ir::Graph> copy = graph.clone();
    std::vector<Kernel> kernels;
    for (const ir::Node &node : copy->getNodes()) {
      auto kernel = selectKernel(node);
      if (!kernel)
        return kernel.takeError();
      kernels.push_back(std::move(*kernel));
    }
    unsigned threads = options.numThreads
                           ? options.numThreads
                           : std::max(1u, std::thread::hardware_concurrency());
    // The machine decides how many threads can start (RLIMIT_NPROC,
    // threads-max, memory for stacks): one that cannot is an error.
    try {
      return std::make_unique<CpuExecutable>(
          std::move(copy), threads, options.profile, options.checkArena,
          std::move(kernels));
    } catch (const std::system_error &e) {
      return makeError("cannot start " + llvm::Twine(threads) +
                       " kernel threads: " + e.what());
    } catch (const std::length_error &e) {
      return makeError("cannot start " + llvm::Twine(threads) +
                       " kernel threads: " + e.what());
    }
  }
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace cpu

} // namespace remat::runtime
