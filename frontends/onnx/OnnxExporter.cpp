//===- frontends/onnx/OnnxExporter.cpp - Graph -> ONNX ModelProto ---------===//
//
// Export happens in three steps:
//  1. ModelBuilder turns the graph into a ModelProto whose initializers have
//     names, types and dims but no bytes yet, decomposing remat-domain ops;
//     each node is checked against its ONNX opset-17 schema as it is built.
//  2. The whole model is checked as onnx.checker.check_model(full_check=True)
//     would: the checker, then shape inference in strict mode with type
//     checks, which compares every declared type (graph inputs, outputs and
//     value_info) with what ONNX infers. It runs on a copy in which the
//     initializers are declared as graph inputs, so no weight bytes are
//     copied and the check costs the same for a 1 KB or a 5 GB model.
//  3. The initializers get their bytes: inline, or as references into a data
//     file that is written next to the model (Note [ONNX export conventions]
//     in the header). Either way the bytes stream from the graph's
//     TensorData to the file: inline, the model is written around them
//     (writeInline), so that no ModelProto or string holds a second copy of
//     the weights.
//
// Protobuf and ONNX throw; every call into them that can is wrapped here and
// turned into an llvm::Error.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxExporter.h"

#include "frontends/onnx/OnnxTensor.h"
#include "ir/OutputFile.h"

#include "ir/Support.h"
#include "ir/UpdateName.h"
#include "ir/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <exception>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#ifndef REMAT_VERSION_STRING
#error "REMAT_VERSION_STRING must be defined by the build"
#endif

namespace remat::onnx_frontend {
namespace {

namespace pb = ::ONNX_NAMESPACE;

using ir::AttrValue;
using ir::DType;
using ir::TensorType;
using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

/// \returns the first line of \p message: ONNX appends "==> Context: ..."
/// paragraphs that repeat the node in protobuf text format.
std::string firstLine(StringRef message) {
  return message.split('\n').first.rtrim().str();
}

/// \returns the NodeProto.doc_string that records \p stage, or "" for
/// forward nodes (Note [ONNX export conventions]).
StringRef stageDocString(ir::Stage stage) {
  switch (stage) {
  case ir::Stage::Forward:
    return "";
  case ir::Stage::Backward:
    return "stage=bwd";
  case ir::Stage::Recompute:
    return "stage=remat";
  }
  llvm_unreachable("unknown stage");
}

/// Sets \p proto to a static-shaped tensor type \p type.
void setTensorType(pb::TypeProto &proto, const TensorType &type) {
  pb::TypeProto_Tensor *tensor = proto.mutable_tensor_type();
  tensor->set_elem_type(ir::onnxCode(type.getDType()));
  // A rank-0 shape must be present and empty: no shape means unknown rank.
  pb::TensorShapeProto *shape = tensor->mutable_shape();
  for (int64_t dim : type.getDims())
    shape->add_dim()->set_dim_value(dim);
}

/// Sets name, data type and dims of \p proto from \p type (no data).
void setTensorHeader(pb::TensorProto &proto, StringRef name,
                     const TensorType &type) {
  if (!name.empty())
    proto.set_name(name.str());
  for (int64_t dim : type.getDims())
    proto.add_dims(dim);
  proto.set_data_type(ir::onnxCode(type.getDType()));
}

/// Sets \p proto to \p data with its bytes inline in raw_data (which is
/// little-endian in ONNX, as TensorData is).
void setTensor(pb::TensorProto &proto, StringRef name,
               const ir::TensorData &data) {
  tensorToProto(data, name, proto);
}

/// Sets \p proto to attribute \p name with value \p value, mapping each
/// AttrValue kind to its AttributeProto type.
void setAttribute(pb::AttributeProto &proto, StringRef name,
                  const AttrValue &value) {
  proto.set_name(name.str());
  std::visit(
      [&](const auto &v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          proto.set_type(pb::AttributeProto::INT);
          proto.set_i(v);
        } else if constexpr (std::is_same_v<T, float>) {
          proto.set_type(pb::AttributeProto::FLOAT);
          proto.set_f(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          proto.set_type(pb::AttributeProto::STRING);
          proto.set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          proto.set_type(pb::AttributeProto::INTS);
          for (int64_t element : v)
            proto.add_ints(element);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          proto.set_type(pb::AttributeProto::FLOATS);
          for (float element : v)
            proto.add_floats(element);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          proto.set_type(pb::AttributeProto::STRINGS);
          for (const std::string &element : v)
            proto.add_strings(element);
        } else {
          static_assert(std::is_same_v<T, ir::TensorDataPtr>,
                        "unhandled attribute kind");
          assert(v && "tensor attribute holds no data");
          proto.set_type(pb::AttributeProto::TENSOR);
          setTensor(*proto.mutable_t(), "", *v);
        }
      },
      value);
}

/// \returns the bytes \p model serializes to, deterministically (the same
/// model always gives the same bytes), or an error when it is larger than
/// \p maxBytes. \p what names the model in messages.
Expected<std::string> serialize(const pb::ModelProto &model, uint64_t maxBytes,
                                const Twine &what) {
  uint64_t size = model.ByteSizeLong();
  if (size > maxBytes || size > kMaxProtobufBytes)
    return makeError(what + " is " + Twine(size) + " bytes, over the " +
                     Twine(std::min(maxBytes, kMaxProtobufBytes)) +
                     "-byte limit of an inline ONNX model (protobuf's 2 GB); "
                     "write it to a file with external data");
  std::string bytes;
  bytes.reserve(size);
  bool ok;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    ok = model.SerializePartialToCodedStream(&coded) && !coded.HadError();
  }
  if (!ok)
    return makeError("cannot serialize " + what);
  return bytes;
}

//===----------------------------------------------------------------------===//
// ModelBuilder
//===----------------------------------------------------------------------===//

/// Builds the ModelProto of one graph with initializers that have no bytes
/// yet; the caller inlines them or points them into a data file.
class ModelBuilder {
public:
  ModelBuilder(const ir::Graph &graph, const ExportOptions &options)
      : graph_(graph), options_(options) {}

  /// Builds and checks the model.
  Error build();

  pb::ModelProto &getModel() { return model_; }
  /// The graph input behind each initializer of the model, in order.
  ArrayRef<const ir::Value *> getInitializerValues() const {
    return initializerValues_;
  }

  /// \returns an upper bound of the serialized size once every initializer
  /// holds its bytes inline.
  uint64_t estimateInlineBytes() const;
  /// \returns a lower bound of the same: the model plus the bytes alone.
  uint64_t minimumInlineBytes() const;

private:
  /// The GraphProto's name: the graph's, or "main" (ONNX requires one).
  std::string getGraphName() const {
    return graph_.getName().empty() ? "main" : graph_.getName().str();
  }
  /// "graph 'name'" for messages.
  std::string describeGraph() const { return "graph '" + getGraphName() + "'"; }

