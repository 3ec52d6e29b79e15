//===- tests/unit/OnnxImporterTest.cpp - ONNX ModelProto -> Graph ---------===//
//
// Models are built in C++ with the onnx::ModelProto API, serialized, and
// imported with importOnnxBytes (importOnnxFile for external data and the
// real exports under tests/fixtures). Every bad input is shown with its
// message.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxImporter.h"

#include "ir/Limits.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/FoldingPolicy.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

// onnx_pb.h picks the ONNX-ML protobuf classes under ONNX_ML, which targets
// linking remat::onnx define; this test may be built without it.
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#include <onnx/onnx_pb.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace remat;
using namespace remat::ir;
using namespace remat::onnx_frontend;

namespace {

/// The importer's sentence on the ops it reads (the unsupported-op error):
/// ir/Ops.def's ops and those it converts at import.
const std::string kSupportedOps =
    "remat supports the ops of ir/Ops.def and converts BatchNormalization, "
    "CastLike, DFT, Einsum, Flatten, GatherND, GlobalAveragePool, "
    "GlobalMaxPool, "
    "InstanceNormalization, NonZero, Resize, ScatterND, SequenceAt and "
    "SplitToSequence to them at import; no other domain than ai.onnx and "
    "remat";

/// A dim of a declared type: a value, a symbolic name, or neither.
struct Dim {
  Dim(int64_t value) : value(value) {}
  Dim(const char *param) : param(param) {}
  static Dim unknown() {
    Dim dim(int64_t{0});
    dim.isUnknown = true;
    return dim;
  }
  int64_t value = 0;
  std::string param;
  bool isUnknown = false;
};

void setType(onnx::TypeProto *type, int elemType, std::vector<Dim> dims) {
  onnx::TypeProto_Tensor *tensor = type->mutable_tensor_type();
  tensor->set_elem_type(elemType);
  onnx::TensorShapeProto *shape = tensor->mutable_shape();
  for (const Dim &dim : dims) {
    onnx::TensorShapeProto_Dimension *d = shape->add_dim();
    if (!dim.param.empty())
      d->set_dim_param(dim.param);
    else if (!dim.isUnknown)
      d->set_dim_value(dim.value);
  }
}

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;

/// Builds a ModelProto: one graph, the default-domain opset, IR version 8
/// unless changed.
struct ModelBuilder {
  onnx::ModelProto model;
  onnx::GraphProto *graph;

  explicit ModelBuilder(int64_t opset = 17, int64_t irVersion = 8) {
    model.set_ir_version(irVersion);
    model.set_producer_name("remat-test");
    onnx::OperatorSetIdProto *id = model.add_opset_import();
    id->set_domain("");
    id->set_version(opset);
    graph = model.mutable_graph();
    graph->set_name("test");
  }

  void input(const std::string &name, int elemType, std::vector<Dim> dims) {
    onnx::ValueInfoProto *info = graph->add_input();
    info->set_name(name);
    setType(info->mutable_type(), elemType, std::move(dims));
  }
  /// A graph output; its declared type is set only when \p elemType != 0.
  void output(const std::string &name, int elemType = 0,
              std::vector<Dim> dims = {}) {
    onnx::ValueInfoProto *info = graph->add_output();
    info->set_name(name);
    if (elemType != 0)
      setType(info->mutable_type(), elemType, std::move(dims));
  }
  void valueInfo(const std::string &name, int elemType, std::vector<Dim> dims) {
    onnx::ValueInfoProto *info = graph->add_value_info();
    info->set_name(name);
    setType(info->mutable_type(), elemType, std::move(dims));
  }

  onnx::NodeProto *node(const std::string &op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs,
                        const std::string &name = "",
                        const std::string &domain = "") {
    onnx::NodeProto *node = graph->add_node();
    node->set_op_type(op);
    node->set_name(name);
    node->set_domain(domain);
    for (const std::string &input : inputs)
      node->add_input(input);
    for (const std::string &output : outputs)
      node->add_output(output);
    return node;
  }

  /// An f32 initializer in raw_data.
  onnx::TensorProto *floats(const std::string &name, std::vector<int64_t> dims,
                            const std::vector<float> &values) {
    onnx::TensorProto *tensor = graph->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(kFloat);
    for (int64_t dim : dims)
      tensor->add_dims(dim);
    tensor->set_raw_data(std::string(
        reinterpret_cast<const char *>(values.data()), values.size() * 4));
    return tensor;
  }
  /// An i64 initializer in int64_data.
  onnx::TensorProto *ints(const std::string &name, std::vector<int64_t> dims,
                          const std::vector<int64_t> &values) {
    onnx::TensorProto *tensor = graph->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(kInt64);
    for (int64_t dim : dims)
      tensor->add_dims(dim);
    for (int64_t value : values)
      tensor->add_int64_data(value);
    return tensor;
  }
  /// A Constant node holding an i64 vector.
  void constInts(const std::string &name, const std::vector<int64_t> &values) {
    onnx::NodeProto *n = node("Constant", {}, {name}, name + "_node");
    onnx::AttributeProto *attr = n->add_attribute();
    attr->set_name("value");
    attr->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto *t = attr->mutable_t();
    t->set_data_type(kInt64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t value : values)
      t->add_int64_data(value);
  }

  std::string bytes() const {
    std::string text;
    REQUIRE(model.SerializeToString(&text));
    return text;
  }
};

void attrInt(onnx::NodeProto *node, const std::string &name, int64_t value) {
  onnx::AttributeProto *attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(value);
}
void attrFloat(onnx::NodeProto *node, const std::string &name, float value) {
  onnx::AttributeProto *attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::FLOAT);
  attr->set_f(value);
}
void attrString(onnx::NodeProto *node, const std::string &name,
                const std::string &value) {
  onnx::AttributeProto *attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::STRING);
  attr->set_s(value);
}
void attrInts(onnx::NodeProto *node, const std::string &name,
              const std::vector<int64_t> &values) {
  onnx::AttributeProto *attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INTS);
  for (int64_t value : values)
    attr->add_ints(value);
}

/// What the driver imports with: the CPU kernels under the folding policy.
ImportOptions defaults() {
  ImportOptions options;
  options.evaluator =
      passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
  return options;
}

ImportOptions
bind(std::initializer_list<std::pair<const char *, int64_t>> list) {
  ImportOptions options = defaults();
  for (const auto &[name, value] : list)
    options.bindings[name] = value;
  return options;
}

/// Imports \p bytes; fails the test with the message on error.
std::unique_ptr<Graph> importOk(const std::string &bytes,
                                const ImportOptions &options = defaults()) {
  auto graph = importOnnxBytes(bytes, "model.onnx", "", options);
  if (!graph) {
    std::string message = errorToString(graph.takeError());
    FAIL_CHECK("import failed: " << message);
    return nullptr;
  }
  return std::move(*graph);
}

/// \returns the import error message, or "ok".
std::string importError(const std::string &bytes,
                        const ImportOptions &options = defaults()) {
  auto graph = importOnnxBytes(bytes, "model.onnx", "", options);
  if (graph)
    return "ok";
  return errorToString(graph.takeError());
}

#define CHECK_CONTAINS(text, substring)                                        \
  do {                                                                         \
    std::string text_ = (text);                                                \
    CHECK_MESSAGE(text_.find(substring) != std::string::npos,                  \
                  "expected '" << (substring) << "' in: " << text_);           \
  } while (false)

/// \returns the ops of the schedule, "Constant Reshape".
std::string opsOf(const Graph &graph) {
  std::string text;
  for (const Node &node : graph.getNodes())
    text += (llvm::Twine(text.empty() ? "" : " ") + node.getOpSpelling()).str();
  return text;
}

const Node *definingNode(const Graph &graph, llvm::StringRef name) {
  const Value *value = graph.lookup(name);
  REQUIRE_MESSAGE(value, "no value named " << name.str());
  return value->getDefiningNode();
}

/// The importer's Dropout seed: 64-bit FNV-1a masked to int64, recomputed
/// here independently.
int64_t fnv1a(const std::string &text) {
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return static_cast<int64_t>(hash & ~(uint64_t(1) << 63));
}

uint16_t halfBits(float value) { return floatToHalf(value); }

/// \returns the message of \p err, or "ok".
std::string errorOf(llvm::Error err) {
  return err ? errorToString(std::move(err)) : "ok";
}

} // namespace

//===----------------------------------------------------------------------===//
// Bindings
//===----------------------------------------------------------------------===//

TEST_CASE("parseBindings reads name=value lists") {
  llvm::StringMap<int64_t> bindings;
  CHECK(errorOf(parseBindings("batch=2, seq=16", bindings)) == "ok");
  CHECK(bindings.size() == 2);
  CHECK(bindings["batch"] == 2);
  CHECK(bindings["seq"] == 16);
  CHECK(errorOf(parseBindings("", bindings)) == "ok");
  CHECK(errorToString(parseBindings("batch", bindings)) ==
        "bad binding 'batch': expected name=value, as in batch=8");
  CHECK(errorToString(parseBindings("=3", bindings)) ==
        "bad binding '=3': expected name=value, as in batch=8");
  CHECK(errorToString(parseBindings("seq=-1", bindings)) ==
        "bad binding 'seq=-1': value '-1' is not a non-negative integer");
  CHECK(errorToString(parseBindings("seq=x", bindings)) ==
        "bad binding 'seq=x': value 'x' is not a non-negative integer");
  CHECK(errorToString(parseBindings("batch=3", bindings)) ==
        "bad binding 'batch=3': 'batch' is already bound to 2");
}

//===----------------------------------------------------------------------===//
// Inputs, weights and initializers
//===----------------------------------------------------------------------===//

