//===- ir/Attributes.cpp - Node attributes and constant tensors -----------===//
#include "ir/Attributes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace remat::ir {

TensorData::TensorData(TensorType type) : type_(std::move(type)) {
  bytes_.assign(size_t(type_.getByteSize()), 0);
}

TensorData::TensorData(TensorType type, std::vector<uint8_t> bytes)
    : type_(std::move(type)), bytes_(std::move(bytes)) {
  assert(int64_t(bytes_.size()) == type_.getByteSize() &&
         "byte count does not match the type");
}

std::shared_ptr<TensorData>
TensorData::fromDoubles(TensorType type, llvm::ArrayRef<double> values) {
  auto data = std::make_shared<TensorData>(std::move(type));
  assert(int64_t(values.size()) == data->getNumElements());
  for (size_t i = 0; i < values.size(); ++i)
    data->setDouble(int64_t(i), values[i]);
  return data;
}

std::shared_ptr<TensorData>
TensorData::fromInts(TensorType type, llvm::ArrayRef<int64_t> values) {
  auto data = std::make_shared<TensorData>(std::move(type));
  assert(int64_t(values.size()) == data->getNumElements());
  for (size_t i = 0; i < values.size(); ++i)
    data->setInt(int64_t(i), values[i]);
  return data;
}

namespace {
template <typename T> T load(const uint8_t *bytes, int64_t i) {
  T value;
  std::memcpy(&value, bytes + i * int64_t(sizeof(T)), sizeof(T));
  return value;
}
template <typename T> void store(uint8_t *bytes, int64_t i, T value) {
  std::memcpy(bytes + i * int64_t(sizeof(T)), &value, sizeof(T));
}
} // namespace

double TensorData::getDouble(int64_t i) const {
  assert(i >= 0 && i < getNumElements() && "element index out of range");
  const uint8_t *bytes = bytes_.data();
  switch (type_.getDType()) {
  case DType::F32:
    return load<float>(bytes, i);
  case DType::F64:
    return load<double>(bytes, i);
  case DType::F16:
    return halfToFloat(load<uint16_t>(bytes, i));
  case DType::BF16:
    return bfloat16ToFloat(load<uint16_t>(bytes, i));
  case DType::I64:
    return double(load<int64_t>(bytes, i));
  case DType::I32:
    return load<int32_t>(bytes, i);
  case DType::I8:
    return load<int8_t>(bytes, i);
  case DType::U8:
    return load<uint8_t>(bytes, i);
  case DType::Bool:
    return load<uint8_t>(bytes, i) ? 1.0 : 0.0;
  }
  llvm_unreachable("unknown dtype");
}

int64_t TensorData::getInt(int64_t i) const {
  assert(i >= 0 && i < getNumElements() && "element index out of range");
  const uint8_t *bytes = bytes_.data();
  switch (type_.getDType()) {
  case DType::I64:
    return load<int64_t>(bytes, i);
  case DType::I32:
    return load<int32_t>(bytes, i);
  case DType::I8:
    return load<int8_t>(bytes, i);
  case DType::U8:
    return load<uint8_t>(bytes, i);
  case DType::Bool:
    return load<uint8_t>(bytes, i) ? 1 : 0;
  default: {
    double value = getDouble(i);
    if (!std::isfinite(value) || std::fabs(value) >= 9.2e18)
      return 0;
    return int64_t(value);
  }
  }
}

void TensorData::setDouble(int64_t i, double value) {
  assert(i >= 0 && i < getNumElements() && "element index out of range");
  uint8_t *bytes = bytes_.data();
  switch (type_.getDType()) {
  case DType::F32:
    return store<float>(bytes, i, float(value));
  case DType::F64:
    return store<double>(bytes, i, value);
  case DType::F16:
    return store<uint16_t>(bytes, i, floatToHalf(float(value)));
  case DType::BF16:
    return store<uint16_t>(bytes, i, floatToBFloat16(float(value)));
  case DType::Bool:
    return store<uint8_t>(bytes, i, value != 0.0 ? 1 : 0);
  default:
    if (!std::isfinite(value) || std::fabs(value) >= 9.2e18)
      return setInt(i, 0);
    return setInt(i, int64_t(value));
  }
}

