//===- runtime/Executor.cpp - Walking the schedule ------------------------===//
#include "runtime/Executor.h"

#include "ir/Support.h"

#include "llvm/ADT/DenseSet.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace remat::runtime {

Executable::~Executable() = default;
Backend::~Backend() = default;
Allocator::~Allocator() = default;

llvm::Error checkInputs(const ir::Graph &graph, llvm::ArrayRef<Tensor> inputs) {
  if (inputs.size() != graph.getNumInputs())
    return makeError("graph @" + graph.getName() + " has " +
                     llvm::Twine(graph.getNumInputs()) + " inputs, got " +
                     llvm::Twine(inputs.size()) + " tensors");
  for (unsigned i = 0; i < inputs.size(); ++i) {
    const ir::Value *input = graph.getInput(i);
    if (inputs[i].getType() != input->getType())
      return makeError("input %" + input->getName() + " expects " +
                       input->getType().str() + ", got " +
                       inputs[i].getType().str());
    if (!inputs[i].getData() && input->getType().getByteSize() != 0)
      return makeError("input %" + input->getName() + " has no data");
  }
  return llvm::Error::success();
}

llvm::Expected<void *> HeapAllocator::allocate(const ir::Value &value) {
  uint64_t bytes = uint64_t(value.getType().getByteSize());
  // aligned_alloc needs a size that is a multiple of the alignment, and
  // zero-sized tensors still get a distinct, valid pointer.
  uint64_t rounded = std::max<uint64_t>(64, (bytes + 63) / 64 * 64);
  void *data = std::aligned_alloc(64, rounded);
  if (!data)
    return makeError("out of memory allocating " + llvm::Twine(bytes) +
                     " bytes for %" + value.getName());
  currentBytes_ += bytes;
  peakBytes_ = std::max(peakBytes_, currentBytes_);
  return data;
}

void HeapAllocator::release(const ir::Value &value, void *data) {
  currentBytes_ -= uint64_t(value.getType().getByteSize());
  std::free(data);
}

ArenaAllocator::ArenaAllocator(const ir::MemoryPlan &plan) : plan_(plan) {}

ArenaAllocator::~ArenaAllocator() { std::free(base_); }

llvm::Expected<void *> ArenaAllocator::allocate(const ir::Value &value) {
  std::optional<uint64_t> offset = plan_.lookup(&value);
  if (!offset)
    return makeError("memory plan has no offset for %" + value.getName());
  if (!base_) {
    // One allocation for the whole step; at least one aligned block so that
    // zero-sized values still get a valid pointer.
    const uint64_t align = ir::MemoryPlan::kAlignment;
    uint64_t rounded =
        std::max<uint64_t>(align, (plan_.arenaBytes + align - 1) / align * align);
    if (rounded > uint64_t(SIZE_MAX))
      return makeError("arena of " + llvm::Twine(plan_.arenaBytes) +
                       " bytes does not fit in this process");
    base_ = static_cast<char *>(std::aligned_alloc(align, size_t(rounded)));
    if (!base_)
      return makeError("out of memory allocating the arena of " +
                       llvm::Twine(plan_.arenaBytes) + " bytes");
  }
  uint64_t bytes = uint64_t(value.getType().getByteSize());
  assert(*offset + bytes <= plan_.arenaBytes && "value outside the arena");
  highWaterBytes_ = std::max(highWaterBytes_, *offset + bytes);
  return base_ + *offset;
}

Executor::Executor(const ir::Graph &graph, std::vector<NodeRunner> runners,
                   Allocator &allocator, bool profile)
    : graph_(graph), runners_(std::move(runners)), allocator_(allocator),
      profile_(profile) {
  for (const ir::Node &node : graph.getNodes())
    nodes_.push_back(&node);
  assert(runners_.size() == nodes_.size() && "one runner per node");
  // The last use of each node result, by schedule position. Graph outputs
  // are never released during the step; results nobody uses die at once.
  llvm::DenseMap<const ir::Node *, size_t> position;
  for (size_t i = 0; i < nodes_.size(); ++i)
    position[nodes_[i]] = i;
  releaseAfter_.resize(nodes_.size());
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

llvm::Expected<RunResult> Executor::run(llvm::ArrayRef<Tensor> inputs) {
  if (auto err = checkInputs(graph_, inputs))
    return std::move(err);
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  allocator_.resetPeak();
  llvm::DenseMap<const ir::Value *, Tensor> live;
  for (unsigned i = 0; i < inputs.size(); ++i)
    live[graph_.getInput(i)] = inputs[i];

  // On error, give back everything still held.
  auto releaseAll = [&]() {
    for (auto &entry : live)
      if (!entry.first->isGraphInput())
        allocator_.release(*entry.first, entry.second.getData());
    live.clear();
  };

  RunResult result;
  if (profile_)
    result.nodeSeconds.resize(nodes_.size());
  llvm::SmallVector<Tensor, 4> operandTensors, resultTensors;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const ir::Node &node = *nodes_[i];
    operandTensors.clear();
    resultTensors.clear();
    for (const ir::Value *operand : node.getOperands())
      operandTensors.push_back(live.lookup(operand));
    for (const ir::Value *value : node.getResults()) {
      auto data = allocator_.allocate(*value);
      if (!data) {
        releaseAll();
        return data.takeError();
      }
      Tensor tensor(value->getType(), *data);
      live[value] = tensor;
      resultTensors.push_back(tensor);
    }
    auto nodeStart = profile_ ? Clock::now() : Clock::time_point();
    if (auto err = runners_[i](node, operandTensors, resultTensors)) {
      releaseAll();
      return std::move(err);
    }
    if (profile_)
      result.nodeSeconds[i] =
          std::chrono::duration<double>(Clock::now() - nodeStart).count();
    for (const ir::Value *dead : releaseAfter_[i]) {
      allocator_.release(*dead, live.lookup(dead).getData());
      live.erase(dead);
    }
  }

  for (const ir::Value *output : graph_.getOutputs()) {
    OwnedTensor owned(output->getType());
    Tensor source = live.lookup(output);
    if (output->getType().getByteSize() != 0)
      std::memcpy(owned.getData(), source.getData(),
                  size_t(output->getType().getByteSize()));
    result.outputs.push_back(std::move(owned));
  }
  releaseAll();
  result.peakBytes = allocator_.getPeakBytes();
  if (const ir::MemoryPlan *plan = graph_.getMemoryPlan())
    result.plannedBytes = plan->arenaBytes;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return std::move(result);
}

} // namespace remat::runtime