  Error checkGraph() const;
  Error buildHeader();
  void buildInputs();
  Error emitNode(const ir::Node &node);
  void buildOutputs();

  /// Decomposes remat.Gelu into Div/Erf or Pow/Tanh, Add and Mul.
  Error lowerGelu(const ir::Node &node);
  /// Decomposes remat.GeluGrad into the Erf/Exp or Tanh arithmetic that
  /// its kernels compute.
  Error lowerGeluGrad(const ir::Node &node);
  /// Decomposes remat.SoftmaxCrossEntropyGrad into the Exp, Equal, Where,
  /// Sub and Mul nodes whose operations its kernels compute.
  Error lowerSoftmaxCrossEntropyGrad(const ir::Node &node);
  /// Decomposes remat.SoftmaxGrad into Mul, ReduceSum, Sub and Mul.
  Error lowerSoftmaxGrad(const ir::Node &node);
  /// Decomposes remat.LayerNormalizationGrad into the Sub, Mul and
  /// ReduceMean nodes whose operations its kernels compute.
  Error lowerLayerNormalizationGrad(const ir::Node &node);
  /// Decomposes remat.DropoutGrad into Cast, Mul and Mul.
  Error lowerDropoutGrad(const ir::Node &node);
  /// Decomposes remat.PermutedMatMul into Transpose, MatMul, Transpose.
  Error lowerPermutedMatMul(const ir::Node &node);
  /// \returns a checked axis attribute of \p node for a rank-\p rank
  /// tensor, in [0, rank), or an error naming the node.
  Expected<int64_t> exportAxis(const ir::Node &node, unsigned rank) const;

  /// The nodes that replace one remat-domain node \p node: each result is
  /// named \p base + "." + part (made fresh) and declared in value_info; the
  /// last node (empty part) writes the node's result itself (declared unless
  /// it is a graph output). The first checkNode error is kept for finish().
  class Decomposition {
  public:
    Decomposition(ModelBuilder &builder, const ir::Node &node, StringRef base)
        : builder_(builder), node_(node), base_(base.str()) {}
    /// Appends one node; \returns its result's name.
    std::string add(StringRef opType, StringRef part,
                    ArrayRef<std::string> inputs, const TensorType &type,
                    const ir::AttrList &attrs = {});
    /// The first error of the added nodes, if any.
    Error finish() {
      return failure_.empty() ? Error::success() : makeError(failure_);
    }

  private:
    ModelBuilder &builder_;
    const ir::Node &node_;
    std::string base_;
    std::string failure_;
  };

  /// Appends a node of \p opType with \p inputs and one result \p output,
  /// named after the result and tagged with \p origin's stage.
  pb::NodeProto &addNode(const ir::Node &origin, StringRef opType,
                         ArrayRef<std::string> inputs, StringRef output);
  /// addNode with \p attrs, then checkNode; the first error is kept in
  /// \p failure (a decomposition reports one error, after adding all its
  /// nodes).
  void addCheckedNode(const ir::Node &origin, StringRef opType,
                      ArrayRef<std::string> inputs, StringRef output,
                      std::string &failure, const ir::AttrList &attrs = {});
  /// Appends a Constant node holding scalar \p value of \p dtype whose
  /// result is a fresh name derived from \p base; \returns that name.
  std::string addScalarConstant(const ir::Node &origin, StringRef base,
                                DType dtype, double value);
  /// As addScalarConstant, for a tensor of \p type holding \p values.
  std::string addConstant(const ir::Node &origin, StringRef base,
                          const TensorType &type, ArrayRef<double> values);
  /// \returns \p base if no value of the graph and no name made up so far
  /// has it, else \p base + "." + N for the smallest free N >= 1.
  std::string freshName(StringRef base);
  /// Declares \p name of type \p type in value_info.
  void addValueInfo(StringRef name, const TensorType &type);
  /// Checks \p proto against its ONNX opset-17 schema (attribute names and
  /// kinds, operand and result counts). \p origin is the remat node it comes
  /// from, named in the message.
  Error checkNode(const ir::Node &origin, const pb::NodeProto &proto) const;
  /// Runs the ONNX checker and strict shape inference on the model.
  Error checkModel() const;

