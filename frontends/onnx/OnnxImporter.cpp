//===- frontends/onnx/OnnxImporter.cpp - ONNX ModelProto -> Graph ---------===//
//
// Import runs in three steps, each of which reports errors naming the file
// and the node, value or dim at fault:
//
//  1. Parse and validate the ModelProto (IR version 7-10, default-domain
//     opset 13-20), inline local functions (ModelProto.functions) into one
//     flat node list and sort it topologically (stably) if it is not.
//  2. Create the graph inputs with their symbolic dims bound, the weights
//     (floating-point initializers, with data) and Constant nodes for the
//     other initializers.
//  3. Convert node by node to remat's opset-17 forms (ReduceMean axes input ->
//     attribute, Split num_outputs -> split operand, Gelu -> remat.Gelu,
//     Flatten -> Reshape, GatherND -> Reshape + Gather (its flat indices
//     computed by nodes when the indices are not constant),
//     CastLike -> Cast, ScatterND with constant indices -> Reshape +
//     ScatterElements, SplitToSequence -> Split (SequenceAt at a constant
//     position picks a piece), Einsum -> Expand, ReduceSum, Transpose,
//     Reshape and MatMul (frontends/onnx/Einsum.h), NonZero of a constant
//     -> Constant, GlobalAveragePool/GlobalMaxPool -> ReduceMean/ReduceMax,
//     BatchNormalization and InstanceNormalization -> their statistics,
//     Sub, Div, Mul and Add, Resize with constant sizes -> a Gather or a
//     MatMul by constant weights per resized axis (frontends/onnx/Resize.h),
//     DFT -> a MatMul by the transform's constant matrix (Dft.h),
//     seeds for Dropout, ...). Every result type comes from ir::inferTypes;
//     a node whose operands are all constants (or a Shape of a static type)
//     is evaluated with ImportOptions::evaluator and replaced by a Constant
//     of the same name, so that shape subgraphs resolve to static shapes.
//     Declared types (value_info, graph outputs) must agree with inference.
//
// libonnx is used for the protobuf classes only: its schemas, checker and
// shape inference stop at opset 17, and remat's own op table decides what is
// supported.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/OnnxImporter.h"

#include "frontends/onnx/Dft.h"
#include "frontends/onnx/Einsum.h"
#include "frontends/onnx/OnnxTensor.h"
#include "frontends/onnx/Resize.h"

#include "ir/GradientName.h"
#include "ir/Hash.h"
#include "ir/ShapeInference.h"
#include "ir/Limits.h"
#include "ir/Support.h"
#include "ir/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <new>
#include <queue>
#include <string>
#include <vector>

using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::SmallVector;
using llvm::StringRef;
using llvm::Twine;

