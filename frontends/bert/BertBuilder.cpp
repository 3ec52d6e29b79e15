//===- frontends/bert/BertBuilder.cpp - BERT pre-training graph -----------===//
//
// Value names follow the Hugging Face module tree: the output of a module is
// named by its path ("bert.encoder.layer.3.attention.self.query"), and the
// intermediate values inside a module by the variable names of its forward()
// ("...attention.self.attention_probs"). See Note [BERT graph] for the shape
// of the graph.
//
//===----------------------------------------------------------------------===//
#include "frontends/bert/BertBuilder.h"

#include "ir/Builder.h"
#include "ir/Hash.h"
#include "ir/Support.h"
#include "ir/Verifier.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Compiler.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace remat::bert {

using ir::AttrList;
using ir::DType;
using ir::Graph;
using ir::OpKind;
using ir::TensorData;
using ir::TensorType;
using ir::Value;

//===----------------------------------------------------------------------===//
// Weight initialization
//===----------------------------------------------------------------------===//

namespace {

// The float arithmetic below must round the same way on every machine, so
// a * b + c may not become one fused multiply-add where the target has one
// (-march=native): that changes the last bit of some weights.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

/// \returns ln(\p u) for u in [2^-24, 1] (to about 1e-7 relative). The
/// helpers below use only + - * / and bit operations: libm's logf, sinf and
/// sqrtf may differ in the last bit between versions (and sqrtf's errno
/// keeps GCC from vectorizing the loop at -O2).
LLVM_ATTRIBUTE_ALWAYS_INLINE float logUnit(float u) {
  // u = m * 2^e with m in [sqrt(1/2), sqrt(2)), read off the bits.
  int32_t bits = std::bit_cast<int32_t>(u);
  int32_t exponent = (bits - 0x3F3504F3) >> 23;
  float m = std::bit_cast<float>(bits - exponent * (1 << 23));
  // ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), |s| <= 0.172.
  float s = (m - 1.0f) / (m + 1.0f);
  float s2 = s * s;
  float tail =
      s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9))));
  return static_cast<float>(exponent) * 0.693147180559945309f +
         (2.0f * s + 2.0f * s * tail);
}

/// \returns sqrt(\p x) for x >= 0 (to about 1e-7 relative; 2^-50 for 0):
/// Newton's method on 1/sqrt(x) from the classic bit-level first guess.
LLVM_ATTRIBUTE_ALWAYS_INLINE float sqrtNonNegative(float x) {
  // Keeps 1/sqrt finite at 0 and leaves every other x of logUnit's range
  // unchanged (they exceed 2^-76). A compare-and-select here would stop GCC
  // from vectorizing the caller.
  x = x + 0x1p-100f;
  float y =
      std::bit_cast<float>(0x5F375A86u - (std::bit_cast<uint32_t>(x) >> 1));
  float halfX = 0.5f * x;
  // Three steps, written out so that the caller's loop stays free of
  // control flow: relative error 3e-2, 2e-3, 5e-6, then float rounding.
  y = y * (1.5f - halfX * y * y);
  y = y * (1.5f - halfX * y * y);
  y = y * (1.5f - halfX * y * y);
  return x * y;
}

/// Pairs of normals drawn per call of normalBlock().
constexpr size_t kBlock = 256;

