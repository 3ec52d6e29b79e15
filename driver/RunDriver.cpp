//===- driver/RunDriver.cpp - The library behind remat-run ----------------===//
#include "driver/RunDriver.h"

#include "driver/CommandLine.h"
#include "session/MemoryReport.h"
#include "session/ModelLoader.h"
#include "driver/OptDriver.h"
#include "session/Pipeline.h"
#include "frontends/bert/BertBuilder.h"
#include "frontends/onnx/OnnxExporter.h"
#include "frontends/onnx/TensorFile.h"
#include "ir/GradientName.h"
#include "ir/Hash.h"
#include "ir/Limits.h"
#include "ir/OutputFile.h"
#include "ir/Support.h"
#include "ir/UpdateName.h"
#include "passes/Liveness.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "passes/remat/CostModel.h"
#include "runtime/Backends.h"
#if REMAT_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sys/resource.h>

namespace remat::driver {
using namespace session;
namespace {


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
      case ir::OpKind::SoftmaxCrossEntropyGrad: // labels, as the loss's
        if (use.operandIndex == 1 &&
            user.getOperand(0)->getType().getRank() >= 2)
          return {user.getOperand(0)->getType().getDim(1), false, std::nullopt};
        break;
      case ir::OpKind::Expand: // repeats values; shape-only ops keep them
      case ir::OpKind::Slice:  // a subset (the chunked loss head's labels)
        if (use.operandIndex == 0)
          work.push_back(user.getResult(0));
        break;
      default:
        if (use.operandIndex == 0 &&
            ir::hasTrait(user.getOp(), ir::kShapeOnly))
          work.push_back(user.getResult(0));
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
      tensors.push_back(runtime::OwnedTensor::share(it->second));
      continue;
    }
    // Weights are held once: the runtime views the IR's bytes.
    if (input->getData()) {
      tensors.push_back(runtime::OwnedTensor::share(input->getData()));
      continue;
    }
    if (auto err = ir::checkAllocation(
            type, (input->isWeight() ? "weight '" : "input '") +
                      input->getName() + "'"))
      return std::move(err);
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
    tensors.push_back(runtime::OwnedTensor::share(std::move(data)));
  }
  return std::move(tensors);
}

llvm::Error checkPlanFits(const ir::Graph &graph) {
  // Saturating sums: each byte size fits int64, their sum may not.
  auto add = [](uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
  };
  uint64_t persistent = 0;
  for (const ir::Value *input : graph.getInputs()) {
    // One input too large by itself is named.
    if (auto err = ir::checkAllocation(
            input->getType(), (input->isWeight() ? "weight '" : "input '") +
                                  input->getName() + "'"))
      return err;
    persistent = add(persistent, uint64_t(input->getType().getByteSize()));
  }
  uint64_t arena;
  if (const ir::MemoryPlan *plan = graph.getMemoryPlan())
    arena = plan->arenaBytes;
  else
    arena = passes::Liveness(graph).getPeakBytes();
  uint64_t needed = add(persistent, arena);
  uint64_t limit = ir::getMemoryLimitBytes();
  if (needed <= limit)
    return llvm::Error::success();
  std::string available =
      ir::formatBytesShort(limit) +
      (ir::describeMemoryLimit().find("--max-memory") == 0
           ? " is allowed by --max-memory"
           : " is available");
  if (persistent >= limit)
    return makeError("the weights and inputs alone need " +
                     ir::formatBytesShort(persistent) + " and " + available);
  // A budget a little under the limit leaves room for the runtime itself.
  uint64_t suggestion = limit / 10 * 9;
  std::string budget = suggestion >= (uint64_t(2) << 30)
                           ? std::to_string(suggestion >> 30) + "GiB"
                       : suggestion >= (uint64_t(2) << 20)
                           ? std::to_string(suggestion >> 20) + "MiB"
                           : std::to_string(suggestion);
  return makeError("the plan needs " + ir::formatBytesShort(needed) + " and " +
                   available + "; try --budget " + budget);
}

