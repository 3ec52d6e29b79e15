//===- ir/Hash.h - Stable hashes and counter-based random bits --*- C++ -*-===//
//
// The one definition of SplitMix64 and FNV-1a. Weight initialization, the
// inputs remat-run generates, the Dropout seeds the ONNX importer assigns and
// the Dropout masks every backend draws all come from these, so their values
// are part of remat's output: changing a constant here changes results.
//
// Plain C++ with no dependencies (no LLVM types), usable from CUDA device
// code: under nvcc the functions are __host__ __device__.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_HASH_H
#define REMAT_IR_HASH_H

#include <cstddef>
#include <cstdint>
#include <string_view>

#if defined(__CUDACC__)
#define REMAT_HOST_DEVICE __host__ __device__
#else
#define REMAT_HOST_DEVICE
#endif

namespace remat::ir {

/// SplitMix64's increment (Steele, Lea and Flood 2014), 2^64 / golden ratio.
inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

/// The SplitMix64 output function: a bijection on uint64 with good
/// avalanche. Output n of the stream that starts at state s is
/// splitMix64Finalize(s + n * kSplitMix64Gamma), so a counter-based
/// generator needs no state.
REMAT_HOST_DEVICE constexpr uint64_t splitMix64Finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// \returns the next SplitMix64 output of a stream at \p state (the state
/// then advances by kSplitMix64Gamma): splitMix64Finalize(state + gamma).
REMAT_HOST_DEVICE constexpr uint64_t splitMix64(uint64_t state) {
  return splitMix64Finalize(state + kSplitMix64Gamma);
}

/// 64-bit FNV-1a of the \p size bytes at \p data: the same in every build and
/// on every machine (std::hash promises neither).
REMAT_HOST_DEVICE constexpr uint64_t fnv1a(const char *data, size_t size) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= static_cast<uint8_t>(data[i]);
    hash *= 0x100000001B3ull;
  }
  return hash;
}

/// 64-bit FNV-1a of \p text (an llvm::StringRef converts implicitly).
constexpr uint64_t fnv1a(std::string_view text) {
  return fnv1a(text.data(), text.size());
}

} // namespace remat::ir

#endif // REMAT_IR_HASH_H
