//===- ir/Types.cpp - Element types and static tensor types ---------------===//
#include "ir/Types.h"

#include "ir/Support.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <bit>
#include <cmath>

namespace remat::ir {

llvm::StringRef dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  case DType::Bool:
    return "bool";
  }
  llvm_unreachable("unknown dtype");
}

std::optional<DType> parseDType(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<DType>>(name)
      .Case("f32", DType::F32)
      .Case("f64", DType::F64)
      .Case("f16", DType::F16)
      .Case("bf16", DType::BF16)
      .Case("i64", DType::I64)
      .Case("i32", DType::I32)
      .Case("i8", DType::I8)
      .Case("u8", DType::U8)
      .Case("bool", DType::Bool)
      .Default(std::nullopt);
}

unsigned dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  llvm_unreachable("unknown dtype");
}

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

bool isInteger(DType dtype) {
  return dtype == DType::I64 || dtype == DType::I32 || dtype == DType::I8 ||
         dtype == DType::U8;
}

// ONNX TensorProto.DataType codes.
int onnxCode(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 1;
  case DType::U8:
    return 2;
  case DType::I8:
    return 3;
  case DType::I32:
    return 6;
  case DType::I64:
    return 7;
  case DType::Bool:
    return 9;
  case DType::F16:
    return 10;
  case DType::F64:
    return 11;
  case DType::BF16:
    return 16;
  }
  llvm_unreachable("unknown dtype");
}

std::optional<DType> fromOnnxCode(int64_t code) {
  switch (code) {
  case 1:
    return DType::F32;
  case 2:
    return DType::U8;
  case 3:
    return DType::I8;
  case 6:
    return DType::I32;
  case 7:
    return DType::I64;
  case 9:
    return DType::Bool;
  case 10:
    return DType::F16;
  case 11:
    return DType::F64;
  case 16:
    return DType::BF16;
  default:
    return std::nullopt;
  }
}

uint16_t floatToHalf(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) // Inf or NaN; keep NaN quiet and non-zero.
    return sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u);
  int32_t halfExponent = int32_t(exponent) - 127 + 15;
  if (halfExponent >= 0x1f) // Overflow to infinity.
    return sign | 0x7c00u;
  if (halfExponent <= 0) {
    // Subnormal half (or zero): shift the implicit-1 mantissa into place and
    // round to nearest even.
    if (halfExponent < -10)
      return sign;
    uint32_t full = mantissa | 0x800000u;
    uint32_t shift = uint32_t(14 - halfExponent);
    uint32_t halfMantissa = full >> shift;
    uint32_t remainder = full & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (halfMantissa & 1)))
      ++halfMantissa;
    return sign | halfMantissa;
  }
  uint32_t half = sign | (uint32_t(halfExponent) << 10) | (mantissa >> 13);
  uint32_t remainder = mantissa & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1)))
    ++half; // May carry into the exponent, which is the right rounding.
  return uint16_t(half);
}

float halfToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0)
      return std::bit_cast<float>(sign);
    float value = std::ldexp(float(mantissa), -24);
    return sign ? -value : value;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) |
                              (mantissa << 13));
}

uint16_t floatToBFloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a quiet NaN.
    return uint16_t((bits >> 16) | 0x40u);
  uint32_t roundingBias = 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t((bits + roundingBias) >> 16);
}

float bfloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

int64_t TensorType::getNumElements() const {
  int64_t count = 1;
  for (int64_t dim : dims_)
    count *= dim;
  return count;
}

int64_t TensorType::getByteSize() const {
  return getNumElements() * dtypeSize(dtype_);
}

llvm::Error TensorType::checkSize() const {
  int64_t bytes = dtypeSize(dtype_);
  for (int64_t dim : dims_) {
    if (dim < 0)
      return makeError("type " + str() + " has a negative dim");
    std::optional<int64_t> product = checkedMul(bytes, dim);
    if (!product)
      return makeError("type " + str() +
                       " has a byte size that overflows 64 bits");
    bytes = *product;
  }
  return llvm::Error::success();
}

std::string TensorType::str() const {
  std::string result;
  llvm::raw_string_ostream os(result);
  os << dtypeName(dtype_) << '[';
  for (size_t i = 0; i < dims_.size(); ++i)
    os << (i ? "," : "") << dims_[i];
  os << ']';
  return result;
}

} // namespace remat::ir
