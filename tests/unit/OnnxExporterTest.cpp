//===- tests/unit/OnnxExporterTest.cpp - Graph -> ONNX ModelProto ---------===//
//
// Exports small .rir graphs and reads the ModelProto back: header, inputs
// vs initializers, attributes, value_info, stages, remat.Gelu's
// decomposition (its structure, and its values evaluated with the CPU
// kernels against the original op and against <cmath>), external data files,
// atomic writes, determinism and every error path with its message.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxExporter.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace remat;
using namespace remat::ir;
using namespace remat::onnx_frontend;

namespace pb = ::ONNX_NAMESPACE;

namespace {

std::unique_ptr<Graph> parse(llvm::StringRef text) {
  auto graph = parseGraph(text, "t.rir");
  if (!graph) {
    std::string message = errorToString(graph.takeError());
    INFO("text:\n" << text.str());
    FAIL("unexpected parse error: " << message);
  }
  return std::move(*graph);
}

pb::ModelProto parseModel(const std::string &bytes) {
  pb::ModelProto model;
  REQUIRE(model.ParseFromString(bytes));
  return model;
}

/// Exports \p graph inline and parses the bytes back.
pb::ModelProto exportModel(const Graph &graph,
                           const ExportOptions &options = {}) {
  auto bytes = exportOnnxBytes(graph, options);
  if (!bytes)
    FAIL("unexpected export error: " << errorToString(bytes.takeError()));
  return parseModel(*bytes);
}

pb::ModelProto exportText(llvm::StringRef text,
                          const ExportOptions &options = {}) {
  return exportModel(*parse(text), options);
}

/// \returns the message of exporting \p graph, failing if it exports.
std::string exportError(const Graph &graph, const ExportOptions &options = {}) {
  auto bytes = exportOnnxBytes(graph, options);
  if (bytes)
    FAIL("exported, but an error was expected");
  return errorToString(bytes.takeError());
}

const pb::NodeProto *findNode(const pb::ModelProto &model,
                              llvm::StringRef name) {
  for (const pb::NodeProto &node : model.graph().node())
    if (node.name() == name)
      return &node;
  return nullptr;
}

const pb::AttributeProto *findAttr(const pb::NodeProto &node,
                                   llvm::StringRef name) {
  for (const pb::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

std::vector<std::string>
names(const google::protobuf::RepeatedPtrField<pb::ValueInfoProto> &infos) {
  std::vector<std::string> result;
  for (const pb::ValueInfoProto &info : infos)
    result.push_back(info.name());
  return result;
}

std::vector<std::string> opTypes(const pb::ModelProto &model) {
  std::vector<std::string> result;
  for (const pb::NodeProto &node : model.graph().node())
    result.push_back(node.op_type());
  return result;
}

/// \returns "f32[2,3]"-style text for a ValueInfoProto's type.
std::string typeText(const pb::ValueInfoProto &info) {
  const pb::TypeProto_Tensor &tensor = info.type().tensor_type();
  auto dtype = fromOnnxCode(tensor.elem_type());
  std::string text = dtype ? dtypeName(*dtype).str() : "?";
  if (!tensor.has_shape())
    return text + "<no shape>";
  text += "[";
  for (int i = 0; i < tensor.shape().dim_size(); ++i) {
    if (i)
      text += ",";
    text += tensor.shape().dim(i).has_dim_value()
                ? std::to_string(tensor.shape().dim(i).dim_value())
                : "?";
  }
  return text + "]";
}

const pb::ValueInfoProto *findValueInfo(const pb::ModelProto &model,
                                        llvm::StringRef name) {
  for (const pb::ValueInfoProto &info : model.graph().value_info())
    if (info.name() == name)
      return &info;
  return nullptr;
}

std::string rawBytes(const TensorData &data) {
  llvm::ArrayRef<uint8_t> bytes = data.getBytes();
  return std::string(reinterpret_cast<const char *>(bytes.data()),
                     bytes.size());
}

/// The tensor a TensorProto with inline raw_data holds.
TensorDataPtr tensorFromProto(const pb::TensorProto &proto) {
  auto dtype = fromOnnxCode(proto.data_type());
  REQUIRE(dtype);
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  const std::string &raw = proto.raw_data();
  std::vector<uint8_t> bytes(raw.begin(), raw.end());
  TensorType type(*dtype, dims);
  REQUIRE(int64_t(bytes.size()) == type.getByteSize());
  return std::make_shared<TensorData>(type, std::move(bytes));
}

/// Runs the nodes of \p model in order with the CPU kernels (Constant nodes
/// directly), starting from \p values (graph inputs by name), and \returns
/// every value by name. Result types come from value_info and outputs, so
/// that evaluation also checks what the model declares.
std::map<std::string, TensorDataPtr>
evaluateModel(const pb::ModelProto &model,
              std::map<std::string, TensorDataPtr> values) {
  std::map<std::string, TensorType> declared;
  auto declare = [&](const pb::ValueInfoProto &info) {
    const pb::TypeProto_Tensor &tensor = info.type().tensor_type();
    std::vector<int64_t> dims;
    for (const auto &dim : tensor.shape().dim())
      dims.push_back(dim.dim_value());
    declared[info.name()] = TensorType(*fromOnnxCode(tensor.elem_type()), dims);
  };
  for (const pb::ValueInfoProto &info : model.graph().value_info())
    declare(info);
  for (const pb::ValueInfoProto &info : model.graph().output())
    declare(info);

  for (const pb::NodeProto &proto : model.graph().node()) {
    INFO("node " << proto.name() << " (" << proto.op_type() << ")");
    if (proto.op_type() == "Constant") {
      const pb::AttributeProto *value = findAttr(proto, "value");
      REQUIRE(value != nullptr);
      values[proto.output(0)] = tensorFromProto(value->t());
      continue;
    }
    auto op = lookupOp(proto.domain(), proto.op_type());
    REQUIRE(op);
    Graph scratch("scratch");
    std::vector<Value *> operands;
    std::vector<const TensorData *> operandData;
    for (const std::string &input : proto.input()) {
      REQUIRE(values.count(input));
      operands.push_back(scratch.addInput(input, values[input]->getType()));
      operandData.push_back(values[input].get());
    }
    std::vector<TensorType> resultTypes;
    std::vector<std::string> resultNames;
    for (const std::string &output : proto.output()) {
      REQUIRE(declared.count(output));
      resultTypes.push_back(declared[output]);
      resultNames.push_back(output);
    }
    // The decompositions use int, ints and float attributes only.
    AttrList attrs;
    for (const pb::AttributeProto &attr : proto.attribute()) {
      if (attr.type() == pb::AttributeProto::INT)
        attrs.set(attr.name(), int64_t(attr.i()));
      else if (attr.type() == pb::AttributeProto::INTS)
        attrs.set(attr.name(),
                  std::vector<int64_t>(attr.ints().begin(), attr.ints().end()));
      else if (attr.type() == pb::AttributeProto::FLOAT)
        attrs.set(attr.name(), attr.f());
      else
        FAIL("attribute " << attr.name() << " of an unexpected kind");
    }
    Node *node =
        scratch.createNode(*op, operands, resultTypes, resultNames, attrs);
    auto results = runtime::cpu::evaluateNode(*node, operandData);
    if (!results)
      FAIL("cannot evaluate: " << errorToString(results.takeError()));
    for (size_t i = 0; i < results->size(); ++i)
      values[proto.output(i)] = (*results)[i];
  }
  return values;
}

double geluReference(double x, bool useTanh) {
  if (useTanh)
    return 0.5 * x *
           (1.0 +
            std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

/// A fresh directory, removed with its contents at the end of the test.
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() {
    REQUIRE(!llvm::sys::fs::createUniqueDirectory("remat-export", path));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> result(path);
    llvm::sys::path::append(result, name);
    return std::string(result);
  }
  /// \returns the names of the entries of the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> result;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec;
         it.increment(ec))
      result.push_back(llvm::sys::path::filename(it->path()).str());
    std::sort(result.begin(), result.end());
    return result;
  }
};

/// Fails the test with the message of \p err, if any.
void requireOk(llvm::Error err) {
  if (err)
    FAIL("unexpected error: " << errorToString(std::move(err)));
}

/// \returns the message of \p err, failing the test if it is success.
std::string requireError(llvm::Error err) {
  if (!err)
    FAIL("succeeded, but an error was expected");
  return errorToString(std::move(err));
}

std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  REQUIRE_MESSAGE(buffer, "cannot read " << path);
  return (*buffer)->getBuffer().str();
}

void writeFile(const std::string &path, llvm::StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  REQUIRE(!ec);
  os << contents;
}

constexpr const char *kMlp = R"(
graph @mlp(%x: f32[2,4], %w: f32[4,3] weight = dense<f32[4,3]: 0.5>, %b: f32[3] weight, %c: f32[3] = dense<f32[3]: [1.0, 2.0, 3.0]>) {
  %h = MatMul(%x, %w) : f32[2,3]
  %hb = Add(%h, %b) : f32[2,3]
  %hc = Add(%hb, %c) : f32[2,3]
  %r = Relu(%hc) : f32[2,3] remat
  %l = ReduceSum(%r) {keepdims = 0} : f32[] bwd
  return %l, %h
}
)";

} // namespace

