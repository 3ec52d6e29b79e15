//===- passes/remat/ModelDump.cpp - remat's model of a step, as JSON ------===//
//
// remat{dump-model=FILE}: what the solver knows about a training step, for
// tools outside remat that check its plans (tools/bench/remat_oracle.py
// writes it as a mixed-integer program). Every node in schedule order with
// its stage, its operands, its results (name, bytes, and the last position
// where they count in the no-remat memory plan: before their last use where
// plan-memory overwrites one in place) and the seconds the cost model
// predicts for it; the graph inputs (persistent bytes), the
// outputs, the stashed values, the segment boundaries and side inputs; the
// arena's alignment (plan-memory rounds every buffer up to it); the
// no-remat planned peak and predicted time.
//
//===----------------------------------------------------------------------===//
#include "passes/remat/Solver.h"

#include "passes/Liveness.h"
#include "passes/Passes.h"

namespace remat::passes::recompute {

llvm::json::Object Solver::describeModel() const {
  auto bytesOf = [](const ir::Value *value) {
    return int64_t(value->getType().getByteSize());
  };
  auto names = [](auto &&values) {
    llvm::json::Array array;
    for (const ir::Value *value : values)
      array.push_back(value->getName().str());
    return array;
  };
  llvm::json::Array inputs;
  for (const ir::Value *input : graph_.getInputs())
    inputs.push_back(llvm::json::Array{input->getName().str(), bytesOf(input)});
  // initialize() planned this graph, so planning it again succeeds.
  ir::MemoryPlan plan = llvm::cantFail(planMemory(graph_));
  Liveness liveness(graph_, plan);
  llvm::json::Array nodes;
  for (const ir::Node &node : graph_.getNodes()) {
    llvm::json::Array results;
    for (const ir::Value *result : node.getResults())
      results.push_back(
          llvm::json::Array{result->getName().str(), bytesOf(result),
                            int64_t(liveness.getCountedRange(result).lastUse)});
    nodes.push_back(llvm::json::Object{
        {"op", node.getOpSpelling()},
        {"stage", ir::stageName(node.getStage())},
        {"seconds", nodeSeconds(node, profile_)},
        {"operands", names(node.getOperands())},
        {"results", std::move(results)}});
  }
  std::vector<const ir::Value *> boundaries;
  for (const Segment &segment : chain_.segments)
    if (segment.input)
      boundaries.push_back(segment.input);
  return llvm::json::Object{
      {"graph", graph_.getName().str()},
      {"cost_profile", profile_.source},
      {"persistent_bytes", int64_t(persistentBytes_)},
      {"arena_alignment", int64_t(ir::MemoryPlan::kAlignment)},
      {"no_remat_planned_peak_bytes", int64_t(basePeakBytes_)},
      {"no_remat_predicted_seconds", baseSeconds_},
      {"inputs", std::move(inputs)},
      {"outputs", names(graph_.getOutputs())},
      {"stashed", names(stash_.stashed)},
      {"segment_inputs", names(boundaries)},
      {"side_inputs", names(chain_.sideInputs)},
      {"nodes", std::move(nodes)}};
}

} // namespace remat::passes::recompute
