//===- tests/unit/RuntimeTest.cpp - Backends, devices, weights held once --===//
//
// The backend registry (what is built, and the error for what is not), the
// Device seam of the executor (a device other than the host's runs the same
// walk, with its own transfers and clock), and that weights are held once:
// the tensors remat-run feeds and the compiled graph share the IR's bytes,
// and the outputs of a step view its arena.
//
//===----------------------------------------------------------------------===//
#include "driver/RunDriver.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "runtime/Backends.h"
#include "runtime/Device.h"
#include "runtime/Executor.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include "llvm/ADT/StringExtras.h"

#include <doctest/doctest.h>

#include <cstring>
#include <set>

using namespace remat;
using namespace remat::ir;
using namespace remat::runtime;

namespace {

std::unique_ptr<Graph> parse(llvm::StringRef text) {
  auto graph = parseGraph(text, "test");
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  return std::move(*graph);
}

void plan(Graph &graph) {
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  passes::PassManager pm;
  llvm::Error err =
      passes::parsePassPipeline("schedule,plan-memory", registry, pm);
  REQUIRE_MESSAGE(!err, errorToString(std::move(err)));
  auto changed = pm.run(graph);
  REQUIRE_MESSAGE(bool(changed), errorToString(changed.takeError()));
}

/// A weight with data, a step with two outputs that are live together.
const char *kStep = R"(graph @step(%x: f32[4], %w: f32[4] weight = dense<f32[4]: [1.0, 2.0, 3.0, 4.0]>) {
  %a = Mul(%x, %w) : f32[4]
  %b = Exp(%a) : f32[4]
  %c = Neg(%a) : f32[4]
  return %b, %c
}
)";

std::unique_ptr<Executable> compile(const Graph &graph) {
  auto backend = createBackend("cpu");
  REQUIRE(bool(backend));
  CompileOptions options;
  options.numThreads = 1;
  auto executable = (*backend)->compile(graph, options);
  REQUIRE_MESSAGE(bool(executable), errorToString(executable.takeError()));
  return std::move(*executable);
}

std::vector<float> values(const OwnedTensor &tensor) {
  std::vector<float> out(size_t(tensor.getType().getNumElements()));
  std::memcpy(out.data(), tensor.getData(), out.size() * sizeof(float));
  return out;
}

} // namespace

TEST_CASE("makeInputs draws labels that index the classes") {
  // Labels feeding the loss or only its fused gradient are drawn from
  // [0, C), every class reachable (C = 5 here, 64 labels).
  for (const char *use :
       {"%y = SoftmaxCrossEntropyLoss(%lp, %lab) : f32[]",
        "%y = remat.SoftmaxCrossEntropyGrad(%lp, %lab, %s) : f32[64,5]"}) {
    INFO(use);
    std::string text = std::string("graph @g(%lp: f32[64,5], %lab: i64[64], "
                                   "%s: f32[64]) {\n  ") +
                       use + "\n  return %y\n}\n";
    auto graph = ir::parseGraph(text, "g.rir");
    REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
    auto inputs = driver::makeInputs(**graph, {}, /*seed=*/3);
    REQUIRE_MESSAGE(bool(inputs), errorToString(inputs.takeError()));
    const auto *labels = static_cast<const int64_t *>((*inputs)[1].getData());
    std::set<int64_t> seen(labels, labels + 64);
    CHECK(*seen.begin() >= 0);
    CHECK(*seen.rbegin() <= 4);
    CHECK(seen.size() == 5);
  }
}

TEST_CASE("the backend registry lists the backends this build has") {
  std::vector<llvm::StringRef> names = listBackends();
  REQUIRE(!names.empty());
  CHECK(names.front() == "cpu");
  for (llvm::StringRef name : names) {
    auto backend = createBackend(name);
    REQUIRE_MESSAGE(bool(backend), errorToString(backend.takeError()));
    CHECK((*backend)->getName() == name);
  }
}

TEST_CASE("an unknown backend is an error that lists the built ones") {
  auto backend = createBackend("tpu");
  REQUIRE(!backend);
  std::string message = errorToString(backend.takeError());
  CHECK(message == "unknown backend 'tpu' (available: " +
                       llvm::join(listBackends(), ", ") + ")");
  CHECK(llvm::StringRef(message).contains("cpu"));
}

