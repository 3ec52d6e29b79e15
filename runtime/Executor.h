//===- runtime/Executor.h - Walking the schedule ----------------*- C++ -*-===//
#ifndef REMAT_RUNTIME_EXECUTOR_H
#define REMAT_RUNTIME_EXECUTOR_H

#include "ir/Graph.h"
#include "runtime/Backend.h"
#include "runtime/Device.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace remat::runtime {

/// Where a value's memory lies: its address and the device block that holds
/// it (the arena, or a block of its own).
struct Placement {
  void *data = nullptr;
  DeviceBuffer buffer;
};

/// Where tensors live during a step. The simple allocator here takes a block
/// of device memory for each tensor; the memory planner replaces it with one
/// arena at planned offsets.
class Allocator {
public:
  virtual ~Allocator();
  /// Starts a step: the peak counts from here.
  virtual void beginStep() = 0;
  /// \returns memory for \p value (its type's byte size, aligned as the
  /// memory plan's offsets are).
  virtual llvm::Expected<Placement> allocate(const ir::Value &value) = 0;
  /// Marks the memory of \p value as free; the block itself goes when its
  /// last holder (an output handed to the caller, say) lets go.
  virtual void release(const ir::Value &value) = 0;
  /// The most bytes held at once since beginStep().
  virtual uint64_t getPeakBytes() const = 0;
  /// The block a checked run poisons and inspects (the arena and the guard
  /// after it) once a step has allocated it; empty for an allocator without
  /// one.
  virtual llvm::MutableArrayRef<unsigned char> getArena() { return {}; }
};

/// Takes a block of device memory for every tensor and counts bytes held.
class HeapAllocator : public Allocator {
public:
  /// \p device must outlive the allocator.
  explicit HeapAllocator(Device &device) : device_(device) {}

  void beginStep() override { peakBytes_ = currentBytes_; }
  llvm::Expected<Placement> allocate(const ir::Value &value) override;
  void release(const ir::Value &value) override;
  uint64_t getPeakBytes() const override { return peakBytes_; }

private:
  Device &device_;
  uint64_t currentBytes_ = 0;
  uint64_t peakBytes_ = 0;
};

/// Places every tensor at its offset in one arena of exactly the planned
/// size (DESIGN.md "Memory model": the plan is the truth the runtime obeys).
/// The peak it reports is the high-water mark actually touched: the largest
/// offset + byte size of a value allocated since beginStep(). The outputs of
/// a step lie in its arena and hold it: a step that starts while the caller
/// still holds outputs of an earlier one takes a fresh arena rather than
/// overwriting them.
class ArenaAllocator : public Allocator {
public:
  /// \p plan and \p device must outlive the allocator. \p guardBytes more
  /// follow the planned bytes in the block (for a checked run).
  ArenaAllocator(const ir::MemoryPlan &plan, Device &device,
                 uint64_t guardBytes = 0)
      : plan_(plan), device_(device), guardBytes_(guardBytes) {}

  void beginStep() override;
  /// \returns an error for a value the plan does not place, or when the
  /// arena could not be allocated.
  llvm::Expected<Placement> allocate(const ir::Value &value) override;
  void release(const ir::Value &) override {}
  uint64_t getPeakBytes() const override { return highWaterBytes_; }
  uint64_t getArenaBytes() const { return plan_.arenaBytes; }
  llvm::MutableArrayRef<unsigned char> getArena() override;

private:
  const ir::MemoryPlan &plan_;
  Device &device_;
  uint64_t guardBytes_;
  DeviceBuffer arena_;
  uint64_t highWaterBytes_ = 0;
};

/// Runs a node's computation: operands in, results (already allocated) out.
using NodeRunner = std::function<llvm::Error(
    const ir::Node &node, llvm::ArrayRef<Tensor> inputs,
    llvm::ArrayRef<Tensor> outputs)>;

/// The byte a checked run fills the arena with (Executor).
constexpr unsigned char kArenaPoison = 0xA5;
/// The bytes after the planned arena that a checked run guards.
constexpr uint64_t kArenaGuardBytes = 4096;

/// Walks a graph's schedule (Note [Schedule]): uploads the inputs,
/// allocates each node's results, runs the node, releases every intermediate
/// after its last use, and downloads the outputs. Backends supply how a node
/// runs and the Device its tensors live on; the walk is the same for all.
///
/// A checked arena (\p checkArena, a planned graph, an allocator whose arena
/// the host can read): the walk trusts the allocator for nothing. It fills
/// the arena with kArenaPoison when a step first places a value in it,
/// requires each result at the arena's start + its planned offset, compares
/// the arena around each node (all of it up to 256 KiB, else 1 KiB on each
/// side of each result, and the guard after the arena) and refuses a write
/// there outside that node's results' planned ranges, and after the step
/// measures RunResult::touchedBytes from the poison left.
class Executor {
public:
  /// \p graph, \p allocator and \p device must outlive the executor.
  /// \p runners has one entry per node in schedule order.
  Executor(const ir::Graph &graph, std::vector<NodeRunner> runners,
           Allocator &allocator, Device &device, bool profile,
           bool checkArena = false);

  /// Runs one step; see Executable::run.
  llvm::Expected<RunResult> run(llvm::ArrayRef<Tensor> inputs);

private:
  const ir::Graph &graph_;
  std::vector<const ir::Node *> nodes_;
  std::vector<NodeRunner> runners_;
  Allocator &allocator_;
  Device &device_;
  bool profile_;
  bool checkArena_;
  /// For each node, the intermediate values whose last use it is.
  std::vector<std::vector<const ir::Value *>> releaseAfter_;
  /// Results written over a graph input (ir/UpdateName.h): the index of
  /// that input. They take the input's storage instead of an allocation.
  llvm::DenseMap<const ir::Value *, unsigned> updatesInput_;
};

} // namespace remat::runtime

#endif // REMAT_RUNTIME_EXECUTOR_H
