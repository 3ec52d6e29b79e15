//===- passes/Liveness.h - Live ranges and peak memory ----------*- C++ -*-===//
//
// An analysis, not a pass: the live range of every value over a schedule and
// the arena bytes live at each step. See DESIGN.md "Memory model": graph
// inputs (weights among them) are persistent; everything a node produces is
// arena memory, live from its node to its last use (graph outputs to the end
// of the step, results nobody uses only at their own node). With a
// MemoryPlan, an in-place result and the operand it overwrites share storage,
// so their bytes are counted once: the operand stops counting at the node
// that overwrites it.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_LIVENESS_H
#define REMAT_PASSES_LIVENESS_H

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <vector>

namespace remat::passes {

/// Schedule positions [def, lastUse], both inclusive.
struct LiveRange {
  size_t def = 0;
  size_t lastUse = 0;
  bool overlaps(const LiveRange &other) const {
    return def <= other.lastUse && other.def <= lastUse;
  }
};

/// What a byte of memory is for, as reports break peak down.
enum class MemoryCategory : uint8_t {
  Weights,
  /// Non-weight graph inputs (persistent).
  Inputs,
  /// Forward values used by a Stage::Backward node (stashed for backward).
  Activations,
  /// Graph outputs named *_grad or produced by a Stage::Backward node.
  Gradients,
  /// Results of Stage::Recompute nodes.
  Recompute,
  /// Everything else.
  Temporaries,
};
constexpr unsigned kNumMemoryCategories = 6;

/// \returns "weights", "inputs", "activations", "gradients", "recompute" or
/// "temporaries".
llvm::StringRef memoryCategoryName(MemoryCategory category);

/// Bytes per MemoryCategory.
struct MemoryBreakdown {
  uint64_t bytes[kNumMemoryCategories] = {};
  uint64_t &operator[](MemoryCategory c) { return bytes[unsigned(c)]; }
  uint64_t operator[](MemoryCategory c) const { return bytes[unsigned(c)]; }
};

/// Live ranges of one schedule of a graph. The graph must outlive it and not
/// change while it is used.
class Liveness {
public:
  /// Analyses \p graph's own schedule (Note [Schedule]), counting the
  /// in-place sharing of its MemoryPlan, if it has one.
  explicit Liveness(const ir::Graph &graph);
  /// Analyses \p graph's own schedule, counting the in-place sharing of
  /// \p plan (a plan for that schedule) instead of the graph's.
  Liveness(const ir::Graph &graph, const ir::MemoryPlan &plan);
  /// Analyses \p order, a topological order of all of \p graph's nodes,
  /// without a plan (every value counts on its own).
  Liveness(const ir::Graph &graph, llvm::ArrayRef<const ir::Node *> order);
  /// Analyses \p graph's own schedule for its values, their ranges and byte
  /// sizes only (getValues, getRanges, getValueBytes; nothing that counts
  /// bytes or looks a value up): plan-memory groups and counts them itself.
  struct RangesOnly {};
  Liveness(const ir::Graph &graph, RangesOnly);

  /// The schedule analysed.
  llvm::ArrayRef<const ir::Node *> getSchedule() const { return schedule_; }
  /// Every arena value (node result), in schedule order.
  llvm::ArrayRef<const ir::Value *> getValues() const { return values_; }
  /// The live range of each of getValues(), by index.
  llvm::ArrayRef<LiveRange> getRanges() const { return ranges_; }
  /// The byte size (getBytes) of each of getValues(), by index.
  llvm::ArrayRef<uint64_t> getValueBytes() const { return bytes_; }
  /// \returns the live range of node result \p value.
  LiveRange getRange(const ir::Value *value) const;
  /// \returns the positions where \p value's bytes count: its live range,
  /// except that an operand overwritten in place stops counting just before
  /// the node that overwrites it (whose result counts there instead).
  LiveRange getCountedRange(const ir::Value *value) const;
  /// \returns the byte size of \p value.
  static uint64_t getBytes(const ir::Value *value);

  /// Arena bytes live while schedule position i runs (its operands that die
  /// there and its results both count, except that storage shared in place
  /// counts once).
  llvm::ArrayRef<uint64_t> getLiveBytes() const { return liveBytes_; }
  /// The largest entry of getLiveBytes() (0 for a graph without nodes).
  uint64_t getPeakBytes() const { return peakBytes_; }
  /// The first position where the peak occurs.
  size_t getPeakIndex() const { return peakIndex_; }
  /// The node at the peak, or null for a graph without nodes.
  const ir::Node *getPeakNode() const {
    return schedule_.empty() ? nullptr : schedule_[peakIndex_];
  }

  /// Persistent bytes: weights plus other graph inputs.
  uint64_t getWeightBytes() const { return weightBytes_; }
  uint64_t getInputBytes() const { return inputBytes_; }

  /// \returns the category of \p value (a graph input or node result).
  MemoryCategory classify(const ir::Value *value) const;
  /// Bytes live at getPeakIndex() by category; weights and inputs are the
  /// persistent bytes, the rest sum to getPeakBytes().
  MemoryBreakdown getPeakBreakdown() const;
  /// The arena values live at \p index, in schedule order.
  std::vector<const ir::Value *> getLiveValuesAt(size_t index) const;

private:
  void analyse(const ir::Graph &graph, const ir::MemoryPlan *plan,
               bool rangesOnly = false);

  std::vector<const ir::Node *> schedule_;
  std::vector<const ir::Value *> values_;
  std::vector<LiveRange> ranges_;
  std::vector<uint64_t> bytes_;
  std::vector<LiveRange> counted_;
  llvm::DenseMap<const ir::Value *, unsigned> valueIndex_;
  std::vector<uint64_t> liveBytes_;
  uint64_t peakBytes_ = 0;
  size_t peakIndex_ = 0;
  uint64_t weightBytes_ = 0;
  uint64_t inputBytes_ = 0;
};

} // namespace remat::passes

#endif // REMAT_PASSES_LIVENESS_H
