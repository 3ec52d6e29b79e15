//===- tools/bench/GemmBench.cpp - GEMM candidates on bert-base shapes ----===//
//
// Times the f32 GEMM libraries remat could call, on the shapes a bert-base
// training step runs (forward and the transposed forms of the backward), the
// way runtime/cpu/Linalg.cpp calls them: the product cut into fixed tiles
// (128 x 256 outputs unless --tile says otherwise; the runtime's own cut,
// finishPlan, is at most 256 x 1024 for OpenBLAS and 512 x 1024 for remat's
// kernel), each tile one single-threaded call
// over the whole K (see Note [OpenBLAS threads]). One thread, best of N
// alternating rounds (every round runs every candidate on every shape), GFLOP/s
// of the thread's CPU time (not wall time: the machine may be shared).
//
//   remat-bench-gemm [--rounds N] [--reps R] [--seq S] [--tile ROWSxCOLS]
//   remat-bench-gemm --ceilings [--rounds N]
//
// Candidates: remat's own kernels (runtime/cpu/PackedSgemm.cpp:
// remat-avx512 where the CPU has AVX-512F, which the runtime runs there, and
// remat-avx2 where it has AVX2 + FMA, which the runtime runs on CPUs
// without AVX-512F or with the tools' REMAT_GEMM=avx2; each checked
// first against a double-precision loop on odd shapes, edges, transposes,
// alpha and beta); OpenBLAS with
// the core type it picks itself; OpenBLAS re-initialised with the core type
// remat picks from cpuid (runtime/cpu/GemmProvider.cpp,
// selectOpenBlasCore); and,
// where the build found them, BLIS (bli_sgemm, one thread), oneDNN (dnnl_sgemm,
// OpenMP at one thread) and Eigen (compiled for the build machine's ISA: no
// run-time dispatch, listed for reference). Each candidate's result is compared
// with OpenBLAS's (max relative difference) so that a wrong call cannot look
// fast.
//
// Timings belong in benchmarks, not tests: tests/tools/bench-args.test
// checks only the arguments this takes.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/GemmProvider.h"
#include "runtime/cpu/PackedSgemm.h"
#include "tools/GemmOption.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

#include <cblas.h>
#include <dlfcn.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#ifdef REMAT_BENCH_BLIS
#include <blis.h>
#endif
#ifdef REMAT_BENCH_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif
#ifdef REMAT_BENCH_EIGEN
#include <Eigen/Core>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

/// runtime/cpu/Linalg.cpp's small tile (--tile ROWSxCOLS tries others; the
/// runtime cuts a product into 256x512 tiles when that gives at least 8).
int64_t kTileRows = 128;
int64_t kTileCols = 256;

/// C (m x n, row-major, ldc) = op(A) op(B) for one tile; a candidate.
using TileGemm = void (*)(bool transA, bool transB, int m, int n, int k,
                          const float *a, int lda, const float *b, int ldb,
                          float *c, int ldc);

/// OpenBLAS's own cblas_sgemm: BLIS exports one too, and whichever library
/// the dynamic linker meets first would answer a plain call.
using CblasSgemm = decltype(&cblas_sgemm);
CblasSgemm openblasSgemm() {
  static CblasSgemm fn = [] {
    void *lib = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD);
    void *sym = lib ? dlsym(lib, "cblas_sgemm") : nullptr;
    if (!sym) {
      std::fprintf(stderr, "remat-bench-gemm: no cblas_sgemm in "
                           "libopenblas.so.0\n");
      std::exit(1);
    }
    return reinterpret_cast<CblasSgemm>(sym);
  }();
  return fn;
}

void openblasTile(bool transA, bool transB, int m, int n, int k,
                  const float *a, int lda, const float *b, int ldb, float *c,
                  int ldc) {
  openblasSgemm()(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, 0.0f, c, ldc);
}

/// remat's kernels (runtime/cpu/PackedSgemm.cpp), the runtime's where the
/// CPU runs them.
template <remat::runtime::cpu::PackedSgemmIsa Isa>
void rematTile(bool transA, bool transB, int m, int n, int k, const float *a,
               int lda, const float *b, int ldb, float *c, int ldc) {
  remat::runtime::cpu::packedSgemmOn(Isa, transA, transB, m, n, k, 1.0f, a, lda,
                                     b, ldb, 0.0f, c, ldc);
}