namespace remat::onnx_frontend {

using namespace remat::ir;

namespace {

constexpr int64_t kMinIrVersion = 7;
constexpr int64_t kMaxIrVersion = 10;
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 20;
/// Nodes on constants are evaluated at import when their result is at most
/// this large; larger ones (a constant [seq, seq] mask at a long sequence)
/// stay nodes, whose shapes are still known because their operands are.
constexpr int64_t kMaxFoldBytes = int64_t(16) << 20;
/// Local functions may call each other; deeper nesting is taken as
/// recursion.
constexpr unsigned kMaxFunctionDepth = 64;

/// Field numbers of IR-version 9/10 additions that ONNX 1.12's generated
/// classes do not know; protobuf keeps them as unknown fields.
constexpr int kFunctionAttributeProtoField = 11;
constexpr int kFunctionOverloadField = 13;
constexpr int kNodeOverloadField = 8;

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

bool isDefaultDomain(StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// \returns the domain as messages spell it ("ai.onnx" for the default).
std::string domainName(StringRef domain) {
  return isDefaultDomain(domain) ? "ai.onnx" : domain.str();
}

/// \returns the key of local function \p name of \p domain with
/// \p overload in Importer::functions_: the default domain is "" however
/// the file spells it.
std::string functionKey(StringRef domain, StringRef name,
                        const std::vector<std::string> &overload) {
  return (isDefaultDomain(domain) ? std::string() : domain.str()) + ":" +
         name.str() + ":" + (overload.empty() ? "" : overload.back());
}

/// 64-bit FNV-1a of \p text, masked to a non-negative int64: a seed that is
/// the same on every run and platform.
int64_t stableSeed(StringRef text) {
  return static_cast<int64_t>(ir::fnv1a(text) & 0x7fffffffffffffffULL);
}

/// \returns the payloads of the length-delimited unknown fields numbered
/// \p number of \p message.
std::vector<std::string>
unknownStrings(const google::protobuf::Message &message, int number) {
  std::vector<std::string> result;
  const google::protobuf::UnknownFieldSet &fields =
      message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField &field = fields.field(i);
    if (field.number() == number &&
        field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      result.push_back(field.length_delimited());
  }
  return result;
}

/// Frees the data fields of \p tensor once its contents are copied (clear()
/// would keep their capacity).
void releasePayload(onnx::TensorProto &tensor) {
  std::string().swap(*tensor.mutable_raw_data());
  google::protobuf::RepeatedField<float>().Swap(tensor.mutable_float_data());
  google::protobuf::RepeatedField<double>().Swap(tensor.mutable_double_data());
  google::protobuf::RepeatedField<int32_t>().Swap(tensor.mutable_int32_data());
  google::protobuf::RepeatedField<int64_t>().Swap(tensor.mutable_int64_data());
}

//===----------------------------------------------------------------------===//
// The flat node list
//===----------------------------------------------------------------------===//

/// One node to convert: a node of the main graph or of an inlined function.
struct FlatNode {
  const onnx::NodeProto *proto;
  /// The default-domain opset in effect for this node.
  int64_t opset;
  /// The chain of functions it was inlined from ("" in the main graph).
  std::string function;
};

/// A local function of the model (ModelProto.functions).
struct LocalFunction {
  const onnx::FunctionProto *proto;
  /// The default-domain opset its body uses.
  int64_t opset;
  /// Attribute defaults (FunctionProto.attribute_proto, IR version 9).
  std::vector<onnx::AttributeProto> defaults;
};

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

class Importer {
public:
  /// Imports \p model, whose initializer payloads it frees as it copies
  /// them (peak memory stays near one copy of the weights).
  Importer(onnx::ModelProto &model, StringRef sourceName, StringRef baseDir,
           const ImportOptions &options)
      : model_(model), graphProto_(*model.mutable_graph()),
        source_(sourceName.str()), baseDir_(baseDir.str()), options_(options) {
    // Note [ONNX export conventions] (OnnxExporter.h): a model remat wrote
    // keeps each node's stage in its doc_string.
    for (const onnx::StringStringEntryProto &entry : model.metadata_props())
      if (entry.key() == "remat.version")
        writtenByRemat_ = true;
  }

  Expected<std::unique_ptr<Graph>> run();

private:
  //===--- Messages -------------------------------------------------------===//

  /// \returns an error "<file>: <message>".
  /// Names in it come from the file: a control character (a newline in an
  /// op type) is written \xNN, so that the message stays one line and
  /// cannot forge another `error:` line.
  Error fileError(const Twine &message) const {
    return makeError(source_ + ": " + escapeControls(message.str()));
  }
  /// \returns "node 'name' (Op)", or "node #i (Op) producing 'y'" for an
  /// unnamed node, with " in function 'f'" for an inlined one.
  std::string describe(const FlatNode &flat) const;
  /// \returns "node 'name' (Op, domain 'd', opset N)".
  std::string describeFull(const FlatNode &flat) const;
  Error nodeError(const FlatNode &flat, const Twine &message) const {
    return fileError(describe(flat) + ": " + message);
  }
  /// \returns the version the model imports \p domain at, as text.
  std::string opsetText(StringRef domain) const;

  //===--- Step 1: structure ----------------------------------------------===//

  Error checkOpsets();
  Error collectFunctions();
  /// Appends \p nodes (a graph's or a function body's) to flatNodes_,
  /// inlining calls of local functions.
  Error flatten(ArrayRef<const onnx::NodeProto *> nodes, int64_t opset,
                StringRef function, unsigned depth);
  Error inlineCall(const onnx::NodeProto &call, const LocalFunction &function,
                   StringRef enclosing, unsigned depth);
  /// Reserves \p name so that no generated name takes it.
  void reserve(StringRef name) { reserved_.insert(name); }
  /// \returns a name derived from \p base that is neither an ONNX name of
  /// the model nor a value of the graph, and reserves it.
  std::string freshName(StringRef base);
  /// \returns whether \p node (in a body of default-domain opset \p opset)
  /// is an ONNX operator, which no local function may stand for.
  static bool isOnnxOperator(const onnx::NodeProto &node, int64_t opset);
  /// \returns how many nodes flatten() visits for \p nodes (of a body of
  /// default-domain opset \p opset), calls and the nodes they inline, at
  /// most kMaxGraphNodes + 1; counted without inlining, so that a small
  /// file of nested calls fails at once. \p sizes memoizes each function's
  /// count; a function on \p path (recursion) counts as its call alone,
  /// and flatten() reports it.
  uint64_t countInlined(ArrayRef<const onnx::NodeProto *> nodes, int64_t opset,
                        llvm::DenseMap<const LocalFunction *, uint64_t> &sizes,
                        llvm::SmallPtrSetImpl<const LocalFunction *> &path);
  /// \returns the local function \p node calls, or null.
  const LocalFunction *findCallee(const onnx::NodeProto &node, int64_t opset);
  /// Counts one more node flatten() visits against ir::kMaxGraphNodes:
  /// inlining nested functions multiplies nodes, so a small file could
  /// otherwise ask for billions.
  Error countNode() {
    if (++nodeCount_ <= kMaxGraphNodes)
      return Error::success();
    return fileError(tooManyNodesMessage());
  }
  static std::string tooManyNodesMessage() {
    return "the model has more than " + std::to_string(kMaxGraphNodes) +
           " nodes once its local functions are inlined (remat imports at "
           "most that many)";
  }
  /// Sorts flatNodes_ topologically, keeping the file's order where it
  /// allows; errors name undefined values, duplicate definitions, cycles.
  Error sortNodes();

  //===--- Step 2: inputs and initializers --------------------------------===//

  Error importInputs();
  Error importInitializers();
  /// \returns the static type of a graph input declared by \p info.
  Expected<TensorType> inputType(const onnx::ValueInfoProto &info);
  /// \returns the contents of \p tensor; \p what names it in messages
  /// ("initializer 'w'").
  Expected<TensorDataPtr> readTensor(const onnx::TensorProto &tensor,
                                     const std::string &what);
  Expected<std::vector<uint8_t>> readExternal(const onnx::TensorProto &tensor,
                                              const std::string &what,
                                              int64_t byteSize);

  //===--- Step 3: nodes --------------------------------------------------===//

  /// What convertNode collected for a node whose inputs are tensors.
  struct NodeArgs {
    /// The remat op of the node's op type; none for a conversion at import.
    std::optional<OpKind> op;
    SmallVector<Value *, 4> operands;
    AttrList attrs;
    /// The result names, one per output up to the last one given.
    std::vector<std::string> names;
  };
  using Results = Expected<SmallVector<Value *, 2>>;
  /// How one ONNX op type becomes remat IR (Note [Converter table]).
  struct Converter {
    /// The remat op it becomes; none for the conversions at import.
    std::optional<OpKind> op;
    /// The first default-domain opset with the op type; 0 outside it.
    int64_t since = 0;
    /// Converts a node whose inputs are tensors; null for a sequence op.
    Results (Importer::*convert)(const FlatNode &, NodeArgs &) = nullptr;
    /// Converts a node that reads or makes a tensor sequence, from its
    /// proto.
    Error (Importer::*convertSequence)(const FlatNode &,
                                       const AttrList &) = nullptr;
    /// A conversion at import that takes omitted inputs in the middle (as
    /// null operands); the others refuse them.
    bool takesOmittedInputs = false;
  };
  /// Every converter, keyed by "domain.opType" ("" for the default domain).
  static const llvm::StringMap<Converter> &converterTable();
  /// \returns the converter of \p flat's op type, or null if remat has none.
  static const Converter *findConverter(const FlatNode &flat);
  /// The sentence saying which ops remat reads, for the unsupported-op error:
  /// ir/Ops.def's and the op types the table converts at import.
  static StringRef supportedOpsSentence();
  /// Fails, naming every unsupported op type once with its count and its
  /// first node, if any node's op is unsupported: a user fixes them all at
  /// once instead of meeting them one by one.
  Error checkOpsSupported() const;
  Error convertNode(const FlatNode &flat);
  /// Errors on an attribute \p flat's op does not take
  /// (Note [Accepted attributes]).
  Error checkAttributeNames(const FlatNode &flat) const;
  Expected<AttrList> convertAttributes(const FlatNode &flat);
  /// \returns the operand an omitted optional input \p index of \p op
  /// stands for (its ONNX default), or an error when there is none.
  Expected<Value *> defaultOperand(const FlatNode &flat, OpKind op,
                                   unsigned index,
                                   ArrayRef<Value *> operandsSoFar);
  // The converters of the table; each ends by emitting what the node
  // becomes.
  /// Emits args.op as it is: the op's ONNX and remat forms agree.
  Results convertDirect(const FlatNode &flat, NodeArgs &args);
  Results convertConstant(const FlatNode &flat, NodeArgs &args);
  /// ReduceMean, ReduceMax, ReduceL2 and ReduceLogSumExp, whose axes are an
  /// input from opset 18.
  Results convertAttrReduction(const FlatNode &flat, NodeArgs &args);
  Results convertSplit(const FlatNode &flat, NodeArgs &args);
  Results convertDropout(const FlatNode &flat, NodeArgs &args);
  Results convertCast(const FlatNode &flat, NodeArgs &args);
  Results convertTranspose(const FlatNode &flat, NodeArgs &args);
  Results convertFlatten(const FlatNode &flat, NodeArgs &args);
  Results convertGatherND(const FlatNode &flat, NodeArgs &args);
  /// GatherND's flat Gather indices computed by nodes from \p indices that
  /// are not constant.
  Expected<Value *> gatherNDIndices(const FlatNode &flat, Value *indices,
                                    const TensorType &dataType,
                                    int64_t batchDims, const std::string &name);
  Results convertCastLike(const FlatNode &flat, NodeArgs &args);
  Results convertScatterND(const FlatNode &flat, NodeArgs &args);
  Results convertEinsum(const FlatNode &flat, NodeArgs &args);
  /// NonZero of a constant, evaluated at import (its result's shape is the
  /// number of nonzero elements).
  Results convertNonZero(const FlatNode &flat, NodeArgs &args);
  Results convertGlobalPool(const FlatNode &flat, NodeArgs &args);
  Results convertBatchNormalization(const FlatNode &flat, NodeArgs &args);
  Results convertInstanceNormalization(const FlatNode &flat, NodeArgs &args);
  /// \returns the constant operand \p i (named \p inputName) of \p flat,
  /// null when it is omitted, or an error saying that remat imports the op
  /// as \p form ("Resize with constant sizes").
  Expected<const TensorData *> constantInput(const FlatNode &flat,
                                             ArrayRef<Value *> operands,
                                             unsigned i, StringRef inputName,
                                             StringRef form);
  /// Resize with constant roi, scales and sizes.
  Results convertResize(const FlatNode &flat, NodeArgs &args);
  /// DFT with a constant dft_length and axis.
  Results convertDft(const FlatNode &flat, NodeArgs &args);
  /// What emitNormalized made: the result, and the mean and variance it
  /// used (the batch's when it computed them, else the given ones, [C, 1..]).
  struct Normalized {
    Value *y = nullptr, *mean = nullptr, *var = nullptr;
  };
  Expected<Normalized> emitNormalized(const FlatNode &flat,
                                      const std::string &name, Value *x,
                                      ArrayRef<int64_t> axes, Value *mean,
                                      Value *var, Value *scale, Value *bias,
                                      double epsilon);
  /// Checks x [N, C, ...] and \p count - 1 operands of [C] and x's dtype.
  Error checkChannelOperands(const FlatNode &flat, ArrayRef<Value *> operands,
                             unsigned count);
  /// \returns ", which depends on graph input 'x'" (up to three inputs)
  /// for the non-weight graph inputs \p value is computed from, or "".
  std::string runtimeInputsText(const Value *value) const;
  /// SequenceAt at a constant position.
  Error convertSequenceAt(const FlatNode &flat, const AttrList &attrs);
  /// SplitToSequence with a constant split.
  Error convertSplitToSequence(const FlatNode &flat, const AttrList &attrs);
  /// \returns input \p i of \p flat, a tensor (not a sequence).
  Expected<Value *> tensorInput(const FlatNode &flat, int i);

  /// Creates \p op over \p operands with results named \p names, infers the
  /// result types, and replaces the node by Constants when it evaluates on
  /// constant operands. \returns the results.
  Expected<SmallVector<Value *, 2>> emit(const FlatNode &flat, OpKind op,
                                         ArrayRef<Value *> operands,
                                         AttrList attrs,
                                         ArrayRef<std::string> names);
  /// emit() of \p op with one result, named \p name. \returns the result.
  Expected<Value *> emitValue(const FlatNode &flat, OpKind op,
                              ArrayRef<Value *> operands, AttrList attrs,
                              const std::string &name) {
    auto results = emit(flat, op, operands, std::move(attrs), {name});
    if (!results)
      return results.takeError();
    return (*results)[0];
  }
  /// Creates a Constant node named from \p base holding \p data.
  Value *emitConstant(TensorDataPtr data, StringRef base);
  /// Replaces \p node by a Constant node when its operands are constants.
  /// \returns the Constant's result, or null if the node stays.
  Value *tryFold(Node *node);
  /// \returns why result \p i of \p node has no static shape.
  std::string unknownShapeReason(const Node &node) const;
  /// Checks \p value against the type the file declares for it, if any.
  Error checkDeclared(const Value *value, const onnx::TypeProto &declared,
                      const Twine &what);
  /// \returns the declared type as text, "f32[2,seq,?]".
  std::string formatDeclared(const onnx::TypeProto_Tensor &tensor) const;

  onnx::ModelProto &model_;
  /// The model's metadata says remat wrote it (stages are in doc_strings).
  bool writtenByRemat_ = false;
  onnx::GraphProto &graphProto_;
  std::string source_;
  std::string baseDir_;
  const ImportOptions &options_;

  std::unique_ptr<Graph> graph_;
  /// Imported opset of every domain ("" for the default).
  llvm::StringMap<int64_t> opsets_;
  int64_t defaultOpset_ = 0;
  /// Local functions by "domain:name:overload".
  llvm::StringMap<LocalFunction> functions_;
  std::vector<LocalFunction> functionList_;
  /// Copies of inlined function body nodes (stable addresses).
  std::deque<onnx::NodeProto> inlined_;
  std::vector<FlatNode> flatNodes_;
  /// Every ONNX name of the model, and every generated one.
  llvm::StringSet<> reserved_;
  /// freshName(): the next suffix to try for each base.
  llvm::StringMap<unsigned> nextSuffix_;
  /// Nodes flatten() has visited: the flat list's and the calls inlined.
  uint64_t nodeCount_ = 0;
  /// Initializers by name.
  llvm::StringMap<const onnx::TensorProto *> initializers_;
  /// Declared types of intermediate values (value_info).
  llvm::StringMap<const onnx::TypeProto *> valueInfo_;
  /// ONNX name -> value.
  llvm::StringMap<Value *> values_;
  /// The tensor sequences SplitToSequence made, by name: remat has no
  /// sequence type, so a sequence lives here as its elements and SequenceAt
  /// (at a constant position) picks one.
  llvm::StringMap<SmallVector<Value *, 4>> sequences_;
  /// Value name -> the ONNX node that defines it, for messages.
  llvm::StringMap<std::string> producers_;
  /// Value name -> why evaluating its node at import failed.
  llvm::StringMap<std::string> foldFailures_;
};

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

std::string Importer::describe(const FlatNode &flat) const {
  const onnx::NodeProto &node = *flat.proto;
  std::string text;
  if (!node.name().empty()) {
    text = "node '" + node.name() + "' (" + node.op_type() + ")";
  } else {
    std::string output;
    for (const std::string &name : node.output())
      if (!name.empty()) {
        output = name;
        break;
      }
    text = "unnamed " + node.op_type() + " node";
    if (!output.empty())
      text += " producing '" + output + "'";
  }
  if (!flat.function.empty())
    text += " in function '" + flat.function + "'";
  return text;
}

std::string Importer::opsetText(StringRef domain) const {
  if (isDefaultDomain(domain))
    return std::to_string(defaultOpset_);
  auto it = opsets_.find(domain);
  if (it == opsets_.end())
    return "not imported";
  return std::to_string(it->second);
}

std::string Importer::describeFull(const FlatNode &flat) const {
  const onnx::NodeProto &node = *flat.proto;
  std::string opset = isDefaultDomain(node.domain())
                          ? std::to_string(flat.opset)
                          : opsetText(node.domain());
  std::string text =
      (node.name().empty() ? "unnamed node" : "node '" + node.name() + "'");
  text += " (op '" + node.op_type() + "', domain '" +
          domainName(node.domain()) + "', opset " + opset + ")";
  if (!flat.function.empty())
    text += " in function '" + flat.function + "'";
  return text;
}

//===----------------------------------------------------------------------===//
// Step 1: opsets, functions, the flat node list
//===----------------------------------------------------------------------===//

Error Importer::checkOpsets() {
  bool haveDefault = false;
  for (const onnx::OperatorSetIdProto &opset : model_.opset_import()) {
    std::string domain =
        isDefaultDomain(opset.domain()) ? std::string() : opset.domain();
    if (opsets_.count(domain))
      return fileError("opset_import lists domain '" + domainName(domain) +
                       "' twice");
    opsets_[domain] = opset.version();
    if (!domain.empty())
      continue;
    haveDefault = true;
    defaultOpset_ = opset.version();
    if (opset.version() < kMinOpset || opset.version() > kMaxOpset)
      return fileError("unsupported opset " + Twine(opset.version()) +
                       " of the default ONNX domain (remat imports opsets " +
                       Twine(kMinOpset) + " to " + Twine(kMaxOpset) + ")");
  }
  if (!haveDefault)
    return fileError("the model imports no opset of the default ONNX domain "
                     "(remat imports opsets " +
                     Twine(kMinOpset) + " to " + Twine(kMaxOpset) + ")");
  return Error::success();
}

Error Importer::collectFunctions() {
  for (const onnx::FunctionProto &function : model_.functions()) {
    LocalFunction local{&function, defaultOpset_, {}};
    for (const onnx::OperatorSetIdProto &opset : function.opset_import()) {
      if (!isDefaultDomain(opset.domain()))
        continue;
      local.opset = opset.version();
      if (opset.version() < kMinOpset || opset.version() > kMaxOpset)
        return fileError("function '" + function.name() + "' (domain '" +
                         function.domain() + "') uses unsupported opset " +
                         Twine(opset.version()) +
                         " of the default ONNX domain (remat imports "
                         "opsets " +
                         Twine(kMinOpset) + " to " + Twine(kMaxOpset) + ")");
    }
    for (const std::string &bytes :
         unknownStrings(function, kFunctionAttributeProtoField)) {
      onnx::AttributeProto attr;
      if (!attr.ParseFromString(bytes))
        return fileError("function '" + function.name() +
                         "' has a malformed attribute default");
      local.defaults.push_back(std::move(attr));
    }
    std::vector<std::string> overload =
        unknownStrings(function, kFunctionOverloadField);
    std::string key = functionKey(function.domain(), function.name(), overload);
    if (functions_.count(key))
      return fileError("the model defines function '" + function.name() +
                       "' of domain '" + function.domain() + "' twice");
    functions_[key] = std::move(local);
  }
  return Error::success();
}

std::string Importer::freshName(StringRef base) {
  // Each base remembers the suffix it got to, so that many calls of one
  // function by nodes of one name (20,000 "call"s) take linear time.
  unsigned &next = nextSuffix_[base];
  std::string name = next == 0 ? base.str() : base.str() + "." +
                                                  std::to_string(next);
  while (reserved_.count(name) || graph_->lookup(name))
    name = base.str() + "." + std::to_string(++next);
  ++next;
  reserve(name);
  return name;
}

bool Importer::isOnnxOperator(const onnx::NodeProto &node, int64_t opset) {
  if (!isDefaultDomain(node.domain()))
    return false;
  // remat's table knows the ops of opsets 18-20 that libonnx's schemas
  // (up to opset 17) lack; the schemas know the ONNX ops remat lacks.
  FlatNode flat{&node, opset, std::string()};
  const Converter *converter = findConverter(flat);
  if (converter && converter->since <= opset)
    return true;
  return onnx::OpSchemaRegistry::Schema(node.op_type(), int(opset), "") !=
         nullptr;
}

Error Importer::flatten(ArrayRef<const onnx::NodeProto *> nodes, int64_t opset,
                        StringRef function, unsigned depth) {
  for (const onnx::NodeProto *node : nodes) {
    // A call matches a function's domain and name (and overload). In the
    // default domain an ONNX operator wins over a local function of its
    // name, as in onnxruntime and onnx's reference evaluator (onnx's
    // checker accepts such a function; it is never called).
    // Every node counts, calls too: functions of empty bodies that call
    // each other many times still take time.
    if (auto err = countNode())
      return err;
    const LocalFunction *callee = findCallee(*node, opset);
    if (!callee) {
      flatNodes_.push_back({node, opset, function.str()});
      continue;
    }
    if (depth >= kMaxFunctionDepth)
      return fileError("function '" + node->op_type() + "' (domain '" +
                       node->domain() +
                       "') calls itself, or functions nest "
                       "deeper than " +
                       Twine(kMaxFunctionDepth) + " levels");
    if (auto err = inlineCall(*node, *callee, function, depth))
      return err;
  }
  return Error::success();
}

const LocalFunction *Importer::findCallee(const onnx::NodeProto &node,
                                          int64_t opset) {
  if (functions_.empty() || isOnnxOperator(node, opset))
    return nullptr;
  auto it = functions_.find(functionKey(
      node.domain(), node.op_type(), unknownStrings(node, kNodeOverloadField)));
  return it == functions_.end() ? nullptr : &it->second;
}

uint64_t Importer::countInlined(
    ArrayRef<const onnx::NodeProto *> nodes, int64_t opset,
    llvm::DenseMap<const LocalFunction *, uint64_t> &sizes,
    llvm::SmallPtrSetImpl<const LocalFunction *> &path) {
  uint64_t total = 0;
  for (const onnx::NodeProto *node : nodes) {
    total += 1;
    const LocalFunction *callee = findCallee(*node, opset);
    if (callee && !path.count(callee)) {
      auto it = sizes.find(callee);
      if (it == sizes.end()) {
        std::vector<const onnx::NodeProto *> body;
        for (const onnx::NodeProto &bodyNode : callee->proto->node())
          body.push_back(&bodyNode);
        path.insert(callee);
        uint64_t size = countInlined(body, callee->opset, sizes, path);
        path.erase(callee);
        it = sizes.insert({callee, size}).first;
      }
      total += it->second;
    }
    if (total > kMaxGraphNodes)
      return kMaxGraphNodes + 1;
  }
  return total;
}

Error Importer::inlineCall(const onnx::NodeProto &call,
                           const LocalFunction &function, StringRef enclosing,
                           unsigned depth) {
  const onnx::FunctionProto &proto = *function.proto;
  std::string callName = call.name();
  if (callName.empty())
    for (const std::string &output : call.output())
      if (!output.empty()) {
        callName = output;
        break;
      }
  std::string chain =
      enclosing.empty() ? proto.name() : enclosing.str() + "/" + proto.name();
  auto callError = [&](const Twine &message) {
    return fileError("call of function '" + proto.name() + "' (domain '" +
                     proto.domain() + "') by node '" + callName +
                     "': " + message);
  };
  if (call.input_size() > proto.input_size())
    return callError("passes " + Twine(call.input_size()) +
                     " inputs, the function takes " +
                     Twine(proto.input_size()));
  if (call.output_size() > proto.output_size())
    return callError("expects " + Twine(call.output_size()) +
                     " outputs, the function has " +
                     Twine(proto.output_size()));

  // Formal names -> actual names. Internal names get the call's name as a
  // prefix and are made unique.
  llvm::StringMap<std::string> rename;
  for (int i = 0; i < proto.input_size(); ++i)
    rename[proto.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < proto.output_size(); ++i) {
    if (i < call.output_size() && !call.output(i).empty())
      rename[proto.output(i)] = call.output(i);
    else
      rename[proto.output(i)] = freshName(callName + "/" + proto.output(i));
  }
  llvm::StringMap<const onnx::AttributeProto *> callAttrs;
  for (const onnx::AttributeProto &attr : call.attribute())
    callAttrs[attr.name()] = &attr;
  llvm::StringMap<const onnx::AttributeProto *> defaults;
  for (const onnx::AttributeProto &attr : function.defaults)
    defaults[attr.name()] = &attr;

  std::vector<const onnx::NodeProto *> body;
  for (const onnx::NodeProto &node : proto.node()) {
    onnx::NodeProto &copy = inlined_.emplace_back(node);
    copy.set_name(callName + "/" +
                  (node.name().empty() ? node.op_type() : node.name()));
    for (int i = 0; i < copy.input_size(); ++i) {
      const std::string &name = node.input(i);
      if (name.empty())
        continue;
      auto it = rename.find(name);
      if (it == rename.end())
        return callError("body node '" + node.name() +
                         "' uses undefined value '" + name + "'");
      copy.set_input(i, it->second);
    }
    for (int i = 0; i < copy.output_size(); ++i) {
      const std::string &name = node.output(i);
      if (name.empty())
        continue;
      auto it = rename.find(name);
      if (it == rename.end())
        it = rename.insert({name, freshName(callName + "/" + name)}).first;
      copy.set_output(i, it->second);
    }
    // Attribute references take the call's value, else the function's
    // default, else the attribute is absent.
    copy.clear_attribute();
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (!attr.has_ref_attr_name()) {
        *copy.add_attribute() = attr;
        continue;
      }
      const onnx::AttributeProto *value = nullptr;
      if (auto it = callAttrs.find(attr.ref_attr_name()); it != callAttrs.end())
        value = it->second;
      else if (auto it = defaults.find(attr.ref_attr_name());
               it != defaults.end())
        value = it->second;
      if (!value)
        continue;
      onnx::AttributeProto *added = copy.add_attribute();
      *added = *value;
      added->set_name(attr.name());
    }
    body.push_back(&copy);
  }
  return flatten(body, function.opset, chain, depth + 1);
}

Error Importer::sortNodes() {
  // Which node defines each name; graph inputs and initializers are defined
  // up front.
  llvm::StringMap<size_t> definedBy;
  llvm::StringSet<> available;
  for (const onnx::ValueInfoProto &input : graphProto_.input())
    available.insert(input.name());
  for (const onnx::TensorProto &init : graphProto_.initializer())
    available.insert(init.name());
  for (size_t i = 0; i < flatNodes_.size(); ++i) {
    for (const std::string &output : flatNodes_[i].proto->output()) {
      if (output.empty())
        continue;
      if (available.count(output))
        return nodeError(flatNodes_[i], "defines '" + output +
                                            "', which is already a graph "
                                            "input or initializer");
      if (!definedBy.insert({output, i}).second)
        return nodeError(flatNodes_[i],
                         "defines '" + output + "', which " +
                             describe(flatNodes_[definedBy[output]]) +
                             " defines too");
    }
  }

  // Dependencies; an input nobody defines is an error.
  size_t count = flatNodes_.size();
  std::vector<std::vector<size_t>> users(count);
  std::vector<size_t> pending(count, 0);
  bool sorted = true;
  for (size_t i = 0; i < count; ++i) {
    for (const std::string &input : flatNodes_[i].proto->input()) {
      if (input.empty() || available.count(input))
        continue;
      auto it = definedBy.find(input);
      if (it == definedBy.end())
        return nodeError(flatNodes_[i], "uses undefined value '" + input + "'");
      users[it->second].push_back(i);
      ++pending[i];
      sorted &= it->second < i;
    }
  }
  if (sorted)
    return Error::success();

  // Kahn's algorithm, always taking the earliest ready node.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < count; ++i)
    if (pending[i] == 0)
      ready.push(i);
  std::vector<FlatNode> order;
  order.reserve(count);
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(flatNodes_[i]);
    for (size_t user : users[i])
      if (--pending[user] == 0)
        ready.push(user);
  }
  if (order.size() != count) {
    for (size_t i = 0; i < count; ++i)
      if (pending[i] != 0)
        return fileError(describe(flatNodes_[i]) +
                         " is on a cycle (the graph is not a DAG)");
  }
  flatNodes_ = std::move(order);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Step 2: inputs, weights and constant initializers
//===----------------------------------------------------------------------===//

Expected<TensorType> Importer::inputType(const onnx::ValueInfoProto &info) {
  const std::string &name = info.name();
  if (!info.has_type() ||
      info.type().value_case() == onnx::TypeProto::VALUE_NOT_SET)
    return fileError("graph input '" + name + "' has no type");
  if (!info.type().has_tensor_type())
    return fileError("graph input '" + name +
                     "' is not a tensor (sequences, maps and optionals are "
                     "not supported)");
  const onnx::TypeProto_Tensor &tensor = info.type().tensor_type();
  std::optional<DType> dtype = fromOnnxCode(tensor.elem_type());
  if (!dtype)
    return fileError(
        "graph input '" + name + "' has dtype " +
        onnxDTypeName(tensor.elem_type()) +
        ", which remat does not support (supported: " + kSupportedDTypes + ")");
  if (!tensor.has_shape())
    return fileError("graph input '" + name +
                     "' has no shape; remat needs the rank and dims of "
                     "every input");
  SmallVector<int64_t, 4> dims;
  for (int i = 0; i < tensor.shape().dim_size(); ++i) {
    const onnx::TensorShapeProto_Dimension &dim = tensor.shape().dim(i);
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0)
        return fileError("dim " + Twine(i) + " of graph input '" + name +
                         "' is negative (" + Twine(dim.dim_value()) + ")");
      dims.push_back(dim.dim_value());
      continue;
    }
    if (dim.has_dim_param() && !dim.dim_param().empty()) {
      const std::string &param = dim.dim_param();
      auto it = options_.bindings.find(param);
      if (it == options_.bindings.end())
        return fileError("unbound symbolic dim '" + param + "' of input '" +
                         name + "' (bind it with --bind " + param + "=N)");
      if (it->second < 0)
        return fileError("symbolic dim '" + param + "' of input '" + name +
                         "' is bound to a negative value (" +
                         Twine(it->second) + ")");
      dims.push_back(it->second);
      continue;
    }
    return fileError("dim " + Twine(i) + " of input '" + name +
                     "' is unknown (it has neither a value nor a symbolic "
                     "name that --bind could set)");
  }
  TensorType type(*dtype, dims);
  if (auto err = type.checkSize())
    return fileError("graph input '" + name + "' of type " + dtypeName(*dtype) +
                     formatDims(dims) + ": " + errorToString(std::move(err)));
  return type;
}

