//===- tests/unit/HashTest.cpp - SplitMix64 and FNV-1a (ir/Hash.h) -------===//
//
// The published test vectors of SplitMix64 (Vigna's splitmix64.c, seed 0)
// and 64-bit FNV-1a: weights, generated inputs, Dropout seeds and masks are
// all drawn from these, so a changed constant must fail here.
//
//===----------------------------------------------------------------------===//
#include "ir/Hash.h"
#include "runtime/DropoutMask.h"

#include "llvm/ADT/StringRef.h"

#include <doctest/doctest.h>

#include <string>

using namespace remat;

// Usable in constant expressions (and so in device code under nvcc).
static_assert(ir::splitMix64(0) == 0xE220A8397B1DCDAFull);
static_assert(ir::fnv1a("a") == 0xAF63DC4C8601EC8Cull);

TEST_CASE("splitMix64 gives the reference stream") {
  // A stream seeded with 0: state advances by gamma, output is the mix of it.
  uint64_t state = 0;
  const uint64_t expected[] = {0xE220A8397B1DCDAFull, 0x6E789E6AA1B965F4ull,
                               0x06C45D188009454Full};
  for (uint64_t want : expected) {
    CHECK(ir::splitMix64(state) == want);
    state += ir::kSplitMix64Gamma;
    CHECK(ir::splitMix64Finalize(state) == want);
  }
}

TEST_CASE("fnv1a gives the reference hashes") {
  CHECK(ir::fnv1a("") == 0xCBF29CE484222325ull);
  CHECK(ir::fnv1a("a") == 0xAF63DC4C8601EC8Cull);
  CHECK(ir::fnv1a(std::string("foobar")) == 0x85944171F73967E8ull);
  CHECK(ir::fnv1a(llvm::StringRef("foobar")) == 0x85944171F73967E8ull);
  // Bytes above 0x7f hash as unsigned.
  CHECK(ir::fnv1a("\xff") ==
        ((0xCBF29CE484222325ull ^ 0xffu) * 0x100000001B3ull));
}

TEST_CASE("Dropout masks draw from splitMix64") {
  // Element i of seed s: output i + 1 of the stream keyed splitMix64(s).
  uint64_t key = runtime::dropoutKey(7);
  CHECK(key == ir::splitMix64(7));
  for (uint64_t i : {0u, 1u, 1000u})
    CHECK(runtime::dropoutBits24(key, i) ==
          ir::splitMix64(key + i * ir::kSplitMix64Gamma) >> 40);
}