//===----------------------------------------------------------------------===//
// Model header
//===----------------------------------------------------------------------===//

TEST_CASE("the header names IR version 8, opset 17 only, and remat") {
  ExportOptions options;
  options.metadata = {{"remat.budget", "6GiB"}, {"remat.strategy", "auto"}};
  pb::ModelProto model = exportText(kMlp, options);
  CHECK(model.ir_version() == 8);
  REQUIRE(model.opset_import_size() == 1);
  CHECK(model.opset_import(0).domain() == "");
  CHECK(model.opset_import(0).version() == 17);
  CHECK(model.producer_name() == "remat");
  CHECK(!model.producer_version().empty());
  CHECK(model.graph().name() == "mlp");

  // remat.version first, then the options' entries in their order.
  REQUIRE(model.metadata_props_size() == 3);
  CHECK(model.metadata_props(0).key() == "remat.version");
  CHECK(model.metadata_props(0).value() == model.producer_version());
  CHECK(model.metadata_props(1).key() == "remat.budget");
  CHECK(model.metadata_props(1).value() == "6GiB");
  CHECK(model.metadata_props(2).key() == "remat.strategy");
  CHECK(model.metadata_props(2).value() == "auto");
}

TEST_CASE("a graph without a name is exported as 'main'") {
  auto graph = parse(kMlp);
  graph->setName("");
  CHECK(exportModel(*graph).graph().name() == "main");
}

//===----------------------------------------------------------------------===//
// Inputs, initializers, outputs, value_info
//===----------------------------------------------------------------------===//

TEST_CASE("inputs with data become initializers; the rest stay inputs") {
  auto graph = parse(kMlp);
  pb::ModelProto model = exportModel(*graph);
  const pb::GraphProto &g = model.graph();

  // %x (no data) and %b (a weight without data, still declared).
  REQUIRE(g.input_size() == 2);
  CHECK(g.input(0).name() == "x");
  CHECK(typeText(g.input(0)) == "f32[2,4]");
  CHECK(g.input(0).doc_string() == "");
  CHECK(g.input(1).name() == "b");
  CHECK(typeText(g.input(1)) == "f32[3]");
  CHECK(g.input(1).doc_string() == "weight");

  // %w (a weight) and %c (not a weight) with data, in input order.
  REQUIRE(g.initializer_size() == 2);
  const pb::TensorProto &w = g.initializer(0);
  CHECK(w.name() == "w");
  CHECK(w.data_type() == pb::TensorProto::FLOAT);
  CHECK(std::vector<int64_t>(w.dims().begin(), w.dims().end()) ==
        std::vector<int64_t>{4, 3});
  CHECK(w.raw_data() == rawBytes(*graph->lookup("w")->getData()));
  CHECK(w.doc_string() == "weight");
  CHECK(w.data_location() == pb::TensorProto::DEFAULT);
  const pb::TensorProto &c = g.initializer(1);
  CHECK(c.name() == "c");
  CHECK(c.doc_string() == "");
  // Little-endian f32 1.0, 2.0, 3.0.
  CHECK(c.raw_data() == std::string("\x00\x00\x80\x3f\x00\x00\x00\x40"
                                    "\x00\x00\x40\x40",
                                    12));
}

TEST_CASE("outputs and every intermediate value are typed") {
  pb::ModelProto model = exportText(kMlp);
  const pb::GraphProto &g = model.graph();
  REQUIRE(g.output_size() == 2);
  CHECK(g.output(0).name() == "l");
  // A scalar has a shape with no dims, not a missing shape.
  CHECK(typeText(g.output(0)) == "f32[]");
  CHECK(g.output(1).name() == "h");
  CHECK(typeText(g.output(1)) == "f32[2,3]");
  // Node results that are not outputs, in schedule order.
  CHECK(names(g.value_info()) == std::vector<std::string>{"hb", "hc", "r"});
  CHECK(typeText(g.value_info(0)) == "f32[2,3]");
}

TEST_CASE("dtypes map to ONNX element types") {
  pb::ModelProto model = exportText(R"(
graph @types(%a: f64[1], %b: f16[1], %c: bf16[1], %d: i64[1], %e: i32[1], %f: i8[1], %g: u8[1], %h: bool[1]) {
  %a1 = Identity(%a) : f64[1]
  return %a1, %b, %c, %d, %e, %f, %g, %h
}
)");
  std::vector<int> codes;
  for (const pb::ValueInfoProto &input : model.graph().input())
    codes.push_back(input.type().tensor_type().elem_type());
  CHECK(codes ==
        std::vector<int>{pb::TensorProto::DOUBLE, pb::TensorProto::FLOAT16,
                         pb::TensorProto::BFLOAT16, pb::TensorProto::INT64,
                         pb::TensorProto::INT32, pb::TensorProto::INT8,
                         pb::TensorProto::UINT8, pb::TensorProto::BOOL});
}

