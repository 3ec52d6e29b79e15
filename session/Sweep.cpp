//===- session/Sweep.cpp - The memory/time trade-off curve ----------------===//
#include "session/Sweep.h"

#include "ir/Limits.h"
#include "ir/Support.h"
#include "passes/Pass.h"
#include "passes/remat/Solver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace remat::session {

using namespace passes::recompute;

std::string SweepRow::getLabel() const {
  if (budget.empty())
    return strategy;
  return strategy + " @ " + budget;
}

double SweepRow::getSpreadSeconds() const {
  if (roundSeconds.size() < 2)
    return 0;
  auto [least, most] = std::minmax_element(roundSeconds.begin(),
                                           roundSeconds.end());
  return *most - *least;
}

namespace {

std::string number(double value, unsigned digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", int(digits), value);
  return text;
}

/// What identifies a plan's rewrite: the values it drops, those it holds
/// for recompute to start from, and the inner boundaries a nested plan
/// rebuilds first (Solver::toRewrite).
std::string getPlanKey(const PlanResult &plan) {
  std::vector<std::string> drop = plan.dropNames, keep = plan.keepNames,
                           nested = plan.nestedNames;
  llvm::sort(drop);
  llvm::sort(keep);
  llvm::sort(nested);
  return llvm::join(drop, ",") + "|" + llvm::join(keep, ",") + "|" +
         llvm::join(nested, ",");
}

} // namespace

llvm::Expected<std::vector<SweepRow>> planSweep(ir::Graph &graph,
                                                const SweepOptions &options,
                                                uint64_t &noRematPeakBytes,
                                                double &noRematSeconds) {
  auto problem = prepareRematProblem(graph, options.costProfile, {});
  if (!problem)
    return problem.takeError();
  Solver &solver = *(*problem)->solver;
  noRematPeakBytes = solver.getBasePeakBytes();

  noRematSeconds = solver.getBaseSeconds();
  // The smallest planned peak each strategy reaches (its floor: what `min`
  // means for it, and what an infeasible point of it is told), each asked
  // for at most once.
  llvm::StringMap<uint64_t> floors;
  auto getFloor = [&](llvm::StringRef strategy) -> llvm::Expected<uint64_t> {
    auto known = floors.find(strategy);
    if (known != floors.end())
      return known->second;
    std::optional<Strategy> parsed = parseStrategy(strategy);
    if (!parsed)
      return makeError("unknown strategy '" + strategy + "'");
    auto smallest = solver.smallestPlanOf(*parsed);
    if (!smallest)
      return smallest.takeError();
    floors[strategy] = smallest->plannedPeakBytes;
    return smallest->plannedPeakBytes;
  };
  // The smallest any strategy reaches: auto's floor, or a swept strategy's
  // when that search found a smaller one.
  auto getAnyFloor = [&]() -> llvm::Expected<uint64_t> {
    auto any = getFloor("auto");
    if (!any)
      return any.takeError();
    uint64_t least = *any;
    for (const std::string &strategy : options.strategies) {
      auto floor = getFloor(strategy);
      if (!floor)
        return floor.takeError();
      least = std::min(least, *floor);
    }
    return least;
  };

  struct Budget {
    std::string text;
    uint64_t bytes;
  };
  // The budgets as given; `min` is resolved per strategy below.
  std::vector<Budget> budgets;
  for (const std::string &text : options.budgets) {
    if (text == "min") {
      budgets.push_back({text, 0});
      continue;
    }
    auto amount = passes::parseByteAmount(text, /*allowPercent=*/true);
    if (!amount)
      return amount.takeError();
    budgets.push_back({text, amount->resolve(noRematPeakBytes)});
  }

  std::vector<SweepRow> rows;
  llvm::StringMap<size_t> rowOfPlan;
  auto addPlan = [&](llvm::StringRef strategy, const Budget *budget,
                     const PlanResult &plan) {
    SweepRow row;
    row.strategy = strategy.str();
    if (budget) {
      row.budget = budget->text;
      row.budgetBytes = budget->bytes;
    }
    auto [it, inserted] = rowOfPlan.try_emplace(getPlanKey(plan), rows.size());
    if (!inserted) {
      rows[it->second].alsoPoints.push_back(row.getLabel());
      return;
    }
    row.plannedPeakBytes = plan.plannedPeakBytes;
    row.predictedPeakBytes = plan.estimatedPeakBytes;
    row.activationBytesKept = plan.keptStashBytes;
    row.recomputedNodes = plan.stats.clonedNodes;
    row.predictedSeconds = solver.getPredictedSeconds(plan);
    row.predictedRatio =
        noRematSeconds > 0 ? row.predictedSeconds / noRematSeconds : 1.0;
    rows.push_back(std::move(row));
  };

  for (const std::string &strategy : options.strategies) {
    std::optional<Strategy> parsed = parseStrategy(strategy);
    if (!parsed)
      return makeError("unknown strategy '" + strategy + "' (strategies: " +
                       llvm::join(getStrategyNames(), ", ") + ")");
    if (!isBudgetDriven(*parsed)) {
      auto plan = solver.solve(*parsed, std::nullopt);
      if (!plan)
        return plan.takeError();
      addPlan(strategy, nullptr, **plan);
      continue;
    }
    for (Budget budget : budgets) {
      if (budget.text == "min") {
        auto floor = getFloor(strategy);
        if (!floor)
          return floor.takeError();
        budget.bytes = *floor;
      }
      auto plan = solver.solve(*parsed, budget.bytes);
      if (!plan)
        return plan.takeError();
      if (*plan) {
        addPlan(strategy, &budget, **plan);
        continue;
      }
      auto floor = getFloor(strategy);
      if (!floor)
        return floor.takeError();
      auto anyFloor = getAnyFloor();
      if (!anyFloor)
        return anyFloor.takeError();
      SweepRow row;
      row.strategy = strategy;
      row.budget = budget.text;
      row.budgetBytes = budget.bytes;
      row.feasible = false;
      row.note = "infeasible: no plan of '" + strategy + "' fits " +
                 formatBytes(budget.bytes) + "; its smallest planned peak is " +
                 formatBytes(*floor) + " (of any strategy: " +
                 formatBytes(*anyFloor) + ")";
      rows.push_back(std::move(row));
    }
  }
  return std::move(rows);
}

