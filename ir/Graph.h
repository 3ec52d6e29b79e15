//===- ir/Graph.h - Values, nodes and graphs --------------------*- C++ -*-===//
//
// Note [Schedule]
// ~~~~~~~~~~~~~~~
// A Graph's node list *is* its execution order. It is always topological:
// every operand of a node is a graph input or the result of an earlier node.
// Passes that reorder (schedule) or insert (autodiff, remat) must keep this
// invariant; the Verifier checks it after every pass, and the runtime and the
// memory planner execute and plan exactly this order.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_GRAPH_H
#define REMAT_IR_GRAPH_H

#include "ir/Attributes.h"
#include "ir/Ops.h"
#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/ilist.h"
#include "llvm/ADT/ilist_node.h"
#include "llvm/ADT/iterator_range.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace remat::ir {

class Graph;
class Node;
class Value;

/// Where every arena value lives during a step: one allocation of
/// arenaBytes, each node result (graph inputs are persistent and not in it)
/// at its offset. Set by the plan-memory pass; any later change to the graph
/// (a new or erased node, a move, a rewired operand or output, a new type)
/// drops it, so a plan present is a plan of this exact schedule.
struct MemoryPlan {
  /// Bytes the arena needs: the largest offset + byte size of any value.
  uint64_t arenaBytes = 0;
  /// The most bytes of arena values live at once (Liveness, counting the
  /// storage an in-place result shares with its operand once), for reports.
  uint64_t peakLiveBytes = 0;
  /// Every value placed at 256-byte alignment.
  static constexpr uint64_t kAlignment = 256;
  /// Offset of each node result. Never iterated for output order.
  llvm::DenseMap<const Value *, uint64_t> offsets;
  /// In-place reuse: each result written over an operand maps to that
  /// operand. They share one offset, and the operand's last use is the
  /// result's node. Never iterated for output order.
  llvm::DenseMap<const Value *, const Value *> inPlaceOf;

  /// \returns the offset of \p value, or std::nullopt if it has none.
  std::optional<uint64_t> lookup(const Value *value) const {
    auto it = offsets.find(value);
    if (it == offsets.end())
      return std::nullopt;
    return it->second;
  }
};

/// Which part of the training step a node belongs to.
enum class Stage : uint8_t { Forward, Backward, Recompute };

/// \returns "fwd", "bwd" or "remat".
llvm::StringRef stageName(Stage stage);

/// A source position in a .rir file (1-based); line 0 means unknown.
struct Loc {
  uint32_t line = 0;
  uint32_t col = 0;
  bool isValid() const { return line != 0; }
};

/// One use of a value: operand \p operandIndex of \p user.
struct Use {
  Node *user;
  unsigned operandIndex;
  bool operator==(const Use &other) const {
    return user == other.user && operandIndex == other.operandIndex;
  }
};

/// A tensor-valued SSA value: a graph input (weights are inputs flagged
/// trainable) or a result of a node.
class Value {
public:
  Value(const Value &) = delete;
  Value &operator=(const Value &) = delete;

  llvm::StringRef getName() const { return name_; }
  /// Renames the value. Names are unique within a graph; use
  /// Graph::uniqueName() to pick a fresh one. The Verifier rejects duplicates.
  void setName(llvm::StringRef name);

  const TensorType &getType() const { return type_; }
  /// Changes the type; a new byte size invalidates the memory plan, so the
  /// plan is dropped as every other mutator does.
  void setType(TensorType type);

  /// \returns the node that defines this value, or null for a graph input.
  Node *getDefiningNode() const { return def_; }
  /// \returns the index of this value among its node's results.
  unsigned getResultIndex() const { return resultIndex_; }
  bool isGraphInput() const { return def_ == nullptr; }

  /// Trainable weights are graph inputs flagged `weight`; autodiff computes
  /// a gradient for each one that reaches the loss.
  bool isWeight() const { return isWeight_; }
  void setWeight(bool isWeight) { isWeight_ = isWeight; }

  /// The weight this value is the gradient of, or null: autodiff marks
  /// each weight's gradient, the .rir text keeps the mark (`grad(%w)`), an
  /// ONNX model its `<w>_grad` name. It is what makes a graph a training
  /// step and what the optimizer updates; the name is for people only.
  /// Only a node result carries one, and \p weight must be a weight input of
  /// the same graph (erasing that input clears the mark).
  Value *getGradientOf() const { return gradientOf_; }
  void setGradientOf(Value *weight);

