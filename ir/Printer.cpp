//===- ir/Printer.cpp - The .rir text format: printing --------------------===//
//
// The inverse of ir/Parser.cpp: parse(print(g)) is equal to g (graphsEqual).
// Floats print in their shortest round-tripping form and always carry a '.'
// or an exponent so that they re-parse as floats; tensor data prints as a
// list, a scalar (rank 0) or, when large or not representable as a list, as
// the hex string of its raw little-endian bytes.
//
//===----------------------------------------------------------------------===//

#include "ir/Printer.h"

#include "llvm/ADT/StringExtras.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>

using namespace remat;
using namespace remat::ir;

namespace {

/// Tensors with more elements than this print as a hex string.
constexpr int64_t kMaxListElements = 64;

bool isPlainNameChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$' || c == '/' ||
         c == '-';
}

/// Prints \p text between double quotes with C-style escapes. Bytes outside
/// printable ASCII are written as \xHH so that the output is plain ASCII.
void printQuoted(llvm::StringRef text, llvm::raw_ostream &os) {
  os << '"';
  for (char c : text) {
    switch (c) {
    case '"':
      os << "\\\"";
      continue;
    case '\\':
      os << "\\\\";
      continue;
    case '\n':
      os << "\\n";
      continue;
    case '\t':
      os << "\\t";
      continue;
    default:
      break;
    }
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f) {
      os << "\\x" << llvm::hexdigit(byte >> 4) << llvm::hexdigit(byte & 15);
      continue;
    }
    os << c;
  }
  os << '"';
}

/// Prints \p sigil and \p name, quoting the name when it is not plain.
void printName(char sigil, llvm::StringRef name, llvm::raw_ostream &os) {
  os << sigil;
  if (!name.empty() && llvm::all_of(name, isPlainNameChar)) {
    os << name;
    return;
  }
  printQuoted(name, os);
}

/// Prints \p value in its shortest round-tripping form, made to read as a
/// float ("1.0", "1e+20", "inf", "nan").
template <typename FloatT>
void printFloat(FloatT value, llvm::raw_ostream &os) {
  static_assert(std::is_floating_point_v<FloatT>);
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  assert(result.ec == std::errc() && "to_chars buffer too small");
  llvm::StringRef text(buffer, result.ptr - buffer);
  os << text;
  // 'n' covers "inf" and "nan".
  if (text.find_first_of(".en") == llvm::StringRef::npos)
    os << ".0";
}

template <typename T> T loadElement(const uint8_t *bytes, int64_t index) {
  T value;
  std::memcpy(&value, bytes + index * sizeof(T), sizeof(T));
  return value;
}

/// \returns element \p index of a float tensor of \p dtype as a double
/// (exact for every float dtype).
double loadFloat(DType dtype, const uint8_t *bytes, int64_t index) {
  switch (dtype) {
  case DType::F32:
    return loadElement<float>(bytes, index);
  case DType::F64:
    return loadElement<double>(bytes, index);
  case DType::F16:
    return halfToFloat(loadElement<uint16_t>(bytes, index));
  case DType::BF16:
    return bfloat16ToFloat(loadElement<uint16_t>(bytes, index));
  default:
    break;
  }
  assert(false && "not a float dtype");
  return 0;
}

/// \returns true when the list (or scalar) form would not re-parse to the
/// same bytes: a NaN (whose payload the text drops) or a bool byte other
/// than 0 and 1.
bool needsHex(const TensorData &data) {
  DType dtype = data.getType().getDType();
  const uint8_t *bytes = data.getBytes().data();
  int64_t count = data.getNumElements();
  if (dtype == DType::Bool) {
    for (int64_t i = 0; i < count; ++i)
      if (bytes[i] > 1)
        return true;
    return false;
  }
  if (!isFloat(dtype))
    return false;
  for (int64_t i = 0; i < count; ++i)
    if (std::isnan(loadFloat(dtype, bytes, i)))
      return true;
  return false;
}

void printElement(DType dtype, const uint8_t *bytes, int64_t index,
                  llvm::raw_ostream &os) {
  switch (dtype) {
  case DType::F32:
    printFloat(loadElement<float>(bytes, index), os);
    return;
  case DType::F64:
    printFloat(loadElement<double>(bytes, index), os);
    return;
  case DType::F16:
  case DType::BF16:
    // Every f16 and bf16 value is exactly a float, and the float's shortest
    // form converts back to the same 16 bits.
    printFloat(static_cast<float>(loadFloat(dtype, bytes, index)), os);
    return;
  case DType::I64:
    os << loadElement<int64_t>(bytes, index);
    return;
  case DType::I32:
    os << loadElement<int32_t>(bytes, index);
    return;
  case DType::I8:
    os << static_cast<int>(loadElement<int8_t>(bytes, index));
    return;
  case DType::U8:
    os << static_cast<unsigned>(bytes[index]);
    return;
  case DType::Bool:
    os << (bytes[index] ? "true" : "false");
    return;
  }
  assert(false && "unknown dtype");
}

