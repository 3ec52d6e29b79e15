//===- tests/onnx/ExportModels.cpp - .rir files to .onnx for checking -----===//
//
// remat-export-test-models --out-dir DIR [--external-data] A.rir B.rir ...
//
// Parses each .rir file and exports it to DIR/<stem>.onnx (and
// DIR/<stem>.onnx.data with --external-data), so that check_model.py can run
// ONNX's checker and onnxruntime on what remat writes. Exits 1 with
// "error: ..." on the first file that does not parse, verify or export.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxExporter.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "ir/Verifier.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace remat;

static llvm::cl::list<std::string> inputFiles(llvm::cl::Positional,
                                              llvm::cl::desc("<.rir files>"),
                                              llvm::cl::OneOrMore);
static llvm::cl::opt<std::string>
    outDir("out-dir", llvm::cl::desc("Directory for the .onnx files"),
           llvm::cl::value_desc("dir"), llvm::cl::Required);
static llvm::cl::opt<bool>
    externalData("external-data",
                 llvm::cl::desc("Store initializers in <model>.onnx.data"));

/// Exports \p inputPath to the output directory.
static llvm::Error exportOne(llvm::StringRef inputPath) {
  auto buffer = llvm::MemoryBuffer::getFile(inputPath);
  if (!buffer)
    return makeError("cannot read '" + inputPath +
                     "': " + buffer.getError().message());
  auto graph = ir::parseGraph((*buffer)->getBuffer(), inputPath);
  if (!graph)
    return graph.takeError();
  if (auto err = ir::verify(**graph))
    return err;
  llvm::SmallString<256> outPath(outDir);
  llvm::sys::path::append(outPath, llvm::sys::path::stem(inputPath) + ".onnx");
  onnx_frontend::ExportOptions options;
  options.externalData = externalData;
  options.metadata.emplace_back("remat.test.source",
                                llvm::sys::path::filename(inputPath).str());
  if (auto err = onnx_frontend::exportOnnxFile(**graph, outPath, options))
    return err;
  llvm::outs() << "exported " << inputPath << " -> " << outPath << "\n";
  return llvm::Error::success();
}

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "export .rir files to ONNX for checking\n");
  if (std::error_code ec = llvm::sys::fs::create_directories(outDir)) {
    llvm::WithColor::error()
        << "cannot create '" << outDir << "': " << ec.message() << "\n";
    return 1;
  }
  for (const std::string &input : inputFiles) {
    if (auto err = exportOne(input)) {
      llvm::WithColor::error() << errorToString(std::move(err)) << "\n";
      return 1;
    }
  }
  return 0;
}
