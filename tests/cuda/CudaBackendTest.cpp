//===- tests/cuda/CudaBackendTest.cpp - The CUDA backend against the CPU --===//
//
// remat-cuda-tests [--pipeline P] [--bind B] [--rtol R] [--backend cuda]
//                  MODEL...
//
// For every model: load it (optionally run a pipeline, e.g. the training
// step, and plan memory), generate its inputs as remat-run does, run one step
// on the CPU backend and two on the CUDA backend, and check that
//   - every output agrees with the CPU's (tests/cuda/CompareOutputs.h):
//     floats within relative error R in the 2-norm over the finite elements
//     (||gpu - cpu|| <= R * max(||cpu||, S * sqrt(n)), S the median rms of
//     the model's outputs, so that a gradient that is zero but for rounding
//     is held to the model's scale, not its own; elementwise the largest
//     difference is printed), each NaN and infinity matched by the same,
//     integers and bools exactly;
//   - the CPU can run the model: one it cannot run fails (nothing checked);
//   - the two CUDA steps give the same bits (no atomics, one stream).
// Prints one line per model and the nodes that ran on the host.
//
// --backend cpu tests the harness itself on machines without a GPU (the CPU
// against itself). Without a GPU or driver it prints "SKIPPED: no CUDA device
// (<reason>)" and exits 77, which ctest (SKIP_RETURN_CODE) shows as skipped.
//
//===----------------------------------------------------------------------===//
#include "session/ModelLoader.h"
#include "session/Pipeline.h"
#include "driver/RunDriver.h"
#include "ir/Support.h"
#include "runtime/Backends.h"
#include "runtime/cuda/CudaBackend.h"
#include "tests/cuda/CompareOutputs.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace remat;

namespace {

constexpr int kSkipCode = 77;

struct Options {
  std::string pipeline;
  std::string bind;
  double rtol = 1e-5;
  std::string backend = "cuda";
  std::vector<std::string> models;
};

/// \returns the outputs of one step of \p graph on \p backend.
llvm::Expected<std::vector<runtime::OwnedTensor>>
runOn(llvm::StringRef backendName, const ir::Graph &graph,
      llvm::ArrayRef<runtime::Tensor> inputs, unsigned steps,
      std::vector<std::vector<runtime::OwnedTensor>> *all,
      unsigned *hostNodes) {
  auto backend = runtime::createBackend(backendName);
  if (!backend)
    return backend.takeError();
  auto executable = (*backend)->compile(graph, runtime::CompileOptions());
  if (!executable)
    return executable.takeError();
  std::vector<runtime::OwnedTensor> last;
  for (unsigned s = 0; s < steps; ++s) {
    auto result = (*executable)->run(inputs);
    if (!result)
      return result.takeError();
    last = result->outputs;
    if (all)
      all->push_back(result->outputs);
  }
  if (hostNodes)
    if (const auto *stats = runtime::cuda::getCudaStats(**executable))
      *hostNodes = stats->hostNodes;
  return last;
}

/// \returns true when \p model passes.
bool checkModel(const std::string &model, const Options &options) {
  session::LoadOptions load;
  load.bind = options.bind;
  load.splitInputFile = false;
  auto graph = session::loadModel(model, load);
  if (!graph) {
    llvm::outs() << model << ": FAIL: " << errorToString(graph.takeError())
                 << '\n';
    return false;
  }
  if (!options.pipeline.empty()) {
    session::PipelineOptions pipelineOptions;
    auto ran = session::runPipeline(**graph, options.pipeline, pipelineOptions,
                                   llvm::nulls());
    if (!ran) {
      llvm::outs() << model << ": FAIL: " << errorToString(ran.takeError())
                   << '\n';
      return false;
    }
  }
  auto inputs = driver::makeInputs(**graph, {}, /*seed=*/0);
  if (!inputs) {
    llvm::outs() << model << ": FAIL: " << errorToString(inputs.takeError())
                 << '\n';
    return false;
  }
  std::vector<runtime::Tensor> views;
  for (const runtime::OwnedTensor &t : *inputs)
    views.push_back(t.view());
  auto cpu = runOn("cpu", **graph, views, 1, nullptr, nullptr);
  if (!cpu) {
    // Nothing to compare against (f16 arithmetic, say): nothing was
    // checked, so the model does not pass.
    llvm::outs() << model << ": FAIL: the cpu reference cannot run it: "
                 << errorToString(cpu.takeError()) << '\n';
    return false;
  }
  std::vector<std::vector<runtime::OwnedTensor>> steps;
  unsigned hostNodes = 0;
  auto gpu = runOn(options.backend, **graph, views, 2, &steps, &hostNodes);
  if (!gpu) {
    llvm::outs() << model << ": FAIL: " << options.backend << ": "
                 << errorToString(gpu.takeError()) << '\n';
    return false;
  }
  bool ok = true;
  double worstRel = 0;
  double scale = cuda_tests::modelScale(*cpu);
  for (unsigned i = 0; i < (**graph).getOutputs().size(); ++i) {
    const ir::Value &output = *(**graph).getOutputs()[i];
    std::string problem = cuda_tests::compareOutput(
        output.getName(), (*gpu)[i], (*cpu)[i], options.rtol, worstRel, scale);
    if (!problem.empty()) {
      llvm::outs() << model << ": FAIL: " << problem << '\n';
      ok = false;
    }
    int64_t bytes = (*cpu)[i].getType().getByteSize();
    if (bytes && std::memcmp(steps[0][i].getData(), steps[1][i].getData(),
                             size_t(bytes))) {
      llvm::outs() << model << ": FAIL: %" << output.getName()
                   << ": two steps gave different bits\n";
      ok = false;
    }
  }
  llvm::outs() << model << ": " << (ok ? "ok" : "FAIL") << " ("
               << (**graph).getOutputs().size() << " outputs, worst relative error "
               << llvm::format("%.3g", worstRel) << ", " << hostNodes
               << " nodes on the host, " << options.backend
               << " steps bitwise equal)\n";
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--pipeline" && i + 1 < argc)
      options.pipeline = argv[++i];
    else if (arg == "--bind" && i + 1 < argc)
      options.bind = argv[++i];
    else if (arg == "--backend" && i + 1 < argc)
      options.backend = argv[++i];
    else if (arg == "--rtol" && i + 1 < argc)
      options.rtol = std::stod(argv[++i]);
    else
      options.models.push_back(arg);
  }
  if (options.backend != "cuda") {
    // The harness on the CPU: nothing to skip.
  } else if (auto err = runtime::cuda::checkCudaDevice()) {
    llvm::outs() << "SKIPPED: no CUDA device (" << errorToString(std::move(err))
                 << ")\n";
    return kSkipCode;
  }
  bool ok = true;
  for (const std::string &model : options.models)
    ok &= checkModel(model, options);
  return ok ? 0 : 1;
}
