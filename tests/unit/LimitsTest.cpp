//===- tests/unit/LimitsTest.cpp - Checked sizes and input files ----------===//
#include "driver/RunDriver.h"
#include "frontends/onnx/OnnxTensor.h"
#include "ir/Limits.h"
#include "ir/Parser.h"
#include "ir/Support.h"

#include <doctest/doctest.h>

#include <onnx/onnx_pb.h>

using namespace remat;
using namespace remat::ir;

namespace {

/// Sets the memory limit for one scope.
struct ScopedMemoryLimit {
  explicit ScopedMemoryLimit(uint64_t bytes) { setMemoryLimitBytes(bytes); }
  ~ScopedMemoryLimit() { setMemoryLimitBytes(0); }
};

std::string errorOf(llvm::Error err) {
  REQUIRE(bool(err));
  return errorToString(std::move(err));
}

} // namespace

TEST_CASE("limits: the default is the memory available, --max-memory wins") {
  uint64_t available = getAvailableMemoryBytes();
  CHECK(available > 0);
  CHECK(getMemoryLimitBytes() > 0);
  {
    ScopedMemoryLimit limit(1 << 20);
    CHECK(getMemoryLimitBytes() == (1 << 20));
    CHECK(describeMemoryLimit() == "--max-memory (1.0 MiB)");
  }
  CHECK(llvm::StringRef(describeMemoryLimit()).startswith("the "));
}

TEST_CASE("limits: byte counts in messages") {
  CHECK(formatBytesShort(0) == "0 B");
  CHECK(formatBytesShort(1023) == "1023 B");
  CHECK(formatBytesShort(uint64_t(38.2 * (1ull << 30))) == "38.2 GiB");
  CHECK(formatBytesShort(4000000000000000000ull) == "3.5 EiB");
}

TEST_CASE("limits: an allocation names the tensor, shape and bytes") {
  ScopedMemoryLimit limit(1 << 20);
  CHECK(!checkAllocation(TensorType(DType::F32, {512, 512}), "input 'x'"));
  CHECK(errorOf(checkAllocation(TensorType(DType::F32, {1000, 1000}),
                                "input 'x'")) ==
        "input 'x' of type f32[1000,1000] needs 4000000 bytes (3.8 MiB), "
        "more than --max-memory (1.0 MiB)");
  // A product that overflows is reported as such, not wrapped.
  CHECK(errorOf(checkAllocation(
            TensorType(DType::F32, {int64_t(1) << 40, int64_t(1) << 40}),
            "weight 'w'")) ==
        "weight 'w': type f32[1099511627776,1099511627776] has a byte size "
        "that overflows 64 bits");
}

TEST_CASE("limits: only regular files are read") {
  CHECK(errorOf(checkRegularFile("/dev/null")) ==
        "cannot read '/dev/null': not a regular file (a device, pipe or "
        "socket)");
  CHECK(errorOf(checkRegularFile("/")) == "cannot read '/': it is a directory");
  auto buffer = readInputFile("/dev/zero");
  REQUIRE(!buffer);
  CHECK(errorToString(buffer.takeError()) ==
        "cannot read '/dev/zero': not a regular file (a device, pipe or "
        "socket)");
  auto nul = readInputFile(llvm::StringRef("a\0b", 3));
  REQUIRE(!nul);
  CHECK(errorToString(nul.takeError()) ==
        "cannot open 'a\\x00b': the path contains a NUL byte");
}

TEST_CASE("limits: UTF-8") {
  CHECK(!checkUtf8("caf\xc3\xa9", "name"));
  CHECK(errorOf(checkUtf8("ab\xff", "name")) ==
        "name is not valid UTF-8 (bad byte 0xff at offset 2)");
  CHECK(escapeForMessage(llvm::StringRef("a\0\n\\", 4)) == "a\\x00\\x0a\\x5c");
}

TEST_CASE("limits: makeInputs checks each generated input first") {
  auto graph = parseGraph("graph @g(%x: f32[1000,1000]) {\n"
                          "  %y = Relu(%x) : f32[1000,1000]\n"
                          "  return %y\n"
                          "}\n",
                          "g.rir");
  REQUIRE(bool(graph));
  ScopedMemoryLimit limit(1 << 20);
  auto inputs = driver::makeInputs(**graph, {}, /*seed=*/0);
  REQUIRE(!inputs);
  CHECK(errorToString(inputs.takeError()) ==
        "input 'x' of type f32[1000,1000] needs 4000000 bytes (3.8 MiB), "
        "more than --max-memory (1.0 MiB)");
  CHECK(errorOf(driver::checkPlanFits(**graph)) ==
        "input 'x' of type f32[1000,1000] needs 4000000 bytes (3.8 MiB), "
        "more than --max-memory (1.0 MiB)");
}

TEST_CASE("limits: a TensorProto's data is counted before it is allocated") {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(1000000);
  proto.add_dims(1000000);
  auto data = onnx_frontend::tensorFromProto(proto, "tensor 't'", "t.pb: ");
  REQUIRE(!data);
  CHECK(errorToString(data.takeError()) ==
        "t.pb: tensor 't' of type f32[1000000,1000000] has no data (expected "
        "1000000000000 elements in raw_data or float_data)");
  // With the data present, the memory limit still applies.
  ScopedMemoryLimit limit(16);
  onnx::TensorProto small;
  small.set_data_type(onnx::TensorProto::FLOAT);
  small.add_dims(8);
  for (int i = 0; i < 8; ++i)
    small.add_float_data(float(i));
  auto limited = onnx_frontend::tensorFromProto(small, "tensor 's'", "s.pb: ");
  REQUIRE(!limited);
  CHECK(errorToString(limited.takeError()) ==
        "s.pb: tensor 's' of type f32[8] needs 32 bytes (32 B), more than "
        "--max-memory (16 B)");
}
