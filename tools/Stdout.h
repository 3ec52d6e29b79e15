//===- tools/Stdout.h - The tools' stdout, closed or failing ----*- C++ -*-===//
//
// A write error on stdout (a full disk, `-o - > /dev/full`, a closed stdout)
// is one "error: cannot write to stdout: ..." line and exit status 1. Each
// tool's main calls reserveClosedStdout() before llvm::InitLLVM and returns
// finishStdout(its exit code).
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_TOOLS_STDOUT_H
#define REMAT_TOOLS_STDOUT_H

#include "ir/OutputFile.h"

#include "llvm/Support/raw_ostream.h"

#include <fcntl.h>
#include <unistd.h>

namespace remat::tools {

/// A closed stdout would be given to the next file opened (InitLLVM puts
/// /dev/null there, where writes succeed unseen): put /dev/null there
/// read-only instead, so that every write to stdout fails and is reported.
inline void reserveClosedStdout() {
  if (fcntl(STDOUT_FILENO, F_GETFD) != -1)
    return;
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  if (fd != STDOUT_FILENO) {
    dup2(fd, STDOUT_FILENO); // dup2 clears FD_CLOEXEC on the copy
    close(fd);
  } else {
    fcntl(STDOUT_FILENO, F_SETFD, 0);
  }
}

/// \returns \p exitCode, or 1 after printing the error when stdout could
/// not be written (not when the tool failed already and said why).
inline int finishStdout(int exitCode) {
  llvm::Error err = checkStdout();
  if (!err)
    return exitCode;
  if (exitCode != 0) {
    llvm::consumeError(std::move(err));
    return exitCode;
  }
  llvm::errs() << "error: " << llvm::toString(std::move(err)) << "\n";
  return 1;
}

} // namespace remat::tools

#endif // REMAT_TOOLS_STDOUT_H
