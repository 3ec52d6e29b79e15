//===- driver/RunDriver.cpp - The library behind remat-run ----------------===//
#include "driver/RunDriver.h"

#include "driver/ModelLoader.h"
#include "driver/OptDriver.h"
#include "frontends/bert/BertBuilder.h"
#include "frontends/onnx/TensorFile.h"
#include "ir/GradientName.h"
#include "ir/Hash.h"
#include "ir/Support.h"
#include "passes/PassManager.h"
#include "runtime/Backend.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <sys/resource.h>
#include <cstring>

namespace remat::driver {
namespace {

/// What remat-run does to a model that is not yet a training step.
constexpr const char *kTrainingPipeline = "canonicalize,autodiff,dce";

/// What the uses of an integer input accept.
struct IntRange {
  int64_t bound = 2;           ///< Values in [0, bound).
  bool fillOnes = true;        ///< A mask: mostly 1.
  std::optional<int64_t> ignoreIndex;
};

/// Follows \p value through shape-only ops to a Gather or loss that bounds
/// its values.
IntRange findRange(const ir::Value *value) {
  llvm::SmallVector<const ir::Value *, 4> work{value};
  while (!work.empty()) {
    const ir::Value *current = work.pop_back_val();
    for (const ir::Use &use : current->getUses()) {
      const ir::Node &user = *use.user;
      switch (user.getOp()) {
      case ir::OpKind::Gather:
        if (use.operandIndex == 1) {
          const ir::TensorType &data = user.getOperand(0)->getType();
          int64_t axis = user.getAttrs().getInt("axis").value_or(0);
          if (axis < 0)
            axis += data.getRank();
          if (axis >= 0 && axis < int64_t(data.getRank()))
            return {data.getDim(unsigned(axis)), false, std::nullopt};
        }
        break;
      case ir::OpKind::SoftmaxCrossEntropyLoss:
        if (use.operandIndex == 1 &&
            user.getOperand(0)->getType().getRank() >= 2)
          return {user.getOperand(0)->getType().getDim(1), false,
                  user.getAttrs().getInt("ignore_index")};
        break;
      case ir::OpKind::Reshape:
      case ir::OpKind::Unsqueeze:
      case ir::OpKind::Squeeze:
      case ir::OpKind::Identity:
      case ir::OpKind::Expand:
        if (use.operandIndex == 0)
          work.push_back(user.getResult(0));
        break;
      default:
        break;
      }
    }
  }
  return {};
}

} // namespace

llvm::Expected<std::vector<runtime::OwnedTensor>>
makeInputs(const ir::Graph &graph,
           const llvm::StringMap<ir::TensorDataPtr> &given, uint64_t seed) {
  std::vector<runtime::OwnedTensor> tensors;
  for (const ir::Value *input : graph.getInputs()) {
    const ir::TensorType &type = input->getType();
    auto it = given.find(input->getName());
    if (it != given.end()) {
      if (it->second->getType() != type)
        return makeError("input '" + input->getName() + "' expects " +
                         type.str() + ", but its file holds " +
                         it->second->getType().str());
      tensors.push_back(runtime::OwnedTensor::fromData(*it->second));
      continue;
    }
    if (input->getData()) {
      tensors.push_back(runtime::OwnedTensor::fromData(*input->getData()));
      continue;
    }
    auto data = std::make_shared<ir::TensorData>(type);
    int64_t count = type.getNumElements();
    uint64_t key = ir::splitMix64(seed ^ ir::fnv1a(input->getName()));
    if (ir::isFloat(type.getDType())) {
      std::vector<float> values(static_cast<size_t>(count));
      bert::fillNormal(values, key, input->getName(),
                       input->isWeight() ? 0.02 : 1.0);
      for (int64_t i = 0; i < count; ++i)
        data->setDouble(i, values[size_t(i)]);
    } else {
      IntRange range = findRange(input);
      for (int64_t i = 0; i < count; ++i) {
        uint64_t r = ir::splitMix64(key + uint64_t(i));
        int64_t value;
        if (range.fillOnes)
          value = (r % 8 == 0) ? 0 : 1;
        else if (range.ignoreIndex && r % 8 == 0)
          value = *range.ignoreIndex;
        else
          value = int64_t((r >> 8) % uint64_t(std::max<int64_t>(range.bound, 1)));
        data->setInt(i, value);
      }
    }
    tensors.push_back(runtime::OwnedTensor::fromData(*data));
  }
  return std::move(tensors);
}

int runMain(int argc, char **argv) {
  namespace cl = llvm::cl;
  cl::OptionCategory category("remat-run options");
  cl::opt<std::string> model(cl::Positional,
                             cl::desc("<model .rir, .onnx or BERT config .json>"),
                             cl::cat(category));
  cl::opt<std::string> backendName("backend", cl::desc("Backend: cpu"),
                                   cl::init("cpu"), cl::cat(category));
  cl::opt<std::string> bind("bind",
                            cl::desc("Symbolic dims, or batch/seq of a BERT config: batch=2,seq=16"),
                            cl::value_desc("name=value,..."), cl::cat(category));
  cl::list<std::string> inputFiles(
      "input", cl::desc("Input from a TensorProto file (repeatable); others are generated"),
      cl::value_desc("NAME=FILE.pb"), cl::cat(category));
  cl::opt<bool> planMemoryFlag(
      "plan-memory",
      cl::desc("Run schedule and plan-memory first and execute in the planned arena"),
      cl::cat(category));
  cl::opt<unsigned> steps("steps", cl::desc("Steps to run"), cl::init(1),
                          cl::cat(category));
  cl::opt<unsigned> threads("threads",
                            cl::desc("Kernel threads (0 = all cores)"),
                            cl::init(0), cl::cat(category));
  cl::opt<uint64_t> seed("seed", cl::desc("Seed of generated inputs"),
                         cl::init(0), cl::cat(category));
  cl::opt<std::string> pipeline(
      "p", cl::desc("Passes to run before the steps (default: canonicalize,autodiff,dce "
                    "for a model with weights and no gradient outputs)"),
      cl::value_desc("pipeline"), cl::cat(category));
  cl::opt<std::string> unusedWeights(
      "unused-weights",
      cl::desc("Weights that do not reach the loss under autodiff: warn (default), error or drop"),
      cl::value_desc("warn|error|drop"), cl::cat(category));
  cl::opt<bool> forward("forward",
                        cl::desc("Run the model as loaded (no autodiff): a forward step"),
                        cl::cat(category));
  cl::opt<std::string> dumpDir("dump",
                               cl::desc("Write every graph output as DIR/<name>.pb"),
                               cl::value_desc("DIR"), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "remat-run (" << getVersionString() << ")\n";
  });
  std::string parseErrors;
  llvm::raw_string_ostream parseErrorStream(parseErrors);
  if (!cl::ParseCommandLineOptions(
          argc, argv, "remat-run: run steps of a model and time them\n",
          &parseErrorStream)) {
    parseErrorStream.flush();
    llvm::StringRef message = llvm::StringRef(parseErrors).trim();
    message = message.take_until([](char c) { return c == '\n'; });
    if (auto colon = message.find(": ");
        colon != llvm::StringRef::npos && message.startswith(argv[0]))
      message = message.drop_front(colon + 2);
    llvm::errs() << "error: " << message << '\n';
    return 1;
  }
  auto fail = [](llvm::Error err) {
    std::string message = errorToString(std::move(err));
    for (llvm::StringRef line : llvm::split(message, '\n'))
      llvm::errs() << "error: " << line << '\n';
    return 1;
  };
  if (model.empty())
    return fail(makeError("no model given (see --help)"));
  if (steps == 0)
    return fail(makeError("--steps must be at least 1"));

