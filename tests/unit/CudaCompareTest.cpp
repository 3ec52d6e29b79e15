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

TEST_CASE(
    "gpu harness: a zero-but-rounding output is held to the model's scale") {
  // A key projection's bias gradient is zero in exact arithmetic: both
  // backends give noise near 1e-12, and its own norm makes that noise a
  // relative error of order 1.
  double worst = 0;
  auto noiseGpu = floats({3e-12f, -1e-12f}),
       noiseCpu = floats({-2e-12f, 2e-12f});
  CHECK(compareOutput("b", noiseGpu, noiseCpu, 1e-4, worst) ==
        "%b: relative error 2.06 > 0.0001 (largest difference 5e-12)");
  // At the model's scale (outputs of rms 1e-2) the noise passes ...
  worst = 0;
  CHECK(compareOutput("b", noiseGpu, noiseCpu, 1e-4, worst, 1e-2) == "");
  CHECK(worst < 1e-8);
  // ... and a real difference in a small output still fails.
  CHECK(compareOutput("b", floats({5e-6f, 0}), floats({0, 0}), 1e-4, worst,
                      1e-2) ==
        "%b: relative error 0.000354 > 0.0001 (largest difference 5e-06; "
        "relative to the model's scale 0.01, above its own rms 0)");
  // An output above the scale is held to its own norm.
  CHECK(compareOutput("y", floats({1, 2, 3.5f}), floats({1, 2, 3}), 1e-5, worst,
                      1e-2) ==
        "%y: relative error 0.134 > 1e-05 (largest difference 0.5)");
}

TEST_CASE(
    "gpu harness: the model's scale is the median rms of its float outputs") {
  std::vector<runtime::OwnedTensor> outputs;
  outputs.push_back(floats({10}));        // a loss: rms 10
  outputs.push_back(floats({3, 4}));      // rms 3.54
  outputs.push_back(floats({1e-12f, 0})); // rounding noise
  runtime::OwnedTensor ints(ir::TensorType(ir::DType::I64, {1}));
  std::memset(ints.getData(), 0, 8);
  outputs.push_back(std::move(ints)); // not a float: left out
  CHECK(remat::cuda_tests::modelScale(outputs) ==
        doctest::Approx(std::sqrt(12.5)));
  CHECK(remat::cuda_tests::modelScale({}) == 0);
}
