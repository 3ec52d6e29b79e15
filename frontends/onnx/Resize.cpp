//===- frontends/onnx/Resize.cpp - Resize as constant interpolations ------===//
//
// See Resize.h. The formulas follow ONNX's operator text and its reference
// implementation at opset 19 (onnx/reference/ops/op_resize.py), whose
// outputs are the conformance cases' expected values.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/Resize.h"

#include "ir/Limits.h"
#include "ir/Support.h"
#include "ir/Types.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <map>

using llvm::ArrayRef;
using llvm::Expected;
using llvm::Twine;

namespace remat::onnx_frontend {

namespace {

/// The most weights one resized axis may have ([out, in]): a MatMul by a
/// larger constant is not what a user meant to train.
constexpr int64_t kMaxResizeWeights = int64_t(1) << 24;

/// \returns \p size as a dim, or none when it is not a finite number below
/// 2^62 (a scale that would overflow the int64 conversion).
std::optional<int64_t> toDim(double size) {
  if (!(size >= 0) || size >= 4.6e18)
    return std::nullopt;
  return int64_t(size);
}

bool isCloseTo(double a, double b) {
  // Python's math.isclose with its default relative tolerance, as the
  // reference decides that an axis is left as it is.
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

/// The source coordinate of output index \p y of an axis of \p in entries
/// resized by \p scale to \p out entries.
double sourceCoordinate(const ResizeAttrs &attrs, double y, double scale,
                        int64_t in, int64_t out, double roiStart,
                        double roiEnd) {
  double outWidth = scale * double(in);
  const std::string &mode = attrs.coordinateMode;
  if (mode == "align_corners")
    return outWidth == 1 ? 0.0 : y * double(in - 1) / (outWidth - 1);
  if (mode == "asymmetric")
    return y / scale;
  if (mode == "tf_crop_and_resize") {
    double x = outWidth == 1 ? (roiEnd - roiStart) * double(in - 1) / 2
                             : y * (roiEnd - roiStart) * double(in - 1) /
                                   (outWidth - 1);
    return x + roiStart * double(in - 1);
  }
  if (mode == "pytorch_half_pixel")
    return outWidth == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    double adjustment = double(out) / outWidth;
    double offset = double(in) / 2 * (1 - adjustment);
    return offset + (y + 0.5) / scale - 0.5;
  }
  return (y + 0.5) / scale - 0.5; // half_pixel
}

/// The cubic convolution kernel with coefficient \p a at distance \p x.
double cubicKernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1)
    return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2)
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

/// The weights of the taps around a source coordinate whose distance past
/// its left tap is \p ratio, in (0, 1]; there are 2 - 2 * start of them,
/// the first start taps left of the left tap's right neighbour.
std::vector<double> coefficients(const ResizeAttrs &attrs, double ratio,
                                 double scale) {
  if (attrs.mode == "nearest") {
    if (ratio == 1)
      return {0, 1};
    const std::string &rounding = attrs.nearestMode;
    if (rounding == "round_prefer_ceil")
      return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (rounding == "floor")
      return {1, 0};
    if (rounding == "ceil")
      return {0, 1};
    return {double(ratio <= 0.5), double(ratio > 0.5)}; // round_prefer_floor
  }
  bool linear = attrs.mode == "linear";
  if (!attrs.antialias) {
    if (linear)
      return {1 - ratio, ratio};
    double a = attrs.cubicCoeffA;
    return {cubicKernel(ratio + 1, a), cubicKernel(ratio, a),
            cubicKernel(1 - ratio, a), cubicKernel(2 - ratio, a)};
  }
  // Antialiasing a downscale stretches the kernel by 1 / scale and
  // normalises its weights.
  double s = std::min(scale, 1.0);
  int64_t start = int64_t(std::floor((linear ? -1 : -2) / s) + 1);
  std::vector<double> weights;
  double sum = 0;
  for (int64_t i = start; i < 2 - start; ++i) {
    double arg = (double(i) - ratio) * s;
    double w = linear ? std::clamp(1 - std::fabs(arg), 0.0, 1.0)
                      : cubicKernel(arg, attrs.cubicCoeffA);
    weights.push_back(w);
    sum += w;
  }
  for (double &w : weights)
    w /= sum;
  return weights;
}

