//===- driver/SweepDriver.h - The library behind remat-sweep ----*- C++ -*-===//
#ifndef REMAT_DRIVER_SWEEPDRIVER_H
#define REMAT_DRIVER_SWEEPDRIVER_H

#include "session/Pipeline.h"
#include "session/Sweep.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace remat::driver {

using session::PipelineOptions;
using session::SweepOptions;

/// What one remat-sweep invocation does.
struct SweepRunOptions {
  /// A .rir, .onnx or BERT config .json, and its bound dims ("batch=4,...").
  std::string model;
  std::string bind;
  /// --scalar-weights, for the planning and every measured run.
  std::string scalarWeights;
  /// The strategies, budgets and cost profile to plan with.
  SweepOptions sweep;
  /// The optimizer and its options (the training step's weight update),
  /// and autodiff's unused-weights mode.
  PipelineOptions pipeline;
  /// --max-memory for the measured runs ("" for remat-run's default).
  std::string maxMemory;
  /// Run every distinct plan with remat-run (at runTool), each in a process
  /// of its own.
  bool measure = false;
  std::string runTool;
  std::string backend = "cpu";
  unsigned steps = 3;
  unsigned threads = 0;
  /// Rounds over the points, alternating their order; each point keeps its
  /// fastest.
  unsigned rounds = 2;
  /// One untimed run of the first point before the timed ones.
  bool warmup = true;
  /// Outputs ("" for none) and the peers' CSV to draw beside the curve.
  std::string csvPath, jsonPath, svgPath, peersPath;
  /// A sweep saved by --json to print and draw again instead of planning
  /// one (its peers replaced by peersPath's when given); "" to plan.
  std::string fromJsonPath;
};

/// How a sweep ended.
enum class SweepEnd { Finished, Interrupted };

/// Checks \p options, plans every point, measures them with --measure and
/// writes the table to \p out, progress to \p diag and the files asked for
/// (after every measured point, so an interrupted sweep leaves the rows
/// finished). Nothing is written when an error is returned before the
/// first point is measured.
llvm::Expected<SweepEnd> runSweep(const SweepRunOptions &options,
                                  llvm::raw_ostream &out,
                                  llvm::raw_ostream &diag);

/// The whole remat-sweep command line. \returns the exit code (130 when
/// interrupted, after writing the rows finished so far).
int sweepMain(int argc, char **argv);

} // namespace remat::driver

#endif // REMAT_DRIVER_SWEEPDRIVER_H
