//===- runtime/Executor.cpp - Walking the schedule ------------------------===//
#include "runtime/Executor.h"

#include "ir/Support.h"
#include "ir/UpdateName.h"

#include "llvm/ADT/STLExtras.h"

#include <cstring>

namespace remat::runtime {

Allocator::~Allocator() = default;

llvm::Expected<Placement> HeapAllocator::allocate(const ir::Value &value) {
  uint64_t bytes = uint64_t(value.getType().getByteSize());
  auto buffer = device_.allocate(bytes, "%" + value.getName());
  if (!buffer)
    return buffer.takeError();
  currentBytes_ += bytes;
  peakBytes_ = std::max(peakBytes_, currentBytes_);
  void *data = buffer->get();
  return Placement{data, std::move(*buffer)};
}

void HeapAllocator::release(const ir::Value &value) {
  currentBytes_ -= uint64_t(value.getType().getByteSize());
}

void ArenaAllocator::beginStep() {
  highWaterBytes_ = 0;
  // Outputs of an earlier step still held by the caller lie in this arena:
  // leave it to them.
  if (arena_.use_count() > 1)
    arena_.reset();
}

llvm::Expected<Placement> ArenaAllocator::allocate(const ir::Value &value) {
  std::optional<uint64_t> offset = plan_.lookup(&value);
  if (!offset)
    return makeError("memory plan has no offset for %" + value.getName());
  if (!arena_) {
    // One allocation for the whole step.
    static_assert(kDeviceAlignment % ir::MemoryPlan::kAlignment == 0,
                  "planned offsets must stay aligned in a device block");
    auto arena = device_.allocate(plan_.arenaBytes, "the arena");
    if (!arena)
      return arena.takeError();
    arena_ = std::move(*arena);
  }
  uint64_t bytes = uint64_t(value.getType().getByteSize());
  assert(*offset + bytes <= plan_.arenaBytes && "value outside the arena");
  highWaterBytes_ = std::max(highWaterBytes_, *offset + bytes);
  return Placement{static_cast<char *>(arena_.get()) + *offset, arena_};
}

Executor::Executor(const ir::Graph &graph, std::vector<NodeRunner> runners,
                   Allocator &allocator, Device &device, bool profile)
    : graph_(graph), runners_(std::move(runners)), allocator_(allocator),
      device_(device), profile_(profile) {
  for (const ir::Node &node : graph.getNodes())
    nodes_.push_back(&node);
  assert(runners_.size() == nodes_.size() && "one runner per node");
  // The last use of each node result, by schedule position. Graph outputs
  // are never released during the step; results nobody uses die at once.
  llvm::DenseMap<const ir::Node *, size_t> position;
  for (size_t i = 0; i < nodes_.size(); ++i)
    position[nodes_[i]] = i;
  releaseAfter_.resize(nodes_.size());
  llvm::DenseMap<const ir::Value *, unsigned> inputIndex;
  for (unsigned i = 0; i < graph.getNumInputs(); ++i)
    inputIndex[graph.getInput(i)] = i;
  // An update goes over its input only when no later node reads the input
  // (plan-memory orders it so; without a plan it may be allocated instead).
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (const ir::Value *result : nodes_[i]->getResults())
      if (const ir::Value *input = ir::getUpdatedInput(result))
        if (llvm::all_of(input->getUses(), [&](const ir::Use &use) {
              return position.lookup(use.user) <= i;
            }))
          updatesInput_[result] = inputIndex.lookup(input);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const ir::Value *result : nodes_[i]->getResults()) {
      if (result->isGraphOutput())
        continue;
      size_t last = i;
      for (const ir::Use &use : result->getUses())
        last = std::max(last, position.lookup(use.user));
      releaseAfter_[last].push_back(result);
    }
  }
}

namespace {
/// A value during a step: the tensor kernels see and the block it lies in.
struct LiveTensor {
  Tensor tensor;
  DeviceBuffer buffer;
};
} // namespace