Error Importer::importInputs() {
  llvm::StringSet<> seen;
  for (const onnx::ValueInfoProto &info : graphProto_.input()) {
    if (!seen.insert(info.name()).second)
      return fileError("graph input '" + info.name() + "' is listed twice");
    if (info.name().empty())
      return fileError("a graph input has an empty name");
    // An input with an initializer of the same name is the initializer
    // (a default value); it is imported with the initializers.
    if (initializers_.count(info.name()))
      continue;
    auto type = inputType(info);
    if (!type)
      return type.takeError();
    Value *value = graph_->addInput(info.name(), *type);
    values_[info.name()] = value;
  }
  // A binding that names no symbolic dim of the model is a typo or a model
  // other than the user thinks: say so rather than ignore it.
  llvm::SmallVector<std::string, 4> known;
  auto collect = [&](const auto &infos) {
    for (const onnx::ValueInfoProto &info : infos)
      for (const auto &dim : info.type().tensor_type().shape().dim())
        if (dim.has_dim_param() && !dim.dim_param().empty() &&
            !llvm::is_contained(known, dim.dim_param()))
          known.push_back(dim.dim_param());
  };
  collect(graphProto_.input());
  collect(graphProto_.output());
  collect(graphProto_.value_info());
  for (const auto &binding : options_.bindings) {
    if (llvm::is_contained(known, binding.getKey()))
      continue;
    std::string names;
    for (const std::string &name : known)
      names += (names.empty() ? "'" : ", '") + name + "'";
    return fileError("--bind names '" + binding.getKey() +
                     "', which is no symbolic dim of the model (" +
                     (names.empty() ? std::string("it has none")
                                    : "its symbolic dims: " + names) +
                     ")");
  }
  return Error::success();
}

Error Importer::importInitializers() {
  // Declared types of initializers that are also listed as inputs.
  llvm::StringMap<const onnx::ValueInfoProto *> listed;
  for (const onnx::ValueInfoProto &info : graphProto_.input())
    listed[info.name()] = &info;

  std::vector<bool> scalarWeightUsed(options_.scalarWeights.size(), false);
  auto isScalarWeight = [&](llvm::StringRef name) {
    bool matched = false;
    for (size_t i = 0; i < options_.scalarWeights.size(); ++i)
      if (options_.scalarWeights[i].second.match(name))
        matched = scalarWeightUsed[i] = true;
    return matched;
  };
  // Float initializers that only Resize's roi and scales read are the
  // constants the exporter meant, not weights.
  llvm::StringMap<bool> onlyResizeParameters;
  for (const FlatNode &flat : flatNodes_)
    for (int i = 0; i < flat.proto->input_size(); ++i) {
      bool parameter = flat.proto->op_type() == "Resize" &&
                       isDefaultDomain(flat.proto->domain()) &&
                       (i == 1 || i == 2);
      auto [it, inserted] =
          onlyResizeParameters.insert({flat.proto->input(i), parameter});
      if (!inserted)
        it->second = it->second && parameter;
    }
  for (onnx::TensorProto &tensor : *graphProto_.mutable_initializer()) {
    if (tensor.name().empty())
      return fileError("an initializer has an empty name");
    std::string what = "initializer '" + tensor.name() + "'";
    auto data = readTensor(tensor, what);
    if (!data)
      return data.takeError();
    releasePayload(tensor);
    const TensorType &type = (*data)->getType();
    auto resizeOnly = onlyResizeParameters.find(tensor.name());
    bool isWeight = isFloat(type.getDType()) &&
                    (options_.singleElementWeights ||
                     type.getNumElements() != 1 ||
                     isScalarWeight(tensor.name())) &&
                    !(resizeOnly != onlyResizeParameters.end() &&
                      resizeOnly->second);
    if (isWeight) {
      Value *weight = graph_->addInput(tensor.name(), type, /*isWeight=*/true);
      weight->setData(*data);
      values_[tensor.name()] = weight;
    } else {
      AttrList attrs;
      attrs.set("value", *data);
      Node *node = graph_->createNode(OpKind::Constant, {}, {type},
                                      {tensor.name()}, std::move(attrs));
      values_[tensor.name()] = node->getResult(0);
      producers_[tensor.name()] = what;
    }
    if (auto it = listed.find(tensor.name()); it != listed.end())
      if (auto err = checkDeclared(values_[tensor.name()], it->second->type(),
                                   "initializer '" + tensor.name() + "'"))
        return err;
  }
  for (size_t i = 0; i < options_.scalarWeights.size(); ++i)
    if (!scalarWeightUsed[i])
      return fileError("scalar weight '" + options_.scalarWeights[i].first +
                       "' matches no one-element float initializer");
  return Error::success();
}

/// \returns whether \p path (resolved) lies strictly inside \p folder
/// (resolved).
static bool isInsideFolder(StringRef path, StringRef folder) {
  if (!path.startswith(folder) || path.size() == folder.size())
    return false;
  // "/a/bc" is not inside "/a/b"; every path is inside "/".
  return folder.endswith("/") || path[folder.size()] == '/';
}

Expected<std::vector<uint8_t>>
Importer::readExternal(const onnx::TensorProto &tensor, const std::string &what,
                       int64_t byteSize) {
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    const std::string &key = entry.key();
    if (key == "location") {
      location = entry.value();
      continue;
    }
    if (key != "offset" && key != "length")
      continue; // checksum and unknown keys carry nothing remat needs
    int64_t number;
    if (StringRef(entry.value()).getAsInteger(10, number) || number < 0)
      return fileError(what + ": external data " + key + " '" + entry.value() +
                       "' is not a non-negative integer");
    if (key == "offset")
      offset = number;
    else
      length = number;
  }
  if (location.empty())
    return fileError(what + ": external data has no location");
  // The OS would read the path only up to a NUL: refuse it, and show it
  // escaped so that the message is not cut there either.
  if (StringRef(location).contains('\0'))
    return fileError(what + ": external data location '" +
                     ir::escapeForMessage(location) +
                     "' contains a NUL byte");
  if (llvm::sys::path::is_absolute(location))
    return fileError(what + ": external data location '" + location +
                     "' is an absolute path; ONNX requires a path relative "
                     "to the model's directory");
  for (StringRef component : llvm::make_range(llvm::sys::path::begin(location),
                                              llvm::sys::path::end(location)))
    if (component == "..")
      return fileError(what + ": external data location '" + location +
                       "' leaves the model's directory");
  // A model given as bytes has no folder of its own: its external data is
  // read only from a folder the caller names.
  if (baseDir_.empty())
    return fileError(what + ": external data location '" +
                     ir::escapeForMessage(location) +
                     "' cannot be read: the model was given as bytes with no "
                     "base folder (give one to allow external data)");
  llvm::SmallString<256> path(baseDir_);
  llvm::sys::path::append(path, location);

  uint64_t fileSize = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, fileSize))
    return fileError(what + ": cannot open external data file '" + path +
                     "': " + ec.message());
  // Symbolic links, of the file or of any folder on the way, may point
  // anywhere: the resolved path must stay inside the resolved folder.
  llvm::SmallString<256> folder, resolved;
  if (std::error_code ec = llvm::sys::fs::real_path(baseDir_, folder))
    return fileError(what + ": cannot resolve the model's folder '" +
                     baseDir_ + "': " + ec.message());
  if (std::error_code ec = llvm::sys::fs::real_path(path, resolved))
    return fileError(what + ": cannot resolve external data file '" + path +
                     "': " + ec.message());
  if (!isInsideFolder(resolved, folder))
    return fileError(what + ": external data location '" +
                     ir::escapeForMessage(location) + "' resolves to '" +
                     ir::escapeForMessage(resolved) +
                     "', outside the model's folder '" +
                     ir::escapeForMessage(folder) + "'");
  if (auto err = ir::checkRegularFile(resolved))
    return fileError(what + ": external data: " +
                     errorToString(std::move(err)));
  if (!length)
    length = offset <= static_cast<int64_t>(fileSize)
                 ? static_cast<int64_t>(fileSize) - offset
                 : 0;
  if (static_cast<uint64_t>(offset) > fileSize ||
      static_cast<uint64_t>(*length) > fileSize - offset)
    return fileError(what + ": external data at offset " + Twine(offset) +
                     " with length " + Twine(*length) + " lies outside '" +
                     path + "' (" + Twine(fileSize) + " bytes)");
  if (*length != byteSize)
    return fileError(what + ": external data has " + Twine(*length) +
                     " bytes, expected " + Twine(byteSize));
  if (byteSize == 0)
    return std::vector<uint8_t>();
  auto buffer = llvm::MemoryBuffer::getFileSlice(resolved, *length, offset);
  if (!buffer)
    return fileError(what + ": cannot read external data file '" + path +
                     "': " + buffer.getError().message());
  StringRef bytes = (*buffer)->getBuffer();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

Expected<TensorDataPtr> Importer::readTensor(const onnx::TensorProto &tensor,
                                             const std::string &what) {
  return tensorFromProto(tensor, what, source_ + ": ",
                         [&](int64_t byteSize) {
                           return readExternal(tensor, what, byteSize);
                         });
}

//===----------------------------------------------------------------------===//
// Step 3: nodes
//===----------------------------------------------------------------------===//

Expected<AttrList> Importer::convertAttributes(const FlatNode &flat) {
  AttrList attrs;
  for (const onnx::AttributeProto &attr : flat.proto->attribute()) {
    const std::string &name = attr.name();
    auto attrError = [&](const Twine &message) {
      return nodeError(flat, "attribute '" + name + "' " + message);
    };
    if (attr.has_ref_attr_name())
      return attrError("refers to attribute '" + attr.ref_attr_name() +
                       "', which only a function body may do");
    if (attrs.has(name))
      return attrError("is given twice");
    switch (attr.type()) {
    case onnx::AttributeProto::INT:
      attrs.set(name, static_cast<int64_t>(attr.i()));
      break;
    case onnx::AttributeProto::FLOAT:
      attrs.set(name, attr.f());
      break;
    case onnx::AttributeProto::STRING:
      attrs.set(name, attr.s());
      break;
    case onnx::AttributeProto::INTS:
      attrs.set(name,
                std::vector<int64_t>(attr.ints().begin(), attr.ints().end()));
      break;
    case onnx::AttributeProto::FLOATS:
      // An empty list is an int list in remat (.rir cannot tell them apart).
      if (attr.floats_size() == 0)
        attrs.set(name, std::vector<int64_t>());
      else
        attrs.set(name, std::vector<float>(attr.floats().begin(),
                                           attr.floats().end()));
      break;
    case onnx::AttributeProto::STRINGS:
      attrs.set(name, std::vector<std::string>(attr.strings().begin(),
                                               attr.strings().end()));
      break;
    case onnx::AttributeProto::TENSOR: {
      std::string what = "tensor '" + attr.t().name() + "' in attribute '" +
                         name + "' of " + describe(flat);
      if (attr.t().name().empty())
        what = "the tensor in attribute '" + name + "' of " + describe(flat);
      auto data = readTensor(attr.t(), what);
      if (!data)
        return data.takeError();
      attrs.set(name, TensorDataPtr(*data));
      break;
    }
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      return attrError("is a subgraph; remat does not support control flow "
                       "(If, Loop, Scan)");
    case onnx::AttributeProto::UNDEFINED:
      return attrError("has no type");
    default:
      return attrError("has type " +
                       onnx::AttributeProto_AttributeType_Name(attr.type()) +
                       ", which remat does not support");
    }
  }
  return attrs;
}

Value *Importer::emitConstant(TensorDataPtr data, StringRef base) {
  TensorType type = data->getType();
  AttrList attrs;
  attrs.set("value", std::move(data));
  Node *node = graph_->createNode(OpKind::Constant, {}, {type},
                                  {freshName(base)}, std::move(attrs));
  return node->getResult(0);
}

Expected<Value *> Importer::defaultOperand(const FlatNode &flat, OpKind op,
                                           unsigned index,
                                           ArrayRef<Value *> operandsSoFar) {
  std::string base = flat.proto->output_size() && !flat.proto->output(0).empty()
                         ? flat.proto->output(0)
                         : flat.proto->op_type();
  // Dropout(data, ratio = 0.5, training_mode).
  if (op == OpKind::Dropout && index == 1)
    return emitConstant(
        TensorData::fromDoubles(TensorType(DType::F32, {}), {0.5}),
        base + ".ratio");
  // Slice(data, starts, ends, axes = [0, 1, ...], steps).
  if (op == OpKind::Slice && index == 3) {
    const TensorType &starts = operandsSoFar[1]->getType();
    if (starts.getRank() != 1)
      return nodeError(flat, "starts must be a vector, got " + starts.str());
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < starts.getDim(0); ++i)
      axes.push_back(i);
    return emitConstant(TensorData::fromInts(starts, axes), base + ".axes");
  }
  // Pad(data, pads, constant_value = 0 of data's dtype, axes).
  if (op == OpKind::Pad && index == 2)
    return emitConstant(
        TensorData::fromDoubles(
            TensorType(operandsSoFar[0]->getType().getDType(), {}), {0}),
        base + ".constant_value");
  // Clip(x, min = no bound, max): the dtype's lowest value (-inf for the
  // float dtypes) bounds nothing.
  if (op == OpKind::Clip && index == 1) {
    DType dtype = operandsSoFar[0]->getType().getDType();
    TensorType type(dtype, {});
    if (isFloat(dtype))
      return emitConstant(TensorData::fromDoubles(
                              type, {-std::numeric_limits<double>::infinity()}),
                          base + ".min");
    int64_t lowest = dtype == DType::I64   ? std::numeric_limits<int64_t>::min()
                     : dtype == DType::I32 ? std::numeric_limits<int32_t>::min()
                     : dtype == DType::I8  ? std::numeric_limits<int8_t>::min()
                                           : 0;
    return emitConstant(TensorData::fromInts(type, {lowest}), base + ".min");
  }
  return nodeError(flat, "optional input " + Twine(index) +
                             " is omitted but a later input is given, and "
                             "remat knows no default for it");
}

Importer::Results Importer::convertDirect(const FlatNode &flat,
                                          NodeArgs &args) {
  return emit(flat, *args.op, args.operands, std::move(args.attrs), args.names);
}

Importer::Results Importer::convertConstant(const FlatNode &flat,
                                            NodeArgs &args) {
  AttrList &attrs = args.attrs;
  static const char *const kForms[] = {
      "value",      "value_float",  "value_int",     "value_floats",
      "value_ints", "value_string", "value_strings", "sparse_value"};
  SmallVector<StringRef, 2> present;
  for (StringRef form : kForms)
    if (attrs.has(form))
      present.push_back(form);
  if (present.size() != 1) {
    std::string list;
    for (StringRef form : present)
      list += (list.empty() ? "'" : ", '") + form.str() + "'";
    return nodeError(flat, "expects exactly one value attribute, got " +
                               (list.empty() ? std::string("none") : list));
  }
  StringRef form = present.front();
  TensorDataPtr data;
  if (form == "value") {
    if (!attrs.getTensor(form))
      return nodeError(flat, "attribute 'value' must be a tensor");
    return convertDirect(flat, args);
  }
  if (form == "value_float") {
    auto value = attrs.getFloat(form);
    if (!value)
      return nodeError(flat, "attribute 'value_float' must be a float");
    data = TensorData::fromDoubles(TensorType(DType::F32, {}), {*value});
  } else if (form == "value_int") {
    auto value = attrs.getInt(form);
    if (!value)
      return nodeError(flat, "attribute 'value_int' must be an int");
    data = TensorData::fromInts(TensorType(DType::I64, {}), {*value});
  } else if (form == "value_floats") {
    std::vector<double> values;
    if (auto floats = attrs.getFloats(form))
      values.assign(floats->begin(), floats->end());
    else if (auto ints = attrs.getInts(form); !ints || !ints->empty())
      return nodeError(flat, "attribute 'value_floats' must be floats");
    data = TensorData::fromDoubles(
        TensorType(DType::F32, {static_cast<int64_t>(values.size())}), values);
  } else if (form == "value_ints") {
    auto ints = attrs.getInts(form);
    if (!ints)
      return nodeError(flat, "attribute 'value_ints' must be ints");
    data = TensorData::fromInts(
        TensorType(DType::I64, {static_cast<int64_t>(ints->size())}), *ints);
  } else {
    return nodeError(flat, "attribute '" + form +
                               "' is not supported (remat has no string or "
                               "sparse tensors)");
  }
  attrs.remove(form);
  attrs.set("value", std::move(data));
  return convertDirect(flat, args);
}

