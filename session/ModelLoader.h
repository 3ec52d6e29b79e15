//===- session/ModelLoader.h - Reading a model of any format ----*- C++ -*-===//
#ifndef REMAT_SESSION_MODELLOADER_H
#define REMAT_SESSION_MODELLOADER_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace remat::session {

/// The formats remat reads and writes, chosen by file extension.
enum class ModelFormat { Rir, Onnx, BertConfig };

/// \returns the format of input \p path ("-" is .rir on stdin), or an error
/// naming the extension and the supported ones.
llvm::Expected<ModelFormat> getInputFormat(llvm::StringRef path);

/// How to read a model.
struct LoadOptions {
  /// "batch=2,seq=16": symbolic dims of an .onnx model, or the batch and
  /// sequence length of a BERT config. An error for .rir (static dims).
  std::string bind;
  /// Split a .rir file at `// -----` lines into several graphs.
  bool splitInputFile = false;
  /// Give a BERT config's weights their initial values (see
  /// bert::BertBuildOptions::initWeights).
  bool initWeights = true;
  /// "logit_scale,*.alpha_*": one-element float initializers of an .onnx
  /// model to import as weights (onnx_frontend::ImportOptions::
  /// scalarWeights). An error for other inputs.
  std::string scalarWeights;
};

/// Reads every graph in \p path: .rir (one per chunk with splitInputFile),
/// .onnx, or a BERT config .json. Errors of all chunks are collected, one
/// line each.
llvm::Expected<std::vector<std::unique_ptr<ir::Graph>>>
loadModels(llvm::StringRef path, const LoadOptions &options);

/// Reads exactly one graph from \p path.
llvm::Expected<std::unique_ptr<ir::Graph>>
loadModel(llvm::StringRef path, const LoadOptions &options);

} // namespace remat::session

#endif // REMAT_SESSION_MODELLOADER_H