TEST_CASE("an input returned unchanged is both input and output") {
  pb::ModelProto model = exportText(R"(
graph @pass(%x: f32[2]) {
  return %x
}
)");
  CHECK(model.graph().node_size() == 0);
  CHECK(names(model.graph().input()) == std::vector<std::string>{"x"});
  CHECK(names(model.graph().output()) == std::vector<std::string>{"x"});
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

TEST_CASE("nodes keep the schedule, are named by their first result, and "
          "record their stage in doc_string") {
  pb::ModelProto model = exportText(kMlp);
  const pb::GraphProto &g = model.graph();
  CHECK(opTypes(model) ==
        std::vector<std::string>{"MatMul", "Add", "Add", "Relu", "ReduceSum"});
  std::vector<std::string> nodeNames, docs;
  for (const pb::NodeProto &node : g.node()) {
    nodeNames.push_back(node.name());
    docs.push_back(node.doc_string());
    CHECK(node.domain() == "");
  }
  CHECK(nodeNames == std::vector<std::string>{"h", "hb", "hc", "r", "l"});
  CHECK(docs ==
        std::vector<std::string>{"", "", "", "stage=remat", "stage=bwd"});
  const pb::NodeProto &add = g.node(1);
  CHECK(std::vector<std::string>(add.input().begin(), add.input().end()) ==
        std::vector<std::string>{"h", "b"});
  CHECK(std::vector<std::string>(add.output().begin(), add.output().end()) ==
        std::vector<std::string>{"hb"});
}

TEST_CASE("attributes keep their kind") {
  pb::ModelProto model = exportText(R"(
graph @attrs(%a: f32[2,3], %b: f32[3,4], %x: f32[2,3], %i: i64[2,3], %u: f32[2,3]) {
  %g = Gemm(%a, %b) {alpha = 0.5, transA = 0} : f32[2,4]
  %t = Transpose(%g) {perm = [1, 0]} : f32[4,2]
  %s = ScatterElements(%x, %i, %u) {axis = 1, reduction = "add"} : f32[2,3]
  %fs = Constant() {value_floats = [1.5, -2.0]} : f32[2]
  %k = Constant() {value = dense<i32[2]: [7, -1]>} : i32[2]
  return %t, %s, %fs, %k
}
)");
  const pb::NodeProto *gemm = findNode(model, "g");
  REQUIRE(gemm);
  const pb::AttributeProto *alpha = findAttr(*gemm, "alpha");
  REQUIRE(alpha);
  CHECK(alpha->type() == pb::AttributeProto::FLOAT);
  CHECK(alpha->f() == 0.5f);
  const pb::AttributeProto *transA = findAttr(*gemm, "transA");
  REQUIRE(transA);
  CHECK(transA->type() == pb::AttributeProto::INT);
  CHECK(transA->i() == 0);
  CHECK(transA->has_i());

  const pb::AttributeProto *perm = findAttr(*findNode(model, "t"), "perm");
  REQUIRE(perm);
  CHECK(perm->type() == pb::AttributeProto::INTS);
  CHECK(std::vector<int64_t>(perm->ints().begin(), perm->ints().end()) ==
        std::vector<int64_t>{1, 0});

  const pb::AttributeProto *reduction =
      findAttr(*findNode(model, "s"), "reduction");
  REQUIRE(reduction);
  CHECK(reduction->type() == pb::AttributeProto::STRING);
  CHECK(reduction->s() == "add");

  const pb::AttributeProto *floats =
      findAttr(*findNode(model, "fs"), "value_floats");
  REQUIRE(floats);
  CHECK(floats->type() == pb::AttributeProto::FLOATS);
  CHECK(std::vector<float>(floats->floats().begin(), floats->floats().end()) ==
        std::vector<float>{1.5f, -2.0f});

  const pb::AttributeProto *tensor = findAttr(*findNode(model, "k"), "value");
  REQUIRE(tensor);
  CHECK(tensor->type() == pb::AttributeProto::TENSOR);
  CHECK(tensor->t().data_type() == pb::TensorProto::INT32);
  CHECK(std::vector<int64_t>(tensor->t().dims().begin(),
                             tensor->t().dims().end()) ==
        std::vector<int64_t>{2});
  CHECK(tensor->t().raw_data() ==
        std::string("\x07\x00\x00\x00\xff\xff\xff\xff", 8));
}

TEST_CASE("optional results and operands are kept in place") {
  pb::ModelProto model = exportText(R"(
graph @opt(%x: f32[2,8], %g: f32[8]) {
  %ratio = Constant() {value = dense<f32[]: 0.1>} : f32[]
  %on = Constant() {value = dense<bool[]: true>} : bool[]
  %d, %mask = Dropout(%x, %ratio, %on) {seed = 3} : f32[2,8], bool[2,8]
  %y, %mean, %inv = LayerNormalization(%d, %g) {epsilon = 1e-5} : f32[2,8], f32[2,1], f32[2,1]
  %p, %q = Split(%y) {axis = 1} : f32[2,4], f32[2,4]
  return %p, %q, %mask, %inv
}
)");
  const pb::NodeProto *dropout = findNode(model, "d");
  REQUIRE(dropout);
  CHECK(dropout->input_size() == 3);
  CHECK(dropout->output_size() == 2);
  CHECK(dropout->output(1) == "mask");
  const pb::NodeProto *norm = findNode(model, "y");
  REQUIRE(norm);
  CHECK(norm->input_size() == 2);
  CHECK(
      std::vector<std::string>(norm->output().begin(), norm->output().end()) ==
      std::vector<std::string>{"y", "mean", "inv"});
  REQUIRE(findValueInfo(model, "mean"));
  CHECK(typeText(*findValueInfo(model, "mean")) == "f32[2,1]");
  const pb::NodeProto *split = findNode(model, "p");
  REQUIRE(split);
  CHECK(split->output_size() == 2);
}

//===----------------------------------------------------------------------===//
// remat.Gelu
//===----------------------------------------------------------------------===//

TEST_CASE("remat.Gelu 'none' becomes x * 0.5 * (Erf(x / sqrt(2)) + 1)") {
  pb::ModelProto model = exportText(R"(
graph @g(%x: f32[3]) {
  %y = remat.Gelu(%x) : f32[3] bwd
  return %y
}
)");
  CHECK(opTypes(model) == std::vector<std::string>{"Constant", "Div", "Erf",
                                                   "Constant", "Add",
                                                   "Constant", "Mul", "Mul"});
  std::vector<std::string> outputs;
  for (const pb::NodeProto &node : model.graph().node()) {
    outputs.push_back(node.output(0));
    // The decomposition keeps the Gelu's stage, on every node.
    CHECK(node.doc_string() == "stage=bwd");
    CHECK(node.domain() == "");
    CHECK(node.name() == node.output(0));
  }
  CHECK(outputs == std::vector<std::string>{
                       "y.gelu.sqrt2", "y.gelu.div", "y.gelu.erf", "y.gelu.one",
                       "y.gelu.one_plus", "y.gelu.half", "y.gelu.half_x", "y"});
  const pb::NodeProto &div = model.graph().node(1);
  CHECK(div.input(0) == "x");
  CHECK(div.input(1) == "y.gelu.sqrt2");
  const pb::NodeProto &last = model.graph().node(7);
  CHECK(last.input(0) == "y.gelu.half_x");
  CHECK(last.input(1) == "y.gelu.one_plus");

  // Constants are scalars of x's dtype.
  const pb::NodeProto *sqrt2 = findNode(model, "y.gelu.sqrt2");
  REQUIRE(sqrt2);
  TensorDataPtr value = tensorFromProto(findAttr(*sqrt2, "value")->t());
  CHECK(value->getType() == TensorType(DType::F32, {}));
  CHECK(value->getDouble(0) == doctest::Approx(std::sqrt(2.0)));

  // Intermediates are typed; y is an output, declared only there.
  REQUIRE(findValueInfo(model, "y.gelu.erf"));
  CHECK(typeText(*findValueInfo(model, "y.gelu.erf")) == "f32[3]");
  CHECK(typeText(*findValueInfo(model, "y.gelu.half")) == "f32[]");
  CHECK(findValueInfo(model, "y") == nullptr);
  CHECK(names(model.graph().output()) == std::vector<std::string>{"y"});
}

TEST_CASE("remat.Gelu 'tanh' becomes the tanh approximation") {
  pb::ModelProto model = exportText(R"(
graph @g(%x: f64[3]) {
  %t = remat.Gelu(%x) {approximate = "tanh"} : f64[3]
  %u = Neg(%t) : f64[3]
  return %u
}
)");
  CHECK(opTypes(model) ==
        std::vector<std::string>{"Constant", "Pow", "Constant", "Mul", "Add",
                                 "Constant", "Mul", "Tanh", "Constant", "Add",
                                 "Constant", "Mul", "Mul", "Neg"});
  const pb::NodeProto *coefficient = findNode(model, "t.gelu.coef");
  REQUIRE(coefficient);
  TensorDataPtr value = tensorFromProto(findAttr(*coefficient, "value")->t());
  CHECK(value->getType() == TensorType(DType::F64, {}));
  CHECK(value->getDouble(0) == 0.044715);
  const pb::NodeProto *scale = findNode(model, "t.gelu.sqrt_2_over_pi");
  REQUIRE(scale);
  CHECK(tensorFromProto(findAttr(*scale, "value")->t())->getDouble(0) ==
        doctest::Approx(std::sqrt(2.0 / M_PI)).epsilon(1e-15));
  // The final node produces t itself, which Neg still reads.
  CHECK(findNode(model, "t")->op_type() == "Mul");
  CHECK(findNode(model, "u")->input(0) == "t");
  REQUIRE(findValueInfo(model, "t"));
  CHECK(typeText(*findValueInfo(model, "t")) == "f64[3]");
  for (const pb::NodeProto &node : model.graph().node())
    CHECK(node.doc_string() == "");
}

TEST_CASE("Gelu's constants take the operand's dtype") {
  for (const char *dtype : {"f16", "bf16", "f64"}) {
    std::string type = std::string(dtype) + "[2]";
    pb::ModelProto model = exportText("graph @g(%x: " + type +
                                      ") {\n  %y = remat.Gelu(%x) : " + type +
                                      "\n  return %y\n}\n");
    INFO("dtype " << dtype);
    int constants = 0;
    for (const pb::NodeProto &node : model.graph().node()) {
      if (node.op_type() != "Constant")
        continue;
      ++constants;
      TensorDataPtr value = tensorFromProto(findAttr(node, "value")->t());
      CHECK(value->getType() == TensorType(*parseDType(dtype), {}));
    }
    CHECK(constants == 3);
  }
}

TEST_CASE("the Gelu decomposition computes Gelu") {
  for (DType dtype : {DType::F32, DType::F64}) {
    for (const char *approximate : {"none", "tanh"}) {
      std::string type = (dtypeName(dtype) + "[21]").str();
      std::string text = "graph @g(%x: " + type +
                         ") {\n  %y = remat.Gelu(%x) "
                         "{approximate = \"" +
                         approximate + "\"} : " + type + "\n  return %y\n}\n";
      INFO(text);
      auto graph = parse(text);
      std::vector<double> xs;
      for (int i = 0; i < 21; ++i)
        xs.push_back(-5.0 + 0.5 * i);
      TensorDataPtr x = TensorData::fromDoubles(TensorType(dtype, {21}), xs);

      pb::ModelProto model = exportModel(*graph);
      auto values = evaluateModel(model, {{"x", x}});
      REQUIRE(values.count("y"));
      const TensorData &exported = *values["y"];
      // What remat itself computes for the original op.
      auto original =
          runtime::cpu::evaluateNode(graph->getNodes().front(), {x.get()});
      REQUIRE(original);
      const TensorData &expected = *(*original)[0];

      bool useTanh = std::string(approximate) == "tanh";
      double tolerance = dtype == DType::F32 ? 2e-6 : 1e-14;
      for (int i = 0; i < 21; ++i) {
        double reference = geluReference(xs[i], useTanh);
        INFO("x = " << xs[i]);
        CHECK(exported.getDouble(i) ==
              doctest::Approx(reference).epsilon(tolerance).scale(1.0));
        CHECK(exported.getDouble(i) == doctest::Approx(expected.getDouble(i))
                                           .epsilon(tolerance)
                                           .scale(1.0));
      }
    }
  }
}

TEST_CASE("the GeluGrad decomposition computes GeluGrad's bits") {
  for (DType dtype : {DType::F32, DType::F64}) {
    for (const char *approximate : {"none", "tanh"}) {
      std::string type = (dtypeName(dtype) + "[21]").str();
      std::string text = "graph @g(%dy: " + type + ", %x: " + type +
                         ") {\n  %dx = remat.GeluGrad(%dy, %x) "
                         "{approximate = \"" +
                         approximate + "\"} : " + type + "\n  return %dx\n}\n";
      INFO(text);
      auto graph = parse(text);
      std::vector<double> xs, dys;
      for (int i = 0; i < 21; ++i) {
        xs.push_back(-5.0 + 0.5 * i);
        dys.push_back(0.25 * (i % 7) - 0.75);
      }
      TensorDataPtr x = TensorData::fromDoubles(TensorType(dtype, {21}), xs);
      TensorDataPtr dy = TensorData::fromDoubles(TensorType(dtype, {21}), dys);

      pb::ModelProto model = exportModel(*graph);
      for (const auto &node : model.graph().node())
        CHECK(node.domain().empty());
      auto values = evaluateModel(model, {{"dy", dy}, {"x", x}});
      REQUIRE(values.count("dx"));
      const TensorData &exported = *values["dx"];
      auto original = runtime::cpu::evaluateNode(graph->getNodes().front(),
                                                 {dy.get(), x.get()});
      REQUIRE(original);
      const TensorData &fused = *(*original)[0];
      bool useTanh = std::string(approximate) == "tanh";
      for (int i = 0; i < 21; ++i) {
        INFO("x = " << xs[i]);
        // The decomposition is the fused kernel's operations, in order.
        CHECK(exported.getDouble(i) == fused.getDouble(i));
        // And it is the derivative of Gelu (central difference in f64).
        double h = 1e-5;
        double slope = (geluReference(xs[i] + h, useTanh) -
                        geluReference(xs[i] - h, useTanh)) /
                       (2 * h);
        CHECK(fused.getDouble(i) ==
              doctest::Approx(dys[i] * slope).epsilon(1e-5).scale(1.0));
      }
    }
  }
}

TEST_CASE("the SoftmaxCrossEntropyGrad decomposition computes its bits") {
  for (DType dtype : {DType::F32, DType::F64}) {
    for (DType labelType : {DType::I64, DType::I32}) {
      // log_prob [N=2, C=4, d=3]; labels and scale [2, 3]. Label -1 and 4
      // match no class (as Equal in the graph autodiff emitted before).
      std::string f = dtypeName(dtype).str(), l = dtypeName(labelType).str();
      std::string text = "graph @g(%lp: " + f + "[2,4,3], %lab: " + l +
                         "[2,3], %s: " + f +
                         "[2,3]) {\n  %g = remat.SoftmaxCrossEntropyGrad(%lp, "
                         "%lab, %s) : " +
                         f + "[2,4,3]\n  return %g\n}\n";
      INFO(text);
      auto graph = parse(text);
      std::vector<double> lps, scales = {0.5, -1.25, 0.0, 2.0, 1.0, 0.125};
      for (int i = 0; i < 24; ++i)
        lps.push_back(-0.1 - 0.37 * (i % 11));
      std::vector<int64_t> labels = {0, 3, 1, -1, 2, 4};
      TensorDataPtr lp =
          TensorData::fromDoubles(TensorType(dtype, {2, 4, 3}), lps);
      TensorDataPtr lab =
          TensorData::fromInts(TensorType(labelType, {2, 3}), labels);
      TensorDataPtr s =
          TensorData::fromDoubles(TensorType(dtype, {2, 3}), scales);

      pb::ModelProto model = exportModel(*graph);
      for (const auto &node : model.graph().node())
        CHECK(node.domain().empty());
      auto values = evaluateModel(model, {{"lp", lp}, {"lab", lab}, {"s", s}});
      REQUIRE(values.count("g"));
      const TensorData &exported = *values["g"];
      auto original = runtime::cpu::evaluateNode(
          graph->getNodes().front(), {lp.get(), lab.get(), s.get()});
      REQUIRE(original);
      const TensorData &fused = *(*original)[0];
      for (int n = 0; n < 2; ++n)
        for (int c = 0; c < 4; ++c)
          for (int d = 0; d < 3; ++d) {
            int i = (n * 4 + c) * 3 + d, row = n * 3 + d;
            INFO("n " << n << " c " << c << " d " << d);
            // The decomposition is the fused kernel's operations, in order.
            CHECK(exported.getDouble(i) == fused.getDouble(i));
            double expected =
                (std::exp(lps[i]) - (labels[row] == c ? 1.0 : 0.0)) *
                scales[row];
            CHECK(fused.getDouble(i) ==
                  doctest::Approx(expected).epsilon(1e-6).scale(1.0));
          }
    }
  }
}

/// \returns \p count values in [lo, hi) from a fixed sequence.
std::vector<double> sampleValues(int64_t count, uint64_t seed, double lo,
                                 double hi) {
  std::vector<double> values;
  uint64_t state = seed;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    values.push_back(lo + (hi - lo) * double(state >> 11) * 0x1p-53);
  }
  return values;
}

