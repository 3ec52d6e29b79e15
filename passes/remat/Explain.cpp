//===- passes/remat/Explain.cpp - What remat decided and why --------------===//
//
// The text of `--explain` and the "remat" section of `--report`: per
// segment, its boundary, option, bytes kept and recomputed, recompute FLOPs
// and predicted time; per stashed tensor, the decision and its reason; and a
// summary of predicted peak and time overhead.
//
//===----------------------------------------------------------------------===//
#include "passes/remat/Solver.h"

#include "ir/Support.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

namespace remat::passes::recompute {

namespace {

/// \returns "%name" (built by appending: GCC 12 warns falsely about
/// `"literal" + std::string` at -O3).
std::string valueRef(const ir::Value *value) {
  std::string ref = "%";
  ref += value->getName();
  return ref;
}

struct SegmentRow {
  uint64_t keptBytes = 0;
  uint64_t recomputedBytes = 0;
  double recomputeFlops = 0;
  double recomputeSeconds = 0;
};

} // namespace

std::string Solver::explainValue(const ir::Value *value,
                                 const PlanResult &plan) const {
  std::string reason = explainValueOnce(value, plan);
  // An inner boundary is rebuilt once whatever the plan says (Note [Nested
  // recompute]).
  if (llvm::is_contained(plan.nestedNames, value->getName()))
    return reason + ", an inner boundary: rebuilt once, by a pass of its "
                    "own whose other clones die in it";
  for (const auto &[name, through] : plan.heldThroughNames) {
    if (name == value->getName()) {
      reason += ", held from forward through %" + through +
                " and rebuilt only for the backward nodes after it";
      continue;
    }
    // Rebuilt for backward nodes up to that one only: from the original.
    if (llvm::StringRef(reason).startswith("recompute") &&
        isRebuiltFrom(value, name, plan, /*direct=*/false) &&
        isReadOnlyUpTo(value, graph_.lookup(through)->getDefiningNode()))
      reason += ", rebuilt instead from %" + name + ", which is still held then";
  }
  if (plan.perUse && llvm::StringRef(reason).startswith("recompute") &&
      !llvm::is_contained(plan.onceNames, value->getName()))
    reason += ", again for each backward node that reads it";
  return reason;
}

std::string Solver::explainValueOnce(const ir::Value *value,
                                     const PlanResult &plan) const {
  double bytes = double(value->getType().getByteSize());
  double passes = chainSeconds_[stash_.stashIndex.lookup(value)] /
                  std::max(bytes / profile_.bytesPerSecond, 1e-12);
  bool dropped = llvm::is_contained(plan.dropNames, value->getName()) &&
                 !llvm::is_contained(plan.keepNames, value->getName());
  std::string cost =
      llvm::formatv("rebuilding it costs {0:F1} memory passes over its bytes",
                    passes)
          .str();
  unsigned s = chain_.segmentOf.lookup(value->getDefiningNode());
  SegmentChoice choice = plan.choices[s];
  if (llvm::is_contained(chain_.sideInputs, value))
    return "kept: side input that later segments read";
  if (llvm::is_contained(plan.keepNames, value->getName()))
    return "kept: boundary a recomputed group starts from";
  if (choice.option == SegmentOption::Recompute && !dropped)
    return "kept: held while the rest of its segment is rebuilt";
  if (choice.option == SegmentOption::Recompute) {
    const Segment &first = chain_.segments[choice.groupStart];
    std::string reason = "recompute: its segment is rebuilt from boundary ";
    reason += first.input ? valueRef(first.input) : "the graph inputs";
    // A local plan may drop the boundary too (Note [Local plans]).
    if (first.input &&
        !llvm::is_contained(plan.keepNames, first.input->getName()))
      reason += ", itself rebuilt from what is held";
    return reason;
  }
  if (dropped)
    return isCheap(value) ? "recompute: cheap, " + cost
                          : "recompute: " + cost +
                                ", and the fastest plan that fits drops it";
  if (isCheap(value))
    return choice.option == SegmentOption::Keep
               ? "kept: its segment is kept whole (" + cost + ")"
               : "kept: cheap, but the budget is met without it (" + cost + ")";
  return "kept: expensive, " + cost + " (more than " +
         std::to_string(int(kCheapPasses)) + ")";
}

void Solver::explain(const PlanResult &plan,
                     std::optional<uint64_t> budgetBytes,
                     llvm::raw_ostream &os) const {
  llvm::json::Object json = explainJson(plan, budgetBytes);
  os << "remat: strategy " << plan.strategy;
  if (budgetBytes)
    os << ", budget " << formatBytes(*budgetBytes);
  os << ", cost profile " << profile_.source
     << llvm::format(" (GEMM %.1f GFLOP/s, memory-bound %.2f GB/s",
                     profile_.gemmFlopsPerSecond * 1e-9,
                     profile_.bytesPerSecond * 1e-9);
  if (!profile_.nodeSeconds.empty())
    os << ", " << profile_.nodeSeconds.size() << " node times";
  os << ")\n";
  os << "  segments: " << chain_.segments.size();
  if (chain_.numLayers)
    os << "; layer block of " << chain_.period << " segment"
       << (chain_.period == 1 ? "" : "s") << " x " << chain_.numLayers
       << " layers from segment " << chain_.firstLayerSegment;
  else
    os << "; no repeated block";
  for (const LayerStack &stack : chain_.stacks)
    if (stack.firstSegment != chain_.firstLayerSegment)
      os << "; another layer block of " << stack.period << " segment"
         << (stack.period == 1 ? "" : "s") << " x " << stack.numLayers
         << " layers from segment " << stack.firstSegment;
  if (!chain_.sideInputs.empty()) {
    os << "; side inputs";
    for (const ir::Value *value : chain_.sideInputs)
      os << " %" << value->getName();
  }
  os << '\n';
  // The same structure for every layer: the kinds of its segments.
  for (const LayerStack &stack : chain_.stacks)
    for (unsigned layer = 0; layer < stack.numLayers; ++layer) {
      os << "  layer " << layer << ": segments";
      unsigned first = stack.firstSegment + layer * stack.period;
      for (unsigned s = first; s < first + stack.period; ++s)
        os << ' ' << s << "(kind " << chain_.segments[s].kind << ")";
      os << '\n';
    }
  os << "   seg layer kind input boundary               option     "
        "        kept   recomputed     GFLOP         ms\n";
  for (const llvm::json::Value &entry : *json.getArray("segments")) {
    const llvm::json::Object &row = *entry.getAsObject();
    int64_t layer = *row.getInteger("layer");
    std::string layerText = layer < 0 ? "-" : std::to_string(layer);
    std::string input = row.getString("input")->str();
    std::string option = row.getString("option")->str();
    std::string kept = formatBytes(uint64_t(*row.getInteger("kept_bytes")));
    std::string recomputed =
        formatBytes(uint64_t(*row.getInteger("recomputed_bytes")));
    os << llvm::format("  %4lld %5s %4lld %-28s %-10s %12s %12s %9.3f %10.3f\n",
                       (long long)*row.getInteger("index"), layerText.c_str(),
                       (long long)*row.getInteger("kind"), input.c_str(),
                       option.c_str(), kept.c_str(), recomputed.c_str(),
                       *row.getNumber("recompute_flops") / 1e9,
                       *row.getNumber("recompute_seconds") * 1e3);
  }
  os << "  stashed tensors:\n";
  for (const llvm::json::Value &entry : *json.getArray("stashed")) {
    const llvm::json::Object &row = *entry.getAsObject();
    os << "    %" << *row.getString("name") << "  "
       << formatBytes(uint64_t(*row.getInteger("bytes"))) << "  "
       << *row.getString("reason") << '\n';
  }
  const llvm::json::Object &summary = *json.getObject("summary");
  uint64_t kept = uint64_t(*summary.getInteger("activation_bytes_kept"));
  uint64_t stashed = uint64_t(*summary.getInteger("activation_bytes_no_remat"));
  os << "  summary: planned peak "
     << formatBytes(uint64_t(*summary.getInteger("planned_peak_bytes")))
     << " (no remat "
     << formatBytes(uint64_t(*summary.getInteger("no_remat_planned_peak_bytes")))
     << "); activations kept for backward " << formatBytes(kept) << " of "
     << formatBytes(stashed) << " ("
     << llvm::formatv("{0:F2}x less", kept ? double(stashed) / double(kept) : 0.0)
     << "); " << *summary.getInteger("recomputed_nodes")
     << " nodes recomputed, "
     << llvm::formatv("{0:F3}", *summary.getNumber("recompute_gflop"))
     << " GFLOP; predicted step "
     << llvm::formatv("{0:F1} ms vs {1:F1} ms without remat (x{2:F3})",
                      *summary.getNumber("predicted_seconds") * 1e3,
                      *summary.getNumber("no_remat_predicted_seconds") * 1e3,
                      *summary.getNumber("predicted_time_ratio"))
     << '\n';
}

llvm::json::Object Solver::explainJson(const PlanResult &plan,
                                       std::optional<uint64_t> budgetBytes) const {
  llvm::StringMap<unsigned> segmentOfName;
  for (const auto &[node, s] : chain_.segmentOf)
    segmentOfName[node->getResult(0)->getName()] = s;
  std::vector<SegmentRow> rows(chain_.segments.size());
  llvm::StringSet<> dropped;
  for (const std::string &name : plan.dropNames)
    dropped.insert(name);
  for (const std::string &name : plan.keepNames)
    dropped.erase(name);
  for (size_t s = 0; s < chain_.segments.size(); ++s)
    for (const ir::Value *value : chain_.segments[s].stashed)
      (dropped.count(value->getName()) ? rows[s].recomputedBytes
                                       : rows[s].keptBytes) +=
          uint64_t(value->getType().getByteSize());
  for (const std::string &name : plan.keepNames) {
    const ir::Value *value = graph_.lookup(name);
    if (!stash_.isStashed(value))
      rows[chain_.segmentOf.lookup(value->getDefiningNode())].keptBytes +=
          uint64_t(value->getType().getByteSize());
  }
  for (const std::string &name : plan.stats.clonedNames) {
    auto it = segmentOfName.find(name);
    if (it == segmentOfName.end())
      continue;
    const ir::Node *node = graph_.lookup(name)->getDefiningNode();
    rows[it->second].recomputeFlops += nodeFlops(*node);
    rows[it->second].recomputeSeconds += nodeSeconds(*node, profile_);
  }

  llvm::json::Array segments;
  for (size_t s = 0; s < chain_.segments.size(); ++s) {
    const Segment &segment = chain_.segments[s];
    segments.push_back(llvm::json::Object{
        {"index", int64_t(s)},
        {"layer", int64_t(segment.layer)},
        {"kind", int64_t(segment.kind)},
        {"input", segment.input ? valueRef(segment.input)
                                : std::string("(inputs)")},
        {"output", segment.output ? valueRef(segment.output)
                                  : std::string("(loss)")},
        {"nodes", int64_t(segment.nodes.size())},
        {"option", segmentOptionName(plan.choices[s].option)},
        {"group_start", int64_t(plan.choices[s].groupStart)},
        {"kept_bytes", int64_t(rows[s].keptBytes)},
        {"recomputed_bytes", int64_t(rows[s].recomputedBytes)},
        {"recompute_flops", rows[s].recomputeFlops},
        {"recompute_seconds", rows[s].recomputeSeconds}});
  }
  llvm::json::Array stashed;
  for (const ir::Value *value : stash_.stashed)
    stashed.push_back(llvm::json::Object{
        {"name", value->getName()},
        {"bytes", int64_t(value->getType().getByteSize())},
        {"segment", int64_t(chain_.segmentOf.lookup(value->getDefiningNode()))},
        {"decision", dropped.count(value->getName()) ? "recompute" : "keep"},
        {"reason", explainValue(value, plan)}});
  double seconds = getPredictedSeconds(plan);
  llvm::json::Object summary{
      {"planned_peak_bytes", int64_t(plan.plannedPeakBytes)},
      {"no_remat_planned_peak_bytes", int64_t(basePeakBytes_)},
      {"activation_bytes_kept", int64_t(plan.keptStashBytes)},
      {"activation_bytes_no_remat", int64_t(stash_.totalStashedBytes())},
      {"recomputed_nodes", int64_t(plan.stats.clonedNodes)},
      {"recompute_gflop", plan.stats.recomputeFlops / 1e9},
      {"predicted_seconds", seconds},
      {"no_remat_predicted_seconds", baseSeconds_},
      {"predicted_time_ratio", baseSeconds_ > 0 ? seconds / baseSeconds_ : 1.0}};
  llvm::json::Object root{
      {"strategy", plan.strategy},
      {"rebuilt_per_use", plan.perUse},
      {"cost_profile", profile_.source},
      {"cost_rates",
       llvm::json::Object{
           {"gemm_flops_per_second", profile_.gemmFlopsPerSecond},
           {"bytes_per_second", profile_.bytesPerSecond},
           {"measured_nodes", int64_t(profile_.nodeSeconds.size())}}},
      {"layer_period", int64_t(chain_.period)},
      {"layers", int64_t(chain_.numLayers)},
      {"first_layer_segment", int64_t(chain_.firstLayerSegment)},
      {"segments", std::move(segments)},
      {"stashed", std::move(stashed)},
      {"summary", std::move(summary)}};
  if (budgetBytes)
    root["budget_bytes"] = int64_t(*budgetBytes);
  // Only where there is more than one stack or a side input, so that the
  // report of a single-stack model stays as it was.
  if (chain_.stacks.size() > 1) {
    llvm::json::Array stacks;
    for (const LayerStack &stack : chain_.stacks)
      stacks.push_back(llvm::json::Object{
          {"period", int64_t(stack.period)},
          {"layers", int64_t(stack.numLayers)},
          {"first_segment", int64_t(stack.firstSegment)}});
    root["layer_stacks"] = std::move(stacks);
  }
  if (!chain_.sideInputs.empty()) {
    llvm::json::Array side;
    for (const ir::Value *value : chain_.sideInputs)
      side.push_back(value->getName().str());
    root["side_inputs"] = std::move(side);
  }
  return root;
}

} // namespace remat::passes::recompute
