//===- ir/OutputFile.h - Writing outputs atomically -------------*- C++ -*-===//
#ifndef REMAT_IR_OUTPUTFILE_H
#define REMAT_IR_OUTPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace remat {

/// A file written to a temporary beside its destination (so that the rename
/// stays within one file system) and renamed into place by commit();
/// destroyed uncommitted, or on SIGINT/SIGTERM while it exists, it removes
/// the temporary. Several pending files can be completed before any is
/// committed (a model and its data file).
///
/// Only a regular file (or nothing) is replaced: a character device or FIFO
/// (/dev/null, a named pipe) is written in place, as stdout is; a symbolic
/// link, a folder or any other kind of file is an error, so that nothing
/// but a regular file is ever renamed over.
class PendingFile {
public:
  /// Opens a temporary for \p path. Errors name \p path.
  static llvm::Expected<std::unique_ptr<PendingFile>>
  create(llvm::StringRef path);

  PendingFile(const PendingFile &) = delete;
  PendingFile &operator=(const PendingFile &) = delete;
  ~PendingFile();

  llvm::raw_fd_ostream &os() { return *os_; }

  /// Closes the temporary, reporting any write error.
  llvm::Error close();

  /// Renames the closed temporary to the destination.
  llvm::Error commit();

private:
  PendingFile(llvm::StringRef path, llvm::StringRef tempPath, int fd);

  std::string path_;
  std::string tempPath_;
  std::unique_ptr<llvm::raw_fd_ostream> os_;
  bool committed_ = false;
};

/// Checks, before any work is done, that an output file \p path given by
/// \p flag (named in the message, e.g. "--svg") can be created: its folder
/// exists and is writable, and \p path is not a folder, a symbolic link or
/// another kind PendingFile refuses. "" and "-" pass.
llvm::Error checkOutputPath(const llvm::Twine &flag, llvm::StringRef path);

/// Flushes stdout; a write error on it (a full disk, a closed stdout) is
/// returned as "cannot write to stdout: ..." and cleared, so that it is
/// reported once rather than fatally when the stream is destroyed.
llvm::Error checkStdout();

/// Writes \p contents to \p path ("-" is stdout) through a PendingFile, so
/// an error never leaves a partial or clobbered file.
llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef contents);

} // namespace remat

#endif // REMAT_IR_OUTPUTFILE_H