void markParetoFront(std::vector<SweepRow> &rows) {
  // Once anything was measured, rows that were not (they failed to run)
  // have no figures to compare.
  bool anyMeasured = llvm::any_of(
      rows, [](const SweepRow &row) { return row.measured; });
  auto compared = [&](const SweepRow &row) {
    return row.feasible && (row.measured || !anyMeasured);
  };
  // -1 when \p a is faster than \p b, 1 when slower, 0 when neither.
  auto compareTime = [](const SweepRow &a, const SweepRow &b) {
    auto sign = [](double d) { return d < 0 ? -1 : d > 0 ? 1 : 0; };
    if (!a.measured || !b.measured)
      return sign(a.getTimeRatio() - b.getTimeRatio());
    double gap = a.stepSeconds - b.stepSeconds;
    if (std::abs(gap) > std::max(a.getSpreadSeconds(), b.getSpreadSeconds()))
      return sign(gap);
    return sign(a.predictedRatio - b.predictedRatio);
  };
  for (SweepRow &row : rows) {
    row.pareto = false;
    if (!compared(row))
      continue;
    row.pareto = llvm::none_of(rows, [&](const SweepRow &other) {
      if (&other == &row || !compared(other))
        return false;
      int time = compareTime(other, row);
      bool noWorse = other.getPeakBytes() <= row.getPeakBytes() && time <= 0;
      bool better = other.getPeakBytes() < row.getPeakBytes() || time < 0;
      return noWorse && better;
    });
  }
}

double getReferenceSeconds(const SweepResult &result) {
  for (const SweepRow &row : result.rows)
    if (row.strategy == "none" && row.feasible && row.measured)
      return row.stepSeconds;
  return result.noRematPredictedSeconds;
}

void noteFasterThanNone(SweepResult &result) {
  const SweepRow *none = nullptr;
  for (const SweepRow &row : result.rows)
    if (row.strategy == "none" && row.feasible && row.measured)
      none = &row;
  if (!none)
    return;
  for (SweepRow &row : result.rows) {
    // A measured row's note is only this one: set afresh every time.
    if (row.measured)
      row.note.clear();
    if (&row == none || !row.measured || row.stepSeconds >= none->stepSeconds)
      continue;
    double gap = none->stepSeconds - row.stepSeconds;
    double spread = std::max(row.getSpreadSeconds(), none->getSpreadSeconds());
    std::string text = "faster than none by " + number(gap * 1e3, 0) + " ms";
    if (row.roundSeconds.size() < 2 || none->roundSeconds.size() < 2)
      text += " in one round (no spread to compare with)";
    else if (gap <= spread)
      text += ": within noise (the rounds differ by up to " +
              number(spread * 1e3, 0) + " ms)";
    else
      text += ", more than the rounds' spread (" + number(spread * 1e3, 0) +
              " ms)";
    row.note = text;
  }
}

