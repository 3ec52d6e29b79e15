//===- passes/remat/ChunkAttention.cpp - Attention cores by batch ---------===//
#include "passes/remat/ChunkAttention.h"

#include "ir/Hash.h"
#include "passes/remat/ChunkRewriter.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace remat::passes::recompute {

using ir::Node;
using ir::OpKind;
using ir::Stage;
using ir::Value;

llvm::Expected<ChunkLossSetting> parseChunkAttention(llvm::StringRef text) {
  return parseChunkSetting("chunk-attention", text);
}

namespace {

/// Inverts x ^= x >> shift.
uint64_t unshiftXor(uint64_t y, unsigned shift) {
  uint64_t x = y;
  for (unsigned done = shift; done < 64; done += shift)
    x = y ^ (x >> shift);
  return x;
}

/// The inverse of \p odd modulo 2^64 (Newton's iteration doubles the
/// correct low bits each step: 3, 6, 12, 24, 48, 96).
uint64_t inverseOdd(uint64_t odd) {
  uint64_t inverse = odd;
  for (int i = 0; i < 5; ++i)
    inverse *= 2 - odd * inverse;
  return inverse;
}

/// The inverse of ir::splitMix64Finalize.
uint64_t unfinalize(uint64_t z) {
  z = unshiftXor(z, 31);
  z *= inverseOdd(0x94D049BB133111EBull);
  z = unshiftXor(z, 27);
  z *= inverseOdd(0xBF58476D1CE4E5B9ull);
  return unshiftXor(z, 30);
}

} // namespace

uint64_t getChunkSeed(uint64_t seed, uint64_t offset) {
  uint64_t key = ir::splitMix64(seed) + offset * ir::kSplitMix64Gamma;
  return unfinalize(key) - ir::kSplitMix64Gamma;
}

int64_t getAttentionRows(int64_t batch, unsigned chunks) {
  if (chunks < 2 || batch < 2)
    return 0;
  return (batch + chunks - 1) / chunks;
}

namespace {

bool isElementwise(OpKind op) {
  return op == OpKind::Add || op == OpKind::Sub || op == OpKind::Mul ||
         op == OpKind::Div || op == OpKind::Neg;
}

bool isMatMul(OpKind op) {
  return op == OpKind::MatMul || op == OpKind::PermutedMatMul;
}

/// The 'perm_*' attribute \p name of a remat.PermutedMatMul, the identity
/// when absent.
llvm::SmallVector<int64_t, 6> permOf(const Node &node, llvm::StringRef name) {
  unsigned rank = node.getResult(0)->getType().getRank();
  if (auto perm = node.getAttrs().getInts(name))
    return llvm::SmallVector<int64_t, 6>(perm->begin(), perm->end());
  llvm::SmallVector<int64_t, 6> identity(rank);
  for (unsigned d = 0; d < rank; ++d)
    identity[d] = d;
  return identity;
}

/// The dim of operand \p index of the batched product \p node whose
/// entries make those of its result's dim 0, when that is a batch dim of
/// the product (Note [Chunked attention core]): 0 for a MatMul of operands
/// of the result's rank; for a remat.PermutedMatMul, the dim its perm maps
/// to the product's dim perm_y[0]. \returns nullopt when the product's dim
/// perm_y[0] is a matrix dim (the perms move the batch).
std::optional<int64_t> batchAxisOf(const Node &node, unsigned index) {
  if (node.getOp() == OpKind::MatMul)
    return 0;
  assert(node.getOp() == OpKind::PermutedMatMul && "a batched product");
  int64_t rank = node.getResult(0)->getType().getRank();
  int64_t product = permOf(node, "perm_y")[0];
  if (product >= rank - 2)
    return std::nullopt;
  return permOf(node, index == 0 ? "perm_a" : "perm_b")[product];
}

/// \returns \p node's normalized axis attribute (default \p fallback).
int64_t axisOf(const Node &node, int64_t fallback) {
  int64_t axis = node.getAttrs().getInt("axis").value_or(fallback);
  int64_t rank = node.getResult(0)->getType().getRank();
  return axis < 0 ? axis + rank : axis;
}

/// Matches the attention cores (Note [Chunked attention core]).
class CoreMatcher {
public:
  explicit CoreMatcher(const llvm::DenseMap<const Node *, size_t> &position)
      : position_(position) {}

