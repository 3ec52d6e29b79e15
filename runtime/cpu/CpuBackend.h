//===- runtime/cpu/CpuBackend.h - The reference backend ---------*- C++ -*-===//
#ifndef REMAT_RUNTIME_CPU_CPUBACKEND_H
#define REMAT_RUNTIME_CPU_CPUBACKEND_H

#include "runtime/Backend.h"

#include <memory>

namespace remat::runtime::cpu {

/// \returns the CPU backend: deterministic kernels, OpenBLAS for GEMMs.
std::unique_ptr<Backend> createCpuBackend();

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_CPUBACKEND_H
