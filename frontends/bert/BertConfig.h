//===- frontends/bert/BertConfig.h - BERT model configuration ---*- C++ -*-===//
//
// A BERT configuration as Hugging Face writes it (config.json of a
// BertForPreTraining checkpoint) plus the few keys remat needs to build a
// graph with static shapes: `batch`, `seq` and the weight-init `seed`.
//
// Hugging Face configs carry many keys remat has no use for (architectures,
// pad_token_id, transformers_version, ...); those are ignored. A key that is
// *almost* a known one ("hiden_size", "bacth") is an error instead, because
// silently ignoring a typo of an optional key would build a different model.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_BERT_BERTCONFIG_H
#define REMAT_FRONTENDS_BERT_BERTCONFIG_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace remat::bert {

/// The hyper-parameters of a BertForPreTraining model and the static shapes
/// of one training batch. Field comments give the JSON key; keys without a
/// default are required.
struct BertConfig {
  /// `vocab_size` (required).
  int64_t vocabSize = 0;
  /// `hidden_size` (required); a multiple of numHeads.
  int64_t hiddenSize = 0;
  /// `num_hidden_layers` (required).
  int64_t numLayers = 0;
  /// `num_attention_heads` (required).
  int64_t numHeads = 0;
  /// `intermediate_size` (required): width of the feed-forward layer.
  int64_t intermediateSize = 0;
  /// `max_position_embeddings`: rows of the position embedding table.
  int64_t maxPosition = 512;
  /// `type_vocab_size`: rows of the token type embedding table.
  int64_t typeVocabSize = 2;
  /// `layer_norm_eps`: epsilon of every LayerNormalization.
  double layerNormEps = 1e-12;
  /// `hidden_dropout_prob`: dropout after embeddings and dense outputs.
  double hiddenDropout = 0.1;
  /// `attention_probs_dropout_prob`: dropout of the attention probabilities.
  double attentionDropout = 0.1;
  /// `initializer_range`: standard deviation of the initial linear and
  /// embedding weights.
  double initializerRange = 0.02;
  /// `hidden_act`: "gelu" (erf), "gelu_new" or "gelu_pytorch_tanh" (tanh
  /// approximation), or "relu".
  std::string hiddenAct = "gelu";
  /// `batch` (remat): sequences per training step.
  int64_t batch = 8;
  /// `seq` (remat): tokens per sequence; at most maxPosition. When the key is
  /// absent it is min(128, maxPosition).
  int64_t seq = 128;
  /// `seed` (remat): key of the weight-init generator, an integer in
  /// [0, 2^62) in JSON.
  uint64_t seed = 0;

  /// Where the config came from ("bert-base.json"), for messages.
  std::string sourceName = "<bert config>";

  /// Checks the invariants buildBert() relies on: positive sizes, hidden size
  /// divisible by the head count, seq within maxPosition, dropouts in [0, 1),
  /// a known activation, and tensor sizes that fit in int64 bytes.
  /// \returns an error naming sourceName and the offending key.
  llvm::Error validate() const;

  /// Overrides batch and seq from `--bind batch=..,seq=..`. An unknown name
  /// is an error that lists the names a BERT config binds; the result is
  /// validated again (seq must still fit maxPosition). Like every error of
  /// this file, the message starts with sourceName. On error the config is
  /// unchanged.
  llvm::Error applyBindings(const llvm::StringMap<int64_t> &bindings);

  /// \returns the number of elements of every weight together (the decoder
  /// weight is tied to the word embeddings and counted once).
  int64_t getNumParameters() const;
};

/// Parses the JSON text \p json of a BERT config. \p sourceName names it in
/// messages and is stored in the result.
/// \returns the validated config, or an error naming \p sourceName and the
/// key: missing required key, wrong JSON type, invalid value, or an unknown
/// key that looks like a misspelled known one.
llvm::Expected<BertConfig> parseBertConfig(llvm::StringRef json,
                                           llvm::StringRef sourceName);

/// Reads and parses the BERT config file \p path (see parseBertConfig()).
llvm::Expected<BertConfig> loadBertConfig(llvm::StringRef path);

} // namespace remat::bert

#endif // REMAT_FRONTENDS_BERT_BERTCONFIG_H
