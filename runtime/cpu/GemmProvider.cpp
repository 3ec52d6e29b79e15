//===- runtime/cpu/GemmProvider.cpp - Who runs the f32 GEMMs --------------===//
//
// The process's GEMM provider, and OpenBLAS's core type for a program's main
// to set (runtime/cpu/GemmProvider.h).
//
// Note [OpenBLAS core type]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels at load time from the
// CPU's vendor, family and model, and 0.3.21 falls back to its oldest
// kernels on a CPU it has no entry for: on an AVX-512 Xeon VM it ran
// Prescott kernels, and the forward step took twice as long as with
// OPENBLAS_CORETYPE=Haswell (tools/bench/bert_forward_vs_ort.py: 4855 ms
// against 2491 ms at batch 1, seq 512). (On an AMD EPYC Zen 3 it picks
// "Zen", whose sgemm is Haswell's.) selectOpenBlasCore picks from what the
// CPU can do instead (cpuid feature bits, which name no model and so hold
// for CPUs newer than the library): AVX-512 F/BW/DQ/VL ->
// SkylakeX (what later OpenBLAS releases run on Zen 4 too), AVX2 + FMA ->
// Haswell, anything else -> OpenBLAS's own choice; a choice of OpenBLAS's
// that is as good is kept. It re-initialises OpenBLAS with that core through
// gotoblas_dynamic_quit/gotoblas_dynamic_init (exported by DYNAMIC_ARCH
// builds only; looked up with dlsym, so a static or single-arch OpenBLAS is
// left as it is), which read the core from OPENBLAS_CORETYPE.
//
// Setting an environment variable and swapping the kernels of a library the
// whole process shares is the process's owner's decision, not a library's:
// the tools and the unit tests' main call it at start (tools/GemmOption.h),
// before any OpenBLAS call; a program that embeds libremat keeps OpenBLAS's
// own choice. OPENBLAS_CORETYPE set by the user wins. Bits then depend on
// the core type, which depends only on the CPU: results stay identical for
// every thread count (Note [OpenBLAS threads] in runtime/cpu/Linalg.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/GemmProvider.h"

#include "runtime/cpu/PackedSgemm.h"

#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <cblas.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>

namespace remat::runtime::cpu {

namespace {

constexpr GemmProvider kProviders[] = {
    GemmProvider::OpenBlas, GemmProvider::RematAvx2, GemmProvider::RematAvx512};

/// The chosen provider, or -1 for getDefaultGemmProvider().
std::atomic<int> gChosenProvider{-1};

} // namespace

GemmProvider getDefaultGemmProvider() {
  static const GemmProvider provider =
      isGemmProviderSupported(GemmProvider::RematAvx512)
          ? GemmProvider::RematAvx512
      : isGemmProviderSupported(GemmProvider::RematAvx2)
          ? GemmProvider::RematAvx2
          : GemmProvider::OpenBlas;
  return provider;
}

bool isGemmProviderSupported(GemmProvider provider) {
  switch (provider) {
  case GemmProvider::OpenBlas:
    return true;
  case GemmProvider::RematAvx2:
    return packedSgemmSupports(PackedSgemmIsa::Avx2);
  case GemmProvider::RematAvx512:
    return packedSgemmSupports(PackedSgemmIsa::Avx512);
  }
  return false;
}

GemmProvider getGemmProvider() {
  int chosen = gChosenProvider.load(std::memory_order_relaxed);
  return chosen < 0 ? getDefaultGemmProvider() : GemmProvider(chosen);
}

llvm::Error setGemmProvider(GemmProvider provider) {
  if (!isGemmProviderSupported(provider))
    return makeError(
        "this CPU cannot run the " + getGemmProviderName(provider) +
        " GEMM provider (remat's " + getGemmProviderName(provider) +
        " kernel needs " +
        (provider == GemmProvider::RematAvx512 ? "AVX-512F" : "AVX2 and FMA") +
        ")");
  gChosenProvider.store(int(provider), std::memory_order_relaxed);
  return llvm::Error::success();
}

llvm::StringRef getGemmProviderName(GemmProvider provider) {
  switch (provider) {
  case GemmProvider::OpenBlas:
    return "openblas";
  case GemmProvider::RematAvx2:
    return "avx2";
  case GemmProvider::RematAvx512:
    return "avx512";
  }
  return "openblas";
}

llvm::Expected<GemmProvider> parseGemmProvider(llvm::StringRef name) {
  for (GemmProvider provider : kProviders)
    if (name == getGemmProviderName(provider))
      return provider;
  return makeError("unknown GEMM provider '" + name +
                   "' (known: openblas, avx2, avx512)");
}

std::string selectOpenBlasCore() {
  std::string current = openblas_get_corename();
  if (std::getenv("OPENBLAS_CORETYPE"))
    return current;
  const char *wanted = nullptr;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    wanted = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    wanted = "Haswell";
#endif
  // Keep a library's choice that is at least as good (a newer OpenBLAS may
  // know a newer core): any AVX-512 core, and on an AVX2 CPU Haswell or Zen
  // (Zen's sgemm is Haswell's). Every other x86 core name has older kernels.
  static const char *const kAvx512Cores[] = {"SkylakeX", "Cooperlake",
                                             "SapphireRapids"};
  static const char *const kAvx2Cores[] = {"Haswell", "Zen"};
  auto isOneOf = [&](llvm::ArrayRef<const char *> names) {
    return llvm::any_of(names, [&](const char *name) {
      return llvm::StringRef(current).equals_insensitive(name);
    });
  };
  if (!wanted || isOneOf(kAvx512Cores) ||
      (llvm::StringRef(wanted) == "Haswell" && isOneOf(kAvx2Cores)))
    return current;
  reinitOpenBlasCore(wanted);
  return openblas_get_corename();
}

bool reinitOpenBlasCore(const char *core) {
  using InitFn = void (*)();
  auto quit =
      reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init =
      reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (!quit || !init)
    return false;
  // gotoblas_dynamic_init reads the core from OPENBLAS_CORETYPE; restore
  // the environment afterwards.
  const char *old = std::getenv("OPENBLAS_CORETYPE");
  std::string saved = old ? old : "";
  setenv("OPENBLAS_CORETYPE", core, 1);
  quit();
  init();
  if (old)
    setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  else
    unsetenv("OPENBLAS_CORETYPE");
  return true;
}

} // namespace remat::runtime::cpu
