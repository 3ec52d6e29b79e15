//===- passes/Autodiff.cpp - Reverse-mode differentiation -----------------===//
//
// Note [Autodiff]
// ~~~~~~~~~~~~~~~
// The pass walks the forward schedule backwards from the loss and appends,
// for every node on a path from a weight to the loss, the Stage::Backward
// nodes of its gradient rule (standard ONNX opset-17 ops only, so that a
// written training graph runs in onnxruntime). A value with several uses
// gets one contribution per use; they are summed with Add in the order they
// were made, which is the reverse schedule order, so the result is
// deterministic. Contributions to an operand that was broadcast are summed
// over the broadcast dims (ReduceSum + Reshape to the operand's shape).
//
// Gradient rules, one grad<Op> function per op with trait kDifferentiable
// and GradOperands in ir/Ops.def, in passes/autodiff/ by op family
// (passes/autodiff/GradRules.h), dispatched through kGradRules: Add Sub
// Mul Div Pow Sqrt Erf Tanh Relu Sigmoid Exp Log Neg Where (x, y) Max Cast
// (float to float)
// Identity MatMul (batched, broadcast batch dims, 1-D operands) Gemm Softmax
// (as remat.SoftmaxGrad) LogSoftmax LayerNormalization (through its Mean and
// InvStdDev results, added when absent; X's gradient as
// remat.LayerNormalizationGrad when Scale has the normalized shape and the
// statistics X's dtype) Dropout (through its mask, added when absent; as
// remat.DropoutGrad)
// ReduceMean ReduceSum ReduceMax Reshape Transpose Unsqueeze Squeeze Concat
// Slice Split Expand Gather (data) SoftmaxCrossEntropyLoss (scores; log_prob
// added when absent), remat.Gelu (derivative as remat.GeluGrad; export
// decomposes it, and the other remat-domain gradients, into standard ops),
// Sin Cos Abs Min Trilu CumSum
// GatherElements (data) Pad (data, constant_value), Reciprocal and Conv (X
// through ConvTranspose; W for group 1; B), Softplus (sigmoid(x) dy), TopK
// (values into zeros at the indices), ScatterElements (data, updates;
// reduction none or add; none with constant duplicate indices is refused).
// ConvTranspose has no rule (autodiff emits it for Conv; it does not
// differentiate through one).
//
// Only float values carry gradients. Not differentiated through:
// - Shape, Constant, ConstantOfShape (no operand, or an integer one) and
//   Equal, GreaterOrEqual, And, Not, IsNaN, IsInf, Less, LessOrEqual,
//   Greater, Or (boolean results), ArgMax, ArgMin (i64 results): no rule
//   is needed, since their results never carry a gradient.
// - Cast to or from a non-float dtype; any integer or bool value.
// - Index-like operands: Gather/ScatterElements indices, the shape operand of
//   Reshape/Expand, the axes of ReduceSum/Squeeze/Unsqueeze, the starts,
//   ends, axes, steps of Slice, the split operand of Split, Where's
//   condition, Dropout's ratio and training_mode, the labels and class
//   weights of SoftmaxCrossEntropyLoss. Ops.def's GradOperands column lists
//   the operands that do carry one.
// - Ops whose gradient is zero wherever it is defined (piecewise constant):
//   Ops.def gives them kDifferentiable and no GradOperands, so their result
//   is a constant to autodiff (Sign, Ceil, Floor). It emits no backward
//   nodes for them, and a weight that reaches the loss only through one
//   gets no gradient.
// Any other op without a rule (Mod, Range, OneHot) whose
// float result depends on a weight and is on a path to the loss is an error
// that names the node, rather than a silent zero gradient.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "passes/autodiff/GradRules.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <numeric>

