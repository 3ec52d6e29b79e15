//===- driver/OptDriver.cpp - The library behind remat-opt ----------------===//
#include "driver/OptDriver.h"

#include "driver/CommandLine.h"
#include "driver/Plots.h"
#include "session/MemoryReport.h"
#include "session/ModelLoader.h"
#include "ir/OutputFile.h"
#include "frontends/onnx/OnnxExporter.h"
#include "ir/Printer.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "remat/PassPlugin.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <cstring>

#include <dlfcn.h>

namespace remat::driver {

using namespace session;

llvm::StringRef getVersionString() { return "remat " REMAT_VERSION_STRING; }

namespace {

enum class OutputFormat { Rir, Onnx };

llvm::Expected<OutputFormat> getOutputFormat(llvm::StringRef path) {
  llvm::StringRef extension = llvm::sys::path::extension(path);
  if (path == "-" || extension == ".rir")
    return OutputFormat::Rir;
  // A device or FIFO without an extension (/dev/null) is written like
  // stdout, in .rir.
  llvm::sys::fs::file_status status;
  if (extension.empty() && !llvm::sys::fs::status(path, status) &&
      (status.type() == llvm::sys::fs::file_type::character_file ||
       status.type() == llvm::sys::fs::file_type::fifo_file))
    return OutputFormat::Rir;
  if (extension == ".onnx")
    return OutputFormat::Onnx;
  return makeError("cannot write '" + path + "': unsupported output format '" +
                   extension + "' (supported: .rir, .onnx, or - for stdout)");
}

} // namespace

llvm::Error loadPassPlugin(llvm::StringRef path) {
  std::string prefix = "cannot load pass plugin '" + path.str() + "': ";
  // dlopen would block on a FIFO and read a device forever; a missing file
  // is left to dlopen, whose message says which file it looked for.
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) &&
      status.type() != llvm::sys::fs::file_type::regular_file)
    return makeError(prefix + "not a regular file (a directory, device, "
                              "pipe or socket)");
  // RTLD_NOW: a symbol the plugin needs and remat-opt lacks is this error,
  // not a crash when the pass first runs.
  void *handle = dlopen(path.str().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return makeError(prefix + dlerror());
  using GetInfo = RematPassPluginInfo (*)();
  auto getInfo = reinterpret_cast<GetInfo>(
      dlsym(handle, REMAT_PASS_PLUGIN_ENTRY_POINT));
  if (!getInfo)
    return makeError(prefix + "it has no entry point '" +
                     REMAT_PASS_PLUGIN_ENTRY_POINT + "'");
  RematPassPluginInfo info = getInfo();
  const char *version = info.rematVersion ? info.rematVersion : "unknown";
  if (info.apiVersion != REMAT_PASS_PLUGIN_API_VERSION ||
      std::strcmp(version, REMAT_VERSION_STRING) != 0)
    return makeError(prefix + "it was built for plugin API " +
                     llvm::Twine(info.apiVersion) + " of remat " + version +
                     "; this is plugin API " +
                     llvm::Twine(REMAT_PASS_PLUGIN_API_VERSION) +
                     " of remat " + REMAT_VERSION_STRING);
  if (!info.registerPasses)
    return makeError(prefix + "it registers no passes");
  // A pass named like a built-in one (or one of an earlier plugin) would
  // be ambiguous in -p.
  passes::PassRegistry known, added;
  passes::registerAllPasses(known);
  info.registerPasses(added);
  for (const std::string &name : added.getNames())
    if (llvm::is_contained(known.getNames(), name))
      return makeError(prefix + "pass '" + name + "' is already registered");
  passes::addPassRegistrationCallback(info.registerPasses);
  // The plugin stays loaded until the process ends (its passes may run).
  return llvm::Error::success();
}

