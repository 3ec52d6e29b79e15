//===- passes/Optimizer.cpp - The weight update in the graph --------------===//
//
// Appends the optimizer step to a training step (DESIGN.md "Data flow"): for
// every weight `w` whose gradient `w_grad` is a graph output, standard ONNX
// ops compute the new weight `w_new` and the new optimizer state, which
// replace the gradient outputs. The state is persistent, like the weights:
// graph inputs with zero-filled data (`w.exp_avg`, `w.exp_avg_sq`,
// `w.momentum_buffer`, and one step count `optimizer.step`) whose new values
// are outputs named by ir/UpdateName.h, so that the plan and the executor
// write every update over its input (no second copy of weights or state).
//
// The formulas are those of torch.optim (single-tensor, CPU):
//   sgd:   d = g + wd * w;  buf = momentum * buf + d (momentum > 0);
//          w -= lr * buf (or lr * d without momentum)
//   adamw: t += 1;  w *= 1 - lr * wd;  m += (1 - b1) * (g - m);
//          v = b2 * v + (1 - b2) * g * g;
//          w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// The bias corrections are computed in f64 and cast to f32, as torch computes
// them in Python floats.
//
// placement=eager inserts each weight's update right after its gradient is
// complete and its last other reader has run (optimizer-in-backward: the
// gradient dies there); placement=end appends every update at the end.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/Support.h"
#include "ir/UpdateName.h"
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>

namespace remat::passes {

namespace {

constexpr llvm::StringLiteral kStepName = "optimizer.step";
/// An ONNX importer drops unused one-element initializers (they become
/// Constants): a saved model keeps the step count alive as this output.
constexpr llvm::StringLiteral kSavedStepName = "optimizer.step.saved";
constexpr llvm::StringLiteral kStateSuffixes[] = {".exp_avg", ".exp_avg_sq",
                                                  ".momentum_buffer"};

/// ONNX TensorProto.DataType codes for Cast.
constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxDouble = 11;

/// Creates nodes through a Builder and keeps the first error, so that a
/// formula reads as a formula.
class Emitter {
public:
  explicit Emitter(ir::Builder &builder) : builder_(builder) {}

