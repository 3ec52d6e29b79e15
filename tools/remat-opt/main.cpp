//===- tools/remat-opt/main.cpp - The graph rewriting tool ----------------===//
//
// remat-opt INPUT [-o OUT] [-p PIPELINE] [--print-ir] [--list-passes] ...
// Everything lives in the driver library so that tests can call it.
//
//===----------------------------------------------------------------------===//
#include "driver/OptDriver.h"
#include "tools/GemmOption.h"
#include "tools/Stdout.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  remat::tools::reserveClosedStdout();
  llvm::InitLLVM initLLVM(argc, argv);
  if (!remat::tools::applyGemmOption())
    return 1;
  return remat::tools::finishStdout(remat::driver::optMain(argc, argv));
}