void computeRatios(SweepResult &result) {
  double reference = getReferenceSeconds(result);
  for (SweepRow &row : result.rows)
    if (row.measured)
      row.stepRatio = reference > 0 ? row.stepSeconds / reference : 0;
  for (PeerPoint &peer : result.peers)
    peer.timeRatio = reference > 0 ? peer.stepSeconds / reference : 0;
}

llvm::Expected<std::vector<PeerPoint>> readPeers(llvm::StringRef path) {
  auto buffer = ir::readInputFile(path, /*allowStdin=*/false, /*isText=*/true);
  if (!buffer)
    return makeError("peers file: " + errorToString(buffer.takeError()));
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  if (lines.empty())
    return makeError("peers file '" + path + "' is empty; it needs a header "
                     "with the columns label, peak_bytes, step_seconds");
  llvm::SmallVector<llvm::StringRef> header;
  lines[0].trim().split(header, ',');
  int labelColumn = -1, peakColumn = -1, secondsColumn = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    llvm::StringRef name = header[i].trim();
    if (name == "label")
      labelColumn = int(i);
    else if (name == "peak_bytes")
      peakColumn = int(i);
    else if (name == "step_seconds")
      secondsColumn = int(i);
  }
  std::vector<std::string> missing;
  if (labelColumn < 0)
    missing.push_back("label");
  if (peakColumn < 0)
    missing.push_back("peak_bytes");
  if (secondsColumn < 0)
    missing.push_back("step_seconds");
  if (!missing.empty())
    return makeError("peers file '" + path + "' lacks the column" +
                     (missing.size() > 1 ? "s " : " ") +
                     llvm::join(missing, ", ") + " (its header: " +
                     lines[0].trim() + ")");
  std::vector<PeerPoint> peers;
  for (size_t n = 1; n < lines.size(); ++n) {
    llvm::StringRef line = lines[n].trim();
    if (line.empty())
      continue;
    llvm::SmallVector<llvm::StringRef> cells;
    line.split(cells, ',');
    std::string where =
        (path + ":" + llvm::Twine(unsigned(n + 1))).str();
    if (cells.size() != header.size())
      return makeError(where + ": " + llvm::Twine(unsigned(cells.size())) +
                       " cells, the header has " +
                       llvm::Twine(unsigned(header.size())));
    PeerPoint peer;
    peer.label = cells[size_t(labelColumn)].trim().str();
    double peak = 0;
    if (cells[size_t(peakColumn)].trim().getAsDouble(peak) || peak <= 0 ||
        peak > 1e18)
      return makeError(where + ": peak_bytes '" +
                       cells[size_t(peakColumn)].trim() +
                       "' is not a positive byte count");
    peer.peakBytes = uint64_t(peak);
    if (cells[size_t(secondsColumn)].trim().getAsDouble(peer.stepSeconds) ||
        !(peer.stepSeconds > 0) || !std::isfinite(peer.stepSeconds))
      return makeError(where + ": step_seconds '" +
                       cells[size_t(secondsColumn)].trim() +
                       "' is not a positive number");
    peers.push_back(std::move(peer));
  }
  return std::move(peers);
}

