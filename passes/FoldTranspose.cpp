//===- passes/FoldTranspose.cpp - Transposes read by GEMMs, not copied ----===//
//
// Note [fold-transpose]
// ~~~~~~~~~~~~~~~~~~~~~
// Attention copies its activations between [batch, seq, heads, dim] and
// [batch, heads, seq, dim] around each batched MatMul, and autodiff adds
// more Transposes (of K, of the probabilities, of Q) for the gradients:
// twelve copies per layer of a BERT training step. A strided GEMM reads a
// transposed operand where it is when the operand keeps a unit-stride dim
// among its two matrix dims (a leading dim for a row-major matrix, a
// per-tile gather for a column-major one; the batch dims become
// per-product offsets), and writes a transposed result whose columns or
// rows are its unit-stride dim. This pass rewrites such MatMuls into
// remat.PermutedMatMul, reading the Transposes' sources, and erases the
// Transposes.
//
// It never raises the live peak: a Transpose is folded only when every use
// of its result folds (into a MatMul operand, or into another such
// Transpose), so it disappears; its source, of the same bytes, then lives
// instead of it until its last reader (the source may live longer than
// before, but only while the Transpose's result would have). A result
// Transpose folds when it is the MatMul's only use: the fused result lives
// from the MatMul instead of the product, again the same bytes. The arena
// plan-memory packs afterwards can still come out a little larger or
// smaller (other values, other offsets), so remat-run runs the pass before
// remat, which then meets its budget on the folded graph.
//
// remat-run adds the pass for the CPU backend (driver withCpuFusions); the
// CUDA backend runs remat.PermutedMatMul on the host, so it is not added
// there. The CPU kernel makes the GEMM calls of the MatMul over copied
// operands (same tiles; a column-major operand gathered per tile, a result
// with unit-stride rows scattered, never BLAS's trans kernels or B^T A^T,
// which round differently), so the bits are the same (MemoryTest's random
// graphs and tests/tools/fold-transpose.test compare them; OnnxExporterTest
// the kernel with the decomposition).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "llvm/ADT/DenseSet.h"

#include <numeric>
#include <vector>

namespace remat::passes {

namespace {

using Perm = llvm::SmallVector<int64_t, 6>;

Perm identityPerm(unsigned rank) {
  Perm perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  return perm;
}

/// Transpose's 'perm' (reversed dims when absent).
Perm transposePerm(const ir::Node &node) {
  unsigned rank = node.getOperand(0)->getType().getRank();
  if (auto perm = node.getAttrs().getInts("perm"))
    return Perm(perm->begin(), perm->end());
  Perm reversed(rank);
  for (unsigned i = 0; i < rank; ++i)
    reversed[i] = rank - 1 - i;
  return reversed;
}

bool isIdentity(llvm::ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return false;
  return true;
}

/// A MatMul the strided kernel can run: f32 or f64, operands of one rank
/// >= 2 with the same batch dims (no broadcasting).
bool isFoldableMatMul(const ir::Node &node) {
  if (node.getOp() != ir::OpKind::MatMul)
    return false;
  const ir::TensorType &a = node.getOperand(0)->getType();
  const ir::TensorType &b = node.getOperand(1)->getType();
  if (a.getDType() != b.getDType() ||
      (a.getDType() != ir::DType::F32 && a.getDType() != ir::DType::F64))
    return false;
  unsigned rank = a.getRank();
  return rank >= 2 && b.getRank() == rank &&
         a.getDims().drop_back(2) == b.getDims().drop_back(2);
}

/// Whether an operand read through \p perm keeps its unit-stride dim among
/// its two matrix dims.
bool isStridedOperand(llvm::ArrayRef<int64_t> perm) {
  int64_t last = int64_t(perm.size()) - 1;
  return perm[last] == last || perm[last - 1] == last;
}

class Folder {
public:
  explicit Folder(ir::Graph &graph) : graph_(graph) {}
  bool run();

private:
  /// Where \p value's data comes from when the candidate Transposes above
  /// it are not run: value = Transpose(source, perm).
  std::pair<ir::Value *, Perm> viewOf(ir::Value *value) const;
  /// Whether every use of \p transpose's result folds, given the current
  /// candidates.
  bool allUsesFold(const ir::Node &transpose) const;
  /// The Transpose that is \p matmul's only use and can be written through,
  /// or null.
  ir::Node *resultTranspose(const ir::Node &matmul) const;

