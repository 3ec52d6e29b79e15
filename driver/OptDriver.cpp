//===- driver/OptDriver.cpp - The library behind remat-opt ----------------===//
#include "driver/OptDriver.h"

#include "driver/MemoryReport.h"
#include "driver/ModelLoader.h"
#include "ir/OutputFile.h"
#include "frontends/onnx/OnnxExporter.h"
#include "ir/Printer.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <chrono>

namespace remat::driver {

llvm::StringRef getVersionString() { return "remat " REMAT_VERSION_STRING; }

namespace {

/// Runs the pipeline of \p options on \p graph, verifying it first.
llvm::Error runPipeline(ir::Graph &graph, const OptOptions &options,
                        const passes::PassRegistry &registry,
                        llvm::raw_ostream &diag) {
  if (auto err = ir::verify(graph))
    return err;
  passes::PassManager pm;
  if (auto err = passes::parsePassPipeline(options.pipeline, registry, pm))
    return err;
  if (!options.unusedWeights.empty())
    if (auto err = pm.setPassOption("autodiff", "unused-weights",
                                    options.unusedWeights))
      return err;
  if (pm.size() == 0)
    return llvm::Error::success();
  if (options.printIrAfterAll)
    pm.enablePrintAfterAll(&diag);
  if (options.timing)
    pm.enableTiming(&diag);
  if (auto changed = pm.run(graph); !changed)
    return changed.takeError();
  return llvm::Error::success();
}

enum class OutputFormat { Rir, Onnx };

llvm::Expected<OutputFormat> getOutputFormat(llvm::StringRef path) {
  llvm::StringRef extension = llvm::sys::path::extension(path);
  if (path == "-" || extension == ".rir")
    return OutputFormat::Rir;
  if (extension == ".onnx")
    return OutputFormat::Onnx;
  return makeError("cannot write '" + path + "': unsupported output format '" +
                   extension + "' (supported: .rir, .onnx, or - for stdout)");
}

} // namespace

llvm::Error runOpt(const OptOptions &options, llvm::raw_ostream &diag) {
  auto inFormat = getInputFormat(options.inputPath);
  if (!inFormat)
    return inFormat.takeError();
  auto outFormat = getOutputFormat(options.outputPath);
  if (!outFormat)
    return outFormat.takeError();

  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  // Check the pipeline once up front so that a bad pipeline is one error,
  // not one per chunk, and is reported before reading the input.
  {
    passes::PassManager probe;
    if (auto err = passes::parsePassPipeline(options.pipeline, registry, probe))
      return err;
  }

  LoadOptions loadOptions;
  loadOptions.bind = options.bind;
  loadOptions.splitInputFile = options.splitInputFile;
  using Clock = std::chrono::steady_clock;
  auto readStart = Clock::now();
  auto graphs = loadModels(options.inputPath, loadOptions);
  if (!graphs)
    return graphs.takeError();
  auto milliseconds = [](Clock::time_point since) {
    return std::chrono::duration<double, std::milli>(Clock::now() - since)
        .count();
  };
  if (options.timing)
    diag << "read '" << options.inputPath << "': "
         << llvm::format("%.1f", milliseconds(readStart)) << " ms\n";
  std::string errors;
  for (std::unique_ptr<ir::Graph> &graph : *graphs)
    if (auto err = runPipeline(*graph, options, registry, diag)) {
      if (!errors.empty())
        errors += '\n';
      errors += errorToString(std::move(err));
    }
  if (!errors.empty())
    return makeError(errors);

  if (options.printMemory)
    for (const std::unique_ptr<ir::Graph> &graph : *graphs)
      printMemoryReport(*graph, diag);
  if (!options.reportPath.empty()) {
    llvm::json::Array reports;
    for (const std::unique_ptr<ir::Graph> &graph : *graphs)
      reports.push_back(getMemoryReport(*graph));
    llvm::json::Object root{{"version", 1}, {"graphs", std::move(reports)}};
    std::string text;
    llvm::raw_string_ostream stream(text);
    stream << llvm::formatv("{0:2}", llvm::json::Value(std::move(root)))
           << '\n';
    stream.flush();
    if (auto err = writeOutputFile(options.reportPath, text))
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
        {"remat.pipeline", options.pipeline},
        {"remat.bind", options.bind}};
    auto writeStart = Clock::now();
    if (auto err = onnx_frontend::exportOnnxFile(
            *graphs->front(), options.outputPath, exportOptions))
      return err;
    if (options.timing)
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
  cl::opt<std::string> input(cl::Positional, cl::desc("<input .rir, .onnx or BERT config .json; - for .rir on stdin>"),
                             cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output file, .rir or .onnx (- for stdout, the default); written only on success"),
                              cl::value_desc("file"), cl::init("-"),
                              cl::cat(category));
  cl::opt<std::string> pipeline(
      "p", cl::desc("Pass pipeline, e.g. 'dce,cse,fold-constants{max-elements=64}'"),
      cl::value_desc("pipeline"), cl::cat(category));
  cl::alias pipelineLong("pipeline", cl::desc("Alias for -p"),
                         cl::aliasopt(pipeline), cl::cat(category));
  cl::opt<bool> splitInputFile(
      "split-input-file",
      cl::desc("Treat each '// -----' chunk as a separate graph"),
      cl::cat(category));
  cl::opt<bool> printIr("print-ir",
                        cl::desc("Also print the resulting IR to stdout when -o names a file"),
                        cl::cat(category));
  cl::opt<bool> printIrAfterAll("print-ir-after-all",
                                cl::desc("Print the IR to stderr after every pass"),
                                cl::cat(category));
  cl::opt<bool> timing("timing", cl::desc("Print the time of each pass to stderr"),
                       cl::cat(category));
  cl::opt<std::string> bind(
      "bind", cl::desc("Symbolic dims of an .onnx input, or batch/seq of a BERT config: batch=2,seq=16"),
      cl::value_desc("name=value,..."), cl::cat(category));
  cl::opt<bool> externalData(
      "external-data",
      cl::desc("Write the weights of an .onnx output to <output>.data"),
      cl::cat(category));
  cl::opt<bool> printMemory(
      "print-memory",
      cl::desc("Print each graph's peak memory breakdown to stderr after the pipeline"),
      cl::cat(category));
  cl::opt<std::string> report(
      "report", cl::desc("Write the memory report as JSON (docs/memory-report.md)"),
      cl::value_desc("file.json"), cl::cat(category));
  cl::opt<std::string> memoryTimeline(
      "memory-timeline",
      cl::desc("Write an SVG plot of live bytes over the schedule, with stages "
               "shaded and the peak marked (docs/memory-report.md)"),
      cl::value_desc("file.svg"), cl::cat(category));
  cl::opt<std::string> unusedWeights(
      "unused-weights",
      cl::desc("Weights that do not reach the loss under autodiff: warn (default), error or drop"),
      cl::value_desc("warn|error|drop"), cl::cat(category));
  cl::opt<bool> listPasses("list-passes",
                           cl::desc("List the passes and their options, then exit"),
                           cl::cat(category));

  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "remat-opt (" << getVersionString() << ")\n";
  });
  std::string parseErrors;
  llvm::raw_string_ostream parseErrorStream(parseErrors);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "remat-opt: read a graph, run a pass pipeline, write the graph\n",
          &parseErrorStream)) {
    parseErrorStream.flush();
    llvm::StringRef message = llvm::StringRef(parseErrors).trim();
    // llvm::cl prefixes its messages with the program name; keep one line.
    message = message.take_until([](char c) { return c == '\n'; });
    if (auto colon = message.find(": "); colon != llvm::StringRef::npos &&
                                         message.startswith(argv[0]))
      message = message.drop_front(colon + 2);
    llvm::errs() << "error: " << message << '\n';
    return 1;
  }

  if (listPasses) {
    passes::PassRegistry registry;
    passes::registerAllPasses(registry);
    llvm::outs() << "Passes:\n";
    registry.printPasses(llvm::outs());
    return 0;
  }
  if (input.empty()) {
    llvm::errs() << "error: no input file (see --help)\n";
    return 1;
  }

  OptOptions options;
  options.inputPath = input;
  options.outputPath = output;
  options.pipeline = pipeline;
  options.splitInputFile = splitInputFile;
  options.printIr = printIr;
  options.printIrAfterAll = printIrAfterAll;
  options.timing = timing;
  options.bind = bind;
  options.externalData = externalData;
  options.unusedWeights = unusedWeights;
  options.printMemory = printMemory;
  options.reportPath = report;
  options.memoryTimelinePath = memoryTimeline;
  if (auto err = runOpt(options, llvm::errs())) {
    llvm::outs().flush();
    std::string message = errorToString(std::move(err));
    for (llvm::StringRef line : llvm::split(message, '\n'))
      llvm::errs() << "error: " << line << '\n';
    return 1;
  }
  return 0;
}

} // namespace remat::driver
