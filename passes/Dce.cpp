//===- passes/Dce.cpp - Dead code elimination -----------------------------===//
#include "passes/Passes.h"

namespace remat::passes {

llvm::Expected<bool> DcePass::run(ir::Graph &graph) {
  // One backward sweep suffices: a node's users all come after it (Note
  // [Schedule]), so by the time the sweep reaches it they are already gone if
  // they were dead.
  bool changed = false;
  ir::Graph::NodeList &nodes = graph.getNodes();
  for (auto it = nodes.end(); it != nodes.begin();) {
    ir::Node &node = *--it;
    if (node.hasUsedResults())
      continue;
    ++it; // Stays valid: ilist iterators survive erasing other nodes.
    graph.eraseNode(&node);
    changed = true;
  }
  return changed;
}

} // namespace remat::passes
