//===- fuzz/FuzzOnnx.cpp - The ONNX importer, canonicalize, export ---------===//
//
// Imports the bytes as an ONNX ModelProto. A model that imports is
// canonicalized; the result must export, and the export must re-import.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzPasses.h"

#include "frontends/onnx/OnnxExporter.h"
#include "frontends/onnx/OnnxImporter.h"
#include "ir/Verifier.h"
#include "passes/FoldingPolicy.h"
#include "passes/PassManager.h"
#include "runtime/cpu/Evaluator.h"

using namespace remat;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

static onnx_frontend::ImportOptions importOptions() {
  onnx_frontend::ImportOptions options;
  options.evaluator =
      passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
  return options;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  // No external data: baseDir is a directory that does not exist.
  auto graph = onnx_frontend::importOnnxBytes(bytes, "fuzz.onnx",
                                              "/nonexistent-fuzz-dir",
                                              importOptions());
  if (!graph) {
    llvm::consumeError(graph.takeError());
    return 0;
  }
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  passes::PassManager pm;
  fuzz::setUpPassManager(pm);
  fuzz::fuzzCheckNoError(
      passes::parsePassPipeline("canonicalize", registry, pm),
      "the pipeline does not parse");
  if (!fuzz::runPassesVerified(
          pm, **graph, "canonicalize left a graph that does not verify"))
    return 0;
  auto exported = onnx_frontend::exportOnnxBytes(**graph, {});
  if (!exported) {
    llvm::consumeError(exported.takeError());
    return 0;
  }
  auto reimported = onnx_frontend::importOnnxBytes(
      *exported, "exported.onnx", "/nonexistent-fuzz-dir", importOptions());
  if (!reimported)
    fuzz::fuzzCheckNoError(reimported.takeError(),
                           "an exported model does not re-import");
  fuzz::fuzzCheckNoError(ir::verify(**reimported),
                         "a re-imported model does not verify");
  return 0;
}
