//===- frontends/onnx/Resize.h - Resize as constant interpolations -*- C++ -*-===//
//
// remat has no Resize op: with static shapes, resizing one axis is a linear
// map with constant weights, out[i] = sum_k w[i][k] * in[idx[i][k]], so the
// importer emits each resized axis as a Gather (nearest: one tap of weight 1
// per output index) or a MatMul by the [out, in] weight matrix (linear,
// cubic, antialiased), and the rest of remat (shape inference, kernels,
// gradients, recompute) needs nothing of its own.
//
// planResize computes those weights as ONNX's reference (opset 19) does:
// the output size from 'sizes' (with keep_aspect_ratio_policy) or 'scales';
// each output index's source coordinate by coordinate_transformation_mode;
// its taps, the n nearest input indices (n from the mode: 2 for nearest and
// linear, 4 for cubic, wider when antialiasing a downscale), clamped to the
// edge; exclude_outside and tf_crop_and_resize's extrapolation. An axis
// whose scale is 1 and whose size and roi do not change is left out.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_ONNX_RESIZE_H
#define REMAT_FRONTENDS_ONNX_RESIZE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace remat::onnx_frontend {

/// Resize's attributes, with ONNX's defaults.
struct ResizeAttrs {
  std::string mode = "nearest";
  std::string coordinateMode = "half_pixel";
  std::string nearestMode = "round_prefer_floor";
  std::string keepAspectRatioPolicy = "stretch";
  double cubicCoeffA = -0.75;
  double extrapolationValue = 0;
  bool excludeOutside = false;
  bool antialias = false;
  /// The axes 'roi', 'scales' and 'sizes' give (opset 18); all when unset.
  std::optional<std::vector<int64_t>> axes;
};

/// One resized axis.
struct ResizeAxis {
  int64_t axis = 0;
  int64_t inSize = 0, outSize = 0;
  /// For each output index, its (input index, weight) taps; an index
  /// appears once (clamped taps are merged).
  std::vector<std::vector<std::pair<int64_t, double>>> taps;
  /// For each output index, whether it lies outside the roi
  /// (tf_crop_and_resize): its value is the extrapolation value, its taps
  /// are empty.
  std::vector<bool> outside;
  /// Every output index has one tap of weight 1 and none lies outside: the
  /// axis is a Gather.
  bool isSelection() const;
  /// Any output index lies outside the roi.
  bool anyOutside() const;
};

struct ResizePlan {
  /// The result's dims.
  std::vector<int64_t> outDims;
  /// The axes that change, ascending.
  std::vector<ResizeAxis> axes;
};

/// Plans a Resize of an operand of \p dims. \p roi, \p scales and \p sizes
/// are the constant inputs given (none when omitted or empty). Errors are
/// messages without the node's name (the importer adds it).
llvm::Expected<ResizePlan>
planResize(llvm::ArrayRef<int64_t> dims, const ResizeAttrs &attrs,
           std::optional<std::vector<double>> roi,
           std::optional<std::vector<double>> scales,
           std::optional<std::vector<int64_t>> sizes);

} // namespace remat::onnx_frontend

#endif // REMAT_FRONTENDS_ONNX_RESIZE_H
