//===- session/MemoryReport.h - Peak memory reports -------------*- C++ -*-===//
#ifndef REMAT_SESSION_MEMORYREPORT_H
#define REMAT_SESSION_MEMORYREPORT_H

#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace remat::passes {
class Liveness;
} // namespace remat::passes

namespace remat::session {

/// \returns the node at which \p liveness peaks as "%name = Op [stage]",
/// for the reports and the memory timeline.
std::string describePeak(const passes::Liveness &liveness);

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

} // namespace remat::session

#endif // REMAT_SESSION_MEMORYREPORT_H
