//===- tests/unit/main.cpp - doctest entry point ------------------------===//
//
// doctest's main, after the tools' GEMM option (tools/GemmOption.h): ctest's
// unit.openblas_path and unit.avx2_path set REMAT_GEMM to run the kernel
// tests on OpenBLAS and on the AVX2 kernel.
//
//===----------------------------------------------------------------------===//
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tools/GemmOption.h"

int main(int argc, char **argv) {
  if (!remat::tools::applyGemmOption())
    return 1;
  return doctest::Context(argc, argv).run();
}
