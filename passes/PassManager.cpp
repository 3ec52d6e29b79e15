//===- passes/PassManager.cpp - Pipelines of passes -----------------------===//
#include "passes/PassManager.h"

#include "ir/Printer.h"
#include "ir/Support.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <chrono>

namespace remat::passes {

//===----------------------------------------------------------------------===//
// PassRegistry
//===----------------------------------------------------------------------===//

void PassRegistry::add(llvm::StringRef name, Factory factory) {
  assert(llvm::none_of(entries_, [&](const auto &e) { return e.first == name; }) &&
         "pass registered twice");
  entries_.emplace_back(name.str(), std::move(factory));
}

std::vector<std::string> PassRegistry::getNames() const {
  std::vector<std::string> names;
  for (const auto &entry : entries_)
    names.push_back(entry.first);
  return names;
}

llvm::Expected<std::unique_ptr<Pass>>
PassRegistry::create(llvm::StringRef name) const {
  for (const auto &entry : entries_)
    if (entry.first == name)
      return entry.second();
  return makeError("unknown pass '" + name +
                   "' (available: " + llvm::join(getNames(), ", ") + ")");
}

void PassRegistry::printPasses(llvm::raw_ostream &os) const {
  size_t width = 0;
  for (const auto &entry : entries_)
    width = std::max(width, entry.first.size());
  for (const auto &entry : entries_) {
    std::unique_ptr<Pass> pass = entry.second();
    os << "  " << llvm::left_justify(entry.first, width) << "  "
       << pass->getSummary() << '\n';
    for (const PassOption &option : pass->getOptions())
      os << "  " << llvm::left_justify("", width) << "    {" << option.name
         << '=' << option.kindName() << "}  " << option.description << '\n';
  }
}

/// The callbacks of addPassRegistrationCallback(), in the order added.
static std::vector<void (*)(PassRegistry &)> &getRegistrationCallbacks() {
  static std::vector<void (*)(PassRegistry &)> callbacks;
  return callbacks;
}

void registerAllPasses(PassRegistry &registry) {
#define PASS(NAME, CLASS)                                                      \
  registry.add(NAME, [] { return std::make_unique<CLASS>(); });
#include "passes/Passes.def"
  for (auto *callback : getRegistrationCallbacks())
    callback(registry);
}

void addPassRegistrationCallback(void (*callback)(PassRegistry &registry)) {
  getRegistrationCallbacks().push_back(callback);
}

//===----------------------------------------------------------------------===//
// PassManager
//===----------------------------------------------------------------------===//

llvm::Error PassManager::setPassOption(llvm::StringRef passName,
                                       llvm::StringRef key,
                                       llvm::StringRef value) {
  bool found = false;
  for (const std::unique_ptr<Pass> &pass : passes_) {
    if (pass->getName() != passName)
      continue;
    found = true;
    if (auto err = pass->setOption(key, value))
      return err;
  }
  if (!found)
    return makeError("option '" + key + "' is for pass '" + passName +
                     "', which the pipeline does not run");
  return llvm::Error::success();
}

llvm::Expected<bool> PassManager::run(ir::Graph &graph) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, double>> times;
  double verifySeconds = 0;
  bool changed = false;
  results_ = PassResults();
  for (const std::unique_ptr<Pass> &pass : passes_) {
    if (diagnostics_)
      pass->setDiagnosticStream(diagnostics_);
    pass->setContext(context_);
    auto start = Clock::now();
    llvm::Expected<bool> passChanged = pass->run(graph);
    auto ran = Clock::now();
    if (!passChanged)
      return makeError("pass '" + pass->getName() + "' failed: " +
                       errorToString(passChanged.takeError()));
    changed |= *passChanged;
    llvm::Error invalid = ir::verify(graph);
    auto verified = Clock::now();
    if (invalid)
      return makeError("invalid IR after pass '" + pass->getName() +
                       "': " + errorToString(std::move(invalid)));
    pass->addResults(results_);
    times.emplace_back(pass->getName().str(),
                       std::chrono::duration<double>(ran - start).count());
    verifySeconds += std::chrono::duration<double>(verified - ran).count();
    if (printAfterAll_) {
      *printAfterAll_ << "// -----// IR after '" << pass->getName()
                      << "' //----- //\n";
      ir::printGraph(graph, *printAfterAll_);
      printAfterAll_->flush();
    }
  }
  if (timing_) {
    double total = verifySeconds;
    for (const auto &entry : times)
      total += entry.second;
    llvm::raw_ostream &os = *timing_;
    os << "===------------------------------------------------------------===\n"
       << "                    pass execution timing report\n"
       << "===------------------------------------------------------------===\n"
       << "  total: " << llvm::format("%.3f", total * 1e3) << " ms\n"
       << "  wall time (ms)   share  name\n";
    auto row = [&](llvm::StringRef name, double seconds) {
      os << "  " << llvm::format("%14.3f", seconds * 1e3) << "  "
         << llvm::format("%5.1f%%", total > 0 ? 100.0 * seconds / total : 0.0)
         << "  " << name << '\n';
    };
    for (const auto &entry : times)
      row(entry.first, entry.second);
    row("(verifier)", verifySeconds);
    os.flush();
  }
  return changed;
}

//===----------------------------------------------------------------------===//
// Pipeline parsing
//===----------------------------------------------------------------------===//

llvm::Error parsePassPipeline(llvm::StringRef pipeline,
                              const PassRegistry &registry, PassManager &pm) {
  llvm::StringRef rest = pipeline;
  auto syntax = [&](const llvm::Twine &what) {
    std::string column = std::to_string(pipeline.size() - rest.size() + 1);
    return makeError("pipeline '" + pipeline.str() + "' column " + column +
                     ": " + what.str());
  };
  if (pipeline.trim().empty())
    return llvm::Error::success();
  while (true) {
    rest = rest.ltrim();
    size_t nameEnd = rest.find_first_of(",{ ");
    llvm::StringRef name = rest.substr(0, nameEnd);
    if (name.empty())
      return syntax("expected a pass name");
    auto pass = registry.create(name);
    if (!pass)
      return pass.takeError();
    rest = rest.drop_front(name.size()).ltrim();
    if (rest.consume_front("{")) {
      while (true) {
        rest = rest.ltrim();
        if (rest.consume_front("}"))
          break;
        size_t end = rest.find_first_of(" }");
        llvm::StringRef option = rest.substr(0, end);
        auto [key, value] = option.split('=');
        if (end == llvm::StringRef::npos)
          return syntax("missing '}' after the options of '" + name + "'");
        if (!option.contains('=') || key.empty())
          return syntax("expected key=value in the options of '" + name +
                        "', got '" + option + "'");
        if (auto err = (*pass)->setOption(key, value))
          return err;
        rest = rest.drop_front(option.size());
      }
    }
    pm.addPass(std::move(*pass));
    rest = rest.ltrim();
    if (rest.empty())
      return llvm::Error::success();
    if (!rest.consume_front(","))
      return syntax("expected ',' between passes, got '" + rest.take_front(1) +
                    "'");
  }
}

} // namespace remat::passes
