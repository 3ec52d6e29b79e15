//===- driver/CommandLine.h - The tools' shared command line ----*- C++ -*-===//
//
// One command-line layer for remat-opt, remat-run and remat-sweep: the flags
// they share are declared once (ToolFlags), llvm::cl's own messages are
// folded into one `error:` line, and every failure prints `error: ...` and
// exits 1.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_DRIVER_COMMANDLINE_H
#define REMAT_DRIVER_COMMANDLINE_H

#include "session/Pipeline.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <string>

namespace remat::driver {

/// The flags every tool that runs a pipeline has. Construct one inside a
/// tool's main, before parseCommandLine.
struct ToolFlags {
  explicit ToolFlags(llvm::cl::OptionCategory &category);

  llvm::cl::opt<std::string> bind;
  llvm::cl::opt<std::string> pipeline;
  llvm::cl::alias pipelineLong;
  llvm::cl::opt<std::string> budget;
  llvm::cl::opt<std::string> strategy;
  llvm::cl::opt<std::string> costProfile;
  llvm::cl::opt<bool> explain;
  llvm::cl::opt<std::string> unusedWeights;
  llvm::cl::opt<bool> timing;
  llvm::cl::opt<bool> printIrAfterAll;
  llvm::cl::opt<bool> printMemory;
  llvm::cl::opt<std::string> report;
  llvm::cl::opt<bool> listPasses;
  /// The optimizer pass's options (--optimizer adds it to the pipeline).
  llvm::cl::opt<std::string> optimizer;
  llvm::cl::opt<std::string> lr;
  llvm::cl::opt<std::string> weightDecay;
  llvm::cl::opt<std::string> momentum;
  llvm::cl::opt<std::string> beta1;
  llvm::cl::opt<std::string> beta2;
  llvm::cl::opt<std::string> eps;
  llvm::cl::opt<std::string> optimizerPlacement;
  llvm::cl::opt<std::string> maxMemory;

  /// \returns the pipeline-related flags as PipelineOptions.
  session::PipelineOptions getPipelineOptions() const;
  /// Checks the values that do not need a model: budget syntax, strategy
  /// name, unused-weights mode, --max-memory, and the pass options of -p;
  /// sets the memory limit (ir/Limits.h) from --max-memory.
  llvm::Error validate() const;
};

/// Parses \p argv for the tool \p toolName with llvm::cl. On a bad flag
/// prints one `error:` line and \returns false.
bool parseCommandLine(int argc, char **argv, llvm::StringRef toolName,
                      llvm::StringRef overview);

/// Prints \p err as `error: ...` lines (one per line of its message).
/// \returns 1, the tools' exit code for a failure.
int reportError(llvm::Error err);

/// Prints every pass and its options to stdout (--list-passes).
void printPassList();

} // namespace remat::driver

#endif // REMAT_DRIVER_COMMANDLINE_H
