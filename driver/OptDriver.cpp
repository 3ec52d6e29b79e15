//===- driver/OptDriver.cpp - The library behind remat-opt ----------------===//
#include "driver/OptDriver.h"

#include "driver/OutputFile.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace remat::driver {

llvm::StringRef getVersionString() { return "remat " REMAT_VERSION_STRING; }

namespace {

/// One `// -----` chunk of the input and the line it starts on.
struct Chunk {
  llvm::StringRef text;
  unsigned lineOffset;
};

std::vector<Chunk> splitChunks(llvm::StringRef text, bool split) {
  if (!split)
    return {{text, 0}};
  std::vector<Chunk> chunks;
  unsigned line = 0, chunkLine = 0;
  size_t chunkStart = 0, pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t next = eol == llvm::StringRef::npos ? text.size() : eol + 1;
    if (text.substr(pos, next - pos).startswith("// -----")) {
      chunks.push_back({text.slice(chunkStart, pos), chunkLine});
      chunkStart = next;
      chunkLine = line + 1;
    }
    pos = next;
    ++line;
  }
  chunks.push_back({text.substr(chunkStart), chunkLine});
  return chunks;
}

llvm::Expected<std::string> processChunk(const Chunk &chunk,
                                         const OptOptions &options,
                                         const passes::PassRegistry &registry,
                                         llvm::raw_ostream &diag) {
  auto graph = ir::parseGraph(chunk.text, options.inputPath, chunk.lineOffset);
  if (!graph)
    return graph.takeError();
  if (auto err = ir::verify(**graph))
    return std::move(err);
  passes::PassManager pm;
  if (auto err = passes::parsePassPipeline(options.pipeline, registry, pm))
    return std::move(err);
  if (options.printIrAfterAll)
    pm.enablePrintAfterAll(&diag);
  if (options.timing)
    pm.enableTiming(&diag);
  if (pm.size() != 0)
    if (auto changed = pm.run(**graph); !changed)
      return changed.takeError();
  return ir::printGraphToString(**graph);
}

} // namespace

llvm::Error runOpt(const OptOptions &options, llvm::raw_ostream &diag) {
  llvm::StringRef extension = llvm::sys::path::extension(options.inputPath);
  if (options.inputPath != "-" && extension != ".rir")
    return makeError("cannot read '" + options.inputPath +
                     "': unsupported input format '" + extension +
                     "' (supported: .rir)");
  llvm::StringRef outExtension = llvm::sys::path::extension(options.outputPath);
  if (options.outputPath != "-" && outExtension != ".rir")
    return makeError("cannot write '" + options.outputPath +
                     "': unsupported output format '" + outExtension +
                     "' (supported: .rir, or - for stdout)");

  passes::PassRegistry registry;
  passes::registerAllPasses(registry);
  // Check the pipeline once up front so that a bad pipeline is one error,
  // not one per chunk, and is reported before reading the input.
  {
    passes::PassManager probe;
    if (auto err = passes::parsePassPipeline(options.pipeline, registry, probe))
      return err;
  }

  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(options.inputPath);
  if (!buffer)
    return makeError("cannot open '" + options.inputPath +
                     "': " + buffer.getError().message());

  std::string output;
  std::string errors;
  std::vector<Chunk> chunks =
      splitChunks((*buffer)->getBuffer(), options.splitInputFile);
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto printed = processChunk(chunks[i], options, registry, diag);
    if (!printed) {
      errors += (errors.empty() ? "" : "\n") +
                errorToString(printed.takeError());
      continue;
    }
    if (i != 0)
      output += "// -----\n";
    output += *printed;
  }
  if (!errors.empty())
    return makeError(errors);
  if (auto err = writeOutputFile(options.outputPath, output))
    return err;
  if (options.printIr && options.outputPath != "-")
    llvm::outs() << output;
  return llvm::Error::success();
}

int optMain(int argc, char **argv) {
  namespace cl = llvm::cl;
  cl::OptionCategory category("remat-opt options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<input .rir file, or - for stdin>"),
                             cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output file (- for stdout, the default); written only on success"),
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
