//===- driver/CommandLine.cpp - The tools' shared command line ------------===//
#include "driver/CommandLine.h"

#include "driver/OptDriver.h"
#include "ir/Support.h"
#include "passes/Pass.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "passes/remat/Solver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace remat::driver {

namespace cl = llvm::cl;

/// The strategies joined by '|'. llvm::cl keeps a StringRef to it, so it
/// must outlive every ToolFlags.
static llvm::StringRef strategyList() {
  static const std::string list =
      llvm::join(passes::recompute::getStrategyNames(), "|");
  return list;
}

ToolFlags::ToolFlags(cl::OptionCategory &category)
    : bind("bind",
           cl::desc("Symbolic dims of an .onnx input, or batch/seq of a BERT "
                    "config: batch=2,seq=16"),
           cl::value_desc("name=value,..."), cl::cat(category)),
      pipeline("p",
               cl::desc("Pass pipeline, e.g. "
                        "'canonicalize,autodiff,dce,schedule,remat{budget=40%},"
                        "plan-memory' (--list-passes lists them)"),
               cl::value_desc("pipeline"), cl::cat(category)),
      pipelineLong("pipeline", cl::desc("Alias for -p"), cl::aliasopt(pipeline),
                   cl::cat(category)),
      budget("budget",
             cl::desc("Bound on the planned peak (weights + inputs + arena): "
                      "bytes (6GiB, 512MiB) or a percentage of the planned "
                      "peak without remat (40%); adds remat to the default "
                      "pipeline"),
             cl::value_desc("bytes|percent"), cl::cat(category)),
      strategy("strategy",
               cl::desc("What remat may recompute: none, every-layer, sqrt, "
                        "chain-dp, selective or auto (the default)"),
               cl::value_desc(strategyList()), cl::cat(category)),
      costProfile("cost-profile",
                  cl::desc("Node times measured by remat-run --profile, for "
                           "remat's cost model"),
                  cl::value_desc("file.json"), cl::cat(category)),
      explain("explain",
              cl::desc("Print remat's segments, decisions and their reasons "
                       "to stderr"),
              cl::cat(category)),
      unusedWeights("unused-weights",
                    cl::desc("Weights that do not reach the loss under "
                             "autodiff: warn (default), error or drop"),
                    cl::value_desc("warn|error|drop"), cl::cat(category)),
      timing("timing", cl::desc("Print the time of each pass to stderr"),
             cl::cat(category)),
      printIrAfterAll("print-ir-after-all",
                      cl::desc("Print the IR to stderr after every pass"),
                      cl::cat(category)),
      printMemory("print-memory",
                  cl::desc("Print the peak memory breakdown to stderr after "
                           "the pipeline"),
                  cl::cat(category)),
      report("report",
             cl::desc("Write the memory report (and remat's decisions) as "
                      "JSON (docs/memory-report.md)"),
             cl::value_desc("file.json"), cl::cat(category)),
      listPasses("list-passes",
                 cl::desc("List the passes and their options, then exit"),
                 cl::cat(category)),
      optimizer("optimizer",
                cl::desc("Append the weight update to the training step "
                         "(adds the optimizer pass to the default pipeline)"),
                cl::value_desc("sgd|adamw"), cl::cat(category)),
      lr("lr", cl::desc("Learning rate of --optimizer (default 1e-3)"),
         cl::value_desc("float"), cl::cat(category)),
      weightDecay("weight-decay",
                  cl::desc("Weight decay of --optimizer (default 0)"),
                  cl::value_desc("float"), cl::cat(category)),
      momentum("momentum",
               cl::desc("Momentum of --optimizer sgd (default 0)"),
               cl::value_desc("float"), cl::cat(category)),
      beta1("beta1", cl::desc("Beta1 of --optimizer adamw (default 0.9)"),
            cl::value_desc("float"), cl::cat(category)),
      beta2("beta2", cl::desc("Beta2 of --optimizer adamw (default 0.999)"),
            cl::value_desc("float"), cl::cat(category)),
      eps("eps", cl::desc("Epsilon of --optimizer adamw (default 1e-8)"),
          cl::value_desc("float"), cl::cat(category)),
      optimizerPlacement(
          "optimizer-placement",
          cl::desc("eager: each update right after its gradient (default); "
                   "end: every update at the end of the step"),
          cl::value_desc("eager|end"), cl::cat(category)) {}

