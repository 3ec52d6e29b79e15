//===- ir/inference/Linalg.cpp - Linear algebra inference rules -----------===//
//
// MatMul, Gemm, Conv, ConvTranspose and remat.PermutedMatMul; MaxPool,
// AveragePool and their gradients remat.MaxPoolGrad, remat.AveragePoolGrad
// (issue 40).
//
// The rules are infer<Infer> for the Infer column of ir/Ops.def
// (Note [The op table]).
//
//===----------------------------------------------------------------------===//
#include "ir/inference/InferenceImpl.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace remat::ir::inference {

Expected<Results> inferMatMul(const Node &node) {
  if (auto err = checkDType(node, 0, isMatMulType, "a float, i32 or i64 dtype"))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  if (auto err = checkMinRank(node, 0, 1))
    return std::move(err);
  if (auto err = checkMinRank(node, 1, 1))
    return std::move(err);
  const TensorType &a = operandType(node, 0);
  const TensorType &b = operandType(node, 1);
  // numpy: a 1-D left operand is a row vector, a 1-D right operand a column
  // vector; the added dim is removed from the result.
  Dims aDims = toDims(a.getDims()), bDims = toDims(b.getDims());
  bool aIsVector = aDims.size() == 1, bIsVector = bDims.size() == 1;
  if (aIsVector)
    aDims.insert(aDims.begin(), 1);
  if (bIsVector)
    bDims.push_back(1);
  int64_t aK = aDims[aDims.size() - 1], bK = bDims[bDims.size() - 2];
  if (aK != bK)
    return nodeError(node, "cannot multiply " + a.str() + " by " + b.str() +
                               ": contraction dims " + Twine(aK) + " and " +
                               Twine(bK) + " differ");
  ArrayRef<int64_t> aBatch = ArrayRef<int64_t>(aDims).drop_back(2);
  ArrayRef<int64_t> bBatch = ArrayRef<int64_t>(bDims).drop_back(2);
  auto batch = broadcastShapes(aBatch, bBatch);
  if (!batch)
    return nodeError(node, "cannot broadcast the batch dims of " + a.str() +
                               " and " + b.str());
  Dims dims = *batch;
  if (!aIsVector)
    dims.push_back(aDims[aDims.size() - 2]);
  if (!bIsVector)
    dims.push_back(bDims[bDims.size() - 1]);
  return Results{known(TensorType(a.getDType(), dims))};
}

Expected<Results> inferGemm(const Node &node) {
  if (auto err = checkDType(node, 0, isMatMulType, "a float, i32 or i64 dtype"))
    return std::move(err);
  for (unsigned i = 1; i < node.getNumOperands(); ++i)
    if (auto err = checkSameDType(node, i, 0))
      return std::move(err);
  if (auto err = checkRank(node, 0, 2))
    return std::move(err);
  if (auto err = checkRank(node, 1, 2))
    return std::move(err);
  auto transA = intAttr(node, "transA", 0);
  if (!transA)
    return transA.takeError();
  auto transB = intAttr(node, "transB", 0);
  if (!transB)
    return transB.takeError();
  for (StringRef name : {"alpha", "beta"})
    if (auto value = floatAttr(node, name, 1.0f); !value)
      return value.takeError();
  const TensorType &a = operandType(node, 0);
  const TensorType &b = operandType(node, 1);
  // ONNX treats any nonzero transA/transB as true.
  int64_t m = a.getDim(*transA ? 1 : 0), aK = a.getDim(*transA ? 0 : 1);
  int64_t bK = b.getDim(*transB ? 1 : 0), n = b.getDim(*transB ? 0 : 1);
  if (aK != bK)
    return nodeError(node, "cannot multiply " + a.str() +
                               (*transA ? " (transposed)" : "") + " by " +
                               b.str() + (*transB ? " (transposed)" : "") +
                               ": contraction dims " + Twine(aK) + " and " +
                               Twine(bK) + " differ");
  Dims dims = {m, n};
  if (node.getNumOperands() == 3 &&
      !broadcastsTo(operandType(node, 2).getDims(), dims))
    return nodeError(node, operandName(node, 2) + " of type " +
                               operandType(node, 2).str() +
                               " does not broadcast to the product shape " +
                               formatDims(dims));
  return Results{known(TensorType(a.getDType(), dims))};
}

