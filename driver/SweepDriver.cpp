//===- driver/SweepDriver.cpp - The library behind remat-sweep ------------===//
//
// Plans every point in this process (session/Sweep.cpp), then with --measure
// runs each distinct plan as `remat-run ... --step-json` in a process of its
// own, so that one point's memory cannot leak into the next one's RSS. The
// rounds alternate direction and each row keeps its best round. After every
// point the outputs are rewritten (each atomically) with the rows finished so
// far, so a sweep interrupted with Ctrl-C leaves them.
//
//===----------------------------------------------------------------------===//
#include "driver/SweepDriver.h"

#include "driver/CommandLine.h"
#include "driver/Plots.h"
#include "session/ModelLoader.h"
#include "session/Pipeline.h"
#include "session/Sweep.h"
#include "ir/OutputFile.h"
#include "ir/Support.h"
#include "passes/Pass.h"
#include "passes/remat/Solver.h"
#include "runtime/Backends.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Signals.h"

#include <chrono>
#include <csignal>

namespace remat::driver {

using namespace session;

namespace {

volatile std::sig_atomic_t interrupted = 0;

void onInterrupt() { interrupted = 1; }

/// Splits a comma-separated flag value, dropping empty entries.
std::vector<std::string> splitList(llvm::StringRef text) {
  std::vector<std::string> items;
  for (llvm::StringRef item : llvm::split(text, ','))
    if (!item.trim().empty())
      items.push_back(item.trim().str());
  return items;
}

struct OutputPaths {
  std::string csv, json, svg;
};

/// Writes every output of \p result that was asked for.
llvm::Error writeOutputs(const SweepResult &result, const OutputPaths &paths) {
  if (!paths.csv.empty())
    if (auto err = writeOutputFile(paths.csv, getSweepCsv(result)))
      return err;
  if (!paths.json.empty()) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::formatv("{0:2}", llvm::json::Value(getSweepJson(result)))
       << '\n';
    os.flush();
    if (auto err = writeOutputFile(paths.json, text))
      return err;
  }
  if (!paths.svg.empty())
    if (auto err = writeOutputFile(paths.svg, getSweepSvg(result)))
      return err;
  return llvm::Error::success();
}

/// What one remat-run of a row measured.
struct Measurement {
  double medianSeconds = 0;
  uint64_t plannedPeakBytes = 0;
  uint64_t measuredPeakBytes = 0;
  uint64_t arenaMeasuredBytes = 0;
  uint64_t maxRssBytes = 0;
};

struct MeasureOptions {
  std::string runTool;
  std::string model;
  std::string bind;
  std::string costProfile;
  std::string optimizer;
  std::string optimizerPlacement;
  std::string backend;
  unsigned steps = 3;
  unsigned threads = 0;
};

/// Runs \p row's plan in a remat-run process of its own.
llvm::Expected<Measurement> measureRow(const SweepRow &row,
                                       const MeasureOptions &options) {
  llvm::SmallString<128> statsPath, logPath;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "remat-sweep-point", "json", statsPath))
    return makeError("cannot create a temporary file: " + ec.message());
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "remat-sweep-point", "log", logPath))
    return makeError("cannot create a temporary file: " + ec.message());
  auto cleanup = llvm::make_scope_exit([&] {
    llvm::sys::fs::remove(statsPath);
    llvm::sys::fs::remove(logPath);
  });
  std::vector<std::string> args = {options.runTool, options.model};
  if (!options.bind.empty())
    args.push_back("--bind=" + options.bind);
  args.push_back("--strategy=" + row.strategy);
  if (!row.budget.empty())
    args.push_back("--budget=" + std::to_string(row.budgetBytes));
  if (!options.costProfile.empty())
    args.push_back("--cost-profile=" + options.costProfile);
  if (!options.optimizer.empty())
    args.push_back("--optimizer=" + options.optimizer);
  if (!options.optimizerPlacement.empty())
    args.push_back("--optimizer-placement=" + options.optimizerPlacement);
  args.push_back("--backend=" + options.backend);
  args.push_back("--steps=" + std::to_string(options.steps));
  args.push_back("--threads=" + std::to_string(options.threads));
  args.push_back("--step-json=" + statsPath.str().str());
  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::StringRef(""),
                                                llvm::StringRef(logPath),
                                                llvm::StringRef(logPath)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(options.runTool, argRefs, llvm::None,
                                     redirects, 0, 0, &message);
  if (rc != 0) {
    // The last lines of its output say why.
    std::string tail;
    if (auto log = llvm::MemoryBuffer::getFile(logPath)) {
      llvm::SmallVector<llvm::StringRef> lines;
      (*log)->getBuffer().split(lines, '\n', -1, false);
      for (size_t i = lines.size() > 3 ? lines.size() - 3 : 0;
           i < lines.size(); ++i)
        tail += "\n  " + lines[i].str();
    }
    return makeError("remat-run failed on point '" + row.getLabel() + "' (" +
                     (message.empty() ? "exit " + std::to_string(rc)
                                      : message) +
                     ")" + tail);
  }
  auto buffer = llvm::MemoryBuffer::getFile(statsPath);
  if (!buffer)
    return makeError("remat-run wrote no statistics for '" + row.getLabel() +
                     "'");
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return json.takeError();
  const llvm::json::Object *stats = json->getAsObject();
  auto integer = [&](llvm::StringRef key) -> uint64_t {
    if (!stats)
      return 0;
    auto value = stats->getInteger(key);
    return value ? uint64_t(*value) : 0;
  };
  Measurement measurement;
  if (stats)
    if (auto median = stats->getNumber("median_seconds"))
      measurement.medianSeconds = *median;
  measurement.plannedPeakBytes = integer("planned_peak_bytes");
  measurement.arenaMeasuredBytes = integer("arena_measured_peak_bytes");
  measurement.measuredPeakBytes = integer("weight_bytes") +
                                  integer("input_bytes") +
                                  measurement.arenaMeasuredBytes;
  measurement.maxRssBytes = integer("max_rss_bytes");
  return measurement;
}