namespace {

/// A graph compiled and fed, ready to run steps.
struct Prepared {
  std::unique_ptr<runtime::Executable> executable;
  std::vector<runtime::OwnedTensor> inputs;
  std::vector<runtime::Tensor> views;
};

llvm::Expected<Prepared>
prepare(runtime::Backend &backend, const ir::Graph &graph,
        const llvm::StringMap<ir::TensorDataPtr> &given, uint64_t seed,
        const runtime::CompileOptions &options) {
  Prepared prepared;
  auto executable = backend.compile(graph, options);
  if (!executable)
    return executable.takeError();
  prepared.executable = std::move(*executable);
  auto inputs = makeInputs(graph, given, seed);
  if (!inputs)
    return inputs.takeError();
  prepared.inputs = std::move(*inputs);
  for (const runtime::OwnedTensor &tensor : prepared.inputs)
    prepared.views.push_back(tensor.view());
  return std::move(prepared);
}

/// \returns whether the bytes of \p a and \p b overlap.
bool overlaps(const runtime::OwnedTensor &a, const runtime::OwnedTensor &b) {
  auto *x = static_cast<const char *>(a.getData());
  auto *y = static_cast<const char *>(b.getData());
  int64_t xs = a.getType().getByteSize(), ys = b.getType().getByteSize();
  if (!x || !y || xs == 0 || ys == 0)
    return false;
  return std::less<const char *>()(x, y + ys) &&
         std::less<const char *>()(y, x + xs);
}

/// Runs one step of \p reference and \p rematted on the same inputs and
/// compares every output bit for bit. The two runs must be different graphs
/// (remat adds the nodes it recomputes) writing different buffers, or the
/// comparison would prove nothing. \p flipOutput (--test-flip-bit, for the
/// tests of this check) names an output of the remat run whose first byte
/// gets its lowest bit flipped before the comparison.
llvm::Error checkEquivalence(runtime::Backend &backend,
                             const ir::Graph &reference,
                             const ir::Graph &rematted,
                             const llvm::StringMap<ir::TensorDataPtr> &given,
                             uint64_t seed,
                             const runtime::CompileOptions &options,
                             llvm::StringRef flipOutput) {
  if (reference.getOutputs().size() != rematted.getOutputs().size())
    return makeError("the graphs with and without remat have different "
                     "outputs");
  // Both graphs start from the same weights and optimizer state: the
  // reference writes its updates over copies of its own.
  for (const ir::Value *output : reference.getOutputs())
    if (const ir::Value *input = ir::getUpdatedInput(output))
      if (input->getData())
        const_cast<ir::Value *>(input)->setData(
            std::make_shared<ir::TensorData>(*input->getData()));
  auto a = prepare(backend, reference, given, seed, options);
  if (!a)
    return a.takeError();
  auto b = prepare(backend, rematted, given, seed, options);
  if (!b)
    return b.takeError();
  auto ra = a->executable->run(a->views);
  if (!ra)
    return ra.takeError();
  auto rb = b->executable->run(b->views);
  if (!rb)
    return rb.takeError();
  size_t referenceNodes = a->executable->getGraph().getNumNodes();
  size_t rematNodes = b->executable->getGraph().getNumNodes();
  if (referenceNodes == rematNodes)
    return makeError("remat recomputed nothing (" +
                     std::to_string(referenceNodes) +
                     " nodes with and without it): the two steps would be "
                     "one graph; give a smaller --budget");
  for (size_t i = 0; i < reference.getOutputs().size(); ++i)
    if (overlaps(ra->outputs[i], rb->outputs[i]))
      return makeError("output '" + reference.getOutputs()[i]->getName() +
                       "' of the steps with and without remat lies in one "
                       "buffer: the comparison would prove nothing");
  if (!flipOutput.empty()) {
    const auto &outputs = rematted.getOutputs();
    auto it = llvm::find_if(outputs, [&](const ir::Value *output) {
      return output->getName() == flipOutput;
    });
    if (it == outputs.end())
      return makeError("--test-flip-bit: the graph has no output named '" +
                       flipOutput + "'");
    runtime::OwnedTensor &flipped = rb->outputs[size_t(it - outputs.begin())];
    if (flipped.getType().getByteSize() == 0)
      return makeError("--test-flip-bit: output '" + flipOutput +
                       "' has no bytes");
    *static_cast<unsigned char *>(flipped.getData()) ^= 1;
  }
  unsigned gradients = 0, updates = 0;
  for (size_t i = 0; i < reference.getOutputs().size(); ++i) {
    ir::TensorDataPtr x = ra->outputs[i].toData();
    ir::TensorDataPtr y = rb->outputs[i].toData();
    llvm::StringRef name = reference.getOutputs()[i]->getName();
    if (reference.getOutputs()[i]->getGradientOf())
      ++gradients;
    if (ir::getUpdatedInput(reference.getOutputs()[i]))
      ++updates;
    if (x->getBytes() == y->getBytes())
      continue;
    double worst = 0;
    int64_t at = 0;
    for (int64_t e = 0; e < x->getNumElements(); ++e) {
      double diff = std::abs(x->getDouble(e) - y->getDouble(e));
      if (diff > worst || std::isnan(diff)) {
        worst = diff;
        at = e;
      }
    }
    return makeError("not bitwise equal: output '" + name +
                     "' differs with remat; largest difference " +
                     llvm::formatv("{0:e}", worst).str() + " at element " +
                     std::to_string(at) + " (" +
                     llvm::formatv("{0:e}", x->getDouble(at)).str() +
                     " without remat, " +
                     llvm::formatv("{0:e}", y->getDouble(at)).str() +
                     " with)");
  }
  int loss = findLossOutput(reference);
  llvm::outs() << "bitwise equal: " << (loss >= 0 ? "loss and " : "")
               << gradients << " gradient" << (gradients == 1 ? "" : "s");
  if (updates)
    llvm::outs() << " and " << updates << " update"
                 << (updates == 1 ? "" : "s")
                 << " of weights and optimizer state";
  llvm::outs() << " (" << referenceNodes << " nodes without remat, "
               << rematNodes << " with)\n";
  return llvm::Error::success();
}

/// Writes per-node times (the fastest of the steps, and every step's) and the
/// GEMM rate and bandwidth fitted to them as JSON for
/// remat{cost-profile=...}, and prints the fitted rates and the 15 slowest
/// op types to \p diag.
llvm::Error writeProfile(const ir::Graph &graph,
                         llvm::ArrayRef<std::vector<double>> stepTimes,
                         llvm::StringRef path, llvm::raw_ostream &diag) {
  size_t n = graph.getNumNodes();
  assert(!stepTimes.empty() && "a profile needs a step");
  std::vector<double> best(n, std::numeric_limits<double>::infinity());
  for (const std::vector<double> &times : stepTimes) {
    assert(times.size() == n && "the executor times every node");
    for (size_t i = 0; i < n; ++i)
      best[i] = std::min(best[i], times[i]);
  }
  llvm::json::Array nodes;
  llvm::StringMap<std::pair<double, unsigned>> byOp;
  std::vector<std::string> opOrder;
  double total = 0;
  size_t i = 0;
  for (const ir::Node &node : graph.getNodes()) {
    size_t index = i++;
    double seconds = best[index];
    total += seconds;
    std::string op = node.getOpSpelling();
    if (!byOp.count(op))
      opOrder.push_back(op);
    byOp[op].first += seconds;
    byOp[op].second += 1;
    llvm::json::Array steps;
    for (const std::vector<double> &times : stepTimes)
      steps.push_back(times[index]);
    nodes.push_back(
        llvm::json::Object{{"name", node.getResult(0)->getName()},
                           {"op", op},
                           {"stage", ir::stageName(node.getStage())},
                           {"seconds", seconds},
                           {"seconds_per_step", std::move(steps)}});
  }
  llvm::json::Object ops;
  for (const std::string &op : opOrder)
    ops[op] = llvm::json::Object{{"seconds", byOp[op].first},
                                 {"count", int64_t(byOp[op].second)}};
  // What the cost model gives nodes the profile does not name (another
  // model, shape or pipeline), fitted to these times. A kind without a
  // node to fit on is left out, so that loading keeps the built-in rate.
  passes::recompute::FittedRates rates =
      passes::recompute::fitRates(graph, best);
  llvm::json::Object fitted{
      {"gemm_nodes", int64_t(rates.gemmNodes)},
      {"memory_bound_nodes", int64_t(rates.memoryBoundNodes)}};
  if (rates.gemmNodes)
    fitted["gemm_flops_per_second"] = rates.gemmFlopsPerSecond;
  if (rates.memoryBoundNodes)
    fitted["bytes_per_second"] = rates.bytesPerSecond;
  llvm::json::Object root{{"version", 1},
                          {"total_seconds", total},
                          {"rates", std::move(fitted)},
                          {"nodes", std::move(nodes)},
                          {"ops", std::move(ops)}};
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << '\n';
  stream.flush();
  if (auto err = writeOutputFile(path, text))
    return err;
  llvm::stable_sort(opOrder, [&](const std::string &a, const std::string &b) {
    return byOp[a].first > byOp[b].first;
  });
  diag << "profile: " << llvm::format("%.1f", total * 1e3)
       << " ms in nodes (fastest of each node over the steps); wrote " << path
       << '\n';
  diag << "profile: fitted rates: ";
  if (rates.gemmNodes)
    diag << llvm::format("GEMM %.1f GFLOP/s (%u nodes)",
                         rates.gemmFlopsPerSecond * 1e-9, rates.gemmNodes);
  else
    diag << "GEMM none (no GEMM node over its launch overhead)";
  if (rates.memoryBoundNodes)
    diag << llvm::format(", memory-bound %.2f GB/s (%u nodes)\n",
                         rates.bytesPerSecond * 1e-9, rates.memoryBoundNodes);
  else
    diag << ", memory-bound none (no such node over its launch overhead)\n";
  diag << "  op                          nodes         ms   share\n";
  for (size_t k = 0; k < opOrder.size() && k < 15; ++k) {
    const auto &[seconds, count] = byOp[opOrder[k]];
    diag << llvm::format("  %-26s %6u %10.1f %6.1f%%\n", opOrder[k].c_str(),
                         count, seconds * 1e3,
                         total > 0 ? 100 * seconds / total : 0.0);
  }
  return llvm::Error::success();
}

/// The --input NAME=FILE.pb entries, read and checked against \p graph.
llvm::Expected<llvm::StringMap<ir::TensorDataPtr>>
readInputFiles(const ir::Graph &graph, llvm::ArrayRef<std::string> entries) {
  llvm::StringMap<ir::TensorDataPtr> given;
  for (llvm::StringRef entry : entries) {
    auto [name, path] = entry.split('=');
    if (name.empty() || path.empty())
      return makeError("--input expects NAME=FILE.pb, got '" + entry + "'");
    if (given.count(name))
      return makeError("--input gives input '" + name + "' twice");
    if (!graph.lookup(name) || !graph.lookup(name)->isGraphInput()) {
      std::string names;
      for (const ir::Value *input : graph.getInputs())
        if (!input->isWeight())
          names += (names.empty() ? "" : ", ") + input->getName().str();
      return makeError("--input names '" + name +
                       "', which is not an input of the model (its inputs: " +
                       names + ")");
    }
    auto tensor = onnx_frontend::readTensorFile(path);
    if (!tensor)
      return tensor.takeError();
    given[name] = tensor->data;
  }
  return std::move(given);
}

/// Makes the next step see this step's updates (ir/UpdateName.h): on the
/// host they were written over the inputs already; a device that computes
/// elsewhere returned them as outputs, which go back into the inputs.
void copyUpdatesBack(const ir::Graph &g, const runtime::RunResult &result,
                     Prepared &prepared) {
  for (size_t i = 0; i < g.getOutputs().size(); ++i) {
    const ir::Value *input = ir::getUpdatedInput(g.getOutputs()[i]);
    if (!input)
      continue;
    unsigned index = 0;
    while (g.getInput(index) != input)
      ++index;
    void *target = prepared.inputs[index].getData();
    const void *source = result.outputs[i].getData();
    if (target != source && input->getType().getByteSize() != 0)
      std::memcpy(target, source, size_t(input->getType().getByteSize()));
  }
}

/// Writes \p model (the model as loaded) with the weights and optimizer
/// state of \p g's inputs after the steps to \p path, atomically.
llvm::Error saveWeights(const ir::Graph &model, const ir::Graph &g,
                        const Prepared &prepared, llvm::StringRef path) {
  std::unique_ptr<ir::Graph> saved = model.clone();
  unsigned states = 0;
  for (unsigned i = 0; i < g.getNumInputs(); ++i) {
    const ir::Value *input = g.getInput(i);
    bool state = passes::isOptimizerState(input);
    if (!input->isWeight() && !state)
      continue;
    ir::TensorDataPtr data = prepared.inputs[i].toData();
    if (ir::Value *target = saved->lookup(input->getName());
        target && target->isGraphInput()) {
      target->setData(std::move(data));
      continue;
    }
    if (!state)
      continue;
    saved->addInput(input->getName(), input->getType())->setData(std::move(data));
    ++states;
  }
  passes::keepOptimizerStep(*saved);
  onnx_frontend::ExportOptions options;
  options.metadata = {{"remat.saved-by", "remat-run --save-weights"}};
  if (auto err = onnx_frontend::exportOnnxFile(*saved, path, options))
    return err;
  llvm::outs() << "saved weights" << (states ? " and optimizer state" : "")
               << " to " << path << '\n';
  return llvm::Error::success();
}

/// The last step's result, every step's per-node times, and what
/// --step-json writes.
struct StepsResult {
  runtime::RunResult result;
  std::vector<std::vector<double>> nodeTimes;
  llvm::json::Object stats;
};

/// Runs \p steps steps, printing the loss, time, planned and measured peak
/// and max RSS of each, then the median step time.
llvm::Expected<StepsResult> runSteps(const ir::Graph &g, Prepared &prepared,
                                     unsigned steps) {
  int lossIndex = findLossOutput(g);
  std::vector<double> times;
  llvm::json::Array stepStats;
  StepsResult out;
  constexpr double kMiB = 1 << 20;
  for (unsigned step = 1; step <= steps; ++step) {
    out.result = runtime::RunResult(); // Its outputs hold the previous arena.
    auto result = prepared.executable->run(prepared.views);
    if (!result)
      return result.takeError();
    copyUpdatesBack(g, *result, prepared);
    times.push_back(result->seconds);
    out.nodeTimes.push_back(result->nodeSeconds);
    llvm::outs() << "step " << step << ":";
    llvm::json::Object stepStat{{"seconds", result->seconds},
                                {"output_seconds", result->outputSeconds}};
    if (lossIndex >= 0) {
      auto loss = result->outputs[size_t(lossIndex)].toData();
      llvm::outs() << " loss " << llvm::format("%.6f", loss->getDouble(0));
      stepStat["loss"] = loss->getDouble(0);
    }
    stepStats.push_back(std::move(stepStat));
    llvm::outs() << "  time " << llvm::format("%.1f", result->seconds * 1e3)
                 << " ms";
    // Not in the step's time: a GPU's outputs (the gradients) crossing
    // the bus, which a training loop leaves on the device.
    if (result->outputSeconds >= 0.5e-3)
      llvm::outs() << " (+ "
                   << llvm::format("%.1f", result->outputSeconds * 1e3)
                   << " ms copying the outputs to the host)";
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    uint64_t weightBytes = 0, inputBytes = 0;
    for (const ir::Value *input : g.getInputs())
      (input->isWeight() ? weightBytes : inputBytes) +=
          uint64_t(input->getType().getByteSize());
    out.stats = llvm::json::Object{
        {"weight_bytes", int64_t(weightBytes)},
        {"input_bytes", int64_t(inputBytes)},
        {"arena_planned_bytes", int64_t(result->plannedBytes)},
        {"arena_measured_peak_bytes", int64_t(result->peakBytes)},
        {"max_rss_bytes", int64_t(usage.ru_maxrss) * 1024}};
    if (result->plannedBytes) {
      // A plan exists: the planned peak (DESIGN.md "Memory model":
      // persistent + arena) and the arena's high-water mark the step
      // touched; the max RSS after it should be close to the planned peak
      // since weights are held once.
      uint64_t plannedPeak = weightBytes + inputBytes + result->plannedBytes;
      out.stats["planned_peak_bytes"] = int64_t(plannedPeak);
      // One unit on the line: bytes for a small plan, else MiB.
      auto size = [&](uint64_t bytes) {
        if (plannedPeak < (1 << 20))
          return std::to_string(bytes) + " B";
        return llvm::formatv("{0:F1} MiB", double(bytes) / (1 << 20)).str();
      };
      llvm::outs() << "  planned peak " << size(plannedPeak)
                   << " (weights " << size(weightBytes) << " + inputs "
                   << size(inputBytes) << " + arena "
                   << size(result->plannedBytes) << "), measured arena peak "
                   << size(result->peakBytes) << ",";
    } else {
      llvm::outs() << "  peak intermediates "
                   << llvm::format("%.1f", double(result->peakBytes) / kMiB)
                   << " MiB";
    }
    llvm::outs() << " max RSS "
                 << llvm::format("%.1f", double(usage.ru_maxrss) / 1024)
                 << " MiB\n";
    llvm::outs().flush();
    out.result = std::move(*result);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  out.stats["median_seconds"] = sorted[sorted.size() / 2];
  out.stats["steps"] = std::move(stepStats);
  llvm::outs() << "median step time: "
               << llvm::format("%.1f", sorted[sorted.size() / 2] * 1e3)
               << " ms over " << steps << " step" << (steps == 1 ? "" : "s")
               << '\n';
  return std::move(out);
}

/// Writes every output of \p result as DIR/<file>, the file names from
/// getDumpFileNames, and DIR/index.json mapping each file to its output.
llvm::Error dumpOutputs(const ir::Graph &g, const runtime::RunResult &result,
                        llvm::StringRef dumpDir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir))
    return makeError("cannot create '" + dumpDir + "': " + ec.message());
  std::vector<std::string> names;
  for (const ir::Value *output : g.getOutputs())
    names.push_back(output->getName().str());
  std::vector<std::string> files = getDumpFileNames(names);
  std::string index;
  llvm::raw_string_ostream os(index);
  {
    llvm::json::OStream json(os, /*IndentSize=*/2);
    json.object([&] {
      json.attributeArray("outputs", [&] {
        for (size_t i = 0; i < names.size(); ++i)
          json.object([&] {
            json.attribute("file", files[i]);
            json.attribute("name", llvm::json::isUTF8(names[i])
                                       ? names[i]
                                       : llvm::json::fixUTF8(names[i]));
          });
      });
    });
  }
  os << '\n';
  for (size_t i = 0; i < names.size(); ++i) {
    llvm::SmallString<256> path(dumpDir);
    llvm::sys::path::append(path, files[i]);
    if (auto err = onnx_frontend::writeTensorFile(
            path, names[i], *result.outputs[i].toData()))
      return err;
  }
  llvm::SmallString<256> indexPath(dumpDir);
  llvm::sys::path::append(indexPath, "index.json");
  if (auto err = writeOutputFile(indexPath, os.str()))
    return err;
  llvm::outs() << "wrote " << g.getOutputs().size() << " outputs to "
               << dumpDir << '\n';
  return llvm::Error::success();
}

} // namespace

