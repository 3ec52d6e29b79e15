//===- ir/OutputFile.cpp - Writing outputs atomically ---------------------===//
#include "ir/OutputFile.h"

#include "ir/Support.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"

namespace remat {

namespace {

/// What writing to \p path does, from what is there now (links not
/// followed).
enum class Destination { Replace, WriteThrough };

llvm::Expected<Destination> classify(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec =
          llvm::sys::fs::status(path, status, /*Follow=*/false)) {
    if (ec == std::errc::no_such_file_or_directory)
      return Destination::Replace;
    return makeError("cannot write '" + path + "': " + ec.message());
  }
  switch (status.type()) {
  case llvm::sys::fs::file_type::regular_file:
    return Destination::Replace;
  case llvm::sys::fs::file_type::character_file:
  case llvm::sys::fs::file_type::fifo_file:
    return Destination::WriteThrough;
  case llvm::sys::fs::file_type::directory_file:
    return makeError("cannot write '" + path + "': it is a directory");
  case llvm::sys::fs::file_type::symlink_file:
    return makeError("cannot write '" + path +
                     "': it is a symbolic link, which remat neither follows "
                     "nor replaces; name the file it points to");
  default:
    return makeError("cannot write '" + path +
                     "': it is not a regular file, a character device or a "
                     "FIFO");
  }
}

} // namespace

llvm::Expected<std::unique_ptr<PendingFile>>
PendingFile::create(llvm::StringRef path) {
  auto destination = classify(path);
  if (!destination)
    return destination.takeError();
  int fd;
  if (*destination == Destination::WriteThrough) {
    // Like stdout: written in place, never renamed over (a FIFO waits here
    // for its reader).
    if (std::error_code ec = llvm::sys::fs::openFileForWrite(
            path, fd, llvm::sys::fs::CD_OpenExisting))
      return makeError("cannot write '" + path + "': " + ec.message());
    return std::unique_ptr<PendingFile>(new PendingFile(path, "", fd));
  }
  // Ctrl-C or SIGTERM while it is written removes it. Its name is
  // registered for that before the file is created: a signal between
  // creating and registering it (delivered to any of the process's threads,
  // so not one a mask here could hold) would leave it behind.
  llvm::SmallString<256> tempPath;
  for (unsigned attempt = 1;; ++attempt) {
    llvm::sys::fs::createUniquePath(path + ".tmp-%%%%%%", tempPath,
                                    /*MakeAbsolute=*/false);
    if (!llvm::sys::fs::exists(tempPath)) {
      llvm::sys::RemoveFileOnSignal(tempPath);
      std::error_code ec = llvm::sys::fs::openFileForWrite(
          tempPath, fd, llvm::sys::fs::CD_CreateNew);
      if (!ec)
        break;
      llvm::sys::DontRemoveFileOnSignal(tempPath);
      if (ec != std::errc::file_exists)
        return makeError("cannot write '" + path + "': " + ec.message());
    }
    if (attempt == 128)
      return makeError("cannot write '" + path +
                       "': no unused temporary name beside it");
  }
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
  if (!committed_ && !tempPath_.empty()) {
    llvm::sys::fs::remove(tempPath_);
    llvm::sys::DontRemoveFileOnSignal(tempPath_);
  }
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
  if (tempPath_.empty()) {
    committed_ = true;
    return llvm::Error::success();
  }
  // What is there may have changed while the temporary was written.
  auto destination = classify(path_);
  if (!destination)
    return destination.takeError();
  if (*destination != Destination::Replace)
    return makeError("cannot write '" + path_ +
                     "': it became a device or FIFO while it was written");
  if (std::error_code ec = llvm::sys::fs::rename(tempPath_, path_))
    return makeError("cannot write '" + path_ + "': " + ec.message());
  committed_ = true;
  llvm::sys::DontRemoveFileOnSignal(tempPath_);
  return llvm::Error::success();
}

llvm::Error checkOutputPath(const llvm::Twine &flag, llvm::StringRef path) {
  if (path.empty() || path == "-")
    return llvm::Error::success();
  auto destination = classify(path);
  std::string refusal =
      destination ? "" : errorToString(destination.takeError());
  // A device or FIFO is written in place: its folder does not matter.
  if (destination && *destination == Destination::WriteThrough) {
    if (llvm::sys::fs::access(path, llvm::sys::fs::AccessMode::Write))
      return makeError(flag + ": cannot write '" + path +
                       "': it is not writable");
    return llvm::Error::success();
  }
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
  if (!refusal.empty())
    return makeError(flag + ": " + refusal);
  return llvm::Error::success();
}

llvm::Error checkStdout() {
  llvm::outs().flush();
  if (!llvm::outs().has_error())
    return llvm::Error::success();
  std::string message = llvm::outs().error().message();
  // Reported here, not again (fatally) when the stream is destroyed.
  llvm::outs().clear_error();
  return makeError("cannot write to stdout: " + message);
}

llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef contents) {
  if (path == "-") {
    llvm::outs() << contents;
    return checkStdout();
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
