//===- ir/inference/Normalization.cpp - Normalization inference rules -----===//
//
// Softmax, LogSoftmax, LayerNormalization, SoftmaxCrossEntropyLoss and
// their one-pass gradients remat.SoftmaxGrad, remat.LayerNormalizationGrad
// and remat.SoftmaxCrossEntropyGrad.
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
#include <vector>

namespace remat::ir::inference {

/// Softmax, LogSoftmax.
Expected<Results> inferSoftmaxLike(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  auto axis = intAttr(node, "axis", -1);
  if (!axis)
    return axis.takeError();
  const TensorType &x = operandType(node, 0);
  if (auto normalized =
          normalizeAxis(node, "attribute 'axis'", *axis, x.getRank());
      !normalized)
    return normalized.takeError();
  return Results{known(x)};
}

/// Y has X's type. Mean and InvStdDev keep X's leading dims and have size 1
/// from 'axis' on. Their dtype is the stash type U: f32 when stash_type is 1
/// (the default) and X is f16, bf16 or f32; otherwise X's own dtype, so that
/// f64 models keep f64 statistics and a stash_type other than 1 means "no
/// widening". (ONNX's schema would make U = stash_type, i.e. f32 even for an
/// f64 X; remat never narrows the statistics below X's precision.)
Expected<Results> inferLayerNormalization(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  for (unsigned i = 1; i < node.getNumOperands(); ++i)
    if (auto err = checkSameDType(node, i, 0))
      return std::move(err);
  auto axisAttr = intAttr(node, "axis", -1);
  if (!axisAttr)
    return axisAttr.takeError();
  if (auto epsilon = floatAttr(node, "epsilon", 1e-5f); !epsilon)
    return epsilon.takeError();
  auto stashType = intAttr(node, "stash_type", 1);
  if (!stashType)
    return stashType.takeError();
  std::optional<DType> stash = fromOnnxCode(*stashType);
  if (!stash || !isFloat(*stash))
    return nodeError(node, "attribute 'stash_type' is " + Twine(*stashType) +
                               ", expected the ONNX code of a float dtype");

  const TensorType &x = operandType(node, 0);
  auto axis = normalizeAxis(node, "attribute 'axis'", *axisAttr, x.getRank());
  if (!axis)
    return axis.takeError();
  ArrayRef<int64_t> normalized = x.getDims().drop_front(*axis);
  for (unsigned i = 1; i < node.getNumOperands(); ++i) {
    const TensorType &param = operandType(node, i);
    if (!broadcastsTo(param.getDims(), normalized))
      return nodeError(node, operandName(node, i) + " of type " + param.str() +
                                 " does not match the normalized shape " +
                                 formatDims(normalized) + " of " + x.str());
  }

  Results results{known(x)};
  DType xDType = x.getDType();
  DType statsDType = xDType;
  if (*stashType == onnxCode(DType::F32) &&
      (xDType == DType::F16 || xDType == DType::BF16 || xDType == DType::F32))
    statsDType = DType::F32;
  Dims statsDims = toDims(x.getDims());
  for (size_t i = *axis; i < statsDims.size(); ++i)
    statsDims[i] = 1;
  for (unsigned i = 1; i < node.getNumResults(); ++i)
    results.push_back(known(TensorType(statsDType, statsDims)));
  return results;
}

namespace {

/// Checks SoftmaxCrossEntropyLoss's scores (operand 0: float, rank >= 2)
/// and labels (operand 1: i32 or i64, [N, d1, ..., dk] for scores [N, C,
/// d1, ..., dk]). \returns the labels' dims.
Expected<Dims> checkCrossEntropyLabels(const Node &node) {
  if (auto err = checkDType(node, 0, isFloatType, "a float dtype"))
    return std::move(err);
  if (auto err = checkMinRank(node, 0, 2))
    return std::move(err);
  if (auto err = checkDType(node, 1, isIndexType, "dtype i32 or i64"))
    return std::move(err);
  const TensorType &scores = operandType(node, 0);
  const TensorType &labels = operandType(node, 1);
  Dims expectedLabels;
  expectedLabels.push_back(scores.getDim(0));
  ArrayRef<int64_t> spatial = scores.getDims().drop_front(2);
  expectedLabels.append(spatial.begin(), spatial.end());
  if (labels.getDims() != ArrayRef<int64_t>(expectedLabels))
    return nodeError(node, "labels " + operandName(node, 1) + " of type " +
                               labels.str() + " must have shape " +
                               formatDims(expectedLabels) + " for scores " +
                               scores.str());
  return expectedLabels;
}

} // namespace

Expected<Results> inferSoftmaxCrossEntropyLoss(const Node &node) {
  auto expectedLabels = checkCrossEntropyLabels(node);
  if (!expectedLabels)
    return expectedLabels.takeError();
  auto reduction = stringAttr(node, "reduction", "mean");
  if (!reduction)
    return reduction.takeError();
  if (*reduction != "none" && *reduction != "sum" && *reduction != "mean")
    return nodeError(node, "attribute 'reduction' is \"" + *reduction +
                               "\", expected \"none\", \"sum\" or \"mean\"");
  if (auto ignoreIndex = optionalIntAttr(node, "ignore_index"); !ignoreIndex)
    return ignoreIndex.takeError();

  const TensorType &scores = operandType(node, 0);
  if (node.getNumOperands() == 3) {
    if (auto err = checkSameDType(node, 2, 0))
      return std::move(err);
    const TensorType &weights = operandType(node, 2);
    if (weights.getRank() != 1 || weights.getDim(0) != scores.getDim(1))
      return nodeError(node, "weights " + operandName(node, 2) + " of type " +
                                 weights.str() + " must have shape [" +
                                 Twine(scores.getDim(1)) + "] for scores " +
                                 scores.str());
  }
  Dims lossDims;
  if (*reduction == "none")
    lossDims = *expectedLabels;
  Results results{known(TensorType(scores.getDType(), lossDims))};
  if (node.getNumResults() == 2)
    results.push_back(known(scores));
  return results;
}

/// remat.SoftmaxCrossEntropyGrad(log_prob, labels, scale): log_prob and
/// labels as SoftmaxCrossEntropyLoss's scores and labels; scale of
/// log_prob's dtype and the labels' shape. The result has log_prob's type.
Expected<Results> inferSoftmaxCrossEntropyGrad(const Node &node) {
  auto labelDims = checkCrossEntropyLabels(node);
  if (!labelDims)
    return labelDims.takeError();
  if (auto err = checkSameDType(node, 2, 0))
    return std::move(err);
  const TensorType &scale = operandType(node, 2);
  if (scale.getDims() != ArrayRef<int64_t>(*labelDims))
    return nodeError(node, "scale " + operandName(node, 2) + " of type " +
                               scale.str() + " must have the labels' shape " +
                               formatDims(*labelDims));
  return Results{known(operandType(node, 0))};
}

/// remat.SoftmaxGrad(dy, y): float operands of one type; 'axis' as
/// Softmax's. The result has their type.
Expected<Results> inferSoftmaxGrad(const Node &node) {
  if (auto results = inferSoftmaxLike(node); !results)
    return results.takeError();
  if (operandType(node, 1) != operandType(node, 0))
    return nodeError(
        node, operandName(node, 1) + " of type " + operandType(node, 1).str() +
                  " must have the type of " + operandName(node, 0) + ", " +
                  operandType(node, 0).str());
  return Results{known(operandType(node, 0))};
}

/// remat.LayerNormalizationGrad(dy, X, Scale, Mean, InvStdDev): dy and X of
/// one float type, Scale of X's dtype and exactly the normalized shape (the
/// dims from 'axis' on), Mean and InvStdDev of X's dtype and
/// LayerNormalization's statistics shape. The result has X's type.
Expected<Results> inferLayerNormalizationGrad(const Node &node) {
  if (auto err = checkDType(node, 1, isFloatType, "a float dtype"))
    return std::move(err);
  const TensorType &x = operandType(node, 1);
  auto axis = normalizedAxisAttr(node, -1, x.getRank());
  if (!axis)
    return axis.takeError();
  Dims statsDims = toDims(x.getDims());
  for (size_t i = *axis; i < statsDims.size(); ++i)
    statsDims[i] = 1;
  auto expect = [&](unsigned i, ArrayRef<int64_t> dims) {
    return checkOperandType(node, i, TensorType(x.getDType(), dims));
  };
  if (auto err = expect(0, x.getDims()))
    return std::move(err);
  if (auto err = expect(2, x.getDims().drop_front(*axis)))
    return std::move(err);
  for (unsigned i : {3u, 4u})
    if (auto err = expect(i, statsDims))
      return std::move(err);
  return Results{known(x)};
}

} // namespace remat::ir::inference
