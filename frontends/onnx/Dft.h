//===- frontends/onnx/Dft.h - DFT as a constant linear map ------*- C++ -*-===//
//
// remat has no DFT op: with a static signal length, the discrete Fourier
// transform along one axis is a real linear map from each (index, real or
// imaginary part) of the input to each of the output, so the importer emits
// it as one MatMul by a constant matrix, with the axis and the parts dim
// brought together by a Transpose and a Reshape (FNet's token mixing is two
// of them), and the rest of remat (gradients, kernels, recompute) needs
// nothing of its own.
//
// planDft computes that matrix as ONNX's reference (opsets 17 and 20) does
// with numpy: the forward transform e^{-2 pi i jk / N} (fft, or only the
// N / 2 + 1 first frequencies when onesided), the inverse e^{2 pi i jk / N} / N
// (ifft; irfft, a real result, from a onesided spectrum), the input cut or
// padded with zeros to the length N (dft_length, else the axis's own).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_ONNX_DFT_H
#define REMAT_FRONTENDS_ONNX_DFT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace remat::onnx_frontend {

struct DftPlan {
  /// The transformed axis (non-negative, before the last dim).
  int64_t axis = 0;
  int64_t inSize = 0, outSize = 0;
  /// The last dim's size on each side: 1 (real) or 2 (real, imaginary).
  int64_t inParts = 0, outParts = 0;
  /// [inSize * inParts, outSize * outParts], row-major: row j * inParts + p
  /// is input index j's part p, column k * outParts + q output index k's
  /// part q.
  std::vector<double> matrix;
};

/// Plans a DFT of an operand of \p dims ([batch, signal..., 1 or 2]) along
/// \p axis (negative counts from the end). Errors are messages without the
/// node's name (the importer adds it).
llvm::Expected<DftPlan> planDft(llvm::ArrayRef<int64_t> dims, int64_t axis,
                                std::optional<int64_t> length, bool inverse,
                                bool onesided);

} // namespace remat::onnx_frontend

#endif // REMAT_FRONTENDS_ONNX_DFT_H