namespace {

/// Reads an ints attribute of \p count entries, or \p defaultValue
/// repeated when absent.
Expected<SmallVector<int64_t, 3>> convInts(const Node &node, StringRef name,
                                           size_t count, int64_t defaultValue,
                                           int64_t minimum) {
  auto values = intsAttr(node, name);
  if (!values)
    return values.takeError();
  SmallVector<int64_t, 3> result(count, defaultValue);
  if (!*values)
    return result;
  if ((*values)->size() != count)
    return nodeError(node, "attribute '" + name + "' " +
                               formatDims(**values) + " must have " +
                               Twine(count) + " entries (one per spatial dim)");
  for (size_t i = 0; i < count; ++i) {
    if ((**values)[i] < minimum)
      return nodeError(node, "attribute '" + name + "' " +
                                 formatDims(**values) + " has an entry below " +
                                 Twine(minimum));
    result[i] = (**values)[i];
  }
  return result;
}

/// Reads attributes 'strides' and 'dilations' (one positive entry per
/// spatial dim, default 1) into \p strides and \p dilations.
Error readStridesAndDilations(const Node &node, size_t spatial,
                              SmallVector<int64_t, 3> &strides,
                              SmallVector<int64_t, 3> &dilations) {
  auto stridesAttr = convInts(node, "strides", spatial, 1, 1);
  if (!stridesAttr)
    return stridesAttr.takeError();
  auto dilationsAttr = convInts(node, "dilations", spatial, 1, 1);
  if (!dilationsAttr)
    return dilationsAttr.takeError();
  strides = *stridesAttr;
  dilations = *dilationsAttr;
  return Error::success();
}

/// Reads attribute 'auto_pad' (default NOTSET): NOTSET, VALID, SAME_UPPER or
/// SAME_LOWER.
Expected<std::string> autoPadAttr(const Node &node) {
  auto autoPad = stringAttr(node, "auto_pad", "NOTSET");
  if (!autoPad)
    return autoPad.takeError();
  if (*autoPad != "NOTSET" && *autoPad != "VALID" && *autoPad != "SAME_UPPER" &&
      *autoPad != "SAME_LOWER")
    return nodeError(node, "attribute 'auto_pad' is \"" + *autoPad +
                               "\", expected NOTSET, VALID, SAME_UPPER or "
                               "SAME_LOWER");
  return autoPad;
}

/// The begin pad of one dim under auto_pad SAME_UPPER (\p upper) or
/// SAME_LOWER, for a result of ceil(in / stride) positions: the total
/// padding the last window needs, its odd unit at the end for SAME_UPPER.
/// \returns {begin, end}.
std::pair<int64_t, int64_t> samePads(int64_t in, int64_t stride, int64_t extent,
                                     bool upper) {
  int64_t out = (in + stride - 1) / stride;
  int64_t total = std::max<int64_t>(0, (out - 1) * stride + extent - in);
  int64_t half = total / 2;
  int64_t begin = upper ? half : total - half;
  return {begin, total - begin};
}

} // namespace

