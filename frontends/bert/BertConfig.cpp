//===- frontends/bert/BertConfig.cpp - BERT model configuration -----------===//
#include "frontends/bert/BertConfig.h"

#include "ir/Limits.h"
#include "ir/Support.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace remat::bert {

namespace {

/// The keys remat reads. Any other key is ignored unless it looks like a
/// misspelling of one of these.
constexpr StringRef kKnownKeys[] = {
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "initializer_range",
    "hidden_act",
    "position_embedding_type",
    "model_type",
    "batch",
    "seq",
    "seed",
};

/// Values of `hidden_act` that buildBert() knows.
constexpr StringRef kActivations[] = {"gelu", "gelu_new", "gelu_pytorch_tanh",
                                      "relu"};

/// \returns \p value as "%g" prints it: 0.1, 1, 1e-12.
std::string formatNumber(double value) {
  return llvm::formatv("{0}", llvm::format("%g", value)).str();
}

/// \returns \p value as it should appear in a message: scalars as JSON,
/// arrays and objects by kind only (they may be large).
std::string describeJson(const llvm::json::Value &value) {
  switch (value.kind()) {
  case llvm::json::Value::Array:
    return "an array";
  case llvm::json::Value::Object:
    return "an object";
  case llvm::json::Value::Number: {
    double number = *value.getAsNumber();
    // getAsInteger() converts a double of 2^63 without a range check.
    if (std::fabs(number) < 0x1p63)
      if (auto integer = value.getAsInteger())
        return std::to_string(*integer);
    return formatNumber(number);
  }
  default:
    return llvm::formatv("{0}", value).str();
  }
}

/// \returns true if \p a becomes \p b by swapping two adjacent characters.
bool isTransposition(StringRef a, StringRef b) {
  if (a.size() != b.size())
    return false;
  size_t i = 0;
  while (i < a.size() && a[i] == b[i])
    ++i;
  return i + 1 < a.size() && a[i] == b[i + 1] && a[i + 1] == b[i] &&
         a.drop_front(i + 2) == b.drop_front(i + 2);
}

/// \returns the known key that \p key most likely misspells, or "" when it
/// looks like a key of its own (Hugging Face configs have many).
StringRef likelyMisspelling(StringRef key) {
  StringRef best;
  unsigned bestDistance = ~0u;
  for (StringRef known : kKnownKeys) {
    if (key.equals_insensitive(known) || isTransposition(key, known))
      return known;
    // Short keys ("seq", "seed") tolerate one edit, longer ones two:
    // "num_attention_head" is a typo, "num_hidden_groups" (ALBERT) is not.
    unsigned allowed = known.size() <= 4 ? 1 : 2;
    unsigned distance = key.edit_distance(known, /*AllowReplacements=*/true,
                                          /*MaxEditDistance=*/allowed + 1);
    if (distance <= allowed && distance < bestDistance) {
      best = known;
      bestDistance = distance;
    }
  }
  return best;
}

/// Reads the keys of one JSON object, with messages that name the source.
class ConfigReader {
public:
  ConfigReader(const llvm::json::Object &object, StringRef sourceName)
      : object_(object), sourceName_(sourceName) {}

  /// Reads integer \p key into \p out; absent keys keep \p out unless
  /// \p required. \returns true when the key was present.
  Expected<bool> readInt(StringRef key, int64_t &out, bool required) {
    const llvm::json::Value *value = object_.get(key);
    if (!value)
      return missing(key, required);
    std::optional<double> number = asNumber(*value);
    // Sizes beyond 2^62 are absurd for a model; rejecting them here also
    // keeps getAsInteger() away from doubles it cannot convert (2^63).
    if (number && std::fabs(*number) >= 0x1p62)
      return error("key '" + key + "' is " + describeJson(*value) +
                   ", which is too large");
    std::optional<int64_t> integer;
    if (auto exact = value->getAsInteger(); number && exact)
      integer = *exact;
    if (!integer)
      return error("key '" + key + "' must be an integer, got " +
                   describeJson(*value));
    out = *integer;
    return true;
  }

  /// Reads number \p key into \p out; absent keys keep \p out.
  Expected<bool> readNumber(StringRef key, double &out) {
    const llvm::json::Value *value = object_.get(key);
    if (!value)
      return false;
    std::optional<double> number = asNumber(*value);
    if (!number)
      return error("key '" + key + "' must be a number, got " +
                   describeJson(*value));
    out = *number;
    return true;
  }