  std::optional<AttentionCore> match(Node &softmax, ir::Graph &graph,
                                     std::string &why) {
    why_ = &why;
    AttentionCore core;
    core.scores = softmax.getResult(0)->getType();
    rank_ = core.scores.getRank();
    batch_ = core.scores.getDim(0);
    core.batch = batch_;
    if (rank_ < 3)
      return fail("it is not batched (rank " + std::to_string(rank_) + ")");
    if (batch_ < 2)
      return fail("its batch of " + std::to_string(batch_) +
                  " makes fewer than two chunks");
    if (axisOf(softmax, -1) == 0)
      return fail("it normalizes over the batch axis");
    // Up to the scores' MatMul, through the scale and the mask.
    std::vector<Node *> chain{&softmax};
    Value *value = softmax.getOperand(0);
    while (true) {
      if (value->isGraphInput())
        return fail("its scores are a graph input");
      Node *def = value->getDefiningNode();
      if (def->getStage() != Stage::Forward)
        return fail("its scores come from a " + describe(*def) +
                    " outside forward");
      if (isMatMul(def->getOp())) {
        chain.push_back(def);
        break;
      }
      if (!isElementwise(def->getOp()))
        return fail("its scores come from " + describe(*def) +
                    ", not a MatMul, scale or mask");
      chain.push_back(def);
      // The operand of the scores' shape continues the chain.
      Value *next = nullptr;
      for (Value *operand : def->getOperands())
        if (operand->getType().getDims() == core.scores.getDims() && !next)
          next = operand;
      if (!next)
        return fail("the scale or mask " + describe(*def) +
                    " broadcasts its scores");
      value = next;
    }
    std::reverse(chain.begin(), chain.end());
    // Down to the context's MatMul, through the Dropout.
    Value *probs = softmax.getResult(0);
    Node *reader = onlyForwardReader(probs);
    if (reader && reader->getOp() == OpKind::Dropout &&
        reader->getOperand(0) == probs) {
      chain.push_back(reader);
      probs = reader->getResult(0);
      reader = onlyForwardReader(probs);
    }
    if (!reader || !isMatMul(reader->getOp()) || reader->getOperand(0) != probs)
      return fail("its probabilities are not read by one MatMul(P, V) in "
                  "forward");
    chain.push_back(reader);
    for (Node *matmul : {chain.front(), chain.back()})
      if (!checkProduct(*matmul, "the MatMul " + describe(*matmul)))
        return std::nullopt;
    core.forward = chain;
    for (Node *node : chain)
      if (!checkSeparable(*node))
        return std::nullopt;

    // The big values, then the backward part.
    llvm::DenseSet<const Value *> big;
    for (Node *node : chain)
      if (node != chain.back())
        for (Value *result : node->getResults())
          big.insert(result);
    llvm::DenseSet<const Node *> inCore(chain.begin(), chain.end());
    for (Node &node : graph.getNodes()) {
      if (node.getStage() != Stage::Backward)
        continue;
      if (llvm::none_of(node.getOperands(),
                        [&](const Value *v) { return big.count(v); }))
        continue;
      if (!checkSeparable(node))
        return std::nullopt;
      core.backward.push_back(&node);
      inCore.insert(&node);
      for (Value *result : node.getResults())
        if (result->getType().getDims() == core.scores.getDims())
          big.insert(result);
    }
    // Upwards: the backward nodes that make a big-shaped operand of the
    // backward part for it alone (dP = MatMul(dO, V^T) reads no big value).
    std::vector<Node *> work = core.backward;
    while (!work.empty()) {
      Node *node = work.back();
      work.pop_back();
      for (Value *operand : node->getOperands()) {
        if (operand->isGraphInput() ||
            operand->getType().getDims() != core.scores.getDims())
          continue;
        Node *def = operand->getDefiningNode();
        if (def->getStage() != Stage::Backward || inCore.count(def) ||
            llvm::any_of(def->getResults(), [&](const Value *result) {
              return result->isGraphOutput() ||
                     llvm::any_of(result->getUses(), [&](const ir::Use &use) {
                       return !inCore.count(use.user);
                     });
            }))
          continue;
        std::string kept = *why_;
        if (!checkSeparable(*def)) {
          *why_ = kept;
          continue;
        }
        core.backward.push_back(def);
        inCore.insert(def);
        work.push_back(def);
        for (Value *result : def->getResults())
          big.insert(result);
      }
    }
    llvm::sort(core.backward, [&](const Node *a, const Node *b) {
      return position_.lookup(a) < position_.lookup(b);
    });
    if (core.backward.empty())
      return fail("no backward node reads its scores (is it a training "
                  "step?)");
    for (const Value *value : big) {
      if (value->isGraphOutput())
        return fail(percent(value) + " is a graph output");
      for (const ir::Use &use : value->getUses())
        if (!inCore.count(use.user))
          return fail(percent(value) + " is also read by " +
                      describe(*use.user));
    }
    // A value of the core is chunked on its dim 0: a product reads it there.
    for (const std::vector<Node *> *part : {&core.forward, &core.backward})
      for (const Node *node : *part)
        for (unsigned i = 0; i < node->getNumOperands(); ++i) {
          const Value *operand = node->getOperand(i);
          if (node->getOp() != OpKind::PermutedMatMul ||
              operand->isGraphInput() ||
              !inCore.count(operand->getDefiningNode()) ||
              *batchAxisOf(*node, i) == 0)
            continue;
          return fail("the MatMul " + describe(*node) + " reads the core's " +
                      percent(operand) + " with its batch in dim " +
                      std::to_string(*batchAxisOf(*node, i)) + ", not dim 0");
        }
    // Every operand from outside the backward part is defined before the
    // first reader of its results.
    const Node *first = firstOutsideReader(core.backward, inCore);
    if (!first)
      return fail("its gradients are not read");
    for (Node *node : core.backward)
      for (Value *operand : node->getOperands()) {
        if (operand->isGraphInput() || inCore.count(operand->getDefiningNode()))
          continue;
        if (position_.lookup(operand->getDefiningNode()) >=
            position_.lookup(first))
          return fail("its gradient reads " + percent(operand) +
                      ", which is computed after " + describe(*first) +
                      " reads a gradient of the core");
      }
    return core;
  }