TEST_CASE("weights are held once: inputs and the compiled graph share the "
          "IR's bytes") {
  auto graph = parse(kStep);
  const Value *w = graph->lookup("w");
  REQUIRE(w->getData());
  auto given = TensorData::fromDoubles(TensorType(DType::F32, {4}),
                                       {1.0, 1.0, 1.0, 1.0});
  llvm::StringMap<TensorDataPtr> givenMap;
  givenMap["x"] = given;
  auto inputs = driver::makeInputs(*graph, givenMap, /*seed=*/1);
  REQUIRE(bool(inputs));
  REQUIRE(inputs->size() == 2);
  // A given file and a weight: views of the TensorData, not copies.
  CHECK((*inputs)[0].getData() == given->getBytes().data());
  CHECK((*inputs)[1].getData() == w->getData()->getBytes().data());

  // The executable's copy of the graph shares the TensorData itself.
  std::unique_ptr<Executable> executable = compile(*graph);
  CHECK(executable->getGraph().lookup("w")->getData().get() ==
        w->getData().get());

  // A shared tensor keeps its data alive after the graph has gone.
  graph.reset();
  executable.reset();
  CHECK(values((*inputs)[1]) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("outputs view the step's arena and survive the next step") {
  auto graph = parse(kStep);
  plan(*graph);
  const MemoryPlan *memoryPlan = graph->getMemoryPlan();
  REQUIRE(memoryPlan);
  std::unique_ptr<Executable> executable = compile(*graph);
  auto inputs = driver::makeInputs(*graph, {}, /*seed=*/1);
  REQUIRE(bool(inputs));
  std::vector<Tensor> views{(*inputs)[0].view(), (*inputs)[1].view()};

  auto first = executable->run(views);
  REQUIRE_MESSAGE(bool(first), errorToString(first.takeError()));
  REQUIRE(first->outputs.size() == 2);
  // Both outputs lie in one arena at their planned offsets: no copies.
  const Value *b = graph->lookup("b"), *c = graph->lookup("c");
  CHECK(static_cast<char *>(first->outputs[1].getData()) -
            static_cast<char *>(first->outputs[0].getData()) ==
        int64_t(*memoryPlan->lookup(c)) - int64_t(*memoryPlan->lookup(b)));
  std::vector<float> firstB = values(first->outputs[0]);

  // A second step while the first's outputs are held takes a fresh arena.
  std::vector<float> x = {-1, -2, -3, -4};
  views[0] = Tensor(TensorType(DType::F32, {4}), x.data());
  auto second = executable->run(views);
  REQUIRE_MESSAGE(bool(second), errorToString(second.takeError()));
  CHECK(values(first->outputs[0]) == firstB);
  CHECK(values(second->outputs[0]) != firstB);
  CHECK(second->peakBytes == memoryPlan->arenaBytes);
}

namespace {

/// The host's memory behind a device that counts what the executor asks of
/// it, copies on upload and download as a device with memory of its own
/// would, and keeps its own clock.
class CountingDevice : public Device {
public:
  llvm::StringRef getName() const override { return "counting"; }
  llvm::Expected<DeviceBuffer> allocate(uint64_t bytes,
                                        const llvm::Twine &what) override {
    ++allocations;
    return host_->allocate(bytes, what);
  }
  llvm::Expected<Tensor> upload(const Tensor &host,
                                DeviceBuffer &holder) override {
    ++uploads;
    auto buffer = host_->allocate(uint64_t(host.getByteSize()), "upload");
    if (!buffer)
      return buffer.takeError();
    std::memcpy(buffer->get(), host.getData(), size_t(host.getByteSize()));
    holder = *buffer;
    return Tensor(host.getType(), holder.get());
  }
  llvm::Expected<OwnedTensor> download(const Tensor &device,
                                       const DeviceBuffer &) override {
    ++downloads;
    OwnedTensor host(device.getType());
    std::memcpy(host.getData(), device.getData(),
                size_t(device.getByteSize()));
    return std::move(host);
  }
  llvm::Error synchronize() override {
    ++synchronizations;
    return llvm::Error::success();
  }
  llvm::Expected<double> now() override { return clock += 0.5; }

  unsigned allocations = 0, uploads = 0, downloads = 0, synchronizations = 0;
  double clock = 0;

private:
  std::unique_ptr<Device> host_ = createHostDevice();
};

} // namespace

TEST_CASE("the executor reaches memory and time only through its device") {
  auto graph = parse(kStep);
  CountingDevice device;
  HeapAllocator allocator(device);
  cpu::ThreadPoolParallelFor parallel(1);
  std::vector<NodeRunner> runners;
  for (const Node &node : graph->getNodes()) {
    auto kernel = cpu::selectKernel(node);
    REQUIRE(bool(kernel));
    runners.push_back([&parallel, kernel = std::move(*kernel)](
                          const Node &node, llvm::ArrayRef<Tensor> inputs,
                          llvm::ArrayRef<Tensor> outputs) {
      return kernel(cpu::KernelContext{node, inputs, outputs, parallel});
    });
  }
  Executor executor(*graph, std::move(runners), allocator, device,
                    /*profile=*/true);
  std::vector<float> x = {1, 1, 1, 1};
  auto weight = graph->lookup("w")->getData();
  std::vector<Tensor> inputs{
      Tensor(TensorType(DType::F32, {4}), x.data()),
      Tensor(weight->getType(),
             const_cast<uint8_t *>(weight->getBytes().data()))};
  auto result = executor.run(inputs);
  REQUIRE_MESSAGE(bool(result), errorToString(result.takeError()));
  CHECK(device.uploads == 2);
  CHECK(device.allocations == 3);
  CHECK(device.downloads == 2);
  CHECK(device.synchronizations >= 1);
  // Start, two readings per node, end: the step and each node take the
  // device clock's word for it.
  CHECK(result->seconds == doctest::Approx(0.5 * (1 + 2 * 3)));
  REQUIRE(result->nodeSeconds.size() == 3);
  for (double seconds : result->nodeSeconds)
    CHECK(seconds == 0.5);
  CHECK(values(result->outputs[1]) == std::vector<float>{-1, -2, -3, -4});
}