  /// Reads string \p key into \p out; absent keys keep \p out.
  Expected<bool> readString(StringRef key, std::string &out) {
    const llvm::json::Value *value = object_.get(key);
    if (!value)
      return false;
    auto string = value->getAsString();
    if (!string)
      return error("key '" + key + "' must be a string, got " +
                   describeJson(*value));
    out = string->str();
    return true;
  }

  /// \returns an error for the first (in sorted order) unknown key that
  /// looks like a misspelled known key; other unknown keys are fine.
  Error checkUnknownKeys() {
    llvm::SmallVector<StringRef, 32> keys;
    for (const auto &entry : object_)
      keys.push_back(StringRef(entry.first));
    llvm::sort(keys);
    for (StringRef key : keys) {
      if (llvm::is_contained(kKnownKeys, key))
        continue;
      StringRef known = likelyMisspelling(key);
      if (!known.empty())
        return error("unknown key '" + key + "' (did you mean '" + known +
                     "')");
    }
    return Error::success();
  }

  Error error(const Twine &message) const {
    return makeError(sourceName_ + ": " + message);
  }

private:
  static std::optional<double> asNumber(const llvm::json::Value &value) {
    if (auto number = value.getAsNumber())
      return *number;
    return std::nullopt;
  }

  Expected<bool> missing(StringRef key, bool required) const {
    if (required)
      return error("missing required key '" + key + "'");
    return false;
  }

  const llvm::json::Object &object_;
  StringRef sourceName_;
};

/// \returns the byte size of an f32 tensor of \p dims, or std::nullopt when
/// it overflows int64.
std::optional<int64_t> f32Bytes(llvm::ArrayRef<int64_t> dims) {
  std::optional<int64_t> bytes = 4;
  for (int64_t dim : dims) {
    bytes = checkedMul(*bytes, dim);
    if (!bytes)
      return std::nullopt;
  }
  return bytes;
}

/// Rewrites llvm::json's "[3:7, byte=40]: Expected , or } after object
/// property" as "t.json:3:7: invalid JSON: expected , or } after object
/// property", the file:line:col form of every other remat message.
std::string formatParseError(StringRef sourceName, StringRef message) {
  StringRef position, rest;
  if (message.consume_front("[")) {
    std::tie(position, rest) = message.split("]: ");
    position = position.split(", byte=").first;
  } else {
    rest = message;
  }
  std::string text = rest.str();
  if (!text.empty())
    text[0] = llvm::toLower(text[0]);
  return (sourceName + (position.empty() ? "" : ":") + position +
          ": invalid JSON: " + text)
      .str();
}

std::string formatShape(llvm::ArrayRef<int64_t> dims) {
  std::string text = "[";
  for (int64_t dim : dims) {
    if (text.size() > 1)
      text += ',';
    text += std::to_string(dim);
  }
  return text + "]";
}

} // namespace

