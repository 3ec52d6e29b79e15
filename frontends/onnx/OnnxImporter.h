//===- frontends/onnx/OnnxImporter.h - ONNX ModelProto -> Graph -*- C++ -*-===//
//
// Takes .onnx files as real exporters write them (torch.onnx.export's
// TorchScript exporter at opset 14/17 and the dynamo exporter at its own
// default; IR versions 7-10; default-domain opsets 13-20) and converts them to
// remat's opset-17 IR. Symbolic dims must be bound (--bind batch=2,seq=16);
// once bound every shape is static.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_ONNX_ONNXIMPORTER_H
#define REMAT_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "ir/Graph.h"
#include "ir/NodeEvaluator.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/GlobPattern.h"

#include <memory>
#include <utility>
#include <vector>

namespace remat::onnx_frontend {

/// How to import.
struct ImportOptions {
  /// Values for symbolic dims, by dim_param name ("batch" -> 2).
  llvm::StringMap<int64_t> bindings;
  /// Floating-point initializers become trainable weights, except those with
  /// exactly one element: exporters store scalar constants there (the
  /// dynamo exporter's dropout ratio, attention scale and mask fill value),
  /// which must stay constants so that they are neither trained nor opaque
  /// to shape inference. Set this to import them as weights as well.
  bool singleElementWeights = false;
  /// One-element float initializers to import as weights all the same (a
  /// trainable scalar: CLIP's logit_scale, an activation's learned slope),
  /// by name or glob; each pattern must match one, or import fails.
  std::vector<std::pair<std::string, llvm::GlobPattern>> scalarWeights;
  /// Evaluates a node whose operands are all constants (and is at most
  /// 16 MiB) so that it becomes a Constant; a node it refuses stays. Required:
  /// shape subgraphs must fold for shapes to be static. The driver gives the
  /// CPU kernels under the fold-constants policy
  /// (passes::makeFoldingEvaluator(runtime::cpu::makeCpuEvaluator())).
  ir::NodeEvaluator evaluator;
};

/// Parses "batch=2,seq=16" into \p bindings. Errors name the bad entry.
llvm::Error parseBindings(llvm::StringRef text,
                          llvm::StringMap<int64_t> &bindings);

/// Imports the model in file \p path; external data files are resolved
/// relative to its directory, and must stay inside it once every symbolic
/// link is followed. Errors name the file and, where it applies, the node
/// (name, op, domain, opset), value or dim.
llvm::Expected<std::unique_ptr<ir::Graph>>
importOnnxFile(llvm::StringRef path, const ImportOptions &options);

/// Imports a serialized ModelProto held in \p bytes. \p sourceName is used
/// in messages; \p baseDir is the folder external data is read from, under
/// the rule of importOnnxFile ("" = none: external data is an error).
llvm::Expected<std::unique_ptr<ir::Graph>>
importOnnxBytes(llvm::StringRef bytes, llvm::StringRef sourceName,
                llvm::StringRef baseDir, const ImportOptions &options);

} // namespace remat::onnx_frontend

#endif // REMAT_FRONTENDS_ONNX_ONNXIMPORTER_H
