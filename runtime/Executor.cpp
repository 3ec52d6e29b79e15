//===- runtime/Executor.cpp - Walking the schedule ------------------------===//
#include "runtime/Executor.h"

#include "ir/Support.h"
#include "ir/UpdateName.h"

#include "llvm/ADT/STLExtras.h"

#include <cstring>
#include <functional>
#include <optional>

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
    auto arena = device_.allocate(plan_.arenaBytes + guardBytes_, "the arena");
    if (!arena)
      return arena.takeError();
    arena_ = std::move(*arena);
  }
  uint64_t bytes = uint64_t(value.getType().getByteSize());
  assert(*offset + bytes <= plan_.arenaBytes && "value outside the arena");
  highWaterBytes_ = std::max(highWaterBytes_, *offset + bytes);
  return Placement{static_cast<char *>(arena_.get()) + *offset, arena_};
}

llvm::MutableArrayRef<unsigned char> ArenaAllocator::getArena() {
  if (!arena_)
    return {};
  return {static_cast<unsigned char *>(arena_.get()),
          size_t(plan_.arenaBytes + guardBytes_)};
}

Executor::Executor(const ir::Graph &graph, std::vector<NodeRunner> runners,
                   Allocator &allocator, Device &device, bool profile,
                   bool checkArena)
    : graph_(graph), runners_(std::move(runners)), allocator_(allocator),
      device_(device), profile_(profile), checkArena_(checkArena) {
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

/// The checks of a checked arena during one step (Executor). It knows the
/// plan and reads the arena's bytes; the allocator's word counts for
/// nothing but where the arena starts.
class ArenaCheck {
public:
  ArenaCheck(const ir::MemoryPlan &plan, Allocator &allocator)
      : plan_(plan), allocator_(allocator) {}

  /// Before \p node runs, with \p placed its results the allocator placed
  /// at \p pointers: poisons an arena new to this step, requires each result
  /// at its planned offset, and copies the bytes watched around the node:
  /// the whole arena up to kWholeArenaBytes, else kWindowBytes on each side
  /// of each result and the guard.
  llvm::Error beforeNode(const ir::Node &node,
                         llvm::ArrayRef<const ir::Value *> placed,
                         llvm::ArrayRef<void *> pointers) {
    ranges_.clear();
    llvm::MutableArrayRef<unsigned char> arena = allocator_.getArena();
    if (arena.empty()) {
      if (!placed.empty())
        return makeError("checked arena: %" + placed.front()->getName() +
                         " of node '" + node.getResult(0)->getName() +
                         "' is placed, but the allocator shows no arena");
      return llvm::Error::success();
    }
    if (arena.data() != poisoned_) {
      std::memset(arena.data(), kArenaPoison, arena.size());
      poisoned_ = arena.data();
      size_ = arena.size();
    }
    for (size_t i = 0; i < placed.size(); ++i) {
      const ir::Value &value = *placed[i];
      uint64_t bytes = uint64_t(value.getType().getByteSize());
      std::optional<uint64_t> offset = plan_.lookup(&value);
      if (!offset)
        return makeError("checked arena: %" + value.getName() +
                         " has no planned offset");
      auto *at = static_cast<unsigned char *>(pointers[i]);
      if (at != arena.data() + *offset) {
        bool inside = std::less_equal<unsigned char *>()(arena.data(), at) &&
                      std::less<unsigned char *>()(at, arena.end());
        return makeError(
            "checked arena: %" + value.getName() + " lies " +
            (inside ? "at arena offset " +
                          std::to_string(uint64_t(at - arena.data()))
                    : std::string("outside the arena")) +
            ", not at its planned offset " + std::to_string(*offset));
      }
      if (bytes)
        ranges_.push_back({*offset, *offset + bytes});
    }
    llvm::sort(ranges_);
    // Watched: the whole arena when small, else a window on each side of
    // every result and the guard; never the results' own ranges.
    watched_.clear();
    before_.clear();
    uint64_t size = arena.size();
    auto watch = [&](uint64_t begin, uint64_t end) {
      for (const auto &range : ranges_) {
        if (begin >= end)
          break;
        if (range.second <= begin)
          continue;
        if (range.first > begin)
          watched_.push_back({begin, std::min(end, range.first)});
        begin = std::max(begin, range.second);
      }
      if (begin < end)
        watched_.push_back({begin, end});
    };
    if (size <= kWholeArenaBytes) {
      watch(0, size);
    } else {
      for (const auto &range : ranges_) {
        watch(range.first - std::min(range.first, kWindowBytes), range.first);
        watch(range.second, std::min(size, range.second + kWindowBytes));
      }
      watch(plan_.arenaBytes, size);
    }
    for (const auto &interval : watched_)
      before_.insert(before_.end(), arena.begin() + interval.first,
                     arena.begin() + interval.second);
    return llvm::Error::success();
  }

  /// After \p node ran: refuses a changed byte of the watched arena (see
  /// beforeNode) outside the node's results' planned ranges.
  llvm::Error afterNode(const ir::Node &node) {
    if (!poisoned_)
      return llvm::Error::success();
    llvm::MutableArrayRef<unsigned char> arena = allocator_.getArena();
    if (arena.data() != poisoned_ || arena.size() != size_)
      return makeError("checked arena: the arena moved during node '" +
                       node.getResult(0)->getName() + "'");
    std::optional<uint64_t> changed;
    size_t at = 0;
    for (const auto &interval : watched_) {
      for (uint64_t i = interval.first; i < interval.second && !changed; ++i)
        if (arena[i] != before_[at + (i - interval.first)])
          changed = i;
      if (changed)
        break;
      at += interval.second - interval.first;
    }
    if (!changed)
      return llvm::Error::success();
    std::string where = "offset " + std::to_string(*changed);
    if (*changed >= plan_.arenaBytes)
      where += ", in the guard after the planned " +
               std::to_string(plan_.arenaBytes) + " bytes";
    return makeError("checked arena: node '" + node.getResult(0)->getName() +
                     "' (" + node.getOpSpelling() +
                     ") wrote the arena outside its results' planned ranges, "
                     "at " + where);
  }

  /// \returns the bytes of the arena written this step: the offset of the
  /// last byte without the poison, + 1.
  uint64_t measureTouched() const {
    if (!poisoned_)
      return 0;
    for (uint64_t i = size_; i > 0; --i)
      if (poisoned_[i - 1] != kArenaPoison)
        return i;
    return 0;
  }

private:
  const ir::MemoryPlan &plan_;
  Allocator &allocator_;
  unsigned char *poisoned_ = nullptr;
  size_t size_ = 0;
  /// An arena up to this size (256 KiB) is compared whole around each node; a larger
  /// one in windows of kWindowBytes on each side of each result.
  static constexpr uint64_t kWholeArenaBytes = uint64_t(256) << 10;
  static constexpr uint64_t kWindowBytes = 1024;
  std::vector<unsigned char> before_;
  /// The current node's results' planned ranges, sorted, and the intervals
  /// watched around it, whose bytes before_ holds in order.
  std::vector<std::pair<uint64_t, uint64_t>> ranges_, watched_;
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
  std::optional<ArenaCheck> check;
  if (checkArena_)
    if (const ir::MemoryPlan *plan = graph_.getMemoryPlan())
      check.emplace(*plan, allocator_);
  llvm::SmallVector<const ir::Value *, 4> placed;
  llvm::SmallVector<void *, 4> placedAt;

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
    placed.clear();
    placedAt.clear();
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
      placed.push_back(value);
      placedAt.push_back(tensor.getData());
    }
    if (check)
      if (auto err = check->beforeNode(node, placed, placedAt)) {
        releaseAll();
        return std::move(err);
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
    if (check)
      if (auto err = check->afterNode(node)) {
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
  auto computed = device_.now();
  if (!computed) {
    releaseAll();
    return computed.takeError();
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
  if (check)
    result.touchedBytes = check->measureTouched();
  releaseAll();
  result.peakBytes = allocator_.getPeakBytes();
  if (const ir::MemoryPlan *plan = graph_.getMemoryPlan())
    result.plannedBytes = plan->arenaBytes;
  auto end = device_.now();
  if (!end)
    return end.takeError();
  result.seconds = *computed - *start;
  result.outputSeconds = *end - *computed;
  return std::move(result);
}

} // namespace remat::runtime