TEST_CASE("an MLP with raw and typed initializers imports with weights") {
  ModelBuilder m;
  m.input("x", kFloat, {"batch", 4});
  m.floats("w1", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  // b1 in float_data instead of raw_data.
  onnx::TensorProto *b1 = m.graph->add_initializer();
  b1->set_name("b1");
  b1->set_data_type(kFloat);
  b1->add_dims(3);
  for (float v : {0.5f, -1.0f, 2.0f})
    b1->add_float_data(v);
  m.floats("w2", {3, 2}, {1, 0, 0, 1, 1, 1});
  // A one-element float initializer is a constant, not a weight.
  m.floats("scale", {}, {0.25f});
  m.ints("flat", {1}, {-1});
  m.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
  m.node("Add", {"h", "b1"}, {"hb"}, "add1");
  m.node("Relu", {"hb"}, {"a"}, "relu");
  m.node("MatMul", {"a", "w2"}, {"o"}, "mm2");
  m.node("Mul", {"o", "scale"}, {"s"}, "mul");
  m.node("Reshape", {"s", "flat"}, {"y"}, "reshape");
  m.output("y", kFloat, {"n"});

  auto graph = importOk(m.bytes(), bind({{"batch", 5}}));
  REQUIRE(graph);
  CHECK(graph->getName() == "test");
  CHECK(graph->getSourceName() == "model.onnx");
  // Real inputs first, then the weights in initializer order.
  REQUIRE(graph->getNumInputs() == 4);
  CHECK(graph->getInput(0)->getName() == "x");
  CHECK_FALSE(graph->getInput(0)->isWeight());
  CHECK(graph->getInput(0)->getType().str() == "f32[5,4]");
  CHECK(graph->getInput(1)->getName() == "w1");
  CHECK(graph->getInput(2)->getName() == "b1");
  CHECK(graph->getInput(3)->getName() == "w2");
  for (unsigned i = 1; i < 4; ++i) {
    CHECK(graph->getInput(i)->isWeight());
    REQUIRE(graph->getInput(i)->getData());
  }
  const TensorData &w1 = *graph->getInput(1)->getData();
  CHECK(w1.getType().str() == "f32[4,3]");
  CHECK(w1.getDouble(0) == 1.0);
  CHECK(w1.getDouble(11) == 12.0);
  const TensorData &b1Data = *graph->getInput(2)->getData();
  CHECK(b1Data.getDouble(0) == 0.5);
  CHECK(b1Data.getDouble(1) == -1.0);
  CHECK(b1Data.getDouble(2) == 2.0);
  // Non-weight initializers are Constant nodes at the top of the schedule.
  CHECK(opsOf(*graph) ==
        "Constant Constant MatMul Add Relu MatMul Mul Reshape");
  CHECK(definingNode(*graph, "scale")->getOp() == OpKind::Constant);
  CHECK(definingNode(*graph, "flat")->getOp() == OpKind::Constant);
  CHECK(graph->lookup("y")->getType().str() == "f32[10]");
  REQUIRE(graph->getOutputs().size() == 1);
  CHECK(graph->getOutputs()[0]->getName() == "y");
  CHECK(errorOf(verify(*graph)) == "ok");

  // On request, one-element float initializers are weights too.
  ImportOptions options = bind({{"batch", 5}});
  options.singleElementWeights = true;
  auto weighted = importOk(m.bytes(), options);
  REQUIRE(weighted);
  CHECK(weighted->getNumInputs() == 5);
  CHECK(weighted->lookup("scale")->isWeight());
}

TEST_CASE("f16 and bf16 initializers from int32_data and raw_data") {
  ModelBuilder m;
  m.input("x", onnx::TensorProto::FLOAT16, {2});
  // f16 bit patterns in int32_data, as the ONNX spec stores them.
  onnx::TensorProto *h = m.graph->add_initializer();
  h->set_name("h");
  h->set_data_type(onnx::TensorProto::FLOAT16);
  h->add_dims(2);
  h->add_int32_data(halfBits(1.5f));
  h->add_int32_data(halfBits(-2.0f));
  // bf16 in raw_data (little-endian 16-bit patterns).
  onnx::TensorProto *b = m.graph->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::BFLOAT16);
  b->add_dims(2);
  uint16_t bits[2] = {floatToBFloat16(3.0f), floatToBFloat16(0.5f)};
  b->set_raw_data(std::string(reinterpret_cast<const char *>(bits), 4));
  // bool in int32_data, i32 in raw_data: constants.
  onnx::TensorProto *flag = m.graph->add_initializer();
  flag->set_name("flag");
  flag->set_data_type(onnx::TensorProto::BOOL);
  flag->add_dims(2);
  flag->add_int32_data(1);
  flag->add_int32_data(0);
  m.node("Add", {"x", "h"}, {"y"});
  m.node("Identity", {"b"}, {"z"});
  m.node("Identity", {"flag"}, {"f"});
  m.output("y");
  m.output("z");
  m.output("f");

  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  const Value *hv = graph->lookup("h");
  REQUIRE(hv);
  CHECK(hv->isWeight());
  CHECK(hv->getType().str() == "f16[2]");
  CHECK(hv->getData()->getDouble(0) == 1.5);
  CHECK(hv->getData()->getDouble(1) == -2.0);
  const Value *bv = graph->lookup("b");
  CHECK(bv->isWeight());
  CHECK(bv->getType().str() == "bf16[2]");
  CHECK(bv->getData()->getDouble(0) == 3.0);
  CHECK(bv->getData()->getDouble(1) == 0.5);
  // Identity on a constant is evaluated at import; the initializer's
  // Constant, now unused, is removed.
  CHECK(graph->lookup("flag") == nullptr);
  const TensorData *flagData = getConstantValue(graph->lookup("f"));
  REQUIRE(flagData);
  CHECK(flagData->getType().str() == "bool[2]");
  CHECK(flagData->getInt(0) == 1);
  CHECK(flagData->getInt(1) == 0);
  CHECK(graph->lookup("y")->getType().str() == "f16[2]");
}

TEST_CASE("symbolic dims must be bound") {
  ModelBuilder m;
  m.input("input_ids", kInt64, {"batch", "seq"});
  m.node("Identity", {"input_ids"}, {"y"});
  m.output("y");
  CHECK(importError(m.bytes(), bind({{"batch", 2}})) ==
        "model.onnx: unbound symbolic dim 'seq' of input 'input_ids' (bind it "
        "with --bind seq=N)");
  auto graph = importOk(m.bytes(), bind({{"batch", 2}, {"seq", 16}}));
  REQUIRE(graph);
  CHECK(graph->getInput(0)->getType().str() == "i64[2,16]");
  CHECK(graph->lookup("y")->getType().str() == "i64[2,16]");
  CHECK(importError(m.bytes(), bind({{"batch", 2}, {"seq", -4}})) ==
        "model.onnx: symbolic dim 'seq' of input 'input_ids' is bound to a "
        "negative value (-4)");

  // A dim with neither value nor name cannot be bound.
  ModelBuilder unknown;
  unknown.input("x", kFloat, {2, Dim::unknown()});
  unknown.node("Identity", {"x"}, {"y"});
  unknown.output("y");
  CHECK(importError(unknown.bytes()) ==
        "model.onnx: dim 1 of input 'x' is unknown (it has neither a value "
        "nor a symbolic name that --bind could set)");

  ModelBuilder negative;
  negative.input("x", kFloat, {2, Dim(-3)});
  negative.node("Identity", {"x"}, {"y"});
  negative.output("y");
  CHECK(importError(negative.bytes()) ==
        "model.onnx: dim 1 of graph input 'x' is negative (-3)");
}

TEST_CASE("dims whose byte count overflows are errors") {
  ModelBuilder m;
  m.input("x", kFloat, {int64_t(1) << 40, int64_t(1) << 30});
  m.node("Identity", {"x"}, {"y"});
  m.output("y");
  std::string message = importError(m.bytes());
  CHECK_CONTAINS(message, "model.onnx: graph input 'x' of type "
                          "f32[1099511627776,1073741824]: ");
  CHECK_CONTAINS(message, "overflow");

  // An initializer claiming a huge shape is rejected before any allocation.
  ModelBuilder init;
  init.input("x", kFloat, {2});
  onnx::TensorProto *w = init.floats("w", {2}, {1, 2});
  w->clear_dims();
  w->add_dims(int64_t(1) << 62);
  w->add_dims(4);
  init.node("Add", {"x", "w"}, {"y"});
  init.output("y");
  std::string initMessage = importError(init.bytes());
  CHECK_CONTAINS(initMessage, "model.onnx: initializer 'w' of type "
                              "f32[4611686018427387904,4]: ");

  // A byte count that fits but disagrees with the raw data.
  ModelBuilder shortRaw;
  shortRaw.input("x", kFloat, {3});
  shortRaw.floats("w", {3}, {1, 2});
  shortRaw.node("Add", {"x", "w"}, {"y"});
  shortRaw.output("y");
  CHECK(importError(shortRaw.bytes()) ==
        "model.onnx: initializer 'w' of type f32[3] has 8 bytes of raw_data, "
        "expected 12");
}

TEST_CASE("unsupported dtypes name the tensor and the dtype") {
  ModelBuilder m;
  m.input("x", kFloat, {1});
  onnx::TensorProto *names = m.graph->add_initializer();
  names->set_name("names");
  names->set_data_type(onnx::TensorProto::STRING);
  names->add_dims(1);
  names->add_string_data("hello");
  m.node("Identity", {"x"}, {"y"});
  m.output("y");
  CHECK(importError(m.bytes()) ==
        "model.onnx: initializer 'names' has dtype STRING, which remat does "
        "not support (supported: FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, "
        "INT32, INT8, UINT8 and BOOL)");

  ModelBuilder input;
  input.input("x", onnx::TensorProto::UINT32, {1});
  input.node("Identity", {"x"}, {"y"});
  input.output("y");
  CHECK_CONTAINS(importError(input.bytes()),
                 "model.onnx: graph input 'x' has dtype UINT32, which remat "
                 "does not support");

  ModelBuilder constant;
  onnx::NodeProto *c = constant.node("Constant", {}, {"c"}, "complex_const");
  onnx::AttributeProto *attr = c->add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  attr->mutable_t()->set_name("z");
  attr->mutable_t()->set_data_type(onnx::TensorProto::COMPLEX64);
  constant.output("c");
  CHECK_CONTAINS(importError(constant.bytes()),
                 "model.onnx: tensor 'z' in attribute 'value' of node "
                 "'complex_const' (Constant) has dtype COMPLEX64");
}

//===----------------------------------------------------------------------===//
// Shape subgraphs and opset conversions
//===----------------------------------------------------------------------===//

TEST_CASE("a Shape-Gather-Unsqueeze-Concat-Reshape chain becomes static") {
  // y = x.reshape(x.shape[0], -1), as the TorchScript exporter writes it.
  ModelBuilder m;
  m.input("x", kFloat, {"batch", "seq", 8});
  m.node("Shape", {"x"}, {"s"}, "shape");
  m.constInts("zero", {0});
  onnx::NodeProto *gather =
      m.node("Gather", {"s", "zero_scalar"}, {"d0"}, "gather");
  attrInt(gather, "axis", 0);
  // A scalar index from value_int.
  onnx::NodeProto *scalar = m.node("Constant", {}, {"zero_scalar"}, "c0");
  attrInt(scalar, "value_int", 0);
  m.node("Unsqueeze", {"d0", "zero"}, {"u"}, "unsqueeze");
  m.constInts("minus_one", {-1});
  onnx::NodeProto *concat =
      m.node("Concat", {"u", "minus_one"}, {"target"}, "concat");
  attrInt(concat, "axis", 0);
  m.node("Reshape", {"x", "target"}, {"y"}, "reshape");
  m.output("y", kFloat, {"batch", "rest"});
  // The Constant defining zero_scalar comes after its use: the importer sorts
  // the nodes (stably).
  auto graph = importOk(m.bytes(), bind({{"batch", 2}, {"seq", 16}}));
  REQUIRE(graph);
  CHECK(opsOf(*graph) == "Constant Reshape");
  for (const Node &node : graph->getNodes())
    CHECK(node.getOp() != OpKind::Shape);
  CHECK(graph->lookup("y")->getType().str() == "f32[2,128]");
  const TensorData *target = getConstantValue(graph->lookup("target"));
  REQUIRE(target);
  CHECK(target->getInts() == std::vector<int64_t>{2, -1});
  CHECK(printGraphToString(*graph).find("Shape") == std::string::npos);
}

TEST_CASE("a shape that cannot be made static names the operand") {
  ModelBuilder m;
  m.input("x", kFloat, {6});
  m.input("shape", kInt64, {2});
  m.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  m.output("y");
  CHECK(importError(m.bytes()) ==
        "model.onnx: node 'reshape' (Reshape): cannot infer a static shape "
        "for 'y': operand 1 ('shape') is not a constant (it is a graph "
        "input)");
}

TEST_CASE("import folds through the evaluator it is given, and needs one") {
  // target = Concat(Unsqueeze(Shape(x)[0]), [-1]), as in the chain above.
  ModelBuilder m;
  m.input("x", kFloat, {"batch", 8});
  m.node("Shape", {"x"}, {"s"}, "shape");
  m.constInts("zero", {0});
  m.node("Gather", {"s", "zero"}, {"d0"}, "gather");
  m.constInts("minus_one", {-1});
  onnx::NodeProto *concat =
      m.node("Concat", {"d0", "minus_one"}, {"target"}, "concat");
  attrInt(concat, "axis", 0);
  m.node("Reshape", {"x", "target"}, {"y"}, "reshape");
  m.output("y");

  ImportOptions none;
  none.bindings["batch"] = 2;
  CHECK(importError(m.bytes(), none) ==
        "cannot import 'model.onnx': no constant evaluator was given "
        "(ImportOptions::evaluator folds shape subgraphs)");

  // Every all-constant node goes through the evaluator: Shape, Gather and
  // Concat, but not the Constant nodes themselves.
  ImportOptions counting = bind({{"batch", 2}});
  std::vector<std::string> evaluated;
  counting.evaluator = [&](const Node &node,
                           llvm::ArrayRef<const TensorData *> operands) {
    evaluated.push_back(node.getOpSpelling());
    return runtime::cpu::evaluateNode(node, operands);
  };
  auto graph = importOk(m.bytes(), counting);
  REQUIRE(graph);
  CHECK(evaluated == std::vector<std::string>{"Shape", "Gather", "Concat"});
  CHECK(getConstantValue(graph->lookup("target"))->getInts() ==
        std::vector<int64_t>{2, -1});

  // What the evaluator refuses stays, and a shape that needs it says why.
  ImportOptions refusing = bind({{"batch", 2}});
  refusing.evaluator = [](const Node &node,
                          llvm::ArrayRef<const TensorData *> operands)
      -> llvm::Expected<llvm::SmallVector<TensorDataPtr, 1>> {
    if (node.getOp() == OpKind::Concat)
      return makeError(node.describe() + ": refused");
    return runtime::cpu::evaluateNode(node, operands);
  };
  CHECK_CONTAINS(importError(m.bytes(), refusing),
                 "cannot infer a static shape for 'y': operand 1 ('target') "
                 "is not a constant (it is computed by node 'concat' "
                 "(Concat)); evaluating it at import failed: Concat "
                 "'%target': refused");
}

