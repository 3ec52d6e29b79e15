//===- fuzz/FuzzBertConfig.cpp - BERT config JSON --------------------------===//
//
// Parses the bytes as a BERT config. A small valid config is built into a
// graph, which must verify.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"

#include "frontends/bert/BertBuilder.h"
#include "frontends/bert/BertConfig.h"
#include "ir/Verifier.h"

using namespace remat;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef json(reinterpret_cast<const char *>(data), size);
  auto config = bert::parseBertConfig(json, "fuzz.json");
  if (!config) {
    llvm::consumeError(config.takeError());
    return 0;
  }
  // Building is linear in layers and parameters; keep each run short.
  if (config->numLayers > 2 || config->getNumParameters() > (1 << 20) ||
      config->batch * config->seq > 4096)
    return 0;
  bert::BertBuildOptions options;
  options.initWeights = false;
  auto graph = bert::buildBert(*config, options);
  if (!graph)
    fuzz::fuzzCheckNoError(graph.takeError(),
                           "a config that validates does not build");
  fuzz::fuzzCheckNoError(ir::verify(**graph), "a built graph does not verify");
  return 0;
}
