//===- driver/OptDriver.h - The library behind remat-opt --------*- C++ -*-===//
#ifndef REMAT_DRIVER_OPTDRIVER_H
#define REMAT_DRIVER_OPTDRIVER_H

#include "session/Pipeline.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace remat::driver {

/// \returns "remat <version>".
llvm::StringRef getVersionString();

/// Loads the pass plugin \p path (remat/PassPlugin.h) and adds its passes
/// to those registerAllPasses() registers. A file that cannot be loaded, has
/// no entry point, was built for another plugin API or remat version, or
/// registers a pass name that exists is an error naming it.
llvm::Error loadPassPlugin(llvm::StringRef path);

/// What one remat-opt invocation does.
struct OptOptions {
  std::string inputPath;
  std::string outputPath = "-";
  /// The pipeline and the flags that stand for pass options (-p, --budget,
  /// --strategy, --explain, --unused-weights, --timing, ...).
  session::PipelineOptions pipeline;
  bool splitInputFile = false;
  bool printIr = false;
  /// Symbolic dims of an .onnx input or batch/seq of a BERT config:
  /// "batch=2,seq=16".
  std::string bind;
  /// One-element initializers to import as weights (--scalar-weights).
  std::string scalarWeights;
  /// Weights of an .onnx output go to a side file `<output>.data`.
  bool externalData = false;
  /// Print the peak memory breakdown of each graph after the pipeline.
  bool printMemory = false;
  /// Write the same as JSON here (docs/memory-report.md); "" for none.
  std::string reportPath;
  /// Write an SVG plot of live bytes over the schedule here
  /// (docs/memory-report.md); "" for none. Needs exactly one graph.
  std::string memoryTimelinePath;
};

/// Reads the input (.rir, .onnx or a BERT config .json, by extension), runs
/// the pipeline on each graph (each `// -----` chunk with splitInputFile) and writes the result
/// (.rir text, or .onnx by the output's extension). Diagnostics that are not
/// errors (timing, IR after each pass) go to \p diag. Nothing is written when
/// an error is returned; with several failing chunks the error holds one
/// line per chunk.
llvm::Error runOpt(const OptOptions &options, llvm::raw_ostream &diag);

/// The whole remat-opt command line: parses \p argv, runs, prints
/// "error: ..." lines on failure. \returns the process exit code.
int optMain(int argc, char **argv);

} // namespace remat::driver

#endif // REMAT_DRIVER_OPTDRIVER_H
