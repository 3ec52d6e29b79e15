//===- passes/Pass.cpp - The pass interface -------------------------------===//
#include "passes/Pass.h"

#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"

namespace remat::passes {

Pass::~Pass() = default;

void Pass::emitWarning(const llvm::Twine &message) {
  llvm::raw_ostream &os = diagnostics_ ? *diagnostics_ : llvm::errs();
  os << "warning: " << message << '\n';
  os.flush();
}

void Pass::emitNote(const llvm::Twine &message) {
  llvm::raw_ostream &os = diagnostics_ ? *diagnostics_ : llvm::errs();
  os << "note: " << message << '\n';
  os.flush();
}

const PassContext &Pass::getContext() const {
  static const PassContext empty;
  return context_ ? *context_ : empty;
}

llvm::Expected<const ir::NodeEvaluator *> Pass::getEvaluator() const {
  const ir::NodeEvaluator &evaluator = getContext().evaluator;
  if (!evaluator)
    return makeError(llvm::Twine(getName()) +
                     " needs a constant evaluator; give its PassManager a "
                     "PassContext whose evaluator is "
                     "runtime::cpu::makeCpuEvaluator()");
  return &evaluator;
}

llvm::StringRef PassOption::kindName() const {
  switch (storage.index()) {
  case 0:
    return "int";
  case 1:
    return "float";
  case 2:
    return "bool";
  case 3:
    return "string";
  }
  llvm_unreachable("unknown option kind");
}

llvm::Error Pass::setOption(llvm::StringRef key, llvm::StringRef value) {
  auto it = llvm::find_if(options_,
                          [&](const PassOption &o) { return o.name == key; });
  if (it == options_.end()) {
    std::string known;
    for (const PassOption &option : options_)
      known += (known.empty() ? "" : ", ") + option.name;
    return makeError("unknown option '" + key + "' for pass '" + getName() +
                     "' (" +
                     (known.empty() ? std::string("it takes no options")
                                    : "its options: " + known) +
                     ")");
  }
  auto bad = [&]() {
    return makeError("option '" + key + "' of pass '" + getName() +
                     "' expects " + it->kindName() + ", got '" + value + "'");
  };
  if (auto *intStorage = std::get_if<int64_t *>(&it->storage)) {
    int64_t parsed;
    if (value.getAsInteger(10, parsed))
      return bad();
    **intStorage = parsed;
  } else if (auto *floatStorage = std::get_if<double *>(&it->storage)) {
    double parsed;
    if (value.getAsDouble(parsed))
      return bad();
    **floatStorage = parsed;
  } else if (auto *boolStorage = std::get_if<bool *>(&it->storage)) {
    if (value == "true" || value == "1")
      **boolStorage = true;
    else if (value == "false" || value == "0")
      **boolStorage = false;
    else
      return bad();
  } else {
    *std::get<std::string *>(it->storage) = value.str();
  }
  return llvm::Error::success();
}

} // namespace remat::passes
