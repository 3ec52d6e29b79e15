//===- passes/remat/Segments.h - Cut points and repeated blocks -*- C++ -*-===//
//
// Step 2 of remat (DESIGN.md "Rematerialization"): the forward graph is cut
// into a chain of segments at its cut points, values through which every
// activation path to the loss passes. A value is a cut when, right after it
// is computed (or after the last other activation it overlaps dies), it is
// the only activation a later forward node still reads. Activations are the
// forward values that depend on a trainable weight; masks and positions
// computed from inputs alone, and constants, are read across cuts freely.
//
// Note [Repeated blocks]
// ~~~~~~~~~~~~~~~~~~~~~~
// Each segment gets a structural signature: its ops, attributes (except a
// Dropout's seed, which only keys its random stream), result types, and how
// each operand is reached (a node of the segment, the input boundary, a
// weight of some type, a graph input by name, a value from elsewhere by
// type). Segments with equal signatures are one kind. The layer stack is the
// longest run of the kind sequence that repeats with some period P >= 1 at
// least twice; among runs of equal coverage the shorter period and then the
// later start win, so the block ends where the model's layers end. "Layer
// j" is then the j-th repetition, found with no model-specific code. The
// segments before and after that block are searched the same way for further
// stacks (an encoder-decoder has two), kept when they cover at least a
// quarter of the nodes the first one does.
//
// Note [Side inputs]
// ~~~~~~~~~~~~~~~~~~
// Some activations are read by every layer of a stack: the encoder output,
// which each decoder layer's cross-attention reads, or a position bias that
// the first layer computes from a weight and every later layer adds. Such a
// value is open across every layer boundary, so the stack has no cuts. A
// value is taken as a side input when leaving it out of the open sets lets
// the repeated blocks cover more nodes: among the longest-lived activations
// that keep a cut from existing, the one that gains the most is taken, and
// again, until none gains. Side inputs are held from forward to backward
// (never dropped), and recompute reads them like weights.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_SEGMENTS_H
#define REMAT_PASSES_REMAT_SEGMENTS_H

#include "passes/remat/Stash.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace remat::passes::recompute {

/// A run of forward nodes between two consecutive cuts.
struct Segment {
  /// Forward nodes in schedule order.
  std::vector<ir::Node *> nodes;
  /// The cut this segment starts from (null for the first segment, which
  /// starts from the graph inputs).
  ir::Value *input = nullptr;
  /// The cut that ends it (null for the last segment, which ends at the
  /// loss).
  ir::Value *output = nullptr;
  /// Structural kind (Note [Repeated blocks]); equal kinds, equal structure.
  unsigned kind = 0;
  /// The repetition of the layer block this segment belongs to, or -1.
  int layer = -1;
  /// Stashed values defined in this segment, in schedule order.
  std::vector<ir::Value *> stashed;
  uint64_t stashedBytes = 0;
};

/// A run of repeated layer blocks (Note [Repeated blocks]).
struct LayerStack {
  /// Segments per layer block.
  unsigned period = 0;
  /// Index of the first segment of layer 0.
  unsigned firstSegment = 0;
  unsigned numLayers = 0;
};

/// The chain of segments of a training step's forward graph.
struct SegmentChain {
  std::vector<Segment> segments;
  /// The largest layer stack: segments per layer block (0 when nothing
  /// repeats).
  unsigned period = 0;
  /// Index of the first segment of layer 0.
  unsigned firstLayerSegment = 0;
  unsigned numLayers = 0;
  /// Every layer stack, in segment order; the largest is the one above.
  std::vector<LayerStack> stacks;
  /// Activations held across segments (Note [Side inputs]), in schedule
  /// order. They are in no segment's stashed list.
  std::vector<ir::Value *> sideInputs;
  /// The segment that holds each forward node.
  llvm::DenseMap<const ir::Node *, unsigned> segmentOf;
};

/// Cuts \p stash's forward graph at its cut points, or at \p boundaries (value
/// names, in any order) when given. A named value that does not exist, is
/// not a forward activation, or is not a cut is an error naming it and, for
/// a non-cut, the activations that cross it.
llvm::Expected<SegmentChain>
findSegments(const ir::Graph &graph, const StashInfo &stash,
             llvm::ArrayRef<std::string> boundaries);

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_SEGMENTS_H