TEST_CASE("the SoftmaxGrad and LayerNormalizationGrad decompositions compute "
          "their bits") {
  // Softmax along the last axis of [2, 7, 37] (the CPU kernel sums four
  // rows together, then three one by one, per thread chunk) and along axis
  // 1 of [2, 5, 3] (columns); LayerNormalization over [37] of 14 rows and
  // over [3, 4].
  struct Case {
    std::string text;
    std::vector<std::pair<std::string, std::vector<int64_t>>> operands;
  };
  for (DType dtype : {DType::F32, DType::F64}) {
    std::string f = dtypeName(dtype).str();
    std::vector<Case> cases = {
        {"graph @g(%dy: " + f + "[2,7,37], %y: " + f +
             "[2,7,37]) {\n  %dx = remat.SoftmaxGrad(%dy, %y) {axis = -1} : " +
             f + "[2,7,37]\n  return %dx\n}\n",
         {{"dy", {2, 7, 37}}, {"y", {2, 7, 37}}}},
        {"graph @g(%dy: " + f + "[2,5,3], %y: " + f +
             "[2,5,3]) {\n  %dx = remat.SoftmaxGrad(%dy, %y) {axis = 1} : " +
             f + "[2,5,3]\n  return %dx\n}\n",
         {{"dy", {2, 5, 3}}, {"y", {2, 5, 3}}}},
        {"graph @g(%dy: " + f + "[2,7,37], %x: " + f + "[2,7,37], %s: " + f +
             "[37], %m: " + f + "[2,7,1], %v: " + f +
             "[2,7,1]) {\n  %dx = remat.LayerNormalizationGrad(%dy, %x, %s, "
             "%m, %v) : " +
             f + "[2,7,37]\n  return %dx\n}\n",
         {{"dy", {2, 7, 37}},
          {"x", {2, 7, 37}},
          {"s", {37}},
          {"m", {2, 7, 1}},
          {"v", {2, 7, 1}}}},
        {"graph @g(%dy: " + f + "[2,3,4], %x: " + f + "[2,3,4], %s: " + f +
             "[3,4], %m: " + f + "[2,1,1], %v: " + f +
             "[2,1,1]) {\n  %dx = remat.LayerNormalizationGrad(%dy, %x, %s, "
             "%m, %v) {axis = 1} : " +
             f + "[2,3,4]\n  return %dx\n}\n",
         {{"dy", {2, 3, 4}},
          {"x", {2, 3, 4}},
          {"s", {3, 4}},
          {"m", {2, 1, 1}},
          {"v", {2, 1, 1}}}},
    };
    for (const Case &c : cases) {
      INFO(c.text);
      auto graph = parse(c.text);
      std::map<std::string, TensorDataPtr> inputs;
      std::vector<const TensorData *> raw;
      uint64_t seed = 1;
      for (const auto &[name, dims] : c.operands) {
        TensorType type(dtype, dims);
        // Softmax's y and InvStdDev positive, as they are.
        bool positive = name == "y" || name == "v";
        auto data = TensorData::fromDoubles(
            type, sampleValues(type.getNumElements(), seed++,
                               positive ? 0.01 : -2.0, positive ? 1.5 : 2.0));
        raw.push_back(data.get());
        inputs[name] = std::move(data);
      }
      pb::ModelProto model = exportModel(*graph);
      for (const auto &node : model.graph().node())
        CHECK(node.domain().empty());
      auto values = evaluateModel(model, inputs);
      REQUIRE(values.count("dx"));
      const TensorData &exported = *values["dx"];
      auto original =
          runtime::cpu::evaluateNode(graph->getNodes().front(), raw);
      REQUIRE(original);
      const TensorData &fused = *(*original)[0];
      REQUIRE(exported.getType() == fused.getType());
      // The decomposition is the fused kernel's operations, in order.
      CHECK(exported.getBytes().size() == fused.getBytes().size());
      CHECK(std::memcmp(exported.getBytes().data(), fused.getBytes().data(),
                        fused.getBytes().size()) == 0);
    }
  }
}

