//===- tools/bench/ChainBench.cpp - Front-end throughput on long chains ---===//
//
// Generates a chain graph of N nodes as .rir text, then times parse, verify,
// `dce,cse` (with the PassManager's verification) and print, for N and 2N,
// and prints the ratio of the two totals (about 2 when everything is linear).
//
//   remat-bench-chain [--nodes N] [--repeat R]
//
// Not part of the test suite: timings belong in benchmarks, not tests.
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <string>

using namespace remat;

namespace {

/// A chain of \p numNodes nodes over f32[64]: mostly Add(prev, %x), with a
/// dead Neg every 10 nodes (for dce) and a duplicate of the previous Add
/// every 10 nodes (for cse).
std::string makeChain(int64_t numNodes) {
  std::string text;
  text.reserve(size_t(numNodes) * 40);
  llvm::raw_string_ostream os(text);
  os << "graph @chain(%x: f32[64]) {\n";
  std::string prev = "x";
  for (int64_t i = 0; i < numNodes;) {
    std::string name = ("v" + llvm::Twine(i)).str();
    os << "  %" << name << " = Add(%" << prev << ", %x) : f32[64]\n";
    ++i;
    if (i % 10 == 3 && i < numNodes) {
      os << "  %dup" << i << " = Add(%" << prev << ", %x) : f32[64]\n";
      ++i;
    }
    if (i % 10 == 7 && i < numNodes) {
      os << "  %dead" << i << " = Neg(%" << name << ") : f32[64]\n";
      ++i;
    }
    prev = name;
  }
  os << "  return %" << prev << "\n}\n";
  return text;
}

struct Times {
  double parse = 0, verify = 0, passes = 0, print = 0;
  double total() const { return parse + verify + passes + print; }
};

llvm::Expected<Times> runOnce(const std::string &text) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  Times times;
  auto t0 = Clock::now();
  auto graph = ir::parseGraph(text, "<chain>");
  if (!graph)
    return graph.takeError();
  auto t1 = Clock::now();
  if (auto err = ir::verify(**graph))
    return std::move(err);
  auto t2 = Clock::now();
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  passes::PassManager pm;
  if (auto err = passes::parsePassPipeline("dce,cse", registry, pm))
    return std::move(err);
  if (auto changed = pm.run(**graph); !changed)
    return changed.takeError();
  auto t3 = Clock::now();
  std::string printed;
  llvm::raw_string_ostream os(printed);
  ir::printGraph(**graph, os);
  os.flush();
  auto t4 = Clock::now();
  times.parse = seconds(t0, t1);
  times.verify = seconds(t1, t2);
  times.passes = seconds(t2, t3);
  times.print = seconds(t3, t4);
  return times;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  llvm::cl::opt<int64_t> numNodes("nodes", llvm::cl::desc("Chain length N"),
                                  llvm::cl::init(100000));
  llvm::cl::opt<unsigned> repeat(
      "repeat", llvm::cl::desc("Runs per size; the fastest is reported"),
      llvm::cl::init(3));
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "remat front-end chain benchmark\n");

  llvm::outs() << "chain benchmark: parse + verify + dce,cse + print, best of "
               << repeat << " runs\n";
  llvm::outs() << "     nodes     parse    verify   dce,cse     print     total\n";
  double totals[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    int64_t n = numNodes * (k + 1);
    std::string text = makeChain(n);
    Times best;
    for (unsigned r = 0; r < std::max(1u, unsigned(repeat)); ++r) {
      auto times = runOnce(text);
      if (!times) {
        llvm::errs() << "error: " << errorToString(times.takeError()) << '\n';
        return 1;
      }
      if (r == 0 || times->total() < best.total())
        best = *times;
    }
    totals[k] = best.total();
    llvm::outs() << llvm::format("%10lld %8.3fs %8.3fs %8.3fs %8.3fs %8.3fs\n",
                                 (long long)n, best.parse, best.verify,
                                 best.passes, best.print, best.total());
  }
  llvm::outs() << llvm::format("time(2N) / time(N) = %.2f\n",
                               totals[1] / totals[0]);
  return 0;
}