#ifdef REMAT_BENCH_BLIS
void blisTile(bool transA, bool transB, int m, int n, int k, const float *a,
              int lda, const float *b, int ldb, float *c, int ldc) {
  static rntm_t rntm = [] {
    rntm_t r = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(1, &r);
    return r;
  }();
  float one = 1.0f, zero = 0.0f;
  // Row-major: element (i, j) of op(A) is a[i * lda + j], so rs = lda, cs = 1
  // (swapped when transposed).
  bli_sgemm_ex(transA ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
               transB ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, m, n, k, &one,
               const_cast<float *>(a), lda, 1, const_cast<float *>(b), ldb, 1,
               &zero, c, ldc, 1, nullptr, &rntm);
}
#endif

#ifdef REMAT_BENCH_DNNL
void dnnlTile(bool transA, bool transB, int m, int n, int k, const float *a,
              int lda, const float *b, int ldb, float *c, int ldc) {
  dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a, lda, b,
             ldb, 0.0f, c, ldc);
}
#endif

#ifdef REMAT_BENCH_EIGEN
void eigenTile(bool transA, bool transB, int m, int n, int k, const float *a,
               int lda, const float *b, int ldb, float *c, int ldc) {
  using Stride = Eigen::OuterStride<>;
  using RowMat =
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;
  Eigen::Map<RowMat, 0, Stride> cm(c, m, n, Stride(ldc));
  // A row-major matrix transposed is the same storage read column-major.
  auto run = [&](const auto &am, const auto &bm) { cm.noalias() = am * bm; };
  Eigen::Map<const RowMat, 0, Stride> aN(a, m, k, Stride(lda));
  Eigen::Map<const ColMat, 0, Stride> aT(a, m, k, Stride(lda));
  Eigen::Map<const RowMat, 0, Stride> bN(b, k, n, Stride(ldb));
  Eigen::Map<const ColMat, 0, Stride> bT(b, k, n, Stride(ldb));
  if (!transA && !transB)
    run(aN, bN);
  else if (!transA)
    run(aN, bT);
  else if (!transB)
    run(aT, bN);
  else
    run(aT, bT);
}
#endif

struct Candidate {
  std::string name;
  TileGemm tile;
  /// Called before the candidate's turn (OpenBLAS core switch).
  std::function<void()> prepare;
};

struct Shape {
  const char *what;
  int64_t batch, m, n, k;
  bool transA, transB;
};

/// Runs every tile of a (batched) product with \p tile, one thread.
void runTiled(TileGemm tile, const Shape &s, const float *a, const float *b,
              float *c) {
  int64_t lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n, ldc = s.n;
  for (int64_t p = 0; p < s.batch; ++p) {
    const float *ap = a + p * s.m * s.k, *bp = b + p * s.k * s.n;
    float *cp = c + p * s.m * s.n;
    for (int64_t row0 = 0; row0 < s.m; row0 += kTileRows)
      for (int64_t col0 = 0; col0 < s.n; col0 += kTileCols) {
        int64_t rows = std::min(kTileRows, s.m - row0);
        int64_t cols = std::min(kTileCols, s.n - col0);
        tile(s.transA, s.transB, int(rows), int(cols), int(s.k),
             ap + (s.transA ? row0 : row0 * lda), int(lda),
             bp + (s.transB ? col0 * ldb : col0), int(ldb),
             cp + row0 * ldc + col0, int(ldc));
      }
  }
}

/// This thread's CPU time: on a machine shared with other jobs, the time
/// slices lost to them do not count (caches they evict still do).
double seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

