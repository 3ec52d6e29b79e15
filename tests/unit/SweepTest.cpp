//===- tests/unit/SweepTest.cpp - remat-sweep's front and files -----------===//
//
// The Pareto front on hand-made rows (ties, infeasible rows, measured
// figures taking over from the predicted ones), the CSV's quoting, and the
// peers file's errors.
//
//===----------------------------------------------------------------------===//
#include "driver/Plots.h"
#include "session/Sweep.h"
#include "ir/Support.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

using namespace remat;
using namespace remat::driver;
using namespace remat::session;

namespace {

SweepRow makeRow(std::string strategy, uint64_t peak, double ratio) {
  SweepRow row;
  row.strategy = std::move(strategy);
  row.plannedPeakBytes = peak;
  row.predictedRatio = ratio;
  return row;
}

std::vector<bool> front(std::vector<SweepRow> rows) {
  markParetoFront(rows);
  std::vector<bool> flags;
  for (const SweepRow &row : rows)
    flags.push_back(row.pareto);
  return flags;
}

/// Writes \p text to a temporary file. \returns its path.
std::string writeTemp(llvm::StringRef text) {
  llvm::SmallString<128> path;
  int fd;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("sweep-test", "csv", fd, path));
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << text;
  return path.str().str();
}

} // namespace

TEST_CASE("the front keeps the points no other is both smaller and faster than") {
  // (100, 1.0) none; (80, 1.1) on; (80, 1.2) dominated by (80, 1.1);
  // (60, 1.3) on; (70, 1.4) dominated by (60, 1.3).
  CHECK(front({makeRow("none", 100, 1.0), makeRow("a", 80, 1.1),
               makeRow("b", 80, 1.2), makeRow("c", 60, 1.3),
               makeRow("d", 70, 1.4)}) ==
        std::vector<bool>{true, true, false, true, false});
  // Equal points do not dominate each other.
  CHECK(front({makeRow("a", 50, 1.1), makeRow("b", 50, 1.1)}) ==
        std::vector<bool>{true, true});
  // A point both smaller and faster than the reference takes its place.
  CHECK(front({makeRow("none", 100, 1.0), makeRow("a", 90, 0.95)}) ==
        std::vector<bool>{false, true});
}

TEST_CASE("infeasible rows are never on the front and hide nothing") {
  std::vector<SweepRow> rows = {makeRow("none", 100, 1.0),
                                makeRow("auto", 10, 1.0)};
  rows[1].feasible = false;
  markParetoFront(rows);
  CHECK(rows[0].pareto);
  CHECK(!rows[1].pareto);
}

TEST_CASE("measured figures decide the front once measured") {
  std::vector<SweepRow> rows = {makeRow("none", 100, 1.0),
                                makeRow("every-layer", 80, 1.2)};
  for (SweepRow &row : rows) {
    row.measured = true;
    row.measuredPeakBytes = row.plannedPeakBytes;
  }
  rows[0].stepSeconds = 2.0;
  rows[1].stepSeconds = 1.9; // Measured faster than none at less memory.
  SweepResult result;
  result.rows = rows;
  computeRatios(result);
  CHECK(result.rows[1].stepRatio == doctest::Approx(0.95));
  markParetoFront(result.rows);
  CHECK(!result.rows[0].pareto);
  CHECK(result.rows[1].pareto);
}

TEST_CASE("the CSV quotes cells with commas and leaves infeasible rows bare") {
  SweepResult result;
  result.rows = {makeRow("none", 100, 1.0), makeRow("auto", 0, 0)};
  result.rows[0].alsoPoints = {"auto @ 100%", "selective @ 100%"};
  result.rows[1].budget = "20%";
  result.rows[1].budgetBytes = 20;
  result.rows[1].feasible = false;
  result.rows[1].note = "infeasible: no plan, at all";
  markParetoFront(result.rows);
  std::string csv = getSweepCsv(result);
  CHECK(csv.find("\nnone,none,,,1,auto @ 100%; selective @ 100%,100,") !=
        std::string::npos);
  CHECK(csv.find("\nauto @ 20%,auto,20%,20,0,,,,,,,,,,,,,,,,\"infeasible: no "
                 "plan, at all\"\n") != std::string::npos);
}

TEST_CASE("a peers file is read by its header's columns") {
  std::string path = writeTemp("step_seconds,label,peak_bytes,extra\n"
                               "2.5,pytorch eager,1000,x\n\n"
                               "3,pytorch checkpoint,800,y\n");
  auto peers = readPeers(path);
  REQUIRE(peers);
  REQUIRE(peers->size() == 2);
  CHECK((*peers)[1].label == "pytorch checkpoint");
  CHECK((*peers)[1].peakBytes == 800);
  CHECK((*peers)[1].stepSeconds == 3);
  llvm::sys::fs::remove(path);
}

TEST_CASE("a peers file with a missing column or a bad cell is refused") {
  auto check = [](llvm::StringRef text, llvm::StringRef expected) {
    std::string path = writeTemp(text);
    auto peers = readPeers(path);
    REQUIRE(!peers);
    std::string message = errorToString(peers.takeError());
    CHECK(llvm::StringRef(message).contains(expected));
    llvm::sys::fs::remove(path);
  };
  check("label,peak_bytes\nx,1\n", "lacks the column step_seconds");
  check("label,peak_bytes,step_seconds\nx,1\n", ":2: 2 cells, the header has 3");
  check("label,peak_bytes,step_seconds\nx,1,-2\n",
        ":2: step_seconds '-2' is not a positive number");
  check("", "is empty");
}

