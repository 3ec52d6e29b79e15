//===- driver/Plots.h - The SVG plots the tools write -----------*- C++ -*-===//
//
// remat-opt --memory-timeline and remat-sweep --svg draw these; they are a
// tool's output, not part of the session library (session/) that
// libremat.so is built from.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_DRIVER_PLOTS_H
#define REMAT_DRIVER_PLOTS_H

#include "ir/Graph.h"
#include "session/Sweep.h"

#include <string>

namespace remat::driver {

/// An SVG plot of \p graph's live bytes (persistent + live arena, Liveness)
/// over its schedule: forward / backward / recompute ranges shaded, the peak
/// marked, MiB ticks, and with a MemoryPlan the planned peak (persistent +
/// arena) as a dashed line. At most about 2000 points: each of up to 1000
/// buckets of positions keeps its minimum and maximum, so the peak stays.
std::string getMemoryTimelineSvg(const ir::Graph &graph);

/// remat-sweep's curve as an SVG plot: peak against relative step time, one
/// marker shape per strategy, the Pareto front joined, peers beside it.
std::string getSweepSvg(const session::SweepResult &result);

} // namespace remat::driver

#endif // REMAT_DRIVER_PLOTS_H
