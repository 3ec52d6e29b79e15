//===- tools/remat-sweep/main.cpp - The memory/time trade-off curve -------===//
//
// remat-sweep MODEL [--bind ...] [--budgets ...] [--strategies ...]
//             [--measure [--backend cpu] [--steps N] [--threads N]]
//             [--csv F] [--json F] [--svg F] [--peers F.csv]
// Everything lives in the driver library (driver/SweepDriver.cpp).
//
//===----------------------------------------------------------------------===//
#include "driver/SweepDriver.h"
#include "tools/GemmOption.h"
#include "tools/Stdout.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  remat::tools::reserveClosedStdout();
  llvm::InitLLVM initLLVM(argc, argv);
  if (!remat::tools::applyGemmOption())
    return 1;
  return remat::tools::finishStdout(remat::driver::sweepMain(argc, argv));
}
