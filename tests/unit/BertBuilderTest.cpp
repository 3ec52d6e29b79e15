//===- tests/unit/BertBuilderTest.cpp - BERT config and graph -------------===//
//
// The config reader (every error message), the presets in models/, and the
// structure of the BertForPreTraining graph of Note [BERT graph]: Hugging
// Face weight names and layouts, the tied decoder, the loss, the pooler that
// does not reach it, dropout seeds and deterministic weights.
//
//===----------------------------------------------------------------------===//
#include "frontends/bert/BertBuilder.h"
#include "frontends/bert/BertConfig.h"
#include "ir/Limits.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>

using namespace remat;
using namespace remat::bert;
using namespace remat::ir;

namespace {

const std::string kModelsDir = std::string(REMAT_TEST_DIR) + "/../models";

/// The keys of a small valid config, as raw JSON values.
std::map<std::string, std::string> smallKeys() {
  return {{"vocab_size", "100"},
          {"hidden_size", "32"},
          {"num_hidden_layers", "2"},
          {"num_attention_heads", "4"},
          {"intermediate_size", "64"},
          {"max_position_embeddings", "64"},
          {"batch", "2"},
          {"seq", "16"}};
}

/// \returns smallKeys() as a JSON object with \p changes applied: a key
/// mapped to nullptr is removed, any other is set to the raw JSON given.
std::string configJson(
    std::initializer_list<std::pair<const char *, const char *>> changes) {
  std::map<std::string, std::string> keys = smallKeys();
  for (auto [key, value] : changes) {
    if (value)
      keys[key] = value;
    else
      keys.erase(key);
  }
  std::string json = "{";
  for (const auto &[key, value] : keys)
    json += (json.size() > 1 ? ", \"" : "\"") + key + "\": " + value;
  return json + "}";
}

BertConfig parseOk(const std::string &json) {
  auto config = parseBertConfig(json, "t.json");
  if (!config) {
    std::string message = errorToString(config.takeError());
    INFO("json: " << json);
    FAIL("unexpected error: " << message);
  }
  return *config;
}

/// \returns the error of parsing \p json, failing if it parses.
std::string parseError(const std::string &json) {
  auto config = parseBertConfig(json, "t.json");
  if (config) {
    INFO("json: " << json);
    FAIL("parsed, but an error was expected");
  }
  return errorToString(config.takeError());
}

/// A small model that builds in milliseconds.
BertConfig smallConfig(int64_t layers) {
  BertConfig config;
  config.vocabSize = 50;
  config.hiddenSize = 16;
  config.numLayers = layers;
  config.numHeads = 2;
  config.intermediateSize = 32;
  config.maxPosition = 32;
  config.batch = 2;
  config.seq = 8;
  config.sourceName = "small";
  return config;
}

std::unique_ptr<Graph> buildOk(const BertConfig &config,
                               BertBuildOptions options = {}) {
  auto graph = buildBert(config, options);
  if (!graph)
    FAIL("buildBert failed: " << errorToString(graph.takeError()));
  return std::move(*graph);
}

BertConfig loadPreset(llvm::StringRef name) {
  std::string path = kModelsDir + "/" + name.str() + ".json";
  auto config = loadBertConfig(path);
  if (!config)
    FAIL("cannot load " << path << ": " << errorToString(config.takeError()));
  return *config;
}

llvm::ArrayRef<float> floats(const Value *value) {
  REQUIRE(value->getData());
  llvm::ArrayRef<uint8_t> bytes = value->getData()->getBytes();
  return {reinterpret_cast<const float *>(bytes.data()), bytes.size() / 4};
}

/// \returns every value that \p from reaches along use chains, itself
/// included.
llvm::DenseSet<const Value *> reachableFrom(const Value *from) {
  llvm::DenseSet<const Value *> seen{from};
  llvm::SmallVector<const Value *, 32> worklist{from};
  while (!worklist.empty()) {
    const Value *value = worklist.pop_back_val();
    for (const Use &use : value->getUses())
      for (Value *result : use.user->getResults())
        if (seen.insert(result).second)
          worklist.push_back(result);
  }
  return seen;
}

std::vector<const Node *> nodesOf(const Graph &graph, OpKind op) {
  std::vector<const Node *> nodes;
  for (const Node &node : graph.getNodes())
    if (node.getOp() == op)
      nodes.push_back(&node);
  return nodes;
}

} // namespace

//===----------------------------------------------------------------------===//
// Config
//===----------------------------------------------------------------------===//

TEST_CASE("bert config: required keys and Hugging Face defaults") {
  BertConfig config = parseOk(configJson({{"max_position_embeddings", nullptr},
                                          {"batch", nullptr},
                                          {"seq", nullptr}}));
  CHECK(config.vocabSize == 100);
  CHECK(config.hiddenSize == 32);
  CHECK(config.numLayers == 2);
  CHECK(config.numHeads == 4);
  CHECK(config.intermediateSize == 64);
  CHECK(config.maxPosition == 512);
  CHECK(config.typeVocabSize == 2);
  CHECK(config.layerNormEps == 1e-12);
  CHECK(config.hiddenDropout == 0.1);
  CHECK(config.attentionDropout == 0.1);
  CHECK(config.initializerRange == 0.02);
  CHECK(config.hiddenAct == "gelu");
  CHECK(config.batch == 8);
  CHECK(config.seq == 128);
  CHECK(config.seed == 0);
  CHECK(config.sourceName == "t.json");
}

