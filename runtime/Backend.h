//===- runtime/Backend.h - Backends and executables -------------*- C++ -*-===//
//
// A Backend compiles a scheduled graph into an Executable that runs steps.
// The CPU backend is the reference every other backend is tested against.
// The list of backends a build has is runtime/Backends.h, above this core
// and every backend.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_BACKEND_H
#define REMAT_RUNTIME_BACKEND_H

#include "ir/Graph.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace remat::runtime {

/// How to compile.
struct CompileOptions {
  /// Worker threads for kernels; 0 = the machine's hardware concurrency.
  unsigned numThreads = 0;
  /// Record the wall time of every node (RunResult::nodeSeconds).
  bool profile = false;
  /// Let f32 GEMMs use TF32 tensor cores (CUDA backend; off: full f32).
  bool allowTF32 = false;
  /// CPU backend, planned graphs: check the arena against the plan without
  /// trusting the allocator (Executor: "checked arena"): every result at its
  /// planned offset, no kernel writing outside its results' planned ranges
  /// (the arena is poisoned and compared around each node, with a guard
  /// after it), and RunResult::touchedBytes measured from the poison. Costs
  /// a copy of (up to 256 KiB of) the arena per node: for tests.
  bool checkArena = false;
};

/// What one step produced.
struct RunResult {
  /// One per graph output, in order, in host memory. On the CPU they view
  /// the step's arena rather than copying it (gradients are as large as the
  /// weights); holding them while the next step runs costs that step a
  /// fresh arena.
  std::vector<OwnedTensor> outputs;
  /// The step's time on the device's clock (Device::now): from its start to
  /// the end of its last kernel, outputs not yet copied to the host.
  double seconds = 0;
  /// The time then taken to bring the outputs to the host (a GPU's
  /// gradients cross the bus; the CPU's outputs are views, about 0).
  double outputSeconds = 0;
  /// The most bytes of intermediate tensors live at once during the step
  /// (graph inputs excluded; graph outputs included while live).
  uint64_t peakBytes = 0;
  /// The planned arena bytes when the graph has a MemoryPlan (then the
  /// arena allocator ran and peakBytes is its high-water mark), else 0.
  uint64_t plannedBytes = 0;
  /// With CompileOptions::checkArena on a planned graph: the arena bytes the
  /// step's kernels wrote, measured from the poisoned arena (the offset of
  /// the last byte that lost the poison, + 1), not from the allocator's
  /// bookkeeping; else 0. A tensor whose last bytes happen to equal the
  /// poison reads a few bytes short.
  uint64_t touchedBytes = 0;
  /// Per node in schedule order, when CompileOptions::profile is set.
  std::vector<double> nodeSeconds;
};

/// A compiled graph that runs steps.
class Executable {
public:
  virtual ~Executable();
  /// Runs one step on \p inputs, one per graph input in order (weights
  /// included), each of exactly the input's type. Errors name the input.
  virtual llvm::Expected<RunResult> run(llvm::ArrayRef<Tensor> inputs) = 0;
  /// The graph this executable runs (a copy owned by it).
  virtual const ir::Graph &getGraph() const = 0;
};

/// A device kind that compiles graphs.
class Backend {
public:
  virtual ~Backend();
  virtual llvm::StringRef getName() const = 0;
  /// Compiles \p graph (which must verify). An op, dtype or attribute the
  /// backend lacks is an error naming the node.
  virtual llvm::Expected<std::unique_ptr<Executable>>
  compile(const ir::Graph &graph, const CompileOptions &options) = 0;
};

/// Checks that \p inputs match the inputs of \p graph in count and type;
/// errors name the input, the expected and the actual type.
llvm::Error checkInputs(const ir::Graph &graph, llvm::ArrayRef<Tensor> inputs);

} // namespace remat::runtime

#endif // REMAT_RUNTIME_BACKEND_H