TEST_CASE("the DropoutGrad decomposition computes its bits") {
  for (DType dtype : {DType::F32, DType::F64}) {
    std::string f = dtypeName(dtype).str();
    std::string text = "graph @g(%dy: " + f + "[3,7], %m: bool[3,7], %s: " + f +
                       "[]) {\n  %dx = remat.DropoutGrad(%dy, %m, %s) : " + f +
                       "[3,7]\n  return %dx\n}\n";
    INFO(text);
    auto graph = parse(text);
    std::vector<double> dys = sampleValues(21, 3, -2.0, 2.0);
    dys[0] = 0.0;
    dys[1] = -0.0;
    dys[2] = INFINITY;
    dys[3] = -INFINITY;
    dys[4] = NAN;
    std::vector<int64_t> keep(21);
    for (int i = 0; i < 21; ++i)
      keep[i] = i % 4 != 1;
    TensorDataPtr dy = TensorData::fromDoubles(TensorType(dtype, {3, 7}), dys);
    TensorDataPtr m =
        TensorData::fromInts(TensorType(DType::Bool, {3, 7}), keep);
    TensorDataPtr s = TensorData::fromDoubles(TensorType(dtype, {}), {1 / 0.9});
    pb::ModelProto model = exportModel(*graph);
    for (const auto &node : model.graph().node())
      CHECK(node.domain().empty());
    auto values = evaluateModel(model, {{"dy", dy}, {"m", m}, {"s", s}});
    REQUIRE(values.count("dx"));
    const TensorData &exported = *values["dx"];
    auto original = runtime::cpu::evaluateNode(graph->getNodes().front(),
                                               {dy.get(), m.get(), s.get()});
    REQUIRE(original);
    const TensorData &fused = *(*original)[0];
    REQUIRE(exported.getType() == fused.getType());
    CHECK(std::memcmp(exported.getBytes().data(), fused.getBytes().data(),
                      fused.getBytes().size()) == 0);
  }
}

