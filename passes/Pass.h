//===- passes/Pass.h - The pass interface -----------------------*- C++ -*-===//
#ifndef REMAT_PASSES_PASS_H
#define REMAT_PASSES_PASS_H

#include "ir/Graph.h"
#include "ir/NodeEvaluator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace remat::passes {

/// A memory amount given by a user: bytes ("6GiB", "512MiB", "1000000"), or
/// a percentage ("40%") of a reference the reader knows (for remat's budget,
/// the planned peak without remat).
struct ByteAmount {
  uint64_t bytes = 0;
  double percent = 0;
  bool isPercent = false;
  bool isSet = false;
  /// \returns the bytes, resolving a percentage against \p referenceBytes.
  uint64_t resolve(uint64_t referenceBytes) const {
    return isPercent ? uint64_t(double(referenceBytes) * percent / 100.0)
                     : bytes;
  }
  /// \returns the text it was parsed from, normalised ("6 GiB", "40%").
  std::string str() const;
};

/// \returns \p text as a byte count: an integer or decimal number with an
/// optional unit B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB
/// (powers of 1000). Errors say what was expected.
llvm::Expected<uint64_t> parseByteSize(llvm::StringRef text);
/// \returns \p text as a byte size, or with \p allowPercent as a
/// percentage in (0, 1000]% ("40%").
llvm::Expected<ByteAmount> parseByteAmount(llvm::StringRef text,
                                           bool allowPercent);

/// An option whose value is one of a fixed list of words.
struct EnumOptionStorage {
  std::string *value;
  std::vector<std::string> choices;
};
/// An option that takes a byte size, or also a percentage.
struct ByteOptionStorage {
  ByteAmount *value;
  bool allowPercent;
};

/// One option a pass accepts in a pipeline: `name{key=value}`.
struct PassOption {
  std::string name;
  std::string description;
  /// Where the parsed value is stored, which also fixes its kind.
  std::variant<int64_t *, double *, bool *, std::string *, EnumOptionStorage,
               ByteOptionStorage>
      storage;
  /// \returns "int", "float", "bool", "string", the choices joined by '|'
  /// ("none|auto"), "bytes" or "bytes|percent".
  std::string kindName() const;
};

/// What a pass gets from whoever runs it (the driver, a test) rather than from
/// a layer passes/ may not include. The PassManager hands its context to
/// every pass before running it.
struct PassContext {
  /// Evaluates one node on constant data, for fold-constants and
  /// canonicalize: runtime::cpu::makeCpuEvaluator(), the reference kernels.
  ir::NodeEvaluator evaluator;
};

/// What the passes of a pipeline found or decided that whoever ran it reads
/// afterwards: one typed field per kind of result, filled by the pass that
/// has it (Pass::addResults), so that no caller looks a pass up by its name.
struct PassResults {
  /// The remat pass's decisions (the "remat" section of --report, the API's
  /// plan), from the last remat pass that ran.
  std::optional<llvm::json::Object> rematReport;
};

/// A transformation or analysis over a Graph. Passes are created by the
/// PassRegistry from passes/Passes.def; nothing registers itself at load.
class Pass {
public:
  virtual ~Pass();

  /// The name used in pipelines ("dce", "fold-constants").
  virtual llvm::StringRef getName() const = 0;
  /// One line for --list-passes.
  virtual llvm::StringRef getSummary() const = 0;

  /// Runs the pass on \p graph. \returns whether it changed the graph, or an
  /// error a user can act on. Must keep Note [Schedule]; the PassManager
  /// verifies after every pass.
  virtual llvm::Expected<bool> run(ir::Graph &graph) = 0;

  /// Adds what the last run() found or decided to \p results. The
  /// PassManager calls it after each successful run; most passes have
  /// nothing to add.
  virtual void addResults(PassResults &results) const { (void)results; }

  llvm::ArrayRef<PassOption> getOptions() const { return options_; }
  /// Parses \p value into option \p key. An unknown key is an error that
  /// lists the options this pass has.
  llvm::Error setOption(llvm::StringRef key, llvm::StringRef value);

  /// Sets where warnings and notes go (llvm::errs() by default; the
  /// PassManager passes its own stream on when it has one).
  void setDiagnosticStream(llvm::raw_ostream *os) { diagnostics_ = os; }

  /// Sets what the pass gets from outside; \p context must outlive run().
  void setContext(const PassContext &context) { context_ = &context; }
  /// \returns the context set last (an empty one before any).
  const PassContext &getContext() const;

protected:
  /// Prints "warning: <message>" on the diagnostic stream: for what a user
  /// should know but that does not stop the pass.
  void emitWarning(const llvm::Twine &message);
  /// Prints "note: <message>" on the diagnostic stream.
  void emitNote(const llvm::Twine &message);
  /// Prints \p text as it is on the diagnostic stream (reports such as
  /// remat's --explain).
  void emitRaw(llvm::StringRef text);
  /// \returns the context's evaluator, or an error naming this pass when
  /// whoever runs it gave none.
  llvm::Expected<const ir::NodeEvaluator *> getEvaluator() const;

  /// Declares an option stored in \p storage (a member of the pass that
  /// already holds its default).
  template <typename T>
  void declareOption(llvm::StringRef name, llvm::StringRef description,
                     T *storage) {
    options_.push_back(PassOption{name.str(), description.str(), storage});
  }
  /// Declares an option that takes one of \p choices (checked when parsed).
  void declareEnumOption(llvm::StringRef name, llvm::StringRef description,
                         std::string *storage,
                         std::vector<std::string> choices) {
    options_.push_back(PassOption{name.str(), description.str(),
                                  EnumOptionStorage{storage, std::move(choices)}});
  }
  /// Declares a byte-size option, also accepting a percentage when
  /// \p allowPercent is set.
  void declareByteOption(llvm::StringRef name, llvm::StringRef description,
                         ByteAmount *storage, bool allowPercent) {
    options_.push_back(PassOption{name.str(), description.str(),
                                  ByteOptionStorage{storage, allowPercent}});
  }

private:
  llvm::SmallVector<PassOption, 2> options_;
  llvm::raw_ostream *diagnostics_ = nullptr;
  const PassContext *context_ = nullptr;
};

} // namespace remat::passes

#endif // REMAT_PASSES_PASS_H
