//===- passes/autodiff/GradRules.h - Gradient rule interface ----*- C++ -*-===//
//
// The gradient rules of autodiff live in files by op family, as
// runtime/cpu's kernels do:
//
//   Elementwise.cpp    arithmetic, unary ops, Cast, Where, Max/Min, Gelu,
//                      Dropout, Clip, Softplus
//   Linalg.cpp         MatMul, Gemm, Conv
//   Normalization.cpp  Softmax, LogSoftmax, LayerNormalization,
//                      SoftmaxCrossEntropyLoss
//   Reductions.cpp     ReduceMean, ReduceSum, ReduceMax
//   DataMovement.cpp   Identity, Reshape, (Un)Squeeze, Expand, Transpose,
//                      Concat, Split, Slice, Gather
//   Indexing.cpp       Trilu, CumSum, GatherElements, Pad, Tile, TopK
//
// Each is grad<Op>, built from the Differentiator's building blocks;
// passes/Autodiff.cpp (Note [Autodiff]) walks the graph and calls the rule
// of every kDifferentiable op whose GradOperands are not empty (ir/Ops.def,
// Note [The op table]).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_AUTODIFF_GRADRULES_H
#define REMAT_PASSES_AUTODIFF_GRADRULES_H

#include "ir/Builder.h"
#include "ir/GradientName.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace remat::passes::autodiff {

using namespace ir;
using llvm::Error;
using llvm::Expected;

/// Emits backward nodes. A failure to build a node is recorded once and
/// poisons every later emit (they return null), so rules read straight.
class Differentiator {
public:
  Differentiator(Graph &graph) : graph_(graph), builder_(graph) {
    builder_.setStage(Stage::Backward);
  }

  Error run(Value *loss, llvm::ArrayRef<Value *> weights,
            llvm::DenseMap<Value *, Value *> &gradOfWeight,
            const llvm::DenseSet<Value *> &reach);

  // Building blocks of the gradient rules.
  Graph &graph() { return graph_; }
  Value *emit(OpKind op, llvm::ArrayRef<Value *> operands, AttrList attrs = {});
  Node *emitNode(OpKind op, llvm::ArrayRef<Value *> operands, AttrList attrs,
                 unsigned numResults);
  Value *scalar(DType dtype, double value);
  Value *boolean(bool value) { return scalar(DType::Bool, value ? 1 : 0); }
  Value *ints(llvm::ArrayRef<int64_t> values, DType dtype = DType::I64);
  Value *zeros(const TensorType &type);
  Value *reshape(Value *value, llvm::ArrayRef<int64_t> dims);
  Value *sumTo(Value *grad, const TensorType &type);
  Value *castTo(Value *value, DType dtype);
  /// Adds \p grad (null: nothing) to the gradient of \p operand.
  void contribute(Value *operand, Value *grad);
  /// Embedding weights whose lookups (Gather on axis 0) add no gradient to
  /// one row, as torch's nn.Embedding(padding_idx=row): autodiff's
  /// `padding-idx` option.
  void setPaddingRows(llvm::DenseMap<Value *, int64_t> rows) {
    paddingRows_ = std::move(rows);
  }
  /// \returns the row \p weight's lookups add no gradient to, if any.
  std::optional<int64_t> getPaddingRow(Value *weight) const {
    auto it = paddingRows_.find(weight);
    if (it == paddingRows_.end())
      return std::nullopt;
    return it->second;
  }
  /// True if operand \p i of \p node needs a gradient.
  bool wants(const Node &node, unsigned i) const {
    return reach_->contains(node.getOperand(i));
  }

private:
  Value *accumulate(Value *value);
  Error backprop(Node &node);

  Graph &graph_;
  Builder builder_;
  const llvm::DenseSet<Value *> *reach_ = nullptr;
  std::string base_ = "grad";
  std::optional<std::string> failure_;
  llvm::DenseMap<Value *, llvm::SmallVector<Value *, 2>> contributions_;
  llvm::DenseSet<Value *> created_;
  llvm::DenseMap<Value *, int64_t> paddingRows_;
};

/// \returns int attribute \p name of \p node, \p otherwise if absent.
int64_t intAttr(const Node &node, llvm::StringRef name, int64_t otherwise);

/// \returns \p axis in [-rank, rank-1] mapped to [0, rank-1].
int64_t normAxis(int64_t axis, unsigned rank);

/// \returns the dims of \p type with \p axes set to 1.
llvm::SmallVector<int64_t, 4> keepDims(const TensorType &type,
                                       llvm::ArrayRef<int64_t> axes);

/// What a gradient rule gets: the forward node and the gradients that
/// reached its results.
struct GradArgs {
  Node &node;
  /// The gradient of each result, null where none reached it.
  llvm::ArrayRef<Value *> grads;
  /// grads[0]; null only for Split, whose other results may carry one.
  Value *g;
  /// Result 0 and its dtype.
  Value *y;
  DType dt;

  Value *in(unsigned i) const { return node.getOperand(i); }
  const TensorType &typeOf(unsigned i) const {
    return node.getOperand(i)->getType();
  }
};

/// The gradient rule of op K: emits the backward nodes of one forward node
/// and contributes the gradients of the operands that want one. Defined for
/// exactly the ops with trait kDifferentiable and GradOperands (autodiff
/// does not link otherwise); an Error is for what the graph causes, not for
/// bugs.
template <OpKind K>
Error grad(Differentiator &d, const GradArgs &args) = delete;

// The rules, declared for every op so that kGradRules can name them; the
// family files define those of the ops with trait kDifferentiable and
// GradOperands.
#define OP(NAME, ...)                                                          \
  template <>                                                                  \
  Error grad<OpKind::NAME>(Differentiator & d, const GradArgs &args);
#include "ir/Ops.def"

} // namespace remat::passes::autodiff

#endif // REMAT_PASSES_AUTODIFF_GRADRULES_H