Importer::Results Importer::convertAttrReduction(const FlatNode &flat,
                                                 NodeArgs &args) {
  // ReduceMean/ReduceMax/ReduceL2/ReduceLogSumExp take axes as an optional
  // input from opset 18; remat keeps opset 17's attribute.
  if (flat.opset < 18)
    return convertDirect(flat, args);
  OpKind op = *args.op;
  SmallVector<Value *, 4> &operands = args.operands;
  AttrList &attrs = args.attrs;
  std::vector<int64_t> axes;
  if (operands.size() >= 2) {
    const TensorData *data = getConstantValue(operands[1]);
    if (!data)
      return nodeError(flat, "axes input '" + operands[1]->getName() +
                                 "' must be a constant (remat's " +
                                 getOpSpelling(op) +
                                 " takes axes as an attribute, as in opset "
                                 "17)");
    if (!isInteger(data->getType().getDType()) || data->getType().getRank() > 1)
      return nodeError(flat, "axes input '" + operands[1]->getName() +
                                 "' must be an integer vector, got " +
                                 data->getType().str());
    axes = data->getInts();
    operands.resize(1);
  }
  int64_t noop = attrs.getInt("noop_with_empty_axes").value_or(0);
  attrs.remove("noop_with_empty_axes");
  if (axes.empty() && noop != 0) {
    args.op = OpKind::Identity;
    attrs = AttrList();
    return convertDirect(flat, args);
  }
  if (!axes.empty())
    attrs.set("axes", axes);
  return convertDirect(flat, args);
}

Importer::Results Importer::convertSplit(const FlatNode &flat, NodeArgs &args) {
  SmallVector<Value *, 4> &operands = args.operands;
  AttrList &attrs = args.attrs;
  unsigned numResults = args.names.size();
  std::optional<int64_t> numOutputs = attrs.getInt("num_outputs");
  if (!attrs.has("num_outputs"))
    return convertDirect(flat, args);
  if (!numOutputs)
    return nodeError(flat, "attribute 'num_outputs' must be an int");
  attrs.remove("num_outputs");
  if (operands.size() >= 2)
    return nodeError(flat, "has both a split input and attribute "
                           "'num_outputs'");
  if (*numOutputs != numResults)
    return nodeError(flat, "attribute 'num_outputs' is " + Twine(*numOutputs) +
                               ", but the node has " + Twine(numResults) +
                               " outputs");
  const TensorType &data = operands[0]->getType();
  int64_t rank = data.getRank();
  int64_t axis = attrs.getInt("axis").value_or(0);
  if (axis < -rank || axis >= rank)
    return nodeError(flat, "attribute 'axis' is " + Twine(axis) +
                               ", out of range for input type " + data.str());
  if (axis < 0)
    axis += rank;
  // Opset 18: chunks of ceil(dim / n); the last one takes the rest.
  int64_t dim = data.getDim(axis);
  int64_t n = *numOutputs;
  int64_t chunk = (dim + n - 1) / n;
  int64_t last = dim - chunk * (n - 1);
  if (last < 0)
    return nodeError(flat, "cannot split dim " + Twine(axis) + " of " +
                               data.str() + " into " + Twine(n) +
                               " chunks of at most " + Twine(chunk));
  std::vector<int64_t> sizes(n, chunk);
  sizes.back() = last;
  operands.push_back(
      emitConstant(TensorData::fromInts(TensorType(DType::I64, {n}), sizes),
                   flat.proto->output(0) + ".split"));
  return convertDirect(flat, args);
}

Importer::Results Importer::convertDropout(const FlatNode &flat,
                                           NodeArgs &args) {
  if (!args.attrs.has("seed")) {
    StringRef name = flat.proto->name();
    args.attrs.set("seed",
                   stableSeed(name.empty() ? StringRef(args.names[0]) : name));
  }
  return convertDirect(flat, args);
}

Importer::Results Importer::convertCast(const FlatNode &flat, NodeArgs &args) {
  // Opset 19's 'saturate' only affects float8 types, which remat lacks.
  args.attrs.remove("saturate");
  return convertDirect(flat, args);
}

Importer::Results Importer::convertTranspose(const FlatNode &flat,
                                             NodeArgs &args) {
  // TorchScript exports `x.permute(0, -2, -1, 1)` with its negative dims as
  // they are (Mamba-2's chunked scan): read each as counted from the end, as
  // torch and numpy do. ONNX allows only [0, rank); ONNX Runtime refuses
  // such a model. What is still no permutation fails in shape inference.
  auto perm = args.attrs.getInts("perm");
  if (perm && args.operands.size() == 1 &&
      llvm::any_of(*perm, [](int64_t d) { return d < 0; })) {
    int64_t rank = args.operands[0]->getType().getRank();
    std::vector<int64_t> normalized(perm->begin(), perm->end());
    for (int64_t &d : normalized)
      if (d < 0 && d >= -rank)
        d += rank;
    args.attrs.set("perm", normalized);
  }
  return convertDirect(flat, args);
}

Importer::Results Importer::convertFlatten(const FlatNode &flat,
                                           NodeArgs &args) {
  ArrayRef<Value *> operands = args.operands;
  const AttrList &attrs = args.attrs;
  const std::string &name = args.names[0];
  // Flatten(x, axis) == Reshape(x, [prod(dims[:axis]), prod(dims[axis:])]).
  if (operands.size() != 1)
    return nodeError(flat, "expects 1 input, got " + Twine(operands.size()));
  const TensorType &type = operands[0]->getType();
  int64_t rank = type.getRank();
  int64_t axis = attrs.getInt("axis").value_or(1);
  if (axis < -rank || axis > rank)
    return nodeError(flat, "attribute 'axis' is " + Twine(axis) +
                               ", expected a value in [" + Twine(-rank) + ", " +
                               Twine(rank) + "] for " + type.str());
  if (axis < 0)
    axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= type.getDim(i);
  Value *shape = emitConstant(
      TensorData::fromInts(TensorType(DType::I64, {2}), {outer, inner}),
      name + ".shape");
  return emit(flat, OpKind::Reshape, {operands[0], shape}, {}, {name});
}

Importer::Results Importer::convertCastLike(const FlatNode &flat,
                                            NodeArgs &args) {
  ArrayRef<Value *> operands = args.operands;
  const std::string &name = args.names[0];
  // CastLike(x, like) == Cast(x) {to = dtype of like}; like's values are
  // never read. Opset 19's 'saturate' only affects float8 types.
  if (operands.size() != 2)
    return nodeError(flat, "expects 2 inputs, got " + Twine(operands.size()));
  AttrList attrs;
  attrs.set("to", int64_t(onnxCode(operands[1]->getType().getDType())));
  return emit(flat, OpKind::Cast, {operands[0]}, std::move(attrs), {name});
}

Importer::Results Importer::convertGlobalPool(const FlatNode &flat,
                                             NodeArgs &args) {
  // GlobalAveragePool(x) == ReduceMean(x) {axes = [2, rank), keepdims = 1},
  // GlobalMaxPool with ReduceMax: every spatial dim of [N, C, ...] pooled.
  if (args.operands.size() != 1)
    return nodeError(flat, "expects 1 input, got " +
                               Twine(args.operands.size()));
  const TensorType &type = args.operands[0]->getType();
  if (type.getRank() < 3)
    return nodeError(flat, "expects [N, C, spatial...] of rank 3 or more, got " +
                               type.str());
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < type.getRank(); ++i)
    axes.push_back(i);
  AttrList attrs;
  attrs.set("axes", axes);
  attrs.set("keepdims", int64_t{1});
  OpKind op = flat.proto->op_type() == "GlobalMaxPool" ? OpKind::ReduceMax
                                                        : OpKind::ReduceMean;
  return emit(flat, op, {args.operands[0]}, std::move(attrs),
              {args.names[0]});
}

Expected<Importer::Normalized>
Importer::emitNormalized(const FlatNode &flat, const std::string &name,
                         Value *x, ArrayRef<int64_t> axes, Value *mean,
                         Value *var, Value *scale, Value *bias,
                         double epsilon) {
  // y = (x - m) / sqrt(v + epsilon) * scale + bias, the [C] operands
  // broadcast along every dim after C; m and v the mean and the population
  // variance over \p axes (keepdims) unless given.
  const TensorType &type = x->getType();
  int64_t rank = type.getRank(), channels = type.getDim(1);
  SmallVector<int64_t, 4> perChannel = {channels};
  perChannel.append(size_t(rank - 2), 1);
  Value *channelShape = emitConstant(
      TensorData::fromInts(
          TensorType(DType::I64, {static_cast<int64_t>(perChannel.size())}),
          perChannel),
      name + ".channel_shape");
  auto step = [&](OpKind op, ArrayRef<Value *> ins, StringRef base,
                  AttrList attrs = {}) {
    return emitValue(flat, op, ins, std::move(attrs), freshName(base));
  };
  auto channel = [&](Value *v, StringRef base) {
    return step(OpKind::Reshape, {v, channelShape}, base);
  };
  AttrList reduce;
  reduce.set("axes", std::vector<int64_t>(axes.begin(), axes.end()));
  reduce.set("keepdims", int64_t{1});
  Normalized out;
  auto m = mean ? channel(mean, name + ".mean")
                : step(OpKind::ReduceMean, {x}, name + ".batch_mean", reduce);
  if (!m)
    return m.takeError();
  auto centered = step(OpKind::Sub, {x, *m}, name + ".centered");
  if (!centered)
    return centered.takeError();
  Expected<Value *> v = nullptr;
  if (var) {
    v = channel(var, name + ".var");
  } else {
    auto square = step(OpKind::Mul, {*centered, *centered}, name + ".square");
    if (!square)
      return square.takeError();
    v = step(OpKind::ReduceMean, {*square}, name + ".batch_var", reduce);
  }
  if (!v)
    return v.takeError();
  Value *eps = emitConstant(
      TensorData::fromDoubles(TensorType(type.getDType(), {}), {epsilon}),
      name + ".epsilon");
  auto shifted = step(OpKind::Add, {*v, eps}, name + ".var_eps");
  if (!shifted)
    return shifted.takeError();
  auto stddev = step(OpKind::Sqrt, {*shifted}, name + ".stddev");
  if (!stddev)
    return stddev.takeError();
  auto normed = step(OpKind::Div, {*centered, *stddev}, name + ".normalized");
  if (!normed)
    return normed.takeError();
  auto scaled = channel(scale, name + ".scale");
  if (!scaled)
    return scaled.takeError();
  auto product = step(OpKind::Mul, {*normed, *scaled}, name + ".scaled");
  if (!product)
    return product.takeError();
  auto shift = channel(bias, name + ".bias");
  if (!shift)
    return shift.takeError();
  auto y = emit(flat, OpKind::Add, {*product, *shift}, {}, {name});
  if (!y)
    return y.takeError();
  out.y = (*y)[0];
  out.mean = *m;
  out.var = *v;
  return out;
}

Error Importer::checkChannelOperands(const FlatNode &flat,
                                    ArrayRef<Value *> operands,
                                    unsigned count) {
  if (operands.size() != count)
    return nodeError(flat, "expects " + Twine(count) + " inputs, got " +
                               Twine(operands.size()));
  const TensorType &type = operands[0]->getType();
  if (type.getRank() < 2)
    return nodeError(flat, "expects [N, C, ...] of rank 2 or more, got " +
                               type.str());
  int64_t channels = type.getDim(1);
  for (unsigned i = 1; i < count; ++i) {
    const TensorType &t = operands[i]->getType();
    if (t.getRank() != 1 || t.getDim(0) != channels ||
        t.getDType() != type.getDType())
      return nodeError(flat, "input " + Twine(i) + " is " + t.str() +
                                 ", expected [" + Twine(channels) + "] of " +
                                 type.str() + "'s dtype");
  }
  return Error::success();
}

Importer::Results Importer::convertBatchNormalization(const FlatNode &flat,
                                                     NodeArgs &args) {
  // BatchNormalization(x, scale, bias, mean, var) over [N, C, ...], each of
  // the others [C], in remat's elementwise ops and reductions, so that
  // autodiff, the kernels and recompute need nothing of their own
  // (emitNormalized): inference normalises with the given mean and var;
  // training_mode = 1 with the batch's own, over every dim but C, and the
  // running statistics' outputs are mean * momentum + m * (1 - momentum)
  // (var alike, with the population variance).
  ArrayRef<Value *> operands = args.operands;
  const std::string &name = args.names[0];
  if (auto err = checkChannelOperands(flat, operands, 5))
    return std::move(err);
  const TensorType &type = operands[0]->getType();
  int64_t channels = type.getDim(1);
  bool training = args.attrs.getInt("training_mode").value_or(0) != 0;
  double epsilon = args.attrs.getFloat("epsilon").value_or(1e-5f);
  double momentum = args.attrs.getFloat("momentum").value_or(0.9f);
  if (!training && args.names.size() > 1)
    return nodeError(flat, "has running statistics' outputs without "
                           "training_mode = 1");
  std::vector<int64_t> axes = {0};
  for (int64_t i = 2; i < type.getRank(); ++i)
    axes.push_back(i);
  auto normalized = emitNormalized(
      flat, name, operands[0], axes, training ? nullptr : operands[3],
      training ? nullptr : operands[4], operands[1], operands[2], epsilon);
  if (!normalized)
    return normalized.takeError();
  SmallVector<Value *, 2> results = {normalized->y};
  // The running statistics, for the outputs asked for.
  for (size_t i = 1; i < args.names.size() && i < 3; ++i) {
    const std::string &out = args.names[i];
    if (out.empty()) {
      results.push_back(nullptr);
      continue;
    }
    Value *shape = emitConstant(
        TensorData::fromInts(TensorType(DType::I64, {1}), {channels}),
        out + ".shape");
    auto current = emit(flat, OpKind::Reshape,
                        {i == 1 ? normalized->mean : normalized->var, shape},
                        {}, {freshName(out + ".batch")});
    if (!current)
      return current.takeError();
    auto weigh = [&](Value *v, double w, const std::string &base) {
      Value *c = emitConstant(
          TensorData::fromDoubles(TensorType(type.getDType(), {}), {w}),
          base + ".weight");
      return emit(flat, OpKind::Mul, {v, c}, {}, {freshName(base)});
    };
    auto kept = weigh(operands[i == 1 ? 3 : 4], momentum, out + ".kept");
    if (!kept)
      return kept.takeError();
    auto added = weigh((*current)[0], 1 - momentum, out + ".added");
    if (!added)
      return added.takeError();
    auto sum = emit(flat, OpKind::Add, {(*kept)[0], (*added)[0]}, {}, {out});
    if (!sum)
      return sum.takeError();
    results.push_back((*sum)[0]);
  }
  return results;
}

Importer::Results Importer::convertInstanceNormalization(const FlatNode &flat,
                                                        NodeArgs &args) {
  // InstanceNormalization(x, scale, bias): each [N, C] instance normalised
  // over its spatial dims (emitNormalized).
  if (auto err = checkChannelOperands(flat, args.operands, 3))
    return std::move(err);
  int64_t rank = args.operands[0]->getType().getRank();
  if (rank < 3)
    return nodeError(flat, "expects [N, C, spatial...] of rank 3 or more, got " +
                               args.operands[0]->getType().str());
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  auto normalized = emitNormalized(
      flat, args.names[0], args.operands[0], axes, nullptr, nullptr,
      args.operands[1], args.operands[2],
      args.attrs.getFloat("epsilon").value_or(1e-5f));
  if (!normalized)
    return normalized.takeError();
  return SmallVector<Value *, 2>{normalized->y};
}

Expected<const TensorData *>
Importer::constantInput(const FlatNode &flat, ArrayRef<Value *> operands,
                        unsigned i, StringRef inputName, StringRef form) {
  if (i >= operands.size() || !operands[i])
    return nullptr;
  if (const TensorData *data = getConstantValue(operands[i]))
    return data;
  return nodeError(flat, "input '" + inputName + "' ('" +
                             operands[i]->getName() +
                             "') is not a constant at import" +
                             runtimeInputsText(operands[i]) +
                             "; remat needs static shapes, so it imports " +
                             form);
}