  const ir::Graph &graph_;
  const ExportOptions &options_;
  pb::ModelProto model_;
  pb::GraphProto *graphProto_ = nullptr;
  std::vector<const ir::Value *> initializerValues_;
  /// Names made up for the nodes of decompositions.
  llvm::StringSet<> freshNames_;
};

Error ModelBuilder::build() {
  if (auto err = checkGraph())
    return err;
  if (auto err = buildHeader())
    return err;
  graphProto_ = model_.mutable_graph();
  graphProto_->set_name(getGraphName());
  buildInputs();
  for (const ir::Node &node : graph_.getNodes())
    if (auto err = emitNode(node))
      return err;
  buildOutputs();
  return checkModel();
}

Error ModelBuilder::checkGraph() const {
  if (graph_.getOutputs().empty())
    return makeError("cannot export " + describeGraph() +
                     ": it has no outputs, and an ONNX graph needs one");
  // The exporter relies on the schedule being topological and names being
  // unique; a graph that breaks either would make an invalid model.
  if (auto err = ir::verify(graph_))
    return makeError("cannot export " + describeGraph() + ": " +
                     errorToString(std::move(err)));
  return Error::success();
}

Error ModelBuilder::buildHeader() {
  model_.set_ir_version(kExportIrVersion);
  pb::OperatorSetIdProto *opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(kExportOpsetVersion);
  model_.set_producer_name("remat");
  model_.set_producer_version(REMAT_VERSION_STRING);

  llvm::StringSet<> keys;
  auto addMetadata = [&](StringRef key, StringRef value) -> Error {
    if (!keys.insert(key).second)
      return makeError(
          "cannot export " + describeGraph() + ": metadata key '" + key +
          "' is given twice" +
          (key == "remat.version" ? " (remat sets it itself)" : ""));
    pb::StringStringEntryProto *entry = model_.add_metadata_props();
    entry->set_key(key.str());
    entry->set_value(value.str());
    return Error::success();
  };
  if (auto err = addMetadata("remat.version", REMAT_VERSION_STRING))
    return err;
  for (const auto &[key, value] : options_.metadata)
    if (auto err = addMetadata(key, value))
      return err;
  return Error::success();
}

void ModelBuilder::buildInputs() {
  // Inputs the step writes over (an output `<input>_new`: weights and
  // optimizer state under the optimizer pass) are listed as inputs even
  // with initial contents, so that a runtime can feed the current values
  // and get the new ones.
  llvm::SmallPtrSet<const ir::Value *, 16> updated;
  for (const ir::Value *output : graph_.getOutputs())
    if (const ir::Value *input = ir::getUpdatedInput(output))
      updated.insert(input);
  for (const ir::Value *input : graph_.getInputs()) {
    if (input->getData()) {
      // Initial contents make it an initializer (a constant when not listed
      // among the inputs, which IR version >= 4 allows); bytes come later.
      pb::TensorProto *tensor = graphProto_->add_initializer();
      setTensorHeader(*tensor, input->getName(), input->getType());
      if (input->isWeight())
        tensor->set_doc_string("weight");
      initializerValues_.push_back(input);
      if (!updated.count(input))
        continue;
    }
    // No data: the caller feeds it. A weight without data is still declared,
    // as an input, so that the model is complete.
    pb::ValueInfoProto *info = graphProto_->add_input();
    info->set_name(input->getName().str());
    setTensorType(*info->mutable_type(), input->getType());
    if (input->isWeight())
      info->set_doc_string("weight");
  }
}

Error ModelBuilder::emitNode(const ir::Node &node) {
  const ir::OpInfo &info = node.getOpInfo();
  if (!info.domain.empty()) {
    switch (node.getOp()) {
    case ir::OpKind::Gelu:
      return lowerGelu(node);
    case ir::OpKind::GeluGrad:
      return lowerGeluGrad(node);
    case ir::OpKind::SoftmaxCrossEntropyGrad:
      return lowerSoftmaxCrossEntropyGrad(node);
    case ir::OpKind::SoftmaxGrad:
      return lowerSoftmaxGrad(node);
    case ir::OpKind::LayerNormalizationGrad:
      return lowerLayerNormalizationGrad(node);
    case ir::OpKind::PermutedMatMul:
      return lowerPermutedMatMul(node);
    case ir::OpKind::DropoutGrad:
      return lowerDropoutGrad(node);
    default:
      return makeError("cannot export " + node.describe() +
                       ": no decomposition of " + node.getOpSpelling() +
                       " into ONNX opset " + Twine(kExportOpsetVersion));
    }
  }

  // Pad's axes operand (opset 18) and mode "wrap" (opset 19) have no
  // opset-17 form.
  if (node.getOp() == ir::OpKind::Pad &&
      (node.getNumOperands() > 3 ||
       node.getAttrs().getString("mode").value_or("constant") == "wrap"))
    return makeError("cannot export " + node.describe() + ": ONNX opset " +
                     Twine(kExportOpsetVersion) +
                     "'s Pad has no axes operand and no mode \"wrap\"");

  pb::NodeProto *proto = graphProto_->add_node();
  proto->set_name(node.getResult(0)->getName().str());
  proto->set_op_type(info.name.str());
  for (const ir::Value *operand : node.getOperands())
    proto->add_input(operand->getName().str());
  for (const ir::Value *result : node.getResults())
    proto->add_output(result->getName().str());
  for (const auto &[name, value] : node.getAttrs().entries())
    setAttribute(*proto->add_attribute(), name, value);
  StringRef stage = stageDocString(node.getStage());
  if (!stage.empty())
    proto->set_doc_string(stage.str());
  if (auto err = checkNode(node, *proto))
    return err;

  for (const ir::Value *result : node.getResults())
    if (!result->isGraphOutput())
      addValueInfo(result->getName(), result->getType());
  return Error::success();
}

void ModelBuilder::buildOutputs() {
  for (const ir::Value *output : graph_.getOutputs()) {
    pb::ValueInfoProto *info = graphProto_->add_output();
    info->set_name(output->getName().str());
    setTensorType(*info->mutable_type(), output->getType());
  }
}

Error ModelBuilder::lowerGelu(const ir::Node &node) {
  // ONNX opset 20 defines Gelu by these function bodies; opset 17 has every
  // op in them:
  //   none: y = (x * 0.5) * (Erf(x / sqrt(2)) + 1)
  //   tanh: y = (x * 0.5) * (Tanh((x + x^3 * 0.044715) * sqrt(2/pi)) + 1)
  // Constants are scalars of x's dtype, broadcast by the elementwise ops.
  const ir::Value *x = node.getOperand(0);
  const ir::Value *y = node.getResult(0);
  const TensorType &type = y->getType();
  DType dtype = type.getDType();
  if (!ir::isFloat(dtype))
    return makeError("cannot export " + node.describe() +
                     ": Gelu needs a float dtype, got " + type.str());
  for (const auto &entry : node.getAttrs().entries())
    if (entry.first != "approximate")
      return makeError("cannot export " + node.describe() + ": attribute '" +
                       entry.first + "' is not one of Gelu's");
  std::string approximate = "none";
  if (node.getAttrs().has("approximate")) {
    auto given = node.getAttrs().getString("approximate");
    if (!given)
      return makeError("cannot export " + node.describe() +
                       ": attribute 'approximate' must be a string");
    approximate = *given;
  }
  if (approximate != "none" && approximate != "tanh")
    return makeError("cannot export " + node.describe() +
                     ": attribute 'approximate' is \"" + approximate +
                     "\", expected \"none\" or \"tanh\"");

  std::string base = (y->getName() + ".gelu").str();
  std::string xName = x->getName().str();
  // Adds an elementwise node whose result has y's type; an empty \p part
  // means the final node, whose result is y itself.
  auto elementwise =
      [&](StringRef opType, StringRef part,
          ArrayRef<std::string> inputs) -> Expected<std::string> {
    bool isFinal = part.empty();
    std::string output =
        isFinal ? y->getName().str() : freshName((base + "." + part).str());
    pb::NodeProto &proto = addNode(node, opType, inputs, output);
    if (auto err = checkNode(node, proto))
      return std::move(err);
    if (!isFinal || !y->isGraphOutput())
      addValueInfo(output, type);
    return output;
  };

  std::string inner;
  if (approximate == "none") {
    std::string sqrtTwo =
        addScalarConstant(node, base + ".sqrt2", dtype, 1.41421356237309504880);
    auto scaled = elementwise("Div", "div", {xName, sqrtTwo});
    if (!scaled)
      return scaled.takeError();
    auto erf = elementwise("Erf", "erf", {*scaled});
    if (!erf)
      return erf.takeError();
    inner = *erf;
  } else {
    std::string three = addScalarConstant(node, base + ".three", dtype, 3.0);
    auto cube = elementwise("Pow", "cube", {xName, three});
    if (!cube)
      return cube.takeError();
    std::string coefficient =
        addScalarConstant(node, base + ".coef", dtype, 0.044715);
    auto cubeScaled = elementwise("Mul", "cube_scaled", {*cube, coefficient});
    if (!cubeScaled)
      return cubeScaled.takeError();
    auto sum = elementwise("Add", "sum", {xName, *cubeScaled});
    if (!sum)
      return sum.takeError();
    std::string sqrtTwoOverPi = addScalarConstant(
        node, base + ".sqrt_2_over_pi", dtype, 0.79788456080286535588);
    auto argument = elementwise("Mul", "arg", {*sum, sqrtTwoOverPi});
    if (!argument)
      return argument.takeError();
    auto tanh = elementwise("Tanh", "tanh", {*argument});
    if (!tanh)
      return tanh.takeError();
    inner = *tanh;
  }
  std::string one = addScalarConstant(node, base + ".one", dtype, 1.0);
  auto onePlus = elementwise("Add", "one_plus", {inner, one});
  if (!onePlus)
    return onePlus.takeError();
  std::string half = addScalarConstant(node, base + ".half", dtype, 0.5);
  auto halfX = elementwise("Mul", "half_x", {xName, half});
  if (!halfX)
    return halfX.takeError();
  auto result = elementwise("Mul", "", {*halfX, *onePlus});
  if (!result)
    return result.takeError();
  return Error::success();
}

Error ModelBuilder::lowerGeluGrad(const ir::Node &node) {
  const ir::Value *dy = node.getOperand(0);
  const ir::Value *x = node.getOperand(1);
  const ir::Value *dx = node.getResult(0);
  DType dtype = dx->getType().getDType();
  if (!ir::isFloat(dtype))
    return makeError("cannot export " + node.describe() +
                     ": GeluGrad needs a float dtype, got " +
                     dx->getType().str());
  for (const auto &entry : node.getAttrs().entries())
    if (entry.first != "approximate")
      return makeError("cannot export " + node.describe() + ": attribute '" +
                       entry.first + "' is not one of GeluGrad's");
  std::string approximate =
      node.getAttrs().getString("approximate").value_or("none");
  if (approximate != "none" && approximate != "tanh")
    return makeError("cannot export " + node.describe() +
                     ": attribute 'approximate' is \"" + approximate +
                     "\", expected \"none\" or \"tanh\"");

  // The operations of runtime/cpu's GeluGradErfOp / GeluGradTanhOp, in
  // order; every intermediate has x's type, the last node writes dx.
  std::string base = (dx->getName() + ".gelu_grad").str();
  auto constant = [&](StringRef part, double value) {
    return addScalarConstant(node, (base + "." + part).str(), dtype, value);
  };
  std::string failure; // the first checkNode error
  auto op = [&](StringRef opType, StringRef part,
                ArrayRef<std::string> inputs) -> std::string {
    bool isFinal = part.empty();
    std::string output =
        isFinal ? dx->getName().str() : freshName((base + "." + part).str());
    addCheckedNode(node, opType, inputs, output, failure);
    if (!isFinal)
      addValueInfo(output, x->getType());
    else if (!dx->isGraphOutput())
      addValueInfo(output, dx->getType());
    return output;
  };
  std::string xName = x->getName().str();
  std::string half = constant("half", 0.5), one = constant("one", 1.0);
  std::string dydx;
  if (approximate == "none") {
    std::string scaled =
        op("Mul", "scaled", {xName, constant("sqrt_half", M_SQRT1_2)});
    std::string cdf =
        op("Mul", "cdf",
           {half, op("Add", "one_plus", {one, op("Erf", "erf", {scaled})})});
    std::string square = op("Mul", "square", {xName, xName});
    std::string exponent =
        op("Mul", "exponent", {constant("minus_half", -0.5), square});
    std::string pdf = op("Mul", "pdf",
                         {constant("inv_sqrt_2pi", 1 / std::sqrt(2 * M_PI)),
                          op("Exp", "exp", {exponent})});
    dydx = op("Add", "dydx", {cdf, op("Mul", "x_pdf", {xName, pdf})});
  } else {
    std::string c = constant("c", std::sqrt(2 / M_PI));
    std::string square = op("Mul", "square", {xName, xName});
    std::string cube = op("Mul", "cube", {square, xName});
    std::string inner =
        op("Add", "inner",
           {xName, op("Mul", "cube_scaled", {constant("k", 0.044715), cube})});
    std::string t = op("Tanh", "tanh", {op("Mul", "u", {c, inner})});
    std::string du =
        op("Mul", "du",
           {c, op("Add", "du_inner",
                  {one, op("Mul", "square_scaled",
                           {constant("three_k", 3 * 0.044715), square})})});
    std::string sech2 =
        op("Sub", "sech2", {one, op("Mul", "t_squared", {t, t})});
    std::string left =
        op("Mul", "left", {half, op("Add", "one_plus_t", {one, t})});
    std::string right = op(
        "Mul", "right",
        {op("Mul", "half_x", {half, xName}), op("Mul", "slope", {sech2, du})});
    dydx = op("Add", "dydx", {left, right});
  }
  op("Mul", "", {dy->getName().str(), dydx});
  if (!failure.empty())
    return makeError(failure);
  return Error::success();
}

Error ModelBuilder::lowerSoftmaxCrossEntropyGrad(const ir::Node &node) {
  const ir::Value *logProb = node.getOperand(0);
  const ir::Value *labels = node.getOperand(1);
  const ir::Value *scale = node.getOperand(2);
  const ir::Value *grad = node.getResult(0);
  const TensorType &type = logProb->getType();
  DType dtype = type.getDType();
  if (!ir::isFloat(dtype) || type.getRank() < 2)
    return makeError("cannot export " + node.describe() +
                     ": SoftmaxCrossEntropyGrad needs float log_prob of rank "
                     ">= 2, got " +
                     type.str());
  if (!node.getAttrs().entries().empty())
    return makeError("cannot export " + node.describe() +
                     ": SoftmaxCrossEntropyGrad takes no attributes");

  // The graph autodiff emitted before the op existed: prob = Exp(log_prob);
  // onehot = (Unsqueeze(labels, 1) == classes [1, C, 1...]) as 1 or 0;
  // (prob - onehot) * Unsqueeze(scale, 1). Intermediates of log_prob's
  // shape have its type (the comparison is bool); the last node writes the
  // gradient.
  std::string base = (grad->getName() + ".xent_grad").str();
  Decomposition d(*this, node, base);
  int64_t classes = type.getDim(1);
  std::vector<int64_t> classDims(type.getRank(), 1);
  classDims[1] = classes;
  std::vector<double> classValues(classes);
  std::iota(classValues.begin(), classValues.end(), 0.0);
  DType labelType = labels->getType().getDType();
  std::string classConstant = addConstant(
      node, base + ".classes", TensorType(labelType, classDims), classValues);
  std::string axis =
      addConstant(node, base + ".axis", TensorType(DType::I64, {1}), {1.0});
  // [N, d...] with 1 inserted at axis 1.
  std::vector<int64_t> columnDims(type.getDims().begin(), type.getDims().end());
  columnDims[1] = 1;
  std::string column =
      d.add("Unsqueeze", "labels", {labels->getName().str(), axis},
            TensorType(labelType, columnDims));
  std::string isLabel = d.add("Equal", "is_label", {column, classConstant},
                              TensorType(DType::Bool, type.getDims()));
  std::string onehot =
      d.add("Where", "onehot",
            {isLabel, addScalarConstant(node, base + ".one", dtype, 1.0),
             addScalarConstant(node, base + ".zero", dtype, 0.0)},
            type);
  std::string prob = d.add("Exp", "prob", {logProb->getName().str()}, type);
  std::string diff = d.add("Sub", "diff", {prob, onehot}, type);
  std::string scaleColumn =
      d.add("Unsqueeze", "scale", {scale->getName().str(), axis},
            TensorType(dtype, columnDims));
  d.add("Mul", "", {diff, scaleColumn}, grad->getType());
  return d.finish();
}

Expected<int64_t> ModelBuilder::exportAxis(const ir::Node &node,
                                           unsigned rank) const {
  for (const auto &entry : node.getAttrs().entries())
    if (entry.first != "axis")
      return makeError("cannot export " + node.describe() + ": attribute '" +
                       entry.first + "' is not one of " + node.getOpSpelling() +
                       "'s");
  int64_t axis = node.getAttrs().getInt("axis").value_or(-1);
  if (axis < -int64_t(rank) || axis >= int64_t(rank))
    return makeError("cannot export " + node.describe() + ": axis " +
                     Twine(axis) + " is outside [-" + Twine(rank) + ", " +
                     Twine(rank) + ")");
  return axis < 0 ? axis + rank : axis;
}

Error ModelBuilder::lowerSoftmaxGrad(const ir::Node &node) {
  const ir::Value *dy = node.getOperand(0);
  const ir::Value *y = node.getOperand(1);
  const ir::Value *dx = node.getResult(0);
  const TensorType &type = dx->getType();
  if (!ir::isFloat(type.getDType()))
    return makeError("cannot export " + node.describe() +
                     ": SoftmaxGrad needs a float dtype, got " + type.str());
  auto axis = exportAxis(node, type.getRank());
  if (!axis)
    return axis.takeError();

  // The graph autodiff emitted before the op existed: dx = y * (dy -
  // ReduceSum(dy * y, axis)), the sum keeping the axis as size 1.
  std::string base = (dx->getName() + ".softmax_grad").str();
  Decomposition d(*this, node, base);
  std::vector<int64_t> sumDims(type.getDims().begin(), type.getDims().end());
  sumDims[*axis] = 1;
  std::string axes = addConstant(node, base + ".axes",
                                 TensorType(DType::I64, {1}), {double(*axis)});
  std::string product =
      d.add("Mul", "product", {dy->getName().str(), y->getName().str()}, type);
  std::string sum = d.add("ReduceSum", "sum", {product, axes},
                          TensorType(type.getDType(), sumDims));
  std::string diff = d.add("Sub", "diff", {dy->getName().str(), sum}, type);
  d.add("Mul", "", {y->getName().str(), diff}, type);
  return d.finish();
}

Error ModelBuilder::lowerLayerNormalizationGrad(const ir::Node &node) {
  const ir::Value *dx = node.getResult(0);
  const TensorType &type = dx->getType();
  if (!ir::isFloat(type.getDType()))
    return makeError("cannot export " + node.describe() +
                     ": LayerNormalizationGrad needs a float dtype, got " +
                     type.str());
  auto axis = exportAxis(node, type.getRank());
  if (!axis)
    return axis.takeError();

  // The graph autodiff emits when the op does not apply: xhat = (X - Mean) *
  // InvStdDev, dxhat = dy * Scale, dx = ((dxhat - ReduceMean(dxhat)) - xhat
  // * ReduceMean(dxhat * xhat)) * InvStdDev, the means over the normalized
  // dims, keeping them as size 1.
  std::string base = (dx->getName() + ".layer_norm_grad").str();
  Decomposition d(*this, node, base);
  auto operand = [&](unsigned i) {
    return node.getOperand(i)->getName().str();
  };
  std::vector<int64_t> meanDims(type.getDims().begin(), type.getDims().end());
  std::vector<int64_t> axes;
  for (int64_t dim = *axis; dim < int64_t(type.getRank()); ++dim) {
    meanDims[dim] = 1;
    axes.push_back(dim);
  }
  TensorType meanType(type.getDType(), meanDims);
  ir::AttrList meanAttrs;
  meanAttrs.set("axes", axes);
  std::string xhat = d.add(
      "Mul", "xhat",
      {d.add("Sub", "centered", {operand(1), operand(3)}, type), operand(4)},
      type);
  std::string dxhat = d.add("Mul", "dxhat", {operand(0), operand(2)}, type);
  std::string m1 = d.add("ReduceMean", "mean", {dxhat}, meanType, meanAttrs);
  std::string m2 = d.add("ReduceMean", "mean_xhat",
                         {d.add("Mul", "dxhat_xhat", {dxhat, xhat}, type)},
                         meanType, meanAttrs);
  std::string inner = d.add("Sub", "inner",
                            {d.add("Sub", "centered_grad", {dxhat, m1}, type),
                             d.add("Mul", "xhat_mean", {xhat, m2}, type)},
                            type);
  d.add("Mul", "", {inner, operand(4)}, type);
  return d.finish();
}

Error ModelBuilder::lowerDropoutGrad(const ir::Node &node) {
  const ir::Value *dx = node.getResult(0);
  const TensorType &type = dx->getType();
  if (!ir::isFloat(type.getDType()))
    return makeError("cannot export " + node.describe() +
                     ": DropoutGrad needs a float dtype, got " + type.str());
  if (!node.getAttrs().entries().empty())
    return makeError("cannot export " + node.describe() +
                     ": DropoutGrad takes no attributes");

  // The graph autodiff emitted before the op existed: (dy * Cast(mask)) *
  // scale.
  std::string base = (dx->getName() + ".dropout_grad").str();
  Decomposition d(*this, node, base);
  ir::AttrList to;
  to.set("to", int64_t(ir::onnxCode(type.getDType())));
  std::string mask =
      d.add("Cast", "mask", {node.getOperand(1)->getName().str()}, type, to);
  std::string masked =
      d.add("Mul", "masked", {node.getOperand(0)->getName().str(), mask}, type);
  d.add("Mul", "", {masked, node.getOperand(2)->getName().str()}, type);
  return d.finish();
}

Error ModelBuilder::lowerPermutedMatMul(const ir::Node &node) {
  const ir::Value *y = node.getResult(0);
  unsigned rank = y->getType().getRank();
  for (const auto &entry : node.getAttrs().entries())
    if (entry.first != "perm_a" && entry.first != "perm_b" &&
        entry.first != "perm_y")
      return makeError("cannot export " + node.describe() + ": attribute '" +
                       entry.first + "' is not one of " + node.getOpSpelling() +
                       "'s");
  auto perm = [&](StringRef name) {
    std::vector<int64_t> identity(rank);
    std::iota(identity.begin(), identity.end(), 0);
    return node.getAttrs().getInts(name).value_or(identity);
  };
  auto isIdentity = [](ArrayRef<int64_t> p) {
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] != int64_t(i))
        return false;
    return true;
  };
  auto permuted = [](const TensorType &type, ArrayRef<int64_t> p) {
    std::vector<int64_t> dims;
    for (int64_t d : p)
      dims.push_back(type.getDim(d));
    return TensorType(type.getDType(), dims);
  };

  // Transpose(MatMul(Transpose(A, perm_a), Transpose(B, perm_b)), perm_y),
  // leaving out the identity transposes.
  std::string base = (y->getName() + ".matmul").str();
  Decomposition d(*this, node, base);
  auto operand = [&](unsigned i, StringRef name, StringRef part) {
    const ir::Value *value = node.getOperand(i);
    std::vector<int64_t> p = perm(name);
    if (isIdentity(p))
      return value->getName().str();
    ir::AttrList attrs;
    attrs.set("perm", p);
    return d.add("Transpose", part, {value->getName().str()},
                 permuted(value->getType(), p), attrs);
  };
  std::string a = operand(0, "perm_a", "a");
  std::string b = operand(1, "perm_b", "b");
  std::vector<int64_t> permY = perm("perm_y");
  if (isIdentity(permY)) {
    d.add("MatMul", "", {a, b}, y->getType());
  } else {
    // The product's dims, from the result's: product[permY[j]] = y[j].
    std::vector<int64_t> dims(rank);
    for (unsigned j = 0; j < rank; ++j)
      dims[permY[j]] = y->getType().getDim(j);
    std::string product =
        d.add("MatMul", "product", {a, b}, y->getType().withDims(dims));
    ir::AttrList attrs;
    attrs.set("perm", permY);
    d.add("Transpose", "", {product}, y->getType(), attrs);
  }
  return d.finish();
}

