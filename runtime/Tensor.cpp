//===- runtime/Tensor.cpp - Tensors the runtime computes on ---------------===//
#include "runtime/Tensor.h"

#include "llvm/Support/ErrorHandling.h"

#include <cstdlib>
#include <cstring>

namespace remat::runtime {

namespace {
constexpr size_t kAlignmentBytes = 64;
} // namespace

void OwnedTensor::Free::operator()(void *p) const { std::free(p); }

OwnedTensor::OwnedTensor(ir::TensorType type) : type_(std::move(type)) {
  // aligned_alloc wants a multiple of the alignment; an empty tensor still
  // gets a (non-null) block so that views never hold null.
  size_t byteSize = static_cast<size_t>(type_.getByteSize());
  size_t allocBytes =
      (byteSize + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
  if (allocBytes == 0)
    allocBytes = kAlignmentBytes;
  void *memory = std::aligned_alloc(kAlignmentBytes, allocBytes);
  if (!memory)
    llvm::report_bad_alloc_error("cannot allocate a tensor");
  std::memset(memory, 0, allocBytes);
  buffer_.reset(memory);
}

OwnedTensor OwnedTensor::fromData(const ir::TensorData &data) {
  OwnedTensor tensor(data.getType());
  llvm::ArrayRef<uint8_t> bytes = data.getBytes();
  if (!bytes.empty())
    std::memcpy(tensor.getData(), bytes.data(), bytes.size());
  return tensor;
}

std::shared_ptr<ir::TensorData> OwnedTensor::toData() const {
  auto data = std::make_shared<ir::TensorData>(type_);
  size_t byteSize = static_cast<size_t>(type_.getByteSize());
  if (byteSize != 0)
    std::memcpy(data->getMutableBytes(), buffer_.get(), byteSize);
  return data;
}

} // namespace remat::runtime
