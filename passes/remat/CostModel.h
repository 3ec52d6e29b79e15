//===- passes/remat/CostModel.h - Predicted node times ----------*- C++ -*-===//
//
// Step 6 of remat (DESIGN.md "Rematerialization"): what a node costs to run
// again. FLOPs and bytes moved come from the op and its types; a backend
// profile turns them into seconds: a GEMM rate and a memory bandwidth, and
// per-node times measured by `remat-run --profile FILE.json`, which override
// the formula for every node they name (the file also carries the rates
// fitted to its times, for the nodes it does not name).
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
  /// Sustained f32 GEMM rate. The defaults are the rates remat-run
  /// --profile fits to bert-base's step on the 2-core AVX-512 development
  /// VM at 2 threads, remat-run's default there (186-210 GFLOP/s and
  /// 16.7-18.7 GB/s over batch 1 seq 512 and batch 4 seq 128; bert-mini
  /// and bert-tiny fit lower: docs/remat.md), rounded. A profile
  /// (--cost-profile) gives another machine's.
  double gemmFlopsPerSecond = 200e9;
  /// Sustained bandwidth of memory-bound kernels (bytes read + written).
  double bytesPerSecond = 18e9;
  /// Fixed cost of launching any node.
  double nodeOverheadSeconds = 2e-6;
  /// Measured seconds per node, keyed by the name of its first result.
  llvm::StringMap<double> nodeSeconds;
  /// Where it came from, for reports ("default" or the file).
  std::string source = "default";
};

/// \returns the profile in \p path, written by `remat-run --profile`: its
/// per-node times, and its "rates" (fitRates, written next to them) for the
/// nodes it does not name, such as those of another model or shape.
llvm::Expected<CostProfile> loadCostProfile(llvm::StringRef path);

/// Rates fitted to measured node times (fitRates).
struct FittedRates {
  /// The fitted GEMM rate and bandwidth, or the base profile's where no node
  /// of the kind took time beyond its launch overhead.
  double gemmFlopsPerSecond = 0, bytesPerSecond = 0;
  /// How many nodes of each kind the fit used (0: the base profile's rate).
  unsigned gemmNodes = 0, memoryBoundNodes = 0;
};

/// \returns the bandwidth and the GEMM rate under which nodeSeconds' formula
/// gives \p graph's memory-bound nodes, and separately its GEMM nodes, the
/// total time they took in \p seconds (one entry per node, in graph order),
/// counting only nodes with finite time beyond the launch overhead. The
/// bandwidth is their bytes over that time; the GEMM rate is then solved
/// for with each GEMM charged max(FLOPs / rate, bytes / bandwidth), as
/// nodeSeconds does, or is FLOPs over time where the bytes terms alone
/// exceed the total. A kind with no such node keeps \p base's rate.
FittedRates fitRates(const ir::Graph &graph, llvm::ArrayRef<double> seconds,
                     const CostProfile &base = {});

/// \returns the cost kind of \p op.
CostKind getCostKind(ir::OpKind op);
/// \returns the cost kind of \p node: its op's, or remat.Extern's 'cost'.
CostKind getCostKind(const ir::Node &node);
/// \returns the floating-point operations of \p node (2*M*N*K for a GEMM,
/// one per result element otherwise; remat.Extern's 'flops' when given).
double nodeFlops(const ir::Node &node);
/// \returns the bytes \p node reads and writes (remat.Extern's 'bytes'
/// when given).
double nodeBytes(const ir::Node &node);
/// \returns the predicted seconds of \p node under \p profile. A recompute
/// clone (Node::getOrigin) costs what its original costs.
double nodeSeconds(const ir::Node &node, const CostProfile &profile);

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_COSTMODEL_H