/// Draws the pairs [first, first + kBlock) of stream \p key into
/// \p out[0, 2 * kBlock) by Box-Muller: pair p comes from one 64-bit draw,
/// counter p of the stream (splitmix64 as a counter-based generator).
void normalBlock(uint64_t key, uint64_t first, float stddev, float *out) {
  uint32_t high[kBlock], low[kBlock];
  for (size_t i = 0; i < kBlock; ++i) {
    uint64_t bits =
        ir::splitMix64Finalize(key + (first + i + 1) * ir::kSplitMix64Gamma);
    high[i] = static_cast<uint32_t>(bits >> 32);
    low[i] = static_cast<uint32_t>(bits);
  }
  // A branch-free body with a constant trip count: GCC and Clang vectorize
  // it at -O2 (about 4x faster than scalar code).
  for (size_t i = 0; i < kBlock; ++i) {
    // Radius from u in (0, 1]: 24 bits, exact in float.
    float u =
        static_cast<float>(static_cast<int32_t>(high[i] >> 8) + 1) * 0x1p-24f;
    float radius = sqrtNonNegative(-2.0f * logUnit(u)) * stddev;
    // Angle 2 pi (quadrant / 4 + t / 4) with t in [0, 1): the polynomials
    // see x = (t - 1/2) pi / 2 in [-pi/4, pi/4), rotated by pi/4.
    uint32_t quadrant = low[i] >> 30;
    float t =
        static_cast<float>(static_cast<int32_t>((low[i] >> 6) & 0xFFFFFFu)) *
        0x1p-24f;
    float x = (t - 0.5f) * 1.57079632679489661923f;
    float x2 = x * x;
    float sinX =
        x * (1.0f + x2 * (-1.0f / 6 +
                          x2 * (1.0f / 120 +
                                x2 * (-1.0f / 5040 + x2 * (1.0f / 362880)))));
    float cosX =
        1.0f + x2 * (-1.0f / 2 + x2 * (1.0f / 24 + x2 * (-1.0f / 720 +
                                                         x2 * (1.0f / 40320))));
    float sinPhi = (sinX + cosX) * 0.70710678118654752440f;
    float cosPhi = (cosX - sinX) * 0.70710678118654752440f;
    // Quadrants 1 and 3 swap (cos, sin) -> (-sin, cos); 2 and 3 negate.
    bool odd = quadrant & 1;
    float cosTheta = odd ? -sinPhi : cosPhi;
    float sinTheta = odd ? cosPhi : sinPhi;
    uint32_t sign = (quadrant & 2) << 30;
    out[2 * i] =
        std::bit_cast<float>(std::bit_cast<uint32_t>(radius * cosTheta) ^ sign);
    out[2 * i + 1] =
        std::bit_cast<float>(std::bit_cast<uint32_t>(radius * sinTheta) ^ sign);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

} // namespace

void fillNormal(llvm::MutableArrayRef<float> out, uint64_t seed, StringRef name,
                double stddev) {
  uint64_t key = ir::splitMix64Finalize(ir::fnv1a(name) ^ ir::splitMix64(seed));
  float scale = static_cast<float>(stddev);
  float block[2 * kBlock];
  size_t size = out.size();
  for (size_t begin = 0; begin < size; begin += 2 * kBlock) {
    if (size - begin >= 2 * kBlock) {
      normalBlock(key, begin / 2, scale, out.data() + begin);
      continue;
    }
    normalBlock(key, begin / 2, scale, block);
    std::memcpy(out.data() + begin, block, (size - begin) * sizeof(float));
  }
}

//===----------------------------------------------------------------------===//
// Graph construction
//===----------------------------------------------------------------------===//

namespace {

/// Builds one graph; see Note [BERT graph].
class BertGraphBuilder {
public:
  BertGraphBuilder(const BertConfig &config, const BertBuildOptions &options)
      : config_(config), options_(options),
        graph_(std::make_unique<Graph>("bert")), builder_(*graph_),
        tokens_(config.batch * config.seq),
        headSize_(config.hiddenSize / config.numHeads) {}

  Expected<std::unique_ptr<Graph>> build();

private:
  enum class Init { Normal, Zeros, Ones };

  /// Adds weight input \p name of f32 \p dims initialized by \p init.
  Value *addWeight(const Twine &name, ArrayRef<int64_t> dims, Init init);
  Value *addConstant(StringRef name, DType dtype, ArrayRef<int64_t> dims,
                     ArrayRef<int64_t> values);
  Value *addScalar(StringRef name, DType dtype, double value);
  void createConstants();

  Expected<Value *> create(OpKind op, ArrayRef<Value *> operands,
                           const Twine &name, AttrList attrs = {});
  /// \p x [tokens, in] -> Gemm(x, W [out, in], b [out]) {transB = 1}; the
  /// weights are \p prefix.weight and \p prefix.bias.
  Expected<Value *> linear(Value *x, const Twine &prefix, int64_t inSize,
                           int64_t outSize);
  Expected<Value *> layerNorm(Value *x, const Twine &prefix);
  Expected<Value *> activation(Value *x, const Twine &name);
  /// \returns \p x itself when \p probability is 0.
  Expected<Value *> dropout(Value *x, const Twine &name, Value *ratio,
                            double probability, int64_t seed);

  Expected<Value *> embeddings(Value *inputIds, Value *tokenTypeIds);
  Expected<Value *> extendedAttentionMask(Value *attentionMask);
  Expected<Value *> selfAttention(Value *hidden, Value *mask,
                                  const std::string &prefix, int layer);
  Expected<Value *> encoderLayer(Value *hidden, Value *mask, int layer);
  Expected<Value *> pooler(Value *sequenceOutput);
  Expected<Value *> mlmLoss(Value *sequenceOutput, Value *labels);

  const BertConfig &config_;
  BertBuildOptions options_;
  std::unique_ptr<Graph> graph_;
  ir::Builder builder_;
  int64_t tokens_;
  int64_t headSize_;

  Value *wordEmbeddings_ = nullptr;
  // Constants shared by all layers.
  Value *positionIds_ = nullptr;
  Value *headsShape_ = nullptr;
  Value *tokensHiddenShape_ = nullptr;
  Value *batchSeqHiddenShape_ = nullptr;
  Value *tokensShape_ = nullptr;
  Value *maskAxes_ = nullptr;
  Value *one_ = nullptr;
  Value *maskFill_ = nullptr;
  Value *attentionScale_ = nullptr;
  Value *firstToken_ = nullptr;
  Value *trainingMode_ = nullptr;
  Value *hiddenDropoutRatio_ = nullptr;
  Value *attentionDropoutRatio_ = nullptr;
};

Value *BertGraphBuilder::addWeight(const Twine &name, ArrayRef<int64_t> dims,
                                   Init init) {
  TensorType type(DType::F32, dims);
  Value *weight = graph_->addInput(name.str(), type, /*isWeight=*/true);
  if (!options_.initWeights)
    return weight;
  auto data = std::make_shared<TensorData>(type);
  llvm::MutableArrayRef<float> values(
      reinterpret_cast<float *>(data->getMutableBytes()),
      static_cast<size_t>(type.getNumElements()));
  switch (init) {
  case Init::Zeros:
    break; // TensorData starts zero-filled.
  case Init::Ones:
    std::fill(values.begin(), values.end(), 1.0f);
    break;
  case Init::Normal:
    fillNormal(values, config_.seed, weight->getName(),
               config_.initializerRange);
    break;
  }
  weight->setData(std::move(data));
  return weight;
}

Value *BertGraphBuilder::addConstant(StringRef name, DType dtype,
                                     ArrayRef<int64_t> dims,
                                     ArrayRef<int64_t> values) {
  return builder_.createConstant(
      TensorData::fromInts(TensorType(dtype, dims), values), name);
}

Value *BertGraphBuilder::addScalar(StringRef name, DType dtype, double value) {
  return builder_.createConstant(
      TensorData::fromDoubles(TensorType(dtype, {}), {value}), name);
}

void BertGraphBuilder::createConstants() {
  const BertConfig &c = config_;
  std::vector<int64_t> positions(c.seq);
  for (int64_t i = 0; i < c.seq; ++i)
    positions[i] = i;
  // Hugging Face keeps these as the buffer bert.embeddings.position_ids.
  positionIds_ = addConstant("bert.embeddings.position_ids", DType::I64,
                             {1, c.seq}, positions);
  headsShape_ = addConstant("const.heads_shape", DType::I64, {4},
                            {c.batch, c.seq, c.numHeads, headSize_});
  tokensHiddenShape_ = addConstant("const.tokens_hidden_shape", DType::I64, {2},
                                   {tokens_, c.hiddenSize});
  batchSeqHiddenShape_ = addConstant("const.batch_seq_hidden_shape", DType::I64,
                                     {3}, {c.batch, c.seq, c.hiddenSize});
  tokensShape_ = addConstant("const.tokens_shape", DType::I64, {1}, {tokens_});
  maskAxes_ = addConstant("const.mask_axes", DType::I64, {2}, {1, 2});
  one_ = addScalar("const.one", DType::F32, 1.0);
  // -10000 as in the original BERT: large enough that exp() underflows to 0
  // next to real scores, small enough that a fully padded row stays finite.
  maskFill_ = addScalar("const.mask_fill", DType::F32, -10000.0);
  attentionScale_ = addScalar("const.attention_scale", DType::F32,
                              std::sqrt(static_cast<double>(headSize_)));
  firstToken_ = addConstant("const.first_token", DType::I64, {}, {0});
  if (c.hiddenDropout > 0 || c.attentionDropout > 0)
    trainingMode_ = addScalar("const.training_mode", DType::Bool, 1.0);
  if (c.hiddenDropout > 0)
    hiddenDropoutRatio_ =
        addScalar("const.hidden_dropout_prob", DType::F32, c.hiddenDropout);
  if (c.attentionDropout > 0)
    attentionDropoutRatio_ = addScalar("const.attention_probs_dropout_prob",
                                       DType::F32, c.attentionDropout);
}

Expected<Value *> BertGraphBuilder::create(OpKind op,
                                           ArrayRef<Value *> operands,
                                           const Twine &name, AttrList attrs) {
  return builder_.createValue(op, operands, std::move(attrs), name.str());
}

Expected<Value *> BertGraphBuilder::linear(Value *x, const Twine &prefix,
                                           int64_t inSize, int64_t outSize) {
  std::string path = prefix.str();
  Value *weight = addWeight(path + ".weight", {outSize, inSize}, Init::Normal);
  Value *bias = addWeight(path + ".bias", {outSize}, Init::Zeros);
  AttrList attrs;
  attrs.set("transB", int64_t{1});
  return create(OpKind::Gemm, {x, weight, bias}, path, std::move(attrs));
}

Expected<Value *> BertGraphBuilder::layerNorm(Value *x, const Twine &prefix) {
  std::string path = prefix.str();
  int64_t size = config_.hiddenSize;
  Value *scale = addWeight(path + ".weight", {size}, Init::Ones);
  Value *bias = addWeight(path + ".bias", {size}, Init::Zeros);
  AttrList attrs;
  attrs.set("axis", int64_t{-1});
  attrs.set("epsilon", static_cast<float>(config_.layerNormEps));
  return create(OpKind::LayerNormalization, {x, scale, bias}, path,
                std::move(attrs));
}

Expected<Value *> BertGraphBuilder::activation(Value *x, const Twine &name) {
  StringRef act = config_.hiddenAct;
  if (act == "relu")
    return create(OpKind::Relu, {x}, name);
  AttrList attrs;
  attrs.set("approximate", std::string(act == "gelu" ? "none" : "tanh"));
  return create(OpKind::Gelu, {x}, name, std::move(attrs));
}

Expected<Value *> BertGraphBuilder::dropout(Value *x, const Twine &name,
                                            Value *ratio, double probability,
                                            int64_t seed) {
  if (probability == 0)
    return x;
  assert(ratio && trainingMode_ && "dropout constants not created");
  std::string base = name.str();
  AttrList attrs;
  attrs.set("seed", seed);
  auto node = builder_.create(OpKind::Dropout, {x, ratio, trainingMode_},
                              std::move(attrs), /*numResults=*/2, base);
  if (!node)
    return node.takeError();
  Value *mask = (*node)->getResult(1);
  mask->setName(graph_->uniqueName(base + ".mask"));
  return (*node)->getResult(0);
}

Expected<Value *> BertGraphBuilder::embeddings(Value *inputIds,
                                               Value *tokenTypeIds) {
  const BertConfig &c = config_;
  wordEmbeddings_ = addWeight("bert.embeddings.word_embeddings.weight",
                              {c.vocabSize, c.hiddenSize}, Init::Normal);
  Value *positionTable = addWeight("bert.embeddings.position_embeddings.weight",
                                   {c.maxPosition, c.hiddenSize}, Init::Normal);
  Value *tokenTypeTable =
      addWeight("bert.embeddings.token_type_embeddings.weight",
                {c.typeVocabSize, c.hiddenSize}, Init::Normal);

  auto words = create(OpKind::Gather, {wordEmbeddings_, inputIds},
                      "bert.embeddings.word_embeddings");
  if (!words)
    return words.takeError();
  auto tokenTypes = create(OpKind::Gather, {tokenTypeTable, tokenTypeIds},
                           "bert.embeddings.token_type_embeddings");
  if (!tokenTypes)
    return tokenTypes.takeError();
  auto positions = create(OpKind::Gather, {positionTable, positionIds_},
                          "bert.embeddings.position_embeddings");
  if (!positions)
    return positions.takeError();
  // Hugging Face's order: (words + token types) + positions.
  auto sum = create(OpKind::Add, {*words, *tokenTypes},
                    "bert.embeddings.with_token_type");
  if (!sum)
    return sum.takeError();
  sum =
      create(OpKind::Add, {*sum, *positions}, "bert.embeddings.with_position");
  if (!sum)
    return sum.takeError();
  auto normalized = layerNorm(*sum, "bert.embeddings.LayerNorm");
  if (!normalized)
    return normalized.takeError();
  auto dropped = dropout(*normalized, "bert.embeddings.dropout",
                         hiddenDropoutRatio_, c.hiddenDropout, /*seed=*/1);
  if (!dropped)
    return dropped.takeError();
  return create(OpKind::Reshape, {*dropped, tokensHiddenShape_},
                "bert.embeddings");
}

Expected<Value *>
BertGraphBuilder::extendedAttentionMask(Value *attentionMask) {
  auto mask = create(OpKind::Unsqueeze, {attentionMask, maskAxes_},
                     "extended_attention_mask.unsqueezed");
  if (!mask)
    return mask.takeError();
  AttrList castAttrs;
  castAttrs.set("to", int64_t{ir::onnxCode(DType::F32)});
  mask = create(OpKind::Cast, {*mask}, "extended_attention_mask.float",
                std::move(castAttrs));
  if (!mask)
    return mask.takeError();
  mask = create(OpKind::Sub, {one_, *mask}, "extended_attention_mask.padding");
  if (!mask)
    return mask.takeError();
  return create(OpKind::Mul, {*mask, maskFill_}, "extended_attention_mask");
}

Expected<Value *> BertGraphBuilder::selfAttention(Value *hidden, Value *mask,
                                                  const std::string &prefix,
                                                  int layer) {
  const BertConfig &c = config_;
  int64_t h = c.hiddenSize;
  std::string self = prefix + ".attention.self";

  /// [tokens, hidden] -> [batch, heads, seq, head_size] (or, for the key,
  /// [batch, heads, head_size, seq], ready for the score MatMul).
  auto project = [&](StringRef module, ArrayRef<int64_t> perm,
                     StringRef layerName) -> Expected<Value *> {
    auto projected = linear(hidden, Twine(self) + "." + module, h, h);
    if (!projected)
      return projected.takeError();
    auto heads = create(OpKind::Reshape, {*projected, headsShape_},
                        Twine(self) + "." + module + ".heads");
    if (!heads)
      return heads.takeError();
    AttrList attrs;
    attrs.set("perm", std::vector<int64_t>(perm.begin(), perm.end()));
    return create(OpKind::Transpose, {*heads}, Twine(self) + "." + layerName,
                  std::move(attrs));
  };
  auto query = project("query", {0, 2, 1, 3}, "query_layer");
  if (!query)
    return query.takeError();
  auto keyT = project("key", {0, 2, 3, 1}, "key_layer_t");
  if (!keyT)
    return keyT.takeError();
  auto value = project("value", {0, 2, 1, 3}, "value_layer");
  if (!value)
    return value.takeError();

  auto scores =
      create(OpKind::MatMul, {*query, *keyT}, self + ".attention_scores");
  if (!scores)
    return scores.takeError();
  // Division, not multiplication by 1/sqrt(d), to match Hugging Face's
  // rounding.
  scores = create(OpKind::Div, {*scores, attentionScale_},
                  self + ".attention_scores.scaled");
  if (!scores)
    return scores.takeError();
  scores =
      create(OpKind::Add, {*scores, mask}, self + ".attention_scores.masked");
  if (!scores)
    return scores.takeError();
  AttrList softmaxAttrs;
  softmaxAttrs.set("axis", int64_t{-1});
  auto probs = create(OpKind::Softmax, {*scores}, self + ".attention_probs",
                      std::move(softmaxAttrs));
  if (!probs)
    return probs.takeError();
  probs = dropout(*probs, self + ".dropout", attentionDropoutRatio_,
                  c.attentionDropout, 100 * (int64_t{layer} + 1) + 1);
  if (!probs)
    return probs.takeError();
  auto context =
      create(OpKind::MatMul, {*probs, *value}, self + ".context_layer");
  if (!context)
    return context.takeError();
  AttrList permAttrs;
  permAttrs.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  context = create(OpKind::Transpose, {*context},
                   self + ".context_layer.transposed", std::move(permAttrs));
  if (!context)
    return context.takeError();
  return create(OpKind::Reshape, {*context, tokensHiddenShape_}, self);
}

Expected<Value *> BertGraphBuilder::encoderLayer(Value *hidden, Value *mask,
                                                 int layer) {
  const BertConfig &c = config_;
  int64_t h = c.hiddenSize;
  int64_t seedBase = 100 * (int64_t{layer} + 1);
  std::string prefix = "bert.encoder.layer." + std::to_string(layer);

  // BertAttention: self-attention, then dense + dropout + residual + norm.
  auto attended = selfAttention(hidden, mask, prefix, layer);
  if (!attended)
    return attended.takeError();
  std::string attentionOutput = prefix + ".attention.output";
  auto dense = linear(*attended, attentionOutput + ".dense", h, h);
  if (!dense)
    return dense.takeError();
  dense = dropout(*dense, attentionOutput + ".dropout", hiddenDropoutRatio_,
                  c.hiddenDropout, seedBase + 2);
  if (!dense)
    return dense.takeError();
  auto residual =
      create(OpKind::Add, {*dense, hidden}, attentionOutput + ".residual");
  if (!residual)
    return residual.takeError();
  auto attentionOut = layerNorm(*residual, attentionOutput + ".LayerNorm");
  if (!attentionOut)
    return attentionOut.takeError();

  // BertIntermediate and BertOutput: the feed-forward block.
  auto intermediate = linear(*attentionOut, prefix + ".intermediate.dense", h,
                             c.intermediateSize);
  if (!intermediate)
    return intermediate.takeError();
  intermediate =
      activation(*intermediate, prefix + ".intermediate.intermediate_act_fn");
  if (!intermediate)
    return intermediate.takeError();
  std::string output = prefix + ".output";
  auto outDense =
      linear(*intermediate, output + ".dense", c.intermediateSize, h);
  if (!outDense)
    return outDense.takeError();
  outDense = dropout(*outDense, output + ".dropout", hiddenDropoutRatio_,
                     c.hiddenDropout, seedBase + 3);
  if (!outDense)
    return outDense.takeError();
  auto outResidual =
      create(OpKind::Add, {*outDense, *attentionOut}, output + ".residual");
  if (!outResidual)
    return outResidual.takeError();
  return layerNorm(*outResidual, output + ".LayerNorm");
}

Expected<Value *> BertGraphBuilder::pooler(Value *sequenceOutput) {
  int64_t h = config_.hiddenSize;
  auto lastHidden =
      create(OpKind::Reshape, {sequenceOutput, batchSeqHiddenShape_},
             "bert.encoder.last_hidden_state");
  if (!lastHidden)
    return lastHidden.takeError();
  AttrList gatherAttrs;
  gatherAttrs.set("axis", int64_t{1});
  auto first = create(OpKind::Gather, {*lastHidden, firstToken_},
                      "bert.pooler.first_token_tensor", std::move(gatherAttrs));
  if (!first)
    return first.takeError();
  auto dense = linear(*first, "bert.pooler.dense", h, h);
  if (!dense)
    return dense.takeError();
  return create(OpKind::Tanh, {*dense}, "pooled_output");
}

Expected<Value *> BertGraphBuilder::mlmLoss(Value *sequenceOutput,
                                            Value *labels) {
  const BertConfig &c = config_;
  int64_t h = c.hiddenSize;
  // State-dict order: the output bias comes before the transform.
  Value *decoderBias =
      addWeight("cls.predictions.bias", {c.vocabSize}, Init::Zeros);
  auto transformed =
      linear(sequenceOutput, "cls.predictions.transform.dense", h, h);
  if (!transformed)
    return transformed.takeError();
  transformed =
      activation(*transformed, "cls.predictions.transform.transform_act_fn");
  if (!transformed)
    return transformed.takeError();
  transformed = layerNorm(*transformed, "cls.predictions.transform.LayerNorm");
  if (!transformed)
    return transformed.takeError();
  // The decoder's weight is the word embedding table (tied), read as
  // [vocab, hidden] with transB like every other linear layer.
  AttrList gemmAttrs;
  gemmAttrs.set("transB", int64_t{1});
  auto scores =
      create(OpKind::Gemm, {*transformed, wordEmbeddings_, decoderBias},
             "cls.predictions.decoder", std::move(gemmAttrs));
  if (!scores)
    return scores.takeError();
  auto flatLabels =
      create(OpKind::Reshape, {labels, tokensShape_}, "labels.flat");
  if (!flatLabels)
    return flatLabels.takeError();
  AttrList lossAttrs;
  lossAttrs.set("reduction", std::string("mean"));
  lossAttrs.set("ignore_index", int64_t{-100});
  return create(OpKind::SoftmaxCrossEntropyLoss, {*scores, *flatLabels}, "loss",
                std::move(lossAttrs));
}

Expected<std::unique_ptr<Graph>> BertGraphBuilder::build() {
  const BertConfig &c = config_;
  graph_->setSourceName(c.sourceName);
  TensorType tokenType(DType::I64, {c.batch, c.seq});
  Value *inputIds = graph_->addInput("input_ids", tokenType);
  Value *tokenTypeIds = graph_->addInput("token_type_ids", tokenType);
  Value *attentionMask = graph_->addInput("attention_mask", tokenType);
  Value *labels = graph_->addInput("labels", tokenType);

  builder_.setLayer(-1);
  createConstants();
  auto hidden = embeddings(inputIds, tokenTypeIds);
  if (!hidden)
    return hidden.takeError();
  auto mask = extendedAttentionMask(attentionMask);
  if (!mask)
    return mask.takeError();
  for (int64_t layer = 0; layer < c.numLayers; ++layer) {
    builder_.setLayer(static_cast<int>(layer));
    hidden = encoderLayer(*hidden, *mask, static_cast<int>(layer));
    if (!hidden)
      return hidden.takeError();
  }
  builder_.setLayer(-1);
  auto pooled = pooler(*hidden);
  if (!pooled)
    return pooled.takeError();
  auto loss = mlmLoss(*hidden, labels);
  if (!loss)
    return loss.takeError();
  graph_->addOutput(*loss);
  graph_->addOutput(*pooled);
  return std::move(graph_);
}

} // namespace

Expected<std::unique_ptr<Graph>> buildBert(const BertConfig &config,
                                           const BertBuildOptions &options) {
  if (Error err = config.validate())
    return std::move(err);
  // Node::setLayer takes an int.
  if (config.numLayers > (int64_t{1} << 30))
    return makeError(config.sourceName + ": key 'num_hidden_layers' (" +
                     Twine(config.numLayers) + ") is too large");
  auto graph = BertGraphBuilder(config, options).build();
  if (!graph)
    return graph.takeError();
  if (Error err = ir::verify(**graph))
    return makeError(config.sourceName +
                     ": internal error: the BERT graph does not verify: " +
                     errorToString(std::move(err)));
  return graph;
}

} // namespace remat::bert