#if defined(__x86_64__)
/// The f32 FMA rate of one thread, GFLOP/s of its CPU time: 16 independent
/// chains of 16-lane FMAs (enough to cover the latency of two FMA ports),
/// best of 3 runs. The ceiling any GEMM here can reach.
__attribute__((target("avx512f"))) double fmaPeakGflops() {
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    __m512 acc[16];
    for (int j = 0; j < 16; ++j)
      acc[j] = _mm512_set1_ps(0.001f * float(j));
    __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-6f);
    const int64_t iterations = 50 * 1000 * 1000;
    double start = seconds();
    for (int64_t i = 0; i < iterations; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j)
        acc[j] = _mm512_fmadd_ps(acc[j], a, b);
    double elapsed = seconds() - start;
    // Keep the chains alive.
    alignas(64) float lanes[16];
    float sink = 0;
    for (int j = 0; j < 16; ++j) {
      _mm512_store_ps(lanes, acc[j]);
      sink += lanes[j];
    }
    if (sink == 42.0f)
      std::printf(" ");
    best = std::max(best, double(iterations) * 16 * 16 * 2 / elapsed * 1e-9);
  }
  return best;
}
#endif

/// Note [What the step's GEMMs can reach]
/// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
/// --ceilings prints what bounds remat's GEMMs on this machine, one thread,
/// instead of the candidates' table: the FMA loop; remat's sgemm on a
/// product whose operands fit the L2 (256 x 256 x 256, its packing
/// included: the register kernel alone, one B panel against a block of A
/// panels, ran at the FMA loop's rate in a one-off harness, not kept);
/// memcpy's bandwidth from L3 (warm: a 12 MiB source read again and again)
/// and from memory (cold: 384 MiB read in between, more than the L3); and
/// the bandwidth at which remat packs op(A) (packedSgemmPackA over a 512
/// x 3072 operand, as stored, 8 x 8 transposes, and stored transposed, a
/// copy), warm and cold. In a training step the weights and saved
/// activations come from memory, so the packing's share of a GEMM is set
/// by the cold figures. The product's rate swings from one invocation to
/// the next more than the FMA loop's: read it as a range, over several
/// invocations.
struct Ceilings {
  double fmaGflops = 0, kernelGflops = 0;
  double memcpyWarm = 0, memcpyCold = 0;
  double transposingWarm = 0, transposingCold = 0;
  double copyingWarm = 0, copyingCold = 0;
};

/// Reads \p evict (larger than the last-level cache) so that what a
/// measurement reads next comes from memory.
void evictCaches(const std::vector<float> &evict) {
  float sum = 0;
  for (size_t i = 0; i < evict.size(); i += 16)
    sum += evict[i];
  if (sum == 42.0f)
    std::printf(" ");
}

/// The fewest seconds of this thread's CPU time that \p body took over
/// \p runs runs; with \p evict, the caches are emptied before each run.
double bestSeconds(unsigned runs, const std::vector<float> *evict,
                   const std::function<void()> &body) {
  double best = 1e30;
  for (unsigned run = 0; run < runs; ++run) {
    if (evict)
      evictCaches(*evict);
    double start = seconds();
    body();
    best = std::min(best, seconds() - start);
  }
  return best;
}

/// GB/s at which \p body reads \p bytes, best of \p runs (bestSeconds).
double bandwidth(unsigned runs, double bytes, const std::vector<float> *evict,
                 const std::function<void()> &body) {
  return bytes / bestSeconds(runs, evict, body) * 1e-9;
}

