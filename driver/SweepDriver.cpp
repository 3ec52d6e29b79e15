//===- driver/SweepDriver.cpp - The library behind remat-sweep ------------===//
//
// Plans every point in this process (session/Sweep.cpp), then with --measure
// runs each distinct plan as `remat-run ... --step-json` in a process of its
// own, so that one point's memory cannot leak into the next one's RSS. One
// untimed run of the first point warms the machine (page cache, frequency)
// first; the rounds alternate direction and each row keeps its best round.
// After every point the outputs are rewritten (each atomically) with the rows
// finished so far, so a sweep interrupted with Ctrl-C leaves them.
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

/// Runs \p row's plan in a remat-run process of its own.
llvm::Expected<Measurement> measureRow(const SweepRow &row,
                                       const SweepRunOptions &options) {
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
  if (!options.scalarWeights.empty())
    args.push_back("--scalar-weights=" + options.scalarWeights);
  args.push_back("--strategy=" + row.strategy);
  if (!row.budget.empty())
    args.push_back("--budget=" + std::to_string(row.budgetBytes));
  if (!options.sweep.costProfile.empty())
    args.push_back("--cost-profile=" + options.sweep.costProfile);
  if (!options.pipeline.unusedWeights.empty())
    args.push_back("--unused-weights=" + options.pipeline.unusedWeights);
  if (!options.pipeline.freeze.empty())
    args.push_back("--freeze=" + options.pipeline.freeze);
  if (!options.pipeline.paddingIdx.empty())
    args.push_back("--padding-idx=" + options.pipeline.paddingIdx);
  if (!options.pipeline.optimizer.empty())
    args.push_back("--optimizer=" + options.pipeline.optimizer);
  // remat-run's flag for each optimizer pass option (CommandLine.cpp).
  for (const auto &[key, value] : options.pipeline.optimizerOptions)
    args.push_back("--" +
                   (key == "placement" ? std::string("optimizer-placement")
                                       : key) +
                   "=" + value);
  if (!options.maxMemory.empty())
    args.push_back("--max-memory=" + options.maxMemory);
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

namespace {

/// Checks what needs no model. \returns the strategies to plan: those
/// given, with `none` first when absent.
llvm::Expected<std::vector<std::string>>
checkOptions(const SweepRunOptions &options) {
  if (!options.fromJsonPath.empty() &&
      (!options.model.empty() || options.measure))
    return makeError("--from-json draws a saved sweep again: it takes no "
                     "model and no --measure");
  if (options.model.empty() && options.fromJsonPath.empty())
    return makeError("no model given (see --help)");
  std::vector<std::string> strategies = options.sweep.strategies;
  if (strategies.empty())
    return makeError("--strategies: no strategy given");
  for (const std::string &strategy : strategies)
    if (!passes::recompute::parseStrategy(strategy))
      return makeError(
          "--strategies: unknown strategy '" + strategy + "' (strategies: " +
          llvm::join(passes::recompute::getStrategyNames(), ", ") + ")");
  if (!llvm::is_contained(strategies, "none"))
    strategies.insert(strategies.begin(), "none");
  for (size_t i = 0; i < strategies.size(); ++i)
    if (llvm::is_contained(llvm::makeArrayRef(strategies).take_front(i),
                           strategies[i]))
      return makeError("--strategies: '" + strategies[i] +
                       "' is given twice");
  bool budgetDriven = llvm::any_of(strategies, [](llvm::StringRef s) {
    return passes::recompute::isBudgetDriven(
        *passes::recompute::parseStrategy(s));
  });
  if (budgetDriven && options.sweep.budgets.empty())
    return makeError("--budgets: no budget given");
  for (const std::string &budget : options.sweep.budgets) {
    if (budget == "min")
      continue;
    if (auto amount = passes::parseByteAmount(budget, /*allowPercent=*/true);
        !amount)
      return makeError("--budgets: '" + budget +
                       "': " + errorToString(amount.takeError()));
  }
  if (!llvm::is_contained(runtime::listBackends(), options.backend))
    return makeError("--backend: unknown backend '" + options.backend +
                     "' (backends: " +
                     llvm::join(runtime::listBackends(), ", ") + ")");
  if (options.measure && options.steps == 0)
    return makeError("--steps must be at least 1");
  if (options.measure && options.rounds == 0)
    return makeError("--rounds must be at least 1");
  if (!options.pipeline.optimizer.empty())
    if (auto err = checkPipeline("optimizer", options.pipeline))
      return std::move(err);
  for (auto [flag, path] :
       {std::pair<llvm::StringRef, llvm::StringRef>{"csv", options.csvPath},
        {"json", options.jsonPath},
        {"svg", options.svgPath}})
    if (auto err = checkOutputPath("--" + flag, path))
      return std::move(err);
  if (options.measure && !llvm::sys::fs::can_execute(options.runTool))
    return makeError("--measure runs remat-run, which is not beside "
                     "remat-sweep (looked for '" +
                     options.runTool + "')");
  return std::move(strategies);
}

/// Plans every point of \p options into \p result.
llvm::Error planPoints(const SweepRunOptions &options,
                       std::vector<std::string> strategies,
                       SweepResult &result, llvm::raw_ostream &diag) {
  // Plan every point on the training step (no weights are needed for that).
  auto start = std::chrono::steady_clock::now();
  LoadOptions loadOptions;
  loadOptions.bind = options.bind;
  loadOptions.scalarWeights = options.scalarWeights;
  loadOptions.initWeights = false;
  auto graph = loadModel(options.model, loadOptions);
  if (!graph)
    return graph.takeError();
  // The passes remat-run runs before remat (choosePipeline, and for the CPU
  // withCpuFusions), without it.
  std::string pipeline = isTrainingStep(**graph)
                             ? std::string("schedule")
                             : std::string(kTrainingPipeline) + ",schedule";
  if (!options.pipeline.optimizer.empty())
    pipeline += ",optimizer";
  if (options.backend == "cpu")
    pipeline = withCpuFusions(pipeline);
  auto ran = runPipeline(**graph, pipeline, options.pipeline, diag);
  if (!ran)
    return ran.takeError();
  SweepOptions sweep = options.sweep;
  sweep.strategies = std::move(strategies);
  auto rows = planSweep(**graph, sweep, result.noRematPeakBytes,
                        result.noRematPredictedSeconds);
  if (!rows)
    return rows.takeError();
  result.rows = std::move(*rows);
  double planSeconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  size_t feasible = 0;
  for (const SweepRow &row : result.rows)
    feasible += row.feasible;
  diag << "remat-sweep: planned " << result.rows.size() << " rows ("
       << feasible << " distinct plans) in "
       << llvm::format("%.1f", planSeconds) << " s\n";
  return llvm::Error::success();
}

/// The last line of a failure's message, what a row's note keeps.
std::string getLastLine(llvm::Error err) {
  std::string why = errorToString(std::move(err));
  llvm::StringRef last = llvm::StringRef(why).rtrim();
  return last.substr(last.rfind('\n') + 1).trim().str();
}

/// Measures every feasible row of \p result, options.rounds times in
/// alternating order. \returns false when interrupted.
llvm::Expected<bool> measurePoints(const SweepRunOptions &options,
                                   SweepResult &result,
                                   llvm::raw_ostream &diag) {
  OutputPaths paths{options.csvPath, options.jsonPath, options.svgPath};
  result.measured = true;
  result.backend = options.backend;
  result.threads = options.threads;
  result.steps = options.steps;
  result.rounds = options.rounds;
  result.warmup = options.warmup;
  llvm::sys::SetInterruptFunction(onInterrupt);
  std::vector<size_t> order;
  for (size_t i = 0; i < result.rows.size(); ++i)
    if (result.rows[i].feasible)
      order.push_back(i);
  // The first point runs once untimed: the first process of a sweep meets
  // a cold page cache and CPU, and would be slower than the rest.
  if (options.warmup && !order.empty()) {
    const SweepRow &first = result.rows[order.front()];
    auto warm = std::chrono::steady_clock::now();
    auto measured = measureRow(first, options);
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - warm)
                         .count();
    if (interrupted)
      llvm::consumeError(measured.takeError()); // Reported below.
    else if (measured)
      diag << "[warm-up] " << first.getLabel() << ": "
           << llvm::format("%.1f", seconds) << " s, not counted\n";
    else
      diag << "[warm-up] " << first.getLabel()
           << ": not measured: " << getLastLine(measured.takeError()) << '\n';
  }
  size_t total = order.size() * options.rounds, done = 0;
  std::string firstFailure;
  auto measureStart = std::chrono::steady_clock::now();
  for (unsigned round = 0; round < options.rounds && !interrupted; ++round) {
    for (size_t k = 0; k < order.size() && !interrupted; ++k) {
      // Odd rounds run the points in reverse: each point meets the
      // machine in a different state.
      SweepRow &row = result.rows[order[round % 2 ? order.size() - 1 - k : k]];
      auto measured = measureRow(row, options);
      if (!measured) {
        // Ctrl-C reaches remat-run too: its failure is the interruption.
        if (interrupted) {
          llvm::consumeError(measured.takeError());
          break;
        }
        // A point that cannot run here (a plan larger than the machine,
        // no device) is reported, not fatal: the others still can.
        std::string last = getLastLine(measured.takeError());
        if (firstFailure.empty())
          firstFailure = "point '" + row.getLabel() + "': " + last;
        if (!row.measured)
          row.note = "not measured: " + last;
        ++done;
        diag << "[" << done << "/" << total << "] " << row.getLabel()
             << ": not measured: " << last << '\n';
        continue;
      }
      row.note.clear();
      if (measured->plannedPeakBytes != row.plannedPeakBytes)
        diag << "warning: remat-run planned " << measured->plannedPeakBytes
             << " B for '" << row.getLabel() << "', the sweep "
             << row.plannedPeakBytes << " B\n";
      if (!row.measured || measured->medianSeconds < row.stepSeconds) {
        row.stepSeconds = measured->medianSeconds;
        row.measuredPeakBytes = measured->measuredPeakBytes;
        row.arenaMeasuredBytes = measured->arenaMeasuredBytes;
        row.maxRssBytes = measured->maxRssBytes;
      }
      row.roundSeconds.push_back(measured->medianSeconds);
      row.measured = true;
      ++done;
      computeRatios(result);
      double elapsed = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - measureStart)
                           .count();
      diag << "[" << done << "/" << total << "] " << row.getLabel()
           << ": planned " << formatBytes(row.plannedPeakBytes) << ", step "
           << llvm::format("%.2f", measured->medianSeconds) << " s (x"
           << llvm::format("%.2f", measured->medianSeconds /
                                       getReferenceSeconds(result))
           << ")";
      if (done < total)
        diag << ", about "
             << formatDuration(elapsed / double(done) * double(total - done))
             << " left";
      diag << '\n';
      if (auto err = writeOutputs(finishedRows(result), paths))
        return std::move(err);
    }
  }
  if (interrupted)
    diag << "remat-sweep: interrupted after " << done << " of " << total
         << " measurements; the outputs hold the rows finished so far\n";
  if (!interrupted &&
      llvm::none_of(result.rows,
                    [](const SweepRow &row) { return row.measured; }))
    return makeError("no point could be measured; the first failure: " +
                     firstFailure);
  return !interrupted;
}

} // namespace

