//===- tests/conformance/Conformance.cpp - ONNX node tests on the CPU -----===//
//
// remat-conformance runs ONNX's backend node test cases (written by
// tests/conformance/generate.py in the layout of ONNX's generate-data:
// <case>/model.onnx, <case>/test_data_set_0/{input,output}_<i>.pb) on the
// CPU backend and compares every output as ONNX's own backend test runner
// does: same dtype and shape; floats within rtol 1e-3 and atol 1e-7 (NaN
// matches NaN; a looser atol for the cases absoluteTolerance names, which
// no f32 computation meets), integers and bools exactly.
//
// One line per case: `PASS name`, `FAIL name: <what differs>` or
// `UNSUPPORTED name: <the importer's or backend's error>`. An unsupported
// case must be listed in --unsupported (`name: reason` lines) or it counts as
// a failure, and so does a listed case that passes or that is refused with
// an error other than the one its reason names: the list stays true.
// Unsupported means refused at import or compile time; a run-time error is
// a failure.
// The last line is `N passed, M failed, K unsupported (listed)`; the exit
// code is 0 when M is 0.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/TensorFile.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"
#include "passes/FoldingPolicy.h"
#include "runtime/Backends.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

using namespace remat;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace {

/// ONNX's backend test runner (onnx/backend/test/runner) compares node test
/// outputs with these.
constexpr double kRelativeTolerance = 1e-3;
constexpr double kAbsoluteTolerance = 1e-7;

/// The cases whose expected values no f32 computation meets within
/// kAbsoluteTolerance, with the absolute tolerance they get instead.
/// test_dft_inverse: outputs up to 54 whose imaginary parts are 0 in exact
/// arithmetic; the expected ones are numpy's f64 transform of the f32
/// inputs (up to 1.9e-7), and ONNX Runtime's f32 ones are up to 1.9e-5 from
/// them (20 of the 200 elements outside the default tolerance).
double absoluteTolerance(StringRef caseName) {
  if (caseName == "test_dft_inverse" || caseName == "test_dft_inverse_opset19")
    return 1e-5;
  return kAbsoluteTolerance;
}

enum class Outcome { Pass, Fail, Unsupported };

/// What running one case gave.
struct CaseResult {
  Outcome outcome;
  /// What differs (Fail) or the error (Unsupported); empty for Pass.
  std::string detail;
};

CaseResult fail(const Twine &detail) { return {Outcome::Fail, detail.str()}; }
CaseResult unsupported(const Twine &detail) {
  return {Outcome::Unsupported, detail.str()};
}
CaseResult unsupported(Error err) {
  return {Outcome::Unsupported, errorToString(std::move(err))};
}

/// \returns the files "<dir>/<prefix>_0.pb", "<prefix>_1.pb", ... that exist.
std::vector<std::string> listNumbered(StringRef dir, StringRef prefix) {
  std::vector<std::string> paths;
  for (unsigned i = 0;; ++i) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, prefix + "_" + Twine(i) + ".pb");
    if (!llvm::sys::fs::exists(path))
      return paths;
    paths.push_back(std::string(path));
  }
}

/// Binds every symbolic dim of the graph inputs of \p modelPath to the dims
/// of the tensor given for that input, as ONNX's runner feeds them.
Error bindSymbolicDims(StringRef modelPath,
                       llvm::ArrayRef<onnx_frontend::NamedTensor> inputs,
                       llvm::StringMap<int64_t> &bindings) {
  auto buffer = llvm::MemoryBuffer::getFile(modelPath, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeError("cannot read '" + modelPath +
                     "': " + buffer.getError().message());
  onnx::ModelProto model;
  if (!model.ParseFromArray((*buffer)->getBufferStart(),
                            int((*buffer)->getBufferSize())))
    return makeError("cannot parse '" + modelPath + "' as an ONNX model");
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &init : model.graph().initializer())
    initializers.insert(init.name());
  size_t next = 0;
  for (const onnx::ValueInfoProto &info : model.graph().input()) {
    if (initializers.count(info.name()))
      continue;
    if (next >= inputs.size())
      break;
    const ir::TensorType &given = inputs[next++].data->getType();
    const auto &dims = info.type().tensor_type().shape().dim();
    for (int i = 0; i < dims.size() && unsigned(i) < given.getRank(); ++i)
      if (dims[i].has_dim_param() && !dims[i].dim_param().empty())
        bindings[dims[i].dim_param()] = given.getDim(unsigned(i));
  }
  return Error::success();
}