  /// Initial contents of a graph input (weights imported with data), or null.
  const TensorDataPtr &getData() const { return data_; }
  void setData(TensorDataPtr data) { data_ = std::move(data); }

  /// The uses in no particular order (removing a use reorders the rest),
  /// though the same sequence of edits always gives the same order.
  llvm::ArrayRef<Use> getUses() const { return uses_; }
  bool hasUses() const { return !uses_.empty(); }
  unsigned getNumUses() const { return uses_.size(); }
  /// \returns true if the value is one of the graph's outputs.
  bool isGraphOutput() const { return numOutputUses_ != 0; }

  /// Redirects every use of this value, graph outputs included, to \p other.
  //  Given:   %3 = f(%1, %2); %4 = g(%3); return %3
  //  Execute: %3.replaceAllUsesWith(%6)
  //  Result:  %4 = g(%6); return %6
  void replaceAllUsesWith(Value *other);
  /// Redirects the uses of this value for which \p shouldReplace returns
  /// true to \p other; graph outputs are left alone.
  //  Given:   %3 = f(%1); %4 = g(%3) fwd; %5 = h(%3) bwd
  //  Execute: %3.replaceUsesWithIf(%6, [](Use u) { return isBwd(u.user); })
  //  Result:  %4 = g(%3); %5 = h(%6)
  void replaceUsesWithIf(Value *other,
                         llvm::function_ref<bool(const Use &)> shouldReplace);

  Graph *getGraph() const { return graph_; }
  Loc getLoc() const { return loc_; }
  void setLoc(Loc loc) { loc_ = loc; }

  ~Value();

private:
  friend class Graph;
  friend class Node;
  /// Unit tests corrupt IR through this to show that the Verifier notices.
  friend struct IRTestAccess;
  Value(Graph *graph, std::string name, TensorType type)
      : graph_(graph), name_(std::move(name)), type_(std::move(type)) {}

  /// Appends \p use and records its slot in the user, so that removeUse is
  /// O(1) even for values with many uses (an input used by every layer).
  void addUse(Use use);
  /// Removes \p use by moving the last use into its slot.
  void removeUse(Use use);

  Graph *graph_;
  std::string name_;
  TensorType type_;
  Node *def_ = nullptr;
  unsigned resultIndex_ = 0;
  std::vector<Use> uses_;
  unsigned numOutputUses_ = 0;
  bool isWeight_ = false;
  Value *gradientOf_ = nullptr;
  TensorDataPtr data_;
  Loc loc_;
};

/// An operation in the schedule. A node owns its results; its operands are
/// values defined earlier (Note [Schedule]).
class Node : public llvm::ilist_node<Node> {
public:
  Node(const Node &) = delete;
  Node &operator=(const Node &) = delete;
  ~Node();

  OpKind getOp() const { return op_; }
  const OpInfo &getOpInfo() const { return ir::getOpInfo(op_); }
  /// \returns the op's .rir spelling ("MatMul", "remat.Foo").
  std::string getOpSpelling() const { return ir::getOpSpelling(op_); }

  llvm::ArrayRef<Value *> getOperands() const { return operands_; }
  unsigned getNumOperands() const { return operands_.size(); }
  Value *getOperand(unsigned i) const { return operands_[i]; }
  /// Replaces operand \p i with \p value, updating both use lists.
  //  Given:   %4 = g(%3, %1)
  //  Execute: node(%4).setOperand(0, %6)
  //  Result:  %4 = g(%6, %1); %3 has one use fewer
  void setOperand(unsigned i, Value *value);
  /// Appends \p value as the last operand.
  //  Given:   %4 = Concat(%1)
  //  Execute: node(%4).addOperand(%2)
  //  Result:  %4 = Concat(%1, %2)
  void addOperand(Value *value);
  /// Removes operand \p i; later operands shift down by one.
  //  Given:   %4 = Slice(%d, %s, %e, %a)
  //  Execute: node(%4).removeOperand(3)
  //  Result:  %4 = Slice(%d, %s, %e)
  void removeOperand(unsigned i);
  /// Removes every operand (used before erasing a group of nodes).
  void dropAllOperands();

  unsigned getNumResults() const { return results_.size(); }
  Value *getResult(unsigned i) const { return results_[i].get(); }
  /// \returns the results in order.
  llvm::SmallVector<Value *, 2> getResults() const;
  /// \returns true if any result has a use or is a graph output.
  bool hasUsedResults() const;

