//===- passes/remat/ChunkLoss.cpp - The loss head in chunks of tokens -----===//
#include "passes/remat/ChunkLoss.h"
#include "passes/remat/ChunkAttention.h"
#include "passes/remat/ChunkRewriter.h"

#include "ir/Builder.h"
#include "ir/Support.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace remat::passes::recompute {

using ir::DType;
using ir::Node;
using ir::OpKind;
using ir::Stage;
using ir::Value;

llvm::Expected<ChunkLossSetting> parseChunkSetting(llvm::StringRef option,
                                                   llvm::StringRef text) {
  ChunkLossSetting setting;
  if (text == "auto")
    return setting;
  if (text == "off") {
    setting.mode = ChunkLossSetting::Mode::Off;
    return setting;
  }
  unsigned chunks = 0;
  if (text.getAsInteger(10, chunks) || chunks == 0)
    return makeError(option +
                     ": expected auto, off or a number of chunks of "
                     "at least 1, got '" +
                     text + "'");
  setting.mode = ChunkLossSetting::Mode::Fixed;
  setting.chunks = chunks;
  return setting;
}

llvm::Expected<ChunkLossSetting> parseChunkLoss(llvm::StringRef text) {
  return parseChunkSetting("chunk-loss", text);
}

int64_t getChunkRows(int64_t tokens, unsigned chunks) {
  if (chunks < 2)
    return 0;
  int64_t rows = (tokens + chunks - 1) / chunks;
  rows = (rows + kTokenBlock - 1) / kTokenBlock * kTokenBlock;
  return rows < tokens ? rows : 0;
}

namespace {

bool hasUnitAlpha(const Node &node) {
  return node.getAttrs().getFloat("alpha").value_or(1.0f) == 1.0f;
}

bool isTransposed(const Node &node, llvm::StringRef name) {
  return node.getAttrs().getInt(name).value_or(0) != 0;
}

/// \returns the axes \p reduce (a ReduceSum) sums over, normalized, or
/// std::nullopt when they are not constant or absent (all axes).
std::optional<std::vector<int64_t>> reducedAxes(const Node &reduce) {
  std::vector<int64_t> axes;
  if (reduce.getNumOperands() > 1) {
    const Value *operand = reduce.getOperand(1);
    if (operand->isGraphInput() ||
        operand->getDefiningNode()->getOp() != OpKind::Constant)
      return std::nullopt;
    ir::TensorDataPtr data =
        operand->getDefiningNode()->getAttrs().getTensor("value");
    if (!data)
      return std::nullopt;
    axes = data->getInts();
  } else if (auto attr = reduce.getAttrs().getInts("axes")) {
    axes = *attr;
  } else {
    return std::nullopt;
  }
  int64_t rank = reduce.getOperand(0)->getType().getRank();
  for (int64_t &axis : axes)
    if (axis < 0)
      axis += rank;
  return axes;
}

/// Matches one loss head (Note [Chunked loss head]).
class HeadMatcher {
public:
  explicit HeadMatcher(const llvm::DenseMap<const Node *, size_t> &position)
      : position_(position) {}