namespace remat::passes {

using namespace ir;
using llvm::Error;
using llvm::Expected;

AutodiffPass::AutodiffPass() {
  declareOption("loss", "the output to differentiate (default: the single "
                        "scalar float output)",
                &loss_);
  declareEnumOption("unused-weights",
                    "what to do with weights that do not reach the loss",
                    &unusedWeights_, {"warn", "error", "drop"});
  declareOption("freeze",
                "weights that get no gradient: names or globs, "
                "comma-separated",
                &freeze_);
  declareOption("padding-idx",
                "NAME=ROW,...: the embedding lookups of weight NAME add no "
                "gradient to row ROW (torch's padding_idx)",
                &paddingIdx_);
}

Expected<std::vector<std::pair<std::string, int64_t>>>
AutodiffPass::parsePaddingIdx(llvm::StringRef text) {
  std::vector<std::pair<std::string, int64_t>> rows;
  if (text.trim().empty())
    return rows;
  for (llvm::StringRef item : llvm::split(text, ',')) {
    item = item.trim();
    auto [name, row] = item.rsplit('=');
    int64_t value = 0;
    if (name.empty() || !item.contains('=') ||
        row.trim().getAsInteger(10, value) || value < 0)
      return makeError("'" + item +
                       "' is not NAME=ROW with a row number >= 0");
    rows.emplace_back(name.trim().str(), value);
  }
  return rows;
}

Expected<std::vector<std::pair<std::string, llvm::GlobPattern>>>
AutodiffPass::parseFreeze(llvm::StringRef text) {
  std::vector<std::pair<std::string, llvm::GlobPattern>> patterns;
  if (text.trim().empty())
    return patterns;
  for (llvm::StringRef item : llvm::split(text, ',')) {
    item = item.trim();
    if (item.empty())
      return makeError("an entry of '" + text + "' is empty");
    auto pattern = llvm::GlobPattern::create(item);
    if (!pattern)
      return makeError("'" + item + "' is not a glob: " +
                       llvm::toString(pattern.takeError()));
    patterns.emplace_back(item.str(), std::move(*pattern));
  }
  return patterns;
}

namespace {

/// True for the ops autodiff knows (trait kDifferentiable).
bool hasRule(OpKind op) { return hasTrait(op, kDifferentiable); }

using GradRule = Error (*)(autodiff::Differentiator &,
                          const autodiff::GradArgs &);

/// grad<Op> for an op with trait kDifferentiable whose gradient reaches an
/// operand, else null.
template <OpKind K, uint32_t Traits, OperandSet GradOperands>
constexpr GradRule ruleFor() {
  if constexpr ((Traits & kDifferentiable) != 0 && GradOperands != kNoOperands)
    return &autodiff::grad<K>;
  else
    return nullptr;
}

/// The gradient rules, indexed by OpKind.
constexpr GradRule kGradRules[] = {
#define OP(NAME, DOMAIN, MIN_OPERANDS, MAX_OPERANDS, MIN_RESULTS, MAX_RESULTS, \
           TRAITS, COST, INFER, KERNEL, GRAD_OPERANDS, ONNX_SINCE, SUMMARY)    \
  ruleFor<OpKind::NAME, uint32_t(TRAITS), GRAD_OPERANDS>(),
#include "ir/Ops.def"
};

} // namespace