pb::NodeProto &ModelBuilder::addNode(const ir::Node &origin, StringRef opType,
                                     ArrayRef<std::string> inputs,
                                     StringRef output) {
  pb::NodeProto *proto = graphProto_->add_node();
  proto->set_name(output.str());
  proto->set_op_type(opType.str());
  for (const std::string &input : inputs)
    proto->add_input(input);
  proto->add_output(output.str());
  StringRef stage = stageDocString(origin.getStage());
  if (!stage.empty())
    proto->set_doc_string(stage.str());
  return *proto;
}

void ModelBuilder::addCheckedNode(const ir::Node &origin, StringRef opType,
                                  ArrayRef<std::string> inputs,
                                  StringRef output, std::string &failure,
                                  const ir::AttrList &attrs) {
  pb::NodeProto &proto = addNode(origin, opType, inputs, output);
  for (const auto &[name, value] : attrs.entries())
    setAttribute(*proto.add_attribute(), name, value);
  if (auto err = checkNode(origin, proto)) {
    if (failure.empty())
      failure = llvm::toString(std::move(err));
    else
      llvm::consumeError(std::move(err));
  }
}

std::string ModelBuilder::Decomposition::add(StringRef opType, StringRef part,
                                             ArrayRef<std::string> inputs,
                                             const TensorType &type,
                                             const ir::AttrList &attrs) {
  const ir::Value *result = node_.getResult(0);
  bool isFinal = part.empty();
  std::string output = isFinal ? result->getName().str()
                               : builder_.freshName(base_ + "." + part.str());
  builder_.addCheckedNode(node_, opType, inputs, output, failure_, attrs);
  if (!isFinal || !result->isGraphOutput())
    builder_.addValueInfo(output, type);
  return output;
}

