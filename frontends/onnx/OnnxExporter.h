//===- frontends/onnx/OnnxExporter.h - Graph -> ONNX ModelProto -*- C++ -*-===//
//
// Writes standard ONNX: IR version 8, opset 17, default domain only
// (remat-domain ops are decomposed), node order = schedule, weights as
// initializers, and metadata_props naming remat's version and the options it
// ran with. The result passes onnx.checker.check_model(full_check=True); the
// exporter runs ONNX's own checker and strict shape inference on what it
// built and reports a failure as an error instead of writing the file.
//
// Note [ONNX export conventions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ONNX has no field for some of remat's facts; they travel in doc_strings,
// which every ONNX tool ignores, and which an importer may read back when the
// model's metadata_props holds "remat.version" (i.e. remat wrote it):
//  - Node stage: NodeProto.doc_string is "stage=bwd" for Stage::Backward and
//    "stage=remat" for Stage::Recompute; forward nodes have none. Nodes that
//    a remat-domain op was decomposed into carry that op's stage.
//  - Weights: a graph input flagged `weight` becomes an initializer when it
//    has data and a graph input when it has none (ONNX must still declare
//    it); either way its TensorProto / ValueInfoProto doc_string is "weight".
//    A non-weight input with data becomes an initializer without one; a
//    non-weight input without data is a plain graph input.
// Node names are the name of the node's first result, so they are unique.
// An empty graph name is written as "main" (ONNX requires a name).
//
// External data follows ONNX's convention: TensorProto.data_location =
// EXTERNAL with external_data entries "location" (the data file's base name),
// "offset" and "length", in that order. Every initializer with at least one
// byte goes to the data file, in initializer order, each at an offset that is
// a multiple of kExternalDataAlignment (zero padding between); empty tensors
// stay inline, and with nothing to hold no data file is written. Constant
// nodes keep their tensors inline.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_ONNX_ONNXEXPORTER_H
#define REMAT_FRONTENDS_ONNX_ONNXEXPORTER_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace remat::onnx_frontend {

/// The ModelProto.ir_version remat writes.
constexpr int64_t kExportIrVersion = 8;
/// The only opset remat writes (default domain "").
constexpr int64_t kExportOpsetVersion = 17;
/// Offsets of tensors in an external data file are multiples of this, so
/// that a reader can map each tensor page-aligned.
constexpr uint64_t kExternalDataAlignment = 4096;
/// Protobuf cannot serialize a message of 2 GiB or more.
constexpr uint64_t kMaxProtobufBytes = (uint64_t(1) << 31) - 1;

/// How to export.
struct ExportOptions {
  /// Store weights in a side file `<output>.data` even when the model is
  /// small. Models whose protobuf would pass 2 GB always use external data.
  bool externalData = false;
  /// Extra metadata_props entries (remat's version is always added as
  /// "remat.version"; a key given twice is an error).
  std::vector<std::pair<std::string, std::string>> metadata;
  /// The largest serialized model written inline: exportOnnxFile switches to
  /// external data above it, exportOnnxBytes fails. Only tests lower it, to
  /// reach the > 2 GB paths without 2 GB of weights.
  uint64_t maxInlineBytes = kMaxProtobufBytes;
};

/// Writes \p graph to \p path (and `<path>.data` with external data), each
/// through a temporary renamed into place on success, so that an error
/// leaves no partial file. \p path "-" writes the model to stdout (inline
/// data only).
llvm::Error exportOnnxFile(const ir::Graph &graph, llvm::StringRef path,
                           const ExportOptions &options);

/// \returns the serialized ModelProto of \p graph with all data inline
/// (for tests and graphs under 2 GB); options.externalData is ignored, and a
/// model over options.maxInlineBytes is an error.
llvm::Expected<std::string> exportOnnxBytes(const ir::Graph &graph,
                                            const ExportOptions &options);

} // namespace remat::onnx_frontend

#endif // REMAT_FRONTENDS_ONNX_ONNXEXPORTER_H