std::string formatDuration(double seconds) {
  if (seconds < 90)
    return std::to_string(unsigned(seconds + 0.5)) + " s";
  return std::to_string(unsigned(seconds / 60 + 0.5)) + " min";
}

/// The rows that are done: all of them, or with --measure those measured
/// or that failed to run (and the infeasible ones, which are not run).
SweepResult finishedRows(const SweepResult &result) {
  SweepResult done = result;
  if (!result.measured)
    return done;
  done.rows.clear();
  for (const SweepRow &row : result.rows)
    if (!row.feasible || row.measured || !row.note.empty())
      done.rows.push_back(row);
  markParetoFront(done.rows);
  return done;
}

} // namespace

int sweepMain(int argc, char **argv) {
  namespace cl = llvm::cl;
  cl::OptionCategory category("remat-sweep options");
  cl::opt<std::string> model(
      cl::Positional, cl::desc("<model .rir, .onnx or BERT config .json>"),
      cl::cat(category));
  cl::opt<std::string> bind(
      "bind",
      cl::desc("Bind symbolic dims, or a BERT config's batch and seq "
               "(batch=8,seq=512)"),
      cl::value_desc("name=value,..."), cl::cat(category));
  cl::opt<std::string> budgetsFlag(
      "budgets",
      cl::desc("Budgets for chain-dp, selective and auto: percentages of the "
               "planned peak without remat, byte sizes, or min (the smallest "
               "planned peak any plan reaches)"),
      cl::init("100%,80%,60%,40%,30%,20%,min"), cl::cat(category));
  static const std::string strategiesHelp =
      "Strategies to sweep (none is always added: every ratio is relative "
      "to it); none, every-layer and sqrt are one point each";
  static const std::string allStrategies =
      llvm::join(passes::recompute::getStrategyNames(), ",");
  cl::opt<std::string> strategiesFlag("strategies", cl::desc(strategiesHelp),
                                      cl::init(allStrategies),
                                      cl::cat(category));
  cl::opt<std::string> costProfile(
      "cost-profile",
      cl::desc("Node times from remat-run --profile for the cost model"),
      cl::value_desc("file.json"), cl::cat(category));
  cl::opt<std::string> optimizer(
      "optimizer",
      cl::desc("Sweep the whole training step with its weight update (the "
               "gradients and the optimizer state in the budget)"),
      cl::value_desc("sgd|adamw"), cl::cat(category));
  cl::opt<std::string> optimizerPlacement(
      "optimizer-placement",
      cl::desc("eager: each update right after its gradient (default); end: "
               "every update at the end of the step"),
      cl::value_desc("eager|end"), cl::cat(category));
  cl::opt<bool> measure(
      "measure",
      cl::desc("Run every distinct plan with remat-run, each in its own "
               "process, and report measured peaks and step times"),
      cl::cat(category));
  cl::opt<std::string> backend("backend",
                               cl::desc("Backend of the measured steps"),
                               cl::init("cpu"), cl::cat(category));
  cl::opt<unsigned> steps("steps",
                          cl::desc("Steps per measured point (the median "
                                   "counts)"),
                          cl::init(3), cl::cat(category));
  cl::opt<unsigned> threads("threads",
                            cl::desc("Kernel threads of the measured steps "
                                     "(0 = all cores)"),
                            cl::init(0), cl::cat(category));
  cl::opt<unsigned> rounds(
      "rounds",
      cl::desc("Measure every point this many times, alternating the order; "
               "each point keeps its fastest round"),
      cl::init(1), cl::cat(category));
  cl::opt<std::string> csvPath("csv", cl::desc("Write the rows as CSV"),
                               cl::value_desc("file.csv"), cl::cat(category));
  cl::opt<std::string> jsonPath("json", cl::desc("Write the rows as JSON"),
                                cl::value_desc("file.json"),
                                cl::cat(category));
  cl::opt<std::string> svgPath(
      "svg", cl::desc("Write the peak/time plot with the Pareto front"),
      cl::value_desc("file.svg"), cl::cat(category));
  cl::opt<std::string> peersPath(
      "peers",
      cl::desc("Draw points measured elsewhere (tools/bench/vs_pytorch.py): "
               "CSV with columns label, peak_bytes, step_seconds"),
      cl::value_desc("file.csv"), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!parseCommandLine(
          argc, argv, "remat-sweep",
          "remat-sweep: the memory/time trade-off of every remat strategy "
          "and budget\n"))
    return 1;

  // Everything that needs no model is checked first.
  if (model.empty())
    return reportError(makeError("no model given (see --help)"));
  SweepOptions options;
  options.costProfile = costProfile;
  options.strategies = splitList(strategiesFlag);
  if (options.strategies.empty())
    return reportError(makeError("--strategies: no strategy given"));
  for (const std::string &strategy : options.strategies)
    if (!passes::recompute::parseStrategy(strategy))
      return reportError(makeError(
          "--strategies: unknown strategy '" + strategy + "' (strategies: " +
          llvm::join(passes::recompute::getStrategyNames(), ", ") + ")"));
  if (!llvm::is_contained(options.strategies, "none"))
    options.strategies.insert(options.strategies.begin(), "none");
  std::vector<std::string> seen;
  for (const std::string &strategy : options.strategies) {
    if (llvm::is_contained(seen, strategy))
      return reportError(makeError("--strategies: '" + strategy +
                                   "' is given twice"));
    seen.push_back(strategy);
  }
  options.budgets = splitList(budgetsFlag);
  bool budgetDriven = llvm::any_of(options.strategies, [](llvm::StringRef s) {
    return passes::recompute::isBudgetDriven(*passes::recompute::parseStrategy(s));
  });
  if (budgetDriven && options.budgets.empty())
    return reportError(makeError("--budgets: no budget given"));
  for (const std::string &budget : options.budgets) {
    if (budget == "min")
      continue;
    if (auto amount = passes::parseByteAmount(budget, /*allowPercent=*/true);
        !amount)
      return reportError(makeError("--budgets: '" + budget +
                                   "': " + errorToString(amount.takeError())));
  }
  if (!llvm::is_contained(runtime::listBackends(), backend.getValue()))
    return reportError(makeError("--backend: unknown backend '" + backend +
                                 "' (backends: " +
                                 llvm::join(runtime::listBackends(), ", ") +
                                 ")"));
  if (measure && steps == 0)
    return reportError(makeError("--steps must be at least 1"));
  if (measure && rounds == 0)
    return reportError(makeError("--rounds must be at least 1"));
  PipelineOptions pipelineOptions;
  if (!optimizer.empty()) {
    pipelineOptions.optimizer = optimizer;
    if (!optimizerPlacement.empty())
      pipelineOptions.optimizerOptions.push_back(
          {"placement", optimizerPlacement});
    if (auto err = checkPipeline("optimizer", pipelineOptions))
      return reportError(std::move(err));
  } else if (!optimizerPlacement.empty()) {
    return reportError(
        makeError("--optimizer-placement needs --optimizer sgd|adamw"));
  }
  OutputPaths paths{csvPath, jsonPath, svgPath};
  for (auto [flag, path] : {std::pair<llvm::StringRef, llvm::StringRef>{
                                "csv", paths.csv},
                            {"json", paths.json},
                            {"svg", paths.svg}})
    if (auto err = checkOutputPath("--" + flag, path))
      return reportError(std::move(err));

  SweepResult result;
  result.model = model;
  result.bind = bind;
  if (!peersPath.empty()) {
    auto peers = readPeers(peersPath);
    if (!peers)
      return reportError(peers.takeError());
    result.peers = std::move(*peers);
  }
  MeasureOptions measureOptions;
  if (measure) {
    // remat-run is installed beside remat-sweep.
    std::string self = llvm::sys::fs::getMainExecutable(
        argv[0], reinterpret_cast<void *>(&sweepMain));
    llvm::SmallString<256> runTool = llvm::sys::path::parent_path(self);
    llvm::sys::path::append(runTool, "remat-run");
    if (!llvm::sys::fs::can_execute(runTool))
      return reportError(makeError("--measure runs remat-run, which is not "
                                   "beside remat-sweep (looked for '" +
                                   runTool + "')"));
    measureOptions = {runTool.str().str(), model,     bind,
                      costProfile,         optimizer, optimizerPlacement,
                      backend,             steps,     threads};
  }

  // Plan every point on the training step (no weights are needed for that).
  auto start = std::chrono::steady_clock::now();
  LoadOptions loadOptions;
  loadOptions.bind = bind;
  loadOptions.initWeights = false;
  auto graph = loadModel(model, loadOptions);
  if (!graph)
    return reportError(graph.takeError());
  // The passes remat-run runs before remat (choosePipeline, and for the CPU
  // withCpuFusions), without it.
  std::string pipeline = isTrainingStep(**graph)
                             ? std::string("schedule")
                             : std::string(kTrainingPipeline) + ",schedule";
  if (!optimizer.empty())
    pipeline += ",optimizer";
  if (backend == "cpu")
    pipeline = withCpuFusions(pipeline);
  auto ran = runPipeline(**graph, pipeline, pipelineOptions, llvm::errs());
  if (!ran)
    return reportError(ran.takeError());
  auto rows = planSweep(**graph, options, result.noRematPeakBytes,
                        result.noRematPredictedSeconds);
  if (!rows)
    return reportError(rows.takeError());
  result.rows = std::move(*rows);
  double planSeconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  size_t feasible = 0;
  for (const SweepRow &row : result.rows)
    feasible += row.feasible;
  llvm::errs() << "remat-sweep: planned " << result.rows.size()
               << " rows (" << feasible << " distinct plans) in "
               << llvm::format("%.1f", planSeconds) << " s\n";

  if (measure) {
    result.measured = true;
    result.backend = backend;
    result.threads = threads;
    result.steps = steps;
    result.rounds = rounds;
    llvm::sys::SetInterruptFunction(onInterrupt);
    std::vector<size_t> order;
    for (size_t i = 0; i < result.rows.size(); ++i)
      if (result.rows[i].feasible)
        order.push_back(i);
    size_t total = order.size() * rounds, done = 0;
    std::string firstFailure;
    auto measureStart = std::chrono::steady_clock::now();
    for (unsigned round = 0; round < rounds && !interrupted; ++round) {
      for (size_t k = 0; k < order.size() && !interrupted; ++k) {
        // Odd rounds run the points in reverse: each point meets the
        // machine in a different state.
        SweepRow &row =
            result.rows[order[round % 2 ? order.size() - 1 - k : k]];
        auto measured = measureRow(row, measureOptions);
        if (!measured) {
          // Ctrl-C reaches remat-run too: its failure is the interruption.
          if (interrupted) {
            llvm::consumeError(measured.takeError());
            break;
          }
          // A point that cannot run here (a plan larger than the machine,
          // no device) is reported, not fatal: the others still can.
          std::string why = errorToString(measured.takeError());
          llvm::StringRef last = llvm::StringRef(why).rtrim();
          last = last.substr(last.rfind('\n') + 1).trim();
          if (firstFailure.empty())
            firstFailure = ("point '" + row.getLabel() + "': " + last).str();
          if (!row.measured)
            row.note = ("not measured: " + last).str();
          ++done;
          llvm::errs() << "[" << done << "/" << total << "] " << row.getLabel()
                       << ": not measured: " << last << '\n';
          continue;
        }
        row.note.clear();
        if (measured->plannedPeakBytes != row.plannedPeakBytes)
          llvm::errs() << "warning: remat-run planned "
                       << measured->plannedPeakBytes << " B for '"
                       << row.getLabel() << "', the sweep "
                       << row.plannedPeakBytes << " B\n";
        if (!row.measured || measured->medianSeconds < row.stepSeconds) {
          row.stepSeconds = measured->medianSeconds;
          row.measuredPeakBytes = measured->measuredPeakBytes;
          row.arenaMeasuredBytes = measured->arenaMeasuredBytes;
          row.maxRssBytes = measured->maxRssBytes;
        }
        row.measured = true;
        ++done;
        computeRatios(result);
        double elapsed = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - measureStart)
                             .count();
        llvm::errs() << "[" << done << "/" << total << "] " << row.getLabel()
                     << ": planned " << formatBytes(row.plannedPeakBytes)
                     << ", step "
                     << llvm::format("%.2f", measured->medianSeconds)
                     << " s (x"
                     << llvm::format("%.2f", measured->medianSeconds /
                                                 getReferenceSeconds(result))
                     << ")";
        if (done < total)
          llvm::errs() << ", about "
                       << formatDuration(elapsed / double(done) *
                                         double(total - done))
                       << " left";
        llvm::errs() << '\n';
        if (auto err = writeOutputs(finishedRows(result), paths))
          return reportError(std::move(err));
      }
    }
    if (!interrupted &&
        llvm::none_of(result.rows, [](const SweepRow &row) { return row.measured; }))
      return reportError(makeError("no point could be measured; the first "
                                   "failure: " + firstFailure));
    if (interrupted) {
      SweepResult partial = finishedRows(result);
      if (auto err = writeOutputs(partial, paths))
        return reportError(std::move(err));
      llvm::errs() << "remat-sweep: interrupted after " << done << " of "
                   << total
                   << " measurements; the outputs hold the rows finished so "
                      "far\n";
      printSweepTable(partial, llvm::outs());
      return 130;
    }
  }

  computeRatios(result);
  markParetoFront(result.rows);
  printSweepTable(result, llvm::outs());
  if (auto err = writeOutputs(result, paths))
    return reportError(std::move(err));
  return 0;
}

} // namespace remat::driver