llvm::Error runOpt(const OptOptions &options, llvm::raw_ostream &diag) {
  auto inFormat = getInputFormat(options.inputPath);
  if (!inFormat)
    return inFormat.takeError();
  auto outFormat = getOutputFormat(options.outputPath);
  if (!outFormat)
    return outFormat.takeError();

  // Check the pipeline once up front so that a bad pipeline is one error,
  // not one per chunk, and is reported before reading the input. A budget or
  // strategy makes remat part of the default pipeline.
  bool rematDefault = options.pipeline.pipeline.empty() &&
                      (!options.pipeline.budget.empty() ||
                       !options.pipeline.strategy.empty());
  std::string checked = rematDefault ? std::string(kTrainingPipeline) +
                                           ",schedule,remat,plan-memory"
                                     : options.pipeline.pipeline;
  if (options.pipeline.pipeline.empty() && !options.pipeline.optimizer.empty())
    checked = std::string(kTrainingPipeline) + ",schedule,optimizer," +
              (rematDefault ? "remat," : "") + "plan-memory";
  if (auto err = checkPipeline(checked, options.pipeline))
    return err;

  LoadOptions loadOptions;
  loadOptions.bind = options.bind;
  loadOptions.scalarWeights = options.scalarWeights;
  loadOptions.splitInputFile = options.splitInputFile;
  using Clock = std::chrono::steady_clock;
  auto readStart = Clock::now();
  auto graphs = loadModels(options.inputPath, loadOptions);
  if (!graphs)
    return graphs.takeError();
  // A model saved with its optimizer state (remat-run --save-weights).
  for (std::unique_ptr<ir::Graph> &graph : *graphs)
    passes::adoptOptimizerState(*graph);
  auto milliseconds = [](Clock::time_point since) {
    return std::chrono::duration<double, std::milli>(Clock::now() - since)
        .count();
  };
  if (options.pipeline.timing)
    diag << "read '" << options.inputPath << "': "
         << llvm::format("%.1f", milliseconds(readStart)) << " ms\n";
  std::string errors;
  std::vector<PipelineResult> results;
  std::string pipelineText;
  for (size_t i = 0; i < graphs->size(); ++i) {
    ir::Graph &graph = *(*graphs)[i];
    pipelineText = choosePipeline(graph, options.pipeline, "");
    auto result = runPipeline(graph, pipelineText, options.pipeline, diag);
    if (!result) {
      std::string message = errorToString(result.takeError());
      if (graphs->size() > 1)
        message = "case " + std::to_string(i + 1) + " (@" +
                  graph.getName().str() + "): " + message;
      errors += (errors.empty() ? "" : "\nnote: ") + message;
      continue;
    }
    results.push_back(std::move(*result));
  }
  if (!errors.empty())
    return makeError(errors);

  if (options.printMemory)
    for (const std::unique_ptr<ir::Graph> &graph : *graphs)
      printMemoryReport(*graph, diag);
  if (!options.reportPath.empty()) {
    std::vector<const ir::Graph *> graphPtrs;
    std::vector<const llvm::json::Object *> rematReports;
    for (size_t i = 0; i < graphs->size(); ++i) {
      graphPtrs.push_back((*graphs)[i].get());
      rematReports.push_back(results[i].rematReport ? &*results[i].rematReport
                                                    : nullptr);
    }
    if (auto err =
            writeMemoryReports(options.reportPath, graphPtrs, rematReports))
      return err;
  }

  if (!options.memoryTimelinePath.empty()) {
    if (graphs->size() != 1)
      return makeError("cannot write the memory timelines of " +
                       llvm::Twine(graphs->size()) + " graphs to one file '" +
                       options.memoryTimelinePath + "'");
    if (auto err = writeOutputFile(options.memoryTimelinePath,
                                   getMemoryTimelineSvg(*graphs->front())))
      return err;
  }

  if (*outFormat == OutputFormat::Onnx) {
    if (graphs->size() != 1)
      return makeError("cannot write " + llvm::Twine(graphs->size()) +
                       " graphs to one .onnx file '" + options.outputPath +
                       "'");
    onnx_frontend::ExportOptions exportOptions;
    exportOptions.externalData = options.externalData;
    exportOptions.metadata = {
        {"remat.input", llvm::sys::path::filename(options.inputPath).str()},
        {"remat.pipeline", pipelineText},
        {"remat.bind", options.bind}};
    auto writeStart = Clock::now();
    if (auto err = onnx_frontend::exportOnnxFile(
            *graphs->front(), options.outputPath, exportOptions))
      return err;
    if (options.pipeline.timing)
      diag << "write '" << options.outputPath << "': "
           << llvm::format("%.1f", milliseconds(writeStart)) << " ms\n";
    return llvm::Error::success();
  }
  if (options.externalData)
    return makeError("--external-data applies to .onnx outputs");
  std::string output;
  for (size_t i = 0; i < graphs->size(); ++i) {
    if (i != 0)
      output += "// -----\n";
    output += ir::printGraphToString(*(*graphs)[i]);
  }
  if (auto err = writeOutputFile(options.outputPath, output))
    return err;
  if (options.printIr && options.outputPath != "-")
    llvm::outs() << output;
  return llvm::Error::success();
}