Expected<ConvGeometry> convGeometry(const Node &node) {
  bool transpose = node.getOp() == OpKind::ConvTranspose;
  for (unsigned i = 0; i < node.getNumOperands(); ++i)
    if (auto err = checkDType(node, i, isFloatType, "a float dtype"))
      return std::move(err);
  for (unsigned i = 1; i < node.getNumOperands(); ++i)
    if (auto err = checkSameDType(node, i, 0))
      return std::move(err);
  if (auto err = checkMinRank(node, 0, 3))
    return std::move(err);
  const TensorType &x = operandType(node, 0);
  const TensorType &w = operandType(node, 1);
  size_t spatial = x.getRank() - 2;
  if (auto err = checkRank(node, 1, x.getRank()))
    return std::move(err);
  ConvGeometry geometry;
  auto group = intAttr(node, "group", 1);
  if (!group)
    return group.takeError();
  if (*group < 1)
    return nodeError(node, "attribute 'group' is " + Twine(*group) +
                               ", expected a positive value");
  geometry.group = *group;
  int64_t channels = x.getDim(1);
  int64_t outChannels;
  if (!transpose) {
    // W is [M, C / group, k...].
    if (channels % *group != 0 || w.getDim(0) % *group != 0)
      return nodeError(node, "attribute 'group' " + Twine(*group) +
                                 " must divide the channels of " +
                                 operandName(node, 0) + " of type " + x.str() +
                                 " and of " + operandName(node, 1) +
                                 " of type " + w.str());
    if (w.getDim(1) * *group != channels)
      return nodeError(node, operandName(node, 1) + " of type " + w.str() +
                                 " must have " + Twine(channels / *group) +
                                 " input channels (dim 1) for " +
                                 operandName(node, 0) + " of type " + x.str() +
                                 " and group " + Twine(*group));
    outChannels = w.getDim(0);
  } else {
    // W is [C, M / group, k...].
    if (w.getDim(0) != channels || channels % *group != 0)
      return nodeError(node, operandName(node, 1) + " of type " + w.str() +
                                 " must have " + Twine(channels) +
                                 " channels (dim 0, divisible by group " +
                                 Twine(*group) + ") for " +
                                 operandName(node, 0) + " of type " + x.str());
    outChannels = w.getDim(1) * *group;
  }
  if (node.getNumOperands() == 3) {
    const TensorType &b = operandType(node, 2);
    if (b.getRank() != 1 || b.getDim(0) != outChannels)
      return nodeError(node, operandName(node, 2) + " of type " + b.str() +
                                 " must have shape [" + Twine(outChannels) +
                                 "] (one bias per output channel)");
  }
  geometry.kernel.assign(w.getDims().begin() + 2, w.getDims().end());
  if (auto kernelShape = intsAttr(node, "kernel_shape"); !kernelShape) {
    return kernelShape.takeError();
  } else if (*kernelShape &&
             ArrayRef<int64_t>(**kernelShape) !=
                 ArrayRef<int64_t>(geometry.kernel)) {
    return nodeError(node, "attribute 'kernel_shape' " +
                               formatDims(**kernelShape) +
                               " differs from the spatial dims of " +
                               operandName(node, 1) + " of type " + w.str());
  }
  if (auto err = readStridesAndDilations(node, spatial, geometry.strides,
                                         geometry.dilations))
    return std::move(err);
  geometry.outputPadding.assign(spatial, 0);
  if (transpose) {
    auto outputPadding = convInts(node, "output_padding", spatial, 0, 0);
    if (!outputPadding)
      return outputPadding.takeError();
    geometry.outputPadding = *outputPadding;
  }
  // ConvTranspose's output_shape (spatial dims, or all dims) decides the
  // pads (below) and overrides 'pads'.
  std::optional<std::vector<int64_t>> outputShape;
  if (transpose) {
    auto shape = intsAttr(node, "output_shape");
    if (!shape)
      return shape.takeError();
    if (*shape) {
      std::vector<int64_t> dims = **shape;
      if (dims.size() == spatial + 2)
        dims.erase(dims.begin(), dims.begin() + 2);
      if (dims.size() != spatial)
        return nodeError(node, "attribute 'output_shape' " +
                                   formatDims(**shape) + " must have " +
                                   Twine(spatial) + " entries (one per "
                                   "spatial dim)");
      outputShape = dims;
    }
  }
  auto autoPad = autoPadAttr(node);
  if (!autoPad)
    return autoPad.takeError();
  auto pads = intsAttr(node, "pads");
  if (!pads)
    return pads.takeError();
  geometry.padBegin.assign(spatial, 0);
  geometry.padEnd.assign(spatial, 0);
  if (*pads) {
    if (*autoPad != "NOTSET")
      return nodeError(node, "attributes 'pads' and 'auto_pad' \"" + *autoPad +
                                 "\" exclude each other");
    if ((*pads)->size() != 2 * spatial)
      return nodeError(node, "attribute 'pads' " + formatDims(**pads) +
                                 " must have " + Twine(2 * spatial) +
                                 " entries (begin and end per spatial dim)");
    for (size_t i = 0; i < spatial; ++i) {
      geometry.padBegin[i] = (**pads)[i];
      geometry.padEnd[i] = (**pads)[i + spatial];
      if (geometry.padBegin[i] < 0 || geometry.padEnd[i] < 0)
        return nodeError(node, "attribute 'pads' " + formatDims(**pads) +
                                   " has a negative entry");
    }
  }
  geometry.resultDims = {x.getDim(0), outChannels};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = x.getDim(i + 2);
    int64_t extent = geometry.dilations[i] * (geometry.kernel[i] - 1) + 1;
    int64_t stride = geometry.strides[i];
    if (transpose && outputShape) {
      // ONNX: total = stride (in - 1) + output_padding + extent - out;
      // SAME_UPPER puts total / 2 first, otherwise total / 2 goes last,
      // rounded down as ONNX's reference computes it. A negative total (an
      // output_shape beyond the transposed extent) pads negatively: the
      // positions past the extent take no input.
      int64_t full = stride * (in - 1) + geometry.outputPadding[i] + extent;
      int64_t total = full - (*outputShape)[i];
      if ((*outputShape)[i] < 0)
        return nodeError(node, "attribute 'output_shape' " +
                                   formatDims(*outputShape) +
                                   " has a negative entry");
      int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      geometry.padBegin[i] = *autoPad == "SAME_UPPER" ? half : total - half;
      geometry.padEnd[i] = total - geometry.padBegin[i];
      geometry.resultDims.push_back((*outputShape)[i]);
      continue;
    }
    if (transpose) {
      if (*autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER") {
        // The result is in * stride; the padding is what the full
        // transposed extent exceeds it by.
        int64_t full = stride * (in - 1) + geometry.outputPadding[i] + extent;
        int64_t total = std::max<int64_t>(0, full - in * stride);
        int64_t half = total / 2;
        geometry.padBegin[i] = *autoPad == "SAME_UPPER" ? half : total - half;
        geometry.padEnd[i] = total - geometry.padBegin[i];
      }
      int64_t out = stride * (in - 1) + geometry.outputPadding[i] + extent -
                    geometry.padBegin[i] - geometry.padEnd[i];
      if (out < 0)
        return nodeError(node, "the result would have a negative size in "
                               "spatial dim " +
                                   Twine(i));
      geometry.resultDims.push_back(out);
      continue;
    }
    if (*autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER")
      std::tie(geometry.padBegin[i], geometry.padEnd[i]) =
          samePads(in, stride, extent, *autoPad == "SAME_UPPER");
    int64_t padded = in + geometry.padBegin[i] + geometry.padEnd[i];
    if (padded < extent)
      return nodeError(node, "the kernel extent " + Twine(extent) +
                                 " exceeds the padded input size " +
                                 Twine(padded) + " in spatial dim " + Twine(i) +
                                 " of " + operandName(node, 0) + " of type " +
                                 x.str());
    geometry.resultDims.push_back((padded - extent) / stride + 1);
  }
  return geometry;
}

