//===- tools/remat-run/main.cpp - Run and time training steps -------------===//
//
// remat-run MODEL [--bind ...] [--input NAME=FILE.pb ...] [--steps N]
//           [--threads N] [--dump DIR]
// Everything lives in the driver library so that tests can call it.
//
//===----------------------------------------------------------------------===//
#include "driver/RunDriver.h"
#include "tools/GemmOption.h"
#include "tools/Stdout.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  remat::tools::reserveClosedStdout();
  llvm::InitLLVM initLLVM(argc, argv);
  if (!remat::tools::applyGemmOption())
    return 1;
  return remat::tools::finishStdout(remat::driver::runMain(argc, argv));
}