llvm::Expected<RunResult> Executor::run(llvm::ArrayRef<Tensor> inputs) {
  if (auto err = checkInputs(graph_, inputs))
    return std::move(err);
  auto start = device_.now();
  if (!start)
    return start.takeError();
  allocator_.beginStep();
  llvm::DenseMap<const ir::Value *, LiveTensor> live;

  // On error, give back everything still held.
  auto releaseAll = [&]() {
    for (auto &entry : live)
      if (!entry.first->isGraphInput() && !updatesInput_.count(entry.first))
        allocator_.release(*entry.first);
    live.clear();
  };

  for (unsigned i = 0; i < inputs.size(); ++i) {
    LiveTensor &input = live[graph_.getInput(i)];
    auto uploaded = device_.upload(inputs[i], input.buffer);
    if (!uploaded) {
      releaseAll();
      return uploaded.takeError();
    }
    input.tensor = *uploaded;
  }

  RunResult result;
  if (profile_)
    result.nodeSeconds.resize(nodes_.size());
  llvm::SmallVector<Tensor, 4> operandTensors, resultTensors;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const ir::Node &node = *nodes_[i];
    operandTensors.clear();
    resultTensors.clear();
    for (const ir::Value *operand : node.getOperands())
      operandTensors.push_back(live.lookup(operand).tensor);
    for (const ir::Value *value : node.getResults()) {
      if (auto it = updatesInput_.find(value); it != updatesInput_.end()) {
        // Written over its input, which no later node reads (the optimizer
        // and plan-memory order it so): the update is in place.
        LiveTensor storage = live.lookup(graph_.getInput(it->second));
        live[value] = storage;
        resultTensors.push_back(storage.tensor);
        continue;
      }
      auto placement = allocator_.allocate(*value);
      if (!placement) {
        releaseAll();
        return placement.takeError();
      }
      Tensor tensor(value->getType(), placement->data);
      live[value] = LiveTensor{tensor, std::move(placement->buffer)};
      resultTensors.push_back(tensor);
    }
    double nodeStart = 0;
    if (profile_) {
      auto time = device_.now();
      if (!time) {
        releaseAll();
        return time.takeError();
      }
      nodeStart = *time;
    }
    if (auto err = runners_[i](node, operandTensors, resultTensors)) {
      releaseAll();
      return std::move(err);
    }
    if (profile_) {
      auto time = device_.now();
      if (!time) {
        releaseAll();
        return time.takeError();
      }
      result.nodeSeconds[i] = *time - nodeStart;
    }
    for (const ir::Value *dead : releaseAfter_[i]) {
      allocator_.release(*dead);
      live.erase(dead);
    }
  }

  if (auto err = device_.synchronize()) {
    releaseAll();
    return std::move(err);
  }
  for (const ir::Value *output : graph_.getOutputs()) {
    const LiveTensor &source = live.find(output)->second;
    if (output->isGraphInput()) {
      // The caller's own host tensor: hand back a copy, not a view of it.
      unsigned index = 0;
      while (graph_.getInput(index) != output)
        ++index;
      OwnedTensor owned(output->getType());
      if (output->getType().getByteSize() != 0)
        std::memcpy(owned.getData(), inputs[index].getData(),
                    size_t(output->getType().getByteSize()));
      result.outputs.push_back(std::move(owned));
      continue;
    }
    auto owned = device_.download(source.tensor, source.buffer);
    if (!owned) {
      releaseAll();
      return owned.takeError();
    }
    result.outputs.push_back(std::move(*owned));
  }
  releaseAll();
  result.peakBytes = allocator_.getPeakBytes();
  if (const ir::MemoryPlan *plan = graph_.getMemoryPlan())
    result.plannedBytes = plan->arenaBytes;
  auto end = device_.now();
  if (!end)
    return end.takeError();
  result.seconds = *end - *start;
  return std::move(result);
}

} // namespace remat::runtime
