//===- runtime/Device.h - Device memory and transfers -----------*- C++ -*-===//
//
// The executor reaches the memory its kernels compute in only through a
// Device: it takes the step's blocks from it, hands it the caller's inputs
// and receives the outputs back from it, and reads the time through it. A
// backend whose kernels run elsewhere (CUDA) supplies its own Device and
// plugs in without changing the executor; the CPU backend uses the host's.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_DEVICE_H
#define REMAT_RUNTIME_DEVICE_H

#include "runtime/Tensor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>

namespace remat::runtime {

/// A block of device memory, freed (by the device that made it) when its
/// last holder lets go: a step's arena or one tensor, and the outputs
/// handed to the caller hold the block they lie in.
using DeviceBuffer = std::shared_ptr<void>;

/// The alignment of every block a Device allocates: that of the memory
/// plan's offsets, and what cudaMalloc guarantees.
constexpr uint64_t kDeviceAlignment = 256;

/// Where a backend's tensors live and how they get there and back.
class Device {
public:
  virtual ~Device();

  /// The device's name in messages ("host").
  virtual llvm::StringRef getName() const = 0;

  /// \returns a block of \p bytes, kDeviceAlignment-aligned (a valid block
  /// also for 0 bytes). Running out of memory is an error naming \p what.
  virtual llvm::Expected<DeviceBuffer> allocate(uint64_t bytes,
                                                const llvm::Twine &what) = 0;

  /// Makes the host tensor \p host (a graph input: weights included) readable
  /// by kernels for one step. \returns the tensor kernels read and sets
  /// \p holder to the block to keep while they do; a device that computes in
  /// host memory returns \p host itself and leaves \p holder empty, so that
  /// weights are never copied.
  virtual llvm::Expected<Tensor> upload(const Tensor &host,
                                        DeviceBuffer &holder) = 0;

  /// \returns a host tensor with the contents of \p device, which lies in
  /// \p buffer. A device that computes in host memory may return a tensor
  /// that views \p device and holds \p buffer instead of copying it.
  virtual llvm::Expected<OwnedTensor> download(const Tensor &device,
                                               const DeviceBuffer &buffer) = 0;

  /// Waits until all work queued on the device has finished.
  virtual llvm::Error synchronize() = 0;

  /// \returns seconds on a monotonic clock once the work queued so far has
  /// finished. By default: synchronize(), then the host's steady clock; a
  /// device with its own timers (events) overrides it.
  virtual llvm::Expected<double> now();
};

/// \returns the device whose memory is the host's: allocate is aligned_alloc,
/// upload and download move no bytes (the tensors are viewed), and
/// synchronize does nothing.
std::unique_ptr<Device> createHostDevice();

} // namespace remat::runtime

#endif // REMAT_RUNTIME_DEVICE_H
