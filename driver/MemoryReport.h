//===- driver/MemoryReport.h - Peak memory reports --------------*- C++ -*-===//
#ifndef REMAT_DRIVER_MEMORYREPORT_H
#define REMAT_DRIVER_MEMORYREPORT_H

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace remat::driver {

/// Prints the peak breakdown of \p graph's schedule (Liveness) as a table:
/// weights, inputs, activations kept for backward, gradients, recompute
/// temporaries, temporaries, fragmentation (arena - peak live, only with a
/// MemoryPlan), and the node at which the peak occurs.
void printMemoryReport(const ir::Graph &graph, llvm::raw_ostream &os);

/// The same as JSON; the fields are documented in docs/memory-report.md.
llvm::json::Object getMemoryReport(const ir::Graph &graph);

/// Writes the report of each graph (getMemoryReport, with the remat pass's
/// decisions under "remat" where \p rematReports has one) to \p path as
/// `{"version": 1, "graphs": [...]}`; nothing is written on an error.
llvm::Error writeMemoryReports(
    llvm::StringRef path, llvm::ArrayRef<const ir::Graph *> graphs,
    llvm::ArrayRef<const llvm::json::Object *> rematReports);

/// An SVG plot of \p graph's live bytes (persistent + live arena, Liveness)
/// over its schedule: forward / backward / recompute ranges shaded, the peak
/// marked, MiB ticks, and with a MemoryPlan the planned peak (persistent +
/// arena) as a dashed line. At most about 2000 points: each of up to 1000
/// buckets of positions keeps its minimum and maximum, so the peak stays.
std::string getMemoryTimelineSvg(const ir::Graph &graph);

} // namespace remat::driver

#endif // REMAT_DRIVER_MEMORYREPORT_H
