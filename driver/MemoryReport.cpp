//===- driver/MemoryReport.cpp - Peak memory reports ----------------------===//
#include "driver/MemoryReport.h"

#include "passes/Liveness.h"

#include "llvm/Support/Format.h"

namespace remat::driver {

using passes::MemoryCategory;

namespace {

/// Report order of the categories.
constexpr MemoryCategory kOrder[] = {
    MemoryCategory::Weights,     MemoryCategory::Inputs,
    MemoryCategory::Activations, MemoryCategory::Gradients,
    MemoryCategory::Recompute,   MemoryCategory::Temporaries};

std::string describePeak(const passes::Liveness &liveness) {
  const ir::Node *node = liveness.getPeakNode();
  if (!node)
    return "(no nodes)";
  std::string name = node->getNumResults()
                         ? "%" + node->getResult(0)->getName().str()
                         : std::string("(no results)");
  return name + " = " + node->getOpSpelling() + " [" +
         ir::stageName(node->getStage()).str() + "]";
}

} // namespace

void printMemoryReport(const ir::Graph &graph, llvm::raw_ostream &os) {
  passes::Liveness liveness(graph);
  passes::MemoryBreakdown breakdown = liveness.getPeakBreakdown();
  const ir::MemoryPlan *plan = graph.getMemoryPlan();
  uint64_t persistent = liveness.getWeightBytes() + liveness.getInputBytes();
  uint64_t arena = plan ? plan->arenaBytes : liveness.getPeakBytes();
  uint64_t total = persistent + arena;
  auto row = [&](llvm::StringRef name, uint64_t bytes) {
    os << "  " << llvm::left_justify(name, 14)
       << llvm::format("%16llu", (unsigned long long)bytes) << " B  "
       << llvm::format("%10.2f", double(bytes) / (1 << 20)) << " MiB  "
       << llvm::format("%5.1f%%", total ? 100.0 * double(bytes) / total : 0.0)
       << '\n';
  };
  os << "memory of @" << graph.getName() << " ("
     << (plan ? "planned" : "liveness only, no plan-memory") << "):\n";
  for (MemoryCategory category : kOrder)
    row(passes::memoryCategoryName(category), breakdown[category]);
  if (plan)
    row("fragmentation", plan->arenaBytes > liveness.getPeakBytes()
                             ? plan->arenaBytes - liveness.getPeakBytes()
                             : 0);
  row("peak", total);
  os << "  peak live arena " << liveness.getPeakBytes() << " B at node "
     << liveness.getPeakIndex() << " of " << graph.getNumNodes() << ": "
     << describePeak(liveness) << '\n';
  if (plan)
    os << "  arena " << plan->arenaBytes << " B, arena/peak live "
       << llvm::format("%.4f", liveness.getPeakBytes()
                                   ? double(plan->arenaBytes) /
                                         double(liveness.getPeakBytes())
                                   : 1.0)
       << '\n';
}

llvm::json::Object getMemoryReport(const ir::Graph &graph) {
  passes::Liveness liveness(graph);
  passes::MemoryBreakdown breakdown = liveness.getPeakBreakdown();
  const ir::MemoryPlan *plan = graph.getMemoryPlan();
  uint64_t persistent = liveness.getWeightBytes() + liveness.getInputBytes();
  uint64_t arena = plan ? plan->arenaBytes : liveness.getPeakBytes();
  llvm::json::Object breakdownJson;
  for (MemoryCategory category : kOrder)
    breakdownJson[passes::memoryCategoryName(category)] =
        int64_t(breakdown[category]);
  if (plan)
    breakdownJson["fragmentation"] =
        int64_t(plan->arenaBytes > liveness.getPeakBytes()
                    ? plan->arenaBytes - liveness.getPeakBytes()
                    : 0);
  llvm::json::Object peakNode;
  if (const ir::Node *node = liveness.getPeakNode()) {
    peakNode["index"] = int64_t(liveness.getPeakIndex());
    peakNode["op"] = node->getOpSpelling();
    peakNode["stage"] = ir::stageName(node->getStage());
    if (node->getNumResults())
      peakNode["result"] = node->getResult(0)->getName();
  }
  llvm::json::Object report{
      {"graph", graph.getName()},
      {"nodes", int64_t(graph.getNumNodes())},
      {"planned", plan != nullptr},
      {"persistent_bytes", int64_t(persistent)},
      {"peak_live_arena_bytes", int64_t(liveness.getPeakBytes())},
      {"arena_bytes", int64_t(arena)},
      {"peak_bytes", int64_t(persistent + arena)},
      {"breakdown", std::move(breakdownJson)},
      {"peak_node", std::move(peakNode)},
  };
  return report;
}

} // namespace remat::driver
