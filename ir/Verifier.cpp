//===- ir/Verifier.cpp - Structural and type checks -----------------------===//
#include "ir/Verifier.h"
#include "ir/UpdateName.h"

#include "ir/ShapeInference.h"
#include "ir/Support.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

namespace remat::ir {
namespace {

class Verifier {
public:
  explicit Verifier(const Graph &graph) : graph_(graph) {}

  llvm::Error run() {
    if (auto err = verifyNamesAndOwnership())
      return err;
    if (auto err = verifySchedule())
      return err;
    if (auto err = verifyUseLists())
      return err;
    if (auto err = verifyTypes())
      return err;
    if (auto err = verifyOutputs())
      return err;
    return verifyMemoryPlan();
  }

private:
  std::string prefix() const {
    return "graph @" + graph_.getName().str() + ": ";
  }

  /// Every value is owned by this graph, names are unique, ops are known.
  llvm::Error verifyNamesAndOwnership() {
    llvm::StringMap<const Value *> seen;
    auto check = [&](const Value *value) -> llvm::Error {
      if (value->getGraph() != &graph_)
        return makeError(prefix() + "value %" + value->getName() +
                         " belongs to another graph");
      auto [it, inserted] = seen.try_emplace(value->getName(), value);
      if (!inserted)
        return makeError(graph_.formatLoc(value->getLoc()) + prefix() +
                         "duplicate value name %" + value->getName());
      owned_.insert(value);
      return llvm::Error::success();
    };
    for (const Value *input : graph_.getInputs()) {
      if (auto err = check(input))
        return err;
      if (const TensorDataPtr &data = input->getData())
        if (data->getType() != input->getType())
          return makeError(prefix() + "data of input %" + input->getName() +
                           " has type " + data->getType().str() +
                           " but the input is " + input->getType().str());
    }
    for (const Node &node : graph_.getNodes()) {
      if (size_t(node.getOp()) >= allOps().size())
        return makeError(graph_.formatLoc(node.getLoc()) + prefix() +
                         "unknown op (kind " +
                         llvm::Twine(unsigned(node.getOp())) + ")");
      if (node.getGraph() != &graph_)
        return makeError(prefix() + node.describe() +
                         " belongs to another graph");
      for (unsigned i = 0; i < node.getNumResults(); ++i) {
        const Value *result = node.getResult(i);
        if (result->getDefiningNode() != &node || result->getResultIndex() != i)
          return makeError(prefix() + node.describe() + ": result " +
                           llvm::Twine(i) + " does not point back to its node");
        if (result->isWeight())
          return makeError(prefix() + node.describe() + ": result %" +
                           result->getName() +
                           " is flagged weight, but weights are graph inputs");
        if (auto err = check(result))
          return err;
      }
      if (auto err = checkArity(node))
        return makeError(prefix() + errorToString(std::move(err)));
    }
    return llvm::Error::success();
  }

  /// Note [Schedule]: every operand is defined before its use.
  llvm::Error verifySchedule() {
    llvm::DenseSet<const Value *> defined;
    for (const Value *input : graph_.getInputs())
      defined.insert(input);
    for (const Node &node : graph_.getNodes()) {
      for (unsigned i = 0; i < node.getNumOperands(); ++i) {
        const Value *operand = node.getOperand(i);
        if (defined.count(operand))
          continue;
        if (!owned_.count(operand))
          return makeError(prefix() + node.describe() + ": operand " +
                           llvm::Twine(i) + " (%" + operand->getName() +
                           ") is not a value of this graph");
        std::string cycle = findCycle(node, operand);
        if (!cycle.empty())
          return makeError(graph_.formatLoc(node.getLoc()) + prefix() +
                           "cycle through " + cycle);
        return makeError(graph_.formatLoc(node.getLoc()) + prefix() +
                         "operand %" + operand->getName() + " of " +
                         node.getOpSpelling() + " '%" +
                         (node.getNumResults()
                              ? node.getResult(0)->getName().str()
                              : std::string()) +
                         "' is used before its definition (the schedule is "
                         "not topological)");
      }
      for (const Value *result : node.getResults())
        defined.insert(result);
    }
    return llvm::Error::success();
  }

