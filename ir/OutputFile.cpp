//===- ir/OutputFile.cpp - Writing outputs atomically ---------------------===//
#include "ir/OutputFile.h"

#include "ir/Support.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace remat {

llvm::Expected<std::unique_ptr<PendingFile>>
PendingFile::create(llvm::StringRef path) {
  if (llvm::sys::fs::is_directory(path))
    return makeError("cannot write '" + path + "': it is a directory");
  llvm::SmallString<256> tempPath;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%", fd, tempPath))
    return makeError("cannot write '" + path + "': " + ec.message());
  return std::unique_ptr<PendingFile>(new PendingFile(path, tempPath, fd));
}

PendingFile::PendingFile(llvm::StringRef path, llvm::StringRef tempPath, int fd)
    : path_(path.str()), tempPath_(tempPath.str()),
      os_(std::make_unique<llvm::raw_fd_ostream>(fd, /*shouldClose=*/true)) {}

PendingFile::~PendingFile() {
  if (os_) {
    os_->close();
    os_->clear_error();
  }
  if (!committed_)
    llvm::sys::fs::remove(tempPath_);
}

llvm::Error PendingFile::close() {
  os_->close();
  if (!os_->has_error())
    return llvm::Error::success();
  std::string message = os_->error().message();
  os_->clear_error();
  return makeError("cannot write '" + path_ + "': " + message);
}

llvm::Error PendingFile::commit() {
  if (std::error_code ec = llvm::sys::fs::rename(tempPath_, path_))
    return makeError("cannot write '" + path_ + "': " + ec.message());
  committed_ = true;
  return llvm::Error::success();
}

llvm::Error checkOutputPath(const llvm::Twine &flag, llvm::StringRef path) {
  if (path.empty() || path == "-")
    return llvm::Error::success();
  llvm::SmallString<256> folder = llvm::sys::path::parent_path(path);
  if (folder.empty())
    folder = ".";
  if (!llvm::sys::fs::is_directory(folder))
    return makeError(flag + ": cannot write '" + path + "': folder '" +
                     folder + "' does not exist");
  if (llvm::sys::fs::access(folder, llvm::sys::fs::AccessMode::Write))
    return makeError(flag + ": cannot write '" + path + "': folder '" +
                     folder + "' is not writable");
  if (llvm::sys::fs::is_directory(path))
    return makeError(flag + ": cannot write '" + path + "': it is a folder");
  return llvm::Error::success();
}

llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef contents) {
  if (path == "-") {
    llvm::outs() << contents;
    llvm::outs().flush();
    return llvm::Error::success();
  }
  auto file = PendingFile::create(path);
  if (!file)
    return file.takeError();
  (*file)->os() << contents;
  if (auto err = (*file)->close())
    return err;
  return (*file)->commit();
}

} // namespace remat