TEST_CASE("bert config: seq defaults to at most max_position_embeddings") {
  BertConfig config = parseOk(
      configJson({{"seq", nullptr}, {"max_position_embeddings", "40"}}));
  CHECK(config.seq == 40);
}

TEST_CASE("bert config: every key is read") {
  BertConfig config =
      parseOk(configJson({{"type_vocab_size", "3"},
                          {"layer_norm_eps", "1e-5"},
                          {"hidden_dropout_prob", "0"},
                          {"attention_probs_dropout_prob", "0.25"},
                          {"initializer_range", "0.5"},
                          {"hidden_act", "\"gelu_new\""},
                          {"position_embedding_type", "\"absolute\""},
                          {"seed", "9007199254740993"}}));
  CHECK(config.typeVocabSize == 3);
  CHECK(config.layerNormEps == 1e-5);
  CHECK(config.hiddenDropout == 0);
  CHECK(config.attentionDropout == 0.25);
  CHECK(config.initializerRange == 0.5);
  CHECK(config.hiddenAct == "gelu_new");
  CHECK(config.seed == 9007199254740993u);
  CHECK(config.batch == 2);
  CHECK(config.seq == 16);
  // An integral float is an integer.
  CHECK(parseOk(configJson({{"hidden_size", "32.0"}})).hiddenSize == 32);
}

TEST_CASE("bert config: other Hugging Face keys are ignored") {
  BertConfig config =
      parseOk(configJson({{"architectures", "[\"BertForMaskedLM\"]"},
                          {"model_type", "\"bert\""},
                          {"pad_token_id", "0"},
                          {"transformers_version", "\"4.6.0.dev0\""},
                          {"use_cache", "true"},
                          {"classifier_dropout", "null"},
                          {"gradient_checkpointing", "false"},
                          {"torch_dtype", "\"float32\""}}));
  CHECK(config.hiddenSize == 32);
}

TEST_CASE("bert config: malformed documents") {
  CHECK(parseError("{\"vocab_size\": }") ==
        "t.json:1:16: invalid JSON: invalid JSON value");
  CHECK(parseError("{\n  \"vocab_size\": 3\n  \"hidden_size\": 4\n}") ==
        "t.json:3:3: invalid JSON: expected , or } after object property");
  CHECK(parseError("[1, 2]") == "t.json: expected a JSON object, got an array");
  CHECK(parseError("3") == "t.json: expected a JSON object, got 3");
}

TEST_CASE("bert config: missing required keys") {
  for (const char *key : {"vocab_size", "hidden_size", "num_hidden_layers",
                          "num_attention_heads", "intermediate_size"}) {
    INFO(key);
    CHECK(parseError(configJson({{key, nullptr}})) ==
          "t.json: missing required key '" + std::string(key) + "'");
  }
}

TEST_CASE("bert config: wrong JSON types") {
  CHECK(parseError(configJson({{"hidden_size", "\"128\""}})) ==
        "t.json: key 'hidden_size' must be an integer, got \"128\"");
  CHECK(parseError(configJson({{"num_hidden_layers", "1.5"}})) ==
        "t.json: key 'num_hidden_layers' must be an integer, got 1.5");
  CHECK(parseError(configJson({{"batch", "true"}})) ==
        "t.json: key 'batch' must be an integer, got true");
  CHECK(parseError(configJson({{"seq", "[16]"}})) ==
        "t.json: key 'seq' must be an integer, got an array");
  CHECK(parseError(configJson({{"vocab_size", "{}"}})) ==
        "t.json: key 'vocab_size' must be an integer, got an object");
  CHECK(parseError(configJson({{"intermediate_size", "null"}})) ==
        "t.json: key 'intermediate_size' must be an integer, got null");
  CHECK(parseError(configJson({{"layer_norm_eps", "\"1e-12\""}})) ==
        "t.json: key 'layer_norm_eps' must be a number, got \"1e-12\"");
  CHECK(parseError(configJson({{"hidden_act", "3"}})) ==
        "t.json: key 'hidden_act' must be a string, got 3");
  CHECK(parseError(configJson({{"seed", "-1"}})) ==
        "t.json: key 'seed' must be a non-negative integer, got -1");
  CHECK(parseError(configJson({{"seed", "0.5"}})) ==
        "t.json: key 'seed' must be an integer, got 0.5");
  CHECK(parseError(configJson({{"vocab_size", "1e19"}})) ==
        "t.json: key 'vocab_size' is 1e+19, which is too large");
}

