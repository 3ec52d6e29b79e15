//===- runtime/Executor.h - Walking the schedule ----------------*- C++ -*-===//
#ifndef REMAT_RUNTIME_EXECUTOR_H
#define REMAT_RUNTIME_EXECUTOR_H

#include "ir/Graph.h"
#include "runtime/Backend.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace remat::runtime {

/// Where tensors live during a step. The simple allocator here takes each
/// tensor from the heap; the memory planner replaces it with one arena at
/// planned offsets.
class Allocator {
public:
  virtual ~Allocator();
  /// \returns memory for \p value (its type's byte size, 64-byte aligned).
  virtual llvm::Expected<void *> allocate(const ir::Value &value) = 0;
  /// Returns the memory of \p value.
  virtual void release(const ir::Value &value, void *data) = 0;
  /// The most bytes held at once since the last resetPeak().
  virtual uint64_t getPeakBytes() const = 0;
  virtual void resetPeak() = 0;
};

/// Takes every tensor from the heap and counts bytes held.
class HeapAllocator : public Allocator {
public:
  llvm::Expected<void *> allocate(const ir::Value &value) override;
  void release(const ir::Value &value, void *data) override;
  uint64_t getPeakBytes() const override { return peakBytes_; }
  void resetPeak() override { peakBytes_ = currentBytes_; }

private:
  uint64_t currentBytes_ = 0;
  uint64_t peakBytes_ = 0;
};

/// Places every tensor at its offset in one arena of exactly the planned
/// size (DESIGN.md "Memory model": the plan is the truth the runtime obeys).
/// The peak it reports is the high-water mark actually touched: the largest
/// offset + byte size of a value allocated since resetPeak().
class ArenaAllocator : public Allocator {
public:
  /// \p plan must outlive the allocator.
  explicit ArenaAllocator(const ir::MemoryPlan &plan);
  ~ArenaAllocator() override;
  ArenaAllocator(const ArenaAllocator &) = delete;
  ArenaAllocator &operator=(const ArenaAllocator &) = delete;

  /// \returns an error for a value the plan does not place, or when the
  /// arena could not be allocated.
  llvm::Expected<void *> allocate(const ir::Value &value) override;
  void release(const ir::Value &, void *) override {}
  uint64_t getPeakBytes() const override { return highWaterBytes_; }
  void resetPeak() override { highWaterBytes_ = 0; }
  uint64_t getArenaBytes() const { return plan_.arenaBytes; }

private:
  const ir::MemoryPlan &plan_;
  char *base_ = nullptr;
  uint64_t highWaterBytes_ = 0;
};

/// Runs a node's computation: operands in, results (already allocated) out.
using NodeRunner = std::function<llvm::Error(
    const ir::Node &node, llvm::ArrayRef<Tensor> inputs,
    llvm::ArrayRef<Tensor> outputs)>;

/// Walks a graph's schedule (Note [Schedule]): allocates each node's
/// results, runs the node, and releases every intermediate after its last
/// use. Backends supply how a node runs; the walk is the same for all.
class Executor {
public:
  /// \p graph must outlive the executor. \p runners has one entry per node
  /// in schedule order.
  Executor(const ir::Graph &graph, std::vector<NodeRunner> runners,
           Allocator &allocator, bool profile);

  /// Runs one step; see Executable::run.
  llvm::Expected<RunResult> run(llvm::ArrayRef<Tensor> inputs);

private:
  const ir::Graph &graph_;
  std::vector<const ir::Node *> nodes_;
  std::vector<NodeRunner> runners_;
  Allocator &allocator_;
  bool profile_;
  /// For each node, the intermediate values whose last use it is.
  std::vector<std::vector<const ir::Value *>> releaseAfter_;
};

} // namespace remat::runtime

#endif // REMAT_RUNTIME_EXECUTOR_H
