//===- ir/Types.h - Element types and static tensor types -------*- C++ -*-===//
//
// Every tensor in a remat graph has a static shape. Symbolic dims exist only
// inside the importer, which binds them (--bind batch=8,seq=512) before a
// Graph is built; an unbound dim is an import error that names it.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_IR_TYPES_H
#define REMAT_IR_TYPES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace remat::ir {

/// Element types. The order is part of nothing external; ONNX codes are
/// mapped explicitly by onnxCode()/fromOnnxCode().
enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I8, U8, Bool };

/// \returns the .rir spelling of \p dtype ("f32", "i64", "bool", ...).
llvm::StringRef dtypeName(DType dtype);
/// \returns the dtype spelled \p name in .rir, or std::nullopt.
std::optional<DType> parseDType(llvm::StringRef name);
/// \returns the size of one element of \p dtype in bytes.
unsigned dtypeSize(DType dtype);
/// \returns true for f32, f64, f16 and bf16.
bool isFloat(DType dtype);
/// \returns true for the signed and unsigned integer types (not bool).
bool isInteger(DType dtype);
/// \returns the ONNX TensorProto.DataType code of \p dtype (FLOAT = 1, ...).
int onnxCode(DType dtype);
/// \returns the dtype for ONNX TensorProto.DataType \p code, or std::nullopt
/// when remat does not support it (strings, complex, uint16, ...).
std::optional<DType> fromOnnxCode(int64_t code);

/// IEEE half and bfloat16 conversions (round to nearest even).
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t bits);

/// A dtype and static dims. Rank 0 is a scalar.
class TensorType {
public:
  TensorType() = default;
  TensorType(DType dtype, llvm::ArrayRef<int64_t> dims)
      : dtype_(dtype), dims_(dims.begin(), dims.end()) {}

  DType getDType() const { return dtype_; }
  llvm::ArrayRef<int64_t> getDims() const { return dims_; }
  unsigned getRank() const { return dims_.size(); }
  int64_t getDim(unsigned i) const { return dims_[i]; }

  /// \returns the number of elements. The type must have passed
  /// checkSize(), so the product does not overflow.
  int64_t getNumElements() const;
  /// \returns the size in bytes; same precondition as getNumElements().
  int64_t getByteSize() const;
  /// \returns an error if a dim is negative or the byte size overflows int64.
  llvm::Error checkSize() const;

  TensorType withDims(llvm::ArrayRef<int64_t> dims) const {
    return TensorType(dtype_, dims);
  }
  TensorType withDType(DType dtype) const { return TensorType(dtype, dims_); }

  /// \returns the .rir spelling, e.g. "f32[32,256]" or "i64[]".
  std::string str() const;

  bool operator==(const TensorType &other) const {
    return dtype_ == other.dtype_ && dims_ == other.dims_;
  }
  bool operator!=(const TensorType &other) const { return !(*this == other); }

private:
  DType dtype_ = DType::F32;
  llvm::SmallVector<int64_t, 4> dims_;
};

} // namespace remat::ir

#endif // REMAT_IR_TYPES_H