Importer::Results Importer::convertResize(const FlatNode &flat,
                                         NodeArgs &args) {
  // Resize(x, roi, scales, sizes), each of roi, scales and sizes omitted or
  // a constant: each resized axis becomes a Gather (nearest) or a MatMul by
  // its constant [out, in] weights, and tf_crop_and_resize's extrapolation
  // value is added where the output lies outside the roi
  // (frontends/onnx/Resize.h).
  ArrayRef<Value *> operands = args.operands;
  const std::string &name = args.names[0];
  if (operands.empty() || operands.size() > 4 || !operands[0])
    return nodeError(flat, "expects 1 to 4 inputs with the first given, got " +
                               Twine(operands.size()));
  Value *x = operands[0];
  const TensorType &type = x->getType();
  const AttrList &a = args.attrs;
  ResizeAttrs attrs;
  attrs.mode = a.getString("mode").value_or(attrs.mode);
  attrs.coordinateMode =
      a.getString("coordinate_transformation_mode").value_or(
          attrs.coordinateMode);
  attrs.nearestMode = a.getString("nearest_mode").value_or(attrs.nearestMode);
  attrs.keepAspectRatioPolicy =
      a.getString("keep_aspect_ratio_policy")
          .value_or(attrs.keepAspectRatioPolicy);
  attrs.cubicCoeffA = a.getFloat("cubic_coeff_a").value_or(-0.75f);
  attrs.extrapolationValue = a.getFloat("extrapolation_value").value_or(0.0f);
  attrs.excludeOutside = a.getInt("exclude_outside").value_or(0) != 0;
  attrs.antialias = a.getInt("antialias").value_or(0) != 0;
  attrs.axes = a.getInts("axes");

  // The constant inputs: an empty tensor stands for an omitted one.
  static const char *const kInputNames[] = {"X", "roi", "scales", "sizes"};
  auto constant = [&](unsigned i) -> Expected<const TensorData *> {
    auto data = constantInput(flat, operands, i, kInputNames[i],
                              "Resize with constant roi, scales and sizes");
    if (data && *data && (*data)->getNumElements() == 0)
      return nullptr;
    return data;
  };
  auto doubles = [](const TensorData *data) {
    std::optional<std::vector<double>> values;
    if (data) {
      values.emplace();
      for (int64_t i = 0; i < data->getNumElements(); ++i)
        values->push_back(data->getDouble(i));
    }
    return values;
  };
  // roi is read only by tf_crop_and_resize.
  std::optional<std::vector<double>> roi;
  if (attrs.coordinateMode == "tf_crop_and_resize") {
    auto data = constant(1);
    if (!data)
      return data.takeError();
    roi = doubles(*data);
  }
  auto scaleData = constant(2);
  if (!scaleData)
    return scaleData.takeError();
  auto sizeData = constant(3);
  if (!sizeData)
    return sizeData.takeError();
  std::optional<std::vector<int64_t>> sizes;
  if (*sizeData)
    sizes = (*sizeData)->getInts();
  auto plan = planResize(type.getDims(), attrs, std::move(roi),
                         doubles(*scaleData), std::move(sizes));
  if (!plan)
    return nodeError(flat, errorToString(plan.takeError()));

  int64_t rank = type.getRank();
  bool extrapolate = attrs.extrapolationValue != 0 &&
                     llvm::any_of(plan->axes, [](const ResizeAxis &axis) {
                       return axis.anyOutside();
                     });
  bool weighted = llvm::any_of(plan->axes, [](const ResizeAxis &axis) {
    return !axis.isSelection();
  });
  if ((weighted || extrapolate) && !isFloat(type.getDType()))
    return nodeError(flat, "mode '" + attrs.mode + "' interpolates " +
                               type.str() +
                               ", which needs a floating-point dtype");
  // The last node emitted takes the result's name.
  int steps = extrapolate ? 1 : 0;
  for (const ResizeAxis &axis : plan->axes)
    steps += axis.isSelection() || axis.axis >= rank - 2 ? 1 : 3;
  if (steps == 0)
    return emit(flat, OpKind::Identity, {x}, {}, {name});
  int emitted = 0;
  auto step = [&](OpKind op, ArrayRef<Value *> ins, AttrList stepAttrs,
                  const std::string &base) {
    return emitValue(flat, op, ins, std::move(stepAttrs),
                     ++emitted == steps ? name : freshName(base));
  };
  Value *current = x;
  for (const ResizeAxis &axis : plan->axes) {
    std::string base = name + ".axis" + std::to_string(axis.axis);
    int64_t in = axis.inSize, out = axis.outSize;
    Expected<Value *> next = nullptr;
    if (axis.isSelection()) {
      std::vector<int64_t> indices;
      for (const auto &row : axis.taps)
        indices.push_back(row[0].first);
      Value *constant = emitConstant(
          TensorData::fromInts(TensorType(DType::I64, {out}), indices),
          base + ".indices");
      AttrList gather;
      gather.set("axis", axis.axis);
      next = step(OpKind::Gather, {current, constant}, std::move(gather),
                  base);
    } else {
      // [out, in] on the left for the second-to-last axis, [in, out] on the
      // right for the last; another axis is swapped with the last for it.
      bool left = rank >= 2 && axis.axis == rank - 2;
      std::vector<double> weights(size_t(out * in), 0.0);
      for (int64_t y = 0; y < out; ++y)
        for (const auto &[index, weight] : axis.taps[size_t(y)])
          weights[size_t(left ? y * in + index : index * out + y)] = weight;
      Value *matrix = emitConstant(
          TensorData::fromDoubles(
              TensorType(type.getDType(),
                         left ? std::vector<int64_t>{out, in}
                              : std::vector<int64_t>{in, out}),
              weights),
          base + ".weights");
      if (left) {
        next = step(OpKind::MatMul, {matrix, current}, {}, base);
      } else if (axis.axis == rank - 1) {
        next = step(OpKind::MatMul, {current, matrix}, {}, base);
      } else {
        std::vector<int64_t> perm;
        for (int64_t i = 0; i < rank; ++i)
          perm.push_back(i);
        std::swap(perm[size_t(axis.axis)], perm[size_t(rank - 1)]);
        AttrList transpose;
        transpose.set("perm", perm);
        auto swapped = step(OpKind::Transpose, {current}, transpose,
                            base + ".swapped");
        if (!swapped)
          return swapped.takeError();
        auto product = step(OpKind::MatMul, {*swapped, matrix}, {}, base);
        if (!product)
          return product.takeError();
        next = step(OpKind::Transpose, {*product}, transpose, base);
      }
    }
    if (!next)
      return next.takeError();
    current = *next;
  }
  if (extrapolate) {
    // The extrapolation value wherever some axis lies outside its roi; the
    // interpolation is 0 there (the rows of such indices are empty).
    std::vector<int64_t> maskDims(size_t(rank), 1);
    for (const ResizeAxis &axis : plan->axes)
      if (axis.anyOutside())
        maskDims[size_t(axis.axis)] = axis.outSize;
    TensorType maskType(type.getDType(), maskDims);
    std::vector<double> mask(size_t(maskType.getNumElements()), 0.0);
    for (int64_t flatIndex = 0; flatIndex < maskType.getNumElements();
         ++flatIndex) {
      int64_t rest = flatIndex;
      bool outside = false;
      for (int64_t d = rank - 1; d >= 0; --d) {
        int64_t index = rest % maskDims[size_t(d)];
        rest /= maskDims[size_t(d)];
        for (const ResizeAxis &axis : plan->axes)
          if (axis.axis == d && maskDims[size_t(d)] > 1 &&
              axis.outside[size_t(index)])
            outside = true;
      }
      if (outside)
        mask[size_t(flatIndex)] = attrs.extrapolationValue;
    }
    Value *constant = emitConstant(TensorData::fromDoubles(maskType, mask),
                                   name + ".extrapolation");
    auto added = step(OpKind::Add, {current, constant}, {}, name);
    if (!added)
      return added.takeError();
    current = *added;
  }
  return SmallVector<Value *, 2>{current};
}

Importer::Results Importer::convertDft(const FlatNode &flat, NodeArgs &args) {
  // DFT(x, dft_length, axis), dft_length and (from opset 20) axis omitted
  // or constants: one MatMul by the transform's constant matrix over the
  // axis and the parts dim brought last, by a Transpose when the axis is not
  // the one before the parts, and a Reshape (frontends/onnx/Dft.h).
  ArrayRef<Value *> operands = args.operands;
  const std::string &name = args.names[0];
  if (operands.empty() || operands.size() > 3 || !operands[0])
    return nodeError(flat, "expects 1 to 3 inputs with the first given, got " +
                               Twine(operands.size()));
  Value *x = operands[0];
  const TensorType &type = x->getType();
  if (!isFloat(type.getDType()))
    return nodeError(flat, "transforms " + type.str() +
                               ", which needs a floating-point dtype");
  static const char *const kInputNames[] = {"input", "dft_length", "axis"};
  auto scalar = [&](unsigned i) -> Expected<std::optional<int64_t>> {
    auto data = constantInput(flat, operands, i, kInputNames[i],
                              "DFT with a constant dft_length and axis");
    if (!data)
      return data.takeError();
    if (!*data)
      return std::nullopt;
    if ((*data)->getNumElements() != 1 ||
        isFloat((*data)->getType().getDType()))
      return nodeError(flat, Twine("input '") + kInputNames[i] + "' is " +
                                 (*data)->getType().str() +
                                 ", expected one integer");
    return std::optional<int64_t>((*data)->getInt(0));
  };
  auto length = scalar(1);
  if (!length)
    return length.takeError();
  auto axisInput = scalar(2);
  if (!axisInput)
    return axisInput.takeError();
  // The axis is an attribute (default 1) before opset 20, an input (default
  // -2) from it.
  int64_t axis = flat.opset >= 20 ? axisInput->value_or(-2)
                                  : args.attrs.getInt("axis").value_or(1);
  auto plan = planDft(type.getDims(), axis, *length,
                      args.attrs.getInt("inverse").value_or(0) != 0,
                      args.attrs.getInt("onesided").value_or(0) != 0);
  if (!plan)
    return nodeError(flat, errorToString(plan.takeError()));

  int64_t rank = type.getRank();
  bool moved = plan->axis != rank - 2;
  int steps = moved ? 5 : 3, emitted = 0;
  auto step = [&](OpKind op, ArrayRef<Value *> ins, AttrList stepAttrs,
                  const std::string &base) {
    return emitValue(flat, op, ins, std::move(stepAttrs),
                     ++emitted == steps ? name : freshName(name + base));
  };
  auto reshape = [&](Value *value, ArrayRef<int64_t> dims,
                     const std::string &base) {
    Value *shape = emitConstant(
        TensorData::fromInts(
            TensorType(DType::I64, {static_cast<int64_t>(dims.size())}), dims),
        name + base + ".shape");
    return step(OpKind::Reshape, {value, shape}, {}, base);
  };
  // perm brings the axis just before the parts dim; its inverse undoes it.
  std::vector<int64_t> perm;
  std::vector<int64_t> inversePerm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank - 1; ++i)
    if (i != plan->axis)
      perm.push_back(i);
  perm.push_back(plan->axis);
  perm.push_back(rank - 1);
  for (int64_t i = 0; i < rank; ++i)
    inversePerm[size_t(perm[size_t(i)])] = i;
  Value *current = x;
  if (moved) {
    AttrList transpose;
    transpose.set("perm", perm);
    auto swapped = step(OpKind::Transpose, {current}, transpose, ".moved");
    if (!swapped)
      return swapped.takeError();
    current = *swapped;
  }
  std::vector<int64_t> outer;
  for (int64_t i = 0; i < rank - 2; ++i)
    outer.push_back(type.getDim(size_t(perm[size_t(i)])));
  std::vector<int64_t> flatDims = outer;
  flatDims.push_back(plan->inSize * plan->inParts);
  auto flattened = reshape(current, flatDims, ".signal");
  if (!flattened)
    return flattened.takeError();
  Value *matrix = emitConstant(
      TensorData::fromDoubles(TensorType(type.getDType(),
                                         {plan->inSize * plan->inParts,
                                          plan->outSize * plan->outParts}),
                              plan->matrix),
      name + ".matrix");
  auto product = step(OpKind::MatMul, {*flattened, matrix}, {}, ".spectrum");
  if (!product)
    return product.takeError();
  std::vector<int64_t> outDims = outer;
  outDims.push_back(plan->outSize);
  outDims.push_back(plan->outParts);
  auto result = reshape(*product, outDims, ".parts");
  if (!result)
    return result.takeError();
  current = *result;
  if (moved) {
    AttrList transpose;
    transpose.set("perm", inversePerm);
    auto back = step(OpKind::Transpose, {current}, transpose, ".back");
    if (!back)
      return back.takeError();
    current = *back;
  }
  return SmallVector<Value *, 2>{current};
}

Expected<Value *> Importer::tensorInput(const FlatNode &flat, int i) {
  const onnx::NodeProto &proto = *flat.proto;
  auto it = values_.find(proto.input(i));
  if (it == values_.end())
    return nodeError(flat, "input '" + proto.input(i) +
                               "' is not a tensor remat knows (a sequence "
                               "other than SplitToSequence's?)");
  return it->second;
}

Error Importer::convertSequenceAt(const FlatNode &flat, const AttrList &) {
  const onnx::NodeProto &proto = *flat.proto;
  if (proto.output_size() != 1 || proto.output(0).empty())
    return nodeError(flat, "expects 1 output");
  const std::string &name = proto.output(0);
  // SequenceAt(sequence, position) == element position (negative counts
  // from the end), as an Identity named by the output.
  if (proto.input_size() != 2)
    return nodeError(flat, "expects 2 inputs");
  auto seq = sequences_.find(proto.input(0));
  if (seq == sequences_.end())
    return nodeError(flat, "input '" + proto.input(0) +
                               "' is not a sequence SplitToSequence made; "
                               "remat supports no other sequences");
  auto position = tensorInput(flat, 1);
  if (!position)
    return position.takeError();
  const TensorData *value = getConstantValue(*position);
  if (!value || value->getNumElements() != 1)
    return nodeError(flat, "position '" + proto.input(1) +
                               "' must be a constant scalar: remat picks "
                               "the element when importing");
  int64_t size = static_cast<int64_t>(seq->second.size());
  int64_t index = value->getInts()[0];
  if (index < -size || index >= size)
    return nodeError(flat, "position " + Twine(index) +
                               " is out of range for a sequence of " +
                               Twine(size) + " tensors");
  Value *element = seq->second[index < 0 ? index + size : index];
  auto results = emit(flat, OpKind::Identity, {element}, {}, {name});
  if (!results)
    return results.takeError();
  values_[name] = (*results)[0];
  return Error::success();
}

Error Importer::convertSplitToSequence(const FlatNode &flat,
                                       const AttrList &attrs) {
  const onnx::NodeProto &proto = *flat.proto;
  if (proto.output_size() != 1 || proto.output(0).empty())
    return nodeError(flat, "expects 1 output");
  const std::string &name = proto.output(0);
  // SplitToSequence(input, split) {axis, keepdims}: a Split along axis into
  // pieces of 1 (without split; squeezed unless keepdims), of the scalar
  // split's size (the last one smaller), or of the listed sizes.
  if (proto.input_size() < 1 || proto.input_size() > 2)
    return nodeError(flat, "expects 1 or 2 inputs");
  auto input = tensorInput(flat, 0);
  if (!input)
    return input.takeError();
  const TensorType &type = (*input)->getType();
  int64_t rank = type.getRank();
  int64_t axis = attrs.getInt("axis").value_or(0);
  if (axis < -rank || axis >= rank)
    return nodeError(flat, "attribute 'axis' is " + Twine(axis) +
                               ", out of range for " + type.str());
  if (axis < 0)
    axis += rank;
  bool keepDims = attrs.getInt("keepdims").value_or(1) != 0;
  int64_t dim = type.getDim(axis);
  std::vector<int64_t> sizes;
  bool hasSplit = proto.input_size() == 2 && !proto.input(1).empty();
  if (hasSplit) {
    auto split = tensorInput(flat, 1);
    if (!split)
      return split.takeError();
    const TensorData *value = getConstantValue(*split);
    if (!value)
      return nodeError(flat, "split '" + proto.input(1) +
                                 "' must be a constant: remat imports "
                                 "SplitToSequence as a Split");
    std::vector<int64_t> values = value->getInts();
    if (value->getType().getRank() == 0) {
      if (values[0] < 1)
        return nodeError(flat, "split " + Twine(values[0]) +
                                   " must be positive");
      for (int64_t start = 0; start < dim; start += values[0])
        sizes.push_back(std::min(values[0], dim - start));
    } else {
      sizes = values;
    }
  } else {
    sizes.assign(dim, 1);
  }
  if (sizes.empty())
    return nodeError(flat, "would make an empty sequence from " + type.str());
  std::vector<std::string> names;
  for (size_t i = 0; i < sizes.size(); ++i)
    names.push_back(freshName(name + "." + std::to_string(i)));
  Value *splitSizes = emitConstant(
      TensorData::fromInts(
          TensorType(DType::I64, {static_cast<int64_t>(sizes.size())}), sizes),
      name + ".split");
  AttrList splitAttrs;
  splitAttrs.set("axis", axis);
  auto pieces =
      emit(flat, OpKind::Split, {*input, splitSizes}, std::move(splitAttrs),
           names);
  if (!pieces)
    return pieces.takeError();
  SmallVector<Value *, 4> elements(pieces->begin(), pieces->end());
  if (!hasSplit && !keepDims) {
    Value *axes = emitConstant(
        TensorData::fromInts(TensorType(DType::I64, {1}), {axis}),
        name + ".axes");
    for (Value *&element : elements) {
      auto squeezed = emit(flat, OpKind::Squeeze, {element, axes}, {},
                           {freshName(element->getName().str() + ".squeezed")});
      if (!squeezed)
        return squeezed.takeError();
      element = (*squeezed)[0];
    }
  }
  sequences_[name] = std::move(elements);
  return Error::success();
}