namespace autodiff {

Node *Differentiator::emitNode(OpKind op, llvm::ArrayRef<Value *> operands,
                               AttrList attrs, unsigned numResults) {
  if (failure_ || llvm::is_contained(operands, nullptr))
    return nullptr;
  Expected<Node *> node = builder_.create(op, operands, std::move(attrs),
                                          numResults, base_);
  if (!node) {
    failure_ = errorToString(node.takeError());
    return nullptr;
  }
  for (Value *result : (*node)->getResults())
    created_.insert(result);
  return *node;
}

Value *Differentiator::emit(OpKind op, llvm::ArrayRef<Value *> operands,
                            AttrList attrs) {
  Node *node = emitNode(op, operands, std::move(attrs), 1);
  return node ? node->getResult(0) : nullptr;
}

Value *Differentiator::scalar(DType dtype, double value) {
  Value *result = builder_.createConstant(
      TensorData::fromDoubles(TensorType(dtype, {}), {value}), base_);
  created_.insert(result);
  return result;
}

Value *Differentiator::ints(llvm::ArrayRef<int64_t> values, DType dtype) {
  Value *result = builder_.createConstant(
      TensorData::fromInts(
          TensorType(dtype, {static_cast<int64_t>(values.size())}), values),
      base_);
  created_.insert(result);
  return result;
}

Value *Differentiator::zeros(const TensorType &type) {
  AttrList attrs;
  attrs.set("value", TensorDataPtr(std::make_shared<TensorData>(
                         TensorType(type.getDType(), {1}))));
  return emit(OpKind::ConstantOfShape, {ints(type.getDims())}, attrs);
}

Value *Differentiator::reshape(Value *value, llvm::ArrayRef<int64_t> dims) {
  if (!value || value->getType().getDims() == dims)
    return value;
  // A 0 in the shape copies the operand's dim unless allowzero is set; an
  // empty tensor's gradient reshapes to dims that are 0 themselves.
  AttrList attrs;
  if (llvm::is_contained(dims, 0))
    attrs.set("allowzero", int64_t(1));
  return emit(OpKind::Reshape, {value, ints(dims)}, attrs);
}

Value *Differentiator::castTo(Value *value, DType dtype) {
  if (!value || value->getType().getDType() == dtype)
    return value;
  AttrList attrs;
  attrs.set("to", int64_t(onnxCode(dtype)));
  return emit(OpKind::Cast, {value}, attrs);
}

/// Sums \p grad over the dims along which \p type was broadcast to it.
Value *Differentiator::sumTo(Value *grad, const TensorType &type) {
  if (!grad)
    return nullptr;
  llvm::ArrayRef<int64_t> from = grad->getType().getDims();
  llvm::ArrayRef<int64_t> to = type.getDims();
  if (from == to)
    return grad;
  assert(from.size() >= to.size() && "gradient of lower rank than operand");
  size_t lead = from.size() - to.size();
  llvm::SmallVector<int64_t, 4> axes;
  for (size_t i = 0; i < from.size(); ++i)
    if (i < lead || (to[i - lead] == 1 && from[i] != 1))
      axes.push_back(i);
  Value *sum = grad;
  if (!axes.empty())
    sum = emit(OpKind::ReduceSum, {grad, ints(axes)});
  return reshape(sum, to);
}

void Differentiator::contribute(Value *operand, Value *grad) {
  if (!grad)
    return;
  assert(grad->getType() == operand->getType() && "gradient type mismatch");
  // Name a gradient made for this operand after it.
  if (created_.contains(grad) && !grad->isGraphInput() &&
      grad->getDefiningNode()->getOp() != OpKind::Constant &&
      !grad->getName().startswith(ir::gradientName(operand->getName())))
    grad->setName(graph_.uniqueName(ir::gradientName(operand->getName())));
  contributions_[operand].push_back(grad);
}

Value *Differentiator::accumulate(Value *value) {
  auto it = contributions_.find(value);
  if (it == contributions_.end() || it->second.empty())
    return nullptr;
  llvm::SmallVector<Value *, 2> &parts = it->second;
  Value *sum = parts.front();
  std::string saved = base_;
  base_ = ir::gradientName(value->getName());
  for (Value *part : llvm::drop_begin(parts))
    sum = emit(OpKind::Add, {sum, part});
  base_ = saved;
  parts.assign(1, sum);
  return sum;
}

int64_t intAttr(const Node &node, llvm::StringRef name, int64_t otherwise) {
  return node.getAttrs().getInt(name).value_or(otherwise);
}

int64_t normAxis(int64_t axis, unsigned rank) {
  return axis < 0 ? axis + rank : axis;
}

llvm::SmallVector<int64_t, 4> keepDims(const TensorType &type,
                                       llvm::ArrayRef<int64_t> axes) {
  llvm::SmallVector<int64_t, 4> dims(type.getDims().begin(), type.getDims().end());
  for (int64_t axis : axes)
    dims[normAxis(axis, type.getRank())] = 1;
  return dims;
}

Error Differentiator::backprop(Node &node) {
  llvm::SmallVector<Value *, 2> grads;
  for (Value *result : node.getResults())
    grads.push_back(accumulate(result));
  // Only Split has several results that carry gradients.
  for (unsigned i = 1; i < grads.size(); ++i)
    if (grads[i] && node.getOp() != OpKind::Split)
      return makeError(node.describe() + ": autodiff cannot differentiate "
                       "through result " + llvm::Twine(i) + " ('" +
                       node.getResult(i)->getName() + "') of " +
                       node.getOpSpelling());
  Value *g = grads.front();
  if (!g && node.getOp() != OpKind::Split)
    return Error::success();
  base_ = ir::gradientName(node.getResult(0)->getName());
  builder_.setLayer(node.getLayer());
  GradRule rule = kGradRules[size_t(node.getOp())];
  assert(rule && "op without a gradient rule reached backprop");
  Value *y = node.getResult(0);
  if (Error err = rule(*this, {node, grads, g, y, y->getType().getDType()}))
    return err;
  if (failure_)
    return makeError("autodiff failed to build the gradient of " +
                     node.describe() + ": " + *failure_);
  return Error::success();
}

Error Differentiator::run(Value *loss, llvm::ArrayRef<Value *> weights,
                          llvm::DenseMap<Value *, Value *> &gradOfWeight,
                          const llvm::DenseSet<Value *> &reach) {
  reach_ = &reach;
  std::vector<Node *> forward;
  for (Node &node : graph_.getNodes())
    forward.push_back(&node);
  base_ = ir::gradientName(loss->getName());
  contributions_[loss].push_back(scalar(loss->getType().getDType(), 1));
  for (Node *node : llvm::reverse(forward)) {
    bool reached = llvm::any_of(node->getResults(), [&](Value *result) {
      return reach.contains(result);
    });
    if (reached)
      if (Error err = backprop(*node))
        return err;
  }
  for (Value *weight : weights)
    if (Value *grad = accumulate(weight))
      gradOfWeight[weight] = grad;
  if (failure_)
    return makeError("autodiff failed: " + *failure_);
  return Error::success();
}

} // namespace autodiff

