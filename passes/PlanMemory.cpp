//===- passes/PlanMemory.cpp - Offsets of every value in one arena
//---------===//
//
// Every node result gets an offset in one arena (DESIGN.md "Memory model").
// Values are first grouped into buffers: an elementwise result takes the
// buffer of an operand of its type that dies at its node, and a shape-only
// result (Reshape and the like) or ScatterElements' its data operand's when
// that dies there (in-place reuse, recorded in MemoryPlan::inPlaceOf so that
// Liveness counts it once). Buffers are then placed largest first, each at the
// lowest 256-byte-aligned offset where it overlaps no placed buffer whose live
// range overlaps its own. The placed buffers that conflict with a new one are
// found through a segment tree over schedule positions (those live at its first
// position) and a set ordered by first position (those that start inside its
// range), so the work is O((n + k) log n) for n values and k conflicts.
//
//===----------------------------------------------------------------------===//
#include "ir/Support.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <set>

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
  size_t n = liveness.getSchedule().size();
  std::vector<int64_t> delta(n + 1, 0);
  for (const Buffer &buffer : buffers) {
    int64_t bytes = int64_t(buffer.tailBytes);
    delta[buffer.start] += bytes;
    delta[buffer.end + 1] -= bytes;
  }
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < n; ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return uint64_t(peak);
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

  std::vector<unsigned> bySize(buffers.size());
  for (unsigned i = 0; i < buffers.size(); ++i)
    bySize[i] = i;
  std::stable_sort(bySize.begin(), bySize.end(), [&](unsigned a, unsigned b) {
    return buffers[a].bytes > buffers[b].bytes;
  });

  StabbingTree liveAt(liveness.getSchedule().size());
  std::set<std::pair<size_t, unsigned>> byStart;
  llvm::SmallVector<unsigned, 32> conflicts;
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  // The placed buffers by offset, and which are conflicts of the buffer
  // being placed (those whose stamp is the current one).
  std::vector<unsigned> byOffset;
  std::vector<unsigned> conflictStamp(buffers.size(), 0);
  unsigned stamp = 0;
  for (unsigned id : bySize) {
    Buffer &buffer = buffers[id];
    if (buffer.bytes == 0)
      continue; // zero-sized: offset 0, overlaps nothing
    conflicts.clear();
    liveAt.stab(buffer.start, conflicts);
    for (auto it = byStart.upper_bound({buffer.start, ~0u});
         it != byStart.end() && it->first <= buffer.end; ++it)
      conflicts.push_back(it->second);
    // First fit: walk the conflicts by offset until a gap holds the buffer
    // (conflicts of equal offset may come in any order: neither ends the
    // walk once the other has not). Sorting them costs k log k; walking
    // every placed buffer in offset order, skipping those that do not
    // conflict, costs at most the number placed and stops at the gap: the
    // cheaper of the two is taken, with the same offset.
    uint64_t offset = 0;
    size_t k = conflicts.size();
    if (byOffset.size() <= 2 * k * llvm::Log2_64_Ceil(k + 1)) {
      ++stamp;
      for (unsigned other : conflicts)
        conflictStamp[other] = stamp;
      for (unsigned other : byOffset) {
        if (conflictStamp[other] != stamp)
          continue;
        const Buffer &placed = buffers[other];
        if (placed.offset >= offset + buffer.bytes)
          break;
        offset = std::max(offset, placed.offset + placed.bytes);
      }
    } else {
      taken.clear();
      for (unsigned other : conflicts)
        taken.push_back({buffers[other].offset,
                         buffers[other].offset + buffers[other].bytes});
      llvm::sort(taken);
      for (const auto &[begin, end] : taken) {
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
    liveAt.insert(buffer.start, buffer.end, id);
    byStart.insert({buffer.start, id});
    byOffset.insert(llvm::upper_bound(byOffset, offset,
                                      [&](uint64_t at, unsigned other) {
                                        return at < buffers[other].offset;
                                      }),
                    id);
  }

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
