//===- runtime/DropoutMask.h - Dropout's counter-based RNG ------*- C++ -*-===//
//
// Every backend draws Dropout masks from this one generator, so that a
// Dropout recomputed by remat, or run on another backend, reproduces the
// original mask bit for bit without storing it (DESIGN.md, "Training step").
//
// Element i of a Dropout with seed s is kept when
//   u = dropoutBits24(dropoutKey(s), i) / 2^24  >=  ratio,
// i.e. when dropoutBits24(...) >= dropoutThreshold(ratio); kept elements are
// scaled by 1 / (1 - ratio) computed in the element type (x * scale, as
// ONNX's reference and onnxruntime compute it), dropped ones are 0. The bits
// are SplitMix64 (Steele, Lea and Flood 2014): element i is output i + 1 of a
// SplitMix64 stream whose state starts at splitMix64(seed), a pure
// function of (seed, index) that vectorizes and needs no state.
//
// Plain functions usable from CUDA device code; SplitMix64 itself comes from
// ir/Hash.h, plain C++ too.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_DROPOUTMASK_H
#define REMAT_RUNTIME_DROPOUTMASK_H

#include "ir/Hash.h"

#include <cmath>
#include <cstdint>

namespace remat::runtime {

/// \returns the stream key of a Dropout node's \p seed.
REMAT_HOST_DEVICE inline uint64_t dropoutKey(uint64_t seed) {
  return ir::splitMix64(seed);
}

/// \returns 24 uniform random bits for element \p index of stream \p key.
REMAT_HOST_DEVICE inline uint32_t dropoutBits24(uint64_t key, uint64_t index) {
  return static_cast<uint32_t>(
      ir::splitMix64Finalize(key + (index + 1) * ir::kSplitMix64Gamma) >> 40);
}

/// \returns the smallest 24-bit value kept at \p ratio: bits / 2^24 >= ratio
/// exactly when bits >= ceil(ratio * 2^24) (the product is exact in double).
REMAT_HOST_DEVICE inline uint32_t dropoutThreshold(float ratio) {
  double scaled = std::ceil(static_cast<double>(ratio) * 16777216.0);
  if (!(scaled > 0))
    return 0;
  return scaled >= 16777216.0 ? 16777216u : static_cast<uint32_t>(scaled);
}

} // namespace remat::runtime

#endif // REMAT_RUNTIME_DROPOUTMASK_H