  const AttrList &getAttrs() const { return attrs_; }
  AttrList &getAttrs() { return attrs_; }
  void setAttrs(AttrList attrs) { attrs_ = std::move(attrs); }

  Stage getStage() const { return stage_; }
  void setStage(Stage stage) { stage_ = stage; }
  /// The node this one is a copy of (Graph::cloneNode: remat's recompute
  /// clones), or null. Always an original, never a copy itself; erasing the
  /// original clears it. Kept in .rir as `origin(%firstResult)`; the cost
  /// model prices a copy as its original (a measured profile names
  /// originals only).
  Node *getOrigin() const { return origin_; }
  /// Makes this node a copy of \p origin (null: of none). \p origin must be
  /// a node of the same graph that is not a copy itself.
  void setOrigin(Node *origin);

  /// Model layer index for reports, or -1.
  int getLayer() const { return layer_; }
  void setLayer(int layer) { layer_ = layer; }
  Loc getLoc() const { return loc_; }
  void setLoc(Loc loc) { loc_ = loc; }

  Graph *getGraph() const { return graph_; }

  /// Moves this node to just before \p other in the schedule.
  //  Given:   %1 = a(); %2 = b(); %3 = c()
  //  Execute: node(%3).moveBefore(node(%2))
  //  Result:  %1 = a(); %3 = c(); %2 = b()
  void moveBefore(Node *other);
  /// Moves this node to just after \p other in the schedule.
  void moveAfter(Node *other);

  /// \returns "Op '%firstResult'" for messages, prefixed with
  /// "file:line:col: " when the node came from a file.
  std::string describe() const;

private:
  friend class Graph;
  friend class Value;
  friend struct IRTestAccess;
  Node(Graph *graph, OpKind op) : graph_(graph), op_(op) {}

  Graph *graph_;
  OpKind op_;
  llvm::SmallVector<Value *, 4> operands_;
  /// useSlots_[i] is the index of Use{this, i} in operands_[i]'s use list.
  llvm::SmallVector<unsigned, 4> useSlots_;
  llvm::SmallVector<std::unique_ptr<Value>, 1> results_;
  AttrList attrs_;
  Stage stage_ = Stage::Forward;
  int layer_ = -1;
  Loc loc_;
  Node *origin_ = nullptr;
  /// The nodes whose origin this is, so that erasing it clears theirs.
  llvm::SmallVector<Node *, 0> copies_;
};

/// A model graph: inputs (weights among them), a scheduled node list, and
/// outputs. The graph owns every node and value.
class Graph {
public:
  using NodeList = llvm::iplist<Node>;

  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  ~Graph();

  llvm::StringRef getName() const { return name_; }
  void setName(llvm::StringRef name) { name_ = name.str(); }
  /// The file the graph was read from, for diagnostics ("" if none).
  llvm::StringRef getSourceName() const { return sourceName_; }
  void setSourceName(llvm::StringRef name) { sourceName_ = name.str(); }
  /// \returns "file:line:col: " for \p loc, or "" when unknown.
  std::string formatLoc(Loc loc) const;

  //===--- Inputs ---------------------------------------------------------===//

  /// Appends a graph input named \p name of type \p type.
  //  Given:   graph @g(%x: f32[2])
  //  Execute: g.addInput("w", f32[2], /*isWeight=*/true)
  //  Result:  graph @g(%x: f32[2], %w: f32[2] weight)
  Value *addInput(llvm::StringRef name, TensorType type,
                  bool isWeight = false);
  /// Removes input \p input, which must have no uses and not be an output;
  /// a gradient marked as its (Value::getGradientOf) loses the mark.
  void eraseInput(Value *input);
  llvm::SmallVector<Value *, 8> getInputs() const;
  unsigned getNumInputs() const { return inputs_.size(); }
  Value *getInput(unsigned i) const { return inputs_[i].get(); }

  //===--- Nodes ----------------------------------------------------------===//