llvm::Expected<SweepResult> readSweepJson(llvm::StringRef path) {
  auto buffer = ir::readInputFile(path, /*allowStdin=*/false, /*isText=*/true);
  if (!buffer)
    return makeError("sweep file: " + errorToString(buffer.takeError()));
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return makeError("sweep file '" + path +
                     "' is not JSON: " + errorToString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root || root->getInteger("version") != int64_t(1))
    return makeError("sweep file '" + path +
                     "' is not remat-sweep --json output (version 1)");
  // Every key read, with what it lacks named.
  std::string missing;
  auto need = [&](llvm::StringRef where, auto value, llvm::StringRef key) {
    if (!value && missing.empty())
      missing = (where + "lacks '" + key + "'").str();
    return value;
  };
  auto integer = [&](const llvm::json::Object &object, llvm::StringRef where,
                     llvm::StringRef key) -> uint64_t {
    auto value = need(where, object.getInteger(key), key);
    return value && *value > 0 ? uint64_t(*value) : 0;
  };
  auto real = [&](const llvm::json::Object &object, llvm::StringRef where,
                  llvm::StringRef key) -> double {
    auto value = need(where, object.getNumber(key), key);
    return value ? *value : 0;
  };
  auto text = [&](const llvm::json::Object &object, llvm::StringRef where,
                  llvm::StringRef key) -> std::string {
    auto value = need(where, object.getString(key), key);
    return value ? value->str() : std::string();
  };
  auto flag = [&](const llvm::json::Object &object, llvm::StringRef where,
                  llvm::StringRef key) -> bool {
    auto value = need(where, object.getBoolean(key), key);
    return value && *value;
  };
  SweepResult result;
  result.model = text(*root, "it ", "model");
  result.bind = text(*root, "it ", "bind");
  result.noRematPeakBytes = integer(*root, "it ", "no_remat_planned_peak_bytes");
  result.noRematPredictedSeconds =
      real(*root, "it ", "no_remat_predicted_seconds");
  result.measured = flag(*root, "it ", "measured");
  if (result.measured) {
    result.backend = text(*root, "it ", "backend");
    result.threads = unsigned(integer(*root, "it ", "threads"));
    result.steps = unsigned(integer(*root, "it ", "steps"));
    result.rounds = unsigned(integer(*root, "it ", "rounds"));
    result.warmup = root->getBoolean("warmup").getValueOr(false);
  }
  const llvm::json::Array *rows = need("it ", root->getArray("rows"), "rows");
  for (size_t i = 0; rows && i < rows->size(); ++i) {
    const llvm::json::Object *object = (*rows)[i].getAsObject();
    std::string where = "row " + std::to_string(i + 1) + " ";
    if (!object) {
      missing = where + "is not an object";
      break;
    }
    SweepRow row;
    row.strategy = text(*object, where, "strategy");
    row.feasible = flag(*object, where, "feasible");
    if (auto budget = object->getString("budget")) {
      row.budget = budget->str();
      row.budgetBytes = integer(*object, where, "budget_bytes");
    }
    if (const llvm::json::Array *also = object->getArray("also"))
      for (const llvm::json::Value &point : *also)
        if (auto label = point.getAsString())
          row.alsoPoints.push_back(label->str());
    if (auto note = object->getString("note"))
      row.note = note->str();
    if (row.feasible) {
      row.plannedPeakBytes = integer(*object, where, "planned_peak_bytes");
      row.predictedPeakBytes = integer(*object, where, "predicted_peak_bytes");
      row.activationBytesKept =
          integer(*object, where, "activation_bytes_kept");
      row.recomputedNodes =
          unsigned(integer(*object, where, "recomputed_nodes"));
      row.predictedSeconds = real(*object, where, "predicted_seconds");
      row.predictedRatio = real(*object, where, "predicted_ratio");
    }
    if (row.feasible && object->get("step_seconds")) {
      row.measured = true;
      row.measuredPeakBytes = integer(*object, where, "measured_peak_bytes");
      row.arenaMeasuredBytes = integer(*object, where, "arena_measured_bytes");
      row.maxRssBytes = integer(*object, where, "max_rss_bytes");
      row.stepSeconds = real(*object, where, "step_seconds");
      if (const llvm::json::Array *rounds = object->getArray("round_seconds"))
        for (const llvm::json::Value &seconds : *rounds)
          if (auto value = seconds.getAsNumber())
            row.roundSeconds.push_back(*value);
      if (row.roundSeconds.empty())
        row.roundSeconds.push_back(row.stepSeconds);
    }
    result.rows.push_back(std::move(row));
  }
  if (const llvm::json::Array *peers = root->getArray("peers"))
    for (const llvm::json::Value &value : *peers)
      if (const llvm::json::Object *object = value.getAsObject()) {
        PeerPoint peer;
        peer.label = text(*object, "a peer ", "label");
        peer.peakBytes = integer(*object, "a peer ", "peak_bytes");
        peer.stepSeconds = real(*object, "a peer ", "step_seconds");
        result.peers.push_back(std::move(peer));
      }
  if (!missing.empty())
    return makeError("sweep file '" + path + "': " + missing);
  return std::move(result);
}