std::string ModelBuilder::addScalarConstant(const ir::Node &origin,
                                            StringRef base, DType dtype,
                                            double value) {
  return addConstant(origin, base, TensorType(dtype, {}), {value});
}

std::string ModelBuilder::addConstant(const ir::Node &origin, StringRef base,
                                      const TensorType &type,
                                      ArrayRef<double> values) {
  std::string name = freshName(base);
  auto data = ir::TensorData::fromDoubles(type, values);
  pb::NodeProto &proto = addNode(origin, "Constant", {}, name);
  setAttribute(*proto.add_attribute(), "value",
               AttrValue(ir::TensorDataPtr(std::move(data))));
  addValueInfo(name, type);
  return name;
}

std::string ModelBuilder::freshName(StringRef base) {
  auto isFree = [&](StringRef name) {
    return !graph_.lookup(name) && !freshNames_.contains(name);
  };
  std::string name = base.str();
  for (unsigned n = 1; !isFree(name); ++n)
    name = (base + "." + Twine(n)).str();
  freshNames_.insert(name);
  return name;
}

void ModelBuilder::addValueInfo(StringRef name, const TensorType &type) {
  pb::ValueInfoProto *info = graphProto_->add_value_info();
  info->set_name(name.str());
  setTensorType(*info->mutable_type(), type);
}