  LoadOptions loadOptions;
  loadOptions.bind = bind;
  auto graph = loadModel(model, loadOptions);
  if (!graph)
    return fail(graph.takeError());

  // A model with weights that is not yet a training step (no gradient
  // outputs) becomes one, unless --forward asks for the graph as it is.
  bool isTrainingStep =
      llvm::any_of((*graph)->getOutputs(), [](const ir::Value *value) {
        return ir::isGradientName(value->getName());
      });
  bool hasWeights =
      llvm::any_of((*graph)->getInputs(),
                   [](const ir::Value *value) { return value->isWeight(); });
  std::string pipelineText;
  if (pipeline.getNumOccurrences())
    pipelineText = pipeline;
  else if (!forward && !isTrainingStep && hasWeights)
    pipelineText = kTrainingPipeline;
  {
    passes::PassRegistry registry;
    passes::registerAllPasses(registry);
    passes::PassManager pm;
    if (auto err = passes::parsePassPipeline(pipelineText, registry, pm))
      return fail(std::move(err));
    if (unusedWeights.getNumOccurrences())
      if (auto err = pm.setPassOption("autodiff", "unused-weights",
                                      unusedWeights))
        return fail(std::move(err));
    if (pm.size() != 0)
      if (auto changed = pm.run(**graph); !changed)
        return fail(changed.takeError());
  }