/// \returns the value of \p value if it is a constant or a graph input
/// whose tensor \p given holds (by input index), else null.
const ir::TensorData *
knownValue(const ir::Value *value, const ir::Graph &graph,
           llvm::ArrayRef<runtime::OwnedTensor> given,
           std::vector<std::shared_ptr<ir::TensorData>> &keepAlive) {
  if (const ir::TensorData *data = ir::getConstantValue(value))
    return data;
  if (!value->isGraphInput())
    return nullptr;
  llvm::SmallVector<ir::Value *, 8> inputs = graph.getInputs();
  for (size_t i = 0; i < inputs.size() && i < given.size(); ++i)
    if (inputs[i] == value)
      return keepAlive.emplace_back(given[i].toData()).get();
  return nullptr;
}

/// \returns why the outputs of \p graph cannot match ONNX's expected ones,
/// if a Dropout draws a mask: ONNX's cases expect numpy's RNG, remat's
/// Dropout uses its own counter-based generator (runtime/DropoutMask.h) so
/// that recomputation reproduces masks.
std::optional<std::string>
findRandomDropout(const ir::Graph &graph,
                  llvm::ArrayRef<runtime::OwnedTensor> given) {
  std::vector<std::shared_ptr<ir::TensorData>> keepAlive;
  for (const ir::Node &node : graph.getNodes()) {
    if (node.getOp() != ir::OpKind::Dropout || node.getNumOperands() < 3)
      continue;
    const ir::TensorData *training =
        knownValue(node.getOperand(2), graph, given, keepAlive);
    if (training && training->getInt(0) == 0)
      continue;
    const ir::TensorData *ratio =
        knownValue(node.getOperand(1), graph, given, keepAlive);
    if (ratio && ratio->getDouble(0) == 0)
      continue;
    return "Dropout '" + node.getResult(0)->getName().str() +
           "' in training mode with a nonzero ratio: ONNX's expected output "
           "comes from numpy's RNG, remat draws masks from its counter-based "
           "generator (runtime/DropoutMask.h)";
  }
  return std::nullopt;
}

/// \returns "[1, 2]" for a flat element index \p index in \p dims.
std::string formatIndex(llvm::ArrayRef<int64_t> dims, int64_t index) {
  llvm::SmallVector<int64_t, 4> coords(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    coords[d] = dims[d] ? index % dims[d] : 0;
    index = dims[d] ? index / dims[d] : 0;
  }
  std::string text = "[";
  for (size_t d = 0; d < coords.size(); ++d)
    text += (d ? ", " : "") + std::to_string(coords[d]);
  return text + "]";
}

std::string formatDouble(double value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.9g", value);
  return os.str();
}

/// Compares output \p name: \returns what differs, or std::nullopt.
std::optional<std::string> compare(StringRef name, const ir::TensorData &expected,
                                   const ir::TensorData &actual,
                                   double absolute) {
  const ir::TensorType &expectedType = expected.getType();
  const ir::TensorType &actualType = actual.getType();
  if (expectedType != actualType)
    return "output '" + name.str() + "' has type " + actualType.str() +
           ", expected " + expectedType.str();
  ir::DType dtype = expectedType.getDType();
  int64_t count = expected.getNumElements();
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    bool same;
    if (ir::isFloat(dtype)) {
      double e = expected.getDouble(i), a = actual.getDouble(i);
      if (std::isnan(e) || std::isnan(a))
        same = std::isnan(e) && std::isnan(a);
      else if (std::isinf(e) || std::isinf(a))
        same = e == a;
      else
        same = std::fabs(a - e) <=
               absolute + kRelativeTolerance * std::fabs(e);
    } else {
      same = expected.getInt(i) == actual.getInt(i);
    }
    if (same)
      continue;
    if (first < 0)
      first = i;
    ++mismatches;
  }
  if (mismatches == 0)
    return std::nullopt;
  std::string text = "output '" + name.str() + "' (" + expectedType.str() +
                     ") differs at " +
                     formatIndex(expectedType.getDims(), first) + ": expected ";
  if (ir::isFloat(dtype))
    text += formatDouble(expected.getDouble(first)) + ", actual " +
            formatDouble(actual.getDouble(first));
  else
    text += std::to_string(expected.getInt(first)) + ", actual " +
            std::to_string(actual.getInt(first));
  return text + " (" + std::to_string(mismatches) + " of " +
         std::to_string(count) + " elements differ)";
}

