//===- session/Pipeline.cpp - Pipelines the tools share -------------------===//
#include "session/Pipeline.h"

#include "ir/Support.h"
#include "ir/UpdateName.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/STLExtras.h"

namespace remat::session {

bool isTrainingStep(const ir::Graph &graph) {
  return llvm::any_of(graph.getOutputs(), [](const ir::Value *value) {
    return value->getGradientOf() || ir::getUpdatedInput(value);
  });
}

int findLossOutput(const ir::Graph &graph) {
  bool training = isTrainingStep(graph);
  for (size_t i = 0; i < graph.getOutputs().size(); ++i) {
    const ir::Value *output = graph.getOutputs()[i];
    if (training) {
      if (!output->getGradientOf() && !ir::getUpdatedInput(output))
        return int(i);
      continue;
    }
    if (output->getType().getRank() == 0 &&
        ir::isFloat(output->getType().getDType()))
      return int(i);
  }
  return -1;
}

std::string choosePipeline(const ir::Graph &graph,
                           const PipelineOptions &options,
                           llvm::StringRef fallback) {
  if (!options.pipeline.empty())
    return options.pipeline;
  if (!options.optimizer.empty()) {
    // The update goes after the schedule, so that its placement stands,
    // and before remat, so that the budget covers the whole step.
    bool remat = !options.budget.empty() || !options.strategy.empty();
    return (isTrainingStep(graph) ? "" : std::string(kTrainingPipeline) + ",") +
           "schedule,optimizer," + (remat ? "remat," : "") + "plan-memory";
  }
  if (options.budget.empty() && options.strategy.empty())
    return fallback.str();
  std::string pipeline =
      isTrainingStep(graph) ? "" : std::string(kTrainingPipeline) + ",";
  return pipeline + "schedule,remat,plan-memory";
}

/// Splits a pipeline at the commas outside braces.
static std::vector<llvm::StringRef> splitPipeline(llvm::StringRef pipeline) {
  std::vector<llvm::StringRef> entries;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= pipeline.size(); ++i) {
    char c = i < pipeline.size() ? pipeline[i] : ',';
    if (c == '{')
      ++depth;
    else if (c == '}')
      --depth;
    else if (c == ',' && depth == 0) {
      entries.push_back(pipeline.slice(start, i).trim());
      start = i + 1;
    }
  }
  return entries;
}

std::string withoutRemat(llvm::StringRef pipeline) {
  std::string result;
  for (llvm::StringRef entry : splitPipeline(pipeline)) {
    llvm::StringRef name = entry.take_until([](char c) { return c == '{'; });
    if (name.trim() == "remat" || entry.empty())
      continue;
    if (!result.empty())
      result += ',';
    result += entry;
  }
  return result;
}

std::string withCpuFusions(llvm::StringRef pipeline) {
  std::vector<llvm::StringRef> entries = splitPipeline(pipeline), names;
  for (llvm::StringRef entry : entries)
    names.push_back(entry.take_until([](char c) { return c == '{'; }).trim());
  if (llvm::is_contained(names, "fold-transpose"))
    return pipeline.str();
  // Before remat, which then plans (and meets its budget) with the folded
  // graph, else before plan-memory, else at the end.
  size_t at = entries.size();
  for (llvm::StringRef name : {"plan-memory", "remat"}) {
    auto first = std::find(names.begin(), names.end(), name);
    if (first != names.end())
      at = std::min(at, size_t(first - names.begin()));
  }
  std::string result;
  auto append = [&](llvm::StringRef entry) {
    if (!entry.empty())
      result += (result.empty() ? "" : ",") + entry.str();
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i == at)
      append("fold-transpose");
    append(entries[i]);
  }
  if (at == entries.size())
    append("fold-transpose");
  return result;
}

/// Builds the pass manager of \p pipeline with \p options' flags set.
static llvm::Error buildPassManager(llvm::StringRef pipeline,
                                    const PipelineOptions &options,
                                    passes::PassManager &pm) {
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  // Constant folding runs the reference CPU kernels (Note in passes/Pass.h).
  pm.setContext({runtime::cpu::makeCpuEvaluator()});
  if (auto err = passes::parsePassPipeline(pipeline, registry, pm))
    return err;
  auto set = [&](llvm::StringRef flag, llvm::StringRef pass,
                 llvm::StringRef key, llvm::StringRef value) -> llvm::Error {
    if (value.empty())
      return llvm::Error::success();
    if (auto err = pm.setPassOption(pass, key, value))
      return makeError("--" + flag + ": " + errorToString(std::move(err)));
    return llvm::Error::success();
  };
  if (auto err = set("unused-weights", "autodiff", "unused-weights",
                     options.unusedWeights))
    return err;
  if (auto err = set("freeze", "autodiff", "freeze", options.freeze))
    return err;
  if (auto err = set("padding-idx", "autodiff", "padding-idx",
                     options.paddingIdx))
    return err;
  if (auto err = set("budget", "remat", "budget", options.budget))
    return err;
  if (auto err = set("strategy", "remat", "strategy", options.strategy))
    return err;
  if (auto err = set("cost-profile", "remat", "cost-profile",
                     options.costProfile))
    return err;
  if (auto err = set("explain", "remat", "explain",
                     options.explain ? "true" : ""))
    return err;
  if (auto err = set("optimizer", "optimizer", "kind", options.optimizer))
    return err;
  for (const auto &[key, value] : options.optimizerOptions)
    if (auto err = set(key == "placement" ? "optimizer-placement" : key,
                       "optimizer", key, value))
      return err;
  return llvm::Error::success();
}

llvm::Error checkPipeline(llvm::StringRef pipeline,
                          const PipelineOptions &options) {
  passes::PassManager pm;
  return buildPassManager(pipeline, options, pm);
}

llvm::Expected<PipelineResult> runPipeline(ir::Graph &graph,
                                           llvm::StringRef pipeline,
                                           const PipelineOptions &options,
                                           llvm::raw_ostream &diag) {
  PipelineResult result;
  result.pipeline = pipeline.str();
  if (auto err = ir::verify(graph))
    return std::move(err);
  passes::PassManager pm;
  if (auto err = buildPassManager(pipeline, options, pm))
    return std::move(err);
  if (pm.size() == 0)
    return result;
  pm.setDiagnosticStream(&diag);
  if (options.printIrAfterAll)
    pm.enablePrintAfterAll(&diag);
  if (options.timing)
    pm.enableTiming(&diag);
  if (auto changed = pm.run(graph); !changed)
    return changed.takeError();
  result.rematReport = pm.getResults().rematReport;
  return result;
}

} // namespace remat::session