TEST_CASE("bert config: invalid values") {
  CHECK(parseError(configJson({{"num_hidden_layers", "0"}})) ==
        "t.json: key 'num_hidden_layers' must be positive, got 0");
  CHECK(parseError(configJson({{"batch", "-2"}})) ==
        "t.json: key 'batch' must be positive, got -2");
  CHECK(parseError(configJson({{"type_vocab_size", "0"}})) ==
        "t.json: key 'type_vocab_size' must be positive, got 0");
  CHECK(parseError(configJson({{"hidden_size", "30"}})) ==
        "t.json: key 'hidden_size' (30) must be divisible by "
        "'num_attention_heads' (4)");
  CHECK(parseError(configJson({{"seq", "65"}})) ==
        "t.json: key 'seq' (65) must not exceed 'max_position_embeddings' "
        "(64)");
  CHECK(parseError(configJson({{"hidden_dropout_prob", "1"}})) ==
        "t.json: key 'hidden_dropout_prob' must be in [0, 1), got 1");
  CHECK(parseError(configJson({{"attention_probs_dropout_prob", "-0.1"}})) ==
        "t.json: key 'attention_probs_dropout_prob' must be in [0, 1), got "
        "-0.1");
  CHECK(parseError(configJson({{"layer_norm_eps", "0"}})) ==
        "t.json: key 'layer_norm_eps' must be a positive number, got 0");
  // Positive as a double but 0 (or inf) in f32, the model's type.
  CHECK(parseError(configJson({{"layer_norm_eps", "1e-122"}})) ==
        "t.json: key 'layer_norm_eps' must be a positive number that f32 "
        "holds (between 1.4e-45 and 3.4e+38), got 1e-122");
  CHECK(parseError(configJson({{"layer_norm_eps", "1e+300"}})) ==
        "t.json: key 'layer_norm_eps' must be a positive number that f32 "
        "holds (between 1.4e-45 and 3.4e+38), got 1e+300");
  CHECK(parseError(configJson({{"initializer_range", "-1"}})) ==
        "t.json: key 'initializer_range' must be a non-negative number, "
        "got -1");
  CHECK(parseError(configJson({{"hidden_act", "\"swish\""}})) ==
        "t.json: key 'hidden_act' is \"swish\", expected \"gelu\", "
        "\"gelu_new\", \"gelu_pytorch_tanh\" or \"relu\"");
  CHECK(parseError(
            configJson({{"position_embedding_type", "\"relative_key\""}})) ==
        "t.json: key 'position_embedding_type' is \"relative_key\", only "
        "\"absolute\" is supported");
  // Another family's config is refused, not built as BERT.
  CHECK(parseError(configJson({{"model_type", "\"gpt2\""}})) ==
        "t.json: key 'model_type' is \"gpt2\", only \"bert\" is supported");
  CHECK(parseOk(configJson({{"model_type", "\"bert\""}})).hiddenSize > 0);
  CHECK(parseError(configJson({{"vocab_size", "1125899906842624"},
                               {"hidden_size", "4096"},
                               {"num_attention_heads", "1"}})) ==
        "t.json: key 'vocab_size' must be at most 4194304, got "
        "1125899906842624");
  CHECK(parseError(configJson({{"max_position_embeddings", "1048576"},
                               {"seq", "1048576"},
                               {"batch", "1048576"}})) ==
        "t.json: the attention scores f32[1048576,4,1048576,1048576] would "
        "be larger than 2^63 bytes");
}

TEST_CASE("bert config: sizes are bounded per key and by memory") {
  CHECK(parseError(configJson({{"vocab_size", "1000000000000"}})) ==
        "t.json: key 'vocab_size' must be at most 4194304, got 1000000000000");
  CHECK(parseError(configJson({{"intermediate_size", "100000000000"}})) ==
        "t.json: key 'intermediate_size' must be at most 262144, got "
        "100000000000");
  CHECK(parseError(configJson({{"num_hidden_layers", "100000"}})) ==
        "t.json: key 'num_hidden_layers' must be at most 1024, got 100000");
  // Within the bounds, the weights must fit the memory limit.
  remat::ir::setMemoryLimitBytes(1 << 20);
  std::string error = parseError(configJson({{"vocab_size", "1000000"}}));
  remat::ir::setMemoryLimitBytes(0);
  CHECK(llvm::StringRef(error).startswith("t.json: storing "));
  CHECK(llvm::StringRef(error).contains(" f32 weights needs "));
  CHECK(llvm::StringRef(error).endswith("more than --max-memory (1.0 MiB)"));
}

TEST_CASE("bert config: nesting deeper than 64 levels is an error") {
  std::string deep = "{\"x\": " + std::string(100000, '[');
  CHECK(parseError(deep) ==
        "t.json:1: invalid JSON: nested deeper than 64 levels");
  // Brackets inside strings do not count.
  std::string brackets = "\"" + std::string(100, '[') + "\"";
  parseOk(configJson({{"note", brackets.c_str()}}));
}

