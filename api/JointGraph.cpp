//===- api/JointGraph.cpp - Planning another front end's training step ----===//
//
// remat::planJointGraph (remat/remat.h): a training step written by another
// front end (remat.torch's joint forward+backward FX graph) as .rir text,
// mostly remat.Extern nodes, planned by the remat pass exactly as remat-opt
// plans one (same segments, strategies, pool and monotone choice), and
// answered with the values backward reads once the plan is applied.
//
//===----------------------------------------------------------------------===//
#include "remat/remat.h"

#include "session/MemoryReport.h"
#include "session/Pipeline.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "passes/Pass.h"
#include "passes/remat/Solver.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace remat {

namespace {

Status toStatus(llvm::Error err) {
  std::string message = errorToString(std::move(err));
  return Status::error(message.empty() ? "unknown error" : message);
}

/// \returns the graph inputs and forward results that backward and
/// recompute nodes read, in the order they are first read.
std::vector<std::string> getValuesBackwardReads(const ir::Graph &graph) {
  std::vector<std::string> names;
  llvm::DenseSet<const ir::Value *> seen;
  for (const ir::Node &node : graph.getNodes()) {
    if (node.getStage() == ir::Stage::Forward)
      continue;
    for (const ir::Value *operand : node.getOperands()) {
      const ir::Node *def = operand->getDefiningNode();
      if (def && def->getStage() != ir::Stage::Forward)
        continue;
      if (seen.insert(operand).second)
        names.push_back(operand->getName().str());
    }
  }
  return names;
}

std::string toJson(llvm::json::Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  return text;
}

/// \returns the smallest planned peak any strategy reaches on \p text's
/// graph (a fresh copy: the plan is not applied).
Result<uint64_t> getSmallestPeak(std::string_view text) {
  auto graph = ir::parseGraph(llvm::StringRef(text.data(), text.size()),
                              "<joint graph>", /*lineOffset=*/0);
  if (!graph)
    return toStatus(graph.takeError());
  auto problem = passes::recompute::prepareRematProblem(**graph, "", {});
  if (!problem)
    return toStatus(problem.takeError());
  (*problem)->solver->setNestedPlans(false);
  auto smallest = (*problem)->solver->smallestPlan();
  if (!smallest)
    return toStatus(smallest.takeError());
  return smallest->plannedPeakBytes;
}

} // namespace

Result<JointPlan> planJointGraph(std::string_view rirText,
                                 const JointPlanOptions &options) {
  if (Status status = checkRematFlags(options.budget, options.strategy);
      !status.ok())
    return status;
  auto graph = ir::parseGraph(llvm::StringRef(rirText.data(), rirText.size()),
                              "<joint graph>", /*lineOffset=*/0);
  if (!graph)
    return toStatus(graph.takeError());
  session::PipelineOptions pipelineOptions;
  pipelineOptions.budget = options.budget;
  pipelineOptions.strategy = options.strategy;
  pipelineOptions.costProfile = options.costProfile;
  pipelineOptions.explain = options.explain;
  // The joint graph's own order is the schedule the front end runs: no
  // schedule pass, so that the planned peak is the one of that order. The
  // front end's backward reads a set of saved values and rebuilds each
  // other value once from them, which neither a nested plan (Note [Nested
  // recompute]) nor a chunked head or attention core is.
  JointPlan plan;
  llvm::raw_string_ostream diag(plan.diagnostics);
  auto result = session::runPipeline(
      **graph,
      "remat{nested=false chunk-loss=off chunk-attention=off},plan-memory",
      pipelineOptions, diag);
  diag.flush();
  if (!result)
    return toStatus(result.takeError());
  plan.kept = getValuesBackwardReads(**graph);
  llvm::json::Object report = session::getMemoryReport(**graph);
  plan.plannedPeakBytes =
      uint64_t(report.getInteger("peak_bytes").getValueOr(0));
  if (result->rematReport) {
    if (const llvm::json::Object *summary =
            result->rematReport->getObject("summary"))
      plan.noRematPeakBytes = uint64_t(
          summary->getInteger("no_remat_planned_peak_bytes").getValueOr(0));
    report["remat"] = llvm::json::Object(*result->rematReport);
  }
  plan.reportJson = toJson(std::move(report));
  if (options.smallest) {
    Result<uint64_t> smallest = getSmallestPeak(rirText);
    if (!smallest.ok())
      return smallest.status();
    plan.smallestPeakBytes = *smallest;
  }
  return plan;
}

Status checkRematFlags(const std::string &budget,
                       const std::string &strategy) {
  // remat-opt's messages (ToolFlags::validate).
  if (!budget.empty())
    if (auto amount = passes::parseByteAmount(budget, /*allowPercent=*/true);
        !amount)
      return Status::error("--budget: " + errorToString(amount.takeError()));
  if (!strategy.empty() &&
      !llvm::is_contained(passes::recompute::getStrategyNames(), strategy))
    return Status::error(
        "--strategy: unknown strategy '" + strategy + "' (strategies: " +
        llvm::join(passes::recompute::getStrategyNames(), ", ") + ")");
  return Status::success();
}

} // namespace remat