PipelineOptions ToolFlags::getPipelineOptions() const {
  PipelineOptions options;
  options.pipeline = pipeline;
  options.budget = budget;
  options.strategy = strategy;
  options.costProfile = costProfile;
  options.explain = explain;
  options.unusedWeights = unusedWeights;
  options.timing = timing;
  options.printIrAfterAll = printIrAfterAll;
  options.optimizer = optimizer;
  auto add = [&](llvm::StringRef key, const std::string &value) {
    if (!value.empty())
      options.optimizerOptions.push_back({key.str(), value});
  };
  add("lr", lr);
  add("weight-decay", weightDecay);
  add("momentum", momentum);
  add("beta1", beta1);
  add("beta2", beta2);
  add("eps", eps);
  add("placement", optimizerPlacement);
  return options;
}

llvm::Error ToolFlags::validate() const {
  if (budget.getNumOccurrences())
    if (auto amount = passes::parseByteAmount(budget, /*allowPercent=*/true);
        !amount)
      return makeError("--budget: " + errorToString(amount.takeError()));
  if (strategy.getNumOccurrences() &&
      !llvm::is_contained(passes::recompute::getStrategyNames(),
                          strategy.getValue()))
    return makeError("--strategy: unknown strategy '" + strategy +
                     "' (strategies: " +
                     llvm::join(passes::recompute::getStrategyNames(), ", ") +
                     ")");
  if (unusedWeights.getNumOccurrences() && unusedWeights != "warn" &&
      unusedWeights != "error" && unusedWeights != "drop")
    return makeError("--unused-weights must be warn, error or drop; got '" +
                     unusedWeights + "'");
  if (optimizer.getNumOccurrences() && optimizer != "sgd" &&
      optimizer != "adamw")
    return makeError("--optimizer: unknown optimizer '" + optimizer +
                     "' (optimizers: sgd, adamw)");
  if (optimizer.empty())
    for (const cl::opt<std::string> *flag :
         {&lr, &weightDecay, &momentum, &beta1, &beta2, &eps,
          &optimizerPlacement})
      if (flag->getNumOccurrences())
        return makeError("--" + flag->ArgStr + " needs --optimizer");
  // The values themselves: the pass checks them, naming the flag.
  passes::OptimizerPass pass;
  for (const auto &[key, value] : getPipelineOptions().optimizerOptions)
    if (auto err = pass.setOption(key, value))
      return makeError("--" + (key == "placement" ? "optimizer-placement"
                                                  : key) +
                       ": " + errorToString(std::move(err)));
  if (auto err = pass.validate())
    return makeError("--optimizer: " + errorToString(std::move(err)));
  return llvm::Error::success();
}

bool parseCommandLine(int argc, char **argv, llvm::StringRef toolName,
                      llvm::StringRef overview) {
  cl::SetVersionPrinter([toolName](llvm::raw_ostream &os) {
    os << toolName << " (" << getVersionString() << ")\n";
  });
  std::string parseErrors;
  llvm::raw_string_ostream parseErrorStream(parseErrors);
  if (cl::ParseCommandLineOptions(argc, argv, overview, &parseErrorStream))
    return true;
  parseErrorStream.flush();
  // llvm::cl prefixes its messages with the program name and may add a
  // second line; keep one line, without the prefix.
  llvm::StringRef message = llvm::StringRef(parseErrors).trim();
  message = message.take_until([](char c) { return c == '\n'; });
  if (auto colon = message.find(": ");
      colon != llvm::StringRef::npos && message.startswith(argv[0]))
    message = message.drop_front(colon + 2);
  llvm::errs() << "error: " << message << '\n';
  return false;
}

int reportError(llvm::Error err) {
  llvm::outs().flush();
  std::string message = errorToString(std::move(err));
  for (llvm::StringRef line : llvm::split(message, '\n'))
    llvm::errs() << "error: " << line << '\n';
  return 1;
}

void printPassList() {
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  llvm::outs() << "Passes:\n";
  registry.printPasses(llvm::outs());
}

} // namespace remat::driver