/// The taps of one axis.
ResizeAxis planAxis(const ResizeAttrs &attrs, int64_t axis, int64_t in,
                    int64_t out, double scale, double roiStart,
                    double roiEnd) {
  ResizeAxis plan;
  plan.axis = axis;
  plan.inSize = in;
  plan.outSize = out;
  plan.taps.resize(size_t(out));
  plan.outside.assign(size_t(out), false);
  bool crop = attrs.coordinateMode == "tf_crop_and_resize";
  for (int64_t y = 0; y < out; ++y) {
    double x = sourceCoordinate(attrs, double(y), scale, in, out, roiStart,
                                roiEnd);
    if (crop && (x < 0 || x > double(in - 1))) {
      plan.outside[size_t(y)] = true;
      continue;
    }
    // The reference prefers the taps left of x: an integral x is the right
    // one of its pair (ratio 1).
    double floorX = std::floor(x);
    bool integral = x == floorX;
    double ratio = integral ? 1.0 : x - floorX;
    std::vector<double> weights = coefficients(attrs, ratio, scale);
    int64_t n = int64_t(weights.size());
    int64_t left = int64_t(floorX) - (integral ? 1 : 0);
    int64_t first = left + 1 - n / 2;
    if (attrs.excludeOutside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (first + k < 0 || first + k >= in)
          weights[size_t(k)] = 0;
        sum += weights[size_t(k)];
      }
      if (sum != 0)
        for (double &w : weights)
          w /= sum;
    }
    // Taps beyond the edge read the edge (the reference pads with it).
    std::map<int64_t, double> merged;
    for (int64_t k = 0; k < n; ++k)
      if (weights[size_t(k)] != 0)
        merged[std::clamp<int64_t>(first + k, 0, in - 1)] += weights[size_t(k)];
    for (const auto &[index, weight] : merged)
      plan.taps[size_t(y)].push_back({index, weight});
  }
  return plan;
}

} // namespace

bool ResizeAxis::isSelection() const {
  return llvm::all_of(taps, [](const auto &row) {
           return row.size() == 1 && row[0].second == 1;
         }) &&
         !anyOutside();
}

bool ResizeAxis::anyOutside() const { return llvm::is_contained(outside, true); }