TEST_CASE("once anything is measured, a row that failed to run is off the front") {
  // every-layer could not run: its planned figures would otherwise put it on
  // the front next to none's measured ones.
  std::vector<SweepRow> rows = {makeRow("none", 100, 1.0),
                                makeRow("every-layer", 50, 1.1)};
  rows[0].measured = true;
  rows[0].measuredPeakBytes = 100;
  rows[0].stepSeconds = 2;
  rows[0].stepRatio = 1;
  rows[1].note = "not measured: error: no GPU";
  markParetoFront(rows);
  CHECK(rows[0].pareto);
  CHECK(!rows[1].pareto);
  SweepResult result;
  result.measured = true;
  result.rows = rows;
  std::string svg = getSweepSvg(result);
  CHECK(svg.find("<title>none:") != std::string::npos);
  CHECK(svg.find("<title>every-layer") == std::string::npos);
  CHECK(getSweepCsv(result).find(",not measured: error: no GPU\n") !=
        std::string::npos);
}

namespace {

/// A measured row: \p rounds are its rounds' median steps, the best kept.
SweepRow makeMeasured(std::string strategy, uint64_t peak, double predicted,
                      std::vector<double> rounds) {
  SweepRow row = makeRow(std::move(strategy), peak, predicted);
  row.measured = true;
  row.measuredPeakBytes = peak;
  row.roundSeconds = rounds;
  row.stepSeconds = *std::min_element(rounds.begin(), rounds.end());
  return row;
}

} // namespace

TEST_CASE("a point faster than none within the rounds' spread does not push "
          "none off the front, and says so") {
  // none's rounds 2.0 and 2.2 s; auto's best 1.95 s is 50 ms faster, inside
  // the 200 ms spread: the cost model (x1.2) orders them, so none stays.
  SweepResult result;
  result.measured = true;
  result.rounds = 2;
  result.rows = {makeMeasured("none", 100, 1.0, {2.0, 2.2}),
                 makeMeasured("auto", 60, 1.2, {1.95, 2.1})};
  result.rows[1].budget = "40%";
  computeRatios(result);
  noteFasterThanNone(result);
  markParetoFront(result.rows);
  CHECK(result.rows[0].pareto);
  CHECK(result.rows[1].pareto);
  CHECK(result.rows[0].getSpreadSeconds() == doctest::Approx(0.2));
  CHECK(result.rows[1].note ==
        "faster than none by 50 ms: within noise (the rounds differ by up to "
        "200 ms)");
  std::string table;
  llvm::raw_string_ostream os(table);
  printSweepTable(result, os);
  os.flush();
  CHECK(table.find("each step time is the best of 2 alternating rounds") !=
        std::string::npos);
  CHECK(table.find("200 ms") != std::string::npos);
}

TEST_CASE("a point faster than none by more than the spread takes its place "
          "and says by how much") {
  SweepResult result;
  result.measured = true;
  result.rounds = 2;
  result.rows = {makeMeasured("none", 100, 1.0, {2.0, 2.05}),
                 makeMeasured("auto", 60, 1.2, {1.5, 1.52})};
  computeRatios(result);
  noteFasterThanNone(result);
  markParetoFront(result.rows);
  CHECK(!result.rows[0].pareto);
  CHECK(result.rows[1].pareto);
  CHECK(result.rows[1].note == "faster than none by 500 ms, more than the "
                               "rounds' spread (50 ms)");
  // Measured once, there is no spread to compare with.
  result.rows = {makeMeasured("none", 100, 1.0, {2.0}),
                 makeMeasured("auto", 60, 1.2, {1.9})};
  noteFasterThanNone(result);
  CHECK(result.rows[1].note ==
        "faster than none by 100 ms in one round (no spread to compare with)");
  // A note from an earlier round goes once the point is no longer faster.
  result.rows[1].roundSeconds = {1.9, 2.5};
  result.rows[1].stepSeconds = 2.5;
  noteFasterThanNone(result);
  CHECK(result.rows[1].note.empty());
}

TEST_CASE("a sweep saved as JSON reads back with its rows and rounds") {
  SweepResult result;
  result.model = "m.json";
  result.bind = "batch=4";
  result.noRematPeakBytes = 100;
  result.noRematPredictedSeconds = 1.5;
  result.measured = true;
  result.backend = "cpu";
  result.threads = 2;
  result.steps = 3;
  result.rounds = 2;
  result.warmup = true;
  result.rows = {makeMeasured("none", 100, 1.0, {2.0, 2.2}),
                 makeRow("auto", 0, 0)};
  result.rows[0].alsoPoints = {"auto @ 100%"};
  result.rows[1].budget = "20%";
  result.rows[1].budgetBytes = 20;
  result.rows[1].feasible = false;
  result.rows[1].note = "infeasible: no plan";
  result.peers = {PeerPoint{"pytorch eager", 300, 2.5, 0}};
  computeRatios(result);
  markParetoFront(result.rows);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(getSweepJson(result));
  os.flush();
  std::string path = writeTemp(text);
  auto read = readSweepJson(path);
  llvm::sys::fs::remove(path);
  REQUIRE(read);
  computeRatios(*read);
  markParetoFront(read->rows);
  CHECK(getSweepCsv(*read) == getSweepCsv(result));
  CHECK(read->warmup);
  CHECK(read->rows[0].roundSeconds == std::vector<double>{2.0, 2.2});
  REQUIRE(read->peers.size() == 1);
  CHECK(read->peers[0].timeRatio == doctest::Approx(1.25));

  std::string bad = writeTemp("{\"version\": 1, \"model\": \"m\"}");
  auto refused = readSweepJson(bad);
  llvm::sys::fs::remove(bad);
  REQUIRE(!refused);
  CHECK(errorToString(refused.takeError()).find("lacks 'bind'") !=
        std::string::npos);
}