  llvm::StringMap<ir::TensorDataPtr> given;
  for (llvm::StringRef entry : inputFiles) {
    auto [name, path] = entry.split('=');
    if (name.empty() || path.empty())
      return fail(makeError("--input expects NAME=FILE.pb, got '" + entry + "'"));
    if (!(*graph)->lookup(name) || !(*graph)->lookup(name)->isGraphInput()) {
      std::string names;
      for (const ir::Value *input : (*graph)->getInputs())
        if (!input->isWeight())
          names += (names.empty() ? "" : ", ") + input->getName().str();
      return fail(makeError("--input names '" + name +
                            "', which is not an input of the model (its "
                            "inputs: " + names + ")"));
    }
    auto tensor = onnx_frontend::readTensorFile(path);
    if (!tensor)
      return fail(tensor.takeError());
    given[name] = tensor->data;
  }

  auto backend = runtime::createBackend(backendName);
  if (!backend)
    return fail(backend.takeError());
  if (planMemoryFlag) {
    passes::PassRegistry registry;
    passes::registerAllPasses(registry);
    passes::PassManager pm;
    if (auto err = passes::parsePassPipeline("schedule,plan-memory", registry,
                                             pm))
      return fail(std::move(err));
    if (auto changed = pm.run(**graph); !changed)
      return fail(changed.takeError());
  }
  runtime::CompileOptions compileOptions;
  compileOptions.numThreads = threads;
  auto executable = (*backend)->compile(**graph, compileOptions);
  if (!executable)
    return fail(executable.takeError());
  auto inputs = makeInputs(**graph, given, seed);
  if (!inputs)
    return fail(inputs.takeError());
  std::vector<runtime::Tensor> views;
  for (const runtime::OwnedTensor &tensor : *inputs)
    views.push_back(tensor.view());

  // The loss: an output named "loss", else the first scalar float output.
  const ir::Graph &g = **graph;
  int lossIndex = -1;
  for (size_t i = 0; i < g.getOutputs().size(); ++i) {
    const ir::Value *output = g.getOutputs()[i];
    bool scalarFloat = output->getType().getRank() == 0 &&
                       ir::isFloat(output->getType().getDType());
    if (output->getName() == "loss" || (lossIndex < 0 && scalarFloat))
      lossIndex = int(i);
  }

  llvm::outs() << "remat-run: " << model << ": " << g.getNumNodes()
               << " nodes on " << (*backend)->getName();
  if (!pipelineText.empty())
    llvm::outs() << " after -p " << pipelineText;
  llvm::outs() << '\n';
  std::vector<double> times;
  runtime::RunResult last;
  for (unsigned step = 1; step <= steps; ++step) {
    auto result = (*executable)->run(views);
    if (!result)
      return fail(result.takeError());
    times.push_back(result->seconds);
    llvm::outs() << "step " << step << ":";
    if (lossIndex >= 0) {
      auto loss = result->outputs[size_t(lossIndex)].toData();
      llvm::outs() << " loss " << llvm::format("%.6f", loss->getDouble(0));
    }
    llvm::outs() << "  time " << llvm::format("%.1f", result->seconds * 1e3)
                 << " ms  peak intermediates "
                 << llvm::format("%.1f", double(result->peakBytes) / (1 << 20))
                 << " MiB";
    if (result->plannedBytes) {
      // A plan exists: the arena's planned size, the high-water mark the
      // step touched in it, and the process's max RSS so far.
      struct rusage usage;
      getrusage(RUSAGE_SELF, &usage);
      llvm::outs() << "  planned peak " << result->plannedBytes
                   << " B  measured peak " << result->peakBytes
                   << " B  max RSS "
                   << llvm::format("%.1f", double(usage.ru_maxrss) / 1024)
                   << " MiB";
    }
    llvm::outs() << '\n';
    llvm::outs().flush();
    last = std::move(*result);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  llvm::outs() << "median step time: "
               << llvm::format("%.1f", sorted[sorted.size() / 2] * 1e3)
               << " ms over " << steps << " step" << (steps == 1 ? "" : "s")
               << '\n';

  if (!dumpDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir))
      return fail(makeError("cannot create '" + dumpDir + "': " + ec.message()));
    for (size_t i = 0; i < g.getOutputs().size(); ++i) {
      std::string name = g.getOutputs()[i]->getName().str();
      std::string fileName = name;
      std::replace(fileName.begin(), fileName.end(), '/', '_');
      llvm::SmallString<256> path(dumpDir);
      llvm::sys::path::append(path, fileName + ".pb");
      if (auto err = onnx_frontend::writeTensorFile(
              path, name, *last.outputs[i].toData()))
        return fail(std::move(err));
    }
    llvm::outs() << "wrote " << g.getOutputs().size() << " outputs to "
                 << dumpDir << '\n';
  }
  return 0;
}

} // namespace remat::driver
