//===- driver/RunDriver.h - The library behind remat-run --------*- C++ -*-===//
#ifndef REMAT_DRIVER_RUNDRIVER_H
#define REMAT_DRIVER_RUNDRIVER_H

#include "ir/Graph.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace remat::driver {

/// Makes a value for every input of \p graph that \p given lacks: weights
/// from their data (or normal(0, 0.02) when they have none), integer inputs
/// in the range their uses accept (Gather indices below the gathered dim,
/// loss labels below the class count with about one in eight set to the
/// loss's ignore_index, other integers 0 or 1 as masks, mostly 1), other
/// floats normal(0, 1). Everything is drawn from \p seed.
/// \returns one tensor per graph input, in order; those of weights and of
/// \p given view their TensorData (weights are held once, not copied).
llvm::Expected<std::vector<runtime::OwnedTensor>>
makeInputs(const ir::Graph &graph,
           const llvm::StringMap<ir::TensorDataPtr> &given, uint64_t seed);

/// Errors unless \p graph's planned peak (weights + inputs + its memory
/// plan's arena, or the live peak of its schedule without a plan) fits the
/// memory limit (ir/Limits.h), suggesting a --budget that would.
llvm::Error checkPlanFits(const ir::Graph &graph);

/// The file names remat-run --dump gives outputs named \p outputNames, in
/// order: the name with '/', '\\' and control bytes as '_', a leading '.'
/// as '_', cut to 200 bytes, plus ".pb"; a name taken already (ignoring
/// case) gets "-2", "-3", ... before ".pb". Never "index.json".
std::vector<std::string>
getDumpFileNames(llvm::ArrayRef<std::string> outputNames);

/// The whole remat-run command line. \returns the exit code.
int runMain(int argc, char **argv);

} // namespace remat::driver

#endif // REMAT_DRIVER_RUNDRIVER_H