TEST_CASE("the PermutedMatMul decomposition computes its bits") {
  // Attention's layouts (Q, K transposed, V, the context written back) and
  // a plain row-major one, with matrices over one GEMM tile (M = 300 rows
  // cut in two) so that tiles read the strided operands at offsets; and a
  // column-major op(A) (gathered) in column strips, which remat's own
  // kernel packs once per node, over two K blocks, in one row of tiles and
  // in two (601 rows: 304 and 297) (Note [op(A) packed once per node] in
  // runtime/cpu/PackedSgemm.cpp).
  struct Case {
    const char *text;
    std::vector<std::pair<std::string, std::vector<int64_t>>> operands;
  };
  const Case cases[] = {
      {"graph @g(%q: f32[2,300,3,8], %k: f32[2,20,3,8]) {\n"
       "  %y = remat.PermutedMatMul(%q, %k) {perm_a = [0, 2, 1, 3], perm_b = "
       "[0, 2, 3, 1]} : f32[2,3,300,20]\n  return %y\n}\n",
       {{"q", {2, 300, 3, 8}}, {"k", {2, 20, 3, 8}}}},
      {"graph @g(%p: f32[2,3,7,20], %v: f32[2,20,3,8]) {\n"
       "  %y = remat.PermutedMatMul(%p, %v) {perm_b = [0, 2, 1, 3], perm_y = "
       "[0, 2, 1, 3]} : f32[2,7,3,8]\n  return %y\n}\n",
       {{"p", {2, 3, 7, 20}}, {"v", {2, 20, 3, 8}}}},
      {"graph @g(%a: f32[2,300,3,40], %b: f32[2,3,300,200]) {\n"
       "  %y = remat.PermutedMatMul(%a, %b) {perm_a = [0, 2, 3, 1]} : "
       "f32[2,3,40,200]\n  return %y\n}\n",
       {{"a", {2, 300, 3, 40}}, {"b", {2, 3, 300, 200}}}},
      {"graph @g(%a: f32[1,300,1,601], %b: f32[1,1,300,200]) {\n"
       "  %y = remat.PermutedMatMul(%a, %b) {perm_a = [0, 2, 3, 1]} : "
       "f32[1,1,601,200]\n  return %y\n}\n",
       {{"a", {1, 300, 1, 601}}, {"b", {1, 1, 300, 200}}}},
      {"graph @g(%a: f32[64,17], %b: f32[64,64]) {\n"
       "  %y = remat.PermutedMatMul(%a, %b) {perm_a = [1, 0], perm_b = [1, "
       "0], perm_y = [1, 0]} : f32[64,17]\n  return %y\n}\n",
       {{"a", {64, 17}}, {"b", {64, 64}}}},
      {"graph @g(%a: f64[5,9], %b: f64[6,9]) {\n"
       "  %y = remat.PermutedMatMul(%a, %b) {perm_b = [1, 0]} : f64[5,6]\n"
       "  return %y\n}\n",
       {{"a", {5, 9}}, {"b", {6, 9}}}},
  };
  for (const Case &c : cases) {
    INFO(c.text);
    auto graph = parse(c.text);
    const Node &node = graph->getNodes().front();
    std::map<std::string, TensorDataPtr> inputs;
    std::vector<const TensorData *> raw;
    uint64_t seed = 7;
    for (unsigned i = 0; i < node.getNumOperands(); ++i) {
      const TensorType &type = node.getOperand(i)->getType();
      auto data = TensorData::fromDoubles(
          type, sampleValues(type.getNumElements(), seed++, -1.0, 1.0));
      raw.push_back(data.get());
      inputs[c.operands[i].first] = std::move(data);
    }
    pb::ModelProto model = exportModel(*graph);
    for (const auto &proto : model.graph().node())
      CHECK(proto.domain().empty());
    auto values = evaluateModel(model, inputs);
    REQUIRE(values.count("y"));
    const TensorData &exported = *values["y"];
    auto original = runtime::cpu::evaluateNode(node, raw);
    REQUIRE(original);
    const TensorData &fused = *(*original)[0];
    REQUIRE(exported.getType() == fused.getType());
    // The strided GEMM over the operands as stored gives the bits of the
    // MatMul over their transposed copies.
    CHECK(std::memcmp(exported.getBytes().data(), fused.getBytes().data(),
                      fused.getBytes().size()) == 0);
  }
}

