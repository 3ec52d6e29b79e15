//===- ir/Builder.h - Creating nodes with inferred types --------*- C++ -*-===//
#ifndef REMAT_IR_BUILDER_H
#define REMAT_IR_BUILDER_H

#include "ir/Graph.h"

#include "llvm/Support/Error.h"

namespace remat::ir {

/// Creates nodes at an insertion point, inferring their result types. New
/// nodes take the builder's current stage and layer.
class Builder {
public:
  /// A builder that appends to the end of \p graph.
  explicit Builder(Graph &graph) : graph_(graph) {}

  /// New nodes go before \p node (at the end when null).
  void setInsertionPoint(Node *node) { insertBefore_ = node; }
  void setInsertionPointToEnd() { insertBefore_ = nullptr; }
  void setStage(Stage stage) { stage_ = stage; }
  void setLayer(int layer) { layer_ = layer; }
  Graph &getGraph() { return graph_; }

  /// Creates \p op on \p operands with \p numResults results whose types are
  /// inferred; result names derive from \p name (fresh when empty).
  /// \returns an error, and creates nothing, if inference fails or a result
  /// shape depends on a value that is not constant.
  llvm::Expected<Node *> create(OpKind op, llvm::ArrayRef<Value *> operands,
                                AttrList attrs = {}, unsigned numResults = 1,
                                llvm::StringRef name = "");

  /// Like create() for a single-result op; \returns the result.
  llvm::Expected<Value *> createValue(OpKind op,
                                      llvm::ArrayRef<Value *> operands,
                                      AttrList attrs = {},
                                      llvm::StringRef name = "");

  /// Creates a Constant node holding \p data.
  Value *createConstant(TensorDataPtr data, llvm::StringRef name = "");

private:
  Graph &graph_;
  Node *insertBefore_ = nullptr;
  Stage stage_ = Stage::Forward;
  int layer_ = -1;
};

} // namespace remat::ir

#endif // REMAT_IR_BUILDER_H
