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

namespace {

/// The CPU kernels of \p graph as runners; the node named \p rogue writes
/// one byte past the end of its result first.
std::vector<NodeRunner> cpuRunners(const Graph &graph,
                                   cpu::ThreadPoolParallelFor &parallel,
                                   llvm::StringRef rogue = "") {
  std::vector<NodeRunner> runners;
  for (const Node &node : graph.getNodes()) {
    auto kernel = cpu::selectKernel(node);
    REQUIRE(bool(kernel));
    bool isRogue = node.getResult(0)->getName() == rogue;
    runners.push_back([&parallel, isRogue, kernel = std::move(*kernel)](
                          const Node &node, llvm::ArrayRef<Tensor> inputs,
                          llvm::ArrayRef<Tensor> outputs) {
      if (isRogue)
        static_cast<char *>(outputs[0].getData())[outputs[0].getByteSize()] =
            1;
      return kernel(cpu::KernelContext{node, inputs, outputs, parallel});
    });
  }
  return runners;
}

/// Ignores the plan: one block of the planned size (and the guard), every
/// value placed at its start; it claims the planned arena as its peak, as
/// bookkeeping would.
class IgnoresPlanAllocator : public Allocator {
public:
  IgnoresPlanAllocator(const MemoryPlan &plan, Device &device)
      : plan_(plan), device_(device) {}
  void beginStep() override {}
  llvm::Expected<Placement> allocate(const Value &) override {
    if (!arena_) {
      auto arena =
          device_.allocate(plan_.arenaBytes + kArenaGuardBytes, "arena");
      if (!arena)
        return arena.takeError();
      arena_ = *arena;
    }
    return Placement{arena_.get(), arena_};
  }
  void release(const Value &) override {}
  uint64_t getPeakBytes() const override { return plan_.arenaBytes; }
  llvm::MutableArrayRef<unsigned char> getArena() override {
    if (!arena_)
      return {};
    return {static_cast<unsigned char *>(arena_.get()),
            size_t(plan_.arenaBytes + kArenaGuardBytes)};
  }

private:
  const MemoryPlan &plan_;
  Device &device_;
  DeviceBuffer arena_;
};

/// Runs one step of the planned \p graph (inputs from seed 1) through an
/// Executor over \p allocator.
llvm::Expected<RunResult> runChecked(const Graph &graph, Allocator &allocator,
                                     Device &device, bool checkArena,
                                     llvm::StringRef rogue = "") {
  cpu::ThreadPoolParallelFor parallel(1);
  Executor executor(graph, cpuRunners(graph, parallel, rogue), allocator,
                    device, /*profile=*/false, checkArena);
  auto inputs = driver::makeInputs(graph, {}, /*seed=*/1);
  REQUIRE(bool(inputs));
  std::vector<Tensor> views;
  for (const OwnedTensor &input : *inputs)
    views.push_back(input.view());
  return executor.run(views);
}

} // namespace

TEST_CASE("a checked arena measures the bytes touched from its poison") {
  auto graph = parse(kStep);
  plan(*graph);
  const MemoryPlan &memoryPlan = *graph->getMemoryPlan();
  std::unique_ptr<Device> device = createHostDevice();
  ArenaAllocator allocator(memoryPlan, *device, kArenaGuardBytes);
  auto result = runChecked(*graph, allocator, *device, /*checkArena=*/true);
  REQUIRE_MESSAGE(bool(result), errorToString(result.takeError()));
  CHECK(result->touchedBytes == memoryPlan.arenaBytes);
  CHECK(result->peakBytes == memoryPlan.arenaBytes);
  // Unchecked, nothing is measured.
  auto unchecked = runChecked(*graph, allocator, *device, false);
  REQUIRE_MESSAGE(bool(unchecked), errorToString(unchecked.takeError()));
  CHECK(unchecked->touchedBytes == 0);
}

