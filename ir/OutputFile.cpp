//===- ir/OutputFile.cpp - Writing outputs atomically -----------------===//
#include "ir/OutputFile.h"

#include "ir/Support.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace remat {

llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef contents) {
  if (path == "-") {
    llvm::outs() << contents;
    llvm::outs().flush();
    return llvm::Error::success();
  }
  if (llvm::sys::fs::is_directory(path))
    return makeError("cannot write '" + path + "': it is a directory");
  // The temporary lives in the destination's directory so that the final
  // rename stays within one file system and is atomic.
  llvm::SmallString<256> tempPath;
  int fd;
  std::error_code ec = llvm::sys::fs::createUniqueFile(
      path + ".tmp-%%%%%%", fd, tempPath);
  if (ec)
    return makeError("cannot write '" + path + "': " + ec.message());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << contents;
    os.close();
    if (os.has_error()) {
      std::string message = os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(tempPath);
      return makeError("cannot write '" + path + "': " + message);
    }
  }
  if ((ec = llvm::sys::fs::rename(tempPath, path))) {
    llvm::sys::fs::remove(tempPath);
    return makeError("cannot write '" + path + "': " + ec.message());
  }
  return llvm::Error::success();
}

} // namespace remat