  /// \returns the first node outside \p inCore reading a result of
  /// \p nodes, or null.
  const Node *
  firstOutsideReader(llvm::ArrayRef<Node *> nodes,
                     const llvm::DenseSet<const Node *> &inCore) const {
    const Node *first = nullptr;
    for (Node *node : nodes)
      for (Value *result : node->getResults())
        for (const ir::Use &use : result->getUses())
          if (!inCore.count(use.user) &&
              (!first || position_.lookup(use.user) < position_.lookup(first)))
            first = use.user;
    return first;
  }

private:
  std::nullopt_t fail(const llvm::Twine &reason) {
    *why_ = reason.str();
    return std::nullopt;
  }

  Node *onlyForwardReader(Value *value) const {
    Node *reader = nullptr;
    for (const ir::Use &use : value->getUses()) {
      if (use.user->getStage() != Stage::Forward)
        continue;
      if (reader)
        return nullptr;
      reader = use.user;
    }
    return reader;
  }

  bool isBatchLed(const Value *value) const {
    const ir::TensorType &type = value->getType();
    return type.getRank() == rank_ && type.getDim(0) == batch_;
  }

  /// Whether each batch entry of the product \p node's result reads one
  /// entry of each operand, on its batchAxisOf dim; refuses as \p what.
  bool checkProduct(const Node &node, const std::string &what) {
    for (unsigned i = 0; i < node.getNumOperands(); ++i) {
      std::optional<int64_t> axis = batchAxisOf(node, i);
      if (!axis) {
        *why_ = what + " permutes the batch dim: its result's dim 0 is a "
                       "matrix dim of its product";
        return false;
      }
      const Value *operand = node.getOperand(i);
      const ir::TensorType &type = operand->getType();
      if (type.getRank() != rank_ || type.getDim(*axis) != batch_) {
        *why_ = what + " reads " + percent(operand) + ", which is not " +
                (*axis == 0 ? "[" + std::to_string(batch_) + ", ...]"
                            : "of " + std::to_string(batch_) + " in dim " +
                                  std::to_string(*axis)) +
                " of rank " + std::to_string(rank_);
        return false;
      }
    }
    return true;
  }

