//===- fuzz/FuzzCommon.h - Shared setup of remat's fuzz targets -*- C++ -*-===//
//
// Each fuzz target feeds libFuzzer's bytes to one input format. An error
// (llvm::Error) is a correct answer; a crash, a sanitizer report, a leak, an
// invariant broken (fuzzCheck) or a timeout is a finding. Sizes are checked
// against a small memory limit so that a declared 4 TB tensor is an error,
// as it is for the tools.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FUZZ_FUZZCOMMON_H
#define REMAT_FUZZ_FUZZCOMMON_H

#include "ir/Limits.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace remat::fuzz {

/// The memory limit of every target: a finding must not be an OOM of the
/// fuzzer itself.
constexpr uint64_t kFuzzMemoryLimitBytes = 64ull << 20;

inline void initialize() { ir::setMemoryLimitBytes(kFuzzMemoryLimitBytes); }

/// Aborts (a finding) with \p what when \p condition is false.
inline void fuzzCheck(bool condition, const char *what) {
  if (condition)
    return;
  llvm::errs() << "fuzz invariant broken: " << what << '\n';
  std::abort();
}

/// Aborts with \p what and the message of \p err when it is an error.
inline void fuzzCheckNoError(llvm::Error err, const char *what) {
  if (!err)
    return;
  llvm::errs() << "fuzz invariant broken: " << what << ": "
               << llvm::toString(std::move(err)) << '\n';
  std::abort();
}

} // namespace remat::fuzz

#endif // REMAT_FUZZ_FUZZCOMMON_H
