//===- driver/CommandLine.cpp - The tools' shared command line ------------===//
#include "driver/CommandLine.h"

#include "driver/OptDriver.h"
#include "ir/Limits.h"
#include "ir/Support.h"
#include "passes/Pass.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "passes/remat/Solver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdio>
#include <unistd.h>

namespace remat::driver {

using namespace session;

namespace cl = llvm::cl;

/// The strategies joined by '|'. llvm::cl keeps a StringRef to it, so it
/// must outlive every ToolFlags.
static llvm::StringRef strategyList() {
  static const std::string list =
      llvm::join(passes::recompute::getStrategyNames(), "|");
  return list;
}

StepFlags::StepFlags(cl::OptionCategory &category)
    : bind("bind",
           cl::desc("Symbolic dims of an .onnx input, or batch/seq of a BERT "
                    "config: batch=2,seq=16"),
           cl::value_desc("name=value,..."), cl::cat(category)),
      costProfile("cost-profile",
                  cl::desc("Node times measured by remat-run --profile, for "
                           "remat's cost model"),
                  cl::value_desc("file.json"), cl::cat(category)),
      unusedWeights("unused-weights",
                    cl::desc("Weights that do not reach the loss under "
                             "autodiff: warn (default), error or drop"),
                    cl::value_desc("warn|error|drop"), cl::cat(category)),
      freeze("freeze",
             cl::desc("Weights autodiff leaves frozen (no gradient, no "
                      "update): names or globs, comma-separated"),
             cl::value_desc("name|glob,..."), cl::cat(category)),
      paddingIdx("padding-idx",
                 cl::desc("Embedding rows that get no gradient from their "
                          "lookups, as torch's nn.Embedding(padding_idx)"),
                 cl::value_desc("name=row,..."), cl::cat(category)),
      scalarWeights(
          "scalar-weights",
          cl::desc("One-element float initializers of an .onnx model to "
                   "train as weights; others import as constants, as "
                   "exporters write scalars like epsilon: names or globs"),
          cl::value_desc("name|glob,..."), cl::cat(category)),
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
          cl::value_desc("eager|end"), cl::cat(category)),
      maxMemory("max-memory",
                cl::desc("Bound on the memory any tensor, weight file or "
                         "plan may need (default: the memory available on "
                         "the machine)"),
                cl::value_desc("bytes"), cl::cat(category)) {}

