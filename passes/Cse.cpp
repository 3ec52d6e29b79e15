//===- passes/Cse.cpp - Common-subexpression elimination ------------------===//
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

#include <bit>

namespace remat::passes {
namespace {

llvm::hash_code hashAttrValue(const ir::AttrValue &value) {
  llvm::hash_code kind = llvm::hash_value(value.index());
  return std::visit(
      [&](const auto &v) -> llvm::hash_code {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, float>) {
          return llvm::hash_combine(kind, std::bit_cast<uint32_t>(v));
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          llvm::hash_code h = kind;
          for (float f : v)
            h = llvm::hash_combine(h, std::bit_cast<uint32_t>(f));
          return h;
        } else if constexpr (std::is_same_v<T, ir::TensorDataPtr>) {
          if (!v)
            return kind;
          llvm::ArrayRef<uint8_t> bytes = v->getBytes();
          return llvm::hash_combine(
              kind, v->getType().str(),
              llvm::hash_combine_range(bytes.begin(), bytes.end()));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<std::string>>) {
          return llvm::hash_combine(
              kind, llvm::hash_combine_range(v.begin(), v.end()));
        } else {
          return llvm::hash_combine(kind, v);
        }
      },
      value);
}

llvm::hash_code hashNode(const ir::Node &node) {
  llvm::hash_code h = llvm::hash_combine(unsigned(node.getOp()),
                                         unsigned(node.getStage()));
  for (const ir::Value *operand : node.getOperands())
    h = llvm::hash_combine(h, operand);
  for (const auto &entry : node.getAttrs().entries())
    h = llvm::hash_combine(h, entry.first, hashAttrValue(entry.second));
  for (unsigned i = 0; i < node.getNumResults(); ++i)
    h = llvm::hash_combine(h, node.getResult(i)->getType().str());
  return h;
}

bool equivalent(const ir::Node &a, const ir::Node &b) {
  if (a.getOp() != b.getOp() || a.getStage() != b.getStage() ||
      a.getOperands() != b.getOperands() ||
      a.getNumResults() != b.getNumResults() || a.getAttrs() != b.getAttrs())
    return false;
  for (unsigned i = 0; i < a.getNumResults(); ++i)
    if (a.getResult(i)->getType() != b.getResult(i)->getType())
      return false;
  return true;
}

} // namespace

llvm::Expected<bool> CsePass::run(ir::Graph &graph) {
  // Buckets keyed by hash; candidates are compared in full. The map is only
  // looked up, never iterated, so the result does not depend on pointer
  // order. Stage is part of the key: merging a backward node into a forward
  // one would stretch the forward value's live range across the step.
  llvm::DenseMap<unsigned, llvm::SmallVector<ir::Node *, 1>> buckets;
  bool changed = false;
  ir::Graph::NodeList &nodes = graph.getNodes();
  for (auto it = nodes.begin(); it != nodes.end();) {
    ir::Node &node = *it++;
    // Never merge recompute clones: they exist so that the forward value can
    // die early; merging one with its original (or with another clone)
    // would silently undo rematerialization.
    if (node.getStage() == ir::Stage::Recompute)
      continue;
    auto &bucket = buckets[unsigned(size_t(hashNode(node)))];
    ir::Node *existing = nullptr;
    for (ir::Node *candidate : bucket) {
      if (equivalent(*candidate, node)) {
        existing = candidate;
        break;
      }
    }
    if (!existing) {
      bucket.push_back(&node);
      continue;
    }
    for (unsigned i = 0; i < node.getNumResults(); ++i)
      node.getResult(i)->replaceAllUsesWith(existing->getResult(i));
    graph.eraseNode(&node);
    changed = true;
  }
  return changed;
}

} // namespace remat::passes