  std::optional<LossHead> match(Node &loss, std::string &why) {
    why_ = &why;
    LossHead head;
    head.loss = &loss;
    if (loss.getNumOperands() != 2)
      return fail("it has class weights");
    std::string reduction =
        loss.getAttrs().getString("reduction").value_or("mean");
    if (reduction != "mean" && reduction != "sum")
      return fail("its reduction is '" + reduction + "', not mean or sum");
    Value *scores = loss.getOperand(0);
    const ir::TensorType &type = scores->getType();
    if (type.getRank() != 2 || loss.getOperand(1)->getType().getRank() != 1)
      return fail("its scores are not [tokens, classes]");
    if (type.getDType() != DType::F32)
      return fail("its scores are " + ir::dtypeName(type.getDType()).str() +
                  ", not f32");
    head.tokens = type.getDim(0);
    head.classes = type.getDim(1);
    if (scores->isGraphInput())
      return fail("its scores are a graph input");
    if (scores->isGraphOutput() || scores->getNumUses() != 1)
      return fail("its scores " + percent(scores) + " have other readers");
    Node *projection = scores->getDefiningNode();
    head.projection = projection;
    if (projection->getOp() != OpKind::Gemm)
      return fail("its scores come from " + describe(*projection) +
                  ", not a Gemm");
    if (isTransposed(*projection, "transA") || !hasUnitAlpha(*projection))
      return fail("the Gemm " + percent(scores) +
                  " has transA or an alpha other than 1");
    if (projection->getNumOperands() == 3) {
      const ir::TensorType &bias = projection->getOperand(2)->getType();
      bool oneRow = bias.getNumElements() == head.classes &&
                    (bias.getRank() == 1 || bias.getRank() == 2);
      if (!oneRow ||
          projection->getAttrs().getFloat("beta").value_or(1.0f) != 1.0f)
        return fail("the Gemm " + percent(scores) +
                    " adds a C that is not one row of bias with beta 1");
    }
    if (loss.getNumResults() < 2 || loss.getResult(1)->getNumUses() != 1 ||
        loss.getResult(1)->isGraphOutput())
      return fail("its log_prob is not read by its gradient alone (is it a "
                  "training step?)");
    const ir::Use &gradUse = loss.getResult(1)->getUses().front();
    Node *grad = gradUse.user;
    if (grad->getOp() != OpKind::SoftmaxCrossEntropyGrad ||
        gradUse.operandIndex != 0 || grad->getStage() != Stage::Backward)
      return fail("its log_prob is read by " + describe(*grad) +
                  ", not by its gradient");
    head.scoresGrad = grad;
    for (unsigned i : {1u, 2u}) {
      const ir::TensorType &operand = grad->getOperand(i)->getType();
      if (operand.getRank() != 1 || operand.getDim(0) != head.tokens)
        return fail("its gradient's labels or scale are not one per token");
    }
    if (!matchReaders(head))
      return std::nullopt;
    if (!collectLabelNodes(head))
      return std::nullopt;
    return head;
  }

private:
  std::nullopt_t fail(const llvm::Twine &reason) {
    *why_ = reason.str();
    return std::nullopt;
  }
  bool reject(const llvm::Twine &reason) {
    *why_ = reason.str();
    return false;
  }

  /// \returns true if \p value is held at the loss's place in forward.
  bool isAvailable(const Value *value, const LossHead &head) const {
    if (value->isGraphInput())
      return true;
    const Node *def = value->getDefiningNode();
    if (def == head.loss || def->getStage() == Stage::Backward)
      return false;
    return position_.lookup(def) < position_.lookup(head.loss);
  }

  bool matchReaders(LossHead &head) {
    Value *dS = head.scoresGrad->getResult(0);
    if (dS->isGraphOutput())
      return reject("its scores' gradient is a graph output");
    llvm::DenseSet<const Node *> seen;
    for (const ir::Use &use : dS->getUses()) {
      Node *user = use.user;
      if (!seen.insert(user).second)
        return reject(describe(*user) + " reads the scores' gradient twice");
      auto cannotSplit = [&]() {
        return reject("the scores' gradient " + percent(dS) + " is read by " +
                      describe(*user) + ", which is not split by tokens");
      };
      if (user->getStage() != Stage::Backward)
        return cannotSplit();
      if (user->getOp() == OpKind::ReduceSum) {
        auto axes = reducedAxes(*user);
        if (use.operandIndex != 0 || !axes || *axes != std::vector<int64_t>{0})
          return cannotSplit();
        head.columnSums.push_back(user);
        continue;
      }
      if (user->getOp() != OpKind::Gemm || user->getNumOperands() != 2 ||
          !hasUnitAlpha(*user))
        return cannotSplit();
      bool transA = isTransposed(*user, "transA");
      bool transB = isTransposed(*user, "transB");
      unsigned other = 1 - use.operandIndex;
      if (!isAvailable(user->getOperand(other), head))
        return reject("the gradient " + describe(*user) + " reads " +
                      percent(user->getOperand(other)) +
                      ", which forward does not hold at the loss");
      if (use.operandIndex == 0 && !transA) {
        head.rowReaders.push_back(user);
        continue;
      }
      // A sum over tokens: dS^T P or P^T dS, P's rows being the tokens.
      // (dS at A: dS^T P; dS at B: P^T dS; either way transA and not transB.)
      if (!transA || transB ||
          user->getOperand(other)->getType().getDim(0) != head.tokens)
        return cannotSplit();
      head.tokenSums.push_back(user);
    }
    return true;
  }