  /// A node each batch slice of which reads only that slice of its operands
  /// (Note [Chunked attention core]).
  bool checkSeparable(const Node &node) {
    auto refuse = [&](const llvm::Twine &what) {
      *why_ = ("the core's node " + describe(node) + " " + what).str();
      return false;
    };
    for (const Value *result : node.getResults())
      if (!isBatchLed(result))
        return refuse("has a result that is not [" + std::to_string(batch_) +
                      ", ...] of rank " + std::to_string(rank_));
    switch (node.getOp()) {
    case OpKind::MatMul:
      for (const Value *operand : node.getOperands())
        if (!isBatchLed(operand))
          return refuse("multiplies by " + percent(operand) +
                        ", which is not batched");
      return true;
    case OpKind::PermutedMatMul:
      return checkProduct(node, "the core's node " + describe(node));
    case OpKind::Transpose: {
      auto perm = node.getAttrs().getInts("perm");
      if (!perm || perm->empty() || (*perm)[0] != 0)
        return refuse("moves the batch axis");
      return true;
    }
    case OpKind::Softmax:
    case OpKind::SoftmaxGrad:
      if (axisOf(node, -1) == 0)
        return refuse("normalizes over the batch axis");
      break;
    case OpKind::Dropout:
    case OpKind::DropoutGrad:
      break;
    default:
      if (!isElementwise(node.getOp()))
        return refuse("cannot be computed batch slice by batch slice");
    }
    // Elementwise: each operand batch-led or broadcast along the batch.
    for (const Value *operand : node.getOperands()) {
      const ir::TensorType &type = operand->getType();
      if (!isBatchLed(operand) && type.getRank() == rank_ &&
          type.getDim(0) != 1)
        return refuse("reads " + percent(operand) +
                      ", neither batch-led nor broadcast");
    }
    return true;
  }

  const llvm::DenseMap<const Node *, size_t> &position_;
  std::string *why_ = nullptr;
  unsigned rank_ = 0;
  int64_t batch_ = 0;
};

/// Builds one core in chunks.
class CoreRewriter : ChunkRewriterBase {
public:
  CoreRewriter(ir::Graph &graph, const AttentionCore &core, int64_t rows)
      : ChunkRewriterBase(graph, "chunk-attention"), core_(core), rows_(rows),
        inCore_(core.forward.begin(), core.forward.end()) {
    inCore_.insert(core.backward.begin(), core.backward.end());
    base_ = core.forward.back()->getResult(0)->getName().str() + ".chunk";
  }

  llvm::Expected<unsigned> run(const Node *forwardAt, const Node *backwardAt) {
    const Node *context = core_.forward.back();
    bool backwardReadsContext =
        llvm::any_of(context->getResult(0)->getUses(), [&](const ir::Use &use) {
          return inCore_.count(use.user);
        });
    std::vector<Value *> contexts;
    // (original result, its chunks), for the backward outputs.
    llvm::MapVector<Value *, std::vector<Value *>> outputs;
    for (Node *node : core_.backward)
      for (Value *result : node->getResults())
        if (result->isGraphOutput() ||
            llvm::any_of(result->getUses(), [&](const ir::Use &use) {
              return !inCore_.count(use.user);
            }))
          outputs[result];
    // The dims other than 0 a product's operand is sliced on, made in
    // forward: index() shares a constant with every later reader.
    place(forwardAt, Stage::Forward);
    for (const std::vector<Node *> *part : {&core_.forward, &core_.backward})
      for (const Node *node : *part)
        if (node->getOp() == OpKind::PermutedMatMul)
          for (unsigned i = 0; i < node->getNumOperands(); ++i)
            if (int64_t axis = *batchAxisOf(*node, i))
              index(axis);
    unsigned chunks = 0;
    for (int64_t begin = 0; begin < core_.batch; begin += rows_, ++chunks) {
      int64_t end = std::min(core_.batch, begin + rows_);
      std::string name = base_ + std::to_string(chunks);
      // Forward: the chain on the chunk.
      llvm::DenseMap<const Value *, Value *> map;
      slices_.clear();
      place(forwardAt, Stage::Forward);
      for (Node *node : core_.forward)
        clone(*node, map, begin, end, name);
      contexts.push_back(lookup(map, context->getResult(0)));
      // Backward: the chain again (its context only if read), then the
      // backward part.
      map.clear();
      slices_.clear();
      place(backwardAt, Stage::Backward);
      for (Node *node : core_.forward)
        if (node != context || backwardReadsContext)
          clone(*node, map, begin, end, name + ".re");
      for (Node *node : core_.backward)
        clone(*node, map, begin, end, name + ".grad");
      for (auto &[result, parts] : outputs)
        parts.push_back(lookup(map, result));
    }
    if (error_)
      return takeError();
    ir::AttrList concat;
    concat.set("axis", int64_t{0});
    place(forwardAt, Stage::Forward);
    Value *whole = create(OpKind::Concat, contexts, concat, base_ + ".all",
                          context->getLayer());
    replace(context->getResult(0), whole);
    place(backwardAt, Stage::Backward);
    for (auto &[result, parts] : outputs)
      replace(result, create(OpKind::Concat, parts, concat, base_ + ".grad",
                             result->getDefiningNode()->getLayer()));
    if (error_)
      return takeError();
    eraseOld([&](const Node *node) { return inCore_.count(node) != 0; });
    return chunks;
  }

private:
  void place(const Node *at, Stage stage) {
    builder_.setInsertionPoint(const_cast<Node *>(at));
    builder_.setStage(stage);
  }

