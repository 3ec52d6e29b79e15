//===- frontends/onnx/Einsum.cpp - Einsum as MatMul, Transpose, ... -------===//
//
// See Einsum.h. Every subscript is a label; an operand is a value and the
// label of each of its dims. Lowering keeps that pairing true after every
// node it emits.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Einsum.h"

#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

using llvm::ArrayRef;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace remat::onnx_frontend {

using namespace remat::ir;

namespace {

constexpr int kEllipsis = EinsumSpec::kEllipsisLabel;

/// A term of the equation: its letters, and where "..." stands among them
/// (-1 for nowhere).
struct Term {
  std::vector<int> letters;
  int ellipsisAt = -1;
};

/// \returns \p label as the equation spells it, for messages.
std::string labelName(int label) {
  if (label >= kEllipsis)
    return "dim " + std::to_string(label - kEllipsis) + " of '...'";
  return "'" + std::string(1, char(label)) + "'";
}

Expected<Term> parseTerm(StringRef text, const Twine &what) {
  Term term;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i).startswith("...")) {
      if (term.ellipsisAt >= 0)
        return makeError(what + " '" + text + "' has two '...'");
      term.ellipsisAt = int(term.letters.size());
      i += 3;
      continue;
    }
    char c = text[i];
    if (!std::isalpha(static_cast<unsigned char>(c)))
      return makeError(what + " '" + text + "' has '" + Twine(c) +
                       "'; subscripts are letters and '...'");
    term.letters.push_back(static_cast<unsigned char>(c));
    ++i;
  }
  return term;
}

/// The labels of \p term when its "..." stands for \p count dims, the last
/// \p count of the \p total the output's "..." has.
std::vector<int> labelsOf(const Term &term, int count, int total) {
  std::vector<int> labels;
  for (int i = 0; i <= int(term.letters.size()); ++i) {
    if (i == term.ellipsisAt)
      for (int j = 0; j < count; ++j)
        labels.push_back(kEllipsis + total - count + j);
    if (i < int(term.letters.size()))
      labels.push_back(term.letters[i]);
  }
  return labels;
}

} // namespace

Expected<EinsumSpec> parseEinsum(StringRef equation,
                                 ArrayRef<std::vector<int64_t>> dims) {
  std::string text;
  for (char c : equation)
    if (c != ' ')
      text.push_back(c);
  StringRef eq(text);
  StringRef lhs = eq, rhs;
  bool explicitOutput = false;
  size_t arrow = eq.find("->");
  if (arrow != StringRef::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    explicitOutput = true;
  }
  llvm::SmallVector<StringRef, 4> pieces;
  lhs.split(pieces, ',', -1, true);
  if (pieces.size() != dims.size())
    return makeError("the equation has " + Twine(pieces.size()) +
                     " operand terms for " + Twine(dims.size()) + " inputs");
  std::vector<Term> terms;
  std::vector<int> counts;
  int total = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    auto term = parseTerm(pieces[i], "term " + Twine(i));
    if (!term)
      return term.takeError();
    int rank = int(dims[i].size()), letters = int(term->letters.size());
    int count = 0;
    if (term->ellipsisAt >= 0 ? letters > rank : letters != rank)
      return makeError("term " + Twine(i) + " '" + pieces[i] + "' has " +
                       Twine(letters) + " subscripts for input " + Twine(i) +
                       " of rank " + Twine(rank));
    if (term->ellipsisAt >= 0)
      count = rank - letters;
    total = std::max(total, count);
    terms.push_back(std::move(*term));
    counts.push_back(count);
  }

  EinsumSpec spec;
  std::map<int, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> labels = labelsOf(terms[i], counts[i], total);
    std::set<int> seen;
    for (size_t k = 0; k < labels.size(); ++k) {
      int label = labels[k];
      if (!seen.insert(label).second)
        return makeError("subscript " + labelName(label) +
                         " is repeated within term " + Twine(i) + " '" +
                         pieces[i] +
                         "' (a trace or a diagonal); remat lowers Einsum "
                         "without one");
      ++uses[label];
      int64_t size = dims[i][k];
      auto [it, fresh] = spec.sizes.insert({label, size});
      if (fresh || it->second == size || size == 1)
        continue;
      if (it->second != 1)
        return makeError("subscript " + labelName(label) + " is " +
                         Twine(it->second) + " in one input and " +
                         Twine(size) + " in input " + Twine(i));
      it->second = size;
    }
    spec.inputs.push_back(std::move(labels));
  }

  if (explicitOutput) {
    auto term = parseTerm(rhs, "the output");
    if (!term)
      return term.takeError();
    if (term->ellipsisAt < 0 && total > 0)
      return makeError("the inputs' '...' stands for " + Twine(total) +
                       " dims and the output '" + rhs + "' has no '...'");
    spec.output = labelsOf(*term, total, total);
    std::set<int> seen;
    for (int label : spec.output) {
      if (!seen.insert(label).second)
        return makeError("subscript " + labelName(label) +
                         " is repeated in the output '" + rhs + "'");
      if (!spec.sizes.count(label))
        return makeError("the output's subscript " + labelName(label) +
                         " is in no input");
    }
  } else {
    // numpy: the "..." dims, then the letters used once, in character order.
    for (int j = 0; j < total; ++j)
      spec.output.push_back(kEllipsis + j);
    for (auto [label, count] : uses)
      if (label < kEllipsis && count == 1)
        spec.output.push_back(label);
  }
  return spec;
}