llvm::Expected<SweepEnd> runSweep(const SweepRunOptions &options,
                                  llvm::raw_ostream &out,
                                  llvm::raw_ostream &diag) {
  auto strategies = checkOptions(options);
  if (!strategies)
    return strategies.takeError();
  SweepResult result;
  result.model = options.model;
  result.bind = options.bind;
  if (!options.fromJsonPath.empty()) {
    auto saved = readSweepJson(options.fromJsonPath);
    if (!saved)
      return saved.takeError();
    result = std::move(*saved);
  }
  if (!options.peersPath.empty()) {
    auto peers = readPeers(options.peersPath);
    if (!peers)
      return peers.takeError();
    result.peers = std::move(*peers);
  }
  if (options.fromJsonPath.empty())
    if (auto err = planPoints(options, std::move(*strategies), result, diag))
      return std::move(err);
  if (options.measure) {
    auto finished = measurePoints(options, result, diag);
    if (!finished)
      return finished.takeError();
    if (!*finished) {
      SweepResult partial = finishedRows(result);
      OutputPaths paths{options.csvPath, options.jsonPath, options.svgPath};
      if (auto err = writeOutputs(partial, paths))
        return std::move(err);
      printSweepTable(partial, out);
      return SweepEnd::Interrupted;
    }
  }
  computeRatios(result);
  noteFasterThanNone(result);
  markParetoFront(result.rows);
  printSweepTable(result, out);
  OutputPaths paths{options.csvPath, options.jsonPath, options.svgPath};
  if (auto err = writeOutputs(result, paths))
    return std::move(err);
  return SweepEnd::Finished;
}

