//===- fuzz/FuzzRir.cpp - The .rir parser and verifier ---------------------===//
//
// Parses the bytes as a .rir graph and verifies it. A graph that parses and
// verifies must print, re-parse, verify and print the same text again.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

using namespace remat;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto graph = ir::parseGraph(text, "fuzz.rir");
  if (!graph) {
    llvm::consumeError(graph.takeError());
    return 0;
  }
  if (llvm::Error err = ir::verify(**graph)) {
    llvm::consumeError(std::move(err));
    return 0;
  }
  std::string printed = ir::printGraphToString(**graph);
  auto reparsed = ir::parseGraph(printed, "printed.rir");
  if (!reparsed)
    fuzz::fuzzCheckNoError(reparsed.takeError(),
                           "a printed graph does not parse");
  fuzz::fuzzCheckNoError(ir::verify(**reparsed),
                         "a printed graph does not verify");
  fuzz::fuzzCheck(ir::printGraphToString(**reparsed) == printed,
                  "printing is not stable across a round trip");
  return 0;
}
