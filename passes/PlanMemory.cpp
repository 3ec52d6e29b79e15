//===- passes/PlanMemory.cpp - Offsets of every value in one arena
//---------===//
//
// Every node result gets an offset in one arena (DESIGN.md "Memory model").
// Values are first grouped into buffers: an elementwise result takes the
// buffer of an operand of its type that dies at its node, and a shape-only
// result (Reshape and the like) or ScatterElements' its data operand's when
// that dies there (in-place reuse, recorded in MemoryPlan::inPlaceOf so that
// Liveness counts it once). Buffers are then placed one by one, each at the
// lowest 256-byte-aligned offset where it overlaps no placed buffer whose live
// range overlaps its own (first fit), in up to three orders (Note [Placement
// orders]). The placed buffers that conflict with a new one are found through
// a segment tree over schedule positions (those live at its first position)
// and the placed buffers sorted by first position (those that start inside
// its range); its offset, by walking them in offset order.
//
// Note [Placement orders]
// Finding the smallest arena for buffers with fixed live ranges is NP-hard
// (dynamic storage allocation), and no one greedy order wins everywhere:
// largest first packs big activations well, but leaves holes that a buffer of
// long life then cannot use. So the buffers are placed largest first, then,
// while the arena is still above its lower bound (the bytes live together at
// their peak; and the rounded bytes at theirs, less the rounding of one buffer
// live there), by area (bytes x positions live) and by lifetime, and the
// smallest of the arenas is kept, the earlier order's on a tie. Graphs whose
// arena meets the bound pay for one order, and an order stops as soon as its
// arena reaches the smallest so far, as it cannot end below it. What the
// orders gain and cost is measured in docs/remat.md (the oracle's budget rows
// and the compile times).
//
//===----------------------------------------------------------------------===//
#include "ir/Support.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <utility>

namespace remat::passes {

namespace {

constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 62;

/// Values that share one placement.
struct Buffer {
  uint64_t bytes = 0;   // rounded up to the alignment
  size_t start = 0;     // first schedule position
  size_t end = 0;       // last schedule position
  const ir::Value *tail = nullptr; // the member defined last
  uint64_t tailBytes = 0;          // its bytes, not rounded
  uint64_t offset = 0;
};

/// Segment tree of buffer ids over schedule positions, for "which placed
/// buffers are live at position p".
class StabbingTree {
public:
  explicit StabbingTree(size_t positions)
      : size_(std::max<size_t>(positions, 1)), ids_(4 * size_) {}
  void insert(size_t lo, size_t hi, unsigned id) { insert(1, 0, size_ - 1, lo, hi, id); }
  void clear() {
    for (auto &ids : ids_)
      ids.clear();
  }
  void stab(size_t p, llvm::SmallVectorImpl<unsigned> &out) const {
    size_t node = 1, lo = 0, hi = size_ - 1;
    while (true) {
      out.append(ids_[node].begin(), ids_[node].end());
      if (lo == hi)
        return;
      size_t mid = (lo + hi) / 2;
      if (p <= mid) {
        node = 2 * node;
        hi = mid;
      } else {
        node = 2 * node + 1;
        lo = mid + 1;
      }
    }
  }

private:
  void insert(size_t node, size_t lo, size_t hi, size_t qlo, size_t qhi,
              unsigned id) {
    if (qhi < lo || hi < qlo)
      return;
    if (qlo <= lo && hi <= qhi) {
      ids_[node].push_back(id);
      return;
    }
    size_t mid = (lo + hi) / 2;
    insert(2 * node, lo, mid, qlo, qhi, id);
    insert(2 * node + 1, mid + 1, hi, qlo, qhi, id);
  }
  size_t size_;
  std::vector<llvm::SmallVector<unsigned, 2>> ids_;
};

/// Where the bytes of \p buffers live together peak, each sum at most
/// UINT64_MAX.
struct LivePeak {
  uint64_t exact = 0;   // the values' own bytes
  uint64_t rounded = 0; // the buffers' bytes, rounded to the alignment
  size_t roundedAt = 0; // the first position of the rounded peak
};

LivePeak findLivePeak(llvm::ArrayRef<Buffer> buffers, size_t positions) {
  // Each buffer is under 2^62 bytes, so no sum of them reaches 2^128.
  using Sum = unsigned __int128;
  std::vector<Sum> rounded(positions + 1, 0), exact(positions + 1, 0);
  for (const Buffer &buffer : buffers) {
    rounded[buffer.start] += buffer.bytes;
    rounded[buffer.end + 1] -= buffer.bytes;
    exact[buffer.start] += buffer.tailBytes;
    exact[buffer.end + 1] -= buffer.tailBytes;
  }
  Sum liveRounded = 0, liveExact = 0, peakRounded = 0, peakExact = 0;
  LivePeak peak;
  for (size_t i = 0; i < positions; ++i) {
    liveRounded += rounded[i];
    liveExact += exact[i];
    if (liveRounded > peakRounded) {
      peakRounded = liveRounded;
      peak.roundedAt = i;
    }
    peakExact = std::max(peakExact, liveExact);
  }
  peak.rounded = uint64_t(std::min<Sum>(peakRounded, UINT64_MAX));
  peak.exact = uint64_t(std::min<Sum>(peakExact, UINT64_MAX));
  return peak;
}

/// First-fit placement of one set of buffers, in as many orders as asked,
/// with the search structures kept from one order to the next.
class Placer {
public:
  Placer(std::vector<Buffer> &buffers, size_t positions)
      : buffers_(buffers), liveAt_(positions),
        conflictStamp_(buffers.size(), 0) {}