/// Conv, ConvTranspose.
Expected<Results> inferConvLike(const Node &node) {
  auto geometry = convGeometry(node);
  if (!geometry)
    return geometry.takeError();
  return Results{
      known(TensorType(operandType(node, 0).getDType(), geometry->resultDims))};
}

/// remat.PermutedMatMul(A, B) {perm_a, perm_b, perm_y}: A and B of one
/// float dtype and one rank r >= 2; each perm (identity when absent) a
/// permutation of [0, r). Transpose(A, perm_a) is [batch..., M, K] and
/// Transpose(B, perm_b) [batch..., K, N] with the same batch dims (no
/// broadcasting); the result is Transpose([batch..., M, N], perm_y). The
/// layout a strided GEMM can read and write: A's and B's innermost dim stays
/// one of the matrix dims (perm[r - 1] or perm[r - 2] is r - 1), and so does
/// the result's (perm_y[r - 1] is r - 1 or r - 2).
Expected<Results> inferPermutedMatMul(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  if (auto err = checkSameDType(node, 1, 0))
    return std::move(err);
  if (auto err = checkMinRank(node, 0, 2))
    return std::move(err);
  const TensorType &a = operandType(node, 0);
  const TensorType &b = operandType(node, 1);
  int64_t rank = a.getRank();
  if (b.getRank() != unsigned(rank))
    return nodeError(node, "operands " + a.str() + " and " + b.str() +
                               " must have one rank");
  std::vector<int64_t> perms[3];
  const char *names[3] = {"perm_a", "perm_b", "perm_y"};
  for (unsigned p = 0; p < 3; ++p) {
    auto attr = intsAttr(node, names[p]);
    if (!attr)
      return attr.takeError();
    if (*attr) {
      perms[p] = **attr;
    } else {
      perms[p].resize(rank);
      std::iota(perms[p].begin(), perms[p].end(), 0);
    }
    if (!isPermutation(perms[p], rank))
      return nodeError(
          node, "attribute '" + Twine(names[p]) + "' " + formatDims(perms[p]) +
                    " is not a permutation of the " + Twine(rank) + " dims");
    bool strided = p == 2 ? perms[p][rank - 1] >= rank - 2
                          : perms[p][rank - 1] == rank - 1 ||
                                perms[p][rank - 2] == rank - 1;
    if (!strided)
      return nodeError(node, "attribute '" + Twine(names[p]) + "' " +
                                 formatDims(perms[p]) +
                                 (p == 2 ? " makes a batch dim of the "
                                           "product the result's last"
                                         : " moves the operand's last dim "
                                           "out of the matrix dims"));
  }
  auto permuted = [&](const TensorType &type, ArrayRef<int64_t> perm) {
    Dims dims;
    for (int64_t d : perm)
      dims.push_back(type.getDim(d));
    return dims;
  };
  Dims pa = permuted(a, perms[0]), pb = permuted(b, perms[1]);
  if (pa[rank - 1] != pb[rank - 2])
    return nodeError(node, "cannot multiply " + formatDims(pa) + " by " +
                               formatDims(pb) +
                               " (the permuted operands): "
                               "contraction dims " +
                               Twine(pa[rank - 1]) + " and " +
                               Twine(pb[rank - 2]) + " differ");
  if (!std::equal(pa.begin(), pa.end() - 2, pb.begin()))
    return nodeError(node, "the permuted operands " + formatDims(pa) + " and " +
                               formatDims(pb) +
                               " must have the same batch dims");
  Dims product(pa.begin(), pa.end() - 1);
  product.push_back(pb[rank - 1]);
  Dims dims;
  for (int64_t d : perms[2])
    dims.push_back(product[d]);
  return Results{known(TensorType(a.getDType(), dims))};
}

