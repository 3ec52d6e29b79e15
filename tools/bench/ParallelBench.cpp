//===- tools/bench/ParallelBench.cpp - The thread pool's hand-off cost ----===//
//
// Times what ThreadPoolParallelFor adds to a run of two equal chunks on two
// threads: how long after run() is called the worker starts its chunk, and
// the run's total beyond one chunk's time. Between runs the caller works
// alone for --gap microseconds, as a step's small nodes do between its
// parallel kernels.
//
//   remat-bench-parallel [--gap US] [--chunk US] [--runs N]
//
// Timings belong in benchmarks, not tests: tests/tools/bench-args.test
// checks only the arguments this takes.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Parallel.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;

namespace {

double microsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start)
      .count();
}

void busyFor(double micros) {
  Clock::time_point start = Clock::now();
  while (microsSince(start) < micros) {
  }
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[size_t(p * double(values.size() - 1))];
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  llvm::cl::opt<double> gap(
      "gap",
      llvm::cl::desc("Microseconds the caller works alone between runs "
                     "(default 20)"),
      llvm::cl::init(20));
  llvm::cl::opt<double> chunk(
      "chunk",
      llvm::cl::desc("Microseconds of each of a run's two chunks "
                     "(default 2000)"),
      llvm::cl::init(2000));
  llvm::cl::opt<unsigned> runs(
      "runs", llvm::cl::desc("Runs timed (default 500)"), llvm::cl::init(500));
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "remat-bench-parallel: the thread pool's hand-off cost\n");
  // At most a second each: a run busy-waits for them.
  constexpr double kMaxMicros = 1e6;
  auto inRange = [&](double micros) {
    return std::isfinite(micros) && micros >= 0 && micros <= kMaxMicros;
  };
  if (!inRange(gap) || !inRange(chunk) || runs == 0) {
    std::fprintf(stderr, "error: --gap and --chunk must be in [0, 1e6] us "
                         "and --runs positive\n");
    return 1;
  }
  remat::runtime::cpu::ThreadPoolParallelFor pool(2);
  std::vector<double> starts, overheads;
  for (unsigned r = 0; r < runs; ++r) {
    busyFor(gap);
    std::atomic<double> workerStart{-1};
    std::thread::id caller = std::this_thread::get_id();
    Clock::time_point start = Clock::now();
    pool.run(2, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != caller)
        workerStart = microsSince(start);
      busyFor(chunk);
    });
    overheads.push_back(microsSince(start) - chunk);
    if (workerStart >= 0)
      starts.push_back(workerStart);
  }
  std::printf("gap %.0f us, chunk %.0f us, %u runs on 2 threads; the worker "
              "ran a chunk in %zu\n",
              double(gap), double(chunk), unsigned(runs), starts.size());
  if (!starts.empty())
    std::printf("worker starts after run(): p10 %.1f  p50 %.1f  p90 %.1f us\n",
                percentile(starts, 0.1), percentile(starts, 0.5),
                percentile(starts, 0.9));
  std::printf("run beyond one chunk:      p10 %.1f  p50 %.1f  p90 %.1f us\n",
              percentile(overheads, 0.1), percentile(overheads, 0.5),
              percentile(overheads, 0.9));
  return 0;
}