  /// The backward nodes behind the gradient's labels and scale: they must
  /// read only what forward holds at the loss (labels, the seed).
  bool collectLabelNodes(LossHead &head) {
    llvm::DenseSet<Node *> cone;
    llvm::SmallVector<Value *, 8> work{head.scoresGrad->getOperand(1),
                                       head.scoresGrad->getOperand(2)};
    while (!work.empty()) {
      Value *value = work.pop_back_val();
      if (!value->isGraphInput() &&
          value->getDefiningNode()->getStage() == Stage::Backward) {
        Node *def = value->getDefiningNode();
        if (cone.insert(def).second)
          for (Value *operand : def->getOperands())
            work.push_back(operand);
        continue;
      }
      if (!isAvailable(value, head))
        return reject("its gradient's scale reads " + percent(value) +
                      ", which forward does not hold at the loss");
    }
    head.labelNodes.assign(cone.begin(), cone.end());
    llvm::sort(head.labelNodes, [&](const Node *a, const Node *b) {
      return position_.lookup(a) < position_.lookup(b);
    });
    return true;
  }

  const llvm::DenseMap<const Node *, size_t> &position_;
  std::string *why_ = nullptr;
};

/// Builds the chunked head at the loss's place.
class HeadRewriter : ChunkRewriterBase {
public:
  HeadRewriter(ir::Graph &graph, const LossHead &head, int64_t rows)
      : ChunkRewriterBase(graph, "chunk-loss"), head_(head), rows_(rows) {
    builder_.setInsertionPoint(head.loss);
    builder_.setStage(Stage::Forward);
    base_ = head.loss->getResult(0)->getName().str() + ".chunk";
  }