TEST_CASE("decomposition names avoid the graph's names") {
  pb::ModelProto model = exportText(R"(
graph @g(%x: f32[2], %y.gelu.erf: f32[2]) {
  %y.gelu.div = Neg(%x) : f32[2]
  %y = remat.Gelu(%y.gelu.div) : f32[2]
  %z = remat.Gelu(%y.gelu.erf) : f32[2]
  %s = Add(%y, %z) : f32[2]
  return %s
}
)");
  std::set<std::string> outputs;
  for (const pb::NodeProto &node : model.graph().node())
    for (const std::string &output : node.output())
      CHECK_MESSAGE(outputs.insert(output).second, "duplicate " << output);
  CHECK(findNode(model, "y.gelu.div.1"));
  CHECK(findNode(model, "y.gelu.erf.1"));
  CHECK(findNode(model, "y.gelu.div.1")->input(0) == "y.gelu.div");
  CHECK(findNode(model, "z.gelu.div")->input(0) == "y.gelu.erf");
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_CASE("a graph without outputs is an error") {
  Graph graph("empty");
  graph.addInput("x", TensorType(DType::F32, {2}));
  CHECK(exportError(graph) ==
        "cannot export graph 'empty': it has no outputs, and an ONNX graph "
        "needs one");
}

TEST_CASE("an attribute ONNX does not know is an error naming the node") {
  // The .rir example in DESIGN.md writes Dropout's ratio as an attribute; in
  // opset 17 it is an operand.
  auto graph = parse(R"(
graph @g(%x: f32[4]) {
  %y, %m = Dropout(%x) {ratio = 0.1, seed = 7} : f32[4], bool[4]
  return %y
}
)");
  CHECK(exportError(*graph) ==
        "cannot export t.rir:3:3: Dropout '%y': ONNX opset 17 rejects it: "
        "Unrecognized attribute: ratio for operator Dropout");
}

TEST_CASE("an attribute of the wrong kind for ONNX is an error") {
  auto graph = parse(R"(
graph @g(%x: f32[4]) {
  %y = Softmax(%x) {axis = 0, tags = ["a", "b"]} : f32[4]
  return %y
}
)");
  CHECK(exportError(*graph) ==
        "cannot export t.rir:3:3: Softmax '%y': ONNX opset 17 rejects it: "
        "Unrecognized attribute: tags for operator Softmax");
}

TEST_CASE("a type ONNX infers differently is an error") {
  // remat cannot infer ConstantOfShape's shape from a non-constant operand
  // and accepts the declared f32[7]; ONNX knows the result has rank 3.
  auto graph = parse(R"(
graph @g(%x: f32[2,3,4]) {
  %s = Shape(%x) : i64[3]
  %f = ConstantOfShape(%s) {value = dense<f32[1]: [1.0]>} : f32[7]
  return %f
}
)");
  CHECK(exportError(*graph) ==
        "cannot export graph 'g': ONNX rejects the model: "
        "[ShapeInferenceError] (op_type:ConstantOfShape, node name: f): "
        "[ShapeInferenceError] Inferred shape and existing shape differ in "
        "rank: (3) vs (1)");
}

TEST_CASE("a graph that does not verify is an error") {
  auto graph = parse(R"(
graph @g(%x: f32[2]) {
  %b = Relu(%a) : f32[2]
  %a = Neg(%x) : f32[2]
  return %b
}
)");
  CHECK(exportError(*graph) ==
        "cannot export graph 'g': t.rir:3:3: graph @g: operand %a of Relu "
        "'%b' is used before its definition (the schedule is not "
        "topological)");
}

TEST_CASE("metadata keys must be unique") {
  auto graph = parse(kMlp);
  ExportOptions options;
  options.metadata = {{"a", "1"}, {"a", "2"}};
  CHECK(exportError(*graph, options) ==
        "cannot export graph 'mlp': metadata key 'a' is given twice");
  options.metadata = {{"remat.version", "9"}};
  CHECK(exportError(*graph, options) ==
        "cannot export graph 'mlp': metadata key 'remat.version' is given "
        "twice (remat sets it itself)");
}

TEST_CASE("exportOnnxBytes refuses a model over the inline limit") {
  auto graph = parse(kMlp);
  ExportOptions options;
  options.maxInlineBytes = 100;
  std::string message = exportError(*graph, options);
  CHECK(llvm::StringRef(message).startswith("the model of graph 'mlp' is "));
  CHECK(llvm::StringRef(message).endswith(
      "over the 100-byte limit of an inline ONNX model (protobuf's 2 GB); "
      "write it to a file with external data"));
}

//===----------------------------------------------------------------------===//
// Files and external data
//===----------------------------------------------------------------------===//

TEST_CASE("exportOnnxFile writes what exportOnnxBytes returns") {
  auto graph = parse(kMlp);
  TempDir dir;
  std::string path = dir.file("m.onnx");
  requireOk(exportOnnxFile(*graph, path, {}));
  auto bytes = exportOnnxBytes(*graph, {});
  REQUIRE(bytes);
  CHECK(readFile(path) == *bytes);
  // Inline: no data file, no temporaries.
  CHECK(dir.entries() == std::vector<std::string>{"m.onnx"});
}

TEST_CASE("external data: aligned offsets, lengths and contents") {
  auto graph = parse(R"(
graph @ext(%x: f32[3], %a: f32[3] weight = dense<f32[3]: [1.0, 2.0, 3.0]>, %e: f32[0] weight = dense<f32[0]: []>, %b: i64[600] = dense<i64[600]: 7>, %c: u8[5] weight = dense<u8[5]: [1, 2, 3, 4, 5]>) {
  %y = Add(%x, %a) : f32[3]
  return %y, %e, %b, %c
}
)");
  TempDir dir;
  std::string path = dir.file("ext.onnx");
  ExportOptions options;
  options.externalData = true;
  requireOk(exportOnnxFile(*graph, path, options));
  CHECK(dir.entries() == std::vector<std::string>{"ext.onnx", "ext.onnx.data"});

  pb::ModelProto model = parseModel(readFile(path));
  std::string data = readFile(path + ".data");
  const pb::GraphProto &g = model.graph();
  REQUIRE(g.initializer_size() == 4);

  // a: 12 bytes at 0; b: 4800 bytes at 4096; c: 5 bytes at 12288.
  struct Expected {
    const char *name;
    uint64_t offset;
    uint64_t length;
  };
  const Expected expected[] = {
      {"a", 0, 12}, {"b", 4096, 4800}, {"c", 12288, 5}};
  int next = 0;
  for (const pb::TensorProto &tensor : g.initializer()) {
    INFO("initializer " << tensor.name());
    if (tensor.name() == "e") {
      // Empty: inline, with an empty raw_data.
      CHECK(tensor.data_location() == pb::TensorProto::DEFAULT);
      CHECK(tensor.has_raw_data());
      CHECK(tensor.raw_data().empty());
      continue;
    }
    REQUIRE(next < 3);
    const Expected &want = expected[next++];
    CHECK(tensor.name() == want.name);
    CHECK(tensor.data_location() == pb::TensorProto::EXTERNAL);
    CHECK(!tensor.has_raw_data());
    REQUIRE(tensor.external_data_size() == 3);
    CHECK(tensor.external_data(0).key() == "location");
    CHECK(tensor.external_data(0).value() == "ext.onnx.data");
    CHECK(tensor.external_data(1).key() == "offset");
    CHECK(tensor.external_data(1).value() == std::to_string(want.offset));
    CHECK(tensor.external_data(2).key() == "length");
    CHECK(tensor.external_data(2).value() == std::to_string(want.length));
    CHECK(want.offset % kExternalDataAlignment == 0);
    REQUIRE(want.offset + want.length <= data.size());
    CHECK(data.substr(want.offset, want.length) ==
          rawBytes(*graph->lookup(want.name)->getData()));
  }
  CHECK(next == 3);
  // Zero padding between tensors, nothing after the last.
  CHECK(data.size() == 12288 + 5);
  CHECK(data.substr(12, 4096 - 12) == std::string(4096 - 12, '\0'));
  CHECK(data.substr(4096 + 4800, 12288 - 4096 - 4800) ==
        std::string(12288 - 4096 - 4800, '\0'));
  // The weights keep their doc_string.
  CHECK(g.initializer(0).doc_string() == "weight");
  CHECK(g.initializer(2).doc_string() == "");
}

TEST_CASE("external data without initializers writes no data file") {
  auto graph = parse(R"(
graph @g(%x: f32[2]) {
  %y = Neg(%x) : f32[2]
  return %y
}
)");
  TempDir dir;
  ExportOptions options;
  options.externalData = true;
  requireOk(exportOnnxFile(*graph, dir.file("g.onnx"), options));
  CHECK(dir.entries() == std::vector<std::string>{"g.onnx"});
}

TEST_CASE("a model over the inline limit goes to external data") {
  auto graph = parse(kMlp);
  TempDir dir;
  std::string path = dir.file("big.onnx");
  ExportOptions options;
  // Above the model without weight bytes, below it with them (48 bytes of
  // %w and 12 of %c).
  pb::ModelProto inlineModel = exportModel(*graph);
  options.maxInlineBytes = inlineModel.ByteSizeLong() - 40;
  requireOk(exportOnnxFile(*graph, path, options));
  CHECK(dir.entries() == std::vector<std::string>{"big.onnx", "big.onnx.data"});
  pb::ModelProto model = parseModel(readFile(path));
  for (const pb::TensorProto &tensor : model.graph().initializer())
    CHECK(tensor.data_location() == pb::TensorProto::EXTERNAL);

  // Under the limit the same graph stays inline.
  options.maxInlineBytes = kMaxProtobufBytes;
  requireOk(exportOnnxFile(*graph, dir.file("small.onnx"), options));
  CHECK(!llvm::sys::fs::exists(dir.file("small.onnx.data")));
}

TEST_CASE("a failed export leaves no file and keeps the old one") {
  TempDir dir;
  std::string path = dir.file("m.onnx");
  writeFile(path, "old model");
  writeFile(path + ".data", "old data");

  // The graph is rejected before anything is written.
  Graph empty("empty");
  ExportOptions options;
  options.externalData = true;
  CHECK(requireError(exportOnnxFile(empty, path, options)) ==
        "cannot export graph 'empty': it has no outputs, and an ONNX graph "
        "needs one");
  CHECK(readFile(path) == "old model");
  CHECK(readFile(path + ".data") == "old data");
  CHECK(dir.entries() == std::vector<std::string>{"m.onnx", "m.onnx.data"});
}

TEST_CASE("an unwritable path is an error and leaves nothing behind") {
  auto graph = parse(kMlp);
  TempDir dir;
  // A regular file where a directory should be: even root cannot write.
  std::string blocker = dir.file("file");
  writeFile(blocker, "x");
  llvm::SmallString<128> path(blocker);
  llvm::sys::path::append(path, "m.onnx");

  std::string message = requireError(exportOnnxFile(*graph, path, {}));
  CHECK(llvm::StringRef(message).startswith("cannot write '" +
                                            path.str().str() + "': "));

  ExportOptions options;
  options.externalData = true;
  message = requireError(exportOnnxFile(*graph, path, options));
  CHECK(llvm::StringRef(message).startswith("cannot write '" +
                                            path.str().str() + ".data': "));
  CHECK(dir.entries() == std::vector<std::string>{"file"});
}

TEST_CASE("with external data, a model that cannot be written leaves no data "
          "file") {
  auto graph = parse(kMlp);
  TempDir dir;
  // The model path is a directory: the data file's temporary is written
  // first, then removed when the model's cannot be created.
  std::string path = dir.file("m.onnx");
  REQUIRE(!llvm::sys::fs::create_directory(path));
  ExportOptions options;
  options.externalData = true;
  CHECK(requireError(exportOnnxFile(*graph, path, options)) ==
        "cannot write '" + path + "': it is a directory");
  CHECK(dir.entries() == std::vector<std::string>{"m.onnx"});
}

TEST_CASE("external data cannot go to stdout") {
  auto graph = parse(kMlp);
  ExportOptions options;
  options.externalData = true;
  CHECK(requireError(exportOnnxFile(*graph, "-", options)) ==
        "cannot write external data when the model goes to stdout; name an "
        "output file");
}

//===----------------------------------------------------------------------===//
// Determinism
//===----------------------------------------------------------------------===//

TEST_CASE("inline export writes the bytes protobuf would, around the weights") {
  // The exporter writes the model around each weight's bytes instead of
  // copying them into a ModelProto (writeInline). Protobuf must read back a
  // model that it serializes to exactly those bytes: fields in number order,
  // every length right. %w's doc_string (field 12) comes after its raw_data
  // (9); %e is empty; %c is no weight; a Constant keeps its tensor
  // attribute; metadata_props (14) come after the graph (7).
  auto graph = parse(R"(
graph @s(%x: f32[2,4], %w: f32[4,3] weight = dense<f32[4,3]: 0.5>, %e: f32[0] weight = dense<f32[0]: []>, %c: i64[2] = dense<i64[2]: [3, 2]>) {
  %h = MatMul(%x, %w) : f32[2,3]
  %k = Constant() {value = dense<f32[3]: [1.0, 2.0, 3.0]>} : f32[3]
  %a = Add(%h, %k) : f32[2,3]
  %r = Reshape(%a, %c) : f32[3,2]
  return %r, %e
}
)");
  ExportOptions options;
  options.metadata = {{"k", "v"}};
  auto bytes = exportOnnxBytes(*graph, options);
  if (!bytes)
    FAIL("unexpected export error: " << errorToString(bytes.takeError()));
  pb::ModelProto model = parseModel(*bytes);
  REQUIRE(model.graph().initializer_size() == 3);
  CHECK(model.graph().initializer(0).raw_data() ==
        rawBytes(*graph->lookup("w")->getData()));
  CHECK(model.graph().initializer(0).doc_string() == "weight");
  CHECK(model.graph().initializer(1).has_raw_data());
  CHECK(model.metadata_props_size() == 2);
  std::string again;
  {
    google::protobuf::io::StringOutputStream stream(&again);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    REQUIRE(model.SerializeToCodedStream(&coded));
  }
  CHECK(again.size() == bytes->size());
  CHECK(again == *bytes);
}

TEST_CASE("the same graph gives the same bytes") {
  auto graph = parse(R"(
graph @d(%x: f32[2,3], %w: f32[3,3] weight = dense<f32[3,3]: 0.25>) {
  %h = MatMul(%x, %w) : f32[2,3]
  %g = remat.Gelu(%h) {approximate = "tanh"} : f32[2,3]
  %s = Softmax(%g) {axis = -1} : f32[2,3]
  return %s
}
)");
  ExportOptions options;
  options.metadata = {{"k", "v"}};
  auto first = exportOnnxBytes(*graph, options);
  auto second = exportOnnxBytes(*graph, options);
  auto ofClone = exportOnnxBytes(*graph->clone(), options);
  REQUIRE(first);
  REQUIRE(second);
  REQUIRE(ofClone);
  CHECK(*first == *second);
  CHECK(*first == *ofClone);

  TempDir dir;
  options.externalData = true;
  requireOk(exportOnnxFile(*graph, dir.file("a.onnx"), options));
  requireOk(exportOnnxFile(*graph, dir.file("b.onnx"), options));
  CHECK(readFile(dir.file("a.onnx.data")) == readFile(dir.file("b.onnx.data")));
  // The models differ only in the data file's name.
  std::string a = readFile(dir.file("a.onnx"));
  std::string b = readFile(dir.file("b.onnx"));
  CHECK(a.size() == b.size());
  size_t pos = a.find("a.onnx.data");
  REQUIRE(pos != std::string::npos);
  a[pos] = 'b';
  CHECK(a == b);
}
