//===- tools/bench/RegisterShapes.cpp - AVX2 register kernel shapes -------===//
//
// How fast an AVX2 + FMA register kernel of MR rows x (8 * NV) columns runs
// where remat's packed sgemm keeps its operands (runtime/cpu/PackedSgemm.cpp,
// Note [The AVX2 kernel]): a B panel of 256 k in L1, an A block of about 258
// rows x 256 k in L2, one thread, the B panels outside the A panels. Per
// shape the best of 7 passes over a 1024-column block, in GFLOP/s of wall
// time, next to an FMA loop of 12 independent chains (the ceiling). The
// kernels only time the register shape: no packing, no edges, C added to.
//
//   remat-bench-register-shapes [--rounds N]
//
// Timings belong in benchmarks, not tests.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define REMAT_TARGET __attribute__((target("avx2,fma")))

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// C (MR x 8 NV, leading dim ldc) += A panel x B panel, depth kc.
template <int MR, int NV>
REMAT_TARGET __attribute__((noinline)) void
kernel(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[i][v] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m256 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      b[v] = _mm256_load_ps(bp + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      __m256 a = _mm256_broadcast_ss(ap + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
    }
    ap += MR;
    bp += 8 * NV;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      _mm256_storeu_ps(
          c + i * ldc + 8 * v,
          _mm256_add_ps(acc[i][v], _mm256_loadu_ps(c + i * ldc + 8 * v)));
}

struct Freed {
  void operator()(float *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], Freed>;

Buffer buffer(int64_t floats, float scale) {
  Buffer b(static_cast<float *>(
      std::aligned_alloc(64, (sizeof(float) * floats + 63) / 64 * 64)));
  if (!b) {
    std::fprintf(stderr, "error: out of memory\n");
    std::exit(1);
  }
  for (int64_t i = 0; i < floats; ++i)
    b[i] = scale * float(i % 7);
  return b;
}

template <int MR, int NV> double shapeGflops(unsigned rounds) {
  constexpr int64_t kc = 256, nr = 8 * NV;
  const int64_t mc = MR * (258 / MR), nc = nr * (1024 / nr);
  Buffer a = buffer(mc * kc, 1e-3f), b = buffer(nc * kc, 1e-3f),
         c = buffer(mc * nc, 0.0f);
  double best = 1e30;
  for (unsigned r = 0; r < rounds; ++r) {
    double start = now();
    for (int64_t j = 0; j < nc; j += nr)
      for (int64_t i = 0; i < mc; i += MR)
        kernel<MR, NV>(kc, a.get() + i * kc, b.get() + j * kc,
                       c.get() + i * nc + j, nc);
    best = std::min(best, now() - start);
  }
  return 2.0 * double(mc) * double(nc) * double(kc) / best / 1e9;
}

/// 12 independent FMA chains, 16 FLOPs each per iteration. (In assembly:
/// written with intrinsics, GCC kept the chains in memory.)
double fmaLoopGflops(unsigned rounds) {
  double best = 1e30;
  constexpr int64_t kIterations = 50'000'000;
  for (unsigned r = 0; r < rounds; ++r) {
    int64_t n = kIterations;
    double start = now();
    __asm__ volatile(
        "vxorps %%ymm0, %%ymm0, %%ymm0\n\tvxorps %%ymm1, %%ymm1, %%ymm1\n\t"
        "vxorps %%ymm2, %%ymm2, %%ymm2\n\tvxorps %%ymm3, %%ymm3, %%ymm3\n\t"
        "vxorps %%ymm4, %%ymm4, %%ymm4\n\tvxorps %%ymm5, %%ymm5, %%ymm5\n\t"
        "vxorps %%ymm6, %%ymm6, %%ymm6\n\tvxorps %%ymm7, %%ymm7, %%ymm7\n\t"
        "vxorps %%ymm8, %%ymm8, %%ymm8\n\tvxorps %%ymm9, %%ymm9, %%ymm9\n\t"
        "vxorps %%ymm10, %%ymm10, %%ymm10\n\t"
        "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"
        "vxorps %%ymm14, %%ymm14, %%ymm14\n\t"
        "vxorps %%ymm15, %%ymm15, %%ymm15\n"
        "1:\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm0\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm1\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm2\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm3\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm4\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm5\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm6\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm7\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm8\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm9\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm10\n\t"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm11\n\t"
        "dec %0\n\t"
        "jnz 1b\n\t"
        "vzeroupper"
        : "+r"(n)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
          "xmm8", "xmm9", "xmm10", "xmm11", "xmm14", "xmm15", "cc");
    best = std::min(best, now() - start);
  }
  return double(kIterations) * 12 * 16 / best / 1e9;
}

} // namespace

int main(int argc, char **argv) {
  unsigned rounds = 7;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0) {
      if (i + 1 == argc) {
        std::fprintf(stderr, "error: --rounds wants a number\n");
        return 1;
      }
      char *end = nullptr;
      long value = std::strtol(argv[++i], &end, 10);
      if (*argv[i] == '\0' || *end != '\0' || value <= 0 || value > 1000) {
        std::fprintf(stderr,
                     "error: --rounds wants a number from 1 to 1000, not "
                     "'%s'\n",
                     argv[i]);
        return 1;
      }
      rounds = unsigned(value);
      continue;
    }
    if (std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: remat-bench-register-shapes [--rounds N]\n"
                  "AVX2 register kernel shapes with their operands in "
                  "cache, one thread, best of N (7) passes, GFLOP/s\n");
      return 0;
    }
    std::fprintf(stderr, "error: unknown argument '%s' (see --help)\n",
                 argv[i]);
    return 1;
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "error: this CPU has no AVX2 + FMA\n");
    return 1;
  }
  std::printf("%-28s %7.1f GFLOP/s\n", "FMA loop (12 chains)",
              fmaLoopGflops(rounds));
  std::printf("%-28s %7.1f GFLOP/s\n", "6 x 16 (remat's AVX2 kernel)",
              shapeGflops<6, 2>(rounds));
  std::printf("%-28s %7.1f GFLOP/s\n", "4 x 24", shapeGflops<4, 3>(rounds));
  std::printf("%-28s %7.1f GFLOP/s\n", "5 x 16", shapeGflops<5, 2>(rounds));
  std::printf("%-28s %7.1f GFLOP/s\n", "8 x 8", shapeGflops<8, 1>(rounds));
  std::printf("%-28s %7.1f GFLOP/s\n", "3 x 32", shapeGflops<3, 4>(rounds));
  return 0;
}

#else
int main() {
  std::fprintf(stderr, "error: remat-bench-register-shapes needs x86-64\n");
  return 1;
}
#endif