void printTensor(const TensorData &data, llvm::raw_ostream &os) {
  const TensorType &type = data.getType();
  os << "dense<";
  printType(type, os);
  os << ": ";
  int64_t count = data.getNumElements();
  if (count > kMaxListElements || needsHex(data)) {
    os << "\"0x";
    for (uint8_t byte : data.getBytes())
      os << llvm::hexdigit(byte >> 4) << llvm::hexdigit(byte & 15);
    os << "\">";
    return;
  }
  const uint8_t *bytes = data.getBytes().data();
  if (type.getRank() == 0) {
    printElement(type.getDType(), bytes, 0, os);
    os << '>';
    return;
  }
  os << '[';
  for (int64_t i = 0; i < count; ++i) {
    if (i != 0)
      os << ", ";
    printElement(type.getDType(), bytes, i, os);
  }
  os << "]>";
}

template <typename T, typename PrintFn>
void printList(const std::vector<T> &values, llvm::raw_ostream &os,
               PrintFn printOne) {
  os << '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i != 0)
      os << ", ";
    printOne(values[i]);
  }
  os << ']';
}

void printAttrs(const AttrList &attrs, llvm::raw_ostream &os) {
  if (attrs.empty())
    return;
  os << " {";
  bool first = true;
  for (const AttrList::Entry &entry : attrs.entries()) {
    if (!first)
      os << ", ";
    first = false;
    os << entry.first << " = ";
    printAttrValue(entry.second, os);
  }
  os << '}';
}

void printNode(const Node &node, llvm::raw_ostream &os) {
  os << "  ";
  for (unsigned i = 0, e = node.getNumResults(); i != e; ++i) {
    if (i != 0)
      os << ", ";
    printValueRef(node.getResult(i)->getName(), os);
  }
  os << " = " << node.getOpSpelling() << '(';
  for (unsigned i = 0, e = node.getNumOperands(); i != e; ++i) {
    if (i != 0)
      os << ", ";
    printValueRef(node.getOperand(i)->getName(), os);
  }
  os << ')';
  printAttrs(node.getAttrs(), os);
  os << " : ";
  for (unsigned i = 0, e = node.getNumResults(); i != e; ++i) {
    if (i != 0)
      os << ", ";
    printType(node.getResult(i)->getType(), os);
  }
  if (node.getStage() != Stage::Forward)
    os << ' ' << stageName(node.getStage());
  if (const Node *origin = node.getOrigin()) {
    os << " origin(";
    printValueRef(origin->getResult(0)->getName(), os);
    os << ')';
  }
  llvm::SmallVector<Value *, 2> results = node.getResults();
  if (llvm::any_of(results, [](const Value *v) { return v->getGradientOf(); })) {
    os << " grad(";
    for (size_t i = 0; i < results.size(); ++i) {
      if (i != 0)
        os << ", ";
      if (const Value *weight = results[i]->getGradientOf())
        printValueRef(weight->getName(), os);
      else
        os << '_';
    }
    os << ')';
  }
  os << '\n';
}

} // namespace

void ir::printType(const TensorType &type, llvm::raw_ostream &os) {
  os << dtypeName(type.getDType()) << '[';
  for (unsigned i = 0, e = type.getRank(); i != e; ++i) {
    if (i != 0)
      os << ',';
    os << type.getDim(i);
  }
  os << ']';
}

void ir::printAttrValue(const AttrValue &value, llvm::raw_ostream &os) {
  if (const auto *intValue = std::get_if<int64_t>(&value)) {
    os << *intValue;
    return;
  }
  if (const auto *floatValue = std::get_if<float>(&value)) {
    printFloat(*floatValue, os);
    return;
  }
  if (const auto *stringValue = std::get_if<std::string>(&value)) {
    printQuoted(*stringValue, os);
    return;
  }
  if (const auto *ints = std::get_if<std::vector<int64_t>>(&value)) {
    printList(*ints, os, [&](int64_t v) { os << v; });
    return;
  }
  if (const auto *floats = std::get_if<std::vector<float>>(&value)) {
    printList(*floats, os, [&](float v) { printFloat(v, os); });
    return;
  }
  if (const auto *strings = std::get_if<std::vector<std::string>>(&value)) {
    printList(*strings, os, [&](const std::string &v) { printQuoted(v, os); });
    return;
  }
  const auto &tensor = std::get<TensorDataPtr>(value);
  assert(tensor && "tensor attribute without data");
  printTensor(*tensor, os);
}

void ir::printValueRef(llvm::StringRef name, llvm::raw_ostream &os) {
  printName('%', name, os);
}

void ir::printGraph(const Graph &graph, llvm::raw_ostream &os) {
  os << "graph ";
  printName('@', graph.getName(), os);
  os << '(';
  for (unsigned i = 0, e = graph.getNumInputs(); i != e; ++i) {
    const Value *input = graph.getInput(i);
    if (i != 0)
      os << ", ";
    printValueRef(input->getName(), os);
    os << ": ";
    printType(input->getType(), os);
    if (input->isWeight())
      os << " weight";
    if (input->getData()) {
      os << " = ";
      printTensor(*input->getData(), os);
    }
  }
  os << ") {\n";
  for (const Node &node : graph.getNodes())
    printNode(node, os);
  os << "  return";
  llvm::ArrayRef<Value *> outputs = graph.getOutputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    os << (i == 0 ? " " : ", ");
    printValueRef(outputs[i]->getName(), os);
  }
  os << "\n}\n";
}

std::string ir::printGraphToString(const Graph &graph) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printGraph(graph, os);
  os.flush();
  return text;
}