  Value *lookup(const llvm::DenseMap<const Value *, Value *> &map,
                Value *value) const {
    auto it = map.find(value);
    return it == map.end() ? value : it->second;
  }

  /// The chunk's operand for operand \p i of the core node \p node: its
  /// clone, its Slice [begin, end) on the dim holding the batch (dim 0 when
  /// batch-led; a product's batchAxisOf), or itself.
  Value *operandFor(const Node &node, unsigned i,
                    const llvm::DenseMap<const Value *, Value *> &map,
                    int64_t begin, int64_t end, const std::string &name) {
    Value *operand = node.getOperand(i);
    auto it = map.find(operand);
    std::optional<int64_t> axis;
    if (node.getOp() == OpKind::PermutedMatMul)
      axis = batchAxisOf(node, i);
    else if (operand->getType().getRank() == core_.scores.getRank() &&
             operand->getType().getDim(0) == core_.batch)
      axis = 0;
    if (it != map.end()) {
      assert(axis == 0 && "a core value is chunked on dim 0");
      return it->second;
    }
    if (!axis)
      return operand;
    Value *&slice = slices_[{operand, *axis}];
    if (!slice)
      slice = create(OpKind::Slice,
                     {operand, index(begin), index(end), index(*axis)}, {},
                     name + ".rows", node.getLayer());
    return slice;
  }

  /// The i64[1] constant \p value, made once per core: a chunk's bounds are
  /// made by its forward Slices (the first), before its backward reads them;
  /// the dims other than 0 that Slices cut, before the first chunk (run).
  Value *index(int64_t value) {
    auto [it, isNew] = indices_.try_emplace(value, nullptr);
    if (isNew)
      it->second = ints({value});
    return it->second;
  }

  void clone(const Node &node, llvm::DenseMap<const Value *, Value *> &map,
             int64_t begin, int64_t end, const std::string &name) {
    if (error_)
      return;
    llvm::SmallVector<Value *, 4> operands;
    for (unsigned i = 0; i < node.getNumOperands(); ++i)
      operands.push_back(operandFor(node, i, map, begin, end, name));
    ir::AttrList attrs = node.getAttrs();
    if (node.getOp() == OpKind::Dropout) {
      // The chunk's elements start at begin * (elements per batch entry).
      uint64_t seed = static_cast<uint64_t>(attrs.getInt("seed").value_or(0));
      uint64_t offset = static_cast<uint64_t>(
          begin *
          (node.getResult(0)->getType().getNumElements() / core_.batch));
      attrs.set("seed", static_cast<int64_t>(getChunkSeed(seed, offset)));
    }
    Node *copy = createNode(
        node.getOp(), operands, std::move(attrs), node.getNumResults(),
        name + "." + node.getResult(0)->getName().str(), node.getLayer());
    if (!copy)
      return;
    for (unsigned i = 0; i < node.getNumResults(); ++i)
      map[node.getResult(i)] = copy->getResult(i);
  }

  Node *createNode(OpKind op, llvm::ArrayRef<Value *> operands,
                   ir::AttrList attrs, unsigned results, llvm::StringRef name,
                   int layer) {
    builder_.setLayer(layer);
    return ChunkRewriterBase::createNode(op, operands, std::move(attrs),
                                         results, name);
  }

