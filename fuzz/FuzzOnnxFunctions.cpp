//===- fuzz/FuzzOnnxFunctions.cpp - ONNX local functions, inlined ---------===//
//
// Builds a model of up to 6 local functions that call each other (nested,
// recursive, named like an ONNX operator in the default or a custom domain,
// defined twice) and a main chain that calls them, from the fuzz input, and
// imports it. The fuzzer knows, independently of the importer, what the
// model means:
// * a default-domain node whose op type is an ONNX operator (Relu) is the
//   operator, even where a local function has that name (issue 39, item 9);
//   any other node calls the function of its domain and name;
// * a function defined twice, or a call cycle reachable from the graph, is
//   an error;
// * more than ir::kMaxGraphNodes nodes once inlined (calls counted) is an
//   error about that limit (item 8), reached without inlining them;
// * a model of at most kExpectedNodes nodes otherwise imports, and its
//   output, run node by node on the CPU kernels, equals the fuzzer's own
//   evaluation of the chain of operators.
// Models between kExpectedNodes and the limit are not imported (slow under
// the sanitizers, and nothing more to check).
//
// Input: byte 0: bits 0-2 the function count (1 + n % 6), bit 3 names every
// main node "call", bit 4 names main values like function bodies' values.
// Byte 1: the main chain's length (1 + n % 16). Then that many op bytes.
// Then per function: a kind byte (bits 0-1: 0 "f<i>" in domain "d",
// 1 "Relu" in the default domain, 2 "Relu" in domain "d", 3 "f<i>" in the
// default domain; bits 2-4: body length 1 + n % 8), then the body's op
// bytes. An op byte: n % 8 is Relu, Neg, Abs, Add(v, v), or (4-7) a call of
// function (n / 8) % count. Missing bytes read as 0.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"

#include "frontends/onnx/OnnxImporter.h"
#include "ir/Graph.h"
#include "passes/FoldingPolicy.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/DenseMap.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

using namespace remat;

namespace {

/// The inlined size up to which a model must import and compute.
constexpr uint64_t kExpectedNodes = 5000;

/// The graph's input; no zero, so that no result depends on the sign of a
/// zero.
constexpr float kInput[] = {-2.0f, -0.5f, 1.5f, 3.0f};
constexpr int64_t kElements = 4;

/// Reads the fuzz input a byte at a time; past its end, 0.
struct ByteReader {
  const uint8_t *data;
  size_t size;
  size_t next = 0;
  unsigned take() { return next < size ? data[next++] : 0; }
};

enum class Op { Relu, Neg, Abs, Double, Call };

struct Step {
  Op op;
  unsigned callee = 0; ///< Op::Call: the function's index.
};

struct Function {
  std::string name, domain;
  std::vector<Step> body;
};

Step decodeStep(unsigned byte, unsigned functionCount) {
  switch (byte % 8) {
  case 0:
    return {Op::Relu};
  case 1:
    return {Op::Neg};
  case 2:
    return {Op::Abs};
  case 3:
    return {Op::Double};
  default:
    return {Op::Call, (byte / 8) % functionCount};
  }
}

/// What a step means for the reference: the operator, or the function it
/// calls (a default-domain call of a function named Relu is the operator).
struct Resolved {
  Op op;
  const Function *function = nullptr;
};

Resolved resolve(const Step &step, const std::vector<Function> &functions) {
  if (step.op != Op::Call)
    return {step.op};
  const Function &callee = functions[step.callee];
  if (callee.domain.empty() && callee.name == "Relu")
    return {Op::Relu};
  return {Op::Call, &callee};
}

/// The reference: nodes once inlined, a reachable cycle, and the values.
struct Reference {
  explicit Reference(const std::vector<Function> &functions)
      : functions(functions) {}

  const std::vector<Function> &functions;
  /// Inlined size of each function, memoized; std::nullopt while on the
  /// call path (a cycle).
  llvm::DenseMap<const Function *, std::optional<uint64_t>> sizes;
  bool cycle = false;