namespace {

/// An operand during lowering: a value and the label of each of its dims.
struct Operand {
  Value *value;
  std::vector<int> labels;
};

class Lowering {
public:
  Lowering(const EinsumSpec &spec, EinsumNodeFn node, EinsumIntsFn ints)
      : spec_(spec), node_(node), ints_(ints) {}

  Expected<Value *> run(ArrayRef<Value *> values) {
    std::vector<Operand> operands;
    for (size_t i = 0; i < values.size(); ++i) {
      Operand operand{values[i], spec_.inputs[i]};
      if (auto err = broadcast(operand))
        return std::move(err);
      operands.push_back(std::move(operand));
    }
    // Sum first what only one operand has and the output lacks.
    for (size_t i = 0; i < operands.size(); ++i) {
      std::set<int> elsewhere(spec_.output.begin(), spec_.output.end());
      for (size_t j = 0; j < operands.size(); ++j)
        if (j != i)
          elsewhere.insert(operands[j].labels.begin(),
                           operands[j].labels.end());
      if (auto err = sumAllBut(operands[i], elsewhere))
        return std::move(err);
    }
    Operand result = std::move(operands[0]);
    for (size_t j = 1; j < operands.size(); ++j) {
      std::set<int> needed(spec_.output.begin(), spec_.output.end());
      for (size_t k = j + 1; k < operands.size(); ++k)
        needed.insert(operands[k].labels.begin(), operands[k].labels.end());
      auto contracted = contract(result, operands[j], needed);
      if (!contracted)
        return contracted.takeError();
      result = std::move(*contracted);
    }
    if (auto err = transpose(result, spec_.output))
      return std::move(err);
    return result.value;
  }

private:
  std::vector<int64_t> sizesOf(ArrayRef<int> labels) const {
    std::vector<int64_t> dims;
    for (int label : labels)
      dims.push_back(spec_.sizes.at(label));
    return dims;
  }

  int64_t product(ArrayRef<int> labels) const {
    int64_t n = 1;
    for (int label : labels)
      n *= spec_.sizes.at(label);
    return n;
  }

  /// Expands the dims of size 1 whose subscript is larger elsewhere.
  llvm::Error broadcast(Operand &operand) {
    std::vector<int64_t> full = sizesOf(operand.labels);
    if (ArrayRef<int64_t>(full) == operand.value->getType().getDims())
      return llvm::Error::success();
    auto expanded = node_(OpKind::Expand, {operand.value, ints_(full)}, {});
    if (!expanded)
      return expanded.takeError();
    operand.value = *expanded;
    return llvm::Error::success();
  }

  /// Sums \p operand over its labels outside \p keep.
  llvm::Error sumAllBut(Operand &operand, const std::set<int> &keep) {
    std::vector<int64_t> axes;
    std::vector<int> kept;
    for (size_t k = 0; k < operand.labels.size(); ++k) {
      if (keep.count(operand.labels[k]))
        kept.push_back(operand.labels[k]);
      else
        axes.push_back(int64_t(k));
    }
    if (axes.empty())
      return llvm::Error::success();
    AttrList attrs;
    attrs.set("keepdims", int64_t(0));
    auto summed = node_(OpKind::ReduceSum, {operand.value, ints_(axes)},
                        std::move(attrs));
    if (!summed)
      return summed.takeError();
    operand = {*summed, std::move(kept)};
    return llvm::Error::success();
  }

