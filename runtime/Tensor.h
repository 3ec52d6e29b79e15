//===- runtime/Tensor.h - Tensors the runtime computes on -------*- C++ -*-===//
#ifndef REMAT_RUNTIME_TENSOR_H
#define REMAT_RUNTIME_TENSOR_H

#include "ir/Attributes.h"
#include "ir/Types.h"

#include <cassert>
#include <cstdint>
#include <memory>

namespace remat::runtime {

/// A typed view of memory the runtime does not own: a static type and a
/// pointer to its elements in row-major order (f16/bf16 as 16-bit patterns,
/// bool as one byte). Kernels read inputs and write outputs through these.
class Tensor {
public:
  Tensor() = default;
  Tensor(ir::TensorType type, void *data) : type_(std::move(type)), data_(data) {}

  const ir::TensorType &getType() const { return type_; }
  ir::DType getDType() const { return type_.getDType(); }
  llvm::ArrayRef<int64_t> getDims() const { return type_.getDims(); }
  unsigned getRank() const { return type_.getRank(); }
  int64_t getNumElements() const { return type_.getNumElements(); }
  int64_t getByteSize() const { return type_.getByteSize(); }

  void *getData() const { return data_; }
  /// \returns the elements as \p T; \p T must match the dtype's size.
  template <typename T> T *getData() const {
    assert(sizeof(T) == ir::dtypeSize(type_.getDType()) &&
           "element type does not match the dtype");
    return static_cast<T *>(data_);
  }

private:
  ir::TensorType type_;
  void *data_ = nullptr;
};

/// A tensor that holds its memory: a block it allocated (64-byte aligned,
/// for inputs read from files), the bytes of an ir::TensorData it shares
/// (weights: held once, by the IR and the runtime together), or a block of
/// device memory it was handed (outputs in a step's arena). Copies share the
/// memory.
class OwnedTensor {
public:
  OwnedTensor() = default;
  /// Allocates zero-filled memory for \p type.
  explicit OwnedTensor(ir::TensorType type);
  /// Copies \p data.
  static OwnedTensor fromData(const ir::TensorData &data);
  /// Views the bytes of \p data without copying them and keeps \p data
  /// alive. The tensor is read-only: kernels never write a graph input, and
  /// nothing else may write it either.
  static OwnedTensor share(ir::TensorDataPtr data);
  /// Views \p data, which lies in the memory that \p holder keeps alive.
  static OwnedTensor adopt(ir::TensorType type, void *data,
                           std::shared_ptr<const void> holder);

  Tensor view() const { return Tensor(type_, data_); }
  const ir::TensorType &getType() const { return type_; }
  void *getData() const { return data_; }
  /// \returns a TensorData copy (for .pb files and comparisons).
  std::shared_ptr<ir::TensorData> toData() const;

private:
  ir::TensorType type_;
  void *data_ = nullptr;
  std::shared_ptr<const void> holder_;
};

} // namespace remat::runtime

#endif // REMAT_RUNTIME_TENSOR_H
