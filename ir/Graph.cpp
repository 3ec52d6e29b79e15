//===- ir/Graph.cpp - Values, nodes and graphs ----------------------------===//
#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace remat::ir {

llvm::StringRef stageName(Stage stage) {
  switch (stage) {
  case Stage::Forward:
    return "fwd";
  case Stage::Backward:
    return "bwd";
  case Stage::Recompute:
    return "remat";
  }
  llvm_unreachable("unknown stage");
}

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

Value::~Value() {
  if (graph_)
    graph_->unregisterName(this);
}

void Value::setName(llvm::StringRef name) {
  graph_->unregisterName(this);
  name_ = name.str();
  graph_->registerName(this);
}

void Value::setGradientOf(Value *weight) {
  assert((!weight || (!isGraphInput() && weight->isGraphInput() &&
                      weight->graph_ == graph_)) &&
         "a gradient mark is a node result's and names an input");
  gradientOf_ = weight;
}

void Value::setType(TensorType type) {
  if (graph_)
    graph_->clearMemoryPlan();
  type_ = std::move(type);
}

void Value::addUse(Use use) {
  graph_->clearMemoryPlan();
  Node *user = use.user;
  if (user->useSlots_.size() <= use.operandIndex)
    user->useSlots_.resize(use.operandIndex + 1);
  user->useSlots_[use.operandIndex] = uses_.size();
  uses_.push_back(use);
}

void Value::removeUse(Use use) {
  graph_->clearMemoryPlan();
  unsigned slot = use.user->useSlots_[use.operandIndex];
  assert(slot < uses_.size() && uses_[slot] == use &&
         "removing a use that is not in the use list");
  Use moved = uses_.back();
  uses_[slot] = moved;
  moved.user->useSlots_[moved.operandIndex] = slot;
  uses_.pop_back();
}

void Value::replaceAllUsesWith(Value *other) {
  assert(other != this && "replacing a value with itself");
  assert(other->graph_ == graph_ && "values of different graphs");
  for (Use use : uses_) {
    use.user->operands_[use.operandIndex] = other;
    other->addUse(use);
  }
  uses_.clear();
  // What this value stood for goes with its uses.
  if (gradientOf_ && !other->gradientOf_ && !other->isGraphInput())
    std::swap(gradientOf_, other->gradientOf_);
  if (numOutputUses_ == 0)
    return;
  for (Value *&output : graph_->outputs_) {
    if (output != this)
      continue;
    output = other;
    ++other->numOutputUses_;
  }
  numOutputUses_ = 0;
}

void Value::replaceUsesWithIf(
    Value *other, llvm::function_ref<bool(const Use &)> shouldReplace) {
  assert(other != this && "replacing a value with itself");
  assert(other->graph_ == graph_ && "values of different graphs");
  // Collect first: setOperand edits this use list while we walk it.
  llvm::SmallVector<Use, 8> selected;
  for (const Use &use : uses_)
    if (shouldReplace(use))
      selected.push_back(use);
  for (const Use &use : selected)
    use.user->setOperand(use.operandIndex, other);
}

//===----------------------------------------------------------------------===//
// Node
//===----------------------------------------------------------------------===//

Node::~Node() {
  for (unsigned i = 0; i < operands_.size(); ++i)
    if (operands_[i])
      operands_[i]->removeUse({this, i});
  setOrigin(nullptr);
  for (Node *copy : copies_)
    copy->origin_ = nullptr;
}

void Node::setOrigin(Node *origin) {
  assert((!origin || (origin->graph_ == graph_ && !origin->origin_ &&
                      origin != this)) &&
         "an origin is another original node of the same graph");
  if (origin_)
    origin_->copies_.erase(llvm::find(origin_->copies_, this));
  origin_ = origin;
  if (origin_)
    origin_->copies_.push_back(this);
}

void Node::setOperand(unsigned i, Value *value) {
  assert(i < operands_.size() && "operand index out of range");
  operands_[i]->removeUse({this, i});
  operands_[i] = value;
  value->addUse({this, i});
}

void Node::addOperand(Value *value) {
  operands_.push_back(value);
  value->addUse({this, unsigned(operands_.size() - 1)});
}

void Node::removeOperand(unsigned i) {
  assert(i < operands_.size() && "operand index out of range");
  // Uses of later operands carry their index: renumber them.
  for (unsigned j = i; j < operands_.size(); ++j)
    operands_[j]->removeUse({this, j});
  operands_.erase(operands_.begin() + i);
  useSlots_.pop_back();
  for (unsigned j = i; j < operands_.size(); ++j)
    operands_[j]->addUse({this, j});
}

void Node::dropAllOperands() {
  for (unsigned i = 0; i < operands_.size(); ++i)
    operands_[i]->removeUse({this, i});
  operands_.clear();
  useSlots_.clear();
}