Error BertConfig::validate() const {
  auto error = [&](const Twine &message) {
    return makeError(sourceName + ": " + message);
  };
  // Upper bounds far above any real BERT (vocabularies reach ~250k, hidden
  // sizes 12k, depths ~100) that keep the graph's node count and every
  // product below bounded: a typo or a hostile file gets an error naming the
  // key, not a graph that never finishes building.
  struct SizeKey {
    StringRef key;
    int64_t value;
    int64_t max;
  };
  for (SizeKey size :
       {SizeKey{"vocab_size", vocabSize, int64_t(1) << 22},
        SizeKey{"hidden_size", hiddenSize, int64_t(1) << 16},
        SizeKey{"num_hidden_layers", numLayers, 1024},
        SizeKey{"num_attention_heads", numHeads, 1024},
        SizeKey{"intermediate_size", intermediateSize, int64_t(1) << 18},
        SizeKey{"max_position_embeddings", maxPosition, int64_t(1) << 20},
        SizeKey{"type_vocab_size", typeVocabSize, 1024},
        SizeKey{"batch", batch, int64_t(1) << 20},
        SizeKey{"seq", seq, int64_t(1) << 20}}) {
    if (size.value <= 0)
      return error("key '" + size.key + "' must be positive, got " +
                   Twine(size.value));
    if (size.value > size.max)
      return error("key '" + size.key + "' must be at most " +
                   Twine(size.max) + ", got " + Twine(size.value));
  }
  if (hiddenSize % numHeads != 0)
    return error("key 'hidden_size' (" + Twine(hiddenSize) +
                 ") must be divisible by 'num_attention_heads' (" +
                 Twine(numHeads) + ")");
  if (seq > maxPosition)
    return error("key 'seq' (" + Twine(seq) +
                 ") must not exceed 'max_position_embeddings' (" +
                 Twine(maxPosition) + ")");
  if (!(layerNormEps > 0 && std::isfinite(layerNormEps)))
    return error("key 'layer_norm_eps' must be a positive number, got " +
                 formatNumber(layerNormEps));
  // The model is f32: an epsilon that rounds to 0 or inf there would build
  // a LayerNormalization that shape inference refuses.
  float f32Eps = static_cast<float>(layerNormEps);
  if (!(f32Eps > 0 && std::isfinite(f32Eps)))
    return error("key 'layer_norm_eps' must be a positive number that f32 "
                 "holds (between 1.4e-45 and 3.4e+38), got " +
                 formatNumber(layerNormEps));
  for (auto [key, value] :
       {std::pair<StringRef, double>{"hidden_dropout_prob", hiddenDropout},
        {"attention_probs_dropout_prob", attentionDropout}})
    if (!(value >= 0 && value < 1))
      return error("key '" + key + "' must be in [0, 1), got " +
                   formatNumber(value));
  if (!(initializerRange >= 0 && std::isfinite(initializerRange)))
    return error("key 'initializer_range' must be a non-negative number, "
                 "got " +
                 formatNumber(initializerRange));
  if (!llvm::is_contained(kActivations, StringRef(hiddenAct)))
    return error("key 'hidden_act' is \"" + hiddenAct +
                 "\", expected \"gelu\", \"gelu_new\", "
                 "\"gelu_pytorch_tanh\" or \"relu\"");

  // The largest tensors of the graph must have a byte size that fits int64
  // (TensorType::checkSize); checking them here gives a message in terms of
  // the config rather than of some node.
  int64_t headSize = hiddenSize / numHeads;
  struct Tensor {
    const char *what;
    llvm::SmallVector<int64_t, 4> dims;
  };
  std::optional<int64_t> tokens = checkedMul(batch, seq);
  if (!tokens)
    return error("'batch' x 'seq' (" + Twine(batch) + " x " + Twine(seq) +
                 ") overflows int64");
  for (const Tensor &tensor :
       {Tensor{"word embeddings", {vocabSize, hiddenSize}},
        Tensor{"feed-forward weight", {intermediateSize, hiddenSize}},
        Tensor{"feed-forward activation", {*tokens, intermediateSize}},
        Tensor{"attention scores", {batch, numHeads, seq, seq}},
        Tensor{"attention heads", {batch, numHeads, seq, headSize}},
        Tensor{"prediction scores", {*tokens, vocabSize}}})
    if (!f32Bytes(tensor.dims))
      return error("the " + Twine(tensor.what) + " f32" +
                   formatShape(tensor.dims) +
                   " would be larger than 2^63 bytes");
  // The weights are allocated when the graph is built: they must fit.
  std::optional<int64_t> weightBytes = checkedMul(getNumParameters(), 4);
  if (!weightBytes)
    return error("the f32 weights would be larger than 2^63 bytes");
  if (Error err = ir::checkAllocationBytes(
          uint64_t(*weightBytes),
          "storing " + Twine(getNumParameters()) + " f32 weights"))
    return error(errorToString(std::move(err)));
  return Error::success();
}

Error BertConfig::applyBindings(const llvm::StringMap<int64_t> &bindings) {
  llvm::SmallVector<StringRef, 4> names;
  for (const auto &entry : bindings)
    names.push_back(entry.getKey());
  llvm::sort(names);
  for (StringRef name : names) {
    int64_t value = bindings.lookup(name);
    if (name != "batch" && name != "seq")
      return makeError(sourceName + ": --bind " + name +
                       ": a BERT config binds only batch and seq");
    if (value <= 0)
      return makeError(sourceName + ": --bind " + name + "=" + Twine(value) +
                       " must be positive");
    if (name == "seq" && value > maxPosition)
      return makeError(sourceName + ": --bind seq=" + Twine(value) +
                       " exceeds 'max_position_embeddings' (" +
                       Twine(maxPosition) + ")");
  }
  BertConfig bound = *this;
  if (bindings.count("batch"))
    bound.batch = bindings.lookup("batch");
  if (bindings.count("seq"))
    bound.seq = bindings.lookup("seq");
  if (Error err = bound.validate())
    return err;
  *this = std::move(bound);
  return Error::success();
}