/// Runs the case in \p caseDir.
CaseResult runCase(StringRef caseDir, runtime::Backend &backend,
                   unsigned numThreads) {
  llvm::SmallString<256> modelPath(caseDir), dataDir(caseDir);
  llvm::sys::path::append(modelPath, "model.onnx");
  llvm::sys::path::append(dataDir, "test_data_set_0");

  std::vector<onnx_frontend::NamedTensor> inputs;
  for (const std::string &path : listNumbered(dataDir, "input")) {
    auto tensor = onnx_frontend::readTensorFile(path);
    if (!tensor)
      return unsupported(tensor.takeError());
    inputs.push_back(std::move(*tensor));
  }
  std::vector<onnx_frontend::NamedTensor> outputs;
  for (const std::string &path : listNumbered(dataDir, "output")) {
    auto tensor = onnx_frontend::readTensorFile(path);
    if (!tensor)
      return unsupported(tensor.takeError());
    outputs.push_back(std::move(*tensor));
  }

  onnx_frontend::ImportOptions options;
  options.evaluator =
      passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
  if (auto err = bindSymbolicDims(modelPath, inputs, options.bindings))
    return fail(errorToString(std::move(err)));
  auto graph = onnx_frontend::importOnnxFile(modelPath, options);
  if (!graph)
    return unsupported(graph.takeError());

  // Inputs in graph-input order; weights (initializers) carry their data.
  std::vector<runtime::OwnedTensor> given;
  size_t next = 0;
  for (const ir::Value *input : (*graph)->getInputs()) {
    if (input->isWeight()) {
      given.push_back(runtime::OwnedTensor::fromData(*input->getData()));
      continue;
    }
    if (next >= inputs.size())
      return fail("the model has more inputs than the " +
                  Twine(inputs.size()) + " input files");
    const ir::TensorData &data = *inputs[next++].data;
    if (data.getType() != input->getType())
      return fail("input '" + input->getName() + "' is " +
                  input->getType().str() + " in the model, but " +
                  data.getType().str() + " in its file");
    given.push_back(runtime::OwnedTensor::fromData(data));
  }
  if (next != inputs.size())
    return fail("the model has " + Twine(next) + " inputs, but there are " +
                Twine(inputs.size()) + " input files");
  if ((*graph)->getOutputs().size() != outputs.size())
    return fail("the model has " + Twine((*graph)->getOutputs().size()) +
                " outputs, but there are " + Twine(outputs.size()) +
                " output files");
  if (auto why = findRandomDropout(**graph, given))
    return unsupported(*why);

  runtime::CompileOptions compileOptions;
  compileOptions.numThreads = numThreads;
  auto executable = backend.compile(**graph, compileOptions);
  if (!executable)
    return unsupported(executable.takeError());
  std::vector<runtime::Tensor> views;
  for (const runtime::OwnedTensor &tensor : given)
    views.push_back(tensor.view());
  // Unsupported means refused at import or compile time; a case that
  // compiles and then fails to run is a failure.
  auto result = (*executable)->run(views);
  if (!result)
    return fail("run failed: " + errorToString(result.takeError()));

  for (size_t i = 0; i < outputs.size(); ++i) {
    auto actual = result->outputs[i].toData();
    if (auto difference = compare(
            (*graph)->getOutputs()[i]->getName(), *outputs[i].data, *actual,
            absoluteTolerance(llvm::sys::path::filename(caseDir))))
      return fail(*difference);
  }
  return {Outcome::Pass, ""};
}

/// The codes of the dtypes that ONNX added after the protobuf remat builds
/// against, whose errors name them by code.
constexpr std::pair<const char *, int> kNewDTypeCodes[] = {
    {"FLOAT8E4M3FN", 17}, {"FLOAT8E4M3FNUZ", 18}, {"FLOAT8E5M2", 19},
    {"FLOAT8E5M2FNUZ", 20}, {"UINT4", 21},        {"INT4", 22},
    {"FLOAT4E2M1", 23},   {"FLOAT8E8M0", 24},     {"UINT2", 25},
    {"INT2", 26}};

/// \returns what the error of a case listed with \p reason must contain,
/// so that a listed case failing for another reason is not counted as
/// unsupported: the `[error: TEXT]` at the end of the reason, or for
/// "dtype X, which remat does not have" the importer's "has dtype X, "
/// (or "has dtype code N, " for a dtype newer than remat's onnx).
Expected<std::string> expectedErrorOf(StringRef reason) {
  if (reason.endswith("]")) {
    size_t open = reason.rfind("[error: ");
    if (open != StringRef::npos)
      return reason.slice(open + 8, reason.size() - 1).str();
  }
  if (reason.consume_front("dtype ") &&
      reason.consume_back(", which remat does not have") &&
      !reason.contains(' ')) {
    for (const auto &[name, code] : kNewDTypeCodes)
      if (reason == name)
        return "has dtype code " + std::to_string(code) + ", ";
    return "has dtype " + reason.str() + ", ";
  }
  return makeError("the reason must end in [error: <text the error "
                   "contains>] or read 'dtype X, which remat does not "
                   "have'");
}