  llvm::Expected<unsigned> run() {
    // The labels' part of the gradient, in forward.
    for (Node *node : head_.labelNodes)
      graph_.cloneNode(*node, labelMap_, head_.loss, Stage::Forward,
                       ".chunked");
    Value *labels = head_.loss->getOperand(1);
    Value *gradLabels = mapped(head_.scoresGrad->getOperand(1));
    Value *scale = mapped(head_.scoresGrad->getOperand(2));
    Node *projection = head_.projection;
    Value *hidden = projection->getOperand(0);

    std::vector<Value *> losses;
    std::vector<std::vector<Value *>> rowParts(head_.rowReaders.size());
    std::vector<Value *> tokenSums(head_.tokenSums.size(), nullptr);
    std::vector<Value *> columnSums(head_.columnSums.size(), nullptr);
    unsigned chunks = 0;
    for (int64_t begin = 0; begin < head_.tokens; begin += rows_, ++chunks) {
      int64_t end = std::min(head_.tokens, begin + rows_);
      bool last = end == head_.tokens;
      std::string name = base_ + std::to_string(chunks);
      auto rowsOf = [&](Value *value) {
        return create(OpKind::Slice,
                      {value, ints({begin}), ints({end}), ints({0})}, {},
                      name + ".rows");
      };
      // Scores, per-token losses and log_prob, dS.
      llvm::SmallVector<Value *, 3> projectionOperands{rowsOf(hidden)};
      for (unsigned i = 1; i < projection->getNumOperands(); ++i)
        projectionOperands.push_back(projection->getOperand(i));
      Value *scores = create(OpKind::Gemm, projectionOperands,
                             projection->getAttrs(), name + ".scores");
      ir::AttrList lossAttrs = head_.loss->getAttrs();
      lossAttrs.set("reduction", std::string("none"));
      Node *loss =
          createNode(OpKind::SoftmaxCrossEntropyLoss, {scores, rowsOf(labels)},
                     lossAttrs, 2, name + ".loss");
      if (!loss)
        return takeError();
      losses.push_back(loss->getResult(0));
      Value *dS =
          create(OpKind::SoftmaxCrossEntropyGrad,
                 {loss->getResult(1), rowsOf(gradLabels), rowsOf(scale)},
                 head_.scoresGrad->getAttrs(), name + ".grad");
      // Its rows of each row reader, its term of each sum.
      for (size_t r = 0; r < head_.rowReaders.size(); ++r) {
        const Node *reader = head_.rowReaders[r];
        rowParts[r].push_back(create(OpKind::Gemm, {dS, reader->getOperand(1)},
                                     reader->getAttrs(), name + ".rows_grad"));
      }
      for (size_t t = 0; t < head_.tokenSums.size(); ++t) {
        const Node *reader = head_.tokenSums[t];
        llvm::SmallVector<Value *, 3> operands;
        for (Value *operand : reader->getOperands())
          operands.push_back(
              operand == head_.scoresGrad->getResult(0) ? dS : rowsOf(operand));
        ir::AttrList attrs = reader->getAttrs();
        if (tokenSums[t]) {
          // The previous chunks' sum as C, beta 1 (Note [Chunked loss head]).
          operands.push_back(tokenSums[t]);
          attrs.set("beta", 1.0f);
        }
        tokenSums[t] = create(OpKind::Gemm, operands, attrs, name + ".sum");
      }
      for (size_t c = 0; c < head_.columnSums.size(); ++c) {
        const Node *reader = head_.columnSums[c];
        Value *input = dS;
        if (columnSums[c]) {
          ir::AttrList concat;
          concat.set("axis", int64_t{0});
          input = create(OpKind::Concat, {columnSums[c], dS}, concat,
                         name + ".column_rows");
        }
        ir::AttrList attrs = reader->getAttrs();
        if (!last)
          attrs.set("keepdims", int64_t{1});
        columnSums[c] = create(OpKind::ReduceSum, {input, ints({0})}, attrs,
                               name + ".column_sum");
      }
    }

    // The step's loss: the per-token losses summed in token order.
    ir::AttrList concat;
    concat.set("axis", int64_t{0});
    Value *all = create(OpKind::Concat, losses, concat, base_ + ".losses");
    ir::AttrList scalarSum;
    scalarSum.set("keepdims", int64_t{0});
    Value *loss = create(OpKind::ReduceSum, {all}, scalarSum, base_ + ".total");
    if (head_.loss->getAttrs().getString("reduction").value_or("mean") ==
        "mean") {
      Value *count;
      if (auto ignore = head_.loss->getAttrs().getInt("ignore_index")) {
        DType labelType = labels->getType().getDType();
        Value *ignored =
            create(OpKind::Equal,
                   {labels, builder_.createConstant(ir::TensorData::fromInts(
                                ir::TensorType(labelType, {}), {*ignore}))},
                   {}, base_ + ".ignored");
        Value *kept = create(OpKind::Not, {ignored}, {}, base_ + ".kept");
        ir::AttrList cast;
        cast.set("to", int64_t(ir::onnxCode(DType::F32)));
        count = create(OpKind::ReduceSum,
                       {create(OpKind::Cast, {kept}, cast, base_ + ".ones")},
                       scalarSum, base_ + ".count");
      } else {
        count = builder_.createConstant(
            ir::TensorData::fromDoubles(ir::TensorType(DType::F32, {}),
                                        {double(head_.tokens)}),
            base_ + ".count");
      }
      loss = create(OpKind::Div, {loss, count}, {}, base_ + ".mean");
    }
    if (error_)
      return takeError();

    // Take over the old results (and their names), then drop the old head.
    replace(head_.loss->getResult(0), loss);
    for (size_t r = 0; r < head_.rowReaders.size(); ++r)
      replace(
          head_.rowReaders[r]->getResult(0),
          create(OpKind::Concat, rowParts[r], concat, base_ + ".rows_grad"));
    for (size_t t = 0; t < head_.tokenSums.size(); ++t)
      replace(head_.tokenSums[t]->getResult(0), tokenSums[t]);
    for (size_t c = 0; c < head_.columnSums.size(); ++c)
      replace(head_.columnSums[c]->getResult(0), columnSums[c]);
    if (error_)
      return takeError();
    eraseOldHead();
    return chunks;
  }

private:
  Value *mapped(Value *value) const {
    auto it = labelMap_.find(value);
    return it == labelMap_.end() ? value : it->second;
  }

  /// Erases the old head's nodes, readers first.
  void eraseOldHead() {
    std::vector<Node *> old{head_.projection, head_.loss, head_.scoresGrad};
    llvm::append_range(old, head_.rowReaders);
    llvm::append_range(old, head_.tokenSums);
    llvm::append_range(old, head_.columnSums);
    llvm::append_range(old, head_.labelNodes);
    llvm::DenseSet<Node *> doomed(old.begin(), old.end());
    eraseOld([&](Node *node) { return doomed.count(node) != 0; });
  }

  const LossHead &head_;
  int64_t rows_;
  llvm::DenseMap<const Value *, Value *> labelMap_;
};

} // namespace

std::optional<LossHead> findLossHead(ir::Graph &graph, std::string &whyNot) {
  llvm::DenseMap<const Node *, size_t> position;
  size_t at = 0;
  for (Node &node : graph.getNodes())
    position[&node] = at++;
  HeadMatcher matcher(position);
  std::vector<std::string> reasons;
  for (Node &node : graph.getNodes()) {
    if (node.getOp() != OpKind::SoftmaxCrossEntropyLoss ||
        node.getStage() != Stage::Forward)
      continue;
    std::string why;
    if (auto head = matcher.match(node, why))
      return head;
    reasons.push_back(percent(node.getResult(0)) + ": " + why);
  }
  whyNot = reasons.empty() ? "the step has no SoftmaxCrossEntropyLoss"
                           : llvm::join(reasons, "; ");
  return std::nullopt;
}

