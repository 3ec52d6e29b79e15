//===- passes/remat/Segments.cpp - Cut points and repeated blocks ---------===//
#include "passes/remat/Segments.h"

#include "ir/Hash.h"
#include "ir/Printer.h"
#include "ir/Support.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
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

/// The best repeated run of segments [lo, hi): the period and start whose
/// repetitions cover the most segments (Note [Repeated blocks]).
LayerStack findRun(const SegmentChain &chain, size_t lo, size_t hi) {
  size_t n = hi - lo;
  size_t bestCoverage = 0, bestPeriod = 0, bestStart = 0, bestRepeats = 0;
  auto kind = [&](size_t i) { return chain.segments[lo + i].kind; };
  for (size_t period = 1; period * 2 <= n; ++period) {
    size_t i = 0;
    while (i + period < n) {
      if (kind(i) != kind(i + period)) {
        ++i;
        continue;
      }
      size_t begin = i;
      while (i + period < n && kind(i) == kind(i + period))
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
    return {};
  return {unsigned(bestPeriod), unsigned(lo + bestStart), unsigned(bestRepeats)};
}

size_t nodesIn(const SegmentChain &chain, const LayerStack &stack) {
  size_t nodes = 0;
  for (unsigned s = stack.firstSegment;
       s < stack.firstSegment + stack.period * stack.numLayers; ++s)
    nodes += chain.segments[s].nodes.size();
  return nodes;
}

/// Finds the layer stacks: the largest run first, then the largest runs
/// before and after it (Note [Repeated blocks]).
void findLayers(SegmentChain &chain) {
  LayerStack first = findRun(chain, 0, chain.segments.size());
  if (!first.numLayers)
    return;
  chain.period = first.period;
  chain.firstLayerSegment = first.firstSegment;
  chain.numLayers = first.numLayers;
  size_t minNodes = (nodesIn(chain, first) + 3) / 4;
  std::vector<std::pair<size_t, size_t>> ranges = {
      {0, first.firstSegment},
      {first.firstSegment + first.period * first.numLayers,
       chain.segments.size()}};
  chain.stacks.push_back(first);
  while (!ranges.empty()) {
    auto [lo, hi] = ranges.back();
    ranges.pop_back();
    LayerStack stack = findRun(chain, lo, hi);
    if (!stack.numLayers || nodesIn(chain, stack) < minNodes)
      continue;
    chain.stacks.push_back(stack);
    ranges.push_back({lo, stack.firstSegment});
    ranges.push_back({stack.firstSegment + stack.period * stack.numLayers, hi});
  }
  llvm::sort(chain.stacks, [](const LayerStack &a, const LayerStack &b) {
    return a.firstSegment < b.firstSegment;
  });
  for (const LayerStack &stack : chain.stacks)
    for (unsigned s = stack.firstSegment;
         s < stack.firstSegment + stack.period * stack.numLayers; ++s)
      chain.segments[s].layer = int((s - stack.firstSegment) / stack.period);
}

using CutList = std::vector<std::pair<size_t, ir::Value *>>;
using ValueSet = llvm::DenseSet<const ir::Value *>;

/// Cuts: (position, value), the first position where the value is the only
/// open activation that is not a side input.
CutList findCuts(CrossingScan &scan, const ValueSet &side) {
  CutList cuts;
  llvm::DenseSet<const ir::Value *> seen;
  scan.run([&](size_t p, const auto &open) {
    ir::Value *only = nullptr;
    for (const auto &[id, value] : open) {
      if (side.count(value))
        continue;
      if (only)
        return;
      only = value;
    }
    if (only && seen.insert(only).second)
      cuts.push_back({p, only});
  });
  return cuts;
}

/// The chain cut at \p cuts, with its kinds and layer stacks.
SegmentChain buildChain(const StashInfo &stash, const CutList &cuts,
                        const ValueSet &side) {
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
        if (stash.isStashed(result) && !side.count(result)) {
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
  for (ir::Node *node : stash.forwardNodes)
    for (ir::Value *result : node->getResults())
      if (side.count(result))
        chain.sideInputs.push_back(result);
  return chain;
}

/// Nodes covered by the chain's layer stacks.
size_t coverage(const SegmentChain &chain) {
  size_t nodes = 0;
  for (const LayerStack &stack : chain.stacks)
    nodes += nodesIn(chain, stack);
  return nodes;
}

} // namespace

llvm::Expected<SegmentChain>
findSegments(const ir::Graph &graph, const StashInfo &stash,
             llvm::ArrayRef<std::string> boundaries) {
  CrossingScan scan(stash);
  CutList cuts = findCuts(scan, {});
  llvm::DenseMap<const ir::Value *, size_t> cutPosition;
  for (const auto &[position, value] : cuts)
    cutPosition[value] = position;

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
    return buildChain(stash, named, {});
  }

  // Side inputs (Note [Side inputs]): a few rounds, each trying the
  // longest-lived activations that keep a cut from existing.
  constexpr unsigned kRounds = 4, kCandidates = 8;
  ValueSet side;
  SegmentChain chain = buildChain(stash, cuts, side);
  size_t best = coverage(chain);
  for (unsigned round = 0; round < kRounds; ++round) {
    // Values open, with exactly one other non-side value, after some node.
    std::vector<std::pair<size_t, ir::Value *>> candidates; // (lifetime, v)
    ValueSet listed;
    scan.run([&](size_t, const auto &open) {
      ir::Value *pair[2] = {nullptr, nullptr};
      unsigned count = 0;
      for (const auto &[id, value] : open) {
        if (side.count(value))
          continue;
        if (count == 2)
          return;
        pair[count++] = value;
      }
      if (count != 2)
        return;
      for (ir::Value *value : pair)
        if (listed.insert(value).second)
          candidates.push_back({0, value});
    });
    for (auto &[lifetime, value] : candidates) {
      size_t def = stash.forwardPosition.lookup(value->getDefiningNode());
      size_t last = def;
      for (const ir::Use &use : value->getUses())
        if (auto it = stash.forwardPosition.find(use.user);
            it != stash.forwardPosition.end())
          last = std::max<size_t>(last, it->second);
      lifetime = last - def;
    }
    // Longest first; equal lifetimes in the order the scan met them.
    llvm::stable_sort(candidates, [](const auto &a, const auto &b) {
      return a.first > b.first;
    });
    if (candidates.size() > kCandidates)
      candidates.resize(kCandidates);
    std::optional<std::pair<SegmentChain, ir::Value *>> better;
    for (const auto &[lifetime, value] : candidates) {
      ValueSet trial = side;
      trial.insert(value);
      SegmentChain candidate = buildChain(stash, findCuts(scan, trial), trial);
      size_t covered = coverage(candidate);
      if (covered > best) {
        best = covered;
        better.emplace(std::move(candidate), value);
      }
    }
    if (!better)
      break;
    side.insert(better->second);
    chain = std::move(better->first);
  }
  return chain;
}

} // namespace remat::passes::recompute