  Value *create(OpKind op, llvm::ArrayRef<Value *> operands, ir::AttrList attrs,
                llvm::StringRef name, int layer) {
    builder_.setLayer(layer);
    return ChunkRewriterBase::create(op, operands, std::move(attrs), name);
  }

  const AttentionCore &core_;
  int64_t rows_;
  llvm::DenseSet<const Node *> inCore_;
  llvm::DenseMap<int64_t, Value *> indices_;
  /// The current chunk's Slices, by value and dim.
  llvm::DenseMap<std::pair<const Value *, int64_t>, Value *> slices_;
};

llvm::DenseMap<const Node *, size_t> schedulePositions(ir::Graph &graph) {
  llvm::DenseMap<const Node *, size_t> position;
  size_t at = 0;
  for (Node &node : graph.getNodes())
    position[&node] = at++;
  return position;
}

} // namespace

std::vector<AttentionCore> findAttentionCores(ir::Graph &graph,
                                              std::string &whyNot) {
  auto position = schedulePositions(graph);
  CoreMatcher matcher(position);
  std::vector<AttentionCore> cores;
  std::vector<std::string> reasons;
  for (Node &node : graph.getNodes()) {
    if (node.getOp() != OpKind::Softmax || node.getStage() != Stage::Forward)
      continue;
    std::string why;
    if (auto core = matcher.match(node, graph, why))
      cores.push_back(std::move(*core));
    else
      reasons.push_back(percent(node.getResult(0)) + ": " + why);
  }
  if (reasons.empty() && cores.empty())
    whyNot = "the step has no Softmax in forward";
  else
    whyNot = llvm::join(reasons, "; ");
  return cores;
}

llvm::Expected<unsigned>
chunkAttentionCore(ir::Graph &graph, const AttentionCore &core, int64_t rows) {
  assert(rows > 0 && rows < core.batch && "rows from getAttentionRows");
  auto position = schedulePositions(graph);
  CoreMatcher matcher(position);
  llvm::DenseSet<const Node *> inCore(core.forward.begin(), core.forward.end());
  inCore.insert(core.backward.begin(), core.backward.end());
  const Node *forwardAt = matcher.firstOutsideReader(
      llvm::ArrayRef<Node *>(core.forward.back()), inCore);
  const Node *backwardAt = matcher.firstOutsideReader(core.backward, inCore);
  assert(forwardAt && backwardAt && "findAttentionCores checked the readers");
  return CoreRewriter(graph, core, rows).run(forwardAt, backwardAt);
}

llvm::Expected<unsigned> chunkAttentionCores(ir::Graph &graph,
                                             ChunkLossSetting setting,
                                             std::string &whyNot,
                                             std::string *description) {
  assert(setting.mode != ChunkLossSetting::Mode::Off && "nothing to chunk");
  std::vector<AttentionCore> cores = findAttentionCores(graph, whyNot);
  if (cores.empty())
    return 0;
  // auto: kAutoAttentionChunks chunks, which take most of the big values
  // out of the floor without multiplying the step's nodes.
  unsigned chunks = setting.mode == ChunkLossSetting::Mode::Fixed
                        ? setting.chunks
                        : kAutoAttentionChunks;
  // Every core's rows first, so that a refusal leaves the graph unchanged.
  for (const AttentionCore &core : cores)
    if (!getAttentionRows(core.batch, chunks)) {
      whyNot = "a batch of " + std::to_string(core.batch) + " in " +
               std::to_string(chunks) + " chunk is left whole";
      return 0;
    }
  unsigned made = 0;
  int64_t rows = 0;
  // Each rewrite erases only its own core's nodes: the others stay valid.
  for (const AttentionCore &core : cores) {
    rows = getAttentionRows(core.batch, chunks);
    auto done = chunkAttentionCore(graph, core, rows);
    if (!done)
      return done.takeError();
    made = *done;
  }
  if (description) {
    *description =
        std::to_string(cores.size()) + " attention core" +
        (cores.size() == 1 ? "" : "s") + " ([" +
        llvm::join(llvm::map_range(cores.front().scores.getDims(),
                                   [](int64_t d) { return std::to_string(d); }),
                   ", ") +
        "] scores) in " + std::to_string(made) + " chunks of up to " +
        std::to_string(rows) + " batch entries";
  }
  return cores.size();
}

} // namespace remat::passes::recompute