TEST_CASE("a checked arena refuses an allocator that ignores the plan") {
  auto graph = parse(kStep);
  plan(*graph);
  const MemoryPlan &memoryPlan = *graph->getMemoryPlan();
  std::unique_ptr<Device> device = createHostDevice();
  IgnoresPlanAllocator allocator(memoryPlan, *device);
  // Bookkeeping cannot tell: the step runs and reports the planned peak.
  auto unchecked = runChecked(*graph, allocator, *device, false);
  REQUIRE_MESSAGE(bool(unchecked), errorToString(unchecked.takeError()));
  CHECK(unchecked->peakBytes == memoryPlan.arenaBytes);
  // The checked arena finds the first value away from its planned offset.
  auto checked = runChecked(*graph, allocator, *device, true);
  REQUIRE(!checked);
  std::string message = errorToString(checked.takeError());
  CHECK_MESSAGE(llvm::StringRef(message).startswith("checked arena: %"),
                message);
  CHECK_MESSAGE(llvm::StringRef(message).contains(
                    "lies at arena offset 0, not at its planned offset"),
                message);
  // Tensors of their own, outside the arena.
  HeapAllocator heap(*device);
  auto outside = runChecked(*graph, heap, *device, true);
  REQUIRE(!outside);
  CHECK(errorToString(outside.takeError()) ==
        "checked arena: %a of node 'a' is placed, but the allocator shows no "
        "arena");
}

TEST_CASE("a checked arena refuses a kernel writing outside its result") {
  auto graph = parse(kStep);
  plan(*graph);
  const MemoryPlan &memoryPlan = *graph->getMemoryPlan();
  std::unique_ptr<Device> device = createHostDevice();
  for (const char *rogue : {"a", "b", "c"}) {
    ArenaAllocator allocator(memoryPlan, *device, kArenaGuardBytes);
    auto result =
        runChecked(*graph, allocator, *device, /*checkArena=*/true, rogue);
    REQUIRE(!result);
    uint64_t end = *memoryPlan.lookup(graph->lookup(rogue)) + 16;
    std::string expected = std::string("checked arena: node '") + rogue +
                           "' (" + graph->lookup(rogue)->getDefiningNode()->getOpSpelling() +
                           ") wrote the arena outside its results' planned "
                           "ranges, at offset " +
                           std::to_string(end);
    if (end >= memoryPlan.arenaBytes)
      expected += ", in the guard after the planned " +
                  std::to_string(memoryPlan.arenaBytes) + " bytes";
    CHECK(errorToString(result.takeError()) == expected);
  }
}

TEST_CASE("a checked arena over 256 KiB watches a window around each result") {
  // 1 MiB tensors: the arena is compared in windows, not whole.
  auto graph = parse(R"(graph @big(%x: f32[262144]) {
  %a = Exp(%x) : f32[262144]
  %b = Neg(%a) : f32[262144]
  %c = Exp(%a) : f32[262144]
  return %b, %c
}
)");
  plan(*graph);
  const MemoryPlan &memoryPlan = *graph->getMemoryPlan();
  REQUIRE(memoryPlan.arenaBytes > (uint64_t(1) << 20));
  std::unique_ptr<Device> device = createHostDevice();
  ArenaAllocator allocator(memoryPlan, *device, kArenaGuardBytes);
  auto result = runChecked(*graph, allocator, *device, /*checkArena=*/true);
  REQUIRE_MESSAGE(bool(result), errorToString(result.takeError()));
  CHECK(result->touchedBytes == memoryPlan.arenaBytes);
  for (const char *rogue : {"a", "b", "c"}) {
    auto bad = runChecked(*graph, allocator, *device, true, rogue);
    REQUIRE(!bad);
    uint64_t end = *memoryPlan.lookup(graph->lookup(rogue)) + (1 << 20);
    CHECK_MESSAGE(llvm::StringRef(errorToString(bad.takeError()))
                      .contains("at offset " + std::to_string(end)),
                  rogue);
  }
}
