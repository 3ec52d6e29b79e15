//===- session/ModelLoader.cpp - Reading a model of any format ------------===//
#include "session/ModelLoader.h"

#include "frontends/bert/BertBuilder.h"
#include "frontends/bert/BertConfig.h"
#include "frontends/onnx/OnnxImporter.h"
#include "ir/Limits.h"
#include "ir/Parser.h"
#include "ir/Support.h"
#include "passes/FoldingPolicy.h"
#include "passes/Passes.h"
#include "runtime/cpu/Evaluator.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace remat::session {

llvm::Expected<ModelFormat> getInputFormat(llvm::StringRef path) {
  llvm::StringRef extension = llvm::sys::path::extension(path);
  if (path == "-" || extension == ".rir")
    return ModelFormat::Rir;
  if (extension == ".onnx")
    return ModelFormat::Onnx;
  if (extension == ".json")
    return ModelFormat::BertConfig;
  return makeError("cannot read '" + path + "': unsupported input format '" +
                   extension + "' (supported: .rir, .onnx, .json)");
}

namespace {

/// One `// -----` chunk of a .rir file and the line it starts on.
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

} // namespace

llvm::Expected<std::vector<std::unique_ptr<ir::Graph>>>
loadModels(llvm::StringRef path, const LoadOptions &options) {
  auto format = getInputFormat(path);
  if (!format)
    return format.takeError();
  std::vector<std::unique_ptr<ir::Graph>> graphs;
  llvm::StringMap<int64_t> bindings;
  if (auto err = onnx_frontend::parseBindings(options.bind, bindings))
    return std::move(err);

  if (!options.scalarWeights.empty() && *format != ModelFormat::Onnx)
    return makeError("--scalar-weights applies to .onnx inputs; '" + path +
                     "' has no initializers");
  if (*format == ModelFormat::Onnx) {
    onnx_frontend::ImportOptions importOptions;
    importOptions.bindings = std::move(bindings);
    auto scalarWeights = passes::AutodiffPass::parseFreeze(options.scalarWeights);
    if (!scalarWeights)
      return makeError("--scalar-weights: " +
                       errorToString(scalarWeights.takeError()));
    importOptions.scalarWeights = std::move(*scalarWeights);
    importOptions.evaluator =
        passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator());
    auto graph = onnx_frontend::importOnnxFile(path, importOptions);
    if (!graph)
      return graph.takeError();
    graphs.push_back(std::move(*graph));
    return std::move(graphs);
  }

  if (*format == ModelFormat::BertConfig) {
    auto config = bert::loadBertConfig(path);
    if (!config)
      return config.takeError();
    if (auto err = config->applyBindings(bindings))
      return std::move(err);
    bert::BertBuildOptions buildOptions;
    buildOptions.initWeights = options.initWeights;
    auto graph = bert::buildBert(*config, buildOptions);
    if (!graph)
      return graph.takeError();
    graphs.push_back(std::move(*graph));
    return std::move(graphs);
  }

  if (!options.bind.empty())
    return makeError("--bind applies to .onnx and .json inputs; the dims of '" +
                     path + "' are static");
  auto buffer = ir::readInputFile(path, /*allowStdin=*/true);
  if (!buffer)
    return buffer.takeError();
  std::string errors;
  std::vector<Chunk> chunks =
      splitChunks((*buffer)->getBuffer(), options.splitInputFile);
  for (const Chunk &chunk : chunks) {
    auto graph = ir::parseGraph(chunk.text, path, chunk.lineOffset);
    if (!graph) {
      // One `error:` line for the first failing case; the others follow as
      // notes (reportError), each naming its case.
      std::string message = errorToString(graph.takeError());
      if (chunks.size() > 1)
        message = "case " + std::to_string(&chunk - chunks.data() + 1) +
                  " of " + std::to_string(chunks.size()) + " (line " +
                  std::to_string(chunk.lineOffset + 1) + "): " + message;
      errors += (errors.empty() ? "" : "\nnote: ") + message;
      continue;
    }
    graphs.push_back(std::move(*graph));
  }
  if (!errors.empty())
    return makeError(errors);
  return std::move(graphs);
}

llvm::Expected<std::unique_ptr<ir::Graph>>
loadModel(llvm::StringRef path, const LoadOptions &options) {
  auto graphs = loadModels(path, options);
  if (!graphs)
    return graphs.takeError();
  if (graphs->size() != 1)
    return makeError("'" + path + "' holds " + llvm::Twine(graphs->size()) +
                     " graphs; expected one");
  return std::move(graphs->front());
}

} // namespace remat::session
