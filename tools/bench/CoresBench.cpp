//===- tools/bench/CoresBench.cpp - What N threads get from the host ------===//
//
// Note [The host's cores]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A VM's vCPUs are threads of the host, and the host decides where they
// run. On the 2-core Zen 3 VM of docs/benchmarks.md (CPU speed), an FMA
// loop in registers (no memory, nothing shared) on two threads at once
// usually ran as fast on each as on one thread alone, but in some
// half-second windows both ran at half rate, with no steal time in
// /proc/stat: both vCPUs ran as two threads on one physical core's SMT
// siblings do. In such a window no program gets more
// from two threads than from one, and a 1 -> 2 thread scaling figure
// measures the host.
//
// This measures it: each round runs the loop on one thread for --ms
// milliseconds, then on --threads threads at once for as long (the order
// alternates by round), and prints what the threads did together over
// what one did alone, the host's capacity for this many threads in that
// round: about --threads when each thread has a core, less when threads
// share one, more when the one-thread side ran slow (the host slows a
// single busy vCPU too, less often). tools/bench/cpu_speed.py runs it
// between its measurements so that each figure is printed with the
// host's state around it.
//
//   remat-bench-cores [--threads 2] [--rounds 10] [--ms 250] [--json FILE]
//
// The loop is 12 independent FMA chains of 8 floats (AVX2 + FMA, on any
// x86-64 CPU that has them; AVX-512 CPUs run it too: the figure is a
// ratio) or, elsewhere, a portable loop of 16 multiply-add chains of
// doubles (whatever the compiler makes of them: it may not fill a wide
// core's units, and so may show less of the sharing). Timings belong in
// benchmarks, not tests: tests/tools/bench-args.test checks only the
// arguments and the report's form.
//
//===----------------------------------------------------------------------===//

#include "ir/OutputFile.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define REMAT_HAVE_AVX2_LOOP 1
#endif

using Clock = std::chrono::steady_clock;

namespace {

/// Floating-point operations of one iteration of a loop.
struct Loop {
  const char *name;
  double flopsPerIteration;
  /// Runs iterations in blocks until \p deadline; \returns how many.
  int64_t (*runUntil)(Clock::time_point deadline);
};

/// Iterations between two reads of the clock: about 0.03 ms of the AVX2
/// loop.
constexpr int64_t kBlock = 1 << 14;

#ifdef REMAT_HAVE_AVX2_LOOP
__attribute__((target("avx2,fma"))) int64_t
avx2Until(Clock::time_point deadline) {
  __m256 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i)
    acc[i] = _mm256_set1_ps(0.001f * float(i));
  // x -> x * b + c converges to c / (1 - b) = 0.01: no overflow, no
  // subnormal.
  const __m256 b = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-6f);
  int64_t iterations = 0;
  do {
    for (int64_t it = 0; it < kBlock; ++it)
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i)
        acc[i] = _mm256_fmadd_ps(acc[i], b, c);
    iterations += kBlock;
  } while (Clock::now() < deadline);
  // Keep the chains live.
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i)
    sum = _mm256_add_ps(sum, acc[i]);
  asm volatile("" : : "x"(sum));
  return iterations;
}
#endif

volatile double portableSink;

int64_t portableUntil(Clock::time_point deadline) {
  double acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i)
    acc[i] = 0.001 * i;
  int64_t iterations = 0;
  do {
    for (int64_t it = 0; it < kBlock; ++it)
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        acc[i] = acc[i] * 0.9999 + 1e-6;
    iterations += kBlock;
  } while (Clock::now() < deadline);
  double sum = 0;
  for (double x : acc)
    sum += x;
  portableSink = sum; // keeps the chains live
  return iterations;
}

Loop chooseLoop() {
#ifdef REMAT_HAVE_AVX2_LOOP
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"AVX2 FMA loop", 12 * 8 * 2, avx2Until};
#endif
  return {"portable loop", 16 * 2, portableUntil};
}

