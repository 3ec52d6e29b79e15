//===- frontends/onnx/Dft.cpp - DFT as a constant linear map --------------===//
//
// See Dft.h.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/Dft.h"

#include "ir/Support.h"

#include "llvm/ADT/Twine.h"

#include <cmath>

using llvm::ArrayRef;
using llvm::Expected;
using llvm::Twine;

namespace remat::onnx_frontend {

namespace {

/// The most entries the matrix may have: a MatMul by a larger constant is
/// not what a user meant to train.
constexpr int64_t kMaxDftEntries = int64_t(1) << 24;

} // namespace

Expected<DftPlan> planDft(ArrayRef<int64_t> dims, int64_t axis,
                          std::optional<int64_t> length, bool inverse,
                          bool onesided) {
  int64_t rank = int64_t(dims.size());
  if (rank < 2)
    return makeError("expects [batch, signal..., 1 or 2] of rank 2 or more, "
                     "got rank " +
                     Twine(rank));
  DftPlan plan;
  plan.inParts = dims.back();
  if (plan.inParts != 1 && plan.inParts != 2)
    return makeError("the last dim is " + Twine(plan.inParts) +
                     ", expected 1 (real) or 2 (complex)");
  if (axis < -rank || axis >= rank)
    return makeError("axis " + Twine(axis) + " is out of range for rank " +
                     Twine(rank));
  plan.axis = axis < 0 ? axis + rank : axis;
  if (plan.axis == rank - 1)
    return makeError("axis " + Twine(axis) +
                     " is the last dim, the real and imaginary parts");
  plan.inSize = dims[size_t(plan.axis)];
  bool irfft = inverse && onesided;
  int64_t n = length ? *length : irfft ? 2 * (plan.inSize - 1) : plan.inSize;
  if (n < 1)
    return makeError("the transform's length is " + Twine(n) +
                     ", expected at least 1");
  plan.outSize = irfft ? n : onesided ? n / 2 + 1 : n;
  plan.outParts = irfft ? 1 : 2;
  int64_t rows = plan.inSize * plan.inParts;
  int64_t cols = plan.outSize * plan.outParts;
  if (plan.outSize > kMaxDftEntries || (rows != 0 && cols > kMaxDftEntries / rows))
    return makeError("a transform from " + Twine(plan.inSize) + " to " +
                     Twine(plan.outSize) +
                     " entries needs a matrix of more than 2^24 entries "
                     "(remat imports DFT as a MatMul by one)");
  plan.matrix.assign(size_t(rows * cols), 0.0);
  auto entry = [&](int64_t j, int64_t p, int64_t k, int64_t q) -> double & {
    return plan.matrix[size_t((j * plan.inParts + p) * cols +
                              k * plan.outParts + q)];
  };
  // The angle of e^{2 pi i jk / n}, from jk mod n so that it stays exact.
  auto angle = [&](int64_t j, int64_t k) {
    return 2 * M_PI * double((j % n) * (k % n) % n) / double(n);
  };
  if (irfft) {
    // x_j = (1/n) sum_k w_k (Re X_k cos - Im X_k sin), k over the onesided
    // spectrum cut or padded to n / 2 + 1, w_k 2 but for the frequencies
    // that are their own conjugate (0, and n / 2 when n is even).
    for (int64_t k = 0; k < std::min(plan.inSize, n / 2 + 1); ++k) {
      double weight = k == 0 || (n % 2 == 0 && k == n / 2) ? 1.0 : 2.0;
      for (int64_t j = 0; j < n; ++j) {
        double theta = angle(j, k);
        entry(k, 0, j, 0) = weight * std::cos(theta) / double(n);
        if (plan.inParts == 2)
          entry(k, 1, j, 0) = -weight * std::sin(theta) / double(n);
      }
    }
    return plan;
  }
  // X_k = sum_j x_j e^{-+ i theta} (/ n for the inverse), j over the input
  // cut or padded to n.
  double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / double(n) : 1.0;
  for (int64_t j = 0; j < std::min(plan.inSize, n); ++j)
    for (int64_t k = 0; k < plan.outSize; ++k) {
      double theta = angle(j, k);
      double c = std::cos(theta) * scale, s = sign * std::sin(theta) * scale;
      // (a + bi)(c + si) = (ac - bs) + (as + bc)i
      entry(j, 0, k, 0) = c;
      entry(j, 0, k, 1) = s;
      if (plan.inParts == 2) {
        entry(j, 1, k, 0) = -s;
        entry(j, 1, k, 1) = c;
      }
    }
  return plan;
}

} // namespace remat::onnx_frontend
