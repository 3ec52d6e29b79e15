//===- ir/Attributes.h - Node attributes and constant tensors ---*- C++ -*-===//
//
// Attributes follow ONNX: int, float (32-bit, as in AttributeProto), string,
// lists of each, and tensors. An AttrList keeps its entries sorted by name so
// that printing and comparison are deterministic.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_ATTRIBUTES_H
#define REMAT_IR_ATTRIBUTES_H

#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace remat::ir {

/// The contents of a constant tensor: a type and its elements in row-major
/// order, stored as raw little-endian bytes (f16/bf16 as their 16-bit
/// patterns, bool as one byte 0/1). Immutable once shared.
class TensorData {
public:
  /// Creates zero-filled data of \p type (which must have passed checkSize).
  explicit TensorData(TensorType type);
  TensorData(TensorType type, std::vector<uint8_t> bytes);

  /// Creates data of \p type from \p values converted to its dtype.
  static std::shared_ptr<TensorData> fromDoubles(TensorType type,
                                                 llvm::ArrayRef<double> values);
  static std::shared_ptr<TensorData> fromInts(TensorType type,
                                              llvm::ArrayRef<int64_t> values);

  const TensorType &getType() const { return type_; }
  int64_t getNumElements() const { return type_.getNumElements(); }
  llvm::ArrayRef<uint8_t> getBytes() const { return bytes_; }
  uint8_t *getMutableBytes() { return bytes_.data(); }

  /// \returns element \p i converted to double (exact for every dtype but
  /// i64 values beyond 2^53).
  double getDouble(int64_t i) const;
  /// \returns element \p i converted to int64 (floats truncate toward zero).
  int64_t getInt(int64_t i) const;
  /// Sets element \p i from \p value, converting to the dtype.
  void setDouble(int64_t i, double value);
  void setInt(int64_t i, int64_t value);

  /// \returns all elements as int64 (for shape-like tensors).
  std::vector<int64_t> getInts() const;

  bool operator==(const TensorData &other) const {
    return type_ == other.type_ && bytes_ == other.bytes_;
  }

private:
  TensorType type_;
  std::vector<uint8_t> bytes_;
};

using TensorDataPtr = std::shared_ptr<const TensorData>;

/// One attribute value. Lists of ints and floats are distinct kinds; an empty
/// list parses as an int list.
using AttrValue =
    std::variant<int64_t, float, std::string, std::vector<int64_t>,
                 std::vector<float>, std::vector<std::string>, TensorDataPtr>;

/// \returns the ONNX-style kind name of \p value ("int", "floats", "tensor").
llvm::StringRef attrKindName(const AttrValue &value);
/// \returns true if \p a and \p b are the same kind with equal contents
/// (tensors compare by contents, floats bitwise).
bool attrValuesEqual(const AttrValue &a, const AttrValue &b);

/// A name-sorted list of attributes.
class AttrList {
public:
  using Entry = std::pair<std::string, AttrValue>;

  /// Sets \p name to \p value, replacing any previous value.
  void set(llvm::StringRef name, AttrValue value);
  /// Removes \p name; \returns true if it was present.
  bool remove(llvm::StringRef name);
  bool has(llvm::StringRef name) const { return find(name) != nullptr; }
  /// \returns the value of \p name, or null.
  const AttrValue *find(llvm::StringRef name) const;

  /// Typed getters: std::nullopt if absent or of another kind.
  std::optional<int64_t> getInt(llvm::StringRef name) const;
  std::optional<float> getFloat(llvm::StringRef name) const;
  std::optional<std::string> getString(llvm::StringRef name) const;
  std::optional<std::vector<int64_t>> getInts(llvm::StringRef name) const;
  std::optional<std::vector<float>> getFloats(llvm::StringRef name) const;
  TensorDataPtr getTensor(llvm::StringRef name) const;

  llvm::ArrayRef<Entry> entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

  bool operator==(const AttrList &other) const;
  bool operator!=(const AttrList &other) const { return !(*this == other); }

private:
  llvm::SmallVector<Entry, 2> entries_;
};

} // namespace remat::ir

#endif // REMAT_IR_ATTRIBUTES_H