int optMain(int argc, char **argv) {
  namespace cl = llvm::cl;
  cl::OptionCategory category("remat-opt options");
  ToolFlags flags(category);
  cl::opt<std::string> input(cl::Positional, cl::desc("<input .rir, .onnx or BERT config .json; - for .rir on stdin>"),
                             cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output file, .rir or .onnx (- for stdout, the default); written only on success"),
                              cl::value_desc("file"), cl::init("-"),
                              cl::cat(category));
  cl::opt<bool> splitInputFile(
      "split-input-file",
      cl::desc("Treat each '// -----' chunk as a separate graph"),
      cl::cat(category));
  cl::opt<bool> printIr("print-ir",
                        cl::desc("Also print the resulting IR to stdout when -o names a file"),
                        cl::cat(category));
  cl::opt<bool> externalData(
      "external-data",
      cl::desc("Write the weights of an .onnx output to <output>.data"),
      cl::cat(category));
  cl::opt<std::string> memoryTimeline(
      "memory-timeline",
      cl::desc("Write an SVG plot of live bytes over the schedule, with stages "
               "shaded and the peak marked (docs/memory-report.md)"),
      cl::value_desc("file.svg"), cl::cat(category));

  cl::list<std::string> passPlugins(
      "load-pass-plugin",
      cl::desc("Load passes from a plugin shared object "
               "(remat/PassPlugin.h); may be given more than once"),
      cl::value_desc("file.so"), cl::cat(category));

  cl::HideUnrelatedOptions(category);
  if (!parseCommandLine(
          argc, argv, "remat-opt",
          "remat-opt: read a graph, run a pass pipeline, write the graph\n"))
    return 1;
  for (const std::string &path : passPlugins)
    if (auto err = loadPassPlugin(path))
      return reportError(std::move(err));
  if (flags.listPasses) {
    printPassList();
    return 0;
  }
  if (auto err = flags.validate())
    return reportError(std::move(err));
  if (input.empty())
    return reportError(makeError("no input file (see --help)"));

  OptOptions options;
  options.inputPath = input;
  options.outputPath = output;
  options.pipeline = flags.getPipelineOptions();
  options.splitInputFile = splitInputFile;
  options.printIr = printIr;
  options.bind = flags.bind;
  options.scalarWeights = flags.scalarWeights;
  options.externalData = externalData;
  options.printMemory = flags.printMemory;
  options.reportPath = flags.report;
  options.memoryTimelinePath = memoryTimeline;
  if (auto err = runOpt(options, llvm::errs()))
    return reportError(std::move(err));
  return 0;
}

} // namespace remat::driver