Expected<PoolGeometry> poolGeometry(const Node &node,
                                    ArrayRef<int64_t> inputDims) {
  bool average = node.getOp() == OpKind::AveragePool ||
                 node.getOp() == OpKind::AveragePoolGrad;
  if (inputDims.size() < 3)
    return nodeError(node,
                     "pools an input of dims " + formatDims(inputDims) +
                         ", expected rank 3 or more ([N, C, spatial...])");
  size_t spatial = inputDims.size() - 2;
  PoolGeometry geometry;
  auto kernelShape = intsAttr(node, "kernel_shape");
  if (!kernelShape)
    return kernelShape.takeError();
  if (!*kernelShape)
    return nodeError(node, "needs attribute 'kernel_shape'");
  auto kernel = convInts(node, "kernel_shape", spatial, 1, 1);
  if (!kernel)
    return kernel.takeError();
  geometry.kernel = *kernel;
  if (auto err = readStridesAndDilations(node, spatial, geometry.strides,
                                         geometry.dilations))
    return std::move(err);
  auto ceilMode = flagAttr(node, "ceil_mode", false);
  if (!ceilMode)
    return ceilMode.takeError();
  if (average) {
    auto countIncludePad = flagAttr(node, "count_include_pad", false);
    if (!countIncludePad)
      return countIncludePad.takeError();
    geometry.countIncludePad = *countIncludePad;
  } else {
    // storage_order only orders the Indices result, which is refused.
    auto storageOrder = flagAttr(node, "storage_order", false);
    if (!storageOrder)
      return storageOrder.takeError();
  }
  auto autoPad = autoPadAttr(node);
  if (!autoPad)
    return autoPad.takeError();
  auto pads = convInts(node, "pads", 2 * spatial, 0, 0);
  if (!pads)
    return pads.takeError();
  if (*autoPad != "NOTSET" && llvm::any_of(*pads, [](int64_t p) { return p; }))
    return nodeError(node, "attributes 'pads' and 'auto_pad' \"" + *autoPad +
                               "\" exclude each other");
  geometry.resultDims = {inputDims[0], inputDims[1]};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = inputDims[i + 2];
    int64_t extent = geometry.dilations[i] * (geometry.kernel[i] - 1) + 1;
    int64_t stride = geometry.strides[i];
    int64_t begin = (*pads)[i], end = (*pads)[i + spatial];
    if (*autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER")
      std::tie(begin, end) =
          samePads(in, stride, extent, *autoPad == "SAME_UPPER");
    if (begin >= extent || end >= extent)
      return nodeError(node, "pads " + Twine(begin) + " and " + Twine(end) +
                                 " of spatial dim " + Twine(i) +
                                 " must be below the window extent " +
                                 Twine(extent) + " (a window of pads only)");
    int64_t padded = in + begin + end;
    if (padded < extent)
      return nodeError(node, "the window extent " + Twine(extent) +
                                 " exceeds the padded input size " +
                                 Twine(padded) + " in spatial dim " + Twine(i) +
                                 " of an input of dims " +
                                 formatDims(inputDims));
    int64_t out = (padded - extent) / stride + 1;
    if (*ceilMode && (padded - extent) % stride != 0) {
      ++out;
      // As torch: no window starts in the end pads.
      if ((out - 1) * stride >= in + begin)
        --out;
    }
    geometry.padBegin.push_back(begin);
    geometry.padEnd.push_back(end);
    geometry.resultDims.push_back(out);
  }
  return geometry;
}