TEST_CASE("bert config: misspelled known keys are errors") {
  CHECK(parseError(configJson({{"hiden_size", "32"}})) ==
        "t.json: unknown key 'hiden_size' (did you mean 'hidden_size')");
  CHECK(parseError(configJson({{"bacth", "4"}})) ==
        "t.json: unknown key 'bacth' (did you mean 'batch')");
  CHECK(parseError(configJson({{"Seq", "4"}})) ==
        "t.json: unknown key 'Seq' (did you mean 'seq')");
  CHECK(parseError(configJson({{"sede", "4"}})) ==
        "t.json: unknown key 'sede' (did you mean 'seed')");
  CHECK(parseError(configJson({{"num_attention_head", "4"}})) ==
        "t.json: unknown key 'num_attention_head' (did you mean "
        "'num_attention_heads')");
  CHECK(parseError(configJson({{"hidden_dropout_prb", "0"}})) ==
        "t.json: unknown key 'hidden_dropout_prb' (did you mean "
        "'hidden_dropout_prob')");
  // Keys of other Hugging Face models that only resemble remat's are fine.
  parseOk(configJson({{"num_hidden_groups", "1"},
                      {"embedding_size", "128"},
                      {"layer_norm_epsilon", "1e-5"},
                      {"hidden_dropout", "0.1"},
                      {"n_head", "4"}}));
}

TEST_CASE("bert config: a missing file names it") {
  auto config = loadBertConfig("/nonexistent/bert.json");
  REQUIRE(!config);
  CHECK(errorToString(config.takeError()) ==
        "cannot read '/nonexistent/bert.json': No such file or directory");
}

TEST_CASE("bert config: --bind overrides batch and seq") {
  BertConfig config = parseOk(configJson({}));
  llvm::StringMap<int64_t> bindings;
  bindings["batch"] = 3;
  bindings["seq"] = 64;
  if (llvm::Error err = config.applyBindings(bindings))
    FAIL(errorToString(std::move(err)));
  CHECK(config.batch == 3);
  CHECK(config.seq == 64);

  auto bindError = [&](llvm::StringRef name, int64_t value) {
    llvm::StringMap<int64_t> one;
    one[name] = value;
    BertConfig copy = config;
    llvm::Error err = copy.applyBindings(one);
    REQUIRE(static_cast<bool>(err));
    CHECK(copy.seq == 64); // unchanged on error
    return errorToString(std::move(err));
  };
  CHECK(bindError("seqlen", 16) ==
        "t.json: --bind seqlen: a BERT config binds only batch and seq");
  CHECK(bindError("seq", 65) ==
        "t.json: --bind seq=65 exceeds 'max_position_embeddings' (64)");
  CHECK(bindError("batch", 0) == "t.json: --bind batch=0 must be positive");
  CHECK(bindError("batch", int64_t{1} << 56) ==
        "t.json: key 'batch' must be at most 1048576, got "
        "72057594037927936");
}