int sweepMain(int argc, char **argv) {
  namespace cl = llvm::cl;
  cl::OptionCategory category("remat-sweep options");
  StepFlags flags(category);
  cl::opt<std::string> model(
      cl::Positional, cl::desc("<model .rir, .onnx or BERT config .json>"),
      cl::cat(category));
  cl::opt<std::string> budgetsFlag(
      "budgets",
      cl::desc("Budgets for chain-dp, selective and auto: percentages of the "
               "planned peak without remat, byte sizes, or min (each "
               "strategy's smallest planned peak)"),
      cl::init("100%,80%,60%,40%,30%,20%,min"), cl::cat(category));
  static const std::string strategiesHelp =
      "Strategies to sweep (none is always added: every ratio is relative "
      "to it); none, every-layer and sqrt are one point each";
  static const std::string allStrategies =
      llvm::join(passes::recompute::getStrategyNames(), ",");
  cl::opt<std::string> strategiesFlag("strategies", cl::desc(strategiesHelp),
                                      cl::init(allStrategies),
                                      cl::cat(category));
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
      cl::init(2), cl::cat(category));
  cl::opt<bool> warmup(
      "warmup",
      cl::desc("Run the first point once, untimed, before the measured "
               "rounds (default true; --warmup=false skips it)"),
      cl::init(true), cl::cat(category));
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
  cl::opt<std::string> fromJson(
      "from-json",
      cl::desc("Print and draw a sweep saved by --json again, without "
               "planning or measuring (with --peers: other peers)"),
      cl::value_desc("sweep.json"), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!parseCommandLine(
          argc, argv, "remat-sweep",
          "remat-sweep: the memory/time trade-off of every remat strategy "
          "and budget\n"))
    return 1;

  if (auto err = flags.validate())
    return reportError(std::move(err));

  SweepRunOptions options;
  options.model = model;
  options.bind = flags.bind;
  options.scalarWeights = flags.scalarWeights;
  options.sweep.strategies = splitList(strategiesFlag);
  options.sweep.budgets = splitList(budgetsFlag);
  // "80%,,min" is a typo, not two budgets: splitList() would drop the gap.
  if (!llvm::StringRef(budgetsFlag.getValue()).trim().empty())
    for (llvm::StringRef item : llvm::split(budgetsFlag.getValue(), ','))
      if (item.trim().empty())
        return reportError(makeError("--budgets: an entry of '" +
                                     budgetsFlag.getValue() + "' is empty"));
  options.sweep.costProfile = flags.costProfile;
  options.maxMemory = flags.maxMemory;
  options.pipeline.unusedWeights = flags.unusedWeights;
  options.pipeline.freeze = flags.freeze;
  options.pipeline.paddingIdx = flags.paddingIdx;
  options.pipeline.optimizer = flags.optimizer;
  options.pipeline.optimizerOptions = flags.getOptimizerOptions();
  options.measure = measure;
  options.backend = backend;
  options.steps = steps;
  options.threads = threads;
  options.rounds = rounds;
  options.warmup = warmup;
  options.csvPath = csvPath;
  options.jsonPath = jsonPath;
  options.svgPath = svgPath;
  options.peersPath = peersPath;
  options.fromJsonPath = fromJson;
  // remat-run is installed beside remat-sweep.
  std::string self = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&sweepMain));
  llvm::SmallString<256> runTool = llvm::sys::path::parent_path(self);
  llvm::sys::path::append(runTool, "remat-run");
  options.runTool = runTool.str().str();

  auto end = runSweep(options, llvm::outs(), llvm::errs());
  if (!end)
    return reportError(end.takeError());
  return *end == SweepEnd::Interrupted ? 130 : 0;
}

} // namespace remat::driver