TEST_CASE("import refuses to fold a float cast out of the integer range") {
  // The CPU kernel saturates; folding must not bake that in (passes/
  // FoldingPolicy.h), so the shape stays unknown and the error says why.
  ModelBuilder m;
  m.input("x", kFloat, {6});
  onnx::NodeProto *values = m.node("Constant", {}, {"f"}, "values");
  onnx::AttributeProto *attr = values->add_attribute();
  attr->set_name("value_floats");
  attr->set_type(onnx::AttributeProto::FLOATS);
  attr->add_floats(6);
  attr->add_floats(1e19f);
  onnx::NodeProto *cast = m.node("Cast", {"f"}, {"target"}, "cast");
  attrInt(cast, "to", kInt64);
  m.node("Reshape", {"x", "target"}, {"y"}, "reshape");
  m.output("y");
  CHECK_CONTAINS(importError(m.bytes()),
                 "evaluating it at import failed: Cast '%target': cannot "
                 "cast 1e+19 to i64");
}

TEST_CASE("opset-18 ReduceMean axes input becomes the axes attribute") {
  ModelBuilder m(18);
  m.input("x", kFloat, {2, 3, 4});
  m.constInts("axes", {1});
  onnx::NodeProto *mean = m.node("ReduceMean", {"x", "axes"}, {"y"}, "mean");
  attrInt(mean, "keepdims", 0);
  onnx::NodeProto *max = m.node("ReduceMax", {"x"}, {"z"}, "max");
  attrInt(max, "noop_with_empty_axes", 1);
  m.output("y");
  m.output("z");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  const Node *node = definingNode(*graph, "y");
  CHECK(node->getOp() == OpKind::ReduceMean);
  CHECK(node->getNumOperands() == 1);
  CHECK(node->getAttrs().getInts("axes") == std::vector<int64_t>{1});
  CHECK(graph->lookup("y")->getType().str() == "f32[2,4]");
  // No axes and noop_with_empty_axes = 1: the identity.
  CHECK(definingNode(*graph, "z")->getOp() == OpKind::Identity);
  CHECK(graph->lookup("z")->getType().str() == "f32[2,3,4]");

  // At opset 17 the attribute is already the form.
  ModelBuilder old(17);
  old.input("x", kFloat, {2, 3});
  onnx::NodeProto *oldMean = old.node("ReduceMean", {"x"}, {"y"});
  attrInts(oldMean, "axes", {0});
  old.output("y");
  auto oldGraph = importOk(old.bytes());
  REQUIRE(oldGraph);
  CHECK(oldGraph->lookup("y")->getType().str() == "f32[1,3]");

  // A computed axes input cannot become an attribute.
  ModelBuilder dynamic(18);
  dynamic.input("x", kFloat, {2, 3});
  dynamic.input("axes", kInt64, {1});
  dynamic.node("ReduceMean", {"x", "axes"}, {"y"}, "mean");
  dynamic.output("y");
  CHECK(importError(dynamic.bytes()) ==
        "model.onnx: node 'mean' (ReduceMean): axes input 'axes' must be a "
        "constant (remat's ReduceMean takes axes as an attribute, as in "
        "opset 17)");
}

TEST_CASE("opset-18 Split num_outputs becomes a constant split input") {
  ModelBuilder m(18);
  m.input("x", kFloat, {2, 7});
  onnx::NodeProto *split = m.node("Split", {"x"}, {"a", "b", "c"}, "split");
  attrInt(split, "axis", 1);
  attrInt(split, "num_outputs", 3);
  m.output("a");
  m.output("b");
  m.output("c");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  const Node *node = definingNode(*graph, "a");
  CHECK(node->getOp() == OpKind::Split);
  CHECK_FALSE(node->getAttrs().has("num_outputs"));
  REQUIRE(node->getNumOperands() == 2);
  const TensorData *sizes = getConstantValue(node->getOperand(1));
  REQUIRE(sizes);
  // ceil(7 / 3) = 3; the last chunk takes the rest.
  CHECK(sizes->getInts() == std::vector<int64_t>{3, 3, 1});
  CHECK(graph->lookup("a")->getType().str() == "f32[2,3]");
  CHECK(graph->lookup("c")->getType().str() == "f32[2,1]");

  onnx::NodeProto *bad = m.graph->mutable_node(0);
  bad->mutable_attribute(1)->set_i(2);
  CHECK(importError(m.bytes()) ==
        "model.onnx: node 'split' (Split): attribute 'num_outputs' is 2, but "
        "the node has 3 outputs");
}

TEST_CASE("opset-20 Gelu becomes remat.Gelu") {
  ModelBuilder m(20, 10);
  m.input("x", kFloat, {2, 3});
  onnx::NodeProto *gelu = m.node("Gelu", {"x"}, {"y"}, "gelu");
  attrString(gelu, "approximate", "tanh");
  m.node("Gelu", {"y"}, {"z"}, "gelu_exact");
  m.output("z");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  const Node *node = definingNode(*graph, "y");
  CHECK(node->getOp() == OpKind::Gelu);
  CHECK(node->getOpSpelling() == "remat.Gelu");
  CHECK(node->getAttrs().getString("approximate") == std::string("tanh"));
  CHECK(graph->lookup("z")->getType().str() == "f32[2,3]");
  CHECK(printGraphToString(*graph).find("remat.Gelu(%x) {approximate = "
                                        "\"tanh\"}") != std::string::npos);

  ModelBuilder old(17);
  old.input("x", kFloat, {2});
  old.node("Gelu", {"x"}, {"y"}, "gelu");
  old.output("y");
  CHECK(importError(old.bytes()) ==
        "model.onnx: node 'gelu' (op 'Gelu', domain 'ai.onnx', opset 17): "
        "unsupported op: 'Gelu' exists in the default domain from opset 20");
}

TEST_CASE("Dropout gets a seed derived from its name") {
  ModelBuilder m;
  m.input("x", kFloat, {4});
  m.node("Dropout", {"x"}, {"a", "mask_a"}, "encoder/drop_a");
  m.node("Dropout", {"a"}, {"b"}, "encoder/drop_b");
  m.node("Dropout", {"b"}, {"c"}); // unnamed: seeded from output 'c'
  onnx::NodeProto *seeded = m.node("Dropout", {"c"}, {"d"}, "explicit");
  attrInt(seeded, "seed", 42);
  m.output("d");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  auto seedOf = [&](const char *name) {
    return definingNode(*graph, name)->getAttrs().getInt("seed");
  };
  CHECK(seedOf("a") == fnv1a("encoder/drop_a"));
  CHECK(seedOf("b") == fnv1a("encoder/drop_b"));
  CHECK(seedOf("c") == fnv1a("c"));
  CHECK(seedOf("d") == 42);
  CHECK(*seedOf("a") >= 0);
  CHECK(seedOf("a") != seedOf("b"));
  // Stable: the same file gives the same seeds.
  auto again = importOk(m.bytes());
  REQUIRE(again);
  CHECK(definingNode(*again, "a")->getAttrs().getInt("seed") == seedOf("a"));
  CHECK(graph->lookup("mask_a")->getType().str() == "bool[4]");
}

TEST_CASE("omitted optional inputs and outputs") {
  ModelBuilder m;
  m.input("x", kFloat, {2, 8});
  m.floats("scale", {8}, std::vector<float>(8, 1.0f));
  m.floats("bias", {8}, std::vector<float>(8, 0.0f));
  // Y, no Mean, InvStdDev.
  m.node("LayerNormalization", {"x", "scale", "bias"}, {"y", "", "inv"}, "ln");
  // Dropout(data, <default ratio>, training_mode).
  onnx::NodeProto *training = m.node("Constant", {}, {"train"}, "t");
  onnx::AttributeProto *attr = training->add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  attr->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  attr->mutable_t()->add_int32_data(1);
  m.node("Dropout", {"y", "", "train"}, {"d"}, "drop");
  // Trailing omitted inputs are dropped.
  m.node("Slice", {"d", "starts", "ends", "", ""}, {"s"}, "slice");
  m.constInts("starts", {0});
  m.constInts("ends", {1});
  m.output("s");
  m.output("inv");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  const Node *ln = definingNode(*graph, "y");
  REQUIRE(ln->getNumResults() == 3);
  CHECK(ln->getResult(1)->getName() == "inv.unused1");
  CHECK(ln->getResult(1)->getType().str() == "f32[2,1]");
  CHECK(ln->getResult(2)->getName() == "inv");
  const Node *drop = definingNode(*graph, "d");
  REQUIRE(drop->getNumOperands() == 3);
  const TensorData *ratio = getConstantValue(drop->getOperand(1));
  REQUIRE(ratio);
  CHECK(ratio->getType().str() == "f32[]");
  CHECK(ratio->getDouble(0) == 0.5);
  CHECK(definingNode(*graph, "s")->getNumOperands() == 3);
  CHECK(graph->lookup("s")->getType().str() == "f32[1,8]");

  // An omitted middle input without an ONNX default is an error.
  ModelBuilder bad;
  bad.input("x", kFloat, {2, 3});
  bad.floats("c", {3}, {1, 2, 3});
  bad.node("Gemm", {"x", "", "c"}, {"y"}, "gemm");
  bad.output("y");
  CHECK(importError(bad.bytes()) ==
        "model.onnx: node 'gemm' (Gemm): optional input 1 is omitted but a "
        "later input is given, and remat knows no default for it");
}

TEST_CASE("Constant forms are normalized to value tensors") {
  ModelBuilder m;
  onnx::NodeProto *ints = m.node("Constant", {}, {"i"}, "ints");
  attrInts(ints, "value_ints", {3, 4});
  onnx::NodeProto *scalar = m.node("Constant", {}, {"f"}, "float");
  attrFloat(scalar, "value_float", 2.5f);
  m.output("i");
  m.output("f");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  const Node *node = definingNode(*graph, "i");
  CHECK_FALSE(node->getAttrs().has("value_ints"));
  const TensorData *i = getConstantValue(graph->lookup("i"));
  REQUIRE(i);
  CHECK(i->getType().str() == "i64[2]");
  CHECK(i->getInts() == std::vector<int64_t>{3, 4});
  const TensorData *f = getConstantValue(graph->lookup("f"));
  REQUIRE(f);
  CHECK(f->getType().str() == "f32[]");
  CHECK(f->getDouble(0) == 2.5);
}

