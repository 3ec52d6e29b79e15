//===- fuzz/FuzzPipeline.cpp - The pass-pipeline string parser -------------===//
//
// Parses the bytes as a -p pipeline. One that parses is run on a small
// training graph; a pass may refuse it (an error), the verifier after each
// pass must not, and nothing may crash.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzPasses.h"

#include "ir/Parser.h"
#include "passes/PassManager.h"

using namespace remat;

namespace {
/// A two-layer MLP with a loss: enough for autodiff, remat and plan-memory.
const char *const kGraph = R"(graph @mlp(%x: f32[4,8], %w1: f32[8,8] weight, %w2: f32[8,2] weight, %labels: i64[4]) {
  %h = MatMul(%x, %w1) : f32[4,8]
  %r = Relu(%h) : f32[4,8]
  %o = MatMul(%r, %w2) : f32[4,2]
  %loss = SoftmaxCrossEntropyLoss(%o, %labels) {reduction = "mean"} : f32[]
  return %loss
}
)";
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef pipeline(reinterpret_cast<const char *>(data), size);
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  passes::PassManager pm;
  fuzz::setUpPassManager(pm);
  if (llvm::Error err = passes::parsePassPipeline(pipeline, registry, pm)) {
    llvm::consumeError(std::move(err));
    return 0;
  }
  // Long pipelines only repeat passes; keep each run short.
  if (pm.size() > 16)
    return 0;
  auto graph = ir::parseGraph(kGraph, "mlp.rir");
  fuzz::fuzzCheck(bool(graph), "the fixed graph does not parse");
  fuzz::runPassesVerified(pm, **graph,
                          "a pass left a graph that does not verify");
  return 0;
}