Ceilings measureCeilings(unsigned runs) {
  namespace cpu = remat::runtime::cpu;
  Ceilings result;
#if defined(__x86_64__)
  result.fmaGflops = fmaPeakGflops();
#endif
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  {
    const int64_t side = 256;
    std::vector<float> a(side * side), b(side * side), c(side * side);
    for (float &v : a)
      v = dist(rng);
    for (float &v : b)
      v = dist(rng);
    const int reps = 20;
    double best = bestSeconds(runs, nullptr, [&] {
      for (int rep = 0; rep < reps; ++rep)
        cpu::packedSgemm(false, false, side, side, side, 1.0f, a.data(), side,
                         b.data(), side, 0.0f, c.data(), side);
    });
    result.kernelGflops = 2.0 * side * side * side * reps / best * 1e-9;
  }
  std::vector<float> evict(size_t(96) << 20, 1.0f); // 384 MiB
  {
    const size_t floats = size_t(3) << 20, piece = size_t(1) << 18;
    std::vector<float> source(floats, 1.0f), sink(piece);
    auto copy = [&] {
      for (size_t at = 0; at < floats; at += piece)
        std::memcpy(sink.data(), source.data() + at, piece * sizeof(float));
    };
    double bytes = double(floats) * sizeof(float);
    result.memcpyWarm = bandwidth(runs, bytes, nullptr, copy);
    result.memcpyCold = bandwidth(runs, bytes, &evict, copy);
  }
  {
    const int64_t m = 512, k = 3072;
    std::vector<float> a(m * k);
    for (float &v : a)
      v = dist(rng);
    float *packed = cpu::packedSgemmABuffer(cpu::packedSgemmPackedASize(m, k));
    cpu::PackedABlocks blocks = cpu::packedSgemmPackedABlocks(m, k);
    auto pack = [&](bool transA) {
      // As stored, op(A) is [m, k] (lda k); stored transposed, [k, m].
      int64_t lda = transA ? m : k;
      for (int64_t kb = 0; kb < blocks.kBlocks; ++kb)
        for (int64_t rb = 0; rb < blocks.rowBlocks; ++rb)
          cpu::packedSgemmPackA(transA, m, k, a.data(), lda, kb, rb, packed);
    };
    double bytes = double(m * k) * sizeof(float);
    result.transposingWarm =
        bandwidth(runs, bytes, nullptr, [&] { pack(false); });
    result.transposingCold =
        bandwidth(runs, bytes, &evict, [&] { pack(false); });
    result.copyingWarm = bandwidth(runs, bytes, nullptr, [&] { pack(true); });
    result.copyingCold = bandwidth(runs, bytes, &evict, [&] { pack(true); });
  }
  return result;
}

void printCeilings(const Ceilings &c, unsigned runs) {
  std::printf("# one thread, best of %u runs, rates of the thread's CPU time "
              "(Note [What the step's GEMMs can reach])\n",
              runs);
  std::printf("%-44s %7.1f GFLOP/s\n", "AVX-512 FMA loop", c.fmaGflops);
  std::printf("%-44s %7.1f GFLOP/s  %5.1f%% of the FMA loop\n",
              "remat-avx512 256x256x256, operands in L2", c.kernelGflops,
              100.0 * c.kernelGflops / c.fmaGflops);
  std::printf("%-44s %7s %9s\n", "bandwidth (GB/s read)", "warm", "cold");
  std::printf("%-44s %7.1f %9.1f\n", "memcpy, 12 MiB in 1 MiB pieces",
              c.memcpyWarm, c.memcpyCold);
  std::printf("%-44s %7.1f %9.1f  %5.1f%% and %5.1f%% of memcpy\n",
              "pack op(A) 512x3072 as stored (transposes)", c.transposingWarm,
              c.transposingCold, 100.0 * c.transposingWarm / c.memcpyWarm,
              100.0 * c.transposingCold / c.memcpyCold);
  std::printf("%-44s %7.1f %9.1f  %5.1f%% and %5.1f%% of memcpy\n",
              "pack op(A) 512x3072 stored transposed (copy)", c.copyingWarm,
              c.copyingCold, 100.0 * c.copyingWarm / c.memcpyWarm,
              100.0 * c.copyingCold / c.memcpyCold);
}

/// A single-threaded sgemm with alpha and beta, as cblas_sgemm takes it.
using FullSgemm = void (*)(bool transA, bool transB, int64_t m, int64_t n,
                           int64_t k, float alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float beta, float *c,
                           int64_t ldc);

/// remat's kernel \p Isa as a FullSgemm.
template <remat::runtime::cpu::PackedSgemmIsa Isa>
void rematFull(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b,
               int64_t ldb, float beta, float *c, int64_t ldc) {
  remat::runtime::cpu::packedSgemmOn(Isa, transA, transB, m, n, k, alpha, a,
                                     lda, b, ldb, beta, c, ldc);
}