Error ModelBuilder::checkNode(const ir::Node &origin,
                              const pb::NodeProto &proto) const {
  bool isOwn = proto.name() == origin.getResult(0)->getName() &&
               proto.op_type() == origin.getOpInfo().name;
  std::string subject =
      isOwn ? std::string("it")
            : "its " + proto.op_type() + " node '" + proto.name() + "'";
  const pb::OpSchema *schema = pb::OpSchemaRegistry::Schema(
      proto.op_type(), kExportOpsetVersion, proto.domain());
  if (!schema)
    return makeError("cannot export " + origin.describe() + ": ONNX opset " +
                     Twine(kExportOpsetVersion) + " has no op '" +
                     proto.op_type() + "'");
  try {
    schema->Verify(proto);
  } catch (const std::exception &e) {
    return makeError("cannot export " + origin.describe() + ": ONNX opset " +
                     Twine(kExportOpsetVersion) + " rejects " + subject + ": " +
                     firstLine(e.what()));
  }
  return Error::success();
}

Error ModelBuilder::checkModel() const {
  // Checking needs types, not bytes: declare the initializers as inputs.
  pb::ModelProto copy = model_;
  pb::GraphProto *graph = copy.mutable_graph();
  llvm::StringSet<> declared;
  for (const pb::ValueInfoProto &input : graph->input())
    declared.insert(input.name());
  for (const pb::TensorProto &tensor : graph->initializer()) {
    if (declared.count(tensor.name()))
      continue;
    pb::ValueInfoProto *info = graph->add_input();
    info->set_name(tensor.name());
    pb::TypeProto_Tensor *type = info->mutable_type()->mutable_tensor_type();
    type->set_elem_type(tensor.data_type());
    pb::TensorShapeProto *shape = type->mutable_shape();
    for (int64_t dim : tensor.dims())
      shape->add_dim()->set_dim_value(dim);
  }
  graph->clear_initializer();
  try {
    pb::checker::check_model(copy);
    // As check_model(full_check=True): strict, with type checks.
    pb::ShapeInferenceOptions options(/*check_type_val=*/true,
                                      /*strict_mode_val=*/1,
                                      /*data_prop_val=*/false);
    pb::shape_inference::InferShapes(copy, pb::OpSchemaRegistry::Instance(),
                                     options);
  } catch (const std::exception &e) {
    return makeError("cannot export " + describeGraph() +
                     ": ONNX rejects the model: " + firstLine(e.what()));
  }
  return Error::success();
}