TEST_CASE("bert presets all load") {
  struct Preset {
    const char *name;
    int64_t layers, hidden, heads, intermediate, maxPosition, batch, seq;
  };
  for (Preset p :
       {Preset{"bert-tiny", 2, 128, 2, 512, 512, 8, 128},
        Preset{"bert-mini", 4, 256, 4, 1024, 512, 8, 128},
        Preset{"bert-base", 12, 768, 12, 3072, 512, 8, 128},
        Preset{"bert-large", 24, 1024, 16, 4096, 512, 8, 128},
        Preset{"bert-large-4096", 24, 1024, 16, 4096, 4096, 1, 4096}}) {
    INFO(p.name);
    BertConfig config = loadPreset(p.name);
    CHECK(config.vocabSize == 30522);
    CHECK(config.typeVocabSize == 2);
    CHECK(config.numLayers == p.layers);
    CHECK(config.hiddenSize == p.hidden);
    CHECK(config.numHeads == p.heads);
    CHECK(config.intermediateSize == p.intermediate);
    CHECK(config.maxPosition == p.maxPosition);
    CHECK(config.batch == p.batch);
    CHECK(config.seq == p.seq);
    CHECK(config.layerNormEps == 1e-12);
    CHECK(config.hiddenDropout == 0.1);
    CHECK(config.attentionDropout == 0.1);
    CHECK(llvm::StringRef(config.sourceName)
              .endswith(std::string(p.name) + ".json"));
    // The structure builds for every preset (without the weights' data).
    auto graph = buildOk(config, BertBuildOptions{/*initWeights=*/false});
    CHECK(graph->getNumNodes() == size_t(35 + 27 * p.layers));
  }
  // Hugging Face's BertForPreTraining has 110,106,428 parameters; remat has
  // no next-sentence head (768 * 2 + 2).
  CHECK(loadPreset("bert-base").getNumParameters() == 110106428 - 1538);
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

TEST_CASE("bert-tiny builds and verifies") {
  auto graph = buildOk(loadPreset("bert-tiny"));
  llvm::Error err = verify(*graph);
  INFO((err ? errorToString(std::move(err)) : std::string("ok")));
  REQUIRE(!err);
  CHECK(graph->getNumNodes() == 89);
  CHECK(graph->getSourceName().endswith("bert-tiny.json"));

  // Token inputs first, then 44 weights, all with data.
  const char *tokenInputs[] = {"input_ids", "token_type_ids", "attention_mask",
                               "labels"};
  for (unsigned i = 0; i < 4; ++i) {
    CHECK(graph->getInput(i)->getName() == tokenInputs[i]);
    CHECK(graph->getInput(i)->getType() == TensorType(DType::I64, {8, 128}));
    CHECK(!graph->getInput(i)->isWeight());
  }
  REQUIRE(graph->getNumInputs() == 4 + 44);
  int64_t parameters = 0;
  for (unsigned i = 4; i < graph->getNumInputs(); ++i) {
    const Value *weight = graph->getInput(i);
    CHECK(weight->isWeight());
    CHECK(weight->getData());
    CHECK(weight->hasUses());
    parameters += weight->getType().getNumElements();
  }
  CHECK(parameters == loadPreset("bert-tiny").getNumParameters());
}

TEST_CASE("bert weights have Hugging Face names and [out, in] layouts") {
  auto graph = buildOk(loadPreset("bert-tiny"));
  auto typeOf = [&](llvm::StringRef name) {
    const Value *value = graph->lookup(name);
    INFO(name.str());
    REQUIRE(value);
    CHECK(value->isWeight());
    return value->getType();
  };
  auto f32 = [](llvm::ArrayRef<int64_t> dims) {
    return TensorType(DType::F32, dims);
  };
  CHECK(typeOf("bert.embeddings.word_embeddings.weight") == f32({30522, 128}));
  CHECK(typeOf("bert.embeddings.position_embeddings.weight") ==
        f32({512, 128}));
  CHECK(typeOf("bert.embeddings.token_type_embeddings.weight") ==
        f32({2, 128}));
  CHECK(typeOf("bert.embeddings.LayerNorm.weight") == f32({128}));
  CHECK(typeOf("bert.embeddings.LayerNorm.bias") == f32({128}));
  for (const char *module : {"query", "key", "value"}) {
    std::string prefix =
        std::string("bert.encoder.layer.1.attention.self.") + module;
    CHECK(typeOf(prefix + ".weight") == f32({128, 128}));
    CHECK(typeOf(prefix + ".bias") == f32({128}));
  }
  CHECK(typeOf("bert.encoder.layer.0.attention.output.dense.weight") ==
        f32({128, 128}));
  CHECK(typeOf("bert.encoder.layer.0.attention.output.LayerNorm.weight") ==
        f32({128}));
  CHECK(typeOf("bert.encoder.layer.0.intermediate.dense.weight") ==
        f32({512, 128}));
  CHECK(typeOf("bert.encoder.layer.0.intermediate.dense.bias") == f32({512}));
  CHECK(typeOf("bert.encoder.layer.0.output.dense.weight") == f32({128, 512}));
  CHECK(typeOf("bert.encoder.layer.0.output.LayerNorm.bias") == f32({128}));
  CHECK(typeOf("bert.pooler.dense.weight") == f32({128, 128}));
  CHECK(typeOf("bert.pooler.dense.bias") == f32({128}));
  CHECK(typeOf("cls.predictions.transform.dense.weight") == f32({128, 128}));
  CHECK(typeOf("cls.predictions.transform.LayerNorm.weight") == f32({128}));
  CHECK(typeOf("cls.predictions.bias") == f32({30522}));
  // HF's position_ids is a buffer, not a parameter: here a constant.
  const Value *positions = graph->lookup("bert.embeddings.position_ids");
  REQUIRE(positions);
  REQUIRE(positions->getDefiningNode());
  CHECK(positions->getDefiningNode()->getOp() == OpKind::Constant);
  CHECK(positions->getType() == TensorType(DType::I64, {1, 128}));
  const TensorData *ids = getConstantValue(positions);
  REQUIRE(ids);
  CHECK(ids->getInt(0) == 0);
  CHECK(ids->getInt(127) == 127);

  // Every linear layer is Gemm(x, W, b) {transB = 1}; nothing transposes a
  // weight.
  const Value *query =
      graph->lookup("bert.encoder.layer.0.attention.self.query");
  REQUIRE(query);
  const Node *gemm = query->getDefiningNode();
  CHECK(gemm->getOp() == OpKind::Gemm);
  CHECK(gemm->getAttrs().getInt("transB") == 1);
  CHECK(gemm->getOperand(1)->getName() ==
        "bert.encoder.layer.0.attention.self.query.weight");
  CHECK(gemm->getOperand(2)->getName() ==
        "bert.encoder.layer.0.attention.self.query.bias");
  CHECK(query->getType() == TensorType(DType::F32, {8 * 128, 128}));
  CHECK(nodesOf(*graph, OpKind::Gemm).size() == 6 * 2 + 3);
  for (const Node *transpose : nodesOf(*graph, OpKind::Transpose))
    CHECK(!transpose->getOperand(0)->isGraphInput());
}

TEST_CASE("bert decoder weight is tied to the word embeddings") {
  auto graph = buildOk(loadPreset("bert-tiny"));
  CHECK(!graph->lookup("cls.predictions.decoder.weight"));
  const Value *words = graph->lookup("bert.embeddings.word_embeddings.weight");
  REQUIRE(words);
  REQUIRE(words->getNumUses() == 2);
  llvm::SmallVector<OpKind, 2> users;
  for (const Use &use : words->getUses())
    users.push_back(use.user->getOp());
  llvm::sort(users);
  CHECK(users[0] == OpKind::Gemm);
  CHECK(users[1] == OpKind::Gather);
  const Value *scores = graph->lookup("cls.predictions.decoder");
  REQUIRE(scores);
  const Node *decoder = scores->getDefiningNode();
  CHECK(decoder->getOperand(1) == words);
  CHECK(decoder->getOperand(2)->getName() == "cls.predictions.bias");
  CHECK(decoder->getAttrs().getInt("transB") == 1);
  CHECK(scores->getType() == TensorType(DType::F32, {8 * 128, 30522}));
}

TEST_CASE("bert loss is the only scalar output") {
  auto graph = buildOk(loadPreset("bert-tiny"));
  REQUIRE(graph->getOutputs().size() == 2);
  const Value *loss = graph->getOutputs()[0];
  CHECK(loss->getName() == "loss");
  CHECK(loss->getType() == TensorType(DType::F32, {}));
  const Value *pooled = graph->getOutputs()[1];
  CHECK(pooled->getName() == "pooled_output");
  CHECK(pooled->getType() == TensorType(DType::F32, {8, 128}));
  CHECK(pooled->getType().getRank() != 0);

  const Node *lossNode = loss->getDefiningNode();
  CHECK(lossNode->getOp() == OpKind::SoftmaxCrossEntropyLoss);
  CHECK(lossNode->getAttrs().getString("reduction") == "mean");
  CHECK(lossNode->getAttrs().getInt("ignore_index") == -100);
  CHECK(lossNode->getOperand(0)->getName() == "cls.predictions.decoder");
  CHECK(lossNode->getOperand(1)->getType() ==
        TensorType(DType::I64, {8 * 128}));
  CHECK(lossNode->getOperand(1)->getDefiningNode()->getOperand(0)->getName() ==
        "labels");
}

TEST_CASE("bert pooler exists but does not reach the loss") {
  auto graph = buildOk(loadPreset("bert-tiny"));
  const Value *loss = graph->lookup("loss");
  const Value *pooled = graph->lookup("pooled_output");
  REQUIRE(loss);
  REQUIRE(pooled);
  unsigned poolerWeights = 0;
  for (const Value *input : graph->getInputs()) {
    if (!input->isWeight())
      continue;
    INFO(input->getName().str());
    llvm::DenseSet<const Value *> reached = reachableFrom(input);
    if (input->getName().startswith("bert.pooler.")) {
      ++poolerWeights;
      CHECK(reached.count(pooled));
      CHECK(!reached.count(loss));
    } else {
      // Every other weight gets a gradient.
      CHECK(reached.count(loss));
    }
  }
  CHECK(poolerWeights == 2);
  // The pooler reads the first token of the last layer's output.
  const Value *first = graph->lookup("bert.pooler.first_token_tensor");
  REQUIRE(first);
  CHECK(first->getType() == TensorType(DType::F32, {8, 128}));
  CHECK(first->getDefiningNode()->getAttrs().getInt("axis") == 1);
}

TEST_CASE("bert attention: shapes, mask and scale") {
  auto graph = buildOk(loadPreset("bert-tiny"));
  auto typeOf = [&](llvm::StringRef name) {
    const Value *value = graph->lookup(name);
    INFO(name.str());
    REQUIRE(value);
    return value->getType();
  };
  std::string self = "bert.encoder.layer.0.attention.self";
  CHECK(typeOf(self + ".query_layer") ==
        TensorType(DType::F32, {8, 2, 128, 64}));
  CHECK(typeOf(self + ".key_layer_t") ==
        TensorType(DType::F32, {8, 2, 64, 128}));
  CHECK(typeOf(self + ".attention_probs") ==
        TensorType(DType::F32, {8, 2, 128, 128}));
  CHECK(typeOf(self) == TensorType(DType::F32, {8 * 128, 128}));
  CHECK(typeOf("extended_attention_mask") ==
        TensorType(DType::F32, {8, 1, 1, 128}));
  const Node *scaled =
      graph->lookup(self + ".attention_scores.scaled")->getDefiningNode();
  CHECK(scaled->getOp() == OpKind::Div);
  const TensorData *scale = getConstantValue(scaled->getOperand(1));
  REQUIRE(scale);
  CHECK(scale->getDouble(0) == 8.0);
  const Node *masked =
      graph->lookup(self + ".attention_scores.masked")->getDefiningNode();
  CHECK(masked->getOperand(1)->getName() == "extended_attention_mask");
  // One mask for all layers.
  CHECK(graph->lookup("extended_attention_mask")->getNumUses() == 2);
}

TEST_CASE("bert activations follow hidden_act") {
  BertConfig config = smallConfig(1);
  auto gelu = buildOk(config);
  auto gelus = nodesOf(*gelu, OpKind::Gelu);
  REQUIRE(gelus.size() == 2); // intermediate and the MLM transform
  for (const Node *node : gelus)
    CHECK(node->getAttrs().getString("approximate") == "none");

  config.hiddenAct = "gelu_pytorch_tanh";
  auto tanh = buildOk(config);
  for (const Node *node : nodesOf(*tanh, OpKind::Gelu))
    CHECK(node->getAttrs().getString("approximate") == "tanh");

  config.hiddenAct = "relu";
  auto relu = buildOk(config);
  CHECK(nodesOf(*relu, OpKind::Gelu).empty());
  CHECK(nodesOf(*relu, OpKind::Relu).size() == 2);
}

TEST_CASE("bert dropout nodes have unique seeds and training mode") {
  auto graph = buildOk(loadPreset("bert-tiny"));
  auto dropouts = nodesOf(*graph, OpKind::Dropout);
  REQUIRE(dropouts.size() == 1 + 3 * 2);
  std::set<int64_t> seeds;
  for (const Node *node : dropouts) {
    INFO(node->describe());
    std::optional<int64_t> seed = node->getAttrs().getInt("seed");
    REQUIRE(seed);
    CHECK(seeds.insert(*seed).second);
    REQUIRE(node->getNumOperands() == 3);
    const TensorData *ratio = getConstantValue(node->getOperand(1));
    const TensorData *training = getConstantValue(node->getOperand(2));
    REQUIRE(ratio);
    REQUIRE(training);
    CHECK(ratio->getDouble(0) == doctest::Approx(0.1));
    CHECK(training->getInt(0) == 1);
    CHECK(node->getNumResults() == 2);
    CHECK(node->getResult(1)->getName() ==
          node->getResult(0)->getName().str() + ".mask");
  }
  CHECK(seeds == std::set<int64_t>{1, 101, 102, 103, 201, 202, 203});
  CHECK(graph->lookup("bert.encoder.layer.1.attention.self.dropout")
            ->getDefiningNode()
            ->getAttrs()
            .getInt("seed") == 201);
}

TEST_CASE("bert omits dropout with probability 0") {
  BertConfig config = smallConfig(2);
  config.attentionDropout = 0;
  auto noAttention = buildOk(config);
  CHECK(nodesOf(*noAttention, OpKind::Dropout).size() == 1 + 2 * 2);
  CHECK(!noAttention->lookup("const.attention_probs_dropout_prob"));

  config.hiddenDropout = 0;
  auto none = buildOk(config);
  CHECK(nodesOf(*none, OpKind::Dropout).empty());
  CHECK(!none->lookup("const.training_mode"));
  // 7 dropouts and their 3 constants fewer.
  CHECK(none->getNumNodes() == 35 + 27 * 2 - 7 - 3);
  // The softmax feeds the context MatMul directly.
  const Value *probs =
      none->lookup("bert.encoder.layer.0.attention.self.attention_probs");
  REQUIRE(probs->getNumUses() == 1);
  CHECK(probs->getUses()[0].user->getOp() == OpKind::MatMul);
}

TEST_CASE("bert nodes carry their encoder layer") {
  auto graph = buildOk(smallConfig(3));
  std::map<int, int> perLayer;
  for (const Node &node : graph->getNodes())
    ++perLayer[node.getLayer()];
  CHECK(perLayer.size() == 4);
  CHECK(perLayer[-1] == 35);
  for (int layer = 0; layer < 3; ++layer)
    CHECK(perLayer[layer] == 27);
  CHECK(graph->lookup("bert.encoder.layer.2.output.LayerNorm")
            ->getDefiningNode()
            ->getLayer() == 2);
  CHECK(graph->lookup("bert.embeddings")->getDefiningNode()->getLayer() == -1);
  CHECK(graph->lookup("loss")->getDefiningNode()->getLayer() == -1);
}

TEST_CASE("bert node count grows linearly with layers") {
  size_t previous = 0, step = 0;
  for (int64_t layers = 1; layers <= 4; ++layers) {
    auto graph =
        buildOk(smallConfig(layers), BertBuildOptions{/*initWeights=*/false});
    size_t nodes = graph->getNumNodes();
    if (layers > 1) {
      if (step == 0)
        step = nodes - previous;
      CHECK(nodes - previous == step);
    }
    previous = nodes;
    // 16 weights per layer, 5 in the embeddings, 2 in the pooler, 5 in the
    // MLM head, after the 4 token inputs.
    CHECK(graph->getNumInputs() == size_t(4 + 5 + 16 * layers + 2 + 5));
  }
  CHECK(step == 27);
}

TEST_CASE("bert weights are deterministic and keyed by seed and name") {
  BertConfig config = smallConfig(2);
  auto first = buildOk(config);
  auto second = buildOk(config);
  std::string why;
  CHECK_MESSAGE(graphsEqual(*first, *second, &why), why);

  config.seed = 1;
  auto reseeded = buildOk(config);
  CHECK(!graphsEqual(*first, *reseeded, &why));
  CHECK(why == "data of input %bert.embeddings.word_embeddings.weight differs");
  // Only data differs: the structure, dropout seeds included, is the same.
  BertConfig noData = smallConfig(2);
  auto structureA = buildOk(noData, BertBuildOptions{false});
  noData.seed = 1;
  auto structureB = buildOk(noData, BertBuildOptions{false});
  CHECK_MESSAGE(graphsEqual(*structureA, *structureB, &why), why);
  for (const Value *input : structureA->getInputs())
    CHECK(!input->getData());

  // LayerNorm weights are 1 and biases 0, whatever the seed.
  for (float x : floats(first->lookup("bert.embeddings.LayerNorm.weight")))
    CHECK(x == 1.0f);
  for (float x : floats(first->lookup("cls.predictions.bias")))
    CHECK(x == 0.0f);
  for (float x :
       floats(first->lookup("bert.encoder.layer.1.intermediate.dense.bias")))
    CHECK(x == 0.0f);
  // Two weights of the same shape get different values.
  llvm::ArrayRef<float> query =
      floats(first->lookup("bert.encoder.layer.0.attention.self.query.weight"));
  llvm::ArrayRef<float> key =
      floats(first->lookup("bert.encoder.layer.0.attention.self.key.weight"));
  CHECK(query != key);
}

TEST_CASE("fillNormal depends only on seed, name and index") {
  std::vector<float> shortRun(7), longRun(1001), other(7), reseeded(7);
  fillNormal(shortRun, 3, "w", 0.02);
  fillNormal(longRun, 3, "w", 0.02);
  fillNormal(other, 3, "v", 0.02);
  fillNormal(reseeded, 4, "w", 0.02);
  for (size_t i = 0; i < shortRun.size(); ++i) {
    INFO(i);
    CHECK(shortRun[i] == longRun[i]);
    CHECK(shortRun[i] != other[i]);
    CHECK(shortRun[i] != reseeded[i]);
  }
  // The same bits on every machine and compiler (vectorized or not, with or
  // without FMA): a run without a checkpoint starts from the same weights
  // everywhere. These changing means every such run changes.
  std::vector<float> golden(5);
  fillNormal(golden, 0, "bert.embeddings.word_embeddings.weight", 1.0);
  const float expected[] = {-0x1.3cadeap+0f, 0x1.9f579cp-7f, 0x1.80fae2p+0f,
                            -0x1.b86476p-1f, -0x1.402e38p-2f};
  for (size_t i = 0; i < golden.size(); ++i) {
    INFO(i);
    CHECK(golden[i] == expected[i]);
  }
}

TEST_CASE("fillNormal draws normal(0, stddev)") {
  std::vector<float> values(1 << 20);
  fillNormal(values, 0, "statistics", 0.02);
  double sum = 0, sumSquares = 0, sumFourth = 0;
  float largest = 0;
  for (float x : values) {
    double z = x / 0.02;
    sum += z;
    sumSquares += z * z;
    sumFourth += z * z * z * z;
    largest = std::max(largest, std::fabs(x));
  }
  double n = static_cast<double>(values.size());
  double mean = sum / n, variance = sumSquares / n - mean * mean;
  INFO("mean " << mean << " variance " << variance << " kurtosis "
               << sumFourth / n / (variance * variance));
  CHECK(std::fabs(mean) < 0.005);
  CHECK(std::fabs(variance - 1.0) < 0.01);
  CHECK(std::fabs(sumFourth / n / (variance * variance) - 3.0) < 0.05);
  // 24-bit uniforms bound the tails at sqrt(48 ln 2) = 5.77 sigma.
  CHECK(largest <= 5.77f * 0.02f);
  CHECK(largest > 4.0f * 0.02f);
}

TEST_CASE("bert graph prints and parses back") {
  auto graph = buildOk(smallConfig(2), BertBuildOptions{false});
  std::string text = printGraphToString(*graph);
  auto parsed = parseGraph(text, "bert.rir");
  if (!parsed)
    FAIL(errorToString(parsed.takeError()));
  std::string why;
  CHECK_MESSAGE(graphsEqual(*graph, **parsed, &why), why);
  CHECK(llvm::StringRef(text).contains(
      "remat.Gelu(%bert.encoder.layer.0.intermediate.dense)"));
}

TEST_CASE("canonicalize keeps the pooler of bert, an output") {
  auto graph = buildOk(smallConfig(2), BertBuildOptions{false});
  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  passes::PassManager pm;
  pm.setContext({runtime::cpu::makeCpuEvaluator()});
  if (llvm::Error err = passes::parsePassPipeline("canonicalize", registry, pm))
    FAIL(errorToString(std::move(err)));
  auto changed = pm.run(*graph);
  if (!changed)
    FAIL(errorToString(changed.takeError()));
  REQUIRE(graph->getOutputs().size() == 2);
  CHECK(graph->getOutputs()[0]->getName() == "loss");
  CHECK(graph->getOutputs()[1]->getName() == "pooled_output");
  CHECK(graph->lookup("bert.pooler.dense"));
  CHECK(graph->lookup("bert.pooler.dense.weight")->hasUses());
  CHECK(nodesOf(*graph, OpKind::Dropout).size() == 7);
}

TEST_CASE("buildBert rejects an invalid config") {
  BertConfig config = smallConfig(2);
  config.hiddenSize = 17;
  auto graph = buildBert(config);
  REQUIRE(!graph);
  CHECK(errorToString(graph.takeError()) ==
        "small: key 'hidden_size' (17) must be divisible by "
        "'num_attention_heads' (2)");
}