void TensorData::setInt(int64_t i, int64_t value) {
  assert(i >= 0 && i < getNumElements() && "element index out of range");
  uint8_t *bytes = bytes_.data();
  switch (type_.getDType()) {
  case DType::I64:
    return store<int64_t>(bytes, i, value);
  case DType::I32:
    return store<int32_t>(bytes, i, int32_t(value));
  case DType::I8:
    return store<int8_t>(bytes, i, int8_t(value));
  case DType::U8:
    return store<uint8_t>(bytes, i, uint8_t(value));
  case DType::Bool:
    return store<uint8_t>(bytes, i, value != 0 ? 1 : 0);
  default:
    return setDouble(i, double(value));
  }
}

std::vector<int64_t> TensorData::getInts() const {
  std::vector<int64_t> values(static_cast<size_t>(getNumElements()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = getInt(int64_t(i));
  return values;
}

llvm::StringRef attrKindName(const AttrValue &value) {
  switch (value.index()) {
  case 0:
    return "int";
  case 1:
    return "float";
  case 2:
    return "string";
  case 3:
    return "ints";
  case 4:
    return "floats";
  case 5:
    return "strings";
  case 6:
    return "tensor";
  }
  llvm_unreachable("unknown attribute kind");
}

bool attrValuesEqual(const AttrValue &a, const AttrValue &b) {
  if (a.index() != b.index())
    return false;
  if (auto *fa = std::get_if<float>(&a))
    return std::bit_cast<uint32_t>(*fa) ==
           std::bit_cast<uint32_t>(std::get<float>(b));
  if (auto *la = std::get_if<std::vector<float>>(&a)) {
    const auto &lb = std::get<std::vector<float>>(b);
    return la->size() == lb.size() &&
           std::equal(la->begin(), la->end(), lb.begin(), [](float x, float y) {
             return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
           });
  }
  if (auto *ta = std::get_if<TensorDataPtr>(&a)) {
    const TensorDataPtr &tb = std::get<TensorDataPtr>(b);
    if (!*ta || !tb)
      return *ta == tb;
    return **ta == *tb;
  }
  return a == b;
}

void AttrList::set(llvm::StringRef name, AttrValue value) {
  auto it = llvm::lower_bound(entries_, name, [](const Entry &e,
                                                 llvm::StringRef key) {
    return llvm::StringRef(e.first) < key;
  });
  if (it != entries_.end() && it->first == name) {
    it->second = std::move(value);
    return;
  }
  entries_.insert(it, Entry(name.str(), std::move(value)));
}

bool AttrList::remove(llvm::StringRef name) {
  auto it = llvm::find_if(entries_,
                          [&](const Entry &e) { return e.first == name; });
  if (it == entries_.end())
    return false;
  entries_.erase(it);
  return true;
}

const AttrValue *AttrList::find(llvm::StringRef name) const {
  for (const Entry &entry : entries_)
    if (entry.first == name)
      return &entry.second;
  return nullptr;
}

template <typename T>
static std::optional<T> getAs(const AttrList &list, llvm::StringRef name) {
  const AttrValue *value = list.find(name);
  if (!value)
    return std::nullopt;
  if (const T *typed = std::get_if<T>(value))
    return *typed;
  return std::nullopt;
}

std::optional<int64_t> AttrList::getInt(llvm::StringRef name) const {
  return getAs<int64_t>(*this, name);
}
std::optional<float> AttrList::getFloat(llvm::StringRef name) const {
  return getAs<float>(*this, name);
}
std::optional<std::string> AttrList::getString(llvm::StringRef name) const {
  return getAs<std::string>(*this, name);
}
std::optional<std::vector<int64_t>>
AttrList::getInts(llvm::StringRef name) const {
  return getAs<std::vector<int64_t>>(*this, name);
}
std::optional<std::vector<float>>
AttrList::getFloats(llvm::StringRef name) const {
  return getAs<std::vector<float>>(*this, name);
}
TensorDataPtr AttrList::getTensor(llvm::StringRef name) const {
  return getAs<TensorDataPtr>(*this, name).value_or(nullptr);
}

bool AttrList::operator==(const AttrList &other) const {
  if (entries_.size() != other.entries_.size())
    return false;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].first != other.entries_[i].first ||
        !attrValuesEqual(entries_[i].second, other.entries_[i].second))
      return false;
  }
  return true;
}

} // namespace remat::ir