  /// Permutes \p operand's dims to \p order (the same labels).
  llvm::Error transpose(Operand &operand, ArrayRef<int> order) {
    assert(order.size() == operand.labels.size() && "not a permutation");
    std::vector<int64_t> perm;
    bool identity = true;
    for (size_t i = 0; i < order.size(); ++i) {
      auto it = llvm::find(operand.labels, order[i]);
      assert(it != operand.labels.end() && "not a permutation");
      perm.push_back(it - operand.labels.begin());
      identity &= perm.back() == int64_t(i);
    }
    if (identity)
      return llvm::Error::success();
    AttrList attrs;
    attrs.set("perm", perm);
    auto moved = node_(OpKind::Transpose, {operand.value}, std::move(attrs));
    if (!moved)
      return moved.takeError();
    operand = {*moved, std::vector<int>(order.begin(), order.end())};
    return llvm::Error::success();
  }

  Expected<Value *> reshape(Value *value, ArrayRef<int64_t> dims) {
    if (value->getType().getDims() == dims)
      return value;
    return node_(OpKind::Reshape, {value, ints_(dims)}, {});
  }

  /// \p a times \p b summed over the labels they share that \p needed
  /// lacks: batch x M x K times batch x K x N as one MatMul.
  Expected<Operand> contract(Operand a, Operand b,
                             const std::set<int> &needed) {
    auto in = [](const Operand &o, int label) {
      return llvm::is_contained(o.labels, label);
    };
    std::set<int> keepA(needed.begin(), needed.end()),
        keepB(needed.begin(), needed.end());
    keepA.insert(b.labels.begin(), b.labels.end());
    keepB.insert(a.labels.begin(), a.labels.end());
    if (auto err = sumAllBut(a, keepA))
      return std::move(err);
    if (auto err = sumAllBut(b, keepB))
      return std::move(err);
    std::vector<int> batch, m, k, n;
    for (int label : a.labels) {
      if (!in(b, label))
        m.push_back(label);
      else if (needed.count(label))
        batch.push_back(label);
      else
        k.push_back(label);
    }
    for (int label : b.labels)
      if (!in(a, label))
        n.push_back(label);
    auto concat = [](std::initializer_list<const std::vector<int> *> parts) {
      std::vector<int> all;
      for (const std::vector<int> *part : parts)
        all.insert(all.end(), part->begin(), part->end());
      return all;
    };
    if (auto err = transpose(a, concat({&batch, &m, &k})))
      return std::move(err);
    if (auto err = transpose(b, concat({&batch, &k, &n})))
      return std::move(err);
    int64_t nb = product(batch), nm = product(m), nk = product(k),
            nn = product(n);
    auto shape = [&](int64_t rows, int64_t cols) {
      std::vector<int64_t> dims;
      if (!batch.empty())
        dims.push_back(nb);
      dims.push_back(rows);
      dims.push_back(cols);
      return dims;
    };
    auto lhs = reshape(a.value, shape(nm, nk));
    if (!lhs)
      return lhs.takeError();
    auto rhs = reshape(b.value, shape(nk, nn));
    if (!rhs)
      return rhs.takeError();
    auto product = node_(OpKind::MatMul, {*lhs, *rhs}, {});
    if (!product)
      return product.takeError();
    std::vector<int> labels = concat({&batch, &m, &n});
    auto result = reshape(*product, sizesOf(labels));
    if (!result)
      return result.takeError();
    return Operand{*result, std::move(labels)};
  }

  const EinsumSpec &spec_;
  EinsumNodeFn node_;
  EinsumIntsFn ints_;
};

} // namespace

Expected<Value *> emitEinsum(const EinsumSpec &spec, ArrayRef<Value *> operands,
                             EinsumNodeFn node, EinsumIntsFn ints) {
  assert(operands.size() == spec.inputs.size() && !operands.empty() &&
         "parseEinsum checks the operand count");
  return Lowering(spec, node, ints).run(operands);
}

} // namespace remat::onnx_frontend
