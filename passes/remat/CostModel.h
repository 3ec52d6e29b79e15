//===- passes/remat/CostModel.h - Predicted node times -----------*- C++ -*-===//
//
// Step 6 of remat (DESIGN.md "Rematerialization"): what a node costs to run
// again. FLOPs and bytes moved come from the op and its types; a backend
// profile turns them into seconds: a GEMM rate and a memory bandwidth, or
// per-node times measured by `remat-run --profile FILE.json`, which override
// the formula for every node they name.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_COSTMODEL_H
#define REMAT_PASSES_REMAT_COSTMODEL_H

#include "ir/Graph.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace remat::passes::recompute {

/// What dominates a node's time.
enum class CostKind : uint8_t { Free, MemoryBound, Gemm };

/// Rates of a backend, and measured node times when there are any.
struct CostProfile {
  /// Sustained f32 GEMM rate. The default was measured on the CPU backend
  /// with 2 threads on the development machine (docs/remat.md).
  double gemmFlopsPerSecond = 60e9;
  /// Sustained bandwidth of memory-bound kernels (bytes read + written).
  double bytesPerSecond = 6e9;
  /// Fixed cost of launching any node.
  double nodeOverheadSeconds = 2e-6;
  /// Measured seconds per node, keyed by the name of its first result.
  llvm::StringMap<double> nodeSeconds;
  /// Where it came from, for reports ("default" or the file).
  std::string source = "default";
};

/// \returns the profile in \p path, written by `remat-run --profile`: rates
/// are fitted from the per-node times, which are also kept per node.
llvm::Expected<CostProfile> loadCostProfile(llvm::StringRef path);

/// \returns the cost kind of \p op.
CostKind getCostKind(ir::OpKind op);
/// \returns the floating-point operations of \p node (2*M*N*K for a GEMM,
/// one per result element otherwise).
double nodeFlops(const ir::Node &node);
/// \returns the bytes \p node reads and writes.
double nodeBytes(const ir::Node &node);
/// \returns the predicted seconds of \p node under \p profile. A recompute
/// clone (".remat" names) costs what its original costs.
double nodeSeconds(const ir::Node &node, const CostProfile &profile);

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_COSTMODEL_H
