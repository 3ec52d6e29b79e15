//===- passes/remat/ChunkLoss.h - The loss head in chunks of tokens -*- C++
//-*-===//
//
// remat's chunk-loss option (DESIGN.md "Rematerialization"): the output
// projection of a language-model head and its softmax cross-entropy,
// computed in chunks of tokens so that no [tokens, classes] tensor exists
// whole.
//
// Note [Chunked loss head]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// What is recognised, by structure: a forward Gemm (transA 0, alpha 1, a
// bias of one row or none, f32) whose only use is the scores operand of a
// SoftmaxCrossEntropyLoss (rank 2, no class weights, reduction mean or sum),
// whose log_prob is read only by the remat.SoftmaxCrossEntropyGrad autodiff
// made, whose result dS is read only by backward nodes of three kinds:
//   row readers   Gemm(dS, Q) (transA 0): the hidden states' gradient, each
//                 row of it from the same row of dS;
//   token sums    Gemm(dS^T, P) or Gemm(P^T, dS): the weight's gradient, a
//                 sum over tokens;
//   column sums   ReduceSum(dS, axes [0]): the bias's gradient.
// The rewrite puts the whole head, forward and backward, at the loss's place
// in forward: the labels' part of the gradient (autodiff's ignore mask and
// scale, which read only the labels and the seed) is cloned there, and then
// for each chunk of rows: the chunk's scores (the Gemm on its rows), its
// per-token losses and log_prob (the loss with reduction "none"), its dS
// (the same SoftmaxCrossEntropyGrad), its rows of each row reader, and its
// term of each sum. The step's loss is the ReduceSum of the concatenated
// per-token losses (divided by the count of labels not ignored for mean),
// the row readers' results the concatenated rows. Everything per chunk dies
// within the chunk; what is held to backward is what the backward already
// held: the hidden states' gradient [tokens, hidden], the weight's and the
// bias's.
//
// Bits (CPU backend, f32 on remat's packed kernel; Note [Packed sgemm]):
// - scores, log_prob, per-token losses, dS and the row readers are row by
//   row: the Gemm's element (i, j) depends on K alone, not on its row, the
//   loss kernel and SoftmaxCrossEntropyGrad work per row (and their vector
//   exp rounds every lane as the scalar one does). Same bits.
// - The loss: the kernel sums the per-token losses in token order from 0,
//   then divides by the count as a float; ReduceSum sums in the same order
//   from 0 (runtime/cpu/Reductions.cpp), and the count is a ReduceSum of
//   ones, exact below 2^24. Same bits.
// - The weight's gradient sums over tokens, the Gemm's K. The packed kernel
//   adds K in blocks of 256 (kKC): one FMA chain from 0 per block, then C =
//   sum (first block) or C = sum + C (the others), in block order. A chunk
//   is a whole number of blocks (rows a multiple of kTokenBlock, the last
//   one excepted), its Gemm takes the previous chunks' sum as C with beta 1,
//   and its first block computes fma(1, sum, 1 * C) = sum + C: the same
//   operations in the same order. Same bits.
// - The bias's gradient: ReduceSum over axis 0 adds whole rows in token
//   order from 0. Each chunk sums Concat(previous sum, its rows): 0 + prev
//   is prev (the running sum is never -0: it starts at +0 and an exact
//   cancellation rounds to +0), then its rows in order. Same bits.
// So the step's outputs equal the unchunked step's to the bit, which
// remat-run --check-equivalence checks. Not covered: f64 and
// REMAT_GEMM=openblas, whose GEMMs run OpenBLAS, whose blocking over K is
// its own. There the weight's gradient is the same sum of the same products
// associated differently: each element differs from the unchunked one by at
// most the usual bound of a sum of n = tokens terms, |err| <= 2 (n - 1) u
// sum |dS_ti P_tj| (u = 2^-24 for f32), as any reassociation does; every
// other output keeps its bits there too. CUDA: the same bound, for the same
// reason (cuBLAS picks its own split of K).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_PASSES_REMAT_CHUNKLOSS_H
#define REMAT_PASSES_REMAT_CHUNKLOSS_H

#include "passes/remat/Solver.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace remat::passes::recompute {

/// Rows of a chunk are a multiple of this (the packed GEMM's K block, kKC in
/// runtime/cpu/PackedSgemm.cpp), so that the weight's gradient keeps its
/// bits (Note [Chunked loss head]).
constexpr int64_t kTokenBlock = 256;

/// What chunk-loss= asks for.
struct ChunkLossSetting {
  enum class Mode : uint8_t { Off, Auto, Fixed };
  Mode mode = Mode::Auto;
  /// The chunks asked for (Fixed only).
  unsigned chunks = 0;
};

/// Parses "auto", "off" or a number of chunks of at least 1 for option
/// \p option. \returns an error naming \p option and \p text otherwise.
llvm::Expected<ChunkLossSetting> parseChunkSetting(llvm::StringRef option,
                                                   llvm::StringRef text);