Importer::Results Importer::convertScatterND(const FlatNode &flat,
                                             NodeArgs &args) {
  ArrayRef<Value *> operands = args.operands;
  const AttrList &attrs = args.attrs;
  const std::string &name = args.names[0];
  // With constant indices, ScatterND is a ScatterElements along axis 0 of
  // the data reshaped so that the indexed dims are one: data [D1..Dk, R...]
  // -> [D1*..*Dk, R], updates [M..., R...] -> [M, R], and each update row
  // goes to its flat index (repeated along R). The updates are applied in
  // their order, so reduction "add"/"mul" combine duplicates as ScatterND
  // does.
  if (operands.size() != 3)
    return nodeError(flat, "expects 3 inputs, got " + Twine(operands.size()));
  const TensorData *indices = getConstantValue(operands[1]);
  if (!indices)
    return nodeError(flat, "indices '" + operands[1]->getName() +
                               "' must be a constant: remat imports "
                               "ScatterND as Reshape + ScatterElements with "
                               "computed indices");
  std::string reduction = attrs.getString("reduction").value_or("none");
  if (reduction != "none" && reduction != "add" && reduction != "mul")
    return nodeError(flat, "attribute 'reduction' is \"" + reduction +
                               "\"; remat supports \"none\", \"add\" and "
                               "\"mul\"");
  const TensorType &dataType = operands[0]->getType();
  const TensorType &indexType = indices->getType();
  const TensorType &updateType = operands[2]->getType();
  if ((indexType.getDType() != DType::I64 &&
       indexType.getDType() != DType::I32) ||
      indexType.getRank() < 1)
    return nodeError(flat, "indices must be an i64 or i32 tensor of rank >= "
                           "1, got " +
                               indexType.str());
  int64_t rank = dataType.getRank();
  int64_t k = indexType.getDim(indexType.getRank() - 1);
  if (k < 1 || k > rank)
    return nodeError(flat, "indices " + indexType.str() +
                               " index more dims than data " + dataType.str() +
                               " has");
  // updates = indices.dims[:-1] + data.dims[k:].
  ArrayRef<int64_t> leading = indexType.getDims().drop_back();
  SmallVector<int64_t, 4> expected(leading.begin(), leading.end());
  for (int64_t i = k; i < rank; ++i)
    expected.push_back(dataType.getDim(i));
  if (updateType.getDims() != ArrayRef<int64_t>(expected) ||
      updateType.getDType() != dataType.getDType())
    return nodeError(flat, "updates " + updateType.str() + " must have type " +
                               TensorType(dataType.getDType(), expected).str() +
                               " for indices " + indexType.str() +
                               " and data " + dataType.str());
  int64_t block = 1, rest = 1;
  for (int64_t i = 0; i < k; ++i)
    block *= dataType.getDim(i);
  for (int64_t i = k; i < rank; ++i)
    rest *= dataType.getDim(i);
  int64_t count = indexType.getNumElements() / k;
  std::vector<int64_t> raw = indices->getInts();
  std::vector<int64_t> flatIndices;
  flatIndices.reserve(count * rest);
  for (int64_t m = 0; m < count; ++m) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = dataType.getDim(j);
      int64_t index = raw[m * k + j];
      if (index < -dim || index >= dim)
        return nodeError(flat, "index " + Twine(index) +
                                   " is out of range for dim " + Twine(j) +
                                   " of " + dataType.str());
      offset = offset * dim + (index < 0 ? index + dim : index);
    }
    flatIndices.insert(flatIndices.end(), rest, offset);
  }
  auto reshape = [&](Value *value, ArrayRef<int64_t> dims,
                     const std::string &suffix) -> Expected<Value *> {
    Value *shape = emitConstant(
        TensorData::fromInts(
            TensorType(DType::I64, {static_cast<int64_t>(dims.size())}), dims),
        name + suffix + ".shape");
    auto result = emit(flat, OpKind::Reshape, {value, shape}, {},
                       {freshName(name + suffix)});
    if (!result)
      return result.takeError();
    return (*result)[0];
  };
  auto data = reshape(operands[0], {block, rest}, ".flat");
  if (!data)
    return data.takeError();
  auto updates = reshape(operands[2], {count, rest}, ".updates");
  if (!updates)
    return updates.takeError();
  Value *index = emitConstant(
      TensorData::fromInts(TensorType(DType::I64, {count, rest}), flatIndices),
      name + ".indices");
  AttrList scatterAttrs;
  scatterAttrs.set("axis", int64_t{0});
  scatterAttrs.set("reduction", reduction);
  auto scattered = emit(flat, OpKind::ScatterElements, {*data, index, *updates},
                        std::move(scatterAttrs),
                        {freshName(name + ".scattered")});
  if (!scattered)
    return scattered.takeError();
  Value *shape = emitConstant(
      TensorData::fromInts(TensorType(DType::I64, {rank}), dataType.getDims()),
      name + ".shape");
  return emit(flat, OpKind::Reshape, {(*scattered)[0], shape}, {}, {name});
}

Importer::Results Importer::convertEinsum(const FlatNode &flat,
                                          NodeArgs &args) {
  const std::string &name = args.names[0];
  std::optional<std::string> equation = args.attrs.getString("equation");
  if (!equation)
    return nodeError(flat, "needs the attribute 'equation'");
  std::vector<std::vector<int64_t>> dims;
  for (Value *operand : args.operands) {
    ArrayRef<int64_t> d = operand->getType().getDims();
    dims.emplace_back(d.begin(), d.end());
  }
  auto spec = parseEinsum(*equation, dims);
  if (!spec)
    return nodeError(flat, "equation '" + *equation +
                               "': " + errorToString(spec.takeError()));
  auto node = [&](OpKind op, ArrayRef<Value *> operands,
                  AttrList attrs) -> Expected<Value *> {
    auto results = emit(flat, op, operands, std::move(attrs),
                        {freshName(name + ".einsum")});
    if (!results)
      return results.takeError();
    return (*results)[0];
  };
  auto ints = [&](ArrayRef<int64_t> values) {
    return emitConstant(
        TensorData::fromInts(
            TensorType(DType::I64, {static_cast<int64_t>(values.size())}),
            values),
        name + ".einsum.shape");
  };
  auto result = emitEinsum(*spec, args.operands, node, ints);
  if (!result)
    return result.takeError();
  // The last node's result takes the node's name; an equation that only
  // renames its operand ("ij->ij") becomes an Identity.
  if (llvm::is_contained(args.operands, *result))
    return emit(flat, OpKind::Identity, {*result}, {}, {name});
  (*result)->setName(name);
  producers_[name] = describe(flat);
  return SmallVector<Value *, 2>{*result};
}

std::string Importer::runtimeInputsText(const Value *value) const {
  std::vector<std::string> inputs;
  unsigned count = 0;
  llvm::SmallPtrSet<const Value *, 32> seen{value};
  SmallVector<const Value *, 32> work{value};
  while (!work.empty()) {
    const Value *next = work.pop_back_val();
    if (next->isGraphInput()) {
      if (!next->isWeight() && count++ < 3)
        inputs.push_back("'" + next->getName().str() + "'");
      continue;
    }
    for (const Value *operand : next->getDefiningNode()->getOperands())
      if (operand && seen.insert(operand).second)
        work.push_back(operand);
  }
  if (inputs.empty())
    return "";
  std::sort(inputs.begin(), inputs.end());
  std::string text = count == 1 ? ", which depends on graph input "
                                : ", which depends on graph inputs ";
  for (size_t i = 0; i < inputs.size(); ++i)
    text += (i ? ", " : "") + inputs[i];
  if (count > inputs.size())
    text += " and " + std::to_string(count - inputs.size()) + " more";
  return text;
}

Importer::Results Importer::convertNonZero(const FlatNode &flat,
                                           NodeArgs &args) {
  // NonZero(x) is i64[rank, n], the indices of x's n nonzero elements in
  // row-major order: n depends on x's values, so remat, whose shapes are
  // static, evaluates it here when x is a constant (a mask made from
  // shapes), and refuses it otherwise.
  if (args.operands.size() != 1)
    return nodeError(flat,
                     "expects 1 input, got " + Twine(args.operands.size()));
  const Value *input = args.operands[0];
  const TensorData *data = getConstantValue(input);
  if (!data) {
    std::string text = "the shape of NonZero's result is the number of "
                       "nonzero elements of input 0 ('" +
                       input->getName().str() +
                       "'), which is not a constant at import";
    if (auto it = producers_.find(input->getName()); it != producers_.end())
      text += " (it is computed by " + it->second + ")";
    if (input->isGraphInput())
      text +=
          input->isWeight() ? " (it is a weight)" : " (it is a graph input)";
    else
      text += runtimeInputsText(input);
    if (auto it = foldFailures_.find(input->getName());
        it != foldFailures_.end())
      text += "; evaluating it at import failed: " + it->second;
    return nodeError(flat, text + "; remat needs static shapes, so it "
                                  "evaluates NonZero only on constants");
  }
  const TensorType &type = data->getType();
  int64_t rank = type.getRank();
  if (rank == 0)
    return nodeError(flat, "NonZero of a scalar (" + type.str() +
                               ") is not supported");
  std::vector<int64_t> nonzero;
  for (int64_t i = 0, e = data->getNumElements(); i < e; ++i)
    if (data->getDouble(i) != 0.0)
      nonzero.push_back(i);
  int64_t count = nonzero.size();
  if (rank * count * int64_t(sizeof(int64_t)) > kMaxFoldBytes)
    return nodeError(flat, "NonZero of " + type.str() + " has " + Twine(count) +
                               " nonzero elements, too many to evaluate at "
                               "import (at most " +
                               Twine(kMaxFoldBytes) + " bytes of indices)");
  // indices[d][j] = coordinate d of the j-th nonzero element.
  std::vector<int64_t> indices(rank * count);
  for (int64_t j = 0; j < count; ++j) {
    int64_t flatIndex = nonzero[j];
    for (int64_t d = rank - 1; d >= 0; --d) {
      indices[d * count + j] = flatIndex % type.getDim(d);
      flatIndex /= type.getDim(d);
    }
  }
  TensorType resultType(DType::I64, {rank, count});
  AttrList attrs;
  attrs.set("value", TensorData::fromInts(resultType, indices));
  Node *node = graph_->createNode(OpKind::Constant, {}, {resultType},
                                  {args.names[0]}, std::move(attrs));
  producers_[args.names[0]] = describe(flat);
  return SmallVector<Value *, 2>{node->getResult(0)};
}

Importer::Results Importer::convertGatherND(const FlatNode &flat,
                                            NodeArgs &args) {
  ArrayRef<Value *> operands = args.operands;
  const AttrList &attrs = args.attrs;
  const std::string &name = args.names[0];
  // GatherND is a Gather on the data reshaped so that the indexed dims are
  // one: data [B..., D1..Dk, R...] -> [B*D1*..*Dk, R...], flat index = b *
  // D1*..*Dk + sum(i_j * stride_j), computed here for constant indices and
  // by nodes otherwise (gatherNDIndices).
  if (operands.size() != 2)
    return nodeError(flat, "expects 2 inputs, got " + Twine(operands.size()));
  const TensorData *indices = getConstantValue(operands[1]);
  const TensorType &dataType = operands[0]->getType();
  const TensorType &indexType = operands[1]->getType();
  if (indexType.getDType() != DType::I64 || indexType.getRank() < 1)
    return nodeError(flat, "indices must be an i64 tensor of rank >= 1, got " +
                               indexType.str());
  int64_t batchDims = attrs.getInt("batch_dims").value_or(0);
  int64_t rank = dataType.getRank();
  int64_t indexRank = indexType.getRank();
  int64_t k = indexType.getDim(indexRank - 1);
  if (batchDims < 0 || batchDims >= std::min(rank, indexRank) ||
      k > rank - batchDims)
    return nodeError(flat, "cannot gather " + indexType.str() + " from " +
                               dataType.str() + " with batch_dims " +
                               Twine(batchDims));
  for (int64_t i = 0; i < batchDims; ++i)
    if (indexType.getDim(i) != dataType.getDim(i))
      return nodeError(flat, "batch dim " + Twine(i) + " of indices " +
                                 indexType.str() + " differs from data " +
                                 dataType.str());
  int64_t batch = 1, block = 1;
  for (int64_t i = 0; i < batchDims; ++i)
    batch *= dataType.getDim(i);
  for (int64_t i = batchDims; i < batchDims + k; ++i)
    block *= dataType.getDim(i);
  // Indices per batch entry: the dims between the batch dims and k.
  int64_t perBatch = 1;
  for (int64_t i = batchDims; i < indexRank - 1; ++i)
    perBatch *= indexType.getDim(i);
  SmallVector<int64_t, 4> flatShape = {batch * block};
  for (int64_t i = batchDims + k; i < rank; ++i)
    flatShape.push_back(dataType.getDim(i));
  ArrayRef<int64_t> gatherShape = indexType.getDims().drop_back();
  Value *shape = emitConstant(
      TensorData::fromInts(
          TensorType(DType::I64, {static_cast<int64_t>(flatShape.size())}),
          flatShape),
      name + ".shape");
  auto reshaped = emit(flat, OpKind::Reshape, {operands[0], shape}, {},
                       {freshName(name + ".flat")});
  if (!reshaped)
    return reshaped.takeError();
  AttrList gatherAttrs;
  gatherAttrs.set("axis", int64_t{0});

  if (!indices) {
    auto index = gatherNDIndices(flat, operands[1], dataType, batchDims, name);
    if (!index)
      return index.takeError();
    return emit(flat, OpKind::Gather, {(*reshaped)[0], *index},
                std::move(gatherAttrs), {name});
  }
  std::vector<int64_t> raw = indices->getInts();
  std::vector<int64_t> flatIndices;
  flatIndices.reserve(batch * perBatch);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t m = 0; m < perBatch; ++m) {
      const int64_t *tuple = raw.data() + (b * perBatch + m) * k;
      int64_t offset = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t dim = dataType.getDim(batchDims + j);
        int64_t index = tuple[j];
        if (index < -dim || index >= dim)
          return nodeError(flat, "index " + Twine(index) +
                                     " is out of range "
                                     "for dim " +
                                     Twine(batchDims + j) + " of " +
                                     dataType.str());
        if (index < 0)
          index += dim;
        offset = offset * dim + index;
      }
      flatIndices.push_back(b * block + offset);
    }
  }
  Value *index = emitConstant(
      TensorData::fromInts(TensorType(DType::I64, gatherShape), flatIndices),
      name + ".indices");
  return emit(flat, OpKind::Gather, {(*reshaped)[0], index},
              std::move(gatherAttrs), {name});
}

Expected<Value *> Importer::gatherNDIndices(const FlatNode &flat,
                                            Value *indices,
                                            const TensorType &dataType,
                                            int64_t batchDims,
                                            const std::string &name) {
  // indices [B..., M..., k] -> flat index [B..., M...]: negative entries
  // wrapped by their dim, dotted with the row-major strides of D1..Dk, plus
  // b * D1*..*Dk. A tuple with an entry outside its dim gets the flat index
  // B*D1*..*Dk, outside the reshaped data, so that Gather's range check
  // reports it when the step runs.
  const TensorType &indexType = indices->getType();
  int64_t indexRank = indexType.getRank();
  int64_t k = indexType.getDim(indexRank - 1);
  std::vector<int64_t> dims, strides(k, 1);
  for (int64_t j = 0; j < k; ++j)
    dims.push_back(dataType.getDim(batchDims + j));
  for (int64_t j = k - 1; j > 0; --j)
    strides[j - 1] = strides[j] * dims[j];
  int64_t block = k ? strides[0] * dims[0] : 1, batch = 1;
  for (int64_t i = 0; i < batchDims; ++i)
    batch *= dataType.getDim(i);
  TensorType vector(DType::I64, {k});
  Value *dimsValue =
      emitConstant(TensorData::fromInts(vector, dims), name + ".dims");
  Value *stridesValue =
      emitConstant(TensorData::fromInts(vector, strides), name + ".strides");
  Value *zero = emitConstant(
      TensorData::fromInts(TensorType(DType::I64, {}), {0}), name + ".zero");
  Value *lastAxis = emitConstant(
      TensorData::fromInts(TensorType(DType::I64, {1}), {-1}), name + ".axis");
  // One node: its single result, named from name + suffix.
  auto node = [&](OpKind op, ArrayRef<Value *> operands, StringRef suffix,
                  AttrList attrs = {}) -> Expected<Value *> {
    auto results = emit(flat, op, operands, std::move(attrs),
                        {freshName((name + suffix).str())});
    if (!results)
      return results.takeError();
    return (*results)[0];
  };
  auto negative = node(OpKind::Less, {indices, zero}, ".negative");
  if (!negative)
    return negative.takeError();
  auto shifted = node(OpKind::Add, {indices, dimsValue}, ".shifted");
  if (!shifted)
    return shifted.takeError();
  auto wrapped =
      node(OpKind::Where, {*negative, *shifted, indices}, ".wrapped");
  if (!wrapped)
    return wrapped.takeError();
  // Out of range: wrapped < 0 or wrapped >= dim, counted per tuple.
  auto below = node(OpKind::Less, {*wrapped, zero}, ".below");
  if (!below)
    return below.takeError();
  auto above = node(OpKind::GreaterOrEqual, {*wrapped, dimsValue}, ".above");
  if (!above)
    return above.takeError();
  auto outside = node(OpKind::Or, {*below, *above}, ".outside");
  if (!outside)
    return outside.takeError();
  AttrList toI64;
  toI64.set("to", int64_t{onnx::TensorProto::INT64});
  auto outsideCount = node(OpKind::Cast, {*outside}, ".outside_i64", toI64);
  if (!outsideCount)
    return outsideCount.takeError();
  AttrList dropAxis;
  dropAxis.set("keepdims", int64_t{0});
  auto bad =
      node(OpKind::ReduceSum, {*outsideCount, lastAxis}, ".bad", dropAxis);
  if (!bad)
    return bad.takeError();
  auto scaled = node(OpKind::Mul, {*wrapped, stridesValue}, ".scaled");
  if (!scaled)
    return scaled.takeError();
  auto offset =
      node(OpKind::ReduceSum, {*scaled, lastAxis}, ".offset", dropAxis);
  if (!offset)
    return offset.takeError();
  Value *index = *offset;
  if (batchDims > 0) {
    // b * block for each batch entry, broadcast over the M dims.
    SmallVector<int64_t, 4> baseDims(indexType.getDims().begin(),
                                     indexType.getDims().drop_back().end());
    for (int64_t i = batchDims; i < indexRank - 1; ++i)
      baseDims[i] = 1;
    std::vector<int64_t> bases;
    for (int64_t b = 0; b < batch; ++b)
      bases.push_back(b * block);
    Value *base = emitConstant(
        TensorData::fromInts(TensorType(DType::I64, baseDims), bases),
        name + ".batch_base");
    auto added = node(OpKind::Add, {index, base}, ".batched");
    if (!added)
      return added.takeError();
    index = *added;
  }
  auto isBad = node(OpKind::Greater, {*bad, zero}, ".is_bad");
  if (!isBad)
    return isBad.takeError();
  Value *past = emitConstant(
      TensorData::fromInts(TensorType(DType::I64, {}), {batch * block}),
      name + ".past_end");
  return node(OpKind::Where, {*isBad, past, index}, ".indices");
}

