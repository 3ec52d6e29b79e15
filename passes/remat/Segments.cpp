//===- passes/remat/Segments.cpp - Cut points and repeated blocks ---------===//
#include "passes/remat/Segments.h"

#include "ir/Hash.h"
#include "ir/Printer.h"
#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

namespace remat::passes::recompute {

namespace {

/// The activations read by a later forward node, walked over the forward
/// schedule. A value opens at its node and closes at its last forward use.
class CrossingScan {
public:
  explicit CrossingScan(const StashInfo &stash) : stash_(stash) {
    size_t n = stash.forwardNodes.size();
    closeAt_.resize(n);
    for (size_t p = 0; p < n; ++p)
      for (ir::Value *result : stash.forwardNodes[p]->getResults()) {
        if (!stash.isActivation.lookup(result))
          continue;
        size_t last = p;
        for (const ir::Use &use : result->getUses()) {
          auto it = stash.forwardPosition.find(use.user);
          if (it != stash.forwardPosition.end())
            last = std::max<size_t>(last, it->second);
        }
        if (last > p)
          closeAt_[last].push_back(result);
        opensAt_[result] = last > p;
      }
  }

  /// Calls \p visit(p, open) after forward position p with the set of open
  /// activations (ordered by id, so deterministic).
  template <typename Fn> void run(Fn visit) {
    std::set<std::pair<unsigned, ir::Value *>> open;
    llvm::DenseMap<const ir::Value *, unsigned> ids;
    for (size_t p = 0; p < stash_.forwardNodes.size(); ++p) {
      for (ir::Value *closing : closeAt_[p])
        open.erase({ids[closing], closing});
      for (ir::Value *result : stash_.forwardNodes[p]->getResults()) {
        if (!opensAt_.lookup(result))
          continue;
        unsigned id = ids.size();
        ids[result] = id;
        open.insert({id, result});
      }
      visit(p, open);
    }
  }

private:
  const StashInfo &stash_;
  std::vector<std::vector<ir::Value *>> closeAt_;
  llvm::DenseMap<const ir::Value *, bool> opensAt_;
};

/// The structural signature of \p segment (Note [Repeated blocks]): each
/// node's hash covers its op, attributes (not a Dropout's seed), result
/// types and its operands' hashes, so it describes the subgraph that
/// computes it; the signature is the sorted list of those hashes, which does
/// not depend on the order the schedule happens to give the nodes. Nodes off
/// the activation stream (masks computed from inputs alone, values computed
/// from weights alone) are left out: where they are scheduled says nothing
/// about the layer.
std::string signatureOf(const Segment &segment, const StashInfo &stash) {
  llvm::DenseMap<const ir::Value *, uint64_t> local;
  std::vector<uint64_t> hashes;
  for (const ir::Node *node : segment.nodes) {
    if (!llvm::any_of(node->getResults(), [&](const ir::Value *result) {
          return stash.isActivation.lookup(result);
        }))
      continue;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << node->getOpSpelling() << '(';
    for (const ir::Value *operand : node->getOperands()) {
      if (auto it = local.find(operand); it != local.end())
        os << it->second;
      else if (operand == segment.input)
        os << "in";
      else if (operand->isGraphInput())
        os << (operand->isWeight() ? "w:" : "i:")
           << (operand->isWeight() ? operand->getType().str()
                                   : operand->getName().str());
      else if (!stash.isActivation.lookup(operand))
        os << "s:" << operand->getType().str();
      else
        os << "x:" << operand->getName();
      os << ',';
    }
    os << "){";
    for (const auto &[name, value] : node->getAttrs().entries()) {
      if (name == "seed")
        continue;
      os << name << '=';
      ir::printAttrValue(value, os);
      os << ',';
    }
    os << "}:";
    for (const ir::Value *result : node->getResults())
      os << result->getType().str() << ',';
    os.flush();
    uint64_t hash = ir::fnv1a(text);
    hashes.push_back(hash);
    for (unsigned r = 0; r < node->getNumResults(); ++r)
      local[node->getResult(r)] = ir::splitMix64(hash + r);
  }
  llvm::sort(hashes);
  std::string signature;
  for (uint64_t hash : hashes)
    signature += std::to_string(hash) + ";";
  return signature;
}

/// Finds the layer block: the period and start whose repetitions cover the
/// most segments (Note [Repeated blocks]).
void findLayers(SegmentChain &chain) {
  size_t n = chain.segments.size();
  size_t bestCoverage = 0, bestPeriod = 0, bestStart = 0, bestRepeats = 0;
  for (size_t period = 1; period * 2 <= n; ++period) {
    size_t i = 0;
    while (i + period < n) {
      if (chain.segments[i].kind != chain.segments[i + period].kind) {
        ++i;
        continue;
      }
      size_t begin = i;
      while (i + period < n &&
             chain.segments[i].kind == chain.segments[i + period].kind)
        ++i;
      size_t region = (i - begin) + period; // segments [begin, i + period)
      size_t repeats = region / period;
      size_t start = begin + region % period;
      size_t coverage = repeats * period;
      bool better = coverage > bestCoverage ||
                    (coverage == bestCoverage && period == bestPeriod &&
                     start > bestStart);
      if (repeats >= 2 && better) {
        bestCoverage = coverage;
        bestPeriod = period;
        bestStart = start;
        bestRepeats = repeats;
      }
    }
  }
  if (bestRepeats < 2)
    return;
  chain.period = unsigned(bestPeriod);
  chain.firstLayerSegment = unsigned(bestStart);
  chain.numLayers = unsigned(bestRepeats);
  for (size_t s = bestStart; s < bestStart + bestCoverage; ++s)
    chain.segments[s].layer = int((s - bestStart) / bestPeriod);
}

} // namespace

llvm::Expected<SegmentChain>
findSegments(const ir::Graph &graph, const StashInfo &stash,
             llvm::ArrayRef<std::string> boundaries) {
  CrossingScan scan(stash);
  // Cuts: (position, value), the first position where the value is the only
  // open activation.
  std::vector<std::pair<size_t, ir::Value *>> cuts;
  llvm::DenseMap<const ir::Value *, size_t> cutPosition;
  scan.run([&](size_t p, const auto &open) {
    if (open.size() != 1)
      return;
    ir::Value *value = open.begin()->second;
    if (cutPosition.count(value))
      return;
    cutPosition[value] = p;
    cuts.push_back({p, value});
  });

  if (!boundaries.empty()) {
    std::vector<std::pair<size_t, ir::Value *>> named;
    for (const std::string &name : boundaries) {
      ir::Value *value = graph.lookup(name);
      if (!value)
        return makeError("boundaries: no value named '" + name + "'");
      ir::Node *def = value->getDefiningNode();
      if (!def || !stash.forwardPosition.count(def) ||
          !stash.isActivation.lookup(value))
        return makeError("boundaries: '" + name +
                         "' is not a forward activation (a forward value "
                         "computed from the inputs and a weight)");
      auto it = cutPosition.find(value);
      if (it == cutPosition.end()) {
        // Say what crosses it: the activations open right after its node.
        size_t at = stash.forwardPosition.lookup(def);
        std::string crossing;
        unsigned listed = 0;
        scan.run([&](size_t p, const auto &open) {
          if (p != at)
            return;
          for (const auto &[id, other] : open) {
            if (other == value || listed == 3)
              continue;
            crossing += (listed++ ? ", %" : "%") + other->getName().str();
          }
        });
        return makeError("boundaries: '" + name +
                         "' is not a cut of the forward graph: other "
                         "activations reach past it (" +
                         (crossing.empty() ? std::string("none after it is "
                                                         "computed")
                                           : crossing) +
                         ")");
      }
      if (llvm::any_of(named, [&](const auto &c) { return c.second == value; }))
        return makeError("boundaries: '" + name + "' is named twice");
      named.push_back({it->second, value});
    }
    llvm::sort(named, [](const auto &a, const auto &b) { return a.first < b.first; });
    cuts = std::move(named);
  }

  SegmentChain chain;
  size_t begin = 0;
  ir::Value *input = nullptr;
  auto close = [&](size_t end, ir::Value *output) {
    Segment segment;
    segment.input = input;
    segment.output = output;
    for (size_t p = begin; p < end; ++p) {
      ir::Node *node = stash.forwardNodes[p];
      segment.nodes.push_back(node);
      chain.segmentOf[node] = chain.segments.size();
      for (ir::Value *result : node->getResults())
        if (stash.isStashed(result)) {
          segment.stashed.push_back(result);
          segment.stashedBytes += uint64_t(result->getType().getByteSize());
        }
    }
    chain.segments.push_back(std::move(segment));
    begin = end;
    input = output;
  };
  for (const auto &[position, value] : cuts)
    close(position + 1, value);
  if (begin < stash.forwardNodes.size() || chain.segments.empty())
    close(stash.forwardNodes.size(), nullptr);

  llvm::StringMap<unsigned> kinds;
  for (Segment &segment : chain.segments) {
    auto inserted = kinds.try_emplace(signatureOf(segment, stash), kinds.size());
    segment.kind = inserted.first->second;
  }
  findLayers(chain);
  return chain;
}

} // namespace remat::passes::recompute