  /// \returns "%a -> %b -> %a" if \p operand depends on a result of
  /// \p node, else "".
  std::string findCycle(const Node &node, const Value *operand) {
    // Depth-first search over defining nodes, with an explicit stack so that
    // long chains do not overflow the call stack.
    llvm::DenseMap<const Node *, const Node *> parent;
    llvm::SmallVector<const Node *, 16> stack;
    const Node *start = operand->getDefiningNode();
    if (!start)
      return "";
    parent[start] = nullptr;
    stack.push_back(start);
    while (!stack.empty()) {
      const Node *current = stack.pop_back_val();
      if (current == &node) {
        std::string path;
        for (const Node *n = current; n; n = parent.lookup(n))
          path = (llvm::Twine("%") + n->getResult(0)->getName() +
                  (path.empty() ? "" : " -> ") + path)
                     .str();
        return ("%" + node.getResult(0)->getName() + " -> " + path).str();
      }
      for (const Value *input : current->getOperands()) {
        const Node *def = input->getDefiningNode();
        if (!def || parent.count(def))
          continue;
        parent[def] = current;
        stack.push_back(def);
      }
    }
    return "";
  }

  /// Use lists and operands agree in both directions. Linear in the graph:
  /// an input used by every node must not make this quadratic.
  llvm::Error verifyUseLists() {
    llvm::DenseSet<const Node *> nodes;
    for (const Node &node : graph_.getNodes())
      nodes.insert(&node);
    // Every recorded use must point at an operand that is this value, and
    // appear once.
    llvm::DenseSet<std::pair<const Node *, unsigned>> listed;
    auto checkUses = [&](const Value *value) -> llvm::Error {
      for (const Use &use : value->getUses()) {
        if (!nodes.count(use.user) ||
            use.operandIndex >= use.user->getNumOperands() ||
            use.user->getOperand(use.operandIndex) != value ||
            !listed.insert({use.user, use.operandIndex}).second)
          return makeError(prefix() + "use list of %" + value->getName() +
                           " names a node that does not use it");
      }
      return llvm::Error::success();
    };
    for (const Value *input : graph_.getInputs())
      if (auto err = checkUses(input))
        return err;
    for (const Node &node : graph_.getNodes())
      for (const Value *result : node.getResults())
        if (auto err = checkUses(result))
          return err;
    // And every operand must be among the recorded uses.
    for (const Node &node : graph_.getNodes())
      for (unsigned i = 0; i < node.getNumOperands(); ++i)
        if (!listed.count({&node, i}))
          return makeError(prefix() + node.describe() + ": operand " +
                           llvm::Twine(i) + " (%" +
                           node.getOperand(i)->getName() +
                           ") does not list this node among its uses");
    return llvm::Error::success();
  }

  /// Declared result types agree with shape inference.
  llvm::Error verifyTypes() {
    for (const Node &node : graph_.getNodes())
      if (auto err = checkResultTypes(node))
        return makeError(prefix() + errorToString(std::move(err)));
    return llvm::Error::success();
  }

  llvm::Error verifyOutputs() {
    if (graph_.getOutputs().empty())
      return makeError(prefix() + "graph has no outputs");
    for (const Value *output : graph_.getOutputs())
      if (!owned_.count(output))
        return makeError(prefix() + "output %" + output->getName() +
                         " is not defined in this graph");
    return llvm::Error::success();
  }

  /// A memory plan, when present, places every node result aligned and
  /// inside the arena, except updates written over their inputs
  /// (ir/UpdateName.h), which it does not place.
  llvm::Error verifyMemoryPlan() {
    const MemoryPlan *plan = graph_.getMemoryPlan();
    if (!plan)
      return llvm::Error::success();
    for (const Node &node : graph_.getNodes())
      for (const Value *result : node.getResults()) {
        if (getUpdatedInput(result))
          continue;
        std::optional<uint64_t> offset = plan->lookup(result);
        if (!offset)
          return makeError(prefix() + "memory plan has no offset for %" +
                           result->getName());
        uint64_t bytes = uint64_t(result->getType().getByteSize());
        if (*offset % MemoryPlan::kAlignment != 0 ||
            *offset + bytes > plan->arenaBytes)
          return makeError(prefix() + "memory plan places %" +
                           result->getName() + " (" + llvm::Twine(bytes) +
                           " bytes) at offset " + llvm::Twine(*offset) +
                           ", not aligned or outside the arena of " +
                           llvm::Twine(plan->arenaBytes) + " bytes");
      }
    return llvm::Error::success();
  }

  const Graph &graph_;
  llvm::DenseSet<const Value *> owned_;
};

} // namespace

llvm::Error verify(const Graph &graph) { return Verifier(graph).run(); }

} // namespace remat::ir
