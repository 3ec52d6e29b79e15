//===- passes/Pass.cpp - The pass interface -------------------------------===//
#include "passes/Pass.h"

#include "ir/Support.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

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

void Pass::emitRaw(llvm::StringRef text) {
  llvm::raw_ostream &os = diagnostics_ ? *diagnostics_ : llvm::errs();
  os << text;
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

std::string PassOption::kindName() const {
  switch (storage.index()) {
  case 0:
    return "int";
  case 1:
    return "float";
  case 2:
    return "bool";
  case 3:
    return "string";
  case 4:
    return llvm::join(std::get<EnumOptionStorage>(storage).choices, "|");
  case 5:
    return std::get<ByteOptionStorage>(storage).allowPercent ? "bytes|percent"
                                                             : "bytes";
  }
  llvm_unreachable("unknown option kind");
}

std::string ByteAmount::str() const {
  if (isPercent) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g%%", percent);
    return text;
  }
  return formatBytes(bytes);
}

llvm::Expected<uint64_t> parseByteSize(llvm::StringRef text) {
  llvm::StringRef trimmed = text.trim();
  size_t digits = 0;
  while (digits < trimmed.size() &&
         (llvm::isDigit(trimmed[digits]) || trimmed[digits] == '.'))
    ++digits;
  llvm::StringRef number = trimmed.take_front(digits);
  llvm::StringRef unit = trimmed.drop_front(digits).trim();
  auto bad = [&] {
    return makeError("'" + text +
                     "' is not a byte size (expected a number with an "
                     "optional unit B, KiB, MiB, GiB, TiB, KB, MB, GB or TB, "
                     "e.g. 6GiB)");
  };
  double value;
  if (number.empty() || number.getAsDouble(value) || value < 0)
    return bad();
  static const std::pair<const char *, double> kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12}};
  for (const auto &[name, scale] : kUnits) {
    if (unit != name)
      continue;
    double bytes = value * scale;
    if (bytes >= 9.2e18)
      return makeError("byte size '" + text + "' is too large");
    return uint64_t(bytes);
  }
  return bad();
}

llvm::Expected<ByteAmount> parseByteAmount(llvm::StringRef text,
                                           bool allowPercent) {
  ByteAmount amount;
  amount.isSet = true;
  llvm::StringRef trimmed = text.trim();
  if (trimmed.endswith("%")) {
    double percent;
    if (!allowPercent)
      return makeError("'" + text + "' must be a byte size here, not a "
                                    "percentage");
    if (trimmed.drop_back().trim().getAsDouble(percent) || !(percent > 0) ||
        percent > 1000)
      return makeError("'" + text +
                       "' is not a percentage in (0%, 1000%], e.g. 40%");
    amount.isPercent = true;
    amount.percent = percent;
    return amount;
  }
  auto bytes = parseByteSize(trimmed);
  if (!bytes) {
    if (!allowPercent)
      return bytes.takeError();
    llvm::consumeError(bytes.takeError());
    return makeError("'" + text +
                     "' is not a byte size or a percentage (e.g. 6GiB, "
                     "512MiB or 40%)");
  }
  amount.bytes = *bytes;
  return amount;
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
  } else if (auto *enumStorage =
                 std::get_if<EnumOptionStorage>(&it->storage)) {
    if (!llvm::is_contained(enumStorage->choices, value))
      return makeError("option '" + key + "' of pass '" + getName() +
                       "' must be one of " +
                       llvm::join(enumStorage->choices, ", ") + "; got '" +
                       value + "'");
    *enumStorage->value = value.str();
  } else if (auto *byteStorage =
                 std::get_if<ByteOptionStorage>(&it->storage)) {
    auto amount = parseByteAmount(value, byteStorage->allowPercent);
    if (!amount)
      return makeError("option '" + key + "' of pass '" + getName() + "': " +
                       errorToString(amount.takeError()));
    *byteStorage->value = *amount;
  } else {
    *std::get<std::string *>(it->storage) = value.str();
  }
  return llvm::Error::success();
}

} // namespace remat::passes
