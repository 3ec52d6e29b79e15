//===- runtime/Device.cpp - Device memory and transfers -------------------===//
#include "runtime/Device.h"

#include "ir/Support.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace remat::runtime {

Device::~Device() = default;

llvm::Expected<double> Device::now() {
  if (auto err = synchronize())
    return std::move(err);
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

/// The host's memory: what the CPU backend computes in.
class HostDevice : public Device {
public:
  llvm::StringRef getName() const override { return "host"; }

  llvm::Expected<DeviceBuffer> allocate(uint64_t bytes,
                                        const llvm::Twine &what) override {
    // aligned_alloc wants a multiple of the alignment; an empty block still
    // gets a valid pointer.
    constexpr uint64_t align = kDeviceAlignment;
    uint64_t rounded = std::max<uint64_t>(align, (bytes + align - 1) / align * align);
    if (rounded > uint64_t(SIZE_MAX))
      return makeError(what + " of " + llvm::Twine(bytes) +
                       " bytes does not fit in this process");
    void *data = std::aligned_alloc(align, size_t(rounded));
    if (!data)
      return makeError("out of memory allocating " + llvm::Twine(bytes) +
                       " bytes for " + what);
    return DeviceBuffer(data, [](void *p) { std::free(p); });
  }

  llvm::Expected<Tensor> upload(const Tensor &host,
                                DeviceBuffer &holder) override {
    holder.reset();
    return host;
  }

  llvm::Expected<OwnedTensor> download(const Tensor &device,
                                       const DeviceBuffer &buffer) override {
    return OwnedTensor::adopt(device.getType(), device.getData(), buffer);
  }

  llvm::Error synchronize() override { return llvm::Error::success(); }
};

} // namespace

std::unique_ptr<Device> createHostDevice() {
  return std::make_unique<HostDevice>();
}

} // namespace remat::runtime