  /// Places the buffers in \p order, each at the lowest offset where it
  /// overlaps no placed buffer whose live range overlaps its own, and
  /// \returns the arena they need; or, as soon as that reaches \p limit,
  /// the arena so far (at least \p limit), the offsets then meaningless.
  llvm::Expected<uint64_t> place(llvm::ArrayRef<unsigned> order,
                                 uint64_t limit);

private:
  std::vector<Buffer> &buffers_;
  StabbingTree liveAt_;
  // The placed buffers by (first position, id) and by offset; which are
  // conflicts of the buffer being placed (those stamped conflictRound_).
  std::vector<std::pair<size_t, unsigned>> byStart_;
  std::vector<unsigned> byOffset_;
  std::vector<unsigned> conflictStamp_;
  unsigned conflictRound_ = 0;
  llvm::SmallVector<unsigned, 32> conflicts_;
  std::vector<std::pair<uint64_t, uint64_t>> taken_;
};

llvm::Expected<uint64_t> Placer::place(llvm::ArrayRef<unsigned> order,
                                       uint64_t limit) {
  std::vector<Buffer> &buffers = buffers_;
  liveAt_.clear();
  byStart_.clear();
  byOffset_.clear();
  uint64_t arena = 0;
  for (unsigned id : order) {
    Buffer &buffer = buffers[id];
    buffer.offset = 0;
    if (buffer.bytes == 0)
      continue; // zero-sized: offset 0, overlaps nothing
    // The placed buffers live at its first position, then those that start
    // inside its range.
    conflicts_.clear();
    liveAt_.stab(buffer.start, conflicts_);
    for (auto it = llvm::upper_bound(
             byStart_, std::pair<size_t, unsigned>(buffer.start, ~0u));
         it != byStart_.end() && it->first <= buffer.end; ++it)
      conflicts_.push_back(it->second);
    uint64_t offset = 0;
    size_t k = conflicts_.size();
    if (byOffset_.size() <= 2 * k * llvm::Log2_64_Ceil(k + 1)) {
      // Walk the conflicts by offset until a gap holds the buffer
      // (conflicts of equal offset may come in any order: neither ends the
      // walk once the other has not). Sorting them costs k log k; walking
      // every placed buffer in offset order, skipping those that do not
      // conflict, costs at most the number placed and stops at the gap: the
      // cheaper of the two is taken, with the same offset.
      ++conflictRound_;
      for (unsigned other : conflicts_)
        conflictStamp_[other] = conflictRound_;
      for (unsigned other : byOffset_) {
        if (conflictStamp_[other] != conflictRound_)
          continue;
        const Buffer &placed = buffers[other];
        if (placed.offset >= offset + buffer.bytes)
          break;
        offset = std::max(offset, placed.offset + placed.bytes);
      }
    } else {
      taken_.clear();
      for (unsigned other : conflicts_)
        taken_.push_back({buffers[other].offset,
                          buffers[other].offset + buffers[other].bytes});
      llvm::sort(taken_);
      for (const auto &[begin, end] : taken_) {
        if (begin >= offset + buffer.bytes)
          break;
        offset = std::max(offset, end);
      }
    }
    if (offset + buffer.bytes > kMaxArenaBytes)
      return makeError("cannot plan memory: the arena would exceed the 2^62 "
                       "bytes addressable (placing %" +
                       buffer.tail->getName() + " of " +
                       llvm::Twine(buffer.bytes) + " bytes at offset " +
                       llvm::Twine(offset) + ")");
    buffer.offset = offset;
    arena = std::max(arena, offset + buffer.tailBytes);
    if (arena >= limit)
      return arena;
    liveAt_.insert(buffer.start, buffer.end, id);
    std::pair<size_t, unsigned> start(buffer.start, id);
    byStart_.insert(llvm::upper_bound(byStart_, start), start);
    byOffset_.insert(llvm::upper_bound(byOffset_, offset,
                                       [&](uint64_t at, unsigned other) {
                                         return at < buffers[other].offset;
                                       }),
                     id);
  }
  return arena;
}

} // namespace

PlanMemoryPass::PlanMemoryPass() {
  declareOption("in-place", "let elementwise results reuse a dying operand",
                &inPlace_);
}

/// Groups \p liveness's values into buffers, recording in-place reuse in
/// \p plan.inPlaceOf.
static llvm::Error groupBuffers(const Liveness &liveness, bool inPlace,
                                ir::MemoryPlan &plan,
                                std::vector<Buffer> &buffers,
                                llvm::DenseMap<const ir::Value *, unsigned> &bufferOf) {
  llvm::ArrayRef<const ir::Value *> values = liveness.getValues();
  llvm::ArrayRef<LiveRange> ranges = liveness.getRanges();
  const uint64_t align = ir::MemoryPlan::kAlignment;
  buffers.reserve(values.size());
  bufferOf.reserve(values.size());
  for (size_t v = 0; v < values.size(); ++v) {
    const ir::Value *value = values[v];
    uint64_t bytes = liveness.getValueBytes()[v];
    if (bytes > kMaxArenaBytes)
      return makeError("cannot plan memory: %" + value->getName() + " (" +
                       value->getType().str() + ") needs " +
                       llvm::Twine(bytes) +
                       " bytes, more than the 2^62 bytes addressable");
    LiveRange range = ranges[v];
    const ir::Node *node = value->getDefiningNode();
    // A shape-only op (Reshape, Squeeze, Unsqueeze, Identity) may take its
    // data operand's buffer as it is: the same bytes, so the kernel, seeing
    // one address, copies nothing. ScatterElements may take its data
    // operand's (of its type): its kernels copy data to the result, nothing
    // when they are one, then write the updates (never the updates
    // operand's, which they read to the end).
    bool shapeOnly = ir::hasTrait(node->getOp(), ir::kShapeOnly);
    bool dataOnly = shapeOnly || node->getOp() == ir::OpKind::ScatterElements;
    if (inPlace && bytes != 0 && node->getNumResults() == 1 &&
        (ir::hasTrait(node->getOp(), ir::kInPlace) || dataOnly)) {
      bool reused = false;
      auto operands = node->getOperands();
      if (dataOnly)
        operands = operands.take_front(1);
      for (const ir::Value *operand : operands) {
        bool sameBytes = shapeOnly ? operand->getType().getDType() ==
                                             value->getType().getDType() &&
                                         Liveness::getBytes(operand) == bytes
                                   : operand->getType() == value->getType();
        if (operand->isGraphInput() || operand->isGraphOutput() || !sameBytes)
          continue;
        auto it = bufferOf.find(operand);
        if (it == bufferOf.end())
          continue;
        Buffer &buffer = buffers[it->second];
        if (buffer.tail != operand || buffer.end != range.def)
          continue;
        buffer.end = range.lastUse;
        buffer.tail = value;
        buffer.tailBytes = bytes;
        bufferOf[value] = it->second;
        plan.inPlaceOf[value] = operand;
        reused = true;
        break;
      }
      if (reused)
        continue;
    }
    Buffer buffer;
    buffer.bytes = (bytes + align - 1) / align * align;
    buffer.start = range.def;
    buffer.end = range.lastUse;
    buffer.tail = value;
    buffer.tailBytes = bytes;
    bufferOf[value] = buffers.size();
    buffers.push_back(buffer);
  }
  return llvm::Error::success();
}

llvm::Expected<uint64_t> lowerBoundArenaBytes(const ir::Graph &graph) {
  Liveness liveness(graph, Liveness::RangesOnly());
  std::vector<Buffer> buffers;
  llvm::DenseMap<const ir::Value *, unsigned> bufferOf;
  ir::MemoryPlan plan;
  if (auto err = groupBuffers(liveness, /*inPlace=*/true, plan, buffers,
                              bufferOf))
    return std::move(err);
  // Liveness(graph, plan).getPeakBytes() without a second analysis: each
  // buffer counts its bytes once over its members' combined range.
  uint64_t peak = findLivePeak(buffers, liveness.getSchedule().size()).exact;
  if (peak > kMaxArenaBytes)
    return makeError("cannot plan memory: the values live at once need more "
                     "than the 2^62 bytes addressable");
  return peak;
}

/// \returns bytes no placement of \p buffers fits below: their own bytes
/// live together at the peak; and where their rounded bytes first peak,
/// those stacked, less the rounding of the one on top.
static uint64_t arenaLowerBound(llvm::ArrayRef<Buffer> buffers,
                                size_t positions) {
  LivePeak peak = findLivePeak(buffers, positions);
  uint64_t padding = 0;
  for (const Buffer &buffer : buffers)
    if (buffer.start <= peak.roundedAt && peak.roundedAt <= buffer.end)
      padding = std::max(padding, buffer.bytes - buffer.tailBytes);
  return std::max(peak.exact, peak.rounded - padding);
}

llvm::Expected<ir::MemoryPlan> planMemory(const ir::Graph &graph,
                                          bool inPlace) {
  Liveness liveness(graph, Liveness::RangesOnly());
  llvm::ArrayRef<const ir::Value *> values = liveness.getValues();
  std::vector<Buffer> buffers;
  llvm::DenseMap<const ir::Value *, unsigned> bufferOf;
  ir::MemoryPlan plan;
  if (auto err = groupBuffers(liveness, inPlace, plan, buffers, bufferOf))
    return std::move(err);
  size_t positions = liveness.getSchedule().size();

  // Note [Placement orders]: largest first, then by area and by lifetime
  // while the arena is above its lower bound; the smallest arena is kept,
  // the earliest order's on a tie.
  auto lifetime = [&](unsigned id) {
    return uint64_t(buffers[id].end - buffers[id].start + 1);
  };
  auto bySize = [&](unsigned a, unsigned b) {
    return buffers[a].bytes > buffers[b].bytes;
  };
  auto byArea = [&](unsigned a, unsigned b) {
    // Under 2^62 bytes and 2^64 positions: exact in 128 bits.
    using Area = unsigned __int128;
    Area areaA = Area(buffers[a].bytes) * lifetime(a);
    Area areaB = Area(buffers[b].bytes) * lifetime(b);
    return areaA != areaB ? areaA > areaB : bySize(a, b);
  };
  auto byLifetime = [&](unsigned a, unsigned b) {
    return lifetime(a) != lifetime(b) ? lifetime(a) > lifetime(b)
                                      : bySize(a, b);
  };
  uint64_t bound = arenaLowerBound(buffers, positions);
  Placer placer(buffers, positions);
  std::vector<unsigned> order(buffers.size());
  std::vector<uint64_t> bestOffsets;
  uint64_t bestArena = UINT64_MAX;
  enum class Order { Size, Area, Lifetime };
  for (Order kind : {Order::Size, Order::Area, Order::Lifetime}) {
    for (unsigned i = 0; i < buffers.size(); ++i)
      order[i] = i;
    switch (kind) {
    case Order::Size:
      std::stable_sort(order.begin(), order.end(), bySize);
      break;
    case Order::Area:
      std::stable_sort(order.begin(), order.end(), byArea);
      break;
    case Order::Lifetime:
      std::stable_sort(order.begin(), order.end(), byLifetime);
      break;
    }
    auto arena = placer.place(order, bestArena);
    if (!arena) {
      // Past 2^62 bytes: the first order's error is the one reported.
      if (kind == Order::Size)
        return arena.takeError();
      llvm::consumeError(arena.takeError());
      continue;
    }
    if (*arena < bestArena) {
      bestArena = *arena;
      bestOffsets.resize(buffers.size());
      for (size_t i = 0; i < buffers.size(); ++i)
        bestOffsets[i] = buffers[i].offset;
    }
    if (bestArena <= bound)
      break;
  }
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].offset = bestOffsets[i];

  plan.offsets.reserve(values.size());
  for (size_t v = 0; v < values.size(); ++v) {
    uint64_t offset = buffers[bufferOf[values[v]]].offset;
    plan.offsets[values[v]] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes,
                               offset + liveness.getValueBytes()[v]);
  }
  // Storage shared in place counts once, so the arena holds this peak.
  plan.peakLiveBytes = Liveness(graph, plan).getPeakBytes();
  assert(plan.arenaBytes >= plan.peakLiveBytes && "overlapping placements");
  return plan;
}

llvm::Expected<bool> PlanMemoryPass::run(ir::Graph &graph) {
  // Updates written over their inputs (ir/UpdateName.h) must come after
  // every other reader of the input, whatever reordered the schedule.
  orderUpdatesAfterReads(graph);
  if (auto err = checkUpdateOrder(graph))
    return std::move(err);
  auto plan = planMemory(graph, inPlace_);
  if (!plan)
    return plan.takeError();
  graph.setMemoryPlan(std::move(*plan));
  return true;
}

} // namespace remat::passes