/// Runs \p loop on \p threads threads at once for \p ms milliseconds.
/// \returns each thread's GFLOP/s over the run's wall time, from the start
/// signal until the last thread is done: a thread that had to wait for a
/// core counts its wait (its own time in the loop would not).
std::vector<double> runTogether(const Loop &loop, unsigned threads, double ms) {
  std::vector<int64_t> iterations(threads);
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point deadline;
  auto body = [&](unsigned index) {
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) {
    }
    iterations[index] = loop.runUntil(deadline);
  };
  std::vector<std::thread> workers;
  for (unsigned i = 1; i < threads; ++i)
    workers.emplace_back(body, i);
  while (ready.load() != threads - 1)
    std::this_thread::yield();
  Clock::time_point start = Clock::now();
  deadline = start + std::chrono::microseconds(int64_t(ms * 1000));
  go.store(true, std::memory_order_release);
  body(0);
  for (std::thread &worker : workers)
    worker.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> rates;
  for (int64_t count : iterations)
    rates.push_back(double(count) * loop.flopsPerIteration / seconds / 1e9);
  return rates;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  llvm::cl::opt<unsigned> threads(
      "threads", llvm::cl::desc("Threads run together (default 2)"),
      llvm::cl::init(2));
  llvm::cl::opt<unsigned> rounds(
      "rounds", llvm::cl::desc("Rounds, each one thread then all (default 10)"),
      llvm::cl::init(10));
  llvm::cl::opt<double> ms(
      "ms",
      llvm::cl::desc("Milliseconds of each side of a round (default 250)"),
      llvm::cl::init(250));
  llvm::cl::opt<std::string> jsonPath(
      "json", llvm::cl::desc("Write every round's figures here as JSON"),
      llvm::cl::value_desc("file"));
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "remat-bench-cores: what N threads get from the host, over one\n");
  if (threads < 2 || threads > 256 || rounds == 0 || rounds > 10000 ||
      !(ms >= 1 && ms <= 10000)) {
    std::fprintf(stderr, "error: --threads must be in [2, 256], --rounds in "
                         "[1, 10000] and --ms in [1, 10000]\n");
    return 1;
  }
  // A path that cannot be written fails now, not after the rounds.
  if (jsonPath == "-") {
    std::fprintf(stderr, "error: --json: the report goes to stdout; give a "
                         "file\n");
    return 1;
  }
  if (llvm::Error err = remat::checkOutputPath("--json", jsonPath)) {
    llvm::errs() << "error: " << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  Loop loop = chooseLoop();
  // 90% of the threads: cpu_speed.py's scaling goal (1.8x on 2 threads).
  double under = 0.9 * threads;
  std::printf("%s, %u rounds of %g ms: one thread, then %u threads at "
              "once (GFLOP/s of wall time; together = their sum over one)\n",
              loop.name, unsigned(rounds), double(ms), unsigned(threads));
  llvm::json::Array roundsJson;
  std::vector<double> capacities;
  for (unsigned r = 0; r < rounds; ++r) {
    // Alternate which side runs first.
    double one = r % 2 == 0 ? runTogether(loop, 1, ms)[0] : 0;
    std::vector<double> each = runTogether(loop, threads, ms);
    if (r % 2 == 1)
      one = runTogether(loop, 1, ms)[0];
    double capacity = std::accumulate(each.begin(), each.end(), 0.0) / one;
    capacities.push_back(capacity);
    std::printf("round %u  one %6.1f  each", r, one);
    for (double rate : each)
      std::printf(" %6.1f", rate);
    std::printf("  together %.2fx\n", capacity);
    std::fflush(stdout);
    roundsJson.push_back(llvm::json::Object{{"one", one},
                                            {"each", llvm::json::Array(each)},
                                            {"together", capacity}});
  }
  auto [lo, hi] = std::minmax_element(capacities.begin(), capacities.end());
  double mid = median(capacities);
  size_t below = std::count_if(capacities.begin(), capacities.end(),
                               [&](double c) { return c < under; });
  std::printf("together: min %.2fx  median %.2fx  max %.2fx  (%zu of %u "
              "rounds under %.2fx)\n",
              *lo, mid, *hi, below, unsigned(rounds), under);
  if (!jsonPath.empty()) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::formatv("{0:2}\n", llvm::json::Value(llvm::json::Object{
                                       {"loop", loop.name},
                                       {"threads", int64_t(threads)},
                                       {"ms", double(ms)},
                                       {"rounds", std::move(roundsJson)},
                                       {"min", *lo},
                                       {"median", mid},
                                       {"max", *hi}}));
    if (llvm::Error err = remat::writeOutputFile(jsonPath, os.str())) {
      llvm::errs() << "error: " << llvm::toString(std::move(err)) << "\n";
      return 1;
    }
  }
  return 0;
}
