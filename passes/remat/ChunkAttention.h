//===- passes/remat/ChunkAttention.h - Attention cores by batch -*- C++ -*-===//
//
// remat's chunk-attention option (DESIGN.md "Rematerialization"): the core
// of each attention layer, forward and backward, computed in chunks of the
// leading (batch) dimension, so that no [batch, heads, seq, seq] tensor
// exists whole.
//
// Note [Chunked attention core]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// What is recognised, by structure (never by names): in forward, a Softmax
// whose operand is reached from a batched MatMul(Q, K^T) through elementwise
// Mul/Div/Add/Sub nodes (the scale, the mask), whose result goes, through an
// optional Dropout, to operand 0 of a batched MatMul(P, V). Batched: every
// operand of the two MatMuls has the rank R of the scores (R >= 3) and the
// same leading dim b >= 2. The "big" values are the results of the chain
// but the context MatMul(P, V): the scores and everything after them, the
// Dropout's mask included. The backward part is every backward node that
// reads a big value or a big-shaped result of another backward part node
// (autodiff's dP, dScores, the transposed P, ...); its results read
// elsewhere are the core's backward outputs (dV, dQ, dK^T). Every node of
// the core must compute each batch slice from the same slice of its
// operands alone: a MatMul of two rank-R operands, a remat.PermutedMatMul
// as below, a Transpose keeping axis 0 first, a Softmax or
// remat.SoftmaxGrad over another axis, a Dropout, remat.DropoutGrad or
// elementwise Add/Sub/Mul/Div/Neg whose
// operands are either batch-led (rank R, leading dim b) or broadcast along
// the batch (lower rank or leading dim 1). Big values must be read by the
// core alone.
//
// remat-run's CPU pipeline runs fold-transpose before remat, which makes
// the cores' MatMuls, forward and backward, remat.PermutedMatMul
// (Transpose(MatMul(Transpose(A, perm_a), Transpose(B, perm_b)), perm_y)):
// Q and K read as [batch, seq, heads, dim], the context written so. Any of
// the MatMuls above may be one. Its result's dim 0 is its product's dim
// p = perm_y[0]; when p is a batch dim of the product (p < R - 2), each
// entry of the result's dim 0 is one product, reading entry i of A's dim
// perm_a[p] and of B's dim perm_b[p] alone. That is the dim a chunk slices
// of an operand from outside the core (Q stored [seq, batch, dim] is cut on
// its dim 1), and a value of the core, cut on its dim 0, must be read there
// (perm_x[p] = 0). A perm_y that takes dim 0 from a matrix dim ("permutes
// the batch dim"), or a core value read with its batch elsewhere, leaves
// the core whole, and --explain says which. The chunk's clone keeps the
// perms.
//
// The rewrite, for chunks of rows = ceil(b / K) batch entries:
// - forward, before the first reader of the context: per chunk, the chain
//   on the chunk's slice of each batch-led operand (Slice on axis 0; a
//   remat.PermutedMatMul's operand on its batch dim, as above), then the
//   context is the Concat of the chunks' contexts;
// - backward, before the first reader of a backward output (every operand
//   from outside the core is defined by then, or the core is left whole):
//   per chunk, the chain again (the Slices of Q, K^T, V, the mask, which
//   forward holds), without the context MatMul unless backward reads it,
//   then the backward part on that chunk; each backward output is the
//   Concat of its chunks.
// Held from forward to backward: Q, K^T, V and the mask, not the scores
// nor P; alive at once: one chunk's big values. Paid: the chain's forward
// once more (two batched MatMuls and a few passes over the scores).
//
// Bits (CPU backend, f32 on remat's packed kernel; Note [Packed sgemm]):
// - Batched MatMul with both operands batched is one product per batch
//   entry; an element's bits depend on K alone, not on the tiling nor the
//   number of products (Note [OpenBLAS threads] in runtime/cpu/Linalg.cpp):
//   each chunk's product of a batch entry is the whole one's. So for
//   remat.PermutedMatMul (selectPermutedMatMul): one GEMM call per batch
//   index with the whole op's M, N, K and transposes (the perms), only
//   the leading dims and offsets follow the chunk's operands, and the packed
//   kernel packs any layout with the same bits; a result stored
//   column-major is C^T = op(B)^T op(A)^T, chosen by perm_y alone.
// - Softmax and SoftmaxGrad work per row of the last axes, elementwise ops
//   per element, Transpose and Slice/Concat move bits. Same bits.
// - Dropout draws element i's mask from (seed, i) (runtime/DropoutMask.h):
//   u_i = finalize(splitMix64(seed) + (i + 1) gamma). A chunk that starts at
//   element o of the whole tensor needs the stream shifted by o; its
//   Dropout gets the seed s' with splitMix64(s') = splitMix64(seed) +
//   o gamma, that is s' = finalize^-1(splitMix64(seed) + o gamma) - gamma
//   (SplitMix64's finalizer is a bijection, getChunkSeed inverts it). Its
//   mask and output are the whole Dropout's elements o.., bit for bit, on
//   every backend (they all draw from that generator).
// So the step's outputs equal the unchunked step's to the bit, which
// remat-run --check-equivalence checks. Not covered: REMAT_GEMM=openblas
// and f64, whose tiles depend on the number of products when a chunk has
// fewer than four (kMinTasks), MatMul and remat.PermutedMatMul alike:
// there a product's rows may be cut differently and round differently
// (each element within the bound of a reassociated dot product of length
// K). CUDA: cuBLAS's batched GEMM picks
// its kernel by shape, batch count included, so the same bound holds.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_CHUNKATTENTION_H
#define REMAT_PASSES_REMAT_CHUNKATTENTION_H