/// Checks \p sgemm (remat's kernel named \p name) against a
/// double-precision loop on random shapes that cross its panel and block
/// edges. \returns false, after printing the case, on a mismatch.
bool checkPackedSgemm(const char *name, FullSgemm sgemm) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  auto dim = [&](int64_t hi) {
    return int64_t(std::uniform_int_distribution<int64_t>(1, hi)(rng));
  };
  for (int trial = 0; trial < 60; ++trial) {
    int64_t m = dim(trial % 7 ? 40 : 300), n = dim(trial % 5 ? 70 : 1100);
    int64_t k = dim(trial % 3 ? 40 : 600);
    bool transA = trial & 1, transB = trial & 2;
    float alpha = trial % 5 ? 1.0f : 0.5f;
    float beta = trial % 4 == 0 ? 0.0f : trial % 4 == 1 ? 1.0f : -2.0f;
    int64_t lda = (transA ? m : k) + dim(3) - 1;
    int64_t ldb = (transB ? k : n) + dim(3) - 1, ldc = n + dim(3) - 1;
    std::vector<float> a((transA ? k : m) * lda), b((transB ? n : k) * ldb),
        c(m * ldc);
    for (float &x : a) x = value(rng);
    for (float &x : b) x = value(rng);
    for (float &x : c) x = beta == 0.0f ? NAN : value(rng);
    std::vector<float> expected = c;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += double(transA ? a[p * lda + i] : a[i * lda + p]) *
                 double(transB ? b[j * ldb + p] : b[p * ldb + j]);
        double old = beta == 0.0f ? 0.0 : double(beta) * c[i * ldc + j];
        expected[i * ldc + j] = float(alpha * sum + old);
      }
    sgemm(transA, transB, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta,
          c.data(), ldc);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float got = c[i * ldc + j], want = expected[i * ldc + j];
        if (!(std::fabs(got - want) <= 1e-5f * float(k) + 1e-5f)) {
          std::fprintf(stderr,
                       "remat-bench-gemm: %s is wrong at (%ld, %ld) "
                       "of m=%ld n=%ld k=%ld transA=%d transB=%d alpha=%g "
                       "beta=%g: %g, expected %g\n",
                       name, long(i), long(j), long(m), long(n), long(k),
                       transA, transB, alpha, beta, got, want);
          return false;
        }
      }
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  llvm::cl::opt<unsigned> rounds(
      "rounds",
      llvm::cl::desc("Alternating rounds; each shape and candidate keeps "
                     "its best (default 5)"),
      llvm::cl::init(5));
  llvm::cl::opt<unsigned> reps(
      "reps", llvm::cl::desc("Timed runs of each shape per round (default 3)"),
      llvm::cl::init(3));
  llvm::cl::opt<int64_t> seq(
      "seq",
      llvm::cl::desc("Tokens: the rows of the projections and the "
                     "attention's sequence length (default 512)"),
      llvm::cl::init(512));
  llvm::cl::opt<std::string> tile(
      "tile", llvm::cl::value_desc("ROWSxCOLS"),
      llvm::cl::desc("Outputs per single-threaded call (default 128x256)"),
      llvm::cl::init("128x256"));
  llvm::cl::opt<bool> ceilings(
      "ceilings",
      llvm::cl::desc("Print what bounds remat's AVX-512 GEMMs here instead "
                     "(the FMA loop, remat's sgemm with its operands in L2, "
                     "memcpy's and the packing's bandwidth; best of --rounds "
                     "runs; AVX-512F CPUs only)"));
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "remat-bench-gemm: GEMM candidates on bert-base's shapes\n");
  // REMAT_GEMM only: this compares OpenBLAS's own core with remat's choice,
  // and sets each itself.
  if (!remat::tools::applyGemmProviderOption())
    return 1;
  if (rounds == 0 || reps == 0 || seq <= 0) {
    std::fprintf(stderr, "error: --rounds, --reps and --seq must be "
                         "positive\n");
    return 1;
  }
  auto [rowsText, colsText] = llvm::StringRef(tile).split('x');
  // getAsInteger takes digits only (no sign, no space) and fails on
  // overflow.
  if (rowsText.getAsInteger(10, kTileRows) ||
      colsText.getAsInteger(10, kTileCols) || kTileRows <= 0 ||
      kTileCols <= 0) {
    std::fprintf(stderr,
                 "error: --tile wants ROWSxCOLS, two positive numbers, "
                 "not '%s'\n",
                 tile.c_str());
    return 1;
  }
  if (ceilings) {
    if (remat::runtime::cpu::packedSgemmIsa() !=
        remat::runtime::cpu::PackedSgemmIsa::Avx512) {
      std::fprintf(stderr, "error: --ceilings measures remat's AVX-512 "
                           "kernel, which is off here (no AVX-512F, or "
                           "REMAT_GEMM=openblas or avx2)\n");
      return 1;
    }
    printCeilings(measureCeilings(rounds), rounds);
    return 0;
  }
  openblas_set_num_threads(1);
  std::string defaultCore = openblas_get_corename();
  std::string chosenCore = remat::runtime::cpu::selectOpenBlasCore();
  std::string pickedCore = openblas_get_corename();
  // selectOpenBlasCore() has switched OpenBLAS; the "default" candidate
  // switches it back for its turn.
  auto setCore = [](const std::string &core) {
    remat::runtime::cpu::reinitOpenBlasCore(core.c_str());
  };
  std::vector<Candidate> candidates;
  candidates.push_back({"openblas-" + defaultCore, openblasTile,
                        [=] { setCore(defaultCore); }});
  if (pickedCore != defaultCore)
    candidates.push_back({"openblas-" + pickedCore, openblasTile,
                          [=] { setCore(pickedCore); }});
  // Haswell's kernels, for comparison, wherever the CPU has AVX2 and FMA.
  if (pickedCore != "Haswell" && defaultCore != "Haswell" &&
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    candidates.push_back({"openblas-Haswell", openblasTile,
                          [=] { setCore("Haswell"); }});
  // remat's kernels, each where the CPU runs it (the AVX2 one on an AVX-512
  // CPU too), unless REMAT_GEMM=openblas turns them off.
  {
    using remat::runtime::cpu::PackedSgemmIsa;
    auto addRemat = [&](PackedSgemmIsa isa, TileGemm tile, FullSgemm full) {
      if (!remat::runtime::cpu::packedSgemmAvailable() ||
          !remat::runtime::cpu::packedSgemmSupports(isa))
        return true;
      const char *name = remat::runtime::cpu::packedSgemmName(isa);
      if (!checkPackedSgemm(name, full))
        return false;
      candidates.push_back({name, tile, nullptr});
      return true;
    };
    if (!addRemat(PackedSgemmIsa::Avx512, rematTile<PackedSgemmIsa::Avx512>,
                  rematFull<PackedSgemmIsa::Avx512>) ||
        !addRemat(PackedSgemmIsa::Avx2, rematTile<PackedSgemmIsa::Avx2>,
                  rematFull<PackedSgemmIsa::Avx2>))
      return 1;
  }
#ifdef REMAT_BENCH_BLIS
  candidates.push_back(
      {std::string("blis-") + bli_arch_string(bli_arch_query_id()), blisTile,
       nullptr});
#endif
#ifdef REMAT_BENCH_DNNL
  omp_set_num_threads(1);
  candidates.push_back({"onednn", dnnlTile, nullptr});
#endif
#ifdef REMAT_BENCH_EIGEN
  candidates.push_back({"eigen(build isa)", eigenTile, nullptr});
#endif

  int64_t t = int64_t(seq), h = 768, f = 3072, heads = 12, d = 64;
  std::vector<Shape> shapes = {
      {"qkv/out proj", 1, t, h, h, false, false},
      {"ffn up", 1, t, f, h, false, false},
      {"ffn down", 1, t, h, f, false, false},
      {"scores QK^T", heads, t, t, d, false, true},
      {"context PV", heads, t, d, t, false, false},
      {"dX = dY W^T", 1, t, h, f, false, true},
      {"dW = X^T dY", 1, h, f, t, true, false},
      {"dW = X^T dY sq", 1, h, h, t, true, false},
      {"dQ = dS K", heads, t, d, t, false, false},
      {"dK = dS^T Q", heads, t, d, t, true, false},
      // The MLM decoder against the tied word embeddings, on a 4096-row
      // slice of the 30522-word vocabulary (same tiles, less time).
      {"decoder X E^T", 1, t, 4096, h, false, true},
      {"decoder dY E", 1, t, h, 4096, false, false},
      {"dE = dY^T X", 1, 4096, h, t, true, false},
  };
  size_t maxA = 0, maxB = 0, maxC = 0;
  for (const Shape &s : shapes) {
    maxA = std::max<size_t>(maxA, s.batch * s.m * s.k);
    maxB = std::max<size_t>(maxB, s.batch * s.k * s.n);
    maxC = std::max<size_t>(maxC, s.batch * s.m * s.n);
  }
  std::vector<float> a(maxA), b(maxB), c(maxC), ref(maxC);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float &v : a)
    v = dist(rng);
  for (float &v : b)
    v = dist(rng);

