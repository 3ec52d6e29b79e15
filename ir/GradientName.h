//===- ir/GradientName.h - How gradients are named --------------*- C++ -*-===//
//
// Autodiff names the gradient of weight `w` `w_grad` (and the gradient
// values it builds on the way after the value they belong to); the tools
// recognise a training step, and reports a gradient, by that name. This is
// the one place the rule is written.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_GRADIENTNAME_H
#define REMAT_IR_GRADIENTNAME_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace remat::ir {

/// The suffix that marks a gradient's name.
inline constexpr llvm::StringLiteral kGradientSuffix = "_grad";

/// \returns the name of the gradient of the value named \p value ("w" gives
/// "w_grad"); Graph::uniqueName() may still add a suffix to make it unique.
inline std::string gradientName(llvm::StringRef value) {
  return (value + kGradientSuffix).str();
}

/// \returns true if \p name is a gradient's name (ends in "_grad").
inline bool isGradientName(llvm::StringRef name) {
  return name.endswith(kGradientSuffix);
}

} // namespace remat::ir

#endif // REMAT_IR_GRADIENTNAME_H