llvm::SmallVector<Value *, 2> Node::getResults() const {
  llvm::SmallVector<Value *, 2> results;
  for (const auto &result : results_)
    results.push_back(result.get());
  return results;
}

bool Node::hasUsedResults() const {
  return llvm::any_of(results_, [](const std::unique_ptr<Value> &result) {
    return result->hasUses() || result->isGraphOutput();
  });
}

void Node::moveBefore(Node *other) {
  graph_->clearMemoryPlan();
  assert(other->graph_ == graph_ && "nodes of different graphs");
  if (other == this)
    return;
  graph_->nodes_.splice(other->getIterator(), graph_->nodes_, getIterator());
}

void Node::moveAfter(Node *other) {
  graph_->clearMemoryPlan();
  assert(other->graph_ == graph_ && "nodes of different graphs");
  if (other == this)
    return;
  graph_->nodes_.splice(std::next(other->getIterator()), graph_->nodes_,
                        getIterator());
}

std::string Node::describe() const {
  std::string text = graph_->formatLoc(loc_) + getOpSpelling();
  if (!results_.empty())
    text += " '%" + results_.front()->getName().str() + "'";
  return text;
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

Graph::~Graph() {
  // Drop every operand first: the schedule may be invalid (the Verifier's
  // tests build such graphs), so no destruction order is safe otherwise.
  for (Node &node : nodes_)
    node.dropAllOperands();
  nodes_.clear();
  outputs_.clear();
  inputs_.clear();
}

std::string Graph::formatLoc(Loc loc) const {
  if (!loc.isValid())
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << (sourceName_.empty() ? "<input>" : sourceName_) << ':' << loc.line
     << ':' << loc.col << ": ";
  return text;
}

Value *Graph::newValue(std::string name, TensorType type) {
  clearMemoryPlan();
  Value *value = new Value(this, std::move(name), std::move(type));
  registerName(value);
  return value;
}

void Graph::registerName(Value *value) { names_[value->name_] = value; }

void Graph::unregisterName(Value *value) {
  auto it = names_.find(value->name_);
  if (it != names_.end() && it->second == value) {
    names_.erase(it);
    // A freed name is the first a later uniqueName gives again, as it was
    // before: the names do not depend on what was created and erased.
    nextSuffix_.clear();
  }
}

Value *Graph::addInput(llvm::StringRef name, TensorType type, bool isWeight) {
  inputs_.emplace_back(newValue(name.str(), std::move(type)));
  Value *input = inputs_.back().get();
  input->isWeight_ = isWeight;
  return input;
}

void Graph::eraseInput(Value *input) {
  assert(input->isGraphInput() && !input->hasUses() &&
         !input->isGraphOutput() && "erasing an input that is still used");
  auto it = llvm::find_if(inputs_, [&](const std::unique_ptr<Value> &v) {
    return v.get() == input;
  });
  assert(it != inputs_.end() && "not an input of this graph");
  for (Node &node : nodes_)
    for (const auto &result : node.results_)
      if (result->gradientOf_ == input)
        result->gradientOf_ = nullptr;
  inputs_.erase(it);
}

llvm::SmallVector<Value *, 8> Graph::getInputs() const {
  llvm::SmallVector<Value *, 8> inputs;
  for (const auto &input : inputs_)
    inputs.push_back(input.get());
  return inputs;
}

Node *Graph::createNode(OpKind op, llvm::ArrayRef<Value *> operands,
                        llvm::ArrayRef<TensorType> resultTypes,
                        llvm::ArrayRef<std::string> resultNames,
                        AttrList attrs, Node *insertBefore) {
  assert((resultNames.empty() || resultNames.size() == resultTypes.size()) &&
         "one name per result");
  Node *node = new Node(this, op);
  for (Value *operand : operands)
    node->addOperand(operand);
  for (size_t i = 0; i < resultTypes.size(); ++i) {
    std::string name =
        resultNames.empty() ? uniqueName("t") : resultNames[i];
    addResult(node, name, resultTypes[i]);
  }
  node->attrs_ = std::move(attrs);
  if (insertBefore)
    nodes_.insert(insertBefore->getIterator(), node);
  else
    nodes_.push_back(node);
  return node;
}

Value *Graph::addResult(Node *node, llvm::StringRef name, TensorType type) {
  Value *result = newValue(name.str(), std::move(type));
  result->def_ = node;
  result->resultIndex_ = node->results_.size();
  node->results_.emplace_back(result);
  return result;
}

void Graph::eraseNode(Node *node) {
  clearMemoryPlan();
  assert(node->graph_ == this && "node of another graph");
  assert(!node->hasUsedResults() && "erasing a node whose results are used");
  nodes_.erase(node->getIterator());
}

void Graph::addOutput(Value *value) {
  clearMemoryPlan();
  assert(value->graph_ == this && "output of another graph");
  outputs_.push_back(value);
  ++value->numOutputUses_;
}

void Graph::setOutput(unsigned i, Value *value) {
  clearMemoryPlan();
  assert(i < outputs_.size() && "output index out of range");
  --outputs_[i]->numOutputUses_;
  outputs_[i] = value;
  ++value->numOutputUses_;
}

void Graph::removeOutput(unsigned i) {
  clearMemoryPlan();
  assert(i < outputs_.size() && "output index out of range");
  --outputs_[i]->numOutputUses_;
  outputs_.erase(outputs_.begin() + i);
}

Value *Graph::lookup(llvm::StringRef name) const {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : it->second;
}

std::string Graph::uniqueName(llvm::StringRef base) const {
  if (!base.empty() && !names_.count(base))
    return base.str();
  // Fresh names for unnamed values ("t") count up from a graph-wide counter so
  // that creating n of them costs O(n), not O(n^2).
  if (base.empty() || base == "t") {
    std::string name;
    do
      name = ("t" + llvm::Twine(nextFreshName_++)).str();
    while (names_.count(name));
    return name;
  }
  // Names are only taken between two erasures (unregisterName clears this),
  // so every suffix below the memo is still taken.
  unsigned &next = nextSuffix_[base];
  for (unsigned n = std::max(next, 1u);; ++n) {
    std::string name = (base + "." + llvm::Twine(n)).str();
    if (!names_.count(name)) {
      next = n;
      return name;
    }
  }
}

Node *Graph::cloneNode(const Node &node,
                       llvm::DenseMap<const Value *, Value *> &valueMap,
                       Node *insertBefore, Stage stage,
                       llvm::StringRef nameSuffix) {
  llvm::SmallVector<Value *, 4> operands;
  for (Value *operand : node.getOperands()) {
    auto it = valueMap.find(operand);
    operands.push_back(it == valueMap.end() ? operand : it->second);
  }
  llvm::SmallVector<TensorType, 2> types;
  std::vector<std::string> names;
  for (const auto &result : node.results_) {
    types.push_back(result->getType());
    names.push_back(uniqueName((result->getName() + nameSuffix).str()));
  }
  Node *copy = createNode(node.getOp(), operands, types, names, node.attrs_,
                          insertBefore);
  copy->stage_ = stage;
  copy->layer_ = node.layer_;
  copy->loc_ = node.loc_;
  copy->setOrigin(node.origin_ ? node.origin_ : const_cast<Node *>(&node));
  for (unsigned i = 0; i < node.getNumResults(); ++i)
    valueMap[node.getResult(i)] = copy->getResult(i);
  return copy;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto copy = std::make_unique<Graph>(name_);
  copy->sourceName_ = sourceName_;
  llvm::DenseMap<const Value *, Value *> map;
  llvm::DenseMap<const Node *, Node *> nodeMap;
  for (const auto &input : inputs_) {
    Value *newInput = copy->addInput(input->name_, input->type_,
                                     input->isWeight_);
    newInput->data_ = input->data_;
    newInput->loc_ = input->loc_;
    map[input.get()] = newInput;
  }
  for (const Node &node : nodes_) {
    Node *newNode = new Node(copy.get(), node.op_);
    for (Value *operand : node.operands_) {
      // Operands defined later (a schedule the verifier would reject) are
      // cloned lazily below; only well-formed graphs are cloned in practice.
      assert(map.count(operand) && "cloning a graph that is not topological");
      newNode->addOperand(map[operand]);
    }
    for (const auto &result : node.results_) {
      Value *newResult =
          copy->addResult(newNode, result->name_, result->type_);
      newResult->loc_ = result->loc_;
      map[result.get()] = newResult;
    }
    newNode->attrs_ = node.attrs_;
    newNode->stage_ = node.stage_;
    newNode->layer_ = node.layer_;
    newNode->loc_ = node.loc_;
    copy->nodes_.push_back(newNode);
    nodeMap[&node] = newNode;
  }
  for (const Node &node : nodes_) {
    Node *newNode = nodeMap[&node];
    if (node.origin_)
      newNode->setOrigin(nodeMap[node.origin_]);
    for (unsigned i = 0; i < node.getNumResults(); ++i)
      if (Value *weight = node.getResult(i)->gradientOf_)
        newNode->getResult(i)->gradientOf_ = map[weight];
  }
  for (Value *output : outputs_)
    copy->addOutput(map[output]);
  copy->nextFreshName_ = nextFreshName_;
  if (memoryPlan_) {
    MemoryPlan plan;
    plan.arenaBytes = memoryPlan_->arenaBytes;
    plan.peakLiveBytes = memoryPlan_->peakLiveBytes;
    for (const Node &node : nodes_)
      for (const auto &result : node.results_)
        if (auto offset = memoryPlan_->lookup(result.get()))
          plan.offsets[map[result.get()]] = *offset;
    for (const auto &[result, operand] : memoryPlan_->inPlaceOf)
      plan.inPlaceOf[map[result]] = map[operand];
    copy->memoryPlan_ = std::move(plan);
  }
  return copy;
}

//===----------------------------------------------------------------------===//
// Structural equality
//===----------------------------------------------------------------------===//

static bool fail(std::string *why, const llvm::Twine &message) {
  if (why)
    *why = message.str();
  return false;
}

static bool dataEqual(const TensorDataPtr &a, const TensorDataPtr &b) {
  if (!a || !b)
    return a == b;
  return *a == *b;
}

bool graphsEqual(const Graph &a, const Graph &b, std::string *why) {
  if (a.getName() != b.getName())
    return fail(why, "graph names differ: @" + a.getName() + " vs @" +
                         b.getName());
  if (a.getNumInputs() != b.getNumInputs())
    return fail(why, "input counts differ: " + llvm::Twine(a.getNumInputs()) +
                         " vs " + llvm::Twine(b.getNumInputs()));
  for (unsigned i = 0; i < a.getNumInputs(); ++i) {
    const Value *x = a.getInput(i), *y = b.getInput(i);
    if (x->getName() != y->getName() || x->getType() != y->getType() ||
        x->isWeight() != y->isWeight())
      return fail(why, "input " + llvm::Twine(i) + " differs: %" +
                           x->getName() + ": " + x->getType().str() +
                           " vs %" + y->getName() + ": " + y->getType().str());
    if (!dataEqual(x->getData(), y->getData()))
      return fail(why, "data of input %" + x->getName() + " differs");
  }
  if (a.getNumNodes() != b.getNumNodes())
    return fail(why, "node counts differ: " + llvm::Twine(a.getNumNodes()) +
                         " vs " + llvm::Twine(b.getNumNodes()));
  auto itB = b.getNodes().begin();
  for (const Node &x : a.getNodes()) {
    const Node &y = *itB++;
    std::string label = "node " + x.describe();
    if (x.getOp() != y.getOp())
      return fail(why, label + ": ops differ (" + x.getOpSpelling() + " vs " +
                           y.getOpSpelling() + ")");
    if (x.getStage() != y.getStage())
      return fail(why, label + ": stages differ");
    if (x.getNumOperands() != y.getNumOperands())
      return fail(why, label + ": operand counts differ");
    for (unsigned i = 0; i < x.getNumOperands(); ++i)
      if (x.getOperand(i)->getName() != y.getOperand(i)->getName())
        return fail(why, label + ": operand " + llvm::Twine(i) + " differs (%" +
                             x.getOperand(i)->getName() + " vs %" +
                             y.getOperand(i)->getName() + ")");
    if (x.getNumResults() != y.getNumResults())
      return fail(why, label + ": result counts differ");
    for (unsigned i = 0; i < x.getNumResults(); ++i) {
      const Value *rx = x.getResult(i), *ry = y.getResult(i);
      if (rx->getName() != ry->getName() || rx->getType() != ry->getType())
        return fail(why, label + ": result " + llvm::Twine(i) + " differs (%" +
                             rx->getName() + ": " + rx->getType().str() +
                             " vs %" + ry->getName() + ": " +
                             ry->getType().str() + ")");
    }
    if (x.getAttrs() != y.getAttrs())
      return fail(why, label + ": attributes differ");
    auto nameOf = [](const Value *value) {
      return value ? ("%" + value->getName()).str() : std::string("none");
    };
    auto originOf = [&](const Node &node) {
      return nameOf(node.getOrigin() ? node.getOrigin()->getResult(0)
                                     : nullptr);
    };
    if (originOf(x) != originOf(y))
      return fail(why, label + ": origins differ (" + originOf(x) + " vs " +
                           originOf(y) + ")");
    for (unsigned i = 0; i < x.getNumResults(); ++i) {
      std::string gx = nameOf(x.getResult(i)->getGradientOf());
      std::string gy = nameOf(y.getResult(i)->getGradientOf());
      if (gx != gy)
        return fail(why, label + ": result " + llvm::Twine(i) +
                             " is the gradient of " + gx + " vs " + gy);
    }
  }
  if (a.getOutputs().size() != b.getOutputs().size())
    return fail(why, "output counts differ");
  for (size_t i = 0; i < a.getOutputs().size(); ++i)
    if (a.getOutputs()[i]->getName() != b.getOutputs()[i]->getName())
      return fail(why, "output " + llvm::Twine(i) + " differs: %" +
                           a.getOutputs()[i]->getName() + " vs %" +
                           b.getOutputs()[i]->getName());
  return true;
}

} // namespace remat::ir