std::vector<std::pair<std::string, std::string>>
StepFlags::getOptimizerOptions() const {
  std::vector<std::pair<std::string, std::string>> options;
  auto add = [&](llvm::StringRef key, const std::string &value) {
    if (!value.empty())
      options.push_back({key.str(), value});
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

llvm::Error StepFlags::validate() const {
  if (maxMemory.getNumOccurrences()) {
    auto bytes = passes::parseByteSize(maxMemory);
    if (!bytes)
      return makeError("--max-memory: " + errorToString(bytes.takeError()));
    if (*bytes == 0)
      return makeError("--max-memory must be more than 0 bytes");
    ir::setMemoryLimitBytes(*bytes);
  }
  if (unusedWeights.getNumOccurrences() && unusedWeights != "warn" &&
      unusedWeights != "error" && unusedWeights != "drop")
    return makeError("--unused-weights must be warn, error or drop; got '" +
                     unusedWeights + "'");
  // A list of weights given to autodiff, parsed by the pass's own parser.
  auto checkWeightList = [](const cl::opt<std::string> &flag,
                            auto parse) -> llvm::Error {
    if (!flag.getNumOccurrences())
      return llvm::Error::success();
    if (llvm::StringRef(flag.getValue()).trim().empty())
      return makeError("--" + flag.ArgStr + " names no weight");
    if (auto parsed = parse(flag.getValue()); !parsed)
      return makeError("--" + flag.ArgStr + ": " +
                       errorToString(parsed.takeError()));
    return llvm::Error::success();
  };
  if (auto err = checkWeightList(freeze, passes::AutodiffPass::parseFreeze))
    return err;
  if (auto err =
          checkWeightList(paddingIdx, passes::AutodiffPass::parsePaddingIdx))
    return err;
  if (auto err =
          checkWeightList(scalarWeights, passes::AutodiffPass::parseFreeze))
    return err;
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
  for (const auto &[key, value] : getOptimizerOptions())
    if (auto err = pass.setOption(key, value))
      return makeError("--" + (key == "placement" ? "optimizer-placement"
                                                  : key) +
                       ": " + errorToString(std::move(err)));
  if (auto err = pass.validate())
    return makeError("--optimizer: " + errorToString(std::move(err)));
  return llvm::Error::success();
}

ToolFlags::ToolFlags(cl::OptionCategory &category)
    : StepFlags(category),
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
      explain("explain",
              cl::desc("Print remat's segments, decisions and their reasons "
                       "to stderr"),
              cl::cat(category)),
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
                 cl::cat(category)) {}

PipelineOptions ToolFlags::getPipelineOptions() const {
  PipelineOptions options;
  options.pipeline = pipeline;
  options.budget = budget;
  options.strategy = strategy;
  options.costProfile = costProfile;
  options.explain = explain;
  options.unusedWeights = unusedWeights;
  options.freeze = freeze;
  options.paddingIdx = paddingIdx;
  options.timing = timing;
  options.printIrAfterAll = printIrAfterAll;
  options.optimizer = optimizer;
  options.optimizerOptions = getOptimizerOptions();
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
  return StepFlags::validate();
}

bool parseCommandLine(int argc, char **argv, llvm::StringRef toolName,
                      llvm::StringRef overview) {
  cl::SetVersionPrinter([toolName](llvm::raw_ostream &os) {
    os << toolName << " (" << getVersionString() << ")\n";
  });
  std::string parseErrors;
  llvm::raw_string_ostream parseErrorStream(parseErrors);
  // A bad option value (`--steps abc`) is reported by Option::error, which
  // writes to llvm::errs() rather than to the stream given here; while
  // parsing, stderr goes to a temporary file so that those messages are
  // folded into the one `error:` line too.
  // What each output flag this tool has does with what is already at its
  // path (ir/OutputFile.h).
  std::string outputFlags;
  llvm::StringMap<cl::Option *> &options = cl::getRegisteredOptions();
  for (llvm::StringRef flag : {"o", "report", "memory-timeline", "step-json",
                               "profile", "save-weights", "dump", "csv",
                               "json", "svg"})
    if (options.count(flag))
      outputFlags += (outputFlags.empty() ? "" : ", ") +
                     std::string(flag.size() == 1 ? "-" : "--") + flag.str();
  std::string fullOverview = overview.str();
  if (!outputFlags.empty())
    fullOverview +=
        "\nOutput files (" + outputFlags +
        "): a regular file, or nothing, at the path is replaced by a "
        "temporary written beside it and renamed only when complete (no "
        "temporary is left on an error, Ctrl-C or SIGTERM). A character "
        "device or FIFO at the path (/dev/null, a named pipe) is written in "
        "place, like stdout, never replaced. A symbolic link at the path is "
        "refused with an error, neither followed nor replaced (name the "
        "file it points to); links among the folders on the way are "
        "followed. A folder, socket or block device at the path is "
        "refused." +
        std::string(options.count("dump")
                        ? " --dump DIR creates DIR (through a link to a "
                          "folder too) and treats each file in it so."
                        : "") +
        " A write error on stdout is one error: line, exit status 1.\n";
  std::string stderrText;
  bool parsed;
  {
    llvm::errs().flush();
    int savedStderr = dup(STDERR_FILENO);
    std::FILE *capture = savedStderr >= 0 ? std::tmpfile() : nullptr;
    if (capture)
      dup2(fileno(capture), STDERR_FILENO);
    parsed = cl::ParseCommandLineOptions(argc, argv, fullOverview,
                                         &parseErrorStream);
    llvm::errs().flush();
    if (capture) {
      dup2(savedStderr, STDERR_FILENO);
      std::rewind(capture);
      char block[4096];
      size_t n;
      while ((n = std::fread(block, 1, sizeof(block), capture)) > 0)
        stderrText.append(block, n);
      std::fclose(capture);
    }
    if (savedStderr >= 0)
      close(savedStderr);
  }
  parseErrorStream.flush();
  if (parsed) {
    llvm::errs() << stderrText; // Warnings, if llvm::cl printed any.
    return true;
  }
  // llvm::cl prefixes its messages with the program name, may add a second
  // line and ends some with '!'; keep one line, without the prefix.
  llvm::StringRef message = llvm::StringRef(stderrText).trim();
  if (message.empty())
    message = llvm::StringRef(parseErrors).trim();
  message = message.take_until([](char c) { return c == '\n'; }).rtrim();
  for (llvm::StringRef prefix : {llvm::StringRef(argv[0]), toolName})
    if (message.startswith(prefix) &&
        message.drop_front(prefix.size()).startswith(": ")) {
      message = message.drop_front(prefix.size() + 2);
      break;
    }
  // "for the --steps option: 'abc' value invalid for uint argument!"
  // becomes "--steps: 'abc' value invalid for uint argument".
  std::string text = message.str();
  if (message.startswith("for the ")) {
    llvm::StringRef rest = message.drop_front(8);
    size_t end = rest.find(" option: ");
    if (end != llvm::StringRef::npos)
      text = (rest.take_front(end) + ": " + rest.drop_front(end + 9)).str();
  }
  while (!text.empty() && (text.back() == '!' || text.back() == '.'))
    text.pop_back();
  if (text.empty())
    text = "cannot parse the command line";
  llvm::errs() << "error: " << text << '\n';
  return false;
}

int reportError(llvm::Error err) {
  llvm::outs().flush();
  std::string message = errorToString(std::move(err));
  // One `error:` line; further lines that are notes (the other failing
  // cases of a --split-input-file run) are printed as they are.
  for (llvm::StringRef line : llvm::split(message, '\n'))
    llvm::errs() << (line.startswith("note: ") ? "" : "error: ") << line
                 << '\n';
  return 1;
}

void printPassList() {
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  llvm::outs() << "Passes:\n";
  registry.printPasses(llvm::outs());
}

} // namespace remat::driver
