//===- runtime/Tensor.cpp - Tensors the runtime computes on ---------------===//
#include "runtime/Tensor.h"

#include "llvm/Support/ErrorHandling.h"

#include <cstdlib>
#include <cstring>

namespace remat::runtime {

namespace {
constexpr size_t kAlignmentBytes = 64;
} // namespace

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
  holder_ = std::shared_ptr<void>(memory, [](void *p) { std::free(p); });
  data_ = memory;
}

OwnedTensor OwnedTensor::fromData(const ir::TensorData &data) {
  OwnedTensor tensor(data.getType());
  llvm::ArrayRef<uint8_t> bytes = data.getBytes();
  if (!bytes.empty())
    std::memcpy(tensor.getData(), bytes.data(), bytes.size());
  return tensor;
}

OwnedTensor OwnedTensor::share(ir::TensorDataPtr data) {
  assert(data && "sharing no data");
  OwnedTensor tensor;
  tensor.type_ = data->getType();
  // An empty vector may have no storage; views never hold null.
  static const uint64_t emptyBlock[8] = {};
  const void *bytes = data->getBytes().empty()
                          ? static_cast<const void *>(emptyBlock)
                          : data->getBytes().data();
  tensor.data_ = const_cast<void *>(bytes);
  tensor.holder_ = std::move(data);
  return tensor;
}

OwnedTensor OwnedTensor::adopt(ir::TensorType type, void *data,
                               std::shared_ptr<const void> holder) {
  assert((data || type.getByteSize() == 0) && "adopting no memory");
  OwnedTensor tensor;
  tensor.type_ = std::move(type);
  tensor.data_ = data;
  tensor.holder_ = std::move(holder);
  return tensor;
}

std::shared_ptr<ir::TensorData> OwnedTensor::toData() const {
  auto data = std::make_shared<ir::TensorData>(type_);
  size_t byteSize = static_cast<size_t>(type_.getByteSize());
  if (byteSize != 0)
    std::memcpy(data->getMutableBytes(), data_, byteSize);
  return data;
}

} // namespace remat::runtime