  /// Creates a node of \p op with \p operands and one result per entry of
  /// \p resultTypes, named from \p resultNames (or fresh names when empty),
  /// and inserts it before \p insertBefore (at the end when null).
  //  Given:   %1 = a(); return %1
  //  Execute: g.createNode(Relu, {%1}, {f32[2]}, {"r"}, {}, /*before=*/null)
  //  Result:  %1 = a(); %r = Relu(%1); return %1
  Node *createNode(OpKind op, llvm::ArrayRef<Value *> operands,
                   llvm::ArrayRef<TensorType> resultTypes,
                   llvm::ArrayRef<std::string> resultNames = {},
                   AttrList attrs = {}, Node *insertBefore = nullptr);
  /// Appends a result of \p type named \p name to \p node.
  Value *addResult(Node *node, llvm::StringRef name, TensorType type);
  /// Copies \p node (same op, attributes and layer) before \p insertBefore
  /// (at the end when null), with each operand replaced by its entry in
  /// \p valueMap when it has one, stage \p stage, and results named after the
  /// originals plus \p nameSuffix (made unique). The copy's origin is
  /// \p node's origin, or \p node when it has none. Each original result
  /// maps to its copy in \p valueMap afterwards.
  //  Given:   %1 = a(); %2 = f(%1); %3 = g(%2) bwd
  //  Execute: g.cloneNode(node(%2), {%1 -> %9}, node(%3), Recompute, ".remat")
  //  Result:  %1 = a(); %2 = f(%1); %2.remat = f(%9) remat; %3 = g(%2) bwd
  Node *cloneNode(const Node &node,
                  llvm::DenseMap<const Value *, Value *> &valueMap,
                  Node *insertBefore, Stage stage,
                  llvm::StringRef nameSuffix);
  /// Removes \p node from the schedule and destroys it. Its results must
  /// have no uses and not be graph outputs; its operands lose a use.
  //  Given:   %2 = f(%1); %3 = g(%1)
  //  Execute: g.eraseNode(node(%2))
  //  Result:  %3 = g(%1); %1 has one use
  void eraseNode(Node *node);

  NodeList &getNodes() { return nodes_; }
  const NodeList &getNodes() const { return nodes_; }
  size_t getNumNodes() const { return nodes_.size(); }

  //===--- Outputs --------------------------------------------------------===//

  /// Appends \p value to the graph outputs.
  void addOutput(Value *value);
  /// Replaces output \p i with \p value.
  void setOutput(unsigned i, Value *value);
  /// Removes output \p i.
  void removeOutput(unsigned i);
  llvm::ArrayRef<Value *> getOutputs() const { return outputs_; }

  //===--- Names ----------------------------------------------------------===//

  /// \returns the value named \p name, or null. With duplicate names (which
  /// the Verifier rejects) it returns the most recently named one.
  Value *lookup(llvm::StringRef name) const;
  /// \returns \p base if no value has that name, else \p base + "." + N for
  /// the smallest N >= 1 that is free.
  std::string uniqueName(llvm::StringRef base) const;

  //===--- Whole graph ----------------------------------------------------===//

  /// \returns a deep copy with the same names, types, data and schedule
  /// (and memory plan, when there is one).
  std::unique_ptr<Graph> clone() const;

  //===--- Memory plan ----------------------------------------------------===//

  /// \returns the plan of the current schedule, or null if there is none.
  const MemoryPlan *getMemoryPlan() const {
    return memoryPlan_ ? &*memoryPlan_ : nullptr;
  }
  /// Stores \p plan (plan-memory does this).
  void setMemoryPlan(MemoryPlan plan) { memoryPlan_ = std::move(plan); }
  /// Drops the plan; every mutator that changes liveness calls this.
  void clearMemoryPlan() { memoryPlan_.reset(); }

private:
  friend class Value;
  friend class Node;
  Value *newValue(std::string name, TensorType type);
  void registerName(Value *value);
  void unregisterName(Value *value);

  std::string name_;
  std::string sourceName_;
  std::vector<std::unique_ptr<Value>> inputs_;
  NodeList nodes_;
  std::vector<Value *> outputs_;
  llvm::StringMap<Value *> names_;
  mutable unsigned nextFreshName_ = 0;
  /// Per base name, the suffix uniqueName tries first: the values it
  /// named "base.1".."base.(n-1)" are taken, so naming k clones of one
  /// value costs O(k), not O(k^2).
  mutable llvm::StringMap<unsigned> nextSuffix_;
  std::optional<MemoryPlan> memoryPlan_;
};

/// \returns true if \p a and \p b have the same name, inputs (names, types,
/// weight flags, data), nodes in the same order (ops, operands by name,
/// results and their gradient marks, attributes, stages, origins) and
/// outputs. On a difference, \p why (when
/// given) describes the first one found.
bool graphsEqual(const Graph &a, const Graph &b, std::string *why = nullptr);

} // namespace remat::ir

#endif // REMAT_IR_GRAPH_H