uint64_t ModelBuilder::estimateInlineBytes() const {
  // Each raw_data field adds a tag, a length and the bytes; it also lengthens
  // the length prefixes of its tensor and of the graph (at most 10 bytes
  // each for a 64-bit varint).
  uint64_t total = model_.ByteSizeLong() + 10;
  for (const ir::Value *value : initializerValues_)
    total += value->getData()->getBytes().size() + 1 + 10 + 10;
  return total;
}

uint64_t ModelBuilder::minimumInlineBytes() const {
  uint64_t total = model_.ByteSizeLong();
  for (const ir::Value *value : initializerValues_)
    total += value->getData()->getBytes().size();
  return total;
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//


/// Where one initializer's bytes go in the data file.
struct ExternalTensor {
  const ir::TensorData *data;
  uint64_t offset;
};

/// Points every non-empty initializer of \p builder's model into a data file
/// named \p location and \returns the layout; empty ones get an empty
/// raw_data inline.
std::vector<ExternalTensor> externalizeInitializers(ModelBuilder &builder,
                                                    StringRef location) {
  std::vector<ExternalTensor> layout;
  pb::GraphProto *graph = builder.getModel().mutable_graph();
  uint64_t end = 0;
  ArrayRef<const ir::Value *> values = builder.getInitializerValues();
  for (size_t i = 0; i < values.size(); ++i) {
    pb::TensorProto *tensor = graph->mutable_initializer(i);
    const ir::TensorData &data = *values[i]->getData();
    uint64_t length = data.getBytes().size();
    if (length == 0) {
      tensor->set_raw_data("");
      continue;
    }
    uint64_t offset = llvm::alignTo(end, kExternalDataAlignment);
    tensor->set_data_location(pb::TensorProto::EXTERNAL);
    auto addEntry = [&](StringRef key, const std::string &entryValue) {
      pb::StringStringEntryProto *entry = tensor->add_external_data();
      entry->set_key(key.str());
      entry->set_value(entryValue);
    };
    addEntry("location", location.str());
    addEntry("offset", std::to_string(offset));
    addEntry("length", std::to_string(length));
    layout.push_back({&data, offset});
    end = offset + length;
  }
  return layout;
}

/// Protobuf's wire format, for the parts of a model written around it.
namespace wire {

constexpr int kLengthDelimited = 2;

uint64_t varintSize(uint64_t value) {
  uint64_t size = 1;
  for (; value >= 0x80; value >>= 7)
    ++size;
  return size;
}

void writeVarint(llvm::raw_ostream &os, uint64_t value) {
  for (; value >= 0x80; value >>= 7)
    os << char(uint8_t(value) | 0x80);
  os << char(value);
}

/// The bytes of a length-delimited field \p number holding \p length bytes,
/// before those bytes.
uint64_t fieldHeaderSize(int number, uint64_t length) {
  return varintSize(uint64_t(number) << 3 | kLengthDelimited) +
         varintSize(length);
}

void writeFieldHeader(llvm::raw_ostream &os, int number, uint64_t length) {
  writeVarint(os, uint64_t(number) << 3 | kLengthDelimited);
  writeVarint(os, length);
}

} // namespace wire

/// A message with one length-delimited field cut out: the bytes of its
/// fields numbered below the cut and above it. Protobuf writes the known
/// fields of a message in field-number order (unknown fields last), so the
/// message with the cut field set serializes to head + that field + tail.
struct SplitMessage {
  std::string head, tail;
};

/// Splits \p message around field \p number (whose value is dropped).
Expected<SplitMessage> splitAround(const google::protobuf::Message &message,
                                   int number, const Twine &what) {
  const google::protobuf::Descriptor *descriptor = message.GetDescriptor();
  const google::protobuf::Reflection *reflection = message.GetReflection();
  std::unique_ptr<google::protobuf::Message> head(message.New());
  std::unique_ptr<google::protobuf::Message> tail(message.New());
  head->CopyFrom(message);
  tail->CopyFrom(message);
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor *field = descriptor->field(i);
    if (field->number() >= number)
      reflection->ClearField(head.get(), field);
    if (field->number() <= number)
      reflection->ClearField(tail.get(), field);
  }
  reflection->MutableUnknownFields(head.get())->Clear();
  SplitMessage split;
  for (auto [part, bytes] : {std::pair(head.get(), &split.head),
                             std::pair(tail.get(), &split.tail)}) {
    google::protobuf::io::StringOutputStream stream(bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!part->SerializePartialToCodedStream(&coded) || coded.HadError())
      return makeError("cannot serialize " + what);
  }
  return split;
}

