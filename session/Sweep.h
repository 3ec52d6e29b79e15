//===- session/Sweep.h - The memory/time trade-off curve --------*- C++ -*-===//
//
// remat-sweep's library: every (strategy, budget) point of one training
// step planned by the remat solver, the points that land on the same plan
// merged, the Pareto front marked, and the curve written as a table, CSV
// and JSON. Measuring a point runs remat-run in a process of its own and the
// SVG plot is drawn by the tool (driver/SweepDriver.cpp, driver/Plots.h);
// this file only plans and reports.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_SESSION_SWEEP_H
#define REMAT_SESSION_SWEEP_H

#include "ir/Graph.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace remat::session {

/// What to sweep.
struct SweepOptions {
  /// Strategy names; `none` is added first when absent (the reference every
  /// ratio is taken against).
  std::vector<std::string> strategies;
  /// Budget texts: "40%" (of the planned peak without remat), a byte size
  /// ("2GiB"), or "min" (each strategy's floor: the smallest planned peak
  /// a plan of that strategy reaches).
  std::vector<std::string> budgets;
  /// remat-run --profile JSON for the cost model ("" for the built-in one).
  std::string costProfile;
};

/// One row of the curve: a distinct plan with every point that landed on
/// it, or a point no plan of its strategy fits.
struct SweepRow {
  /// The first point that reached this plan: its strategy and budget ("" and
  /// 0 for a fixed strategy, which takes no budget).
  std::string strategy;
  std::string budget;
  uint64_t budgetBytes = 0;
  /// The other points that reached the same plan ("auto @ 100%").
  std::vector<std::string> alsoPoints;
  bool feasible = true;
  /// Why an infeasible point is (its strategy's floor and the smallest
  /// planned peak of any strategy), why a point was not measured, or how a
  /// point measured faster than `none` compares with the rounds' spread.
  std::string note;

  /// The solver's figures.
  uint64_t plannedPeakBytes = 0;
  uint64_t predictedPeakBytes = 0;
  uint64_t activationBytesKept = 0;
  unsigned recomputedNodes = 0;
  double predictedSeconds = 0;
  double predictedRatio = 0;

  /// remat-run's figures (with --measure): the best round's median step.
  bool measured = false;
  /// Each round's median step, in the order measured.
  std::vector<double> roundSeconds;
  uint64_t measuredPeakBytes = 0;
  uint64_t arenaMeasuredBytes = 0;
  uint64_t maxRssBytes = 0;
  double stepSeconds = 0;
  double stepRatio = 0;

  /// On the Pareto front: no other row is both smaller and faster.
  bool pareto = false;

  /// "auto @ 40%", or the strategy alone for a fixed one.
  std::string getLabel() const;
  /// The peak and relative time the front and the plot use: measured when
  /// the row was measured, else planned and predicted.
  uint64_t getPeakBytes() const {
    return measured ? measuredPeakBytes : plannedPeakBytes;
  }
  double getTimeRatio() const { return measured ? stepRatio : predictedRatio; }
  /// The largest difference between two of its rounds (0 with one round).
  double getSpreadSeconds() const;
};

/// A point measured elsewhere (tools/bench/vs_pytorch.py), drawn beside
/// remat's curve.
struct PeerPoint {
  std::string label;
  uint64_t peakBytes = 0;
  double stepSeconds = 0;
  /// Its step time relative to remat's `none` (set by computeRatios).
  double timeRatio = 0;
};

/// A whole sweep.
struct SweepResult {
  std::string model;
  std::string bind;
  uint64_t noRematPeakBytes = 0;
  double noRematPredictedSeconds = 0;
  /// Set by --measure: the backend, threads and steps a point ran with.
  bool measured = false;
  std::string backend;
  unsigned threads = 0;
  unsigned steps = 0;
  unsigned rounds = 0;
  /// One untimed run came before the first measured point.
  bool warmup = false;
  std::vector<SweepRow> rows;
  std::vector<PeerPoint> peers;
};

/// Plans every point of \p options on \p graph, a scheduled training step
/// (it is left as it was). Rows come in point order (strategies, then
/// budgets); a point whose plan an earlier row has joins that row.
llvm::Expected<std::vector<SweepRow>> planSweep(ir::Graph &graph,
                                                const SweepOptions &options,
                                                uint64_t &noRematPeakBytes,
                                                double &noRematSeconds);

/// Marks the rows on the Pareto front (feasible rows only; a row is on it
/// unless another has a peak and a time both no larger and one smaller).
/// Two measured times that differ by no more than the larger of the rows'
/// round spreads are not told apart by the measurement: the cost model's
/// predicted times order them.
void markParetoFront(std::vector<SweepRow> &rows);

/// Notes on each measured row that ran faster than `none` whether the gap
/// is within the spread between rounds (recomputing cannot make a step
/// faster, so such a gap is noise or a cache effect worth a look).
void noteFasterThanNone(SweepResult &result);

/// \returns the seconds every ratio is taken against: the `none` row's
/// measured step, or its predicted one before it is measured.
double getReferenceSeconds(const SweepResult &result);

/// Sets each measured row's and each peer's time relative to
/// getReferenceSeconds().
void computeRatios(SweepResult &result);

/// Reads a --peers CSV: a header with at least the columns label,
/// peak_bytes and step_seconds (others are ignored), then one point a line.
llvm::Expected<std::vector<PeerPoint>> readPeers(llvm::StringRef path);

/// Reads back what getSweepJson wrote (remat-sweep --json), to draw or
/// print it again without planning or measuring. Each row's ratio, note and
/// front flag are recomputed by the caller.
llvm::Expected<SweepResult> readSweepJson(llvm::StringRef path);

/// The curve as CSV (one line per row; the columns are documented in
/// docs/benchmarks.md), JSON and an aligned table.
std::string getSweepCsv(const SweepResult &result);
llvm::json::Object getSweepJson(const SweepResult &result);
void printSweepTable(const SweepResult &result, llvm::raw_ostream &os);

} // namespace remat::session

#endif // REMAT_SESSION_SWEEP_H
