//===- session/MemoryReport.cpp - Peak memory reports ---------------------===//
#include "session/MemoryReport.h"

#include "ir/OutputFile.h"

#include "passes/Liveness.h"
#include "passes/Passes.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace remat::session {

using passes::MemoryCategory;

namespace {

/// Report order of the categories.
constexpr MemoryCategory kOrder[] = {
    MemoryCategory::Weights,     MemoryCategory::Inputs,
    MemoryCategory::Activations, MemoryCategory::Gradients,
    MemoryCategory::Recompute,   MemoryCategory::Temporaries};

/// Rounds \p parts (which sum to \p total) to tenths of a percent that sum to
/// exactly 1000 (largest remainder; ties go to the earlier part).
std::vector<uint64_t> tenthsOfPercent(llvm::ArrayRef<uint64_t> parts,
                                      uint64_t total) {
  std::vector<uint64_t> tenths(parts.size(), 0);
  if (total == 0)
    return tenths;
  std::vector<std::pair<long double, size_t>> remainders;
  uint64_t assigned = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    long double exact = 1000.0L * (long double)parts[i] / (long double)total;
    tenths[i] = uint64_t(exact);
    assigned += tenths[i];
    remainders.push_back({exact - (long double)tenths[i], i});
  }
  std::stable_sort(
      remainders.begin(), remainders.end(),
      [](const auto &a, const auto &b) { return a.first > b.first; });
  for (size_t k = 0; assigned < 1000 && k < remainders.size(); ++k, ++assigned)
    ++tenths[remainders[k].second];
  return tenths;
}

/// Bytes of optimizer state among \p graph's inputs (persistent, counted
/// with the inputs by Liveness; reports show it on its own row).
uint64_t getOptimizerStateBytes(const ir::Graph &graph) {
  uint64_t bytes = 0;
  for (const ir::Value *input : graph.getInputs())
    if (passes::isOptimizerState(input))
      bytes += uint64_t(input->getType().getByteSize());
  return bytes;
}

} // namespace

std::string describePeak(const passes::Liveness &liveness) {
  const ir::Node *node = liveness.getPeakNode();
  if (!node)
    return "(no nodes)";
  std::string name = node->getNumResults()
                         ? ("%" + node->getResult(0)->getName()).str()
                         : std::string("(no results)");
  return name + " = " + node->getOpSpelling() + " [" +
         ir::stageName(node->getStage()).str() + "]";
}

static uint64_t getFragmentationBytes(const ir::Graph &graph,
                                      const passes::Liveness &liveness) {
  const ir::MemoryPlan *plan = graph.getMemoryPlan();
  if (!plan)
    return 0;
  assert(plan->arenaBytes >= liveness.getPeakBytes() &&
         "a plan whose arena is below the peak live bytes");
  return plan->arenaBytes - liveness.getPeakBytes();
}

void printMemoryReport(const ir::Graph &graph, llvm::raw_ostream &os) {
  passes::Liveness liveness(graph);
  passes::MemoryBreakdown breakdown = liveness.getPeakBreakdown();
  const ir::MemoryPlan *plan = graph.getMemoryPlan();
  uint64_t persistent = liveness.getWeightBytes() + liveness.getInputBytes();
  uint64_t arena = plan ? plan->arenaBytes : liveness.getPeakBytes();
  uint64_t total = persistent + arena;
  llvm::SmallVector<std::pair<llvm::StringRef, uint64_t>, 8> rows;
  uint64_t stateBytes = getOptimizerStateBytes(graph);
  for (MemoryCategory category : kOrder) {
    uint64_t bytes = breakdown[category];
    if (category == MemoryCategory::Inputs)
      bytes -= stateBytes;
    rows.push_back({passes::memoryCategoryName(category), bytes});
    if (category == MemoryCategory::Inputs && stateBytes)
      rows.push_back({"optim. state", stateBytes});
  }
  if (plan)
    rows.push_back({"fragmentation", getFragmentationBytes(graph, liveness)});
  llvm::SmallVector<uint64_t, 8> bytes;
  for (const auto &row : rows)
    bytes.push_back(row.second);
  std::vector<uint64_t> tenths = tenthsOfPercent(bytes, total);
  auto row = [&](llvm::StringRef name, uint64_t bytes, uint64_t tenths) {
    os << "  " << llvm::left_justify(name, 14)
       << llvm::format("%16llu", (unsigned long long)bytes) << " B  "
       << llvm::format("%10.2f", double(bytes) / (1 << 20)) << " MiB  "
       << llvm::format("%3llu.%llu%%", (unsigned long long)(tenths / 10),
                       (unsigned long long)(tenths % 10))
       << '\n';
  };
  os << "memory of @" << graph.getName() << " ("
     << (plan ? "planned" : "liveness only, no plan-memory") << "):\n";
  for (size_t i = 0; i < rows.size(); ++i)
    row(rows[i].first, rows[i].second, tenths[i]);
  row("peak", total, total ? 1000 : 0);
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
  uint64_t stateBytes = getOptimizerStateBytes(graph);
  for (MemoryCategory category : kOrder)
    breakdownJson[passes::memoryCategoryName(category)] =
        int64_t(breakdown[category] -
                (category == MemoryCategory::Inputs ? stateBytes : 0));
  if (stateBytes)
    breakdownJson["optimizer_state"] = int64_t(stateBytes);
  if (plan)
    breakdownJson["fragmentation"] =
        int64_t(getFragmentationBytes(graph, liveness));
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

llvm::Error writeMemoryReports(
    llvm::StringRef path, llvm::ArrayRef<const ir::Graph *> graphs,
    llvm::ArrayRef<const llvm::json::Object *> rematReports) {
  llvm::json::Array reports;
  for (size_t i = 0; i < graphs.size(); ++i) {
    llvm::json::Object report = getMemoryReport(*graphs[i]);
    if (i < rematReports.size() && rematReports[i])
      report["remat"] = llvm::json::Object(*rematReports[i]);
    reports.push_back(std::move(report));
  }
  llvm::json::Object root{{"version", 1}, {"graphs", std::move(reports)}};
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << '\n';
  stream.flush();
  return writeOutputFile(path, text);
}

} // namespace remat::session