namespace {

/// A CSV cell: quoted when it holds a comma or a quote.
std::string csvCell(llvm::StringRef text) {
  if (!text.contains(',') && !text.contains('"'))
    return text.str();
  std::string out = "\"";
  for (char c : text) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
}

} // namespace

std::string getSweepCsv(const SweepResult &result) {
  std::string csv =
      "point,strategy,budget,budget_bytes,feasible,also,planned_peak_bytes,"
      "predicted_peak_bytes,activation_bytes_kept,recomputed_nodes,"
      "predicted_seconds,predicted_ratio,measured_peak_bytes,"
      "arena_measured_bytes,max_rss_bytes,step_seconds,step_ratio,rounds,"
      "step_spread_seconds,pareto,note\n";
  for (const SweepRow &row : result.rows) {
    std::vector<std::string> cells = {
        csvCell(row.getLabel()), row.strategy, csvCell(row.budget),
        row.budget.empty() ? "" : std::to_string(row.budgetBytes),
        row.feasible ? "1" : "0", csvCell(llvm::join(row.alsoPoints, "; "))};
    if (row.feasible) {
      cells.push_back(std::to_string(row.plannedPeakBytes));
      cells.push_back(std::to_string(row.predictedPeakBytes));
      cells.push_back(std::to_string(row.activationBytesKept));
      cells.push_back(std::to_string(row.recomputedNodes));
      cells.push_back(number(row.predictedSeconds, 6));
      cells.push_back(number(row.predictedRatio, 4));
    } else {
      cells.insert(cells.end(), 6, "");
    }
    if (row.measured) {
      cells.push_back(std::to_string(row.measuredPeakBytes));
      cells.push_back(std::to_string(row.arenaMeasuredBytes));
      cells.push_back(std::to_string(row.maxRssBytes));
      cells.push_back(number(row.stepSeconds, 6));
      cells.push_back(number(row.stepRatio, 4));
      cells.push_back(std::to_string(row.roundSeconds.size()));
      cells.push_back(number(row.getSpreadSeconds(), 6));
    } else {
      cells.insert(cells.end(), 7, "");
    }
    cells.push_back(row.feasible ? (row.pareto ? "1" : "0") : "");
    cells.push_back(csvCell(row.note));
    csv += llvm::join(cells, ",") + "\n";
  }
  return csv;
}

llvm::json::Object getSweepJson(const SweepResult &result) {
  llvm::json::Array rows;
  for (const SweepRow &row : result.rows) {
    llvm::json::Array also;
    for (const std::string &point : row.alsoPoints)
      also.push_back(point);
    llvm::json::Object object{{"point", row.getLabel()},
                              {"strategy", row.strategy},
                              {"feasible", row.feasible},
                              {"also", std::move(also)}};
    if (!row.budget.empty()) {
      object["budget"] = row.budget;
      object["budget_bytes"] = int64_t(row.budgetBytes);
    }
    if (!row.feasible) {
      object["note"] = row.note;
      rows.push_back(std::move(object));
      continue;
    }
    object["planned_peak_bytes"] = int64_t(row.plannedPeakBytes);
    object["predicted_peak_bytes"] = int64_t(row.predictedPeakBytes);
    object["activation_bytes_kept"] = int64_t(row.activationBytesKept);
    object["recomputed_nodes"] = int64_t(row.recomputedNodes);
    object["predicted_seconds"] = row.predictedSeconds;
    object["predicted_ratio"] = row.predictedRatio;
    if (row.measured) {
      object["measured_peak_bytes"] = int64_t(row.measuredPeakBytes);
      object["arena_measured_bytes"] = int64_t(row.arenaMeasuredBytes);
      object["max_rss_bytes"] = int64_t(row.maxRssBytes);
      object["step_seconds"] = row.stepSeconds;
      object["step_ratio"] = row.stepRatio;
      llvm::json::Array rounds;
      for (double seconds : row.roundSeconds)
        rounds.push_back(seconds);
      object["round_seconds"] = std::move(rounds);
      object["step_spread_seconds"] = row.getSpreadSeconds();
    }
    object["pareto"] = row.pareto;
    if (!row.note.empty())
      object["note"] = row.note;
    rows.push_back(std::move(object));
  }
  llvm::json::Array peers;
  for (const PeerPoint &peer : result.peers)
    peers.push_back(llvm::json::Object{{"label", peer.label},
                                       {"peak_bytes", int64_t(peer.peakBytes)},
                                       {"step_seconds", peer.stepSeconds},
                                       {"time_ratio", peer.timeRatio}});
  llvm::json::Object root{
      {"version", 1},
      {"model", result.model},
      {"bind", result.bind},
      {"no_remat_planned_peak_bytes", int64_t(result.noRematPeakBytes)},
      {"no_remat_predicted_seconds", result.noRematPredictedSeconds},
      {"measured", result.measured},
      {"rows", std::move(rows)},
      {"peers", std::move(peers)}};
  if (result.measured) {
    root["backend"] = result.backend;
    root["threads"] = int64_t(result.threads);
    root["steps"] = int64_t(result.steps);
    root["rounds"] = int64_t(result.rounds);
    root["warmup"] = result.warmup;
  }
  return root;
}