/// parseChunkSetting for chunk-loss=.
llvm::Expected<ChunkLossSetting> parseChunkLoss(llvm::StringRef text);

/// A recognised loss head (Note [Chunked loss head]).
struct LossHead {
  /// scores = Gemm(X, W[, b]).
  ir::Node *projection = nullptr;
  ir::Node *loss = nullptr;
  /// remat.SoftmaxCrossEntropyGrad(log_prob, labels, scale): dS.
  ir::Node *scoresGrad = nullptr;
  /// dS's readers, by kind.
  std::vector<ir::Node *> rowReaders;
  std::vector<ir::Node *> tokenSums;
  std::vector<ir::Node *> columnSums;
  /// Backward nodes that compute scoresGrad's labels and scale, in schedule
  /// order.
  std::vector<ir::Node *> labelNodes;
  int64_t tokens = 0;
  int64_t classes = 0;
};

/// \returns the first loss head of \p graph (a scheduled training step) the
/// rewrite can chunk, or std::nullopt with \p whyNot saying why each
/// SoftmaxCrossEntropyLoss was left whole.
std::optional<LossHead> findLossHead(ir::Graph &graph, std::string &whyNot);

/// \returns the rows per chunk for \p chunks chunks of \p tokens tokens,
/// rounded up to a multiple of kTokenBlock, or 0 when that leaves fewer than
/// two chunks.
int64_t getChunkRows(int64_t tokens, unsigned chunks);

/// Rewrites \p head of \p graph into chunks of \p rows tokens (from
/// getChunkRows). Deterministic: the same graph gives the same names.
/// \returns the number of chunks.
//  Given:   %s = Gemm(%x, %w, %b); %l, %lp = SoftmaxCrossEntropyLoss(%s, %y)
//           ... %ds = SoftmaxCrossEntropyGrad(%lp, %y', %scale) bwd
//           %dx = Gemm(%ds, %w) bwd; %dw = Gemm(%ds, %x) {transA} bwd
//  Execute: chunkLossHead(g, head, 256) on 512 tokens
//  Result:  per chunk k of rows [256k, 256k + 256), in forward:
//           %s.k = Gemm(Slice(%x), %w, %b); %l.k, %lp.k = Loss(%s.k) none
//           %ds.k = SoftmaxCrossEntropyGrad(%lp.k, ...); %dx.k = Gemm(%ds.k,
//           %w) %dw.k = Gemm(%ds.k, Slice(%x), %dw.(k-1)) {transA} then %l =
//           ReduceSum(Concat(%l.*)) / count, %dx = Concat(%dx.*), %dw = %dw.1,
//           and the old head's nodes are gone
llvm::Expected<unsigned> chunkLossHead(ir::Graph &graph, const LossHead &head,
                                       int64_t rows);

/// The step with its loss head chunked, its attention cores chunked (Note
/// [Chunked attention core] in ChunkAttention.h) or both, as a remat
/// problem of its own: the solver's plans on it are candidates next to
/// those on the step as it is.
struct ChunkedStep {
  std::unique_ptr<ir::Graph> graph;
  std::unique_ptr<RematProblem> problem;
  /// The loss head's rows per chunk, 0 when it is left whole.
  int64_t rows = 0;
  unsigned chunks = 0;
  /// What chunk-attention asked for (Off: the cores are left whole).
  ChunkLossSetting attention{ChunkLossSetting::Mode::Off, 0};
  unsigned attentionCores = 0;
  /// For --explain: what was chunked.
  std::string description;
  std::string attentionDescription;
  /// For --explain: the attention cores left whole and why, when others
  /// were chunked.
  std::string attentionLeftWhole;
};

/// Builds the chunked copy of \p graph that \p loss and \p attention ask
/// for (not both Off), analysed as prepareRematProblem does with
/// \p costProfilePath and \p boundaries. \returns null, with \p whyNot
/// (the loss head) or \p attentionWhyNot (the attention cores) saying why,
/// when what auto asked for cannot be chunked; when a number of chunks was
/// asked for and it cannot be done, an error.
llvm::Expected<std::unique_ptr<ChunkedStep>>
prepareChunkedStep(const ir::Graph &graph, ChunkLossSetting loss,
                   ChunkLossSetting attention, llvm::StringRef costProfilePath,
                   llvm::ArrayRef<std::string> boundaries, std::string &whyNot,
                   std::string &attentionWhyNot);

/// Chunks \p graph's head and attention cores as \p step did on its copy,
/// then applies \p plan (a plan of \p step's solver) to \p graph.
/// \returns what was cloned.
llvm::Expected<RecomputeStats> applyChunkedPlan(ir::Graph &graph,
                                                const ChunkedStep &step,
                                                const PlanResult &plan);

} // namespace remat::passes::recompute

#endif // REMAT_PASSES_REMAT_CHUNKLOSS_H