/// MaxPool and AveragePool: a float operand [N, C, spatial...]; MaxPool's
/// Indices result is refused.
Expected<Results> inferPool(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  if (node.getNumResults() > 1)
    return nodeError(node, "has an Indices result, which remat does not "
                           "support (only Y)");
  const TensorType &x = operandType(node, 0);
  auto geometry = poolGeometry(node, x.getDims());
  if (!geometry)
    return geometry.takeError();
  return Results{known(TensorType(x.getDType(), geometry->resultDims))};
}

/// remat.MaxPoolGrad(dy, X) and remat.AveragePoolGrad(dy, shape of X): dy
/// of the pooled type; the result has X's type.
Expected<Results> inferPoolGrad(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  const TensorType &dy = operandType(node, 0);
  Dims input;
  if (node.getOp() == OpKind::MaxPoolGrad) {
    if (auto err = checkSameDType(node, 1, 0))
      return std::move(err);
    input.assign(operandType(node, 1).getDims().begin(),
                 operandType(node, 1).getDims().end());
  } else {
    if (auto err = checkI64Vector(node, 1))
      return std::move(err);
    auto values = constantInts(node.getOperand(1));
    if (!values)
      return nodeError(node, "needs the shape " + operandName(node, 1) +
                                 " as a constant");
    input.assign(values->begin(), values->end());
  }
  auto geometry = poolGeometry(node, input);
  if (!geometry)
    return geometry.takeError();
  if (auto err = checkOperandType(
          node, 0, TensorType(dy.getDType(), geometry->resultDims)))
    return std::move(err);
  return Results{known(TensorType(dy.getDType(), input))};
}

} // namespace remat::ir::inference