Value *Importer::tryFold(Node *node) {
  if (node->getOp() == OpKind::Constant || node->getNumResults() != 1)
    return nullptr;
  SmallVector<const TensorData *, 4> data;
  for (Value *operand : node->getOperands()) {
    const TensorData *value = getConstantValue(operand);
    if (!value && node->getOp() != OpKind::Shape)
      return nullptr;
    data.push_back(value);
  }
  Value *result = node->getResult(0);
  if (result->getType().getByteSize() > kMaxFoldBytes)
    return nullptr;
  auto folded = options_.evaluator(*node, data);
  if (!folded) {
    foldFailures_[result->getName()] = errorToString(folded.takeError());
    return nullptr;
  }
  std::string name = result->getName().str();
  TensorType type = result->getType();
  node->dropAllOperands();
  graph_->eraseNode(node);
  AttrList attrs;
  attrs.set("value", std::move((*folded)[0]));
  return graph_
      ->createNode(OpKind::Constant, {}, {type}, {name}, std::move(attrs))
      ->getResult(0);
}

std::string Importer::unknownShapeReason(const Node &node) const {
  // The operands whose values decide result shapes, per op.
  SmallVector<unsigned, 4> candidates;
  switch (node.getOp()) {
  case OpKind::ConstantOfShape:
    candidates = {0};
    break;
  case OpKind::Range:
    candidates = {0, 1, 2};
    break;
  case OpKind::Slice:
    candidates = {1, 2, 3, 4};
    break;
  default:
    candidates = {1};
    break;
  }
  for (unsigned i : candidates) {
    if (i >= node.getNumOperands())
      continue;
    const Value *operand = node.getOperand(i);
    if (getConstantValue(operand))
      continue;
    std::string text = "operand " + std::to_string(i) + " ('" +
                       operand->getName().str() + "') is not a constant";
    if (operand->isGraphInput())
      text +=
          operand->isWeight() ? " (it is a weight)" : " (it is a graph input)";
    else if (auto it = producers_.find(operand->getName());
             it != producers_.end())
      text += " (it is computed by " + it->second + ")";
    if (auto it = foldFailures_.find(operand->getName());
        it != foldFailures_.end())
      text += "; evaluating it at import failed: " + it->second;
    return text;
  }
  return "an operand it depends on is not a constant";
}

std::string
Importer::formatDeclared(const onnx::TypeProto_Tensor &tensor) const {
  std::optional<DType> dtype = fromOnnxCode(tensor.elem_type());
  std::string text = tensor.elem_type() == 0 ? std::string("?")
                     : dtype                 ? dtypeName(*dtype).str()
                             : onnxDTypeName(tensor.elem_type());
  if (!tensor.has_shape())
    return text + "[...]";
  text += "[";
  for (int i = 0; i < tensor.shape().dim_size(); ++i) {
    const onnx::TensorShapeProto_Dimension &dim = tensor.shape().dim(i);
    if (i)
      text += ",";
    if (dim.has_dim_value()) {
      text += std::to_string(dim.dim_value());
    } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
      auto it = options_.bindings.find(dim.dim_param());
      text += it != options_.bindings.end()
                  ? dim.dim_param() + "=" + std::to_string(it->second)
                  : dim.dim_param();
    } else {
      text += "?";
    }
  }
  return text + "]";
}

Error Importer::checkDeclared(const Value *value,
                              const onnx::TypeProto &declared,
                              const Twine &what) {
  if (declared.value_case() == onnx::TypeProto::VALUE_NOT_SET)
    return Error::success();
  if (!declared.has_tensor_type())
    return fileError(what + " is declared as a non-tensor type, but it is " +
                     value->getType().str());
  const onnx::TypeProto_Tensor &tensor = declared.tensor_type();
  const TensorType &type = value->getType();
  auto mismatch = [&]() {
    return fileError(what + " is declared " + formatDeclared(tensor) +
                     ", but inference gives " + type.str() +
                     " (declared shapes that contradict inference are "
                     "errors)");
  };
  if (tensor.elem_type() != 0) {
    std::optional<DType> dtype = fromOnnxCode(tensor.elem_type());
    if (!dtype || *dtype != type.getDType())
      return mismatch();
  }
  if (!tensor.has_shape())
    return Error::success();
  if (tensor.shape().dim_size() != static_cast<int>(type.getRank()))
    return mismatch();
  for (int i = 0; i < tensor.shape().dim_size(); ++i) {
    const onnx::TensorShapeProto_Dimension &dim = tensor.shape().dim(i);
    if (dim.has_dim_value()) {
      if (dim.dim_value() != type.getDim(i))
        return mismatch();
      continue;
    }
    if (!dim.has_dim_param())
      continue;
    // Symbolic dims the bindings do not name (an exporter's "s0", "2*s1")
    // are not checked.
    auto it = options_.bindings.find(dim.dim_param());
    if (it != options_.bindings.end() && it->second != type.getDim(i))
      return mismatch();
  }
  return Error::success();
}

Expected<SmallVector<Value *, 2>>
Importer::emit(const FlatNode &flat, OpKind op, ArrayRef<Value *> operands,
               AttrList attrs, ArrayRef<std::string> names) {
  SmallVector<TensorType, 2> placeholders(names.size());
  Node *node =
      graph_->createNode(op, operands, placeholders, names, std::move(attrs));
  if (writtenByRemat_) {
    const std::string &doc = flat.proto->doc_string();
    if (doc == "stage=bwd")
      node->setStage(Stage::Backward);
    else if (doc == "stage=remat")
      node->setStage(Stage::Recompute);
  }
  auto inferred = inferTypes(*node);
  if (!inferred)
    return nodeError(flat, errorToString(inferred.takeError()));
  for (unsigned i = 0; i < node->getNumResults(); ++i) {
    const InferredType &type = (*inferred)[i];
    if (!type.shapeKnown)
      return nodeError(flat, "cannot infer a static shape for '" + names[i] +
                                 "': " + unknownShapeReason(*node));
    node->getResult(i)->setType(type.type);
  }
  SmallVector<Value *, 2> results = node->getResults();
  std::string description = describe(flat);
  for (Value *result : results)
    producers_[result->getName()] = description;
  if (Value *folded = tryFold(node))
    results = {folded};
  return results;
}

// Note [Converter table]
// ~~~~~~~~~~~~~~~~~~~~~~~
// One table says how every ONNX op type remat reads becomes IR, keyed by
// domain and op type. Its rows come from ir/Ops.def: each op of the default
// domain, and each remat op with an OnnxSince (Gelu, ONNX opset 20), under
// its ONNX name with that opset; each remat op under "remat.Name", with no
// opset bound. They convert directly (the node becomes the op as it is),
// except the few whose ONNX form differs from remat's opset-17 one
// (Constant's value forms, ReduceMean/ReduceMax/ReduceL2/ReduceLogSumExp axes
// inputs, Split's num_outputs, Dropout's seed, Cast's saturate, Transpose's
// negative perm entries). Then the op
// types remat has no op for but converts at import with constant indices or
// sizes (Flatten, GatherND, CastLike, ScatterND, Einsum, NonZero of a
// constant, the normalisations and global pools, Resize, DFT) and the two sequence ops (SplitToSequence, SequenceAt), whose
// converters read the node's proto
// because their inputs or results are sequences rather than tensors.
// The unsupported-op error names these from the table
// (supportedOpsSentence), so it stays true as conversions are added.
const llvm::StringMap<Importer::Converter> &Importer::converterTable() {
  // Built once, read-only afterwards.
  static const llvm::StringMap<Converter> table = [] {
    llvm::StringMap<Converter> map;
    for (OpKind op : allOps()) {
      const OpInfo &info = getOpInfo(op);
      if (info.onnxSince > 0)
        map["." + info.name.str()] = {op, info.onnxSince,
                                      &Importer::convertDirect};
      if (!info.domain.empty())
        map[(info.domain + "." + info.name).str()] = {
            op, 0, &Importer::convertDirect};
    }
    auto setConvert = [&](StringRef opType, auto convert) {
      assert(map.count(opType) && "a converter for an op remat lacks");
      map[opType].convert = convert;
    };
    setConvert(".Constant", &Importer::convertConstant);
    setConvert(".ReduceMean", &Importer::convertAttrReduction);
    setConvert(".ReduceMax", &Importer::convertAttrReduction);
    setConvert(".ReduceL2", &Importer::convertAttrReduction);
    setConvert(".ReduceLogSumExp", &Importer::convertAttrReduction);
    setConvert(".Split", &Importer::convertSplit);
    setConvert(".Dropout", &Importer::convertDropout);
    setConvert(".Cast", &Importer::convertCast);
    setConvert(".Transpose", &Importer::convertTranspose);
    map[".Flatten"] = {std::nullopt, 1, &Importer::convertFlatten};
    map[".GatherND"] = {std::nullopt, 11, &Importer::convertGatherND};
    map[".CastLike"] = {std::nullopt, 15, &Importer::convertCastLike};
    map[".ScatterND"] = {std::nullopt, 11, &Importer::convertScatterND};
    map[".Einsum"] = {std::nullopt, 12, &Importer::convertEinsum};
    map[".NonZero"] = {std::nullopt, 9, &Importer::convertNonZero};
    map[".GlobalAveragePool"] = {std::nullopt, 1, &Importer::convertGlobalPool};
    map[".GlobalMaxPool"] = {std::nullopt, 1, &Importer::convertGlobalPool};
    map[".BatchNormalization"] = {std::nullopt, 14,
                                  &Importer::convertBatchNormalization};
    map[".InstanceNormalization"] = {std::nullopt, 6,
                                     &Importer::convertInstanceNormalization};
    map[".Resize"] = {std::nullopt, 11, &Importer::convertResize, nullptr,
                      /*takesOmittedInputs=*/true};
    map[".DFT"] = {std::nullopt, 17, &Importer::convertDft, nullptr,
                   /*takesOmittedInputs=*/true};
    map[".SplitToSequence"] = {std::nullopt, 11, nullptr,
                               &Importer::convertSplitToSequence};
    map[".SequenceAt"] = {std::nullopt, 11, nullptr,
                          &Importer::convertSequenceAt};
    return map;
  }();
  return table;
}

const Importer::Converter *Importer::findConverter(const FlatNode &flat) {
  StringRef domain = flat.proto->domain();
  if (isDefaultDomain(domain))
    domain = "";
  else if (domain != "remat")
    return nullptr;
  const llvm::StringMap<Converter> &table = converterTable();
  auto it = table.find((domain + "." + flat.proto->op_type()).str());
  return it == table.end() ? nullptr : &it->second;
}

StringRef Importer::supportedOpsSentence() {
  static const std::string sentence = [] {
    std::vector<std::string> converted;
    for (const auto &entry : converterTable())
      if (!entry.second.op && entry.first().startswith("."))
        converted.push_back(entry.first().drop_front().str());
    llvm::sort(converted);
    std::string text = "remat supports the ops of ir/Ops.def";
    if (!converted.empty()) {
      text += " and converts ";
      for (size_t i = 0; i < converted.size(); ++i) {
        if (i > 0)
          text += i + 1 == converted.size() ? " and " : ", ";
        text += converted[i];
      }
      text += " to them at import";
    }
    return text + "; no other domain than ai.onnx and remat";
  }();
  return sentence;
}

// Note [Accepted attributes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A default-domain node may carry the attributes ONNX defines for its op at
// the node's opset, and no other: a typo (Transpose 'prem') would otherwise
// be ignored and the op run with its default. libonnx's schemas say which
// up to opset 17; the table below adds what opsets 18-20 added to the op
// types the converter table reads. Attributes an op's ONNX form has and
// remat ignores (Cast's 'saturate' on floats, Dropout's 'seed' when a
// training-mode input decides) are accepted, since exporters write them.
// remat's own domain is written by remat and not checked here.
Error Importer::checkAttributeNames(const FlatNode &flat) const {
  const onnx::NodeProto &node = *flat.proto;
  if (!isDefaultDomain(node.domain()) || node.attribute_size() == 0)
    return Error::success();
  static const llvm::StringMap<std::vector<StringRef>> kAddedAfterOpset17 = {
      {"Split", {"num_outputs"}},                           // opset 18
      {"Cast", {"saturate"}},                               // opset 19
      {"CastLike", {"saturate"}},                           // opset 19
      {"Gelu", {"approximate"}},                            // opset 20
      {"Pad", {"mode"}},                                    // opset 18 ('wrap')
      {"AveragePool", {"dilations"}},                       // opset 19
      {"ReduceMean", {"keepdims", "noop_with_empty_axes"}}, // opset 18
      {"ReduceMax", {"keepdims", "noop_with_empty_axes"}},  // opset 18
      {"ReduceL2", {"keepdims", "noop_with_empty_axes"}},   // opset 18
      {"ReduceLogSumExp", {"keepdims", "noop_with_empty_axes"}}, // opset 18
      {"Resize", {"antialias", "axes", "keep_aspect_ratio_policy"}}, // 18
  };
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), int(std::min<int64_t>(flat.opset, INT_MAX)), "");
  auto added = kAddedAfterOpset17.find(node.op_type());
  if (!schema && added == kAddedAfterOpset17.end())
    return Error::success();
  auto accepts = [&](StringRef name) {
    if (schema && schema->attributes().count(name.str()))
      return true;
    return added != kAddedAfterOpset17.end() &&
           llvm::is_contained(added->second, name);
  };
  for (const onnx::AttributeProto &attr : node.attribute()) {
    // A subgraph is refused with its own message (convertAttributes).
    if (accepts(attr.name()) || attr.type() == onnx::AttributeProto::GRAPH ||
        attr.type() == onnx::AttributeProto::GRAPHS)
      continue;
    std::vector<std::string> names;
    if (schema)
      for (const auto &entry : schema->attributes())
        names.push_back(entry.first);
    if (added != kAddedAfterOpset17.end())
      for (StringRef name : added->second)
        if (!llvm::is_contained(names, name.str()))
          names.push_back(name.str());
    llvm::sort(names);
    std::string list;
    for (const std::string &name : names)
      list += (list.empty() ? "'" : ", '") + name + "'";
    return nodeError(flat, "unknown attribute '" +
                               escapeForMessage(attr.name()) + "' (" +
                               node.op_type() + " takes " +
                               (list.empty() ? "none" : list) + ")");
  }
  return Error::success();
}

Error Importer::checkOpsSupported() const {
  struct Unsupported {
    std::string opType;
    unsigned count = 0;
    const FlatNode *first = nullptr;
  };
  std::vector<Unsupported> unsupported;
  for (const FlatNode &flat : flatNodes_) {
    if (findConverter(flat))
      continue;
    std::string key = flat.proto->op_type();
    if (!isDefaultDomain(flat.proto->domain()))
      key = flat.proto->domain() + "." + key;
    auto it = llvm::find_if(unsupported, [&](const Unsupported &entry) {
      return entry.opType == key;
    });
    if (it == unsupported.end()) {
      unsupported.push_back({key, 0, &flat});
      it = std::prev(unsupported.end());
    }
    ++it->count;
  }
  if (unsupported.empty())
    return Error::success();
  StringRef supported = supportedOpsSentence();
  if (unsupported.size() == 1) {
    const Unsupported &only = unsupported.front();
    std::string message = describeFull(*only.first) + ": unsupported op '" +
                          only.first->proto->op_type() + "' (";
    message += supported;
    message += ")";
    if (only.count > 1)
      message += "; " + std::to_string(only.count) + " nodes use it";
    return fileError(message);
  }
  std::string list;
  for (const Unsupported &entry : unsupported) {
    if (!list.empty())
      list += ", ";
    list += "'" + entry.opType + "' (" + std::to_string(entry.count) +
            (entry.count == 1 ? " node: " : " nodes, the first ") +
            describe(*entry.first) + ")";
  }
  std::string message = std::to_string(unsupported.size()) +
                        " unsupported op types: " + list + " (";
  message += supported;
  message += ")";
  return fileError(message);
}