TEST_CASE("Flatten becomes Reshape and GatherND with constant indices "
          "becomes Reshape + Gather") {
  ModelBuilder m;
  m.input("x", kFloat, {2, 3, 4});
  onnx::NodeProto *flatten = m.node("Flatten", {"x"}, {"f"}, "flatten");
  attrInt(flatten, "axis", 2);
  m.input("mask", onnx::TensorProto::BOOL, {2, 3});
  // indices [[[1, 2]], [[0, -1]]]: shape [2, 1, 2].
  onnx::TensorProto *indices = m.ints("idx", {2, 1, 2}, {1, 2, 0, -1});
  (void)indices;
  m.node("GatherND", {"mask", "idx"}, {"g"}, "gathernd");
  m.output("f");
  m.output("g");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  CHECK(definingNode(*graph, "f")->getOp() == OpKind::Reshape);
  CHECK(graph->lookup("f")->getType().str() == "f32[6,4]");
  const Node *gather = definingNode(*graph, "g");
  CHECK(gather->getOp() == OpKind::Gather);
  CHECK(graph->lookup("g")->getType().str() == "bool[2,1]");
  const TensorData *flat = getConstantValue(gather->getOperand(1));
  REQUIRE(flat);
  // mask[1][2] -> 5, mask[0][-1] -> 2.
  CHECK(flat->getInts() == std::vector<int64_t>{5, 2});
  CHECK(gather->getOperand(0)->getType().str() == "bool[6]");

  // On constant data the whole conversion folds; check the values.
  ModelBuilder folded;
  folded.ints("data", {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  folded.ints("idx", {2, 1}, {1, 0});
  onnx::NodeProto *batched =
      folded.node("GatherND", {"data", "idx"}, {"g"}, "batched");
  attrInt(batched, "batch_dims", 1);
  folded.output("g");
  auto foldedGraph = importOk(folded.bytes());
  REQUIRE(foldedGraph);
  const TensorData *g = getConstantValue(foldedGraph->lookup("g"));
  REQUIRE(g);
  // batch 0 takes data[0][1] = [2, 3]; batch 1 takes data[1][0] = [4, 5].
  CHECK(g->getType().str() == "i64[2,2]");
  CHECK(g->getInts() == std::vector<int64_t>{2, 3, 4, 5});
}

namespace {

/// Runs \p graph node by node with the CPU evaluator on \p inputs (in
/// input order); \returns output \p output, or the first error.
llvm::Expected<TensorDataPtr>
evaluateGraph(const Graph &graph, const std::vector<TensorDataPtr> &inputs,
              unsigned output = 0) {
  std::map<const Value *, TensorDataPtr> values;
  for (unsigned i = 0; i < graph.getNumInputs(); ++i)
    values[graph.getInput(i)] = inputs.at(i);
  for (const Node &node : graph.getNodes()) {
    std::vector<const TensorData *> operands;
    for (const Value *operand : node.getOperands())
      operands.push_back(values.at(operand).get());
    auto results = runtime::cpu::evaluateNode(node, operands);
    if (!results)
      return results.takeError();
    for (unsigned r = 0; r < node.getNumResults(); ++r)
      values[node.getResult(r)] = (*results)[r];
  }
  return values.at(graph.getOutputs()[output]);
}

} // namespace

TEST_CASE("GatherND with indices known only at run time becomes Reshape + "
          "Gather of indices computed by nodes") {
  // dynamo exports sequence classification's logits[arange(B), last] so.
  ModelBuilder m;
  m.input("x", kFloat, {2, 3, 4});
  m.input("idx", kInt64, {2, 1, 2});
  m.node("GatherND", {"x", "idx"}, {"g"}, "gnd");
  m.output("g");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  const Node *gather = definingNode(*graph, "g");
  CHECK(gather->getOp() == OpKind::Gather);
  CHECK(graph->lookup("g")->getType().str() == "f32[2,1,4]");
  CHECK_FALSE(getConstantValue(gather->getOperand(1)));
  std::vector<double> xs(24);
  for (int i = 0; i < 24; ++i)
    xs[i] = i;
  auto x = TensorData::fromDoubles(TensorType(DType::F32, {2, 3, 4}), xs);
  auto idxType = TensorType(DType::I64, {2, 1, 2});
  // x[1][2] and x[0][-1] = x[0][2].
  auto g =
      evaluateGraph(*graph, {x, TensorData::fromInts(idxType, {1, 2, 0, -1})});
  REQUIRE_MESSAGE(bool(g), errorToString(g.takeError()));
  std::vector<double> got;
  for (int64_t i = 0; i < (*g)->getNumElements(); ++i)
    got.push_back((*g)->getDouble(i));
  CHECK(got == std::vector<double>{20, 21, 22, 23, 8, 9, 10, 11});
  // An entry outside its dim fails when the step runs: x[0][3], whose flat
  // index 0 * 3 + 3 lies inside the flattened data, and x[-3][0].
  for (std::vector<int64_t> bad :
       {std::vector<int64_t>{1, 2, 0, 3}, std::vector<int64_t>{1, 2, -3, 0}}) {
    auto error = evaluateGraph(*graph, {x, TensorData::fromInts(idxType, bad)});
    REQUIRE_FALSE(bool(error));
    CHECK(errorToString(error.takeError()).find("out of range") !=
          std::string::npos);
  }

  // batch_dims 1: batch b indexes data[b].
  ModelBuilder batched;
  batched.input("data", kInt64, {2, 2, 2});
  batched.input("idx", kInt64, {2, 1});
  onnx::NodeProto *node =
      batched.node("GatherND", {"data", "idx"}, {"g"}, "batched");
  attrInt(node, "batch_dims", 1);
  batched.output("g");
  auto batchedGraph = importOk(batched.bytes());
  REQUIRE(batchedGraph);
  CHECK(batchedGraph->lookup("g")->getType().str() == "i64[2,2]");
  auto data = TensorData::fromInts(TensorType(DType::I64, {2, 2, 2}),
                                   {0, 1, 2, 3, 4, 5, 6, 7});
  auto gb = evaluateGraph(
      *batchedGraph,
      {data, TensorData::fromInts(TensorType(DType::I64, {2, 1}), {1, 0})});
  REQUIRE_MESSAGE(bool(gb), errorToString(gb.takeError()));
  // batch 0 takes data[0][1] = [2, 3]; batch 1 takes data[1][0] = [4, 5].
  CHECK((*gb)->getInts() == std::vector<int64_t>{2, 3, 4, 5});
}

TEST_CASE("local functions are inlined") {
  ModelBuilder m(18, 8);
  onnx::OperatorSetIdProto *custom = m.model.add_opset_import();
  custom->set_domain("custom");
  custom->set_version(1);
  onnx::FunctionProto *function = m.model.add_functions();
  function->set_name("ScaledSoftmax");
  function->set_domain("custom");
  function->add_input("X");
  function->add_output("Y");
  function->add_attribute("ax");
  onnx::OperatorSetIdProto *fopset = function->add_opset_import();
  fopset->set_domain("");
  fopset->set_version(18);
  onnx::NodeProto *relu = function->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("X");
  relu->add_output("T");
  onnx::NodeProto *softmax = function->add_node();
  softmax->set_op_type("Softmax");
  softmax->set_name("softmax");
  softmax->add_input("T");
  softmax->add_output("Y");
  onnx::AttributeProto *ref = softmax->add_attribute();
  ref->set_name("axis");
  ref->set_type(onnx::AttributeProto::INT);
  ref->set_ref_attr_name("ax");

  m.input("x", kFloat, {2, 3});
  onnx::NodeProto *call =
      m.node("ScaledSoftmax", {"x"}, {"y"}, "call", "custom");
  attrInt(call, "ax", 0);
  m.output("y");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  CHECK(opsOf(*graph) == "Relu Softmax");
  const Node *node = definingNode(*graph, "y");
  CHECK(node->getAttrs().getInt("axis") == 0);
  CHECK(node->getOperand(0)->getName() == "call/T");

  // A node of another domain that is not a function is unsupported.
  m.graph->mutable_node(0)->set_op_type("Unknown");
  CHECK(importError(m.bytes()) ==
        "model.onnx: node 'call' (op 'Unknown', domain 'custom', opset 1): "
        "unsupported op 'Unknown' (" +
            kSupportedOps + ")");
}

namespace {

/// Adds local function \p name of \p domain to \p m, importing opset 17 of
/// the default domain, with input X and output Y; \returns it.
onnx::FunctionProto *addFunction(ModelBuilder &m, const std::string &name,
                                 const std::string &domain) {
  onnx::FunctionProto *function = m.model.add_functions();
  function->set_name(name);
  function->set_domain(domain);
  function->add_input("X");
  function->add_output("Y");
  onnx::OperatorSetIdProto *opset = function->add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  return function;
}

/// Adds node \p op (domain \p domain) from \p input to \p output to \p f.
void addBodyNode(onnx::FunctionProto *f, const std::string &op,
                 const std::string &input, const std::string &output,
                 const std::string &domain = "") {
  onnx::NodeProto *node = f->add_node();
  node->set_op_type(op);
  node->set_domain(domain);
  node->add_input(input);
  node->add_output(output);
}

void importDomain(ModelBuilder &m, const std::string &domain) {
  onnx::OperatorSetIdProto *id = m.model.add_opset_import();
  id->set_domain(domain);
  id->set_version(1);
}

} // namespace

TEST_CASE("nested local functions are bounded by the node limit") {
  // F0 calls F1 four times, ..., F15 calls F16 four times: 4^16 nodes once
  // inlined from a file of a few kilobytes. The import stops at
  // kMaxGraphNodes instead of running for hours.
  ModelBuilder m;
  importDomain(m, "d");
  constexpr int kLevels = 16;
  for (int level = 0; level < kLevels; ++level) {
    onnx::FunctionProto *f = addFunction(m, "F" + std::to_string(level), "d");
    std::string callee = "F" + std::to_string(level + 1);
    addBodyNode(f, callee, "X", "T1", "d");
    addBodyNode(f, callee, "T1", "T2", "d");
    addBodyNode(f, callee, "T2", "T3", "d");
    addBodyNode(f, callee, "T3", "Y", "d");
  }
  addBodyNode(addFunction(m, "F" + std::to_string(kLevels), "d"), "Relu", "X",
              "Y");
  m.input("x", kFloat, {2});
  m.node("F0", {"x"}, {"y"}, "call", "d");
  m.output("y");
  CHECK(importError(m.bytes()) ==
        "model.onnx: the model has more than 1000000 nodes once its local "
        "functions are inlined (remat imports at most that many)");
}

TEST_CASE("many calls of one function by nodes of one name import") {
  // Every call is named "call": the names made for the bodies' values
  // (call/T, call/T.1, ...) are distinct, and found in linear time.
  ModelBuilder m;
  importDomain(m, "d");
  onnx::FunctionProto *f = addFunction(m, "F", "d");
  addBodyNode(f, "Relu", "X", "T");
  addBodyNode(f, "Neg", "T", "Y");
  m.input("x", kFloat, {2});
  constexpr int kCalls = 2000;
  std::string previous = "x";
  for (int i = 0; i < kCalls; ++i) {
    std::string next = "v" + std::to_string(i);
    m.node("F", {previous}, {next}, "call", "d");
    previous = next;
  }
  m.output(previous);
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  CHECK(graph->getNodes().size() == 2 * kCalls);
  CHECK(graph->lookup("call/T"));
  CHECK(graph->lookup("call/T.1"));
  CHECK(graph->lookup("call/T.1999"));
}

TEST_CASE("a call matches a local function's domain and name") {
  // onnx's checker accepts a default-domain function named like an
  // operator; onnxruntime and the reference evaluator run the operator
  // (Relu of [-1, 2, -3] is [0, 2, 0], not the function's Neg). So does
  // remat.
  ModelBuilder m;
  importDomain(m, "custom");
  addBodyNode(addFunction(m, "Relu", ""), "Neg", "X", "Y");
  addBodyNode(addFunction(m, "Relu", "custom"), "Sigmoid", "X", "Y");
  addBodyNode(addFunction(m, "Mine", ""), "Tanh", "X", "Y");
  m.input("x", kFloat, {3});
  m.node("Relu", {"x"}, {"a"}, "builtin");
  m.node("Relu", {"a"}, {"b"}, "custom_call", "custom");
  m.node("Mine", {"b"}, {"c"}, "mine", "ai.onnx");
  m.output("c");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  CHECK(opsOf(*graph) == "Relu Sigmoid Tanh");
  CHECK(definingNode(*graph, "a")->getOp() == OpKind::Relu);

  // Another domain's node of the function's name is not a call of it.
  m.graph->mutable_node(1)->set_domain("other");
  CHECK_CONTAINS(importError(m.bytes()), "unsupported op 'Relu'");
}

TEST_CASE("initializers count towards one total against the memory limit") {
  // Each of three 32-byte initializers fits a 64-byte limit; together
  // they do not.
  ModelBuilder m;
  m.input("x", kFloat, {8});
  m.floats("w0", {8}, std::vector<float>(8, 1.0f));
  m.floats("w1", {8}, std::vector<float>(8, 2.0f));
  m.floats("w2", {8}, std::vector<float>(8, 3.0f));
  m.node("Add", {"x", "w0"}, {"a"});
  m.node("Add", {"a", "w1"}, {"b"});
  m.node("Add", {"b", "w2"}, {"c"});
  m.output("c");
  setMemoryLimitBytes(64);
  std::string error = importError(m.bytes());
  setMemoryLimitBytes(0);
  CHECK(error == "model.onnx: initializer 'w2' of type f32[8] needs 32 bytes "
                 "(32 B), which with the 64 B already loaded is more than "
                 "--max-memory (64 B)");
  CHECK(importError(m.bytes()) == "ok");
}

TEST_CASE("a Transpose's negative perm entries count from the end") {
  // TorchScript exports x.permute(0, -2, -1, 1) as it is (Mamba-2's scan).
  ModelBuilder m;
  m.input("x", kFloat, {2, 3, 4, 5});
  attrInts(m.node("Transpose", {"x"}, {"y"}, "t"), "perm", {0, -2, -1, 1});
  m.output("y");
  auto graph = importOk(m.bytes());
  const Node *t = definingNode(*graph, "y");
  REQUIRE(t);
  CHECK(*t->getAttrs().getInts("perm") == std::vector<int64_t>{0, 2, 3, 1});
  CHECK(t->getResult(0)->getType().str() == "f32[2,4,5,3]");

  // What is still no permutation is the error it was.
  ModelBuilder bad;
  bad.input("x", kFloat, {2, 3});
  attrInts(bad.node("Transpose", {"x"}, {"y"}, "t"), "perm", {0, -2});
  bad.output("y");
  CHECK_CONTAINS(importError(bad.bytes()),
                 "attribute 'perm' [0,0] is not a permutation of the 2 dims");
}

TEST_CASE("an attribute the op does not take is an error") {
  ModelBuilder m;
  m.input("x", kFloat, {2, 3});
  onnx::NodeProto *t = m.node("Transpose", {"x"}, {"y"}, "t");
  attrInts(t, "prem", {1, 0});
  m.output("y");
  CHECK(importError(m.bytes()) ==
        "model.onnx: node 't' (Transpose): unknown attribute 'prem' "
        "(Transpose takes 'perm')");
  t->mutable_attribute(0)->set_name("perm");
  CHECK(importError(m.bytes()) == "ok");

  // Attributes of later opsets than libonnx's schemas know are accepted.
  ModelBuilder gelu(20, 9);
  gelu.input("x", kFloat, {2});
  attrString(gelu.node("Gelu", {"x"}, {"y"}, "g"), "approximate", "tanh");
  gelu.output("y");
  CHECK(importError(gelu.bytes()) == "ok");
  attrString(gelu.graph->mutable_node(0), "approx", "tanh");
  CHECK(importError(gelu.bytes()) ==
        "model.onnx: node 'g' (Gelu): unknown attribute 'approx' (Gelu "
        "takes 'approximate')");
}

TEST_CASE("LayerNormalization needs a positive epsilon") {
  for (float epsilon : {0.0f, -1e-5f, INFINITY}) {
    ModelBuilder m;
    m.input("x", kFloat, {2, 3});
    m.floats("s", {3}, {1, 1, 1});
    attrFloat(m.node("LayerNormalization", {"x", "s"}, {"y"}, "ln"),
              "epsilon", epsilon);
    m.output("y");
    CHECK_CONTAINS(importError(m.bytes()), "attribute 'epsilon' is ");
    CHECK_CONTAINS(importError(m.bytes()),
                   ", expected a finite number above 0");
  }
}

TEST_CASE("an op type with a newline stays on one line of the message") {
  ModelBuilder m;
  m.input("x", kFloat, {2});
  m.node("Relu\nerror: forged", {"x"}, {"y"}, "n");
  m.output("y");
  std::string error = importError(m.bytes());
  CHECK(error.find('\n') == std::string::npos);
  CHECK_CONTAINS(error, "unsupported op 'Relu\\x0aerror: forged'");
}

//===----------------------------------------------------------------------===//
// External data
//===----------------------------------------------------------------------===//

namespace {

/// A temporary directory removed at scope exit.
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() {
    REQUIRE_FALSE(llvm::sys::fs::createUniqueDirectory("remat-onnx", path));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> full(path);
    llvm::sys::path::append(full, name);
    return std::string(full);
  }
  void write(llvm::StringRef name, llvm::StringRef bytes) const {
    std::error_code ec;
    llvm::raw_fd_ostream os(file(name), ec);
    REQUIRE_FALSE(ec);
    os << bytes;
  }
};

/// A model whose weight 'w' (f32[3]) is in \p location, at \p offset with
/// \p length when they are given (not negative).
std::string externalModelAt(const std::string &location, int64_t offset = -1,
                            int64_t length = -1) {
  ModelBuilder m;
  m.input("x", kFloat, {3});
  onnx::TensorProto *w = m.graph->add_initializer();
  w->set_name("w");
  w->set_data_type(kFloat);
  w->add_dims(3);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto entry = [&](const char *key, const std::string &value) {
    onnx::StringStringEntryProto *e = w->add_external_data();
    e->set_key(key);
    e->set_value(value);
  };
  entry("location", location);
  if (offset >= 0)
    entry("offset", std::to_string(offset));
  if (length >= 0)
    entry("length", std::to_string(length));
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  return m.bytes();
}

/// A model whose weight 'w' (f32[3]) is at \p offset of weights.bin.
std::string externalModel(int64_t offset, int64_t length = 12) {
  return externalModelAt("weights.bin", offset, length);
}

} // namespace

TEST_CASE("external data is read relative to the model's directory") {
  TempDir dir;
  float values[3] = {1.5f, -2.0f, 4.0f};
  std::string data(8, '\0'); // 8 bytes of padding before the tensor
  data.append(reinterpret_cast<const char *>(values), sizeof(values));
  dir.write("weights.bin", data);
  dir.write("model.onnx", externalModel(8));

  auto graph = importOnnxFile(dir.file("model.onnx"), defaults());
  REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  const Value *w = (*graph)->lookup("w");
  REQUIRE(w);
  CHECK(w->isWeight());
  CHECK(w->getData()->getDouble(0) == 1.5);
  CHECK(w->getData()->getDouble(1) == -2.0);
  CHECK(w->getData()->getDouble(2) == 4.0);
  CHECK((*graph)->getSourceName() == dir.file("model.onnx"));

  // Offset past the end of the file.
  dir.write("far.onnx", externalModel(16));
  auto far = importOnnxFile(dir.file("far.onnx"), defaults());
  REQUIRE_FALSE(bool(far));
  CHECK(errorToString(far.takeError()) ==
        dir.file("far.onnx") +
            ": initializer 'w': external data at offset 16 "
            "with length 12 lies outside '" +
            dir.file("weights.bin") + "' (20 bytes)");

  // A length that does not match the tensor.
  dir.write("short.onnx", externalModel(0, 8));
  auto shortLength = importOnnxFile(dir.file("short.onnx"), defaults());
  REQUIRE_FALSE(bool(shortLength));
  CHECK(errorToString(shortLength.takeError()) ==
        dir.file("short.onnx") +
            ": initializer 'w': external data has 8 bytes, expected 12");
}

TEST_CASE("external data and raw_data both set is an error") {
  TempDir dir;
  dir.write("weights.bin", std::string(12, '\0'));
  onnx::ModelProto model;
  REQUIRE(model.ParseFromString(externalModel(0)));
  model.mutable_graph()->mutable_initializer(0)->set_raw_data(
      std::string(12, '\1'));
  std::string bytes;
  REQUIRE(model.SerializeToString(&bytes));
  dir.write("model.onnx", bytes);
  auto graph = importOnnxFile(dir.file("model.onnx"), defaults());
  REQUIRE_FALSE(bool(graph));
  CHECK_CONTAINS(errorToString(graph.takeError()),
                 "initializer 'w' has both external data and raw_data (ONNX "
                 "allows one)");
}

TEST_CASE("a missing external data file names the tensor and the path") {
  TempDir dir;
  dir.write("model.onnx", externalModel(0));
  auto graph = importOnnxFile(dir.file("model.onnx"), defaults());
  REQUIRE_FALSE(bool(graph));
  std::string message = errorToString(graph.takeError());
  CHECK_CONTAINS(message, dir.file("model.onnx") +
                              ": initializer 'w': cannot open external data "
                              "file '" +
                              dir.file("weights.bin") + "': ");
}

TEST_CASE("external data through a symbolic link must stay in the folder") {
  TempDir outside, dir;
  outside.write("secret.bin", std::string(12, 'S'));
  dir.write("weights.bin", std::string(12, '\0'));
  REQUIRE_FALSE(llvm::sys::fs::create_directory(dir.file("sub")));
  // A link to a file outside, a link to a folder outside, and links that
  // stay inside (to a file, and a folder link back into the model's folder).
  REQUIRE_FALSE(llvm::sys::fs::create_link(outside.file("secret.bin"),
                                           dir.file("link.bin")));
  REQUIRE_FALSE(
      llvm::sys::fs::create_link(outside.path, dir.file("elsewhere")));
  REQUIRE_FALSE(llvm::sys::fs::create_link(dir.file("weights.bin"),
                                           dir.file("sub/inside.bin")));
  REQUIRE_FALSE(llvm::sys::fs::create_link(dir.path, dir.file("sub/up")));
  llvm::SmallString<256> outsideReal;
  REQUIRE_FALSE(llvm::sys::fs::real_path(outside.path, outsideReal));
  llvm::SmallString<256> dirReal;
  REQUIRE_FALSE(llvm::sys::fs::real_path(dir.path, dirReal));

  for (const char *location : {"link.bin", "elsewhere/secret.bin"}) {
    CAPTURE(location);
    dir.write("model.onnx", externalModelAt(location));
    auto graph = importOnnxFile(dir.file("model.onnx"), defaults());
    REQUIRE_FALSE(bool(graph));
    CHECK(errorToString(graph.takeError()) ==
          dir.file("model.onnx") + ": initializer 'w': external data location '" +
              location + "' resolves to '" + std::string(outsideReal) +
              "/secret.bin', outside the model's folder '" +
              std::string(dirReal) + "'");
  }
  for (const char *location : {"sub/inside.bin", "sub/up/weights.bin"}) {
    CAPTURE(location);
    dir.write("model.onnx", externalModelAt(location));
    auto graph = importOnnxFile(dir.file("model.onnx"), defaults());
    REQUIRE_MESSAGE(bool(graph), errorToString(graph.takeError()));
  }
}

TEST_CASE("a model given as bytes reads external data only from a base "
          "folder given") {
  TempDir dir;
  dir.write("weights.bin", std::string(12, '\0'));
  std::string bytes = externalModelAt("weights.bin");
  auto none = importOnnxBytes(bytes, "model.onnx", "", defaults());
  REQUIRE_FALSE(bool(none));
  CHECK(errorToString(none.takeError()) ==
        "model.onnx: initializer 'w': external data location 'weights.bin' "
        "cannot be read: the model was given as bytes with no base folder "
        "(give one to allow external data)");
  auto given = importOnnxBytes(bytes, "model.onnx", dir.path, defaults());
  REQUIRE_MESSAGE(bool(given), errorToString(given.takeError()));
  CHECK((*given)->lookup("w")->getData()->getDouble(0) == 0.0);
}

//===----------------------------------------------------------------------===//
// Bad files
//===----------------------------------------------------------------------===//

TEST_CASE("truncated and corrupt bytes") {
  ModelBuilder m;
  m.input("x", kFloat, {2});
  m.floats("w", {2}, {1, 2});
  m.node("Add", {"x", "w"}, {"y"}, "add");
  m.output("y");
  std::string bytes = m.bytes();
  std::string truncated = bytes.substr(0, bytes.size() / 2);
  CHECK(importError(truncated) ==
        "cannot parse 'model.onnx' as an ONNX model: the protobuf data is "
        "truncated or corrupt (" +
            std::to_string(truncated.size()) + " bytes)");
  std::string corrupt = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
  CHECK_CONTAINS(importError(corrupt), "cannot parse 'model.onnx' as an ONNX "
                                       "model: the protobuf data is truncated "
                                       "or corrupt");
  CHECK(importError("") ==
        "cannot parse 'model.onnx' as an ONNX model: the file is empty");

  auto missing = importOnnxFile("/nonexistent/remat/model.onnx", defaults());
  REQUIRE_FALSE(bool(missing));
  CHECK_CONTAINS(errorToString(missing.takeError()),
                 "cannot read '/nonexistent/remat/model.onnx': ");
}

TEST_CASE("files beyond protobuf's 2 GiB limit are refused") {
  // A sparse file of 2^31 bytes: nothing is written or read.
  TempDir dir;
  std::string path = dir.file("huge.onnx");
  int fd;
  REQUIRE_FALSE(llvm::sys::fs::openFileForWrite(path, fd));
  std::error_code ec = llvm::sys::fs::resize_file(fd, uint64_t(1) << 31);
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  REQUIRE_FALSE(ec);
  auto graph = importOnnxFile(path, defaults());
  REQUIRE_FALSE(bool(graph));
  CHECK(errorToString(graph.takeError()) ==
        "cannot parse '" + path +
            "' as an ONNX model: it is 2147483648 bytes, more than protobuf's "
            "limit of 2147483647 bytes (store the weights as external data)");
}

TEST_CASE("a serialized TensorProto is not a model") {
  onnx::TensorProto tensor;
  tensor.set_data_type(kFloat);
  tensor.add_dims(2);
  tensor.add_dims(3);
  tensor.set_raw_data(std::string(24, '\0'));
  std::string bytes;
  REQUIRE(tensor.SerializeToString(&bytes));
  CHECK(importError(bytes) ==
        "'model.onnx' is not an ONNX model: it parses as protobuf but has no "
        "graph, no opset_import (is it a TensorProto or another message?)");
}

TEST_CASE("unsupported op names node, op, domain and opset") {
  ModelBuilder m;
  onnx::OperatorSetIdProto *ms = m.model.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  m.input("a", kFloat, {2, 2});
  m.node("FusedMatMul", {"a", "a"}, {"y"}, "/layer/FusedMatMul",
         "com.microsoft");
  m.output("y");
  CHECK(importError(m.bytes()) ==
        "model.onnx: node '/layer/FusedMatMul' (op 'FusedMatMul', domain "
        "'com.microsoft', opset 1): unsupported op 'FusedMatMul' (" +
            kSupportedOps + ")");

  ModelBuilder onnxOp;
  onnxOp.input("a", kFloat, {2, 2});
  onnxOp.node("Det", {"a"}, {"y"}, "det");
  onnxOp.output("y");
  CHECK(importError(onnxOp.bytes()) ==
        "model.onnx: node 'det' (op 'Det', domain 'ai.onnx', opset 17): "
        "unsupported op 'Det' (" +
            kSupportedOps + ")");
}

TEST_CASE("every unsupported op type is named at once, with its count") {
  ModelBuilder m;
  m.input("a", kFloat, {2, 2});
  m.node("Det", {"a"}, {"t1"}, "/mask/Det");
  m.node("Det", {"t1"}, {"t2"}, "/mask/Det_1");
  m.node("Unique", {"t2", "t2"}, {"c"}, "/pos/Unique");
  m.node("Xor", {"c"}, {"y"}, "");
  m.output("y");
  CHECK(importError(m.bytes()) ==
        "model.onnx: 3 unsupported op types: 'Det' (2 nodes, the first node "
        "'/mask/Det' (Det)), 'Unique' (1 node: node '/pos/Unique' (Unique)), "
        "'Xor' (1 node: unnamed Xor node producing 'y') (" +
            kSupportedOps + ")");

  // One type used by several nodes keeps the one-node message and counts.
  ModelBuilder one;
  one.input("a", kFloat, {2, 2});
  one.node("Det", {"a"}, {"t1"}, "first");
  one.node("Det", {"t1"}, {"y"}, "second");
  one.output("y");
  CHECK(importError(one.bytes()) ==
        "model.onnx: node 'first' (op 'Det', domain 'ai.onnx', opset 17): "
        "unsupported op 'Det' (" +
            kSupportedOps + "); 2 nodes use it");
}

TEST_CASE("unsupported opsets and IR versions") {
  for (int64_t opset : {12, 21}) {
    ModelBuilder m(opset);
    m.input("x", kFloat, {2});
    m.node("Relu", {"x"}, {"y"});
    m.output("y");
    CHECK(importError(m.bytes()) ==
          "model.onnx: unsupported opset " + std::to_string(opset) +
              " of the default ONNX domain (remat imports opsets 13 to 20)");
  }
  for (int64_t irVersion : {6, 11}) {
    ModelBuilder m(17, irVersion);
    m.input("x", kFloat, {2});
    m.node("Relu", {"x"}, {"y"});
    m.output("y");
    CHECK(importError(m.bytes()) == "model.onnx: unsupported ONNX IR version " +
                                        std::to_string(irVersion) +
                                        " (remat imports IR versions 7 to 10)");
  }
  ModelBuilder noDefault;
  noDefault.model.mutable_opset_import(0)->set_domain("custom");
  CHECK(importError(noDefault.bytes()) ==
        "model.onnx: the model imports no opset of the default ONNX domain "
        "(remat imports opsets 13 to 20)");
}

TEST_CASE("declared shapes that contradict inference") {
  ModelBuilder m;
  m.input("x", kFloat, {"batch", 4});
  m.floats("w", {4, 3}, std::vector<float>(12, 1.0f));
  m.node("MatMul", {"x", "w"}, {"h"}, "mm");
  m.node("Relu", {"h"}, {"y"}, "relu");
  m.valueInfo("h", kFloat, {"batch", 5});
  m.output("y", kFloat, {"batch", 3});
  CHECK(importError(m.bytes(), bind({{"batch", 2}})) ==
        "model.onnx: value 'h' (from node 'mm' (MatMul)) is declared "
        "f32[batch=2,5], but inference gives f32[2,3] (declared shapes that "
        "contradict inference are errors)");

  // Bound symbolic dims are checked; unknown ones ("s0") are not.
  m.graph->mutable_value_info(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_param("s0");
  CHECK(importError(m.bytes(), bind({{"batch", 2}})) == "ok");
  CHECK(importError(m.bytes(), bind({{"batch", 2}, {"s0", 4}})) ==
        "model.onnx: value 'h' (from node 'mm' (MatMul)) is declared "
        "f32[batch=2,s0=4], but inference gives f32[2,3] (declared shapes "
        "that contradict inference are errors)");

  ModelBuilder output;
  output.input("x", kFloat, {2});
  output.node("Relu", {"x"}, {"y"});
  output.output("y", onnx::TensorProto::DOUBLE, {2});
  CHECK(importError(output.bytes()) ==
        "model.onnx: graph output 'y' is declared f64[2], but inference "
        "gives f32[2] (declared shapes that contradict inference are "
        "errors)");
}

TEST_CASE("structural errors: undefined values, cycles, redefinitions, "
          "subgraphs") {
  ModelBuilder undefined;
  undefined.input("x", kFloat, {2});
  undefined.node("Add", {"x", "nowhere"}, {"y"}, "add");
  undefined.output("y");
  CHECK(importError(undefined.bytes()) ==
        "model.onnx: node 'add' (Add): uses undefined value 'nowhere'");

  ModelBuilder cycle;
  cycle.input("x", kFloat, {2});
  cycle.node("Add", {"x", "b"}, {"a"}, "first");
  cycle.node("Relu", {"a"}, {"b"}, "second");
  cycle.output("b");
  CHECK(importError(cycle.bytes()) ==
        "model.onnx: node 'first' (Add) is on a cycle (the graph is not a "
        "DAG)");

  ModelBuilder twice;
  twice.input("x", kFloat, {2});
  twice.node("Relu", {"x"}, {"y"}, "one");
  twice.node("Relu", {"x"}, {"y"}, "two");
  twice.output("y");
  CHECK(importError(twice.bytes()) ==
        "model.onnx: node 'two' (Relu): defines 'y', which node 'one' (Relu) "
        "defines too");

  ModelBuilder graphAttr;
  graphAttr.input("c", onnx::TensorProto::BOOL, {});
  onnx::NodeProto *ifNode = graphAttr.node("If", {"c"}, {"y"}, "if");
  onnx::AttributeProto *branch = ifNode->add_attribute();
  branch->set_name("then_branch");
  branch->set_type(onnx::AttributeProto::GRAPH);
  branch->mutable_g()->set_name("then");
  graphAttr.output("y");
  // If is not in the op set: the op is reported first.
  CHECK_CONTAINS(importError(graphAttr.bytes()), "unsupported op 'If'");
  // A graph attribute on a supported op.
  ifNode->set_op_type("Identity");
  CHECK(importError(graphAttr.bytes()) ==
        "model.onnx: node 'if' (Identity): attribute 'then_branch' is a "
        "subgraph; remat does not support control flow (If, Loop, Scan)");
}

//===----------------------------------------------------------------------===//
// Real exports
//===----------------------------------------------------------------------===//

TEST_CASE("every fixture under tests/fixtures imports and verifies") {
  // torch.onnx exports of BERT, nn.TransformerEncoder and every family of
  // tests/fixtures/families.py (TorchScript and dynamo exporters, opsets
  // 14-20); see tests/fixtures/SUMMARY.txt.
  std::string root = std::string(REMAT_TEST_DIR) + "/fixtures";
  std::vector<std::string> models;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(root, ec), end; it != end && !ec;
       it.increment(ec)) {
    std::string model = it->path() + "/model.onnx";
    if (llvm::sys::fs::exists(model))
      models.push_back(model);
  }
  std::sort(models.begin(), models.end());
  REQUIRE_MESSAGE(!models.empty(), "no fixture model.onnx under " << root);

  ImportOptions options = bind({{"batch", 2}, {"seq", 16}});
  // The image families (fam_vit_*, fam_resnet_*) have no seq dim.
  ImportOptions imageOptions = bind({{"batch", 2}});
  for (const std::string &model : models) {
    INFO("fixture: " << model);
    bool imageModel = llvm::StringRef(model).contains("/fam_vit_") ||
                      llvm::StringRef(model).contains("/fam_resnet_");
    auto imported = importOnnxFile(model, imageModel ? imageOptions : options);
    if (!imported) {
      FAIL_CHECK(errorToString(imported.takeError()));
      continue;
    }
    Graph &graph = **imported;
    CHECK(errorOf(verify(graph)) == "ok");
    // Shape subgraphs are gone: every Shape was evaluated at import.
    for (const Node &node : graph.getNodes())
      CHECK(node.getOp() != OpKind::Shape);
    REQUIRE(graph.getOutputs().size() == 1);
    CHECK(graph.getOutputs()[0]->getName() == "loss");
    CHECK(graph.getOutputs()[0]->getType().str() == "f32[]");
    // Token models take i64[batch, seq] inputs; the image family fixture
    // (fam_vit_*) takes pixel_values and one label per image, a sequence
    // classification fixture (fam_*_seqcls_*) one label per row.
    bool image = graph.lookup("pixel_values") != nullptr;
    bool oneLabelPerRow = image || llvm::StringRef(model).contains("_seqcls_");
    for (const char *input : {"input_ids", "labels", "pixel_values"}) {
      bool wanted = llvm::StringRef(input) == "labels" ||
                    (llvm::StringRef(input) == "pixel_values") == image;
      if (!wanted)
        continue;
      const Value *value = graph.lookup(input);
      REQUIRE_MESSAGE(value, "no graph input " << input);
      CHECK(value->isGraphInput());
      llvm::StringRef type =
          llvm::StringRef(input) == "pixel_values" ? "f32[2,3,16,16]"
          : llvm::StringRef(input) == "labels" && oneLabelPerRow ? "i64[2]"
                                                                 : "i64[2,16]";
      CHECK(value->getType().str() == type);
    }

    // The weights are exactly the initializers torch trains (params.json):
    // the exporters' scalar constants are not among them.
    llvm::SmallString<256> paramsPath(llvm::sys::path::parent_path(model));
    llvm::sys::path::append(paramsPath, "params.json");
    auto buffer = llvm::MemoryBuffer::getFile(paramsPath);
    REQUIRE_MESSAGE(bool(buffer), "cannot read " << paramsPath.str().str());
    auto params = llvm::json::parse((*buffer)->getBuffer());
    REQUIRE_MESSAGE(bool(params), errorToString(params.takeError()));
    // Import-only fixtures (fam_*_drop) carry no reference values.
    if (!params->getAsObject()->getBoolean("import_only").getValueOr(false)) {
      const llvm::json::Object *trainable =
          params->getAsObject()->getObject("initializers");
      REQUIRE(trainable);
      llvm::StringSet<> expected, actual, buffers;
      for (const auto &entry : *trainable)
        expected.insert(entry.first.str());
      // A float buffer (Llama's rotary inv_freq) is a weight to remat: ONNX
      // does not say which initializers torch trains.
      if (const llvm::json::Array *other =
              params->getAsObject()->getArray("non_trainable_initializers"))
        for (const llvm::json::Value &name : *other)
          if (auto text = name.getAsString())
            buffers.insert(*text);
      for (const Value *input : graph.getInputs()) {
        if (!input->isWeight())
          continue;
        actual.insert(input->getName());
        CHECK_MESSAGE((expected.count(input->getName()) ||
                       buffers.count(input->getName())),
                      "unexpected weight " << input->getName().str());
        CHECK(input->getData());
      }
      for (const auto &name : expected)
        CHECK_MESSAGE(actual.count(name.getKey()),
                      "missing weight " << name.getKey().str());
    }

    // ONNX names ("/model/bert/Shape_output_0", "onnx::Mul_12") survive a
    // round trip through .rir.
    std::string text = printGraphToString(graph);
    auto parsed = parseGraph(text, "printed.rir");
    REQUIRE_MESSAGE(bool(parsed), errorToString(parsed.takeError()));
    std::string why;
    CHECK_MESSAGE(graphsEqual(graph, **parsed, &why), why);
  }
}

//===----------------------------------------------------------------------===//
// UTF-8 in names
//===----------------------------------------------------------------------===//

TEST_CASE("names that are not valid UTF-8 are refused, naming where") {
  // x + w -> t (value_info), Softmax(t) -> y; each case breaks one name.
  const std::string bad = "b\xff";
  // (ModelBuilder points into itself: built in place, never copied.)
  auto fill = [](ModelBuilder &m) {
    m.input("x", kFloat, {2});
    m.floats("w", {2}, {1, 2});
    m.node("Add", {"x", "w"}, {"t"}, "add");
    attrInt(m.node("Softmax", {"t"}, {"y"}, "softmax"), "axis", -1);
    m.valueInfo("t", kFloat, {2});
    m.output("y");
  };
  ModelBuilder good;
  fill(good);
  REQUIRE(importOk(good.bytes()));
  const std::string badByte = "is not valid UTF-8 (bad byte 0xff at offset 1)";
  struct Case {
    std::function<void(onnx::GraphProto &)> mutate;
    std::string where;
  };
  std::vector<Case> cases = {
      {[&](onnx::GraphProto &g) { g.set_name(bad); }, "graph name"},
      {[&](onnx::GraphProto &g) { g.mutable_input(0)->set_name(bad); },
       "graph input #0"},
      {[&](onnx::GraphProto &g) { g.mutable_output(0)->set_name(bad); },
       "graph output #0"},
      {[&](onnx::GraphProto &g) { g.mutable_value_info(0)->set_name(bad); },
       "value_info #0"},
      {[&](onnx::GraphProto &g) { g.mutable_initializer(0)->set_name(bad); },
       "initializer #0"},
      {[&](onnx::GraphProto &g) { g.mutable_node(0)->set_name(bad); },
       "node #0 (Add) name"},
      {[&](onnx::GraphProto &g) { g.mutable_node(0)->set_input(1, bad); },
       "node #0 (Add) input #1"},
      {[&](onnx::GraphProto &g) { g.mutable_node(1)->set_output(0, bad); },
       "node #1 (Softmax) output #0"},
      {[&](onnx::GraphProto &g) {
         g.mutable_node(1)->mutable_attribute(0)->set_name(bad);
       },
       "node #1 (Softmax) attribute #0 name"},
      {[&](onnx::GraphProto &g) {
         g.mutable_node(1)->mutable_attribute(0)->set_ref_attr_name(bad);
       },
       "node #1 (Softmax) attribute 'axis' ref_attr_name"},
      {[&](onnx::GraphProto &g) { g.mutable_node(1)->set_op_type(bad); },
       "node #1 op type"},
      {[&](onnx::GraphProto &g) { g.mutable_node(1)->set_domain(bad); },
       "node #1 domain"},
  };
  for (const Case &c : cases) {
    ModelBuilder m;
    fill(m);
    c.mutate(*m.graph);
    CHECK(importError(m.bytes()) ==
          "model.onnx: " + c.where + " 'b\\xff' " + badByte);
  }

  // Names in local functions and in subgraphs, which are checked before
  // anything says that remat does not support them.
  ModelBuilder f;
  fill(f);
  onnx::FunctionProto *function = f.model.add_functions();
  function->set_name("F");
  function->set_domain("custom");
  function->add_input("X");
  function->add_output(bad);
  CHECK(importError(f.bytes()) ==
        "model.onnx: function 'F' output #0 'b\\xff' " + badByte);
  function->set_output(0, "Y");
  onnx::NodeProto *body = function->add_node();
  body->set_op_type("Relu");
  body->add_input("X");
  body->add_output("Y");
  body->set_name(bad);
  CHECK(importError(f.bytes()) ==
        "model.onnx: function 'F' node #0 (Relu) name 'b\\xff' " + badByte);

  ModelBuilder s;
  fill(s);
  onnx::AttributeProto *branch =
      s.graph->mutable_node(1)->add_attribute();
  branch->set_name("then_branch");
  branch->set_type(onnx::AttributeProto::GRAPH);
  branch->mutable_g()->set_name("then");
  branch->mutable_g()->add_node()->set_op_type("Relu");
  branch->mutable_g()->mutable_node(0)->add_output(bad);
  CHECK(importError(s.bytes()) ==
        "model.onnx: node #1 (Softmax) attribute 'then_branch': node #0 "
        "(Relu) output #0 'b\\xff' " + badByte);
}

TEST_CASE("CastLike, ScatterND and SplitToSequence + SequenceAt convert") {
  // CastLike takes the second input's dtype; its values are not read.
  ModelBuilder castLike;
  castLike.input("x", kFloat, {2});
  castLike.ints("like", {1}, {0});
  castLike.node("CastLike", {"x", "like"}, {"y"}, "castlike");
  castLike.output("y");
  auto cast = importOk(castLike.bytes());
  REQUIRE(cast);
  CHECK(cast->getOutputs()[0]->getType().str() == "i64[2]");
  CHECK(cast->getOutputs()[0]->getDefiningNode()->getOp() == OpKind::Cast);

  // ScatterND with constant indices becomes Reshape + ScatterElements.
  ModelBuilder scatter;
  scatter.input("data", kFloat, {3, 2});
  scatter.input("updates", kFloat, {2, 2});
  scatter.ints("indices", {2, 1}, {2, 0});
  scatter.node("ScatterND", {"data", "indices", "updates"}, {"y"}, "scatter");
  scatter.output("y");
  auto scattered = importOk(scatter.bytes());
  REQUIRE(scattered);
  bool hasScatter = false;
  for (const Node &node : scattered->getNodes())
    hasScatter |= node.getOp() == OpKind::ScatterElements;
  CHECK(hasScatter);
  scatter.graph->mutable_initializer()->Clear();
  scatter.input("indices", kInt64, {2, 1});
  CHECK_CONTAINS(importError(scatter.bytes()),
                 "indices 'indices' must be a constant: remat imports "
                 "ScatterND as Reshape + ScatterElements");

  // A sequence of the pieces of a Split; SequenceAt picks one (negative
  // positions count from the end).
  ModelBuilder seq;
  seq.input("x", kFloat, {2, 6});
  seq.ints("split", {3}, {1, 2, 3});
  seq.ints("pos", {}, {-2});
  onnx::NodeProto *split =
      seq.node("SplitToSequence", {"x", "split"}, {"s"}, "split");
  attrInt(split, "axis", 1);
  seq.node("SequenceAt", {"s", "pos"}, {"y"}, "at");
  seq.output("y");
  auto picked = importOk(seq.bytes());
  REQUIRE(picked);
  CHECK(picked->getOutputs()[0]->getType().str() == "f32[2,2]");

  // Without split: pieces of 1, squeezed when keepdims is 0.
  ModelBuilder ones;
  ones.input("x", kFloat, {3, 4});
  ones.ints("pos", {}, {1});
  onnx::NodeProto *each = ones.node("SplitToSequence", {"x"}, {"s"}, "each");
  attrInt(each, "keepdims", 0);
  ones.node("SequenceAt", {"s", "pos"}, {"y"}, "at");
  ones.output("y");
  auto squeezed = importOk(ones.bytes());
  REQUIRE(squeezed);
  CHECK(squeezed->getOutputs()[0]->getType().str() == "f32[4]");

  // A sequence read by anything but SequenceAt is refused by name.
  ModelBuilder other;
  other.input("x", kFloat, {2, 2});
  other.node("SplitToSequence", {"x"}, {"s"}, "split");
  other.node("Identity", {"s"}, {"y"}, "use");
  other.output("y");
  CHECK_CONTAINS(importError(other.bytes()),
                 "input 's' is a tensor sequence; remat reads sequences only "
                 "with SequenceAt");
}

TEST_CASE("NonZero of a constant is evaluated at import") {
  // Row-major indices, one row per dim: mask [[0, 1, 0], [2, 0, 3]] has
  // nonzeros at (0,1), (1,0), (1,2).
  ModelBuilder m;
  m.ints("mask", {2, 3}, {0, 1, 0, 2, 0, 3});
  m.node("NonZero", {"mask"}, {"nz"}, "nonzero");
  m.output("nz");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  const TensorData *nz = getConstantValue(graph->lookup("nz"));
  REQUIRE(nz);
  CHECK(nz->getType().str() == "i64[2,3]");
  CHECK(nz->getInts() == std::vector<int64_t>{0, 1, 1, 1, 0, 2});

  // As Longformer's export writes it: NonZero of a ConstantOfShape of
  // static shapes, whose count then sizes a Reshape of run-time data.
  ModelBuilder chain;
  chain.input("x", kFloat, {"batch", 4});
  chain.node("Shape", {"x"}, {"s"}, "shape");
  chain.node("ConstantOfShape", {"s"}, {"ones"}, "ones");
  onnx::AttributeProto *value = chain.graph->mutable_node(1)->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(kInt64);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_int64_data(1);
  chain.node("NonZero", {"ones"}, {"nz"}, "nonzero");
  chain.node("Shape", {"nz"}, {"nzShape"}, "nzshape");
  chain.constInts("one", {1});
  chain.constInts("two", {2});
  chain.node("Slice", {"nzShape", "one", "two"}, {"count"}, "count");
  chain.node("Reshape", {"x", "count"}, {"y"}, "reshape");
  chain.output("y");
  auto reshaped = importOk(chain.bytes(), bind({{"batch", 3}}));
  REQUIRE(reshaped);
  CHECK(reshaped->lookup("y")->getType().str() == "f32[12]");
  CHECK(getConstantValue(reshaped->lookup("count"))->getInts() ==
        std::vector<int64_t>{12});

  // No nonzero element: an empty result.
  ModelBuilder empty;
  empty.ints("zeros", {3}, {0, 0, 0});
  empty.node("NonZero", {"zeros"}, {"nz"}, "nonzero");
  empty.output("nz");
  auto none = importOk(empty.bytes());
  REQUIRE(none);
  CHECK(none->lookup("nz")->getType().str() == "i64[1,0]");
}

TEST_CASE("NonZero of run-time data names the inputs it depends on") {
  // DeBERTa's classification loss: (labels >= 0).nonzero().
  ModelBuilder m;
  m.input("labels", kInt64, {"batch"});
  m.constInts("zero", {0});
  m.node("GreaterOrEqual", {"labels", "zero"}, {"valid"}, "/model/ge");
  m.node("NonZero", {"valid"}, {"nz"}, "/model/NonZero");
  m.output("nz");
  CHECK(importError(m.bytes(), bind({{"batch", 2}})) ==
        "model.onnx: node '/model/NonZero' (NonZero): the shape of "
        "NonZero's result is the number of nonzero elements of input 0 "
        "('valid'), which is not a constant at import (it is computed by "
        "node '/model/ge' (GreaterOrEqual)), which depends on graph input "
        "'labels'; remat needs static shapes, so it evaluates NonZero only "
        "on constants");
}

TEST_CASE("OneHot of constants folds, so a Tile it sizes is static") {
  // FalconH1's repeat_interleave as the TorchScript exporter writes it:
  // repeats = Reshape(OneHot([3], 5, [1, 4]), [-1]) = [1, 1, 1, 4, 1].
  ModelBuilder m;
  m.input("x", kFloat, {2, 1, 1, 1, 1});
  m.ints("idx", {1}, {3});
  m.ints("depth", {}, {5});
  m.ints("values", {2}, {1, 4});
  m.node("OneHot", {"idx", "depth", "values"}, {"oh"}, "onehot");
  m.constInts("flat", {-1});
  m.node("Reshape", {"oh", "flat"}, {"repeats"}, "reshape");
  m.node("Tile", {"x", "repeats"}, {"y"}, "tile");
  m.output("y");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  CHECK(graph->lookup("y")->getType().str() == "f32[2,1,1,4,1]");
  const TensorData *repeats = getConstantValue(graph->lookup("repeats"));
  REQUIRE(repeats);
  CHECK(repeats->getInts() == std::vector<int64_t>{1, 1, 1, 4, 1});
}

TEST_CASE("BatchNormalization, InstanceNormalization and the global pools "
          "refuse operands they cannot normalise, naming the node") {
  auto normError = [](const std::string &op, std::vector<Dim> xDims,
                      int64_t channels, int inputs, int outputs,
                      bool training) {
    ModelBuilder m;
    m.input("x", kFloat, std::move(xDims));
    std::vector<std::string> names = {"x"};
    for (int i = 1; i < inputs; ++i) {
      std::string name = "p" + std::to_string(i);
      m.floats(name, {channels}, std::vector<float>(size_t(channels), 1.0f));
      names.push_back(name);
    }
    std::vector<std::string> outs = {"y", "rm", "rv"};
    outs.resize(size_t(outputs));
    onnx::NodeProto *n = m.node(op, names, outs, "norm");
    if (training)
      attrInt(n, "training_mode", 1);
    m.output("y");
    return importError(m.bytes());
  };
  CHECK(normError("BatchNormalization", {2, 3, 4}, 3, 4, 1, false) ==
        "model.onnx: node 'norm' (BatchNormalization): expects 5 inputs, "
        "got 4");
  CHECK(normError("BatchNormalization", {2, 3, 4}, 4, 5, 1, false) ==
        "model.onnx: node 'norm' (BatchNormalization): input 1 is f32[4], "
        "expected [3] of f32[2,3,4]'s dtype");
  CHECK(normError("BatchNormalization", {2, 3, 4}, 3, 5, 3, false) ==
        "model.onnx: node 'norm' (BatchNormalization): has running "
        "statistics' outputs without training_mode = 1");
  CHECK(normError("InstanceNormalization", {2, 3}, 3, 3, 1, false) ==
        "model.onnx: node 'norm' (InstanceNormalization): expects [N, C, "
        "spatial...] of rank 3 or more, got f32[2,3]");
  CHECK(normError("GlobalAveragePool", {2, 3}, 3, 1, 1, false) ==
        "model.onnx: node 'norm' (GlobalAveragePool): expects [N, C, "
        "spatial...] of rank 3 or more, got f32[2,3]");
  // Training mode with the running statistics' outputs imports.
  CHECK(normError("BatchNormalization", {2, 3, 4}, 3, 5, 3, true) == "ok");
}

TEST_CASE("Resize imports as a MatMul by constant weights or a Gather per "
          "resized axis") {
  // Linear, half_pixel, the second-to-last axis 3 -> 6 (sizes from a
  // Constant): out[y] reads x at (y + 0.5) / 2 - 0.5, the edge clamped.
  ModelBuilder m(19);
  m.input("x", kFloat, {1, 2, 3, 4});
  m.constInts("sizes", {1, 2, 6, 4});
  onnx::NodeProto *linear = m.node("Resize", {"x", "", "", "sizes"}, {"y"},
                                   "resize");
  attrString(linear, "mode", "linear");
  m.output("y");
  auto graph = importOk(m.bytes());
  REQUIRE(graph);
  CHECK(graph->lookup("y")->getType().str() == "f32[1,2,6,4]");
  const Node *matmul = definingNode(*graph, "y");
  REQUIRE(matmul->getOpSpelling() == "MatMul");
  const TensorData *weights = getConstantValue(matmul->getOperand(0));
  REQUIRE(weights);
  CHECK(weights->getType().str() == "f32[6,3]");
  std::vector<double> expected = {1,    0,    0,    0.75, 0.25, 0,
                                  0.25, 0.75, 0,    0,    0.75, 0.25,
                                  0,    0.25, 0.75, 0,    0,    1};
  for (int64_t i = 0; i < 18; ++i)
    CHECK(weights->getDouble(i) == doctest::Approx(expected[size_t(i)]));

  // Nearest along the last axis 3 -> 6, scales an f32 initializer (only
  // Resize reads it: a constant, not a weight): a Gather.
  ModelBuilder n(19);
  n.input("x", kFloat, {1, 1, 2, 3});
  n.floats("scales", {4}, {1, 1, 1, 2});
  n.node("Resize", {"x", "", "scales"}, {"y"}, "resize");
  n.output("y");
  auto nearest = importOk(n.bytes());
  REQUIRE(nearest);
  CHECK(nearest->lookup("y")->getType().str() == "f32[1,1,2,6]");
  const Node *gather = definingNode(*nearest, "y");
  REQUIRE(gather->getOpSpelling() == "Gather");
  CHECK(gather->getAttrs().getInt("axis") == 3);
  const TensorData *indices = getConstantValue(gather->getOperand(1));
  REQUIRE(indices);
  CHECK(indices->getInts() == std::vector<int64_t>{0, 0, 1, 1, 2, 2});
  for (const Value *input : nearest->getInputs())
    CHECK_MESSAGE(!input->isWeight(), input->getName().str());
}

TEST_CASE("Resize refuses what it cannot make constant weights of, naming "
          "the node") {
  auto resizeError = [](const std::string &mode, bool sizesFromInput,
                        bool both, int elemType) {
    ModelBuilder m(19);
    m.input("x", elemType, {1, 1, 2, 3});
    if (sizesFromInput) {
      m.input("s", kInt64, {4});
      m.node("Identity", {"s"}, {"sizes"});
    } else {
      m.constInts("sizes", {1, 1, 4, 6});
    }
    std::vector<std::string> inputs = {"x", "", "", "sizes"};
    if (both) {
      m.floats("scales", {4}, {1, 1, 2, 2});
      inputs[2] = "scales";
    }
    onnx::NodeProto *node = m.node("Resize", inputs, {"y"}, "resize");
    attrString(node, "mode", mode);
    m.output("y");
    return importError(m.bytes());
  };
  CHECK(resizeError("linear", true, false, kFloat) ==
        "model.onnx: node 'resize' (Resize): input 'sizes' ('sizes') is not "
        "a constant at import, which depends on graph input 's'; remat needs "
        "static shapes, so it imports Resize with constant roi, scales and "
        "sizes");
  CHECK(resizeError("linear", false, true, kFloat) ==
        "model.onnx: node 'resize' (Resize): has both 'scales' and 'sizes'; "
        "ONNX allows one");
  CHECK(resizeError("area", false, false, kFloat) ==
        "model.onnx: node 'resize' (Resize): mode 'area' is not one of "
        "'nearest', 'linear' and 'cubic'");
  CHECK(resizeError("cubic", false, false, kInt64) ==
        "model.onnx: node 'resize' (Resize): mode 'cubic' interpolates "
        "i64[1,1,2,3], which needs a floating-point dtype");
  // Nearest selects, so integers resize.
  CHECK(resizeError("nearest", false, false, kInt64) == "ok");

  // Sizes from a hostile file are checked before anything is allocated.
  for (int64_t size : {int64_t(1) << 40, int64_t(1) << 62}) {
    ModelBuilder m(19);
    m.input("x", kFloat, {1, 1, 2, 3});
    m.constInts("sizes", {1, 1, 4, size});
    m.node("Resize", {"x", "", "", "sizes"}, {"y"}, "resize");
    m.output("y");
    CHECK_CONTAINS(importError(m.bytes()),
                   "model.onnx: node 'resize' (Resize): the result");
  }
  ModelBuilder huge(19);
  huge.input("x", kFloat, {1, 1, 2, 3});
  huge.floats("scales", {4}, {1, 1, 1, 1e30f});
  huge.node("Resize", {"x", "", "scales"}, {"y"}, "resize");
  huge.output("y");
  CHECK(importError(huge.bytes()) ==
        "model.onnx: node 'resize' (Resize): scale 3 makes axis 3 too large");
}

TEST_CASE("DFT imports as one MatMul by a constant matrix, and refuses what "
          "it cannot, naming the node") {
  auto dft = [](std::vector<Dim> dims, int64_t axis, bool lengthFromInput) {
    ModelBuilder m(20);
    m.input("x", kFloat, std::move(dims));
    std::vector<std::string> inputs = {"x", "", "axis"};
    if (lengthFromInput) {
      m.input("n", kInt64, {});
      inputs[1] = "n";
    }
    m.ints("axis", {}, {axis});
    m.node("DFT", inputs, {"y"}, "dft");
    m.output("y");
    return m.bytes();
  };
  // [2, 6, 5, 1] along axis 1: the axis moved next to the parts dim, 6 x 1
  // inputs to 6 x 2 outputs, and moved back.
  auto graph = importOk(dft({2, 6, 5, 1}, 1, false));
  REQUIRE(graph);
  CHECK(graph->lookup("y")->getType().str() == "f32[2,6,5,2]");
  CHECK(opsOf(*graph) ==
        "Transpose Constant Reshape Constant MatMul Constant Reshape Transpose");
  CHECK(importError(dft({2, 6, 5, 1}, -1, false)) ==
        "model.onnx: node 'dft' (DFT): axis -1 is the last dim, the real and "
        "imaginary parts");
  CHECK(importError(dft({2, 6, 5, 3}, 1, false)) ==
        "model.onnx: node 'dft' (DFT): the last dim is 3, expected 1 (real) "
        "or 2 (complex)");
  auto withLength = [](int64_t length) {
    ModelBuilder m(20);
    m.input("x", kFloat, {2, 6, 5, 1});
    m.ints("n", {}, {length});
    m.node("DFT", {"x", "n"}, {"y"}, "dft");
    m.output("y");
    return m.bytes();
  };
  CHECK(importError(withLength(0)) ==
        "model.onnx: node 'dft' (DFT): the transform's length is 0, expected "
        "at least 1");
  CHECK(importError(withLength(int64_t(1) << 40)) ==
        "model.onnx: node 'dft' (DFT): a transform from 5 to 1099511627776 "
        "entries needs a matrix of more than 2^24 entries (remat imports DFT "
        "as a MatMul by one)");
  CHECK(importError(dft({2, 6, 5, 1}, 1, true)) ==
        "model.onnx: node 'dft' (DFT): input 'dft_length' ('n') is not a "
        "constant at import, which depends on graph input 'n'; remat needs "
        "static shapes, so it imports DFT with a constant dft_length and "
        "axis");
}