using autodiff::Differentiator;

Expected<bool> AutodiffPass::run(Graph &graph) {
  assert((unusedWeights_ == "warn" || unusedWeights_ == "error" ||
          unusedWeights_ == "drop") &&
         "checked when the option was parsed");
  for (Value *output : graph.getOutputs())
    if (output->getGradientOf())
      return makeError("graph already has gradient outputs ('" +
                       output->getName() + "')");

  // The loss.
  Value *loss = nullptr;
  auto isScalarFloat = [](const Value *value) {
    return value->getType().getRank() == 0 &&
           isFloat(value->getType().getDType());
  };
  if (!loss_.empty()) {
    loss = graph.lookup(loss_);
    if (!loss || !llvm::is_contained(graph.getOutputs(), loss))
      return makeError("loss '" + loss_ + "' is not an output of the graph");
    if (!isScalarFloat(loss))
      return makeError("loss '" + loss_ + "' has type " +
                       loss->getType().str() + ", expected a float scalar");
  } else {
    llvm::SmallVector<std::string, 2> scalars;
    for (Value *output : graph.getOutputs())
      if (isScalarFloat(output) &&
          !llvm::is_contained(scalars, output->getName().str())) {
        scalars.push_back(("'" + output->getName() + "'").str());
        loss = output;
      }
    if (scalars.empty())
      return makeError("graph has no scalar float output to use as the loss; "
                       "name one with autodiff{loss=NAME}");
    if (scalars.size() > 1)
      return makeError("graph has several scalar float outputs (" +
                       llvm::join(scalars, ", ") +
                       "); choose the loss with autodiff{loss=NAME}");
  }

  // Frozen weights: each pattern must name one, so that a typo is not a
  // silently trained weight.
  auto patterns = parseFreeze(freeze_);
  if (!patterns)
    return makeError("option 'freeze': " +
                     llvm::toString(patterns.takeError()));
  std::vector<bool> patternUsed(patterns->size(), false);
  auto isFrozen = [&](const Value *weight) {
    bool frozen = false;
    for (size_t i = 0; i < patterns->size(); ++i)
      if ((*patterns)[i].second.match(weight->getName()))
        frozen = patternUsed[i] = true;
    return frozen;
  };

  // Values that depend on a weight through differentiable operands.
  llvm::DenseSet<Value *> active;
  llvm::SmallVector<Value *, 8> weights;
  size_t numFrozen = 0;
  int64_t frozenBytes = 0;
  for (Value *input : graph.getInputs()) {
    if (!input->isWeight() || !isFloat(input->getType().getDType()))
      continue;
    if (isFrozen(input)) {
      ++numFrozen;
      frozenBytes += input->getType().getByteSize();
      continue;
    }
    weights.push_back(input);
    active.insert(input);
  }
  for (size_t i = 0; i < patterns->size(); ++i) {
    if (patternUsed[i])
      continue;
    llvm::SmallVector<std::string, 4> names;
    size_t total = 0;
    for (Value *input : graph.getInputs())
      if (input->isWeight() && total++ < 3)
        names.push_back(("'" + input->getName() + "'").str());
    std::string listed = llvm::join(names, ", ");
    if (total > names.size())
      listed += ", ... (" + std::to_string(total) + " weights)";
    return makeError("option 'freeze': '" + (*patterns)[i].first +
                     "' names no weight of the graph (" +
                     (total ? "its weights: " + listed : "it has none") + ")");
  }
  auto carries = [&](const Node &node, unsigned i) {
    if (!active.contains(node.getOperand(i)))
      return false;
    return !hasRule(node.getOp()) || isGradOperand(node.getOp(), i);
  };
  for (Node &node : graph.getNodes()) {
    bool any = false;
    for (unsigned i = 0; i < node.getNumOperands(); ++i)
      any |= carries(node, i);
    if (!any)
      continue;
    for (Value *result : node.getResults())
      if (isFloat(result->getType().getDType()))
        active.insert(result);
  }
  if (!active.contains(loss))
    return makeError("no weight reaches the loss '" + loss->getName() + "'" +
                     (numFrozen ? " (" + std::to_string(numFrozen) +
                                      " frozen by option 'freeze')"
                                : std::string()));
  if (numFrozen)
    emitNote("froze " + std::to_string(numFrozen) + " weight" +
             (numFrozen == 1 ? "" : "s") + " (" +
             std::to_string(frozenBytes) + " B): no gradient, no update");

  // Active values from which the loss is reachable.
  llvm::DenseSet<Value *> reach{loss};
  for (Node &node : llvm::reverse(graph.getNodes())) {
    bool reached = llvm::any_of(node.getResults(), [&](Value *result) {
      return reach.contains(result);
    });
    if (!reached)
      continue;
    if (!hasRule(node.getOp()))
      return makeError(node.describe() + ": op " + node.getOpSpelling() +
                       " has no gradient rule, but it is on a path from a "
                       "weight to the loss '" + loss->getName() + "'");
    for (unsigned i = 0; i < node.getNumOperands(); ++i)
      if (carries(node, i))
        reach.insert(node.getOperand(i));
  }

  // Weights without a gradient.
  llvm::SmallVector<Value *, 4> unused;
  for (Value *weight : weights)
    if (!reach.contains(weight))
      unused.push_back(weight);
  if (!unused.empty() && unusedWeights_ == "error") {
    llvm::SmallVector<std::string, 4> names;
    for (Value *weight : unused)
      names.push_back(("'" + weight->getName() + "'").str());
    return makeError("weights that do not reach the loss '" + loss->getName() +
                     "': " + llvm::join(names, ", ") +
                     " (use autodiff{unused-weights=warn} or drop)");
  }
  if (unusedWeights_ == "warn")
    for (Value *weight : unused)
      emitWarning("weight '" + weight->getName() + "' does not reach the loss '" +
                  loss->getName() + "' and gets no gradient");

  // Padding rows: each names a trained weight that a Gather on axis 0
  // looks up, and a row it has.
  auto paddingIdx = parsePaddingIdx(paddingIdx_);
  if (!paddingIdx)
    return makeError("option 'padding-idx': " +
                     llvm::toString(paddingIdx.takeError()));
  llvm::DenseMap<Value *, int64_t> paddingRows;
  for (const auto &[name, row] : *paddingIdx) {
    auto bad = [&, &name = name](const llvm::Twine &why) {
      return makeError("option 'padding-idx': '" + name + "' " + why);
    };
    Value *weight = graph.lookup(name);
    if (!weight || !weight->isGraphInput() || !weight->isWeight())
      return bad("is not a weight of the graph");
    if (!llvm::is_contained(weights, weight))
      return bad("is frozen (option 'freeze'), so it gets no gradient");
    bool lookedUp = llvm::any_of(weight->getUses(), [&](const Use &use) {
      const Node &user = *use.user;
      return user.getOp() == OpKind::Gather && use.operandIndex == 0 &&
             autodiff::normAxis(autodiff::intAttr(user, "axis", 0),
                                weight->getType().getRank()) == 0;
    });
    if (!lookedUp)
      return bad("is not looked up by a Gather on axis 0");
    if (row >= weight->getType().getDim(0)) // a Gather's data has rank >= 1
      return bad("has no row " + llvm::Twine(row) + " (" +
                 weight->getType().str() + ")");
    paddingRows[weight] = row;
  }

  Differentiator diff(graph);
  diff.setPaddingRows(std::move(paddingRows));
  llvm::DenseMap<Value *, Value *> gradOf;
  if (Error err = diff.run(loss, weights, gradOf, reach))
    return std::move(err);

  // Outputs: the loss, then the gradients in weight-input order.
  while (!graph.getOutputs().empty())
    graph.removeOutput(graph.getOutputs().size() - 1);
  graph.addOutput(loss);
  llvm::DenseSet<Value *> used;
  for (Value *weight : weights) {
    auto it = gradOf.find(weight);
    if (it == gradOf.end())
      continue;
    Value *grad = it->second;
    std::string name = ir::gradientName(weight->getName());
    bool owned = !grad->isGraphInput() &&
                 grad->getDefiningNode()->getStage() == Stage::Backward &&
                 !used.contains(grad) && grad != loss;
    if (grad->getName() != name) {
      if (Value *other = graph.lookup(name))
        other->setName(graph.uniqueName(name));
      if (owned) {
        grad->setName(name);
      } else {
        Builder builder(graph);
        builder.setStage(Stage::Backward);
        auto copy = builder.createValue(OpKind::Identity, {grad}, {}, name);
        if (!copy)
          return copy.takeError();
        grad = *copy;
        if (grad->getName() != name)
          grad->setName(name);
      }
    }
    used.insert(grad);
    grad->setGradientOf(weight);
    graph.addOutput(grad);
  }

  if (unusedWeights_ == "drop" && !unused.empty()) {
    // Remove every dead node, then the unused weights that are left unused.
    std::vector<Node *> nodes;
    for (Node &node : graph.getNodes())
      nodes.push_back(&node);
    for (Node *node : llvm::reverse(nodes))
      if (!node->hasUsedResults())
        graph.eraseNode(node);
    for (Value *weight : unused) {
      std::string name = weight->getName().str();
      if (weight->hasUses()) {
        emitWarning("weight '" + name + "' does not reach the loss '" +
                    loss->getName() + "' but is still used; kept");
        continue;
      }
      graph.eraseInput(weight);
      emitNote("dropped weight '" + name + "', which does not reach the loss '" +
               loss->getName() + "'");
    }
  }
  return true;
}

} // namespace remat::passes
