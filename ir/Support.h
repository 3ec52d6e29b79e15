//===- ir/Support.h - Error helpers shared by all of remat ------*- C++ -*-===//
//
// Anything a user or a file can cause is reported as an llvm::Error carrying a
// message that starts lower case, has no final period and names the thing
// (file, node, op, value, expected and actual type). Bugs are asserts.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_SUPPORT_H
#define REMAT_IR_SUPPORT_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace remat {

/// \returns an llvm::Error whose message is \p message.
inline llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str());
}

/// \returns the message of \p err, consuming it.
inline std::string errorToString(llvm::Error err) {
  return llvm::toString(std::move(err));
}

/// \returns \p bytes for people: "512 B", "3.25 MiB", "1.50 GiB" (powers of
/// 1024, two decimals).
inline std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  unsigned unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0)
    std::snprintf(text, sizeof(text), "%llu B", (unsigned long long)bytes);
  else
    std::snprintf(text, sizeof(text), "%.2f %s", value, units[unit]);
  return text;
}

/// \returns \p a * \p b, or std::nullopt if the product overflows int64_t or
/// either factor is negative.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  if (a < 0 || b < 0)
    return std::nullopt;
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result))
    return std::nullopt;
  return result;
}

} // namespace remat

#endif // REMAT_IR_SUPPORT_H