/// Writes the model of \p builder with every initializer's bytes inline,
/// byte for byte what serializing that model would give, without building
/// it: the bytes go from each TensorData straight to \p os, so that the
/// weights are not held a second (ModelProto) and third (serialized) time.
/// The model is larger than \p maxBytes is an error, before anything is
/// written.
Error writeInline(ModelBuilder &builder, llvm::raw_ostream &os,
                  uint64_t maxBytes) {
  // Field numbers of onnx.proto: ModelProto.graph, GraphProto.initializer,
  // TensorProto.raw_data.
  constexpr int kModelGraph = pb::ModelProto::kGraphFieldNumber;
  constexpr int kGraphInitializer = pb::GraphProto::kInitializerFieldNumber;
  constexpr int kTensorRawData = pb::TensorProto::kRawDataFieldNumber;
  const pb::ModelProto &model = builder.getModel();
  const pb::GraphProto &graph = model.graph();
  std::string what = "the model of graph '" + graph.name() + "'";
  ArrayRef<const ir::Value *> values = builder.getInitializerValues();
  assert(size_t(graph.initializer_size()) == values.size() &&
         "one initializer per value with data");

  auto modelSplit = splitAround(model, kModelGraph, what);
  if (!modelSplit)
    return modelSplit.takeError();
  auto graphSplit = splitAround(graph, kGraphInitializer, what);
  if (!graphSplit)
    return graphSplit.takeError();
  std::vector<SplitMessage> tensorSplits;
  std::vector<uint64_t> tensorSizes;
  uint64_t graphSize = graphSplit->head.size() + graphSplit->tail.size();
  for (size_t i = 0; i < values.size(); ++i) {
    auto split = splitAround(graph.initializer(int(i)), kTensorRawData, what);
    if (!split)
      return split.takeError();
    uint64_t rawSize = values[i]->getData()->getBytes().size();
    uint64_t size = split->head.size() +
                    wire::fieldHeaderSize(kTensorRawData, rawSize) + rawSize +
                    split->tail.size();
    graphSize += wire::fieldHeaderSize(kGraphInitializer, size) + size;
    tensorSplits.push_back(std::move(*split));
    tensorSizes.push_back(size);
  }
  uint64_t modelSize = modelSplit->head.size() +
                       wire::fieldHeaderSize(kModelGraph, graphSize) +
                       graphSize + modelSplit->tail.size();
  if (modelSize > maxBytes || modelSize > kMaxProtobufBytes)
    return makeError(what + " is " + Twine(modelSize) + " bytes, over the " +
                     Twine(std::min(maxBytes, kMaxProtobufBytes)) +
                     "-byte limit of an inline ONNX model (protobuf's 2 GB); "
                     "write it to a file with external data");

  os << modelSplit->head;
  wire::writeFieldHeader(os, kModelGraph, graphSize);
  os << graphSplit->head;
  for (size_t i = 0; i < values.size(); ++i) {
    ArrayRef<uint8_t> bytes = values[i]->getData()->getBytes();
    wire::writeFieldHeader(os, kGraphInitializer, tensorSizes[i]);
    os << tensorSplits[i].head;
    wire::writeFieldHeader(os, kTensorRawData, bytes.size());
    os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    os << tensorSplits[i].tail;
  }
  os << graphSplit->tail;
  os << modelSplit->tail;
  return Error::success();
}

/// Writes the tensors of \p layout at their offsets, zero-padded between.
void writeExternalData(llvm::raw_ostream &os, ArrayRef<ExternalTensor> layout) {
  static const char zeros[kExternalDataAlignment] = {};
  uint64_t position = 0;
  for (const ExternalTensor &tensor : layout) {
    assert(tensor.offset >= position &&
           tensor.offset - position < kExternalDataAlignment &&
           "layout is not in offset order");
    os.write(zeros, tensor.offset - position);
    ArrayRef<uint8_t> bytes = tensor.data->getBytes();
    os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    position = tensor.offset + bytes.size();
  }
}

/// Writes the model of \p builder to \p path and its initializers to
/// `<path>.data`.
Error writeWithExternalData(ModelBuilder &builder, StringRef path) {
  if (path == "-")
    return makeError("cannot write external data when the model goes to "
                     "stdout; name an output file");
  std::string dataPath = (path + ".data").str();
  std::vector<ExternalTensor> layout =
      externalizeInitializers(builder, llvm::sys::path::filename(dataPath));
  auto bytes =
      serialize(builder.getModel(), kMaxProtobufBytes,
                "the model of graph '" + builder.getModel().graph().name() +
                    "' without its initializers");
  if (!bytes)
    return bytes.takeError();

  // Both files are complete before either is renamed into place. With no
  // tensor to hold (no initializers, or only empty ones) there is no data
  // file.
  std::unique_ptr<PendingFile> data;
  if (!layout.empty()) {
    auto created = PendingFile::create(dataPath);
    if (!created)
      return created.takeError();
    data = std::move(*created);
    writeExternalData(data->os(), layout);
    if (auto err = data->close())
      return err;
  }
  auto model = PendingFile::create(path);
  if (!model)
    return model.takeError();
  (*model)->os() << *bytes;
  if (auto err = (*model)->close())
    return err;
  if (data)
    if (auto err = data->commit())
      return err;
  if (auto err = (*model)->commit()) {
    // A data file without its model is of no use to anyone.
    if (data)
      llvm::sys::fs::remove(dataPath);
    return err;
  }
  return Error::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Public interface
//===----------------------------------------------------------------------===//

Error exportOnnxFile(const ir::Graph &graph, StringRef path,
                     const ExportOptions &options) {
  ModelBuilder builder(graph, options);
  if (auto err = builder.build())
    return err;
  if (options.externalData ||
      builder.estimateInlineBytes() > options.maxInlineBytes)
    return writeWithExternalData(builder, path);

  if (path == "-") {
    if (auto err = writeInline(builder, llvm::outs(), options.maxInlineBytes))
      return err;
    return checkStdout();
  }
  auto file = PendingFile::create(path);
  if (!file)
    return file.takeError();
  if (auto err = writeInline(builder, (*file)->os(), options.maxInlineBytes))
    return err;
  if (auto err = (*file)->close())
    return err;
  return (*file)->commit();
}

Expected<std::string> exportOnnxBytes(const ir::Graph &graph,
                                      const ExportOptions &options) {
  ModelBuilder builder(graph, options);
  if (auto err = builder.build())
    return std::move(err);
  // Fail before copying gigabytes of weights into a model that cannot be.
  uint64_t limit = std::min(options.maxInlineBytes, kMaxProtobufBytes);
  if (uint64_t atLeast = builder.minimumInlineBytes(); atLeast > limit)
    return makeError("the model of graph '" +
                     builder.getModel().graph().name() + "' is at least " +
                     Twine(atLeast) + " bytes, over the " + Twine(limit) +
                     "-byte limit of an inline ONNX model (protobuf's 2 GB); "
                     "write it to a file with external data");
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (auto err = writeInline(builder, os, options.maxInlineBytes))
    return std::move(err);
  os.flush();
  return bytes;
}

} // namespace remat::onnx_frontend