  ir::Graph &graph_;
  llvm::DenseSet<const ir::Node *> candidates_;
};

std::pair<ir::Value *, Perm> Folder::viewOf(ir::Value *value) const {
  Perm perm = identityPerm(value->getType().getRank());
  // value[j] = source[perm[j]]; through source = Transpose(x, q):
  // value[j] = x[q[perm[j]]].
  while (ir::Node *def = value->getDefiningNode()) {
    if (!candidates_.contains(def))
      break;
    Perm q = transposePerm(*def);
    for (int64_t &d : perm)
      d = q[d];
    value = def->getOperand(0);
  }
  return {value, perm};
}

bool Folder::allUsesFold(const ir::Node &transpose) const {
  const ir::Value *result = transpose.getResult(0);
  if (result->isGraphOutput() || !result->hasUses())
    return false;
  for (const ir::Use &use : result->getUses()) {
    const ir::Node *user = use.user;
    if (candidates_.contains(user))
      continue;
    if (!isFoldableMatMul(*user))
      return false;
    auto [source, perm] = viewOf(user->getOperand(use.operandIndex));
    (void)source;
    if (!isStridedOperand(perm))
      return false;
  }
  return true;
}

ir::Node *Folder::resultTranspose(const ir::Node &matmul) const {
  const ir::Value *product = matmul.getResult(0);
  if (product->isGraphOutput() || product->getNumUses() != 1)
    return nullptr;
  ir::Node *user = product->getUses().front().user;
  if (user->getOp() != ir::OpKind::Transpose || candidates_.contains(user))
    return nullptr;
  Perm perm = transposePerm(*user);
  int64_t last = int64_t(perm.size()) - 1;
  // The product's columns or its rows innermost (the kernel scatters rows).
  return perm[last] == last || perm[last] == last - 1 ? user : nullptr;
}

bool Folder::run() {
  // The Transposes that vanish: start from all and drop those with a use
  // that does not fold until none changes (dropping one can make a use of
  // another stop folding, as views then stop at the kept one).
  std::vector<ir::Node *> transposes;
  for (ir::Node &node : graph_.getNodes())
    if (node.getOp() == ir::OpKind::Transpose) {
      transposes.push_back(&node);
      candidates_.insert(&node);
    }
  for (bool changed = true; changed;) {
    changed = false;
    for (ir::Node *node : transposes)
      if (candidates_.contains(node) && !allUsesFold(*node)) {
        candidates_.erase(node);
        changed = true;
      }
  }

  std::vector<ir::Node *> matmuls;
  for (ir::Node &node : graph_.getNodes())
    if (isFoldableMatMul(node))
      matmuls.push_back(&node);
  bool changed = false;
  for (ir::Node *matmul : matmuls) {
    auto [a, permA] = viewOf(matmul->getOperand(0));
    auto [b, permB] = viewOf(matmul->getOperand(1));
    ir::Node *outTranspose = resultTranspose(*matmul);
    // (A view through Transposes may compose to the identity perm.)
    if (a == matmul->getOperand(0) && b == matmul->getOperand(1) &&
        !outTranspose)
      continue;
    unsigned rank = matmul->getResult(0)->getType().getRank();
    Perm permY =
        outTranspose ? transposePerm(*outTranspose) : identityPerm(rank);
    ir::Value *replaced =
        outTranspose ? outTranspose->getResult(0) : matmul->getResult(0);
    ir::AttrList attrs;
    auto setPerm = [&](llvm::StringRef name, const Perm &perm) {
      if (!isIdentity(perm))
        attrs.set(name, std::vector<int64_t>(perm.begin(), perm.end()));
    };
    setPerm("perm_a", permA);
    setPerm("perm_b", permB);
    setPerm("perm_y", permY);
    ir::Node *fused = graph_.createNode(
        ir::OpKind::PermutedMatMul, {a, b}, {replaced->getType()},
        {graph_.uniqueName(replaced->getName().str() + ".permuted")},
        std::move(attrs), matmul);
    fused->setStage(matmul->getStage());
    fused->setLayer(matmul->getLayer());
    fused->setLoc(matmul->getLoc());
    std::string name = replaced->getName().str();
    replaced->replaceAllUsesWith(fused->getResult(0));
    if (outTranspose)
      graph_.eraseNode(outTranspose);
    graph_.eraseNode(matmul);
    fused->getResult(0)->setName(name);
    changed = true;
  }
  // Every candidate has lost all its uses; erase users before their
  // operands' producers.
  for (auto it = transposes.rbegin(); it != transposes.rend(); ++it)
    if (candidates_.contains(*it)) {
      assert(!(*it)->getResult(0)->hasUses() && "a folded Transpose is read");
      graph_.eraseNode(*it);
      changed = true;
    }
  return changed;
}

} // namespace

llvm::Expected<bool> FoldTransposePass::run(ir::Graph &graph) {
  return Folder(graph).run();
}

} // namespace remat::passes
