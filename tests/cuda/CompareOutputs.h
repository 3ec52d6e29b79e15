//===- tests/cuda/CompareOutputs.h - One output against the CPU's -*- C++ -*-===//
//
// How remat-cuda-tests holds an output of the backend under test to the CPU
// backend's, in a header so that the unit tests check the comparison itself
// on machines without a GPU (tests/unit/CudaCompareTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_TESTS_CUDA_COMPAREOUTPUTS_H
#define REMAT_TESTS_CUDA_COMPAREOUTPUTS_H

#include "ir/Graph.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace remat::cuda_tests {

inline double asDouble(const runtime::OwnedTensor &t, int64_t i) {
  switch (t.getType().getDType()) {
  case ir::DType::F32:
    return static_cast<const float *>(t.getData())[i];
  case ir::DType::F64:
    return static_cast<const double *>(t.getData())[i];
  default:
    return 0;
  }
}

/// \returns "%name" followed by \p what (built without `"literal" +
/// std::string`, which GCC 12 -O3 warns about falsely).
inline std::string problemOf(llvm::StringRef name, llvm::StringRef what) {
  std::string text = "%";
  text += name.str();
  text += what.str();
  return text;
}

/// Compares output \p name of the backend under test, \p gpu, with the
/// CPU's, \p cpu; \returns an empty string when it agrees. Integers and
/// bools must be equal; floats within relative error \p rtol in the 2-norm
/// over the finite elements (||gpu - cpu|| <= rtol * ||cpu||), where every
/// NaN and infinity must be matched by the same on the other side (equal
/// infinities are not differences: inf - inf would make the norm NaN, and
/// a NaN norm must never pass). \p worstRel takes the largest relative
/// error seen.
inline std::string compareOutput(llvm::StringRef name,
                                 const runtime::OwnedTensor &gpu,
                                 const runtime::OwnedTensor &cpu, double rtol,
                                 double &worstRel) {
  if (gpu.getType() != cpu.getType())
    return problemOf(name, ": types differ");
  ir::DType dtype = cpu.getType().getDType();
  int64_t count = cpu.getType().getNumElements();
  int64_t bytes = cpu.getType().getByteSize();
  if (dtype != ir::DType::F32 && dtype != ir::DType::F64) {
    if (bytes && std::memcmp(gpu.getData(), cpu.getData(), size_t(bytes)))
      return problemOf(name, ": values differ");
    return "";
  }
  double diff2 = 0, ref2 = 0, maxAbs = 0;
  for (int64_t i = 0; i < count; ++i) {
    double a = asDouble(gpu, i), b = asDouble(cpu, i);
    if (std::isfinite(a) && std::isfinite(b)) {
      diff2 += (a - b) * (a - b);
      ref2 += b * b;
      maxAbs = std::max(maxAbs, std::fabs(a - b));
      continue;
    }
    if ((std::isnan(a) && std::isnan(b)) || a == b)
      continue;
    char buffer[160];
    std::snprintf(buffer, sizeof(buffer),
                  ": element %lld is %g, the cpu's %g", (long long)i, a, b);
    return problemOf(name, buffer);
  }
  double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (std::isnan(rel) || rel > worstRel)
    worstRel = rel;
  // Written so that a NaN fails.
  if (!(rel <= rtol)) {
    char buffer[160];
    std::snprintf(buffer, sizeof(buffer),
                  ": relative error %.3g > %.3g (largest difference %.3g)",
                  rel, rtol, maxAbs);
    return problemOf(name, buffer);
  }
  return "";
}

} // namespace remat::cuda_tests

#endif // REMAT_TESTS_CUDA_COMPAREOUTPUTS_H
