//===- frontends/onnx/OnnxExporter.h - Graph -> ONNX ModelProto -*- C++ -*-===//
//
// Writes standard ONNX: opset 17, default domain only (remat-domain ops are
// decomposed), node order = schedule, weights as initializers, and
// metadata_props naming remat's version and the options it ran with. The
// result passes onnx.checker.check_model(full_check=True).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_ONNX_ONNXEXPORTER_H
#define REMAT_FRONTENDS_ONNX_ONNXEXPORTER_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace remat::onnx_frontend {

/// How to export.
struct ExportOptions {
  /// Store weights in a side file `<output>.data` even when the model is
  /// small. Models whose protobuf would pass 2 GB always use external data.
  bool externalData = false;
  /// Extra metadata_props entries (remat's version is always added).
  std::vector<std::pair<std::string, std::string>> metadata;
};

/// Writes \p graph to \p path (and `<path>.data` with external data), each
/// through a temporary renamed into place on success, so that an error
/// leaves no partial file.
llvm::Error exportOnnxFile(const ir::Graph &graph, llvm::StringRef path,
                           const ExportOptions &options);

/// \returns the serialized ModelProto of \p graph with all data inline
/// (for tests and graphs under 2 GB).
llvm::Expected<std::string> exportOnnxBytes(const ir::Graph &graph,
                                            const ExportOptions &options);

} // namespace remat::onnx_frontend

#endif // REMAT_FRONTENDS_ONNX_ONNXEXPORTER_H
