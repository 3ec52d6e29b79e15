//===- ir/Limits.cpp - Checked sizes and input files ----------------------===//
#include "ir/Limits.h"

#include "ir/Support.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace remat::ir {

namespace {
/// 0: the default (available memory).
std::atomic<uint64_t> memoryLimitFlag{0};
} // namespace

uint64_t getAvailableMemoryBytes() {
  if (FILE *file = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (std::fgets(line, sizeof(line), file))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        found = true;
        break;
      }
    std::fclose(file);
    if (found)
      return uint64_t(kib) * 1024;
  }
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0)
    return uint64_t(pages) * uint64_t(pageSize);
  return UINT64_MAX;
}

uint64_t getMemoryLimitBytes() {
  if (uint64_t flag = memoryLimitFlag.load())
    return flag;
  static const uint64_t available = getAvailableMemoryBytes();
  return available;
}

void setMemoryLimitBytes(uint64_t bytes) { memoryLimitFlag.store(bytes); }

std::string formatBytesShort(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = double(bytes);
  unsigned unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0)
    return std::to_string(bytes) + " B";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s", value, units[unit]);
  return text;
}

std::string describeMemoryLimit() {
  if (uint64_t flag = memoryLimitFlag.load())
    return "--max-memory (" + formatBytesShort(flag) + ")";
  return "the " + formatBytesShort(getMemoryLimitBytes()) +
         " of memory available (--max-memory sets the limit)";
}

llvm::Error checkAllocationBytes(uint64_t bytes, const llvm::Twine &what) {
  if (bytes <= getMemoryLimitBytes())
    return llvm::Error::success();
  return makeError(what + " needs " + llvm::Twine(bytes) + " bytes (" +
                   formatBytesShort(bytes) + "), more than " +
                   describeMemoryLimit());
}

namespace {
/// The open load's total on this thread; null outside a LoadBudget.
thread_local uint64_t *openLoadBytes = nullptr;
thread_local uint64_t loadBytes = 0;
} // namespace

LoadBudget::LoadBudget() {
  if (openLoadBytes)
    return;
  owner_ = true;
  loadBytes = 0;
  openLoadBytes = &loadBytes;
}

LoadBudget::~LoadBudget() {
  if (owner_)
    openLoadBytes = nullptr;
}

uint64_t LoadBudget::getChargedBytes() {
  return openLoadBytes ? *openLoadBytes : 0;
}

llvm::Error chargeLoadBytes(uint64_t bytes, const llvm::Twine &what) {
  if (!openLoadBytes)
    return checkAllocationBytes(bytes, what);
  uint64_t limit = getMemoryLimitBytes();
  uint64_t before = *openLoadBytes;
  if (bytes <= limit && before <= limit - bytes) {
    *openLoadBytes = before + bytes;
    return llvm::Error::success();
  }
  if (before == 0)
    return checkAllocationBytes(bytes, what);
  return makeError(what + " needs " + llvm::Twine(bytes) + " bytes (" +
                   formatBytesShort(bytes) + "), which with the " +
                   formatBytesShort(before) +
                   " already loaded is more than " + describeMemoryLimit());
}

llvm::Error chargeLoadAllocation(const TensorType &type,
                                 const llvm::Twine &what) {
  if (auto err = type.checkSize())
    return makeError(what + ": " + errorToString(std::move(err)));
  return chargeLoadBytes(uint64_t(type.getByteSize()),
                         what + " of type " + type.str());
}

llvm::Error checkAllocation(const TensorType &type, const llvm::Twine &what) {
  if (auto err = type.checkSize())
    return makeError(what + ": " + errorToString(std::move(err)));
  return checkAllocationBytes(uint64_t(type.getByteSize()),
                              what + " of type " + type.str());
}

llvm::Error checkRegularFile(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return makeError("cannot open '" + path + "': " + ec.message());
  if (status.type() == llvm::sys::fs::file_type::directory_file)
    return makeError("cannot read '" + path + "': it is a directory");
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return makeError("cannot read '" + path +
                     "': not a regular file (a device, pipe or socket)");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, bool allowStdin, bool isText) {
  if (allowStdin && path == "-") {
    // A file or pipe, read up to the memory limit; a device (< /dev/zero)
    // is refused, since it would be read forever.
    struct stat status;
    if (fstat(STDIN_FILENO, &status) != 0)
      return makeError("cannot read stdin: " +
                       std::error_code(errno, std::generic_category()).message());
    if (!S_ISREG(status.st_mode) && !S_ISFIFO(status.st_mode) &&
        !S_ISSOCK(status.st_mode))
      return makeError("cannot read stdin: not a regular file or pipe (a "
                       "device or directory)");
    uint64_t limit = getMemoryLimitBytes();
    std::string text;
    char block[1 << 16];
    while (true) {
      ssize_t n = read(STDIN_FILENO, block, sizeof(block));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return makeError(
            "cannot read stdin: " +
            std::error_code(errno, std::generic_category()).message());
      if (n == 0)
        break;
      if (text.size() + size_t(n) > limit)
        return makeError("cannot read stdin: it holds more than " +
                         describeMemoryLimit());
      text.append(block, size_t(n));
    }
    return llvm::MemoryBuffer::getMemBufferCopy(text, "<stdin>");
  }
  if (path.contains('\0'))
    return makeError("cannot open '" + escapeForMessage(path) +
                     "': the path contains a NUL byte");
  if (auto err = checkRegularFile(path))
    return std::move(err);
  uint64_t size = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, size))
    return makeError("cannot open '" + path + "': " + ec.message());
  if (auto err = checkAllocationBytes(size, "reading '" + path + "'"))
    return std::move(err);
  auto buffer = llvm::MemoryBuffer::getFile(path, isText,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeError("cannot open '" + path +
                     "': " + buffer.getError().message());
  return std::move(*buffer);
}

llvm::Error checkUtf8(llvm::StringRef text, const llvm::Twine &what) {
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.data());
  const llvm::UTF8 *bad = begin;
  if (llvm::isLegalUTF8String(&bad, begin + text.size()))
    return llvm::Error::success();
  return makeError(what + " is not valid UTF-8 (bad byte 0x" +
                   llvm::utohexstr(*bad, /*LowerCase=*/true) + " at offset " +
                   llvm::Twine(bad - begin) + ")");
}

namespace {
/// \returns \p text with each byte that \p keep refuses written as \xNN.
std::string escapeBytes(llvm::StringRef text, bool (*keep)(unsigned char)) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (keep(c)) {
      out += char(c);
      continue;
    }
    char escaped[8];
    std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
    out += escaped;
  }
  return out;
}
} // namespace

std::string escapeForMessage(llvm::StringRef text) {
  return escapeBytes(text, [](unsigned char c) {
    return c >= 0x20 && c < 0x7f && c != '\\';
  });
}

std::string escapeControls(llvm::StringRef text) {
  return escapeBytes(text,
                     [](unsigned char c) { return c >= 0x20 && c != 0x7f; });
}

llvm::Error checkJsonDepth(llvm::StringRef json, llvm::StringRef sourceName) {
  unsigned depth = 0, line = 1;
  bool inString = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (c == '\n')
      ++line;
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return makeError(sourceName + ":" + llvm::Twine(line) +
                         ": invalid JSON: nested deeper than " +
                         llvm::Twine(kMaxJsonDepth) + " levels");
    } else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return llvm::Error::success();
}

} // namespace remat::ir
