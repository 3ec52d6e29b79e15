//===- passes/Schedule.cpp - Memory-aware topological order ---------------===//
//
// Greedy list scheduling: of the nodes whose operands are all computed, run
// the one that grows the arena least (bytes of results that stay live minus
// bytes of operands it is the last user of), ties to the earlier node of the
// given order. The result is kept only if its peak (Liveness) is lower than
// the given order's, so the pass never makes the peak worse.
//
//===----------------------------------------------------------------------===//
#include "ir/UpdateName.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <set>

namespace remat::passes {

namespace {

/// The distinct elements of \p values, in first-occurrence order.
template <typename T>
llvm::SmallVector<T, 4> distinct(llvm::ArrayRef<T> values) {
  llvm::SmallVector<T, 4> out;
  for (T value : values)
    if (!llvm::is_contained(out, value))
      out.push_back(value);
  return out;
}

} // namespace

std::vector<ir::Node *> computeMemoryAwareOrder(ir::Graph &graph) {
  std::vector<ir::Node *> nodes;
  llvm::DenseMap<const ir::Node *, size_t> index;
  for (ir::Node &node : graph.getNodes()) {
    index[&node] = nodes.size();
    nodes.push_back(&node);
  }
  size_t n = nodes.size();
  std::vector<unsigned> pending(n, 0);
  std::vector<llvm::SmallVector<size_t, 4>> successors(n);
  std::vector<bool> scheduled(n, false);
  llvm::DenseMap<const ir::Value *, unsigned> remainingUsers;
  for (size_t i = 0; i < n; ++i) {
    llvm::SmallVector<const ir::Node *, 4> producers;
    for (ir::Value *operand : nodes[i]->getOperands())
      if (ir::Node *def = operand->getDefiningNode())
        producers.push_back(def);
    for (const ir::Node *def : distinct<const ir::Node *>(producers)) {
      ++pending[i];
      successors[index[def]].push_back(i);
    }
    for (ir::Value *result : nodes[i]->getResults()) {
      llvm::SmallVector<const ir::Node *, 4> users;
      for (const ir::Use &use : result->getUses())
        users.push_back(use.user);
      remainingUsers[result] = distinct<const ir::Node *>(users).size();
    }
  }

  // A node that writes an update over its input (ir/UpdateName.h) runs
  // after every other reader of that input.
  for (size_t i = 0; i < n; ++i)
    for (const ir::Value *result : nodes[i]->getResults())
      if (const ir::Value *input = ir::getUpdatedInput(result)) {
        llvm::SmallVector<const ir::Node *, 4> readers;
        for (const ir::Use &use : input->getUses())
          if (use.user != nodes[i])
            readers.push_back(use.user);
        for (const ir::Node *reader : distinct<const ir::Node *>(readers)) {
          if (llvm::is_contained(successors[index[reader]], i))
            continue;
          ++pending[i];
          successors[index[reader]].push_back(i);
        }
      }

  auto freedBy = [&](size_t i, const ir::Value *value) {
    return !value->isGraphInput() && !value->isGraphOutput() &&
           remainingUsers.lookup(value) == 1;
  };
  auto score = [&](size_t i) {
    int64_t bytes = 0;
    for (const ir::Value *result : nodes[i]->getResults())
      if (result->hasUses() || result->isGraphOutput())
        bytes += int64_t(Liveness::getBytes(result));
    for (const ir::Value *operand :
         distinct<ir::Value *>(nodes[i]->getOperands()))
      if (freedBy(i, operand))
        bytes -= int64_t(Liveness::getBytes(operand));
    return bytes;
  };

  std::set<std::pair<int64_t, size_t>> ready;
  std::vector<int64_t> readyScore(n, 0);
  std::vector<bool> isReady(n, false);
  auto makeReady = [&](size_t i) {
    readyScore[i] = score(i);
    isReady[i] = true;
    ready.insert({readyScore[i], i});
  };
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0)
      makeReady(i);

  std::vector<ir::Node *> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t i = ready.begin()->second;
    ready.erase(ready.begin());
    isReady[i] = false;
    scheduled[i] = true;
    order.push_back(nodes[i]);
    for (ir::Value *operand : distinct<ir::Value *>(nodes[i]->getOperands())) {
      if (operand->isGraphInput())
        continue;
      unsigned &users = remainingUsers[operand];
      --users;
      if (users != 1 || operand->isGraphOutput())
        continue;
      // The one remaining user now frees the operand: rescore it if ready.
      for (const ir::Use &use : operand->getUses()) {
        size_t u = index[use.user];
        if (scheduled[u])
          continue;
        if (isReady[u]) {
          ready.erase({readyScore[u], u});
          readyScore[u] = score(u);
          ready.insert({readyScore[u], u});
        }
        break;
      }
    }
    for (size_t s : successors[i])
      if (--pending[s] == 0)
        makeReady(s);
  }
  assert(order.size() == n && "the graph is not acyclic");
  return order;
}

llvm::Expected<bool> SchedulePass::run(ir::Graph &graph) {
  std::vector<ir::Node *> order = computeMemoryAwareOrder(graph);
  std::vector<const ir::Node *> constOrder(order.begin(), order.end());
  // Compare both orders without the in-place sharing of a plan (which only
  // fits the current order).
  std::vector<const ir::Node *> current;
  for (const ir::Node &node : graph.getNodes())
    current.push_back(&node);
  uint64_t before = Liveness(graph, current).getPeakBytes();
  uint64_t after = Liveness(graph, constOrder).getPeakBytes();
  if (after >= before)
    return false;
  bool changed = false;
  size_t i = 0;
  for (ir::Node &node : graph.getNodes())
    changed |= &node != order[i++];
  if (!changed)
    return false;
  ir::Graph::NodeList &list = graph.getNodes();
  for (ir::Node *node : order)
    list.splice(list.end(), list, node->getIterator());
  graph.clearMemoryPlan();
  return true;
}

} // namespace remat::passes