llvm::Expected<unsigned> chunkLossHead(ir::Graph &graph, const LossHead &head,
                                       int64_t rows) {
  assert(rows > 0 && rows < head.tokens && rows % kTokenBlock == 0 &&
         "rows from getChunkRows");
  return HeadRewriter(graph, head, rows).run();
}

llvm::Expected<std::unique_ptr<ChunkedStep>>
prepareChunkedStep(const ir::Graph &graph, ChunkLossSetting loss,
                   ChunkLossSetting attention, llvm::StringRef costProfilePath,
                   llvm::ArrayRef<std::string> boundaries, std::string &whyNot,
                   std::string &attentionWhyNot) {
  using Mode = ChunkLossSetting::Mode;
  assert((loss.mode != Mode::Off || attention.mode != Mode::Off) &&
         "nothing to prepare");
  auto step = std::make_unique<ChunkedStep>();
  step->graph = graph.clone();
  if (loss.mode != Mode::Off) {
    bool fixed = loss.mode == Mode::Fixed;
    auto head = findLossHead(*step->graph, whyNot);
    if (head) {
      // auto: rows of one block, the finest split that keeps the bits, so
      // that the head's share of the peak is smallest.
      if (fixed)
        step->rows = getChunkRows(head->tokens, loss.chunks);
      else
        step->rows = head->tokens > kTokenBlock ? kTokenBlock : 0;
      if (!step->rows)
        whyNot = percent(head->loss->getResult(0)) + ": its " +
                 std::to_string(head->tokens) +
                 " tokens make fewer than two chunks of whole blocks of " +
                 std::to_string(kTokenBlock) + " tokens";
    }
    if (!head || !step->rows) {
      if (fixed)
        return makeError("chunk-loss=" + std::to_string(loss.chunks) +
                         ": the loss head of @" + graph.getName() +
                         " is left whole: " + whyNot);
      return nullptr;
    }
    step->description = "the loss head " + percent(head->loss->getResult(0)) +
                        " (" + std::to_string(head->tokens) + " tokens x " +
                        std::to_string(head->classes) + " classes, Gemm " +
                        percent(head->projection->getResult(0)) + ")";
    auto chunks = chunkLossHead(*step->graph, *head, step->rows);
    if (!chunks)
      return chunks.takeError();
    step->chunks = *chunks;
    step->description += " in " + std::to_string(step->chunks) +
                         " chunks of up to " + std::to_string(step->rows) +
                         " tokens";
  }
  if (attention.mode != Mode::Off) {
    step->attention = attention;
    auto cores = chunkAttentionCores(*step->graph, attention, attentionWhyNot,
                                     &step->attentionDescription);
    if (!cores)
      return cores.takeError();
    if (!*cores) {
      if (attention.mode == Mode::Fixed)
        return makeError("chunk-attention=" + std::to_string(attention.chunks) +
                         ": no attention core of @" + graph.getName() +
                         " can be chunked: " + attentionWhyNot);
      return nullptr;
    }
    step->attentionCores = *cores;
    step->attentionLeftWhole = attentionWhyNot;
  }
  auto problem = prepareRematProblem(*step->graph, costProfilePath, boundaries);
  if (!problem)
    return problem.takeError();
  step->problem = std::move(*problem);
  return std::move(step);
}

llvm::Expected<RecomputeStats> applyChunkedPlan(ir::Graph &graph,
                                                const ChunkedStep &step,
                                                const PlanResult &plan) {
  std::string whyNot;
  if (step.rows) {
    auto head = findLossHead(graph, whyNot);
    assert(head && "the copy's head was found");
    auto chunks = chunkLossHead(graph, *head, step.rows);
    if (!chunks)
      return chunks.takeError();
  }
  if (step.attentionCores) {
    auto cores = chunkAttentionCores(graph, step.attention, whyNot, nullptr);
    if (!cores)
      return cores.takeError();
    assert(*cores == step.attentionCores && "the copy's cores were found");
  }
  // The rewrites are deterministic: the plan's names are the copy's and now
  // this graph's.
  return applyRecomputePlan(graph, toRecomputePlan(graph, plan),
                            step.problem->profile);
}

} // namespace remat::passes::recompute