  /// \returns the nodes \p steps inline to, calls counted, capped just
  /// above ir::kMaxGraphNodes.
  uint64_t count(const std::vector<Step> &steps) {
    uint64_t total = 0;
    for (const Step &step : steps) {
      total += 1;
      Resolved resolved = resolve(step, functions);
      if (resolved.function) {
        auto it = sizes.find(resolved.function);
        if (it != sizes.end() && !it->second) {
          cycle = true;
        } else if (it != sizes.end()) {
          total += *it->second;
        } else {
          sizes[resolved.function] = std::nullopt;
          uint64_t size = count(resolved.function->body);
          sizes[resolved.function] = size;
          total += size;
        }
      }
      total = std::min<uint64_t>(total, ir::kMaxGraphNodes + 1);
    }
    return total;
  }

  float apply(const std::vector<Step> &steps, float value) const {
    for (const Step &step : steps) {
      Resolved resolved = resolve(step, functions);
      switch (resolved.op) {
      case Op::Relu:
        value = value > 0.0f ? value : 0.0f;
        break;
      case Op::Neg:
        value = -value;
        break;
      case Op::Abs:
        value = std::fabs(value);
        break;
      case Op::Double:
        value = value + value;
        break;
      case Op::Call:
        value = apply(resolved.function->body, value);
        break;
      }
    }
    return value;
  }
};

/// Appends the nodes of \p steps from \p input to \p output, naming
/// intermediate values \p valuePrefix<k> and nodes \p nodeName (or n<k>).
void addSteps(google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
              const std::vector<Step> &steps,
              const std::vector<Function> &functions, const std::string &input,
              const std::string &output, const std::string &valuePrefix,
              const std::string &nodeName) {
  std::string previous = input;
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step &step = steps[k];
    onnx::NodeProto *node = nodes.Add();
    node->set_name(nodeName.empty() ? "n" + std::to_string(k) : nodeName);
    std::string result = k + 1 == steps.size()
                             ? output
                             : valuePrefix + std::to_string(k + 1);
    node->add_input(previous);
    if (step.op == Op::Double)
      node->add_input(previous);
    node->add_output(result);
    switch (step.op) {
    case Op::Relu:
      node->set_op_type("Relu");
      break;
    case Op::Neg:
      node->set_op_type("Neg");
      break;
    case Op::Abs:
      node->set_op_type("Abs");
      break;
    case Op::Double:
      node->set_op_type("Add");
      break;
    case Op::Call:
      node->set_op_type(functions[step.callee].name);
      node->set_domain(functions[step.callee].domain);
      break;
    }
    previous = result;
  }
}

void addOpsets(google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>
                   &opsets) {
  onnx::OperatorSetIdProto *standard = opsets.Add();
  standard->set_domain("");
  standard->set_version(17);
  onnx::OperatorSetIdProto *custom = opsets.Add();
  custom->set_domain("d");
  custom->set_version(1);
}

void addTensorInfo(onnx::ValueInfoProto *info, const std::string &name) {
  info->set_name(name);
  onnx::TypeProto::Tensor *type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  type->mutable_shape()->add_dim()->set_dim_value(kElements);
}

onnx_frontend::ImportOptions importOptions() {
  onnx_frontend::ImportOptions options;
  options.evaluator =
      passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
  return options;
}