#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f"))
    std::printf("# AVX-512 FMA loop: %.1f GFLOP/s per thread (the ceiling)\n",
                fmaPeakGflops());
#endif
  std::printf("# openblas %s picks core %s; remat picks %s; blas threads 1; "
              "tiles %ldx%ld\n",
              openblas_get_config(), defaultCore.c_str(), pickedCore.c_str(),
              long(kTileRows), long(kTileCols));
  std::vector<std::vector<double>> best(
      shapes.size(), std::vector<double>(candidates.size(), 1e30));
  std::vector<std::vector<double>> diff(
      shapes.size(), std::vector<double>(candidates.size(), 0));
  for (unsigned round = 0; round < rounds; ++round) {
    // Alternate the order: odd rounds run the candidates backwards.
    for (size_t ci = 0; ci < candidates.size(); ++ci) {
      size_t cand = round % 2 ? candidates.size() - 1 - ci : ci;
      if (candidates[cand].prepare)
        candidates[cand].prepare();
      for (size_t si = 0; si < shapes.size(); ++si) {
        const Shape &s = shapes[si];
        for (unsigned rep = 0; rep < reps; ++rep) {
          double start = seconds();
          runTiled(candidates[cand].tile, s, a.data(), b.data(), c.data());
          best[si][cand] = std::min(best[si][cand], seconds() - start);
        }
      }
    }
  }
  // Accuracy: one more pass, candidate 0 first as the reference.
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape &s = shapes[si];
    size_t count = s.batch * s.m * s.n;
    for (size_t cand = 0; cand < candidates.size(); ++cand) {
      if (candidates[cand].prepare)
        candidates[cand].prepare();
      runTiled(candidates[cand].tile, s, a.data(), b.data(), c.data());
      if (cand == 0) {
        ref.assign(c.begin(), c.begin() + count);
        continue;
      }
      double worst = 0;
      for (size_t i = 0; i < count; ++i)
        worst = std::max(worst, double(std::fabs(c[i] - ref[i])) /
                                    (std::fabs(ref[i]) + 1.0));
      diff[si][cand] = worst;
    }
  }
  candidates[0].prepare();

  std::printf("%-16s %-18s", "shape", "batch x M x N x K");
  for (const Candidate &cand : candidates)
    std::printf(" %18s", cand.name.c_str());
  std::printf("   (GFLOP/s of thread CPU time, 1 thread, best of %u rounds x "
              "%u reps)\n",
              unsigned(rounds), unsigned(reps));
  std::vector<double> totalSeconds(candidates.size(), 0);
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape &s = shapes[si];
    char dims[64];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lldx%lld%s%s",
                  (long long)s.batch, (long long)s.m, (long long)s.n,
                  (long long)s.k, s.transA ? " tA" : "",
                  s.transB ? " tB" : "");
    std::printf("%-16s %-18s", s.what, dims);
    double flops = 2.0 * s.batch * s.m * s.n * s.k;
    for (size_t cand = 0; cand < candidates.size(); ++cand) {
      totalSeconds[cand] += best[si][cand];
      std::printf(" %18.1f", flops / best[si][cand] / 1e9);
    }
    std::printf("\n");
  }
  std::printf("%-35s", "sum of best times (ms)");
  for (size_t cand = 0; cand < candidates.size(); ++cand)
    std::printf(" %18.2f", totalSeconds[cand] * 1e3);
  std::printf("\n%-35s", "max rel diff vs first");
  for (size_t cand = 0; cand < candidates.size(); ++cand) {
    double worst = 0;
    for (size_t si = 0; si < shapes.size(); ++si)
      worst = std::max(worst, diff[si][cand]);
    std::printf(" %18.1e", worst);
  }
  std::printf("\n");
  return 0;
}
