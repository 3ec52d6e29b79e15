//===- ir/Limits.h - Checked sizes and input files --------------*- C++ -*-===//
//
// Every byte count that comes from a file or a flag (a declared shape, a BERT
// config, --threads) is checked before it is allocated: its product must fit
// 64 bits (TensorType::checkSize) and must not exceed the memory limit, which
// is --max-memory or, by default, the memory the machine has available
// (MemAvailable in /proc/meminfo). The error names the tensor, its shape and
// the bytes, so that a hostile or mistaken input is one `error:` line rather
// than an out-of-memory abort. Input files are read only when they are
// regular files (or "-" for stdin), so /dev/zero is not read forever.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_LIMITS_H
#define REMAT_IR_LIMITS_H

#include "ir/Types.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <string>

namespace remat::ir {

/// \returns the bytes of memory this machine has available now
/// (MemAvailable from /proc/meminfo; physical memory where that is missing).
uint64_t getAvailableMemoryBytes();

/// \returns the bound that allocations sized by a file or flag are checked
/// against: the --max-memory value if one was set, else
/// getAvailableMemoryBytes() (read once, on first use).
uint64_t getMemoryLimitBytes();

/// Sets the bound (--max-memory); 0 restores the default.
void setMemoryLimitBytes(uint64_t bytes);

/// \returns "the 21.4 GiB available" or "--max-memory (1.0 GiB)": how an
/// error names the bound.
std::string describeMemoryLimit();

/// \returns \p bytes with one decimal in the largest fitting binary unit:
/// "38.2 GiB", "512 B".
std::string formatBytesShort(uint64_t bytes);

/// Checks that \p type (of the thing \p what, e.g. "input 'x'") has a byte
/// size that fits 64 bits and the memory limit. \returns an error naming
/// \p what, the type and the bytes.
llvm::Error checkAllocation(const TensorType &type, const llvm::Twine &what);

/// Checks that \p bytes for \p what fit the memory limit.
llvm::Error checkAllocationBytes(uint64_t bytes, const llvm::Twine &what);

/// The bytes one load allocates, counted as one total against the memory
/// limit: a model's initializers and constants, its external data, the
/// weights files read with it. Each loader opens one; a scope opened while
/// another is open on the same thread joins it, so that a tool that reads
/// a model and then its weights counts them together. Example:
/// \code
///   ir::LoadBudget budget;             // total 0
///   chargeLoadBytes(1 << 30, "w1");    // total 1 GiB
///   chargeLoadBytes(1 << 30, "w2");    // total 2 GiB, or an error
/// \endcode
class LoadBudget {
public:
  LoadBudget();
  ~LoadBudget();
  LoadBudget(const LoadBudget &) = delete;
  LoadBudget &operator=(const LoadBudget &) = delete;

  /// \returns the bytes charged to the open load so far (0 when none).
  static uint64_t getChargedBytes();

private:
  /// Whether this scope opened the load (else it joined an outer one).
  bool owner_ = false;
};

/// Charges \p bytes for \p what (e.g. "initializer 'w' of type f32[4]")
/// to the open LoadBudget and checks the total against the memory limit;
/// without an open one, checks \p bytes alone. \returns an error naming
/// \p what, its bytes, the total and the limit.
llvm::Error chargeLoadBytes(uint64_t bytes, const llvm::Twine &what);

/// chargeLoadBytes() for a tensor of \p type, which must also fit 64 bits.
llvm::Error chargeLoadAllocation(const TensorType &type,
                                 const llvm::Twine &what);

/// Checks that \p path names a regular file (a device, pipe or directory is
/// refused). \returns an error naming \p path.
llvm::Error checkRegularFile(llvm::StringRef path);

/// Reads \p path whole after checking that it is a regular file no larger
/// than the memory limit; "-" reads stdin when \p allowStdin.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, bool allowStdin = false,
              bool isText = false);

/// Most nodes a graph read from a file may have, counted as it is built
/// (local functions inlined, for ONNX): a few kilobytes of nested function
/// calls could otherwise ask for billions of nodes. remat's largest models
/// have tens of thousands.
constexpr uint64_t kMaxGraphNodes = 1000000;

/// Deepest nesting of arrays and objects a JSON file read by remat may
/// have. llvm::json's parser recurses once per level, so a deeper file
/// would overflow the stack; remat's own files nest a few levels.
constexpr unsigned kMaxJsonDepth = 64;

/// Errors if \p json nests arrays and objects deeper than kMaxJsonDepth,
/// naming \p sourceName and the line where it does; brackets in strings do
/// not count. Call it before llvm::json::parse on any file a user gives.
llvm::Error checkJsonDepth(llvm::StringRef json, llvm::StringRef sourceName);

/// Checks that \p text is valid UTF-8; \returns an error naming \p what
/// and the byte offset of the first bad byte.
llvm::Error checkUtf8(llvm::StringRef text, const llvm::Twine &what);

/// \returns \p text with non-printable bytes (NUL, controls, bytes >= 0x80)
/// written as \xNN, for messages.
std::string escapeForMessage(llvm::StringRef text);

/// \returns \p text with control characters (newline, tab, ESC, NUL, DEL)
/// written as \xNN and everything else, UTF-8 included, as it is: for
/// messages that quote names from a file.
std::string escapeControls(llvm::StringRef text);

} // namespace remat::ir

#endif // REMAT_IR_LIMITS_H
