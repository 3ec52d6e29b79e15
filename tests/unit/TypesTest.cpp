//===- tests/unit/TypesTest.cpp - DType and TensorType --------------------===//
#include "ir/Support.h"
#include "ir/Types.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace remat;
using namespace remat::ir;

TEST_CASE("dtype names round-trip and sizes are right") {
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16,
                      DType::I64, DType::I32, DType::I8, DType::U8,
                      DType::Bool}) {
    CHECK(parseDType(dtypeName(dtype)) == dtype);
    CHECK(fromOnnxCode(onnxCode(dtype)) == dtype);
  }
  CHECK(dtypeSize(DType::F64) == 8);
  CHECK(dtypeSize(DType::BF16) == 2);
  CHECK(dtypeSize(DType::Bool) == 1);
  CHECK_FALSE(parseDType("f8").has_value());
  CHECK_FALSE(fromOnnxCode(8).has_value()); // ONNX STRING
  CHECK(isFloat(DType::BF16));
  CHECK_FALSE(isFloat(DType::I64));
  CHECK(isInteger(DType::U8));
  CHECK_FALSE(isInteger(DType::Bool));
}

TEST_CASE("tensor type sizes and spelling") {
  TensorType type(DType::F32, {32, 256});
  CHECK(type.str() == "f32[32,256]");
  CHECK(type.getNumElements() == 8192);
  CHECK(type.getByteSize() == 32768);
  CHECK(TensorType(DType::I64, {}).str() == "i64[]");
  CHECK(TensorType(DType::I64, {}).getNumElements() == 1);
  CHECK(TensorType(DType::F32, {0, 5}).getByteSize() == 0);
  CHECK_FALSE(bool(TensorType(DType::F32, {0, 5}).checkSize()));
}

TEST_CASE("byte counts that overflow are errors") {
  TensorType huge(DType::F64, {int64_t(1) << 31, int64_t(1) << 31});
  llvm::Error err = huge.checkSize();
  REQUIRE(bool(err));
  CHECK(errorToString(std::move(err)) ==
        "type f64[2147483648,2147483648] has a byte size that overflows 64 bits");
  llvm::Error negative = TensorType(DType::F32, {-1}).checkSize();
  REQUIRE(bool(negative));
  CHECK(errorToString(std::move(negative)) == "type f32[-1] has a negative dim");
}

TEST_CASE("half and bfloat16 conversions round to nearest even") {
  CHECK(floatToHalf(1.0f) == 0x3c00);
  CHECK(halfToFloat(0x3c00) == 1.0f);
  CHECK(floatToHalf(65504.0f) == 0x7bff);
  CHECK(floatToHalf(65520.0f) == 0x7c00); // Rounds up to infinity.
  CHECK(floatToHalf(-0.0f) == 0x8000);
  CHECK(halfToFloat(0x0001) == std::ldexp(1.0f, -24)); // Smallest subnormal.
  CHECK(floatToHalf(std::ldexp(1.0f, -24)) == 0x0001);
  // 1 + 2^-11 is halfway between 1 and the next half; ties go to even (1).
  CHECK(floatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
  CHECK(floatToBFloat16(1.0f) == 0x3f80);
  CHECK(bfloat16ToFloat(0x3f80) == 1.0f);
  CHECK(floatToBFloat16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80); // Tie: even.
  CHECK(floatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(std::isnan(bfloat16ToFloat(floatToBFloat16(std::nanf("")))));
  // Every half value survives half -> float -> half.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = halfToFloat(uint16_t(bits));
    if (std::isnan(value))
      continue;
    INFO("half bits " << bits);
    CHECK(floatToHalf(value) == bits);
  }
}