std::vector<std::string>
getDumpFileNames(llvm::ArrayRef<std::string> outputNames) {
  // Long enough to recognise a name, short enough for any file system's
  // 255-byte limit with a collision suffix and ".pb".
  constexpr size_t kMaxStem = 200;
  std::vector<std::string> files;
  llvm::StringSet<> taken;
  for (const std::string &name : outputNames) {
    std::string stem;
    for (char c : name) {
      auto byte = static_cast<unsigned char>(c);
      stem += byte < 0x20 || byte == 0x7f || c == '/' || c == '\\' ? '_' : c;
    }
    // A leading dot would hide the file.
    if (!stem.empty() && stem[0] == '.')
      stem[0] = '_';
    if (stem.empty())
      stem = "_";
    if (stem.size() > kMaxStem) {
      size_t cut = kMaxStem;
      // Not inside a UTF-8 sequence.
      while (cut > 0 && (static_cast<unsigned char>(stem[cut]) & 0xc0) == 0x80)
        --cut;
      stem.resize(cut);
    }
    // Distinct even on a case-insensitive file system.
    std::string file = stem + ".pb";
    for (int suffix = 2; taken.contains(llvm::StringRef(file).lower());
         ++suffix)
      file = stem + "-" + std::to_string(suffix) + ".pb";
    taken.insert(llvm::StringRef(file).lower());
    files.push_back(std::move(file));
  }
  return files;
}

