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
// Not part of the test suite: timings belong in benchmarks, not tests.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  double gap = 20, chunk = 2000;
  int runs = 500;
  const char *usage =
      "usage: remat-bench-parallel [--gap US] [--chunk US] [--runs N]\n";
  for (int i = 1; i < argc; i += 2) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(usage, stdout);
      return 0;
    }
    bool ok = i + 1 < argc;
    if (ok && !std::strcmp(argv[i], "--gap"))
      gap = std::atof(argv[i + 1]);
    else if (ok && !std::strcmp(argv[i], "--chunk"))
      chunk = std::atof(argv[i + 1]);
    else if (ok && !std::strcmp(argv[i], "--runs") &&
             std::atoi(argv[i + 1]) > 0)
      runs = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "error: bad argument '%s'\n%s", argv[i], usage);
      return 1;
    }
  }
  remat::runtime::cpu::ThreadPoolParallelFor pool(2);
  std::vector<double> starts, overheads;
  for (int r = 0; r < runs; ++r) {
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
  std::printf("gap %.0f us, chunk %.0f us, %d runs on 2 threads; the worker "
              "ran a chunk in %zu\n",
              gap, chunk, runs, starts.size());
  if (!starts.empty())
    std::printf("worker starts after run(): p10 %.1f  p50 %.1f  p90 %.1f us\n",
                percentile(starts, 0.1), percentile(starts, 0.5),
                percentile(starts, 0.9));
  std::printf("run beyond one chunk:      p10 %.1f  p50 %.1f  p90 %.1f us\n",
              percentile(overheads, 0.1), percentile(overheads, 0.5),
              percentile(overheads, 0.9));
  return 0;
}
