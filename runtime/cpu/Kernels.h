//===- runtime/cpu/Kernels.h - The reference CPU kernels --------*- C++ -*-===//
//
// One kernel per op of ir/Ops.def, f32 and f64 (and the integer/bool dtypes
// the op allows). Kernels are deterministic: every reduction runs in a fixed
// order that does not depend on the thread count, so a rematerialized graph
// computes bit for bit what the original computes. Dropout draws its mask
// from a counter-based generator keyed by (seed, element index): evaluating
// the same node twice reproduces the mask without storing it.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CPU_KERNELS_H
#define REMAT_RUNTIME_CPU_KERNELS_H

#include "ir/Graph.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>

namespace remat::runtime::cpu {

/// Runs \p body(begin, end) over [0, count) split into chunks on the
/// backend's threads. Chunks never change what is computed: kernels keep
/// every floating-point reduction inside one chunk and in a fixed order.
class ParallelFor {
public:
  virtual ~ParallelFor();
  /// \p grain is the smallest chunk worth a thread.
  virtual void run(int64_t count, int64_t grain,
                   const std::function<void(int64_t, int64_t)> &body) = 0;
  virtual unsigned getNumThreads() const = 0;
};

/// What a kernel sees: its node (for attributes), operand tensors in operand
/// order, result tensors (already allocated, of the node's result types) in
/// result order.
struct KernelContext {
  const ir::Node &node;
  llvm::ArrayRef<Tensor> inputs;
  llvm::ArrayRef<Tensor> outputs;
  ParallelFor &parallel;
};

using Kernel = std::function<llvm::Error(const KernelContext &)>;

/// \returns the kernel for \p node, chosen once at compile time from its op,
/// dtypes and attributes, or an error naming the node, the op and what is
/// unsupported (an op the CPU backend lacks, a dtype, an attribute value).
llvm::Expected<Kernel> selectKernel(const ir::Node &node);

/// The Dropout keep decision for element \p index of a node with \p seed:
/// true when the element is kept. Exposed for tests and other backends.
bool dropoutKeep(uint64_t seed, uint64_t index, float ratio);

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_KERNELS_H
