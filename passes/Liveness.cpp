//===- passes/Liveness.cpp - Live ranges and peak memory ------------------===//
#include "passes/Liveness.h"

#include "ir/UpdateName.h"

#include "llvm/ADT/STLExtras.h"

namespace remat::passes {

llvm::StringRef memoryCategoryName(MemoryCategory category) {
  switch (category) {
  case MemoryCategory::Weights:
    return "weights";
  case MemoryCategory::Inputs:
    return "inputs";
  case MemoryCategory::Activations:
    return "activations";
  case MemoryCategory::Gradients:
    return "gradients";
  case MemoryCategory::Recompute:
    return "recompute";
  case MemoryCategory::Temporaries:
    return "temporaries";
  }
  llvm_unreachable("unknown memory category");
}

Liveness::Liveness(const ir::Graph &graph) {
  schedule_.reserve(graph.getNumNodes());
  for (const ir::Node &node : graph.getNodes())
    schedule_.push_back(&node);
  analyse(graph, graph.getMemoryPlan());
}

Liveness::Liveness(const ir::Graph &graph, const ir::MemoryPlan &plan) {
  schedule_.reserve(graph.getNumNodes());
  for (const ir::Node &node : graph.getNodes())
    schedule_.push_back(&node);
  analyse(graph, &plan);
}

Liveness::Liveness(const ir::Graph &graph,
                   llvm::ArrayRef<const ir::Node *> order)
    : schedule_(order.begin(), order.end()) {
  assert(schedule_.size() == graph.getNumNodes() &&
         "an order must hold every node");
  analyse(graph, nullptr);
}

Liveness::Liveness(const ir::Graph &graph, RangesOnly) {
  schedule_.reserve(graph.getNumNodes());
  for (const ir::Node &node : graph.getNodes())
    schedule_.push_back(&node);
  analyse(graph, nullptr, /*rangesOnly=*/true);
}

uint64_t Liveness::getBytes(const ir::Value *value) {
  return uint64_t(value->getType().getByteSize());
}

void Liveness::analyse(const ir::Graph &graph, const ir::MemoryPlan *plan,
                       bool rangesOnly) {
  for (const ir::Value *input : graph.getInputs())
    (input->isWeight() ? weightBytes_ : inputBytes_) += getBytes(input);

  size_t n = schedule_.size();
  llvm::DenseMap<const ir::Node *, size_t> position;
  position.reserve(n);
  for (size_t i = 0; i < n; ++i)
    position[schedule_[i]] = i;
  // Most nodes have one result.
  values_.reserve(n);
  ranges_.reserve(n);
  bytes_.reserve(n);
  if (!rangesOnly)
    valueIndex_.reserve(n);

  for (size_t i = 0; i < n; ++i) {
    for (const ir::Value *result : schedule_[i]->getResults()) {
      // An update written over its input (ir/UpdateName.h) lies in that
      // input's persistent storage, not in the arena.
      if (ir::getUpdatedInput(result))
        continue;
      LiveRange range{i, i};
      if (result->isGraphOutput())
        range.lastUse = n - 1;
      for (const ir::Use &use : result->getUses()) {
        auto it = position.find(use.user);
        assert(it != position.end() && "a use outside the schedule");
        assert(it->second >= i && "the order is not topological");
        range.lastUse = std::max(range.lastUse, it->second);
      }
      if (!rangesOnly)
        valueIndex_[result] = values_.size();
      values_.push_back(result);
      ranges_.push_back(range);
      bytes_.push_back(getBytes(result));
    }
  }
  if (rangesOnly)
    return;
  counted_ = ranges_;
  // An in-place result counts from its node on; the operand it overwrites
  // (dying there, defined earlier) stops counting one position before.
  if (plan) {
    for (size_t v = 0; v < values_.size(); ++v) {
      auto it = plan->inPlaceOf.find(values_[v]);
      if (it == plan->inPlaceOf.end())
        continue;
      auto operand = valueIndex_.find(it->second);
      assert(operand != valueIndex_.end() && "in place over a non-result");
      LiveRange &shared = counted_[operand->second];
      assert(shared.def < ranges_[v].def &&
             ranges_[operand->second].lastUse == ranges_[v].def &&
             "an in-place pair that does not fit this schedule");
      shared.lastUse = std::min(shared.lastUse, ranges_[v].def - 1);
    }
  }
  // Difference array: +bytes at def, -bytes after the last counted position.
  std::vector<int64_t> delta(n + 1, 0);
  for (size_t v = 0; v < values_.size(); ++v) {
    int64_t bytes = int64_t(bytes_[v]);
    delta[counted_[v].def] += bytes;
    delta[counted_[v].lastUse + 1] -= bytes;
  }
  liveBytes_.resize(n);
  int64_t live = 0;
  for (size_t i = 0; i < n; ++i) {
    live += delta[i];
    liveBytes_[i] = uint64_t(live);
    if (liveBytes_[i] > peakBytes_) {
      peakBytes_ = liveBytes_[i];
      peakIndex_ = i;
    }
  }
}

LiveRange Liveness::getRange(const ir::Value *value) const {
  auto it = valueIndex_.find(value);
  assert(it != valueIndex_.end() && "not a node result of this schedule");
  return ranges_[it->second];
}

LiveRange Liveness::getCountedRange(const ir::Value *value) const {
  auto it = valueIndex_.find(value);
  assert(it != valueIndex_.end() && "not a node result of this schedule");
  return counted_[it->second];
}

MemoryCategory Liveness::classify(const ir::Value *value) const {
  if (value->isGraphInput())
    return value->isWeight() ? MemoryCategory::Weights
                             : MemoryCategory::Inputs;
  ir::Stage stage = value->getDefiningNode()->getStage();
  if (stage == ir::Stage::Recompute)
    return MemoryCategory::Recompute;
  if (value->isGraphOutput() &&
      (stage == ir::Stage::Backward || value->getGradientOf()))
    return MemoryCategory::Gradients;
  // A weight's gradient that the optimizer consumes instead of an output.
  if (stage == ir::Stage::Backward && value->getGradientOf() &&
      value->getGradientOf()->isWeight())
    return MemoryCategory::Gradients;
  if (stage == ir::Stage::Forward &&
      llvm::any_of(value->getUses(), [](const ir::Use &use) {
        return use.user->getStage() == ir::Stage::Backward;
      }))
    return MemoryCategory::Activations;
  return MemoryCategory::Temporaries;
}

std::vector<const ir::Value *> Liveness::getLiveValuesAt(size_t index) const {
  std::vector<const ir::Value *> live;
  for (size_t v = 0; v < values_.size(); ++v)
    if (counted_[v].def <= index && index <= counted_[v].lastUse)
      live.push_back(values_[v]);
  return live;
}

MemoryBreakdown Liveness::getPeakBreakdown() const {
  MemoryBreakdown breakdown;
  breakdown[MemoryCategory::Weights] = weightBytes_;
  breakdown[MemoryCategory::Inputs] = inputBytes_;
  if (schedule_.empty())
    return breakdown;
  for (const ir::Value *value : getLiveValuesAt(peakIndex_))
    breakdown[classify(value)] += getBytes(value);
  return breakdown;
}

} // namespace remat::passes
