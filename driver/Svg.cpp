//===- driver/Svg.cpp - Helpers for the SVG plots remat writes ------------===//
#include "driver/Svg.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

namespace remat::driver::svg {

std::string escapeXml(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

double niceStep(double range, unsigned maxTicks) {
  if (range <= 0 || maxTicks == 0)
    return 1;
  double base = std::pow(10.0, std::floor(std::log10(range / maxTicks)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (base * m * maxTicks >= range)
      return base * m;
  return base * 10;
}

std::string fmt(double value) { return llvm::formatv("{0:F1}", value).str(); }

std::string fmtTick(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15)
    return std::to_string((long long)value);
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", value);
  return text;
}

} // namespace remat::driver::svg
