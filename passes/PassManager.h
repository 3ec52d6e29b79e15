//===- passes/PassManager.h - Pipelines of passes ---------------*- C++ -*-===//
#ifndef REMAT_PASSES_PASSMANAGER_H
#define REMAT_PASSES_PASSMANAGER_H

#include "passes/Pass.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace remat::passes {

/// Creates passes by name. Filled explicitly by registerAllPasses() from
/// passes/Passes.def.
class PassRegistry {
public:
  using Factory = std::function<std::unique_ptr<Pass>()>;

  /// Adds pass \p name; names must be unique.
  void add(llvm::StringRef name, Factory factory);
  /// \returns a new instance of pass \p name, or an error listing the
  /// registered passes.
  llvm::Expected<std::unique_ptr<Pass>> create(llvm::StringRef name) const;
  /// \returns the registered names in registration order.
  std::vector<std::string> getNames() const;

  /// Prints each pass, its summary and its options (for --list-passes).
  void printPasses(llvm::raw_ostream &os) const;

private:
  std::vector<std::pair<std::string, Factory>> entries_;
};

/// Registers every pass of Passes.def into \p registry, then runs the
/// callbacks of addPassRegistrationCallback().
void registerAllPasses(PassRegistry &registry);

/// Makes registerAllPasses() also run \p callback: how the passes of a
/// plugin that remat-opt --load-pass-plugin loaded join the built-in ones
/// (remat/PassPlugin.h). Called explicitly by the loader, never at load.
void addPassRegistrationCallback(void (*callback)(PassRegistry &registry));

/// Runs passes in order, verifying the graph after each.
class PassManager {
public:
  void addPass(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  /// Sends the warnings and notes of every pass to \p os (default
  /// llvm::errs()).
  void setDiagnosticStream(llvm::raw_ostream *os) { diagnostics_ = os; }
  /// Sets what every pass gets from outside (the constant evaluator of
  /// fold-constants and canonicalize); run() hands it to each pass.
  void setContext(PassContext context) { context_ = std::move(context); }
  size_t size() const { return passes_.size(); }
  /// What the passes of the last run() reported (Pass::addResults).
  const PassResults &getResults() const { return results_; }
  /// Sets option \p key to \p value on every pass named \p passName in the
  /// pipeline (for command-line flags such as --unused-weights that stand
  /// for a pass option). A pass the pipeline lacks is an error: a flag for
  /// a pass that does not run must not be silently ignored.
  llvm::Error setPassOption(llvm::StringRef passName, llvm::StringRef key,
                            llvm::StringRef value);

  /// Prints the IR to \p os after every pass (--print-ir-after-all).
  void enablePrintAfterAll(llvm::raw_ostream *os) { printAfterAll_ = os; }
  /// Prints per-pass wall time to \p os after run() (--timing).
  void enableTiming(llvm::raw_ostream *os) { timing_ = os; }

  /// Runs every pass on \p graph. A pass error or a verifier failure after a
  /// pass is returned prefixed with the pass name. \returns whether any pass
  /// changed the graph.
  llvm::Expected<bool> run(ir::Graph &graph);

private:
  std::vector<std::unique_ptr<Pass>> passes_;
  llvm::raw_ostream *printAfterAll_ = nullptr;
  llvm::raw_ostream *timing_ = nullptr;
  llvm::raw_ostream *diagnostics_ = nullptr;
  PassContext context_;
  PassResults results_;
};

/// Parses a textual pipeline, e.g. `dce,cse,fold-constants{max-elements=64}`
/// (options are `key=value` separated by spaces inside braces) and adds the
/// passes to \p pm. An empty pipeline adds nothing. Unknown passes and
/// options are errors that list what exists.
llvm::Error parsePassPipeline(llvm::StringRef pipeline,
                              const PassRegistry &registry, PassManager &pm);

} // namespace remat::passes

#endif // REMAT_PASSES_PASSMANAGER_H