void printSweepTable(const SweepResult &result, llvm::raw_ostream &os) {
  os << "remat-sweep: " << result.model;
  if (!result.bind.empty())
    os << " (" << result.bind << ")";
  os << ": no remat plans " << formatBytes(result.noRematPeakBytes)
     << ", predicted step "
     << llvm::format("%.1f", result.noRematPredictedSeconds * 1e3) << " ms\n";
  if (result.measured) {
    std::string threads =
        result.threads ? std::to_string(result.threads) : std::string("all");
    os << "measured: " << result.backend << ", " << threads
       << (result.threads == 1 ? " thread" : " threads")
       << "; each step time is the best of " << result.rounds
       << (result.rounds == 1 ? " round" : " alternating rounds") << " ("
       << (result.warmup ? "after one" : "no") << " untimed warm-up run), "
       << "a round the median of " << result.steps
       << (result.steps == 1 ? " step" : " steps")
       << "; spread: the slowest round less the fastest\n";
  }
  size_t width = 5;
  for (const SweepRow &row : result.rows)
    width = std::max(width, row.getLabel().size());
  os << llvm::left_justify("point", unsigned(width))
     << "   planned peak  predicted x";
  if (result.measured)
    os << "  measured peak    max RSS        step    spread  measured x";
  os << "  front\n";
  for (const SweepRow &row : result.rows) {
    os << llvm::left_justify(row.getLabel(), unsigned(width));
    if (!row.feasible) {
      os << "   " << row.note << '\n';
      continue;
    }
    os << llvm::format("  %13s  %11s", formatBytes(row.plannedPeakBytes).c_str(),
                       ("x" + number(row.predictedRatio, 3)).c_str());
    if (result.measured) {
      if (row.measured)
        os << llvm::format("  %13s %10s %8.0f ms %6.0f ms %11s",
                           formatBytes(row.measuredPeakBytes).c_str(),
                           formatBytes(row.maxRssBytes).c_str(),
                           row.stepSeconds * 1e3,
                           row.getSpreadSeconds() * 1e3,
                           ("x" + number(row.stepRatio, 3)).c_str());
      else
        os << "  " << llvm::right_justify("(not measured)", 58);
    }
    os << (row.pareto ? "  *" : "   ");
    if (!row.alsoPoints.empty())
      os << "  (also " << llvm::join(row.alsoPoints, ", ") << ")";
    if (row.measured && row.roundSeconds.size() != result.rounds)
      os << "  (best of " << row.roundSeconds.size()
         << (row.roundSeconds.size() == 1 ? " round)" : " rounds)");
    if (!row.note.empty())
      os << "  " << row.note;
    os << '\n';
  }
  for (const PeerPoint &peer : result.peers)
    os << "peer " << peer.label << ": " << formatBytes(peer.peakBytes) << ", "
       << llvm::format("%.0f", peer.stepSeconds * 1e3) << " ms (x"
       << number(peer.timeRatio, 3) << " of remat's none)\n";
  os << "(* on the Pareto front: no other point is both smaller and faster; "
     << (result.measured ? "measured peaks and step times; times within "
                           "the rounds' spread are ordered by the prediction"
                         : "planned peaks and predicted times")
     << ")\n";
}

} // namespace remat::session
