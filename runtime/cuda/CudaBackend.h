//===- runtime/cuda/CudaBackend.h - The CUDA backend ------------*- C++ -*-===//
//
// Runs a scheduled graph on one GPU: one cudaMalloc of the planned arena,
// every tensor at its planned offset, weights uploaded once, kernels queued
// on one stream with no host synchronization between nodes (cuBLAS for
// MatMul/Gemm, runtime/cuda/Kernels.h for the rest). Nodes whose values are
// known when compiling (Constant, Shape and what is computed from them) are
// computed on the host once and copied in; a node the device kernels do not
// cover (an op, dtype or rank they lack, or a shape operand known only at
// run time) runs on the host through the CPU kernels, which synchronizes,
// and is counted in CudaStats::hostNodes.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CUDA_CUDABACKEND_H
#define REMAT_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace remat::runtime::cuda {

/// \returns the CUDA backend. Creating it touches no device; compile()
/// fails with checkCudaDevice()'s error on a machine without one.
std::unique_ptr<Backend> createCudaBackend();

/// \returns success when the CUDA runtime finds a driver and at least one
/// device, else an error saying what cudaGetDeviceCount reported.
llvm::Error checkCudaDevice();

/// Opens cuBLAS (libcublas.so.<major>, with dlopen: it is not linked) and
/// finds every function the backend calls. compile() does it; \returns an
/// error naming the library or the missing function.
llvm::Error loadCublas();

/// Device memory and coverage of a compiled CUDA executable.
struct CudaStats {
  /// The GPU's name and compute capability ("NVIDIA H200, sm_90").
  std::string deviceName;
  /// Bytes of the one arena allocation (the memory plan's arenaBytes), or of
  /// the per-tensor allocations' peak when the graph has no plan.
  uint64_t arenaBytes = 0;
  /// Bytes handed to cuBLAS as its workspace.
  uint64_t cublasWorkspaceBytes = 0;
  /// Bytes of the backend's own workspace (ScatterElements' sort).
  uint64_t scratchBytes = 0;
  /// Bytes of the uploaded graph inputs (weights included).
  uint64_t inputBytes = 0;
  /// cudaMemGetInfo's used bytes (total - free) after the executable made its
  /// context and handles, and after its last step.
  uint64_t usedBytesAtCompile = 0;
  uint64_t usedBytesAfterStep = 0;
  /// Nodes computed once when compiling, and nodes that run on the host.
  unsigned constantNodes = 0;
  unsigned hostNodes = 0;
};

/// Where the nodes of a graph run on the CUDA backend.
struct CudaCoverage {
  /// Computed once when compiling and copied in at run time.
  unsigned constantNodes = 0;
  /// Run by device kernels (or cuBLAS).
  unsigned deviceNodes = 0;
  /// Run on the host through the CPU kernels (each synchronizes the stream):
  /// Node::describe() of each.
  std::vector<std::string> hostNodes;
};

/// \returns where the nodes of \p graph would run, as compile() decides it,
/// without touching a device (for tests and reports on machines without
/// one).
llvm::Expected<CudaCoverage> planCudaCoverage(const ir::Graph &graph);

/// \returns the stats of \p executable when the CUDA backend made it, else
/// null.
const CudaStats *getCudaStats(const Executable &executable);

} // namespace remat::runtime::cuda

#endif // REMAT_RUNTIME_CUDA_CUDABACKEND_H