#include "passes/remat/ChunkLoss.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace remat::passes::recompute {

/// The chunks of chunk-attention=auto: bert-base at batch 32, seq 512 has
/// its smallest planned peak at 1.91 GiB with 4 (1.72 GiB with 8, 2.88 GiB
/// with the cores whole), and 8 chunks cost half as much planning time
/// again (each chunk is a copy of the core's chain, twice).
constexpr unsigned kAutoAttentionChunks = 4;

/// Parses chunk-attention= as parseChunkLoss does chunk-loss=.
llvm::Expected<ChunkLossSetting> parseChunkAttention(llvm::StringRef text);

/// The seed of a Dropout whose element i draws what element \p offset + i
/// of a Dropout seeded \p seed draws (Note [Chunked attention core]).
uint64_t getChunkSeed(uint64_t seed, uint64_t offset);

/// A recognised attention core (Note [Chunked attention core]).
struct AttentionCore {
  /// The forward chain, in schedule order: MatMul(Q, K^T) ... MatMul(P, V).
  std::vector<ir::Node *> forward;
  /// The backward part, in schedule order.
  std::vector<ir::Node *> backward;
  /// The big values' type (the scores').
  ir::TensorType scores;
  int64_t batch = 0;
};

/// \returns the attention cores of \p graph (a scheduled training step) the
/// rewrite can chunk, in schedule order; \p whyNot says why each other
/// candidate (a forward Softmax of rank >= 3) was left whole, or that there
/// is none.
std::vector<AttentionCore> findAttentionCores(ir::Graph &graph,
                                              std::string &whyNot);

/// \returns the batch entries per chunk for \p chunks chunks of \p batch, or
/// 0 when that leaves fewer than two chunks.
int64_t getAttentionRows(int64_t batch, unsigned chunks);

/// Rewrites \p core of \p graph into chunks of \p rows batch entries.
/// Deterministic: the same graph gives the same names. \returns the number
/// of chunks.
//  Given:   %s = MatMul(%q, %kt); %p = Softmax(Div(%s, %c)); %o = MatMul(%p,
//           %v); ... %dp = MatMul(%do, %vt) bwd; %ds = SoftmaxGrad(%dp, %p)
//           bwd; ...
//  Execute: chunkAttentionCore(g, core, 1) on batch 2
//  Result:  %o = Concat(MatMul(Softmax(Div(MatMul(Slice(%q), Slice(%kt)),
//           %c)), Slice(%v)) per chunk); in backward, per chunk, the chain up
//           to Softmax again and the backward on the chunk's slices; dQ,
//           dK^T, dV the Concat of the chunks'; the old nodes are gone
llvm::Expected<unsigned>
chunkAttentionCore(ir::Graph &graph, const AttentionCore &core, int64_t rows);

/// Chunks every core findAttentionCores finds on \p graph into the chunks
/// \p setting asks for (auto: kAutoAttentionChunks). \returns how many
/// cores were chunked: 0, with \p whyNot saying why and \p graph
/// unchanged, when none could be; otherwise \p whyNot says why the others
/// were left whole (empty when none was) and \p description, when not
/// null, what was chunked.
llvm::Expected<unsigned> chunkAttentionCores(ir::Graph &graph,
                                             ChunkLossSetting setting,
                                             std::string &whyNot,
                                             std::string *description);

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_CHUNKATTENTION_H