int64_t BertConfig::getNumParameters() const {
  int64_t h = hiddenSize, inter = intermediateSize;
  int64_t embeddings = (vocabSize + maxPosition + typeVocabSize) * h + 2 * h;
  int64_t layer =
      4 * (h * h + h) + (inter * h + inter) + (h * inter + h) + 2 * (2 * h);
  int64_t pooler = h * h + h;
  int64_t head = (h * h + h) + 2 * h + vocabSize;
  return embeddings + numLayers * layer + pooler + head;
}

Expected<BertConfig> parseBertConfig(StringRef json, StringRef sourceName) {
  if (Error err = ir::checkJsonDepth(json, sourceName))
    return std::move(err);
  Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed)
    return makeError(
        formatParseError(sourceName, errorToString(parsed.takeError())));
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return makeError(sourceName + ": expected a JSON object, got " +
                     describeJson(*parsed));

  BertConfig config;
  config.sourceName = sourceName.str();
  ConfigReader reader(*object, sourceName);
  if (Error err = reader.checkUnknownKeys())
    return std::move(err);

  struct IntKey {
    StringRef key;
    int64_t *field;
    bool required;
  };
  for (IntKey key :
       {IntKey{"vocab_size", &config.vocabSize, true},
        IntKey{"hidden_size", &config.hiddenSize, true},
        IntKey{"num_hidden_layers", &config.numLayers, true},
        IntKey{"num_attention_heads", &config.numHeads, true},
        IntKey{"intermediate_size", &config.intermediateSize, true},
        IntKey{"max_position_embeddings", &config.maxPosition, false},
        IntKey{"type_vocab_size", &config.typeVocabSize, false},
        IntKey{"batch", &config.batch, false}})
    if (auto present = reader.readInt(key.key, *key.field, key.required);
        !present)
      return present.takeError();

  auto hasSeq = reader.readInt("seq", config.seq, /*required=*/false);
  if (!hasSeq)
    return hasSeq.takeError();
  if (!*hasSeq)
    config.seq = std::min<int64_t>(128, config.maxPosition);
  int64_t seed = 0;
  if (auto present = reader.readInt("seed", seed, /*required=*/false); !present)
    return present.takeError();
  if (seed < 0)
    return reader.error("key 'seed' must be a non-negative integer, got " +
                        Twine(seed));
  config.seed = static_cast<uint64_t>(seed);

  struct NumberKey {
    StringRef key;
    double *field;
  };
  for (NumberKey key :
       {NumberKey{"layer_norm_eps", &config.layerNormEps},
        NumberKey{"hidden_dropout_prob", &config.hiddenDropout},
        NumberKey{"attention_probs_dropout_prob", &config.attentionDropout},
        NumberKey{"initializer_range", &config.initializerRange}})
    if (auto present = reader.readNumber(key.key, *key.field); !present)
      return present.takeError();

  if (auto present = reader.readString("hidden_act", config.hiddenAct);
      !present)
    return present.takeError();
  std::string positionType = "absolute";
  if (auto present = reader.readString("position_embedding_type", positionType);
      !present)
    return present.takeError();
  if (positionType != "absolute")
    return reader.error("key 'position_embedding_type' is \"" + positionType +
                        "\", only \"absolute\" is supported");
  // A HuggingFace config of another family (gpt2, roberta) has keys a BERT
  // config has too; building BERT from it would be a wrong model.
  std::string modelType = "bert";
  if (auto present = reader.readString("model_type", modelType); !present)
    return present.takeError();
  if (modelType != "bert")
    return reader.error("key 'model_type' is \"" +
                        ir::escapeForMessage(modelType) +
                        "\", only \"bert\" is supported");

  if (Error err = config.validate())
    return std::move(err);
  return config;
}

Expected<BertConfig> loadBertConfig(StringRef path) {
  auto buffer = ir::readInputFile(path, /*allowStdin=*/false, /*isText=*/true);
  if (!buffer) {
    // A config that cannot be opened has always been "cannot read".
    std::string message = errorToString(buffer.takeError());
    if (StringRef(message).startswith("cannot open "))
      message = "cannot read " + message.substr(12);
    return makeError(message);
  }
  return parseBertConfig((*buffer)->getBuffer(), path);
}

} // namespace remat::bert