/// Reads `name: reason` lines (# comments) of \p path into \p listed, as
/// name -> the text its error must contain (expectedErrorOf).
Error readUnsupportedList(StringRef path, llvm::StringMap<std::string> &listed) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return makeError("cannot read '" + path +
                     "': " + buffer.getError().message());
  unsigned lineNumber = 0;
  for (StringRef line : llvm::split((*buffer)->getBuffer(), '\n')) {
    ++lineNumber;
    line = line.take_until([](char c) { return c == '#'; }).trim();
    if (line.empty())
      continue;
    auto [name, reason] = line.split(':');
    name = name.trim();
    reason = reason.trim();
    if (name.empty() || reason.empty() || name.contains(' '))
      return makeError(path + ":" + Twine(lineNumber) +
                       ": expected 'test_name: reason', got '" + line + "'");
    auto expected = expectedErrorOf(reason);
    if (!expected)
      return makeError(path + ":" + Twine(lineNumber) + ": " +
                       errorToString(expected.takeError()));
    if (!listed.insert({name, *expected}).second)
      return makeError(path + ":" + Twine(lineNumber) + ": '" + name +
                       "' is listed twice");
  }
  return Error::success();
}

/// Expands \p path to case directories: itself if it holds model.onnx,
/// else its subdirectories that do, sorted by name.
Error collectCases(StringRef path, std::vector<std::string> &cases) {
  llvm::SmallString<256> model(path);
  llvm::sys::path::append(model, "model.onnx");
  if (llvm::sys::fs::exists(model)) {
    cases.push_back(path.str());
    return Error::success();
  }
  if (!llvm::sys::fs::is_directory(path))
    return makeError("'" + path + "' is not a directory");
  std::vector<std::string> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::SmallString<256> candidate(it->path());
    llvm::sys::path::append(candidate, "model.onnx");
    if (llvm::sys::fs::exists(candidate))
      found.push_back(it->path());
  }
  if (ec)
    return makeError("cannot list '" + path + "': " + ec.message());
  if (found.empty())
    return makeError("'" + path +
                     "' holds no model.onnx and no case directories");
  llvm::sort(found);
  llvm::append_range(cases, found);
  return Error::success();
}

} // namespace

int main(int argc, char **argv) {
  namespace cl = llvm::cl;
  cl::OptionCategory category("remat-conformance options");
  cl::list<std::string> paths(
      cl::Positional, cl::OneOrMore,
      cl::desc("<case directory, or a directory of case directories>..."),
      cl::cat(category));
  cl::opt<std::string> unsupportedPath(
      "unsupported",
      cl::desc("Expected-unsupported cases, 'test_name: reason' per line"),
      cl::value_desc("FILE"), cl::cat(category));
  cl::opt<unsigned> threads("threads",
                            cl::desc("Kernel threads (0 = all cores)"),
                            cl::init(0), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv, "remat-conformance: ONNX backend node tests on the CPU\n");

  auto fatal = [](Error err) {
    llvm::errs() << "error: " << errorToString(std::move(err)) << '\n';
    return 1;
  };
  llvm::StringMap<std::string> listed;
  if (!unsupportedPath.empty())
    if (auto err = readUnsupportedList(unsupportedPath, listed))
      return fatal(std::move(err));
  std::vector<std::string> cases;
  for (const std::string &path : paths)
    if (auto err = collectCases(path, cases))
      return fatal(std::move(err));
  auto backend = runtime::createBackend("cpu");
  if (!backend)
    return fatal(backend.takeError());

  unsigned passed = 0, failed = 0, unsupportedListed = 0;
  for (const std::string &caseDir : cases) {
    std::string name = llvm::sys::path::filename(caseDir).str();
    CaseResult result = runCase(caseDir, **backend, threads);
    bool isListed = listed.count(name) != 0;
    // Multi-line messages stay on the case's line.
    std::replace(result.detail.begin(), result.detail.end(), '\n', ' ');
    switch (result.outcome) {
    case Outcome::Pass:
      if (isListed) {
        llvm::outs() << "FAIL " << name
                     << ": passes, but unsupported.txt lists it (remove it "
                        "from unsupported.txt)\n";
        ++failed;
        break;
      }
      llvm::outs() << "PASS " << name << '\n';
      ++passed;
      break;
    case Outcome::Fail:
      llvm::outs() << "FAIL " << name << ": " << result.detail << '\n';
      ++failed;
      break;
    case Outcome::Unsupported:
      llvm::outs() << "UNSUPPORTED " << name << ": " << result.detail;
      if (isListed &&
          !StringRef(result.detail).contains(listed.lookup(name))) {
        llvm::outs() << " (unsupported.txt lists it for an error containing '"
                     << listed.lookup(name)
                     << "', this is another: a failure)";
        ++failed;
      } else if (isListed) {
        ++unsupportedListed;
      } else {
        llvm::outs() << " (not listed in unsupported.txt: a failure)";
        ++failed;
      }
      llvm::outs() << '\n';
      break;
    }
    llvm::outs().flush();
  }
  llvm::outs() << passed << " passed, " << failed << " failed, "
               << unsupportedListed << " unsupported (listed)\n";
  return failed == 0 ? 0 : 1;
}