  ir::Value *op(ir::OpKind kind, llvm::ArrayRef<ir::Value *> operands,
                llvm::StringRef name, ir::AttrList attrs = {}) {
    if (error_ || llvm::is_contained(operands, nullptr))
      return nullptr;
    auto value = builder_.createValue(kind, operands, std::move(attrs), name);
    if (!value) {
      error_ = errorToString(value.takeError());
      return nullptr;
    }
    return *value;
  }
  ir::Value *scalar(double value, ir::DType dtype, llvm::StringRef name) {
    auto data = std::make_shared<ir::TensorData>(ir::TensorType(dtype, {}));
    data->setDouble(0, value);
    return builder_.createConstant(std::move(data), name);
  }
  ir::Value *cast(ir::Value *value, int64_t to, llvm::StringRef name) {
    ir::AttrList attrs;
    attrs.set("to", to);
    return op(ir::OpKind::Cast, {value}, name, std::move(attrs));
  }
  llvm::Error takeError() {
    return error_ ? makeError(*error_) : llvm::Error::success();
  }

private:
  ir::Builder &builder_;
  std::optional<std::string> error_;
};

/// \returns the input named \p name (which must have \p type) for state, or
/// a new zero-filled one; the state is never a trainable weight.
llvm::Expected<ir::Value *> getOrAddState(ir::Graph &graph,
                                          llvm::StringRef name,
                                          const ir::TensorType &type) {
  if (ir::Value *existing = graph.lookup(name)) {
    if (!existing->isGraphInput() || existing->getType() != type)
      return makeError("optimizer state '" + name + "' must be a graph input "
                       "of type " + type.str() + ", but the graph has " +
                       (existing->isGraphInput() ? "an input" : "a value") +
                       " of type " + existing->getType().str());
    existing->setWeight(false);
    if (!existing->getData())
      existing->setData(std::make_shared<ir::TensorData>(type));
    return existing;
  }
  ir::Value *state = graph.addInput(name, type, /*isWeight=*/false);
  state->setData(std::make_shared<ir::TensorData>(type));
  return state;
}

/// \returns \p value as %g prints it ("0.001", "-1", "1e-08").
std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// Checks the values of resumed state \p state: finite everywhere, and not
/// negative where \p nonNegative (a step count, a second moment, whose
/// square root the update takes). \returns an error naming the state, the
/// element and its value.
llvm::Error checkStateValues(const ir::Value *state, bool nonNegative) {
  const ir::TensorData *data = state->getData().get();
  if (!data)
    return llvm::Error::success();
  for (int64_t i = 0, n = data->getNumElements(); i < n; ++i) {
    double value = data->getDouble(i);
    if (std::isfinite(value) && (!nonNegative || value >= 0))
      continue;
    return makeError("resumed optimizer state '" + state->getName() +
                     "' holds " + formatNumber(value) + " at element " +
                     llvm::Twine(i) + "; it must be finite" +
                     (nonNegative ? " and not negative" : "") +
                     " (was the model saved by remat-run --save-weights?)");
  }
  return llvm::Error::success();
}

/// Checks the optimizer state a resumed model brings for \p weights, with
/// \p suffixes per weight and the step count when \p withStep: none of it
/// (a fresh start) or all of it, with sane values. Half of it would
/// silently restart the missing half.
llvm::Error checkResumedState(const ir::Graph &graph,
                              llvm::ArrayRef<const ir::Value *> weights,
                              llvm::ArrayRef<llvm::StringRef> suffixes,
                              bool withStep) {
  std::vector<std::string> expected;
  if (withStep)
    expected.push_back(kStepName.str());
  for (const ir::Value *weight : weights)
    for (llvm::StringRef suffix : suffixes)
      expected.push_back((weight->getName() + suffix).str());
  std::string firstPresent, firstMissing;
  for (const std::string &name : expected) {
    const ir::Value *state = graph.lookup(name);
    std::string &first = state ? firstPresent : firstMissing;
    if (first.empty())
      first = name;
    if (!state || !state->isGraphInput())
      continue;
    bool nonNegative = name == kStepName ||
                       llvm::StringRef(name).endswith(".exp_avg_sq");
    if (auto err = checkStateValues(state, nonNegative))
      return err;
  }
  if (firstPresent.empty() || firstMissing.empty())
    return llvm::Error::success();
  return makeError("the model resumes optimizer state ('" + firstPresent +
                   "') but lacks '" + firstMissing +
                   "': give all of the state remat-run --save-weights wrote, "
                   "or none of it");
}

} // namespace

bool isOptimizerState(const ir::Value *input) {
  if (!input->isGraphInput() || input->isWeight())
    return false;
  llvm::StringRef name = input->getName();
  if (name == kStepName)
    return true;
  for (llvm::StringRef suffix : kStateSuffixes)
    if (name.endswith(suffix)) {
      const ir::Value *weight =
          input->getGraph()->lookup(name.drop_back(suffix.size()));
      if (weight && weight->isGraphInput() && weight->isWeight() &&
          weight->getType() == input->getType())
        return true;
    }
  return false;
}

bool adoptOptimizerState(ir::Graph &graph) {
  bool changed = false;
  for (ir::Value *input : graph.getInputs()) {
    if (!input->isWeight())
      continue;
    for (llvm::StringRef suffix : kStateSuffixes) {
      if (!input->getName().endswith(suffix))
        continue;
      const ir::Value *weight =
          graph.lookup(input->getName().drop_back(suffix.size()));
      if (weight && weight->isGraphInput() && weight->isWeight() &&
          weight->getType() == input->getType()) {
        input->setWeight(false);
        changed = true;
        break;
      }
    }
  }
  // The output keepOptimizerStep added, as an importer left it: the
  // Identity, or the Constant it folded the Identity into.
  ir::Value *saved = graph.lookup(kSavedStepName);
  if (saved && !saved->isGraphInput() && saved->isGraphOutput() &&
      !saved->hasUses() && saved->getType() == ir::TensorType(ir::DType::F32, {})) {
    ir::Node *node = saved->getDefiningNode();
    ir::TensorDataPtr data;
    if (node->getOp() == ir::OpKind::Constant)
      data = node->getAttrs().getTensor("value");
    if (data || node->getOp() == ir::OpKind::Identity) {
      for (unsigned i = graph.getOutputs().size(); i-- > 0;)
        if (graph.getOutputs()[i] == saved)
          graph.removeOutput(i);
      graph.eraseNode(node);
      if (data && !graph.lookup(kStepName))
        graph.addInput(kStepName, ir::TensorType(ir::DType::F32, {}))
            ->setData(data);
      changed = true;
    }
  }
  // An ONNX importer makes a one-element initializer a Constant: turn the
  // step count back into the persistent input it was.
  ir::Value *step = graph.lookup(kStepName);
  if (step && !step->isGraphInput() &&
      step->getDefiningNode()->getOp() == ir::OpKind::Constant &&
      step->getType() == ir::TensorType(ir::DType::F32, {})) {
    ir::Node *node = step->getDefiningNode();
    ir::TensorDataPtr data = node->getAttrs().getTensor("value");
    step->setName(graph.uniqueName(std::string(kStepName) + ".constant"));
    ir::Value *input = graph.addInput(kStepName, step->getType());
    input->setData(data);
    step->replaceAllUsesWith(input);
    graph.eraseNode(node);
    changed = true;
  }
  return changed;
}

void keepOptimizerStep(ir::Graph &graph) {
  ir::Value *step = graph.lookup(kStepName);
  if (!step || !step->isGraphInput() || graph.lookup(kSavedStepName))
    return;
  ir::Node *node = graph.createNode(ir::OpKind::Identity, {step},
                                    {step->getType()},
                                    {std::string(kSavedStepName)});
  graph.addOutput(node->getResult(0));
}

bool orderUpdatesAfterReads(ir::Graph &graph) {
  llvm::DenseMap<const ir::Node *, size_t> position;
  std::vector<ir::Node *> nodes;
  for (ir::Node &node : graph.getNodes()) {
    position[&node] = nodes.size();
    nodes.push_back(&node);
  }
  bool changed = false;
  for (ir::Node *node : nodes) {
    for (const ir::Value *result : node->getResults()) {
      const ir::Value *input = ir::getUpdatedInput(result);
      if (!input)
        continue;
      ir::Node *lastReader = nullptr;
      for (const ir::Use &use : input->getUses())
        if (use.user != node && position[use.user] > position[node] &&
            (!lastReader || position[use.user] > position[lastReader]))
          lastReader = use.user;
      if (!lastReader)
        continue;
      // Moving a node later keeps the schedule topological when its results
      // are used only after the new place; an update's result is an output.
      bool usedBefore = false;
      for (const ir::Value *r : node->getResults())
        for (const ir::Use &use : r->getUses())
          usedBefore |= position[use.user] <= position[lastReader];
      if (usedBefore)
        continue;
      node->moveAfter(lastReader);
      changed = true;
      // Positions changed: recompute them for the remaining checks.
      nodes.clear();
      position.clear();
      for (ir::Node &n : graph.getNodes()) {
        position[&n] = nodes.size();
        nodes.push_back(&n);
      }
    }
  }
  return changed;
}

llvm::Error checkUpdateOrder(const ir::Graph &graph) {
  llvm::DenseMap<const ir::Node *, size_t> position;
  for (const ir::Node &node : graph.getNodes())
    position[&node] = position.size();
  for (const ir::Node &node : graph.getNodes())
    for (const ir::Value *result : node.getResults()) {
      const ir::Value *input = ir::getUpdatedInput(result);
      if (!input)
        continue;
      for (const ir::Use &use : input->getUses())
        if (use.user != &node && position[use.user] > position[&node])
          return makeError(node.describe() + " writes %" + result->getName() +
                           " over %" + input->getName() + ", which " +
                           use.user->describe() + " reads later");
    }
  return llvm::Error::success();
}

OptimizerPass::OptimizerPass() {
  declareEnumOption("kind", "the update: sgd (with momentum) or adamw",
                    &kind_, {"sgd", "adamw"});
  declareOption("lr", "learning rate (>= 0)", &lr_);
  declareOption("weight-decay",
                "sgd: L2 penalty added to the gradient; adamw: decoupled "
                "decay w -= lr * wd * w (>= 0)",
                &weightDecay_);
  declareOption("momentum", "sgd momentum in [0, 1)", &momentum_);
  declareOption("beta1", "adamw first-moment decay in [0, 1)", &beta1_);
  declareOption("beta2", "adamw second-moment decay in [0, 1)", &beta2_);
  declareOption("eps", "adamw denominator term (> 0)", &eps_);
  declareEnumOption("placement",
                    "eager: each update right after its gradient is "
                    "complete; end: every update at the end of the step",
                    &placement_, {"eager", "end"});
}

llvm::Error OptimizerPass::validate() const {
  auto inRange = [](double x) { return x >= 0 && x < 1; };
  if (!(lr_ >= 0) || !std::isfinite(lr_))
    return makeError("option 'lr' must be a finite number >= 0, got " +
                     formatNumber(lr_));
  if (!(weightDecay_ >= 0) || !std::isfinite(weightDecay_))
    return makeError("option 'weight-decay' must be a finite number >= 0, "
                     "got " + formatNumber(weightDecay_));
  if (!inRange(momentum_))
    return makeError("option 'momentum' must be in [0, 1), got " +
                     formatNumber(momentum_));
  if (!inRange(beta1_))
    return makeError("option 'beta1' must be in [0, 1), got " +
                     formatNumber(beta1_));
  if (!inRange(beta2_))
    return makeError("option 'beta2' must be in [0, 1), got " +
                     formatNumber(beta2_));
  if (!(eps_ > 0) || !std::isfinite(eps_))
    return makeError("option 'eps' must be a finite number > 0, got " +
                     formatNumber(eps_));
  return llvm::Error::success();
}

llvm::Expected<bool> OptimizerPass::run(ir::Graph &graph) {
  if (auto err = validate())
    return std::move(err);
  // The weights to update: each weight whose gradient is an output.
  struct Entry {
    ir::Value *weight;
    ir::Value *gradient;
  };
  std::vector<Entry> entries;
  for (ir::Value *output : graph.getOutputs()) {
    ir::Value *weight = output->getGradientOf();
    if (!weight || !weight->isWeight())
      continue;
    if (weight->getType().getDType() != ir::DType::F32 ||
        output->getType() != weight->getType())
      return makeError("weight '" + weight->getName() + "' is " +
                       weight->getType().str() +
                       " with gradient " + output->getType().str() +
                       "; the optimizer updates f32 weights only");
    entries.push_back({weight, output});
  }
  if (entries.empty())
    return makeError("the graph has no weight gradient outputs: run autodiff "
                     "first");
  for (const Entry &entry : entries)
    if (graph.lookup(ir::updatedName(entry.weight->getName())))
      return makeError("the graph already has a value named '" +
                       ir::updatedName(entry.weight->getName()) + "'");

  {
    std::vector<const ir::Value *> weights;
    for (const Entry &entry : entries)
      weights.push_back(entry.weight);
    bool adamw = kind_ == "adamw";
    llvm::SmallVector<llvm::StringRef, 2> suffixes;
    if (adamw)
      suffixes = {".exp_avg", ".exp_avg_sq"};
    else if (momentum_ != 0)
      suffixes = {".momentum_buffer"};
    if (auto err = checkResumedState(graph, weights, suffixes, adamw))
      return std::move(err);
  }

  // Schedule positions, for placement=eager: an update goes after its
  // gradient's node and after every other reader of its weight.
  llvm::DenseMap<const ir::Node *, size_t> position;
  std::vector<ir::Node *> nodes;
  for (ir::Node &node : graph.getNodes()) {
    position[&node] = nodes.size();
    nodes.push_back(&node);
  }
  bool eager = placement_ == "eager";
  auto insertionIndex = [&](const Entry &entry) -> size_t {
    if (!eager)
      return nodes.size();
    size_t last = 0;
    if (ir::Node *def = entry.gradient->getDefiningNode())
      last = std::max(last, position[def] + 1);
    for (const ir::Use &use : entry.weight->getUses())
      last = std::max(last, position[use.user] + 1);
    return last;
  };
  auto nodeAt = [&](size_t index) -> ir::Node * {
    return index < nodes.size() ? nodes[index] : nullptr;
  };
  size_t first = nodes.size();
  for (const Entry &entry : entries)
    first = std::min(first, insertionIndex(entry));

  // The gradient outputs give way to the updates.
  for (unsigned i = graph.getOutputs().size(); i-- > 0;)
    if (llvm::any_of(entries, [&](const Entry &entry) {
          return entry.gradient == graph.getOutputs()[i];
        }))
      graph.removeOutput(i);

  ir::Builder builder(graph);
  builder.setStage(ir::Stage::Backward);
  builder.setInsertionPoint(nodeAt(first));
  Emitter e(builder);
  const ir::DType f32 = ir::DType::F32, f64 = ir::DType::F64;
  bool adamw = kind_ == "adamw";

  // Step-wide scalars, once, before the first update.
  ir::Value *stepSize = nullptr, *biasCorrection2Sqrt = nullptr;
  ir::Value *stepNew = nullptr, *lr = nullptr;
  ir::Value *oneMinusBeta1 = nullptr, *beta2 = nullptr, *oneMinusBeta2 = nullptr;
  ir::Value *eps = nullptr, *decay = nullptr, *weightDecay = nullptr;
  ir::Value *momentum = nullptr;
  std::vector<ir::Value *> newOutputs;
  if (adamw) {
    auto step = getOrAddState(graph, kStepName, ir::TensorType(f32, {}));
    if (!step)
      return step.takeError();
    stepNew = e.op(ir::OpKind::Add, {*step, e.scalar(1, f32, "optimizer.one")},
                   ir::updatedName(kStepName));
    ir::Value *t = e.cast(stepNew, kOnnxDouble, "optimizer.t");
    ir::Value *one = e.scalar(1, f64, "optimizer.one_f64");
    ir::Value *bc1 = e.op(
        ir::OpKind::Sub,
        {one, e.op(ir::OpKind::Pow, {e.scalar(beta1_, f64, "optimizer.beta1"), t},
                   "optimizer.beta1_pow")},
        "optimizer.bias_correction1");
    ir::Value *bc2 = e.op(
        ir::OpKind::Sub,
        {one, e.op(ir::OpKind::Pow, {e.scalar(beta2_, f64, "optimizer.beta2"), t},
                   "optimizer.beta2_pow")},
        "optimizer.bias_correction2");
    stepSize = e.cast(e.op(ir::OpKind::Div,
                           {e.scalar(lr_, f64, "optimizer.lr_f64"), bc1},
                           "optimizer.step_size_f64"),
                      kOnnxFloat, "optimizer.step_size");
    biasCorrection2Sqrt =
        e.cast(e.op(ir::OpKind::Sqrt, {bc2}, "optimizer.bias_correction2_sqrt_f64"),
               kOnnxFloat, "optimizer.bias_correction2_sqrt");
    oneMinusBeta1 = e.scalar(1 - beta1_, f32, "optimizer.one_minus_beta1");
    beta2 = e.scalar(beta2_, f32, "optimizer.beta2_f32");
    oneMinusBeta2 = e.scalar(1 - beta2_, f32, "optimizer.one_minus_beta2");
    eps = e.scalar(eps_, f32, "optimizer.eps");
    if (weightDecay_ != 0)
      decay = e.scalar(1 - lr_ * weightDecay_, f32, "optimizer.decay");
  } else {
    lr = e.scalar(lr_, f32, "optimizer.lr");
    if (weightDecay_ != 0)
      weightDecay = e.scalar(weightDecay_, f32, "optimizer.weight_decay");
    if (momentum_ != 0)
      momentum = e.scalar(momentum_, f32, "optimizer.momentum");
  }
  if (auto err = e.takeError())
    return std::move(err);

  for (const Entry &entry : entries) {
    ir::Value *w = entry.weight, *g = entry.gradient;
    std::string name = w->getName().str();
    builder.setInsertionPoint(nodeAt(insertionIndex(entry)));
    if (ir::Node *def = g->getDefiningNode())
      builder.setLayer(def->getLayer());
    ir::Value *wNew = nullptr;
    if (adamw) {
      auto m = getOrAddState(graph, name + ".exp_avg", w->getType());
      if (!m)
        return m.takeError();
      auto v = getOrAddState(graph, name + ".exp_avg_sq", w->getType());
      if (!v)
        return v.takeError();
      ir::Value *decayed =
          decay ? e.op(ir::OpKind::Mul, {w, decay}, name + ".decayed") : w;
      ir::Value *mNew = e.op(
          ir::OpKind::Add,
          {*m, e.op(ir::OpKind::Mul,
                    {e.op(ir::OpKind::Sub, {g, *m}, name + ".exp_avg_delta"),
                     oneMinusBeta1},
                    name + ".exp_avg_step")},
          ir::updatedName(name + ".exp_avg"));
      ir::Value *vNew = e.op(
          ir::OpKind::Add,
          {e.op(ir::OpKind::Mul, {*v, beta2}, name + ".exp_avg_sq_decayed"),
           e.op(ir::OpKind::Mul,
                {e.op(ir::OpKind::Mul, {g, oneMinusBeta2},
                      name + ".grad_scaled"),
                 g},
                name + ".grad_sq")},
          ir::updatedName(name + ".exp_avg_sq"));
      ir::Value *denom = e.op(
          ir::OpKind::Add,
          {e.op(ir::OpKind::Div,
                {e.op(ir::OpKind::Sqrt, {vNew}, name + ".exp_avg_sq_sqrt"),
                 biasCorrection2Sqrt},
                name + ".denom_unbiased"),
           eps},
          name + ".denom");
      ir::Value *update = e.op(
          ir::OpKind::Mul,
          {e.op(ir::OpKind::Div, {mNew, denom}, name + ".ratio"), stepSize},
          name + ".update");
      wNew = e.op(ir::OpKind::Sub, {decayed, update}, ir::updatedName(name));
      newOutputs.insert(newOutputs.end(), {wNew, mNew, vNew});
    } else {
      ir::Value *d = g;
      if (weightDecay)
        d = e.op(ir::OpKind::Add,
                 {g, e.op(ir::OpKind::Mul, {w, weightDecay}, name + ".decay")},
                 name + ".grad_decayed");
      ir::Value *bufNew = nullptr;
      if (momentum) {
        auto buf = getOrAddState(graph, name + ".momentum_buffer", w->getType());
        if (!buf)
          return buf.takeError();
        bufNew = e.op(ir::OpKind::Add,
                      {e.op(ir::OpKind::Mul, {*buf, momentum},
                            name + ".momentum_decayed"),
                       d},
                      ir::updatedName(name + ".momentum_buffer"));
        d = bufNew;
      }
      wNew = e.op(ir::OpKind::Sub,
                  {w, e.op(ir::OpKind::Mul, {d, lr}, name + ".update")},
                  ir::updatedName(name));
      newOutputs.push_back(wNew);
      if (bufNew)
        newOutputs.push_back(bufNew);
    }
    if (auto err = e.takeError())
      return std::move(err);
    if (wNew->getName() != ir::updatedName(name))
      return makeError("cannot name the update of '" + name + "' '" +
                       ir::updatedName(name) + "': the name is taken");
  }
  for (ir::Value *output : newOutputs)
    graph.addOutput(output);
  if (stepNew)
    graph.addOutput(stepNew);
  graph.clearMemoryPlan();
  return true;
}

} // namespace remat::passes
