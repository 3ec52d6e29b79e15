//===- tests/unit/CudaCompareTest.cpp - The GPU harness's comparison ------===//
//
// remat-cuda-tests holds each output of the CUDA backend to the CPU's with
// cuda_tests::compareOutput; here that comparison is checked on the CPU:
// equal infinities must not turn the error norm into NaN and hide a real
// difference elsewhere, and unmatched NaN or infinities fail.
//
//===----------------------------------------------------------------------===//
#include "tests/cuda/CompareOutputs.h"

#include <doctest/doctest.h>

#include <limits>
#include <vector>

using namespace remat;
using remat::cuda_tests::compareOutput;

namespace {

runtime::OwnedTensor floats(const std::vector<float> &values) {
  runtime::OwnedTensor tensor(
      ir::TensorType(ir::DType::F32, {int64_t(values.size())}));
  std::memcpy(tensor.getData(), values.data(), values.size() * sizeof(float));
  return tensor;
}

std::string compare(const std::vector<float> &gpu,
                    const std::vector<float> &cpu, double rtol = 1e-5) {
  double worst = 0;
  return compareOutput("y", floats(gpu), floats(cpu), rtol, worst);
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

} // namespace

TEST_CASE("gpu harness: equal outputs pass, a difference fails") {
  CHECK(compare({1, 2, 3}, {1, 2, 3}) == "");
  CHECK(compare({1, 2, 3.5f}, {1, 2, 3}) ==
        "%y: relative error 0.134 > 1e-05 (largest difference 0.5)");
}

TEST_CASE("gpu harness: equal infinities do not hide a difference") {
  // inf - inf is NaN: summed into the norm it made every comparison pass.
  CHECK(compare({kInf, -kInf, 1, 2}, {kInf, -kInf, 1, 2}) == "");
  CHECK(compare({kInf, 1, 2.5f}, {kInf, 1, 2}) ==
        "%y: relative error 0.224 > 1e-05 (largest difference 0.5)");
  CHECK(compare({-kInf, 5}, {-kInf, 1}) ==
        "%y: relative error 4 > 1e-05 (largest difference 4)");
}

TEST_CASE("gpu harness: unmatched infinities and NaN fail, naming the element") {
  CHECK(compare({1, kInf}, {1, 2}) == "%y: element 1 is inf, the cpu's 2");
  CHECK(compare({1, 2}, {1, -kInf}) == "%y: element 1 is 2, the cpu's -inf");
  CHECK(compare({kInf}, {-kInf}) == "%y: element 0 is inf, the cpu's -inf");
  CHECK(compare({kNaN, 1}, {0, 1}) == "%y: element 0 is nan, the cpu's 0");
  CHECK(compare({0, 1}, {kNaN, 1}) == "%y: element 0 is 0, the cpu's nan");
  // NaN on both sides is agreement, and leaves the rest compared.
  CHECK(compare({kNaN, 1}, {kNaN, 1}) == "");
  CHECK(compare({kNaN, 2}, {kNaN, 1}) ==
        "%y: relative error 1 > 1e-05 (largest difference 1)");
}

TEST_CASE("gpu harness: integers and bools compare exactly") {
  auto ints = [](std::vector<int64_t> values) {
    runtime::OwnedTensor tensor(
        ir::TensorType(ir::DType::I64, {int64_t(values.size())}));
    std::memcpy(tensor.getData(), values.data(), values.size() * 8);
    return tensor;
  };
  double worst = 0;
  CHECK(compareOutput("i", ints({1, 2}), ints({1, 2}), 1, worst) == "");
  CHECK(compareOutput("i", ints({1, 3}), ints({1, 2}), 1, worst) ==
        "%i: values differ");
}
