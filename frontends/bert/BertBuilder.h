//===- frontends/bert/BertBuilder.h - BERT pre-training graph ---*- C++ -*-===//
//
// Builds the forward graph of a Hugging Face BertForPreTraining model with
// the masked-language-model loss, from a BertConfig, with static shapes
// [batch, seq]. Weights are graph inputs flagged `weight` that carry the
// names and [out, in] layouts of the model's PyTorch state dict, so a real
// checkpoint can be loaded by name.
//
// Note [BERT graph]
// ~~~~~~~~~~~~~~~~~
// Inputs:  input_ids, token_type_ids, attention_mask (1 keep, 0 pad) and
//          labels (-100 = ignore), all i64[batch, seq]; then the weights in
//          state-dict order, without the next-sentence head
//          (cls.seq_relationship) and without cls.predictions.decoder.*,
//          which a checkpoint ties to the word embeddings and
//          cls.predictions.bias.
// Outputs: `loss` (f32[], the only scalar output, so autodiff finds it) and
//          `pooled_output` (f32[batch, hidden]). The pooler does not reach
//          the loss; it is an output so that it survives dead-code
//          elimination and autodiff can report its weights as unused, as
//          they are in a real checkpoint trained with the MLM loss only.
// Layout:  between layers the hidden states are 2-D, f32[batch*seq, hidden],
//          so that every linear layer is one Gemm(x, W, b) {transB = 1} on
//          the [out, in] weight (no Transpose of weights, bias fused); only
//          attention reshapes to [batch, heads, seq, head_size].
// Mask:    (1 - Cast<f32>(Unsqueeze(attention_mask, [1, 2]))) * -10000,
//          f32[batch, 1, 1, seq], added to the scaled scores of every layer.
// Loss:    SoftmaxCrossEntropyLoss(prediction scores f32[batch*seq, vocab],
//          labels reshaped to i64[batch*seq]) {reduction = "mean",
//          ignore_index = -100}. The decoder weight is tied: the decoder Gemm
//          reads bert.embeddings.word_embeddings.weight itself.
// Dropout: Dropout(x, ratio, training_mode = true) with results x' and
//          `<name>.mask`; seed 1 for the embeddings and 100*(i+1) + {1, 2, 3}
//          for layer i (attention probabilities, attention output, output),
//          independent of the weight seed; omitted where the probability is
//          0. LayerNormalization has its one result Y, as exported models do.
// Layers:  nodes of encoder layer i have layer i; all others -1.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_BERT_BERTBUILDER_H
#define REMAT_FRONTENDS_BERT_BERTBUILDER_H

#include "frontends/bert/BertConfig.h"
#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>

namespace remat::bert {

/// Options of buildBert() that do not change the graph's structure.
struct BertBuildOptions {
  /// Fill every weight with its initial values. Without them the graph has
  /// the same nodes and types but no weight data: enough for the passes and
  /// memory planning, and instant for bert-large (340M parameters).
  bool initWeights = true;
};

/// Builds the forward graph with MLM loss of Note [BERT graph] for
/// \p config. Weights are initialized as Hugging Face does: linear and
/// embedding weights normal(0, initializer_range), biases 0, LayerNorm
/// weights 1; each weight is drawn by fillNormal() keyed by its name.
/// \returns the verified graph, or an error if \p config is invalid.
llvm::Expected<std::unique_ptr<ir::Graph>>
buildBert(const BertConfig &config, const BertBuildOptions &options = {});

/// Fills \p out with normal(0, \p stddev) samples drawn from a counter-based
/// generator keyed by (\p seed, \p name): element i depends only on the key
/// and i, never on which weights were created before, and the arithmetic is
/// plain IEEE + - * / and sqrt, so the bits are the same on every machine.
void fillNormal(llvm::MutableArrayRef<float> out, uint64_t seed,
                llvm::StringRef name, double stddev);

} // namespace remat::bert

#endif // REMAT_FRONTENDS_BERT_BERTBUILDER_H
