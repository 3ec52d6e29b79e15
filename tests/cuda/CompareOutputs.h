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
#include <vector>

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

/// \returns the model's scale for compareOutput: the median, over the float
/// outputs of \p outputs (the CPU's), of their root mean square. A gradient
/// that is zero in exact arithmetic (a key projection's bias under softmax,
/// which adding a constant to every score leaves unchanged) comes out of
/// either backend as rounding noise around 1e-12; its own norm is no scale
/// to hold the other backend's noise to, the model's typical output is.
inline double modelScale(const std::vector<runtime::OwnedTensor> &outputs) {
  std::vector<double> rms;
  for (const runtime::OwnedTensor &t : outputs) {
    ir::DType dtype = t.getType().getDType();
    int64_t count = t.getType().getNumElements();
    if ((dtype != ir::DType::F32 && dtype != ir::DType::F64) || count == 0)
      continue;
    double sum2 = 0;
    for (int64_t i = 0; i < count; ++i) {
      double v = asDouble(t, i);
      if (std::isfinite(v))
        sum2 += v * v;
    }
    rms.push_back(std::sqrt(sum2 / double(count)));
  }
  if (rms.empty())
    return 0;
  std::nth_element(rms.begin(), rms.begin() + rms.size() / 2, rms.end());
  return rms[rms.size() / 2];
}

/// Compares output \p name of the backend under test, \p gpu, with the
/// CPU's, \p cpu; \returns an empty string when it agrees. Integers and
/// bools must be equal; floats within relative error \p rtol in the 2-norm
/// over the finite elements, where every NaN and infinity must be matched
/// by the same on the other side (equal infinities are not differences:
/// inf - inf would make the norm NaN, and a NaN norm must never pass). The
/// error is relative to the larger of ||cpu|| and a tensor of \p n elements
/// at the model's scale, \p scale * sqrt(n) (modelScale; 0 holds each
/// output to its own norm alone): ||gpu - cpu|| <= rtol * max(||cpu||,
/// scale * sqrt(n)). \p worstRel takes the largest relative error seen.
inline std::string compareOutput(llvm::StringRef name,
                                 const runtime::OwnedTensor &gpu,
                                 const runtime::OwnedTensor &cpu, double rtol,
                                 double &worstRel, double scale = 0) {
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
  double refNorm = std::sqrt(ref2);
  double scaleNorm = scale * std::sqrt(double(count));
  bool byScale = scaleNorm > refNorm;
  double denominator = byScale ? scaleNorm : refNorm;
  double rel =
      denominator > 0 ? std::sqrt(diff2) / denominator : std::sqrt(diff2);
  if (std::isnan(rel) || rel > worstRel)
    worstRel = rel;
  // Written so that a NaN fails.
  if (!(rel <= rtol)) {
    char buffer[200];
    if (byScale)
      std::snprintf(buffer, sizeof(buffer),
                    ": relative error %.3g > %.3g (largest difference %.3g; "
                    "relative to the model's scale %.3g, above its own rms "
                    "%.3g)",
                    rel, rtol, maxAbs, scale,
                    refNorm / std::sqrt(double(count)));
    else
      std::snprintf(buffer, sizeof(buffer),
                    ": relative error %.3g > %.3g (largest difference %.3g)",
                    rel, rtol, maxAbs);
    return problemOf(name, buffer);
  }
  return "";
}

} // namespace remat::cuda_tests

#endif // REMAT_TESTS_CUDA_COMPAREOUTPUTS_H