Error Importer::convertNode(const FlatNode &flat) {
  const onnx::NodeProto &proto = *flat.proto;
  StringRef opType = proto.op_type();

  // checkOpsSupported() has refused the model if any node has none.
  const Converter *converter = findConverter(flat);
  assert(converter && "checkOpsSupported() checked every node");
  // Only rows of the default domain have an opset bound.
  if (flat.opset < converter->since)
    return fileError(describeFull(flat) + ": unsupported op: '" + opType +
                     "' exists in the default domain from opset " +
                     Twine(converter->since));

  if (auto err = checkAttributeNames(flat))
    return err;
  auto attrs = convertAttributes(flat);
  if (!attrs)
    return attrs.takeError();
  if (converter->convertSequence)
    return (this->*converter->convertSequence)(flat, *attrs);

  // Operands: trailing omitted inputs are dropped, omitted ones in the
  // middle take the op's default.
  int lastInput = proto.input_size() - 1;
  while (lastInput >= 0 && proto.input(lastInput).empty())
    --lastInput;
  SmallVector<Value *, 4> operands;
  for (int i = 0; i <= lastInput; ++i) {
    const std::string &name = proto.input(i);
    if (name.empty()) {
      if (converter->takesOmittedInputs) {
        operands.push_back(nullptr);
        continue;
      }
      if (!converter->op)
        return nodeError(flat, "input " + Twine(i) + " is omitted");
      auto value = defaultOperand(flat, *converter->op, i, operands);
      if (!value)
        return value.takeError();
      operands.push_back(*value);
      continue;
    }
    if (sequences_.count(name))
      return nodeError(flat, "input '" + name +
                                 "' is a tensor sequence; remat reads "
                                 "sequences only with SequenceAt");
    auto it = values_.find(name);
    assert(it != values_.end() && "sortNodes() checked every input");
    operands.push_back(it->second);
  }

  // Results: trailing omitted outputs are dropped, omitted ones in the
  // middle get fresh names.
  int lastOutput = proto.output_size() - 1;
  while (lastOutput >= 0 && proto.output(lastOutput).empty())
    --lastOutput;
  if (lastOutput < 0)
    return nodeError(flat, "has no outputs");
  std::vector<std::string> names;
  for (int i = 0; i <= lastOutput; ++i) {
    const std::string &name = proto.output(i);
    names.push_back(name.empty() ? freshName(proto.output(lastOutput) +
                                             ".unused" + std::to_string(i))
                                 : name);
  }

  NodeArgs args{converter->op, std::move(operands), std::move(*attrs),
                std::move(names)};
  Results results = (this->*converter->convert)(flat, args);
  if (!results)
    return results.takeError();

  for (size_t i = 0; i < results->size(); ++i) {
    const std::string &name = proto.output(i);
    if (name.empty())
      continue;
    Value *value = (*results)[i];
    values_[name] = value;
    auto it = valueInfo_.find(name);
    if (it == valueInfo_.end())
      continue;
    if (auto err =
            checkDeclared(value, *it->second,
                          "value '" + name + "' (from " + describe(flat) + ")"))
      return err;
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// The whole import
//===----------------------------------------------------------------------===//

Expected<std::unique_ptr<Graph>> Importer::run() {
  // The initializers and external data count towards one total.
  LoadBudget budget;
  if (model_.ir_version() < kMinIrVersion ||
      model_.ir_version() > kMaxIrVersion)
    return fileError("unsupported ONNX IR version " +
                     Twine(model_.ir_version()) +
                     " (remat imports IR versions " + Twine(kMinIrVersion) +
                     " to " + Twine(kMaxIrVersion) + ")");
  if (auto err = checkOpsets())
    return std::move(err);
  if (graphProto_.sparse_initializer_size() != 0)
    return fileError("initializer '" +
                     graphProto_.sparse_initializer(0).values().name() +
                     "' is sparse, which remat does not support");

  graph_ = std::make_unique<Graph>(
      graphProto_.name().empty() ? "main" : graphProto_.name());
  graph_->setSourceName(source_);

  // Every ONNX name is reserved before any name is generated.
  for (const onnx::ValueInfoProto &input : graphProto_.input())
    reserve(input.name());
  for (const onnx::TensorProto &init : graphProto_.initializer()) {
    reserve(init.name());
    if (!initializers_.insert({init.name(), &init}).second)
      return fileError("initializer '" + init.name() + "' is defined twice");
  }
  for (const onnx::NodeProto &node : graphProto_.node())
    for (const std::string &output : node.output())
      reserve(output);
  for (const onnx::ValueInfoProto &info : graphProto_.value_info())
    valueInfo_[info.name()] = &info.type();

  if (auto err = collectFunctions())
    return std::move(err);
  std::vector<const onnx::NodeProto *> nodes;
  for (const onnx::NodeProto &node : graphProto_.node())
    nodes.push_back(&node);
  {
    llvm::DenseMap<const LocalFunction *, uint64_t> sizes;
    llvm::SmallPtrSet<const LocalFunction *, 8> path;
    if (countInlined(nodes, defaultOpset_, sizes, path) > kMaxGraphNodes)
      return fileError(tooManyNodesMessage());
  }
  if (auto err = flatten(nodes, defaultOpset_, "", 0))
    return std::move(err);
  if (auto err = sortNodes())
    return std::move(err);
  if (auto err = checkOpsSupported())
    return std::move(err);

  if (auto err = importInputs())
    return std::move(err);
  if (auto err = importInitializers())
    return std::move(err);
  for (const FlatNode &flat : flatNodes_)
    if (auto err = convertNode(flat))
      return std::move(err);

  for (const onnx::ValueInfoProto &output : graphProto_.output()) {
    auto it = values_.find(output.name());
    if (it == values_.end())
      return fileError("graph output '" + output.name() + "' is not defined");
    graph_->addOutput(it->second);
    if (auto err = checkDeclared(it->second, output.type(),
                                 "graph output '" + output.name() + "'"))
      return std::move(err);
  }

  // Evaluating nodes at import leaves the constants they read unused.
  // Constants have no operands, so one sweep removes every unused one.
  SmallVector<Node *, 16> dead;
  for (Node &node : graph_->getNodes())
    if (node.getOp() == OpKind::Constant && !node.hasUsedResults())
      dead.push_back(&node);
  for (Node *node : dead)
    graph_->eraseNode(node);
  // ONNX has no room for a gradient's weight or a clone's original: remat's
  // exporter leaves them in the names.
  ir::recoverMarksFromNames(*graph_);

  if (auto err = verify(*graph_))
    return fileError("imported graph does not verify: " +
                     errorToString(std::move(err)));
  return std::move(graph_);
}

/// Parses the \p size bytes of \p input as a ModelProto; protobuf's 2 GiB
/// limit applies.
Expected<std::unique_ptr<onnx::ModelProto>>
parseModel(google::protobuf::io::ZeroCopyInputStream &input, uint64_t size,
           StringRef sourceName) {
  if (size > static_cast<uint64_t>(INT_MAX))
    return makeError("cannot parse '" + sourceName +
                     "' as an ONNX model: it "
                     "is " +
                     Twine(size) +
                     " bytes, more than "
                     "protobuf's limit of " +
                     Twine(INT_MAX) +
                     " bytes (store the weights as external data)");
  if (size == 0)
    return makeError("cannot parse '" + sourceName +
                     "' as an ONNX model: the file is empty");
  auto model = std::make_unique<onnx::ModelProto>();
  google::protobuf::io::CodedInputStream coded(&input);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!model->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    return makeError("cannot parse '" + sourceName +
                     "' as an ONNX model: "
                     "the protobuf data is truncated or corrupt (" +
                     Twine(size) + " bytes)");
  // Random bytes and other messages (a TensorProto .pb) can parse as a
  // ModelProto; a real model has all three.
  SmallVector<std::string, 3> missing;
  if (!model->has_graph())
    missing.push_back("no graph");
  if (model->opset_import_size() == 0)
    missing.push_back("no opset_import");
  if (model->ir_version() == 0)
    missing.push_back("no ir_version");
  if (!missing.empty())
    return makeError("'" + sourceName +
                     "' is not an ONNX model: it parses "
                     "as protobuf but has " +
                     llvm::join(missing, ", ") +
                     " (is it a TensorProto or another message?)");
  return model;
}

/// Parses \p bytes as a ModelProto.
Expected<std::unique_ptr<onnx::ModelProto>> parseModel(StringRef bytes,
                                                       StringRef sourceName) {
  google::protobuf::io::ArrayInputStream input(
      bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)));
  return parseModel(input, bytes.size(), sourceName);
}

//===----------------------------------------------------------------------===//
// UTF-8 in names
//===----------------------------------------------------------------------===//

// ONNX's proto2 string fields take any bytes, but names reach .rir and ONNX
// files, JSON reports and messages, whose strings are UTF-8 (the .rir parser
// refuses the same). Every name is checked before import, so that the error
// names where the bad name is rather than whatever first uses it.

/// Checks one name; \p where says whose it is ("graph input #0").
Error checkNameUtf8(StringRef source, const std::string &name,
                    const Twine &where) {
  return checkUtf8(name, source + ": " + where + " '" +
                             escapeForMessage(name) + "'");
}

Error checkNodesUtf8(StringRef source, const std::string &prefix,
                     const google::protobuf::RepeatedPtrField<onnx::NodeProto>
                         &nodes);

/// Checks the names of \p graph (and of its subgraphs); \p prefix places
/// it ("" for the main graph).
Error checkGraphUtf8(StringRef source, const std::string &prefix,
                     const onnx::GraphProto &graph) {
  if (auto err = checkNameUtf8(source, graph.name(), prefix + "graph name"))
    return err;
  struct Named {
    const char *what;
    const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> &infos;
  };
  for (const Named &list : {Named{"graph input", graph.input()},
                            Named{"graph output", graph.output()},
                            Named{"value_info", graph.value_info()}})
    for (int i = 0; i < list.infos.size(); ++i)
      if (auto err = checkNameUtf8(source, list.infos[i].name(),
                                   prefix + list.what + " #" + Twine(i)))
        return err;
  for (int i = 0; i < graph.initializer_size(); ++i)
    if (auto err = checkNameUtf8(source, graph.initializer(i).name(),
                                 prefix + "initializer #" + Twine(i)))
      return err;
  return checkNodesUtf8(source, prefix, graph.node());
}

Error checkNodesUtf8(StringRef source, const std::string &prefix,
                     const google::protobuf::RepeatedPtrField<onnx::NodeProto>
                         &nodes) {
  for (int i = 0; i < nodes.size(); ++i) {
    const onnx::NodeProto &node = nodes[i];
    // The op type names the node in the messages below: it goes first.
    std::string at = prefix + "node #" + std::to_string(i);
    if (auto err = checkNameUtf8(source, node.op_type(), at + " op type"))
      return err;
    if (auto err = checkNameUtf8(source, node.domain(), at + " domain"))
      return err;
    at += " (" + node.op_type() + ")";
    if (auto err = checkNameUtf8(source, node.name(), at + " name"))
      return err;
    for (int j = 0; j < node.input_size(); ++j)
      if (auto err = checkNameUtf8(source, node.input(j),
                                   at + " input #" + Twine(j)))
        return err;
    for (int j = 0; j < node.output_size(); ++j)
      if (auto err = checkNameUtf8(source, node.output(j),
                                   at + " output #" + Twine(j)))
        return err;
    for (int j = 0; j < node.attribute_size(); ++j) {
      const onnx::AttributeProto &attr = node.attribute(j);
      if (auto err = checkNameUtf8(source, attr.name(),
                                   at + " attribute #" + Twine(j) + " name"))
        return err;
      std::string attrAt = at + " attribute '" + attr.name() + "'";
      if (auto err = checkNameUtf8(source, attr.ref_attr_name(),
                                   attrAt + " ref_attr_name"))
        return err;
      if (attr.has_g())
        if (auto err = checkGraphUtf8(source, attrAt + ": ", attr.g()))
          return err;
      for (int k = 0; k < attr.graphs_size(); ++k)
        if (auto err = checkGraphUtf8(
                source, attrAt + " graph #" + std::to_string(k) + ": ",
                attr.graphs(k)))
          return err;
    }
  }
  return Error::success();
}

/// Checks every name of \p model: graph, inputs, outputs, value_info,
/// initializers, nodes (name, op type, domain, inputs, outputs, attribute
/// names, subgraphs) and local functions.
Error checkModelUtf8(const onnx::ModelProto &model, StringRef source) {
  if (auto err = checkGraphUtf8(source, "", model.graph()))
    return err;
  for (int i = 0; i < model.functions_size(); ++i) {
    const onnx::FunctionProto &function = model.functions(i);
    std::string at = "function #" + std::to_string(i);
    if (auto err = checkNameUtf8(source, function.name(), at + " name"))
      return err;
    if (auto err = checkNameUtf8(source, function.domain(), at + " domain"))
      return err;
    at = "function '" + function.name() + "'";
    for (int j = 0; j < function.input_size(); ++j)
      if (auto err = checkNameUtf8(source, function.input(j),
                                   at + " input #" + Twine(j)))
        return err;
    for (int j = 0; j < function.output_size(); ++j)
      if (auto err = checkNameUtf8(source, function.output(j),
                                   at + " output #" + Twine(j)))
        return err;
    for (int j = 0; j < function.attribute_size(); ++j)
      if (auto err = checkNameUtf8(source, function.attribute(j),
                                   at + " attribute #" + Twine(j)))
        return err;
    if (auto err = checkNodesUtf8(source, at + " ", function.node()))
      return err;
  }
  return Error::success();
}

/// Runs \p step, turning anything protobuf or an allocation throws into an
/// error: nothing may throw out of remat.
template <typename T, typename Step>
Expected<T> guarded(StringRef sourceName, Step step) {
  try {
    return step();
  } catch (const std::bad_alloc &) {
    return makeError(sourceName + ": out of memory while importing");
  } catch (const std::exception &e) {
    return makeError(sourceName + ": import failed: " + e.what());
  }
}

/// Errors unless \p options can import anything.
Error checkOptions(StringRef sourceName, const ImportOptions &options) {
  if (!options.evaluator)
    return makeError("cannot import '" + sourceName +
                     "': no constant evaluator was given "
                     "(ImportOptions::evaluator folds shape subgraphs)");
  return Error::success();
}

Expected<std::unique_ptr<Graph>> importModel(onnx::ModelProto &model,
                                             StringRef sourceName,
                                             StringRef baseDir,
                                             const ImportOptions &options) {
  if (auto err = checkModelUtf8(model, sourceName))
    return std::move(err);
  return guarded<std::unique_ptr<Graph>>(sourceName, [&] {
    Importer importer(model, sourceName, baseDir, options);
    return importer.run();
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// Public interface
//===----------------------------------------------------------------------===//

llvm::Error parseBindings(StringRef text, llvm::StringMap<int64_t> &bindings) {
  SmallVector<StringRef, 4> entries;
  text.split(entries, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    StringRef trimmed = entry.trim();
    if (trimmed.empty())
      continue;
    auto [name, value] = trimmed.split('=');
    name = name.trim();
    value = value.trim();
    if (!trimmed.contains('=') || name.empty())
      return makeError("bad binding '" + trimmed +
                       "': expected name=value, as in batch=8");
    int64_t number;
    if (value.getAsInteger(10, number) || number < 0)
      return makeError("bad binding '" + trimmed + "': value '" + value +
                       "' is not a non-negative integer");
    if (bindings.count(name) && bindings[name] != number)
      return makeError("bad binding '" + trimmed + "': '" + name +
                       "' is already bound to " + Twine(bindings[name]));
    bindings[name] = number;
  }
  return Error::success();
}

llvm::Expected<std::unique_ptr<ir::Graph>>
importOnnxFile(StringRef path, const ImportOptions &options) {
  if (auto err = checkOptions(path, options))
    return std::move(err);
  uint64_t size = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, size))
    return makeError("cannot read '" + path + "': " + ec.message());
  if (auto err = ir::checkRegularFile(path))
    return std::move(err);
  if (size > static_cast<uint64_t>(INT_MAX))
    return makeError("cannot parse '" + path + "' as an ONNX model: it is " +
                     Twine(size) + " bytes, more than protobuf's limit of " +
                     Twine(INT_MAX) +
                     " bytes (store the weights as external data)");
  // The file is read in small blocks as it is parsed rather than mapped
  // whole, so that its bytes are not resident next to the ModelProto's.
  auto model = guarded<std::unique_ptr<onnx::ModelProto>>(path, [&]() {
    int fd = -1;
    if (std::error_code ec = llvm::sys::fs::openFileForRead(path, fd))
      return Expected<std::unique_ptr<onnx::ModelProto>>(
          makeError("cannot read '" + path + "': " + ec.message()));
    google::protobuf::io::FileInputStream input(fd);
    input.SetCloseOnDelete(true);
    auto parsed = parseModel(input, size, path);
    if (input.GetErrno() != 0) {
      if (!parsed)
        llvm::consumeError(parsed.takeError());
      return Expected<std::unique_ptr<onnx::ModelProto>>(
          makeError("cannot read '" + path +
                    "': " + std::strerror(input.GetErrno())));
    }
    return parsed;
  });
  if (!model)
    return model.takeError();
  StringRef folder = llvm::sys::path::parent_path(path);
  return importModel(**model, path, folder.empty() ? "." : folder, options);
}

llvm::Expected<std::unique_ptr<ir::Graph>>
importOnnxBytes(StringRef bytes, StringRef sourceName, StringRef baseDir,
                const ImportOptions &options) {
  if (auto err = checkOptions(sourceName, options))
    return std::move(err);
  auto model = guarded<std::unique_ptr<onnx::ModelProto>>(
      sourceName, [&] { return parseModel(bytes, sourceName); });
  if (!model)
    return model.takeError();
  return importModel(**model, sourceName, baseDir, options);
}

} // namespace remat::onnx_frontend