/// More kernel threads than this is an error rather than an attempt.
constexpr unsigned kMaxThreads = 1024;

int runMain(int argc, char **argv) {
  namespace cl = llvm::cl;
  cl::OptionCategory category("remat-run options");
  ToolFlags flags(category);
  cl::opt<std::string> model(cl::Positional,
                             cl::desc("<model .rir, .onnx or BERT config .json>"),
                             cl::cat(category));
  // llvm::cl keeps a StringRef to the description: keep the text alive.
  static const std::string backendHelp =
      "Backend that runs the steps (" +
      llvm::join(runtime::listBackends(), ", ") + ")";
  cl::opt<std::string> backendName(
      "backend", cl::desc(backendHelp),
      cl::init("cpu"), cl::cat(category));
  cl::list<std::string> inputFiles(
      "input", cl::desc("Input from a TensorProto file (repeatable); others are generated"),
      cl::value_desc("NAME=FILE.pb"), cl::cat(category));
  cl::opt<bool> planMemoryFlag(
      "plan-memory",
      cl::desc("Schedule and plan memory after the pipeline and run in the "
               "planned arena (implied by --budget and --strategy)"),
      cl::cat(category));
  cl::opt<unsigned> steps("steps", cl::desc("Steps to run"), cl::init(1),
                          cl::cat(category));
  cl::opt<unsigned> threads("threads",
                            cl::desc("Kernel threads (0 = all cores)"),
                            cl::init(0), cl::cat(category));
  cl::opt<uint64_t> seed("seed", cl::desc("Seed of generated inputs"),
                         cl::init(0), cl::cat(category));
  cl::opt<bool> forward("forward",
                        cl::desc("Run the model as loaded (no autodiff): a forward step"),
                        cl::cat(category));
  cl::opt<std::string> dumpDir("dump",
                               cl::desc("Write every graph output as DIR/<name>.pb ('/', '\\' and control bytes as '_', a suffix where names collide) and DIR/index.json, which maps each file to its output"),
                               cl::value_desc("DIR"), cl::cat(category));
  cl::opt<bool> checkEquivalenceFlag(
      "check-equivalence",
      cl::desc("Run one step with and one without remat on the same inputs "
               "and compare the loss and every gradient bit for bit"),
      cl::cat(category));
  cl::opt<std::string> testFlipBit(
      "test-flip-bit",
      cl::desc("With --check-equivalence, flip the lowest bit of output "
               "NAME of the remat step before comparing (tests the check)"),
      cl::value_desc("NAME"), cl::Hidden, cl::cat(category));
  cl::opt<std::string> profilePath(
      "profile",
      cl::desc("Write per-node and per-op times and the GEMM rate and "
               "bandwidth fitted to them as JSON (for --cost-profile); print "
               "the rates and the 15 slowest ops"),
      cl::value_desc("file.json"), cl::cat(category));
  cl::opt<std::string> statsPath(
      "step-json",
      cl::desc("Write the steps' times and losses, the planned and measured "
               "peaks, max RSS and remat's prediction as JSON (what "
               "remat-sweep --measure reads)"),
      cl::value_desc("file.json"), cl::cat(category));
  cl::opt<std::string> saveWeightsPath(
      "save-weights",
      cl::desc("After the steps, write the model with its trained weights and "
               "optimizer state as .onnx (running it again resumes)"),
      cl::value_desc("OUT.onnx"), cl::cat(category));
  cl::opt<bool> allowTF32(
      "allow-tf32",
      cl::desc("Let f32 GEMMs use TF32 tensor cores (cuda backend; default: "
               "full f32)"),
      cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!parseCommandLine(argc, argv, "remat-run",
                        "remat-run: run steps of a model and time them\n"))
    return 1;
  if (flags.listPasses) {
    printPassList();
    return 0;
  }
  if (auto err = flags.validate())
    return reportError(std::move(err));
  if (model.empty())
    return reportError(makeError("no model given (see --help)"));
  if (steps == 0)
    return reportError(makeError("--steps must be at least 1"));
  if (!saveWeightsPath.empty()) {
    if (llvm::sys::path::extension(saveWeightsPath) != ".onnx")
      return reportError(makeError("--save-weights: cannot write '" +
                                   saveWeightsPath +
                                   "': the file must end in .onnx"));
    // Fail before the steps, not after them.
    if (auto err = checkOutputPath("--save-weights", saveWeightsPath))
      return reportError(std::move(err));
  }
  if (threads > kMaxThreads)
    return reportError(makeError(
        "--threads " + llvm::Twine(threads) + " is more than the " +
        llvm::Twine(kMaxThreads) + " kernel threads remat-run can start"));

  PipelineOptions pipelineOptions = flags.getPipelineOptions();
  bool rematRequested = !pipelineOptions.budget.empty() ||
                        !pipelineOptions.strategy.empty() ||
                        llvm::StringRef(pipelineOptions.pipeline).contains("remat");
  if (checkEquivalenceFlag && !rematRequested)
    return reportError(makeError(
        "--check-equivalence compares a step with and without remat: give "
        "--budget, --strategy or a pipeline with remat"));
  if (!testFlipBit.empty() && !checkEquivalenceFlag)
    return reportError(
        makeError("--test-flip-bit needs --check-equivalence"));
  if (!pipelineOptions.pipeline.empty())
    if (auto err = checkPipeline(pipelineOptions.pipeline, pipelineOptions))
      return reportError(std::move(err));

  // The model, its external data and the --input files count towards one
  // total against the memory limit.
  ir::LoadBudget loadBudget;
  LoadOptions loadOptions;
  loadOptions.bind = flags.bind;
  loadOptions.scalarWeights = flags.scalarWeights;
  auto graph = loadModel(model, loadOptions);
  if (!graph)
    return reportError(graph.takeError());
  // A model saved with its optimizer state (--save-weights) resumes.
  passes::adoptOptimizerState(**graph);
  std::unique_ptr<ir::Graph> loaded;
  if (!saveWeightsPath.empty())
    loaded = (*graph)->clone();

  // A model with weights that is not yet a training step becomes one,
  // unless --forward asks for the graph as it is.
  bool hasWeights =
      llvm::any_of((*graph)->getInputs(),
                   [](const ir::Value *value) { return value->isWeight(); });
  std::string fallback;
  if (!forward && !isTrainingStep(**graph) && hasWeights)
    fallback = kTrainingPipeline;
  std::string pipelineText =
      choosePipeline(**graph, pipelineOptions, fallback);
  if (planMemoryFlag &&
      !llvm::StringRef(pipelineText).contains("plan-memory"))
    pipelineText += std::string(pipelineText.empty() ? "" : ",") +
                    "schedule,plan-memory";
  // The CPU kernels read Transposes in place (Note [fold-transpose]); a
  // pipeline given with -p runs as given.
  if (backendName == "cpu" && pipelineOptions.pipeline.empty())
    pipelineText = withCpuFusions(pipelineText);
  std::unique_ptr<ir::Graph> reference;
  if (checkEquivalenceFlag)
    reference = (*graph)->clone();
  auto ran = runPipeline(**graph, pipelineText, pipelineOptions, llvm::errs());
  if (!ran)
    return reportError(ran.takeError());
  if (flags.printMemory)
    printMemoryReport(**graph, llvm::errs());
  if (!flags.report.empty())
    if (auto err = writeMemoryReports(
            flags.report, {graph->get()},
            {ran->rematReport ? &*ran->rematReport : nullptr}))
      return reportError(std::move(err));
  // Refused before anything is allocated, rather than killed halfway
  // through a step.
  if (auto err = checkPlanFits(**graph))
    return reportError(std::move(err));
  auto given = readInputFiles(**graph, inputFiles);
  if (!given)
    return reportError(given.takeError());

  auto backend = runtime::createBackend(backendName);
  if (!backend)
    return reportError(backend.takeError());
  runtime::CompileOptions compileOptions;
  compileOptions.numThreads = threads;
  compileOptions.profile = !profilePath.empty();
  compileOptions.allowTF32 = allowTF32;

  if (checkEquivalenceFlag) {
    PipelineOptions referenceOptions = pipelineOptions;
    referenceOptions.budget.clear();
    referenceOptions.strategy.clear();
    referenceOptions.costProfile.clear();
    referenceOptions.explain = false;
    auto refRan = runPipeline(*reference, withoutRemat(pipelineText),
                              referenceOptions, llvm::nulls());
    if (!refRan)
      return reportError(refRan.takeError());
    if (auto err = checkPlanFits(*reference))
      return reportError(makeError("without remat, " +
                                   errorToString(std::move(err))));
    if (auto err = checkEquivalence(**backend, *reference, **graph, *given,
                                    seed, compileOptions, testFlipBit))
      return reportError(std::move(err));
    return 0;
  }

  auto prepared = prepare(**backend, **graph, *given, seed, compileOptions);
  if (!prepared)
    return reportError(prepared.takeError());
  const ir::Graph &g = **graph;
  llvm::outs() << "remat-run: " << model << ": " << g.getNumNodes()
               << " nodes on " << (*backend)->getName();
  if (!pipelineText.empty())
    llvm::outs() << " after -p " << pipelineText;
  llvm::outs() << '\n';
  auto last = runSteps(g, *prepared, steps);
  if (!last)
    return reportError(last.takeError());
#if REMAT_HAVE_CUDA
  // Memory truth on the GPU: what was planned next to what the device shows.
  if (const runtime::cuda::CudaStats *stats =
          runtime::cuda::getCudaStats(*prepared->executable)) {
    uint64_t planned = 0;
    if (const ir::MemoryPlan *plan = g.getMemoryPlan())
      planned = plan->peakLiveBytes;
    uint64_t ours = stats->arenaBytes + stats->cublasWorkspaceBytes +
                    stats->scratchBytes + stats->inputBytes;
    llvm::outs() << "cuda memory on " << stats->deviceName
                 << ": planned arena peak "
                 << formatBytes(planned) << ", arena "
                 << formatBytes(stats->arenaBytes) << ", cuBLAS workspace "
                 << formatBytes(stats->cublasWorkspaceBytes)
                 << ", kernel workspace " << formatBytes(stats->scratchBytes)
                 << ", inputs " << formatBytes(stats->inputBytes)
                 << "; cudaMemGetInfo used " << formatBytes(stats->usedBytesAfterStep)
                 << " (" << (stats->usedBytesAfterStep >= stats->usedBytesAtCompile
                                 ? "+" : "-")
                 << formatBytes(stats->usedBytesAfterStep >= stats->usedBytesAtCompile
                                    ? stats->usedBytesAfterStep -
                                          stats->usedBytesAtCompile
                                    : stats->usedBytesAtCompile -
                                          stats->usedBytesAfterStep)
                 << " since compile; arena, workspaces and inputs "
                 << formatBytes(ours) << ")\n";
    if (stats->hostNodes)
      llvm::outs() << "cuda: " << stats->hostNodes
                   << " nodes ran on the host (no device kernel)\n";
  }
#endif
  if (ran->rematReport)
    if (const llvm::json::Object *summary =
            ran->rematReport->getObject("summary")) {
      // Predicted next to measured: remat's cost model for this step and
      // for the step without remat, as a ratio to compare with a run of
      // --strategy none.
      llvm::outs() << "remat: predicted step "
                   << llvm::format("%.1f",
                                   *summary->getNumber("predicted_seconds") * 1e3)
                   << " ms (x"
                   << llvm::format("%.3f",
                                   *summary->getNumber("predicted_time_ratio"))
                   << " of no remat), activations kept "
                   << formatBytes(uint64_t(
                          *summary->getInteger("activation_bytes_kept")))
                   << " of "
                   << formatBytes(uint64_t(
                          *summary->getInteger("activation_bytes_no_remat")))
                   << '\n';
    }
  if (!statsPath.empty()) {
    llvm::json::Object stats = std::move(last->stats);
    stats["version"] = 1;
    stats["model"] = std::string(model);
    stats["backend"] = (*backend)->getName();
    stats["pipeline"] = pipelineText;
    if (ran->rematReport)
      if (const llvm::json::Object *summary =
              ran->rematReport->getObject("summary"))
        stats["remat"] = llvm::json::Object(*summary);
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(stats))) << '\n';
    os.flush();
    if (auto err = writeOutputFile(statsPath, text))
      return reportError(std::move(err));
  }
  if (!profilePath.empty())
    if (auto err = writeProfile(g, last->nodeTimes, profilePath, llvm::errs()))
      return reportError(std::move(err));
  if (!dumpDir.empty())
    if (auto err = dumpOutputs(g, last->result, dumpDir))
      return reportError(std::move(err));
  if (loaded)
    if (auto err = saveWeights(*loaded, g, *prepared, saveWeightsPath))
      return reportError(std::move(err));
  return 0;
}

} // namespace remat::driver