Expected<ResizePlan> planResize(ArrayRef<int64_t> dims,
                                const ResizeAttrs &attrs,
                                std::optional<std::vector<double>> roi,
                                std::optional<std::vector<double>> scales,
                                std::optional<std::vector<int64_t>> sizes) {
  auto oneOf = [](const std::string &value,
                  std::initializer_list<const char *> allowed) {
    return llvm::any_of(allowed, [&](const char *a) { return value == a; });
  };
  if (!oneOf(attrs.mode, {"nearest", "linear", "cubic"}))
    return makeError("mode '" + attrs.mode +
                     "' is not one of 'nearest', 'linear' and 'cubic'");
  if (!oneOf(attrs.coordinateMode,
             {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
              "align_corners", "asymmetric", "tf_crop_and_resize"}))
    return makeError("coordinate_transformation_mode '" +
                     attrs.coordinateMode + "' is unknown");
  if (!oneOf(attrs.nearestMode,
             {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}))
    return makeError("nearest_mode '" + attrs.nearestMode + "' is unknown");
  if (!oneOf(attrs.keepAspectRatioPolicy,
             {"stretch", "not_larger", "not_smaller"}))
    return makeError("keep_aspect_ratio_policy '" +
                     attrs.keepAspectRatioPolicy + "' is unknown");
  if (attrs.antialias && attrs.mode == "nearest")
    return makeError("antialias applies to modes 'linear' and 'cubic', not "
                     "'nearest'");

  int64_t rank = int64_t(dims.size());
  std::vector<int64_t> axes;
  if (attrs.axes) {
    for (int64_t axis : *attrs.axes) {
      if (axis < -rank || axis >= rank)
        return makeError("axis " + Twine(axis) + " is out of range for rank " +
                         Twine(rank));
      axis = axis < 0 ? axis + rank : axis;
      if (llvm::is_contained(axes, axis))
        return makeError("axis " + Twine(axis) + " is given twice");
      axes.push_back(axis);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  size_t count = axes.size();
  if (scales && sizes)
    return makeError("has both 'scales' and 'sizes'; ONNX allows one");
  if (!scales && !sizes)
    return makeError("has neither 'scales' nor 'sizes'");
  if ((scales ? scales->size() : sizes->size()) != count)
    return makeError(Twine(scales ? "'scales'" : "'sizes'") + " has " +
                     Twine(scales ? scales->size() : sizes->size()) +
                     " entries, expected " + Twine(count) +
                     " (one per resized axis)");
  bool crop = attrs.coordinateMode == "tf_crop_and_resize";
  if (crop && (!roi || roi->size() != 2 * count))
    return makeError("coordinate_transformation_mode 'tf_crop_and_resize' "
                     "needs a constant 'roi' of " +
                     Twine(2 * count) + " entries (starts, then ends)");

  std::vector<double> scale(size_t(rank), 1.0);
  std::vector<int64_t> out(dims.begin(), dims.end());
  for (size_t i = 0; i < count; ++i) {
    int64_t d = axes[i];
    if (scales) {
      double s = (*scales)[i];
      if (!(s > 0) || !std::isfinite(s))
        return makeError("scale " + Twine(i) + " is not a positive number");
      scale[size_t(d)] = s;
      auto size = toDim(std::floor(double(dims[size_t(d)]) * s));
      if (!size)
        return makeError("scale " + Twine(i) + " makes axis " + Twine(d) +
                         " too large");
      out[size_t(d)] = *size;
    } else {
      int64_t size = (*sizes)[i];
      if (size < 0)
        return makeError("size " + Twine(i) + " is " + Twine(size));
      if (dims[size_t(d)] == 0 && size != 0)
        return makeError("cannot resize axis " + Twine(d) +
                         " of 0 entries to " + Twine(size));
      scale[size_t(d)] =
          dims[size_t(d)] == 0 ? 1.0 : double(size) / double(dims[size_t(d)]);
      out[size_t(d)] = size;
    }
  }
  if (sizes && attrs.keepAspectRatioPolicy != "stretch") {
    // One scale for every resized axis, the sizes a bound on each.
    double common = scale[size_t(axes[0])];
    for (int64_t d : axes)
      common = attrs.keepAspectRatioPolicy == "not_larger"
                   ? std::min(common, scale[size_t(d)])
                   : std::max(common, scale[size_t(d)]);
    for (int64_t d : axes) {
      scale[size_t(d)] = common;
      auto size = toDim(common * double(dims[size_t(d)]) + 0.5);
      if (!size)
        return makeError("the sizes make axis " + Twine(d) + " too large");
      out[size_t(d)] = *size;
    }
  }
  // Checked before the taps of each output index are made.
  if (auto err = ir::checkAllocation(ir::TensorType(ir::DType::F32, out),
                                     "the result"))
    return std::move(err);

  ResizePlan plan;
  plan.outDims = out;
  std::vector<int64_t> sorted = axes;
  llvm::sort(sorted);
  for (int64_t d : sorted) {
    size_t i = size_t(llvm::find(axes, d) - axes.begin());
    double roiStart = crop ? (*roi)[i] : 0.0;
    double roiEnd = crop ? (*roi)[count + i] : 1.0;
    int64_t in = dims[size_t(d)];
    if (isCloseTo(scale[size_t(d)], 1.0) && out[size_t(d)] == in &&
        roiStart == 0 && isCloseTo(roiEnd, 1.0))
      continue;
    // Nearest is a Gather unless tf_crop_and_resize extrapolates.
    if ((attrs.mode != "nearest" || crop) && in != 0 &&
        out[size_t(d)] > kMaxResizeWeights / in)
      return makeError("resizing axis " + Twine(d) + " from " + Twine(in) +
                       " to " + Twine(out[size_t(d)]) +
                       " entries needs a weight matrix of more than 2^24 "
                       "entries (remat imports a Resize as a MatMul by one "
                       "per axis)");
    plan.axes.push_back(planAxis(attrs, d, in, out[size_t(d)],
                                 scale[size_t(d)], roiStart, roiEnd));
  }
  return plan;
}

} // namespace remat::onnx_frontend
