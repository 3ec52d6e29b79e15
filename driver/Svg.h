//===- driver/Svg.h - Helpers for the SVG plots remat writes ----*- C++ -*-===//
//
// The memory timeline (--report) and remat-sweep's trade-off curve are
// written by remat itself as SVG; these are the pieces they share.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_DRIVER_SVG_H
#define REMAT_DRIVER_SVG_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace remat::driver::svg {

/// \returns \p text with &, <, > and " escaped for SVG text and attributes.
std::string escapeXml(llvm::StringRef text);

/// \returns the smallest 1, 2 or 5 times a power of ten that cuts \p range
/// into at most \p maxTicks steps.
double niceStep(double range, unsigned maxTicks);

/// \returns a coordinate with one decimal.
std::string fmt(double value);

/// \returns a tick value: an integer without decimals, else up to 3
/// significant digits.
std::string fmtTick(double value);

} // namespace remat::driver::svg

#endif // REMAT_DRIVER_SVG_H