/// Runs \p graph on kInput, node by node on the CPU kernels.
ir::TensorDataPtr runGraph(const ir::Graph &graph) {
  fuzz::fuzzCheck(graph.getNumInputs() == 1 && graph.getOutputs().size() == 1,
                  "the imported graph has not one input and one output");
  llvm::DenseMap<const ir::Value *, ir::TensorDataPtr> values;
  ir::Value *input = graph.getInput(0);
  auto data = std::make_shared<ir::TensorData>(input->getType());
  for (int64_t i = 0; i < kElements; ++i)
    data->setDouble(i, kInput[i]);
  values[input] = data;
  auto valueOf = [&](const ir::Value *value) -> const ir::TensorData * {
    auto it = values.find(value);
    if (it != values.end())
      return it->second.get();
    return value->getData().get();
  };
  for (const ir::Node &node : graph.getNodes()) {
    llvm::SmallVector<const ir::TensorData *, 2> operands;
    for (const ir::Value *operand : node.getOperands()) {
      operands.push_back(valueOf(operand));
      fuzz::fuzzCheck(operands.back() != nullptr,
                      "an operand has no value before its use");
    }
    auto results = runtime::cpu::evaluateNode(node, operands);
    fuzz::fuzzCheckNoError(results.takeError(),
                           "a kernel of the imported graph fails");
    for (unsigned i = 0; i < node.getNumResults(); ++i)
      values[node.getResult(i)] = (*results)[i];
  }
  const ir::Value *output = graph.getOutputs()[0];
  auto it = values.find(output);
  ir::TensorDataPtr result = it != values.end() ? it->second : output->getData();
  fuzz::fuzzCheck(result != nullptr, "the output has no value");
  return result;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ByteReader reader{data, size};
  unsigned flags = reader.take();
  unsigned functionCount = 1 + flags % 8 % 6;
  std::vector<Step> main;
  for (unsigned k = 0, n = 1 + reader.take() % 16; k < n; ++k)
    main.push_back(decodeStep(reader.take(), functionCount));
  std::vector<Function> functions(functionCount);
  for (unsigned i = 0; i < functionCount; ++i) {
    unsigned kind = reader.take();
    Function &function = functions[i];
    bool opName = kind % 4 == 1 || kind % 4 == 2;
    function.name = opName ? "Relu" : "f" + std::to_string(i);
    function.domain = kind % 4 == 0 || kind % 4 == 2 ? "d" : "";
    for (unsigned k = 0, n = 1 + (kind >> 2) % 8; k < n; ++k)
      function.body.push_back(decodeStep(reader.take(), functionCount));
  }

  onnx::ModelProto model;
  model.set_ir_version(8);
  addOpsets(*model.mutable_opset_import());
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name("fuzz");
  addTensorInfo(graph->add_input(), "X");
  addTensorInfo(graph->add_output(), "Y");
  // Main values named like the bodies' values make the inliner rename.
  addSteps(*graph->mutable_node(), main, functions, "X", "Y",
           flags & 0x10 ? "v" : "t", flags & 0x08 ? "call" : "");
  bool duplicate = false;
  for (unsigned i = 0; i < functionCount; ++i) {
    const Function &function = functions[i];
    for (unsigned j = 0; j < i; ++j)
      duplicate |= functions[j].name == function.name &&
                   functions[j].domain == function.domain;
    onnx::FunctionProto *proto = model.add_functions();
    proto->set_name(function.name);
    proto->set_domain(function.domain);
    proto->add_input("x");
    proto->add_output("y");
    addOpsets(*proto->mutable_opset_import());
    addSteps(*proto->mutable_node(), function.body, functions, "x", "y", "v",
             "");
  }

  Reference reference(functions);
  uint64_t nodes = reference.count(main);
  if (!duplicate && !reference.cycle && nodes > kExpectedNodes &&
      nodes <= ir::kMaxGraphNodes)
    return 0;
  std::string bytes;
  fuzz::fuzzCheck(model.SerializeToString(&bytes), "a model does not serialize");
  auto imported =
      onnx_frontend::importOnnxBytes(bytes, "fuzz.onnx", "", importOptions());
  if (duplicate || reference.cycle) {
    fuzz::fuzzCheck(!imported, "a function defined twice, or a call cycle, "
                               "imports");
    llvm::consumeError(imported.takeError());
    return 0;
  }
  if (nodes > ir::kMaxGraphNodes) {
    fuzz::fuzzCheck(!imported, "a model over the node limit imports");
    std::string message = llvm::toString(imported.takeError());
    fuzz::fuzzCheck(message.find("nodes once its local functions are "
                                 "inlined") != std::string::npos,
                    "a model over the node limit fails for another reason");
    return 0;
  }
  if (!imported)
    fuzz::fuzzCheckNoError(imported.takeError(),
                           "a model within the limits does not import");
  ir::TensorDataPtr output = runGraph(**imported);
  for (int64_t i = 0; i < kElements; ++i)
    fuzz::fuzzCheck(static_cast<float>(output->getDouble(i)) ==
                        reference.apply(main, kInput[i]),
                    "the imported graph computes another value than the "
                    "functions it inlines");
  return 0;
}
