//===- passes/remat/ChunkRewriter.h - Shared rewrite helpers ----*- C++ -*-===//
//
// What the chunk-loss and chunk-attention rewrites (ChunkLoss.h,
// ChunkAttention.h) share: building nodes that stop at the first error,
// index constants, taking over an old value's readers and name, and erasing
// the old nodes readers first.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_CHUNKREWRITER_H
#define REMAT_PASSES_REMAT_CHUNKREWRITER_H

#include "ir/Builder.h"
#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"

#include <optional>
#include <string>
#include <vector>

namespace remat::passes::recompute {

/// "%name" of \p value, for messages.
inline std::string percent(const ir::Value *value) {
  return ("%" + value->getName()).str();
}

/// "%name (Op)" of \p node's first result, for messages.
inline std::string describe(const ir::Node &node) {
  return percent(node.getResult(0)) + " (" +
         ir::getOpInfo(node.getOp()).name.str() + ")";
}

class ChunkRewriterBase {
protected:
  /// \p option names the rewrite in its errors ("chunk-loss").
  ChunkRewriterBase(ir::Graph &graph, llvm::StringRef option)
      : graph_(graph), builder_(graph), option_(option.str()) {}

  /// An i64 constant of \p values, named after base_.
  ir::Value *ints(llvm::ArrayRef<int64_t> values) {
    return builder_.createConstant(
        ir::TensorData::fromInts(
            ir::TensorType(ir::DType::I64, {int64_t(values.size())}), values),
        base_ + ".index");
  }

  /// Creates a node at the builder's place; after a failure, creates nothing
  /// and returns null (the rewrite then returns takeError()).
  ir::Node *createNode(ir::OpKind op, llvm::ArrayRef<ir::Value *> operands,
                       ir::AttrList attrs, unsigned results,
                       llvm::StringRef name) {
    if (error_)
      return nullptr;
    auto node = builder_.create(op, operands, std::move(attrs), results, name);
    if (!node) {
      error_ = node.takeError();
      return nullptr;
    }
    return *node;
  }

  /// Creates a one-result node; after a failure, creates nothing and
  /// returns the first operand.
  ir::Value *create(ir::OpKind op, llvm::ArrayRef<ir::Value *> operands,
                    ir::AttrList attrs, llvm::StringRef name) {
    ir::Node *node = createNode(op, operands, std::move(attrs), 1, name);
    return node ? node->getResult(0) : operands.front();
  }

  /// \p replacement takes over \p old's readers and name.
  void replace(ir::Value *old, ir::Value *replacement) {
    if (error_)
      return;
    if (old->getType() != replacement->getType()) {
      error_ = makeError(option_ + ": the chunked " + percent(old) +
                         " would change type; left whole");
      return;
    }
    std::string name = old->getName().str();
    old->replaceAllUsesWith(replacement);
    old->setName(graph_.uniqueName(name + ".unchunked"));
    replacement->setName(name);
  }

  /// Erases the nodes \p isOld picks whose results are no longer read,
  /// readers first.
  template <typename Pred> void eraseOld(Pred isOld) {
    std::vector<ir::Node *> inOrder;
    for (ir::Node &node : graph_.getNodes())
      if (isOld(&node))
        inOrder.push_back(&node);
    for (ir::Node *node : llvm::reverse(inOrder))
      if (!node->hasUsedResults())
        graph_.eraseNode(node);
  }

  llvm::Error takeError() { return std::move(*error_); }

  ir::Graph &graph_;
  ir::Builder builder_;
  std::string option_;
  /// The prefix of the new values' names.
  std::string base_;
  std::optional<llvm::Error> error_;
};

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_CHUNKREWRITER_H
