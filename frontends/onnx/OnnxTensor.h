//===- frontends/onnx/OnnxTensor.h - TensorProto <-> TensorData -*- C++ -*-===//
//
// The one conversion between ONNX TensorProto and remat's TensorData, shared
// by the importer (initializers, Constant nodes), the exporter and the .pb
// tensor files of remat-run.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_ONNX_ONNXTENSOR_H
#define REMAT_FRONTENDS_ONNX_ONNXTENSOR_H

#include "ir/Attributes.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace remat::onnx_frontend {

/// \returns the ONNX name of TensorProto data type \p code ("STRING").
std::string onnxDTypeName(int64_t code);

/// \returns "[2,3]" for messages.
std::string formatDims(llvm::ArrayRef<int64_t> dims);

/// The ONNX dtypes remat reads, for messages.
extern const char *const kSupportedDTypes;

/// Converts \p tensor, whose data is in raw_data, in the typed fields, or
/// (through \p readExternal, given the expected byte count) in an external
/// file. Messages start with \p errorPrefix and name the tensor as \p what:
/// an unsupported dtype, negative or overflowing dims, a byte or element
/// count that does not match the dims.
llvm::Expected<ir::TensorDataPtr> tensorFromProto(
    const onnx::TensorProto &tensor, llvm::StringRef what,
    llvm::StringRef errorPrefix,
    llvm::function_ref<llvm::Expected<std::vector<uint8_t>>(int64_t)>
        readExternal = nullptr);

/// Fills \p proto with \p data as raw_data, named \p name when not empty.
void tensorToProto(const ir::TensorData &data, llvm::StringRef name,
                   onnx::TensorProto &proto);

} // namespace remat::onnx_frontend

#endif // REMAT_FRONTENDS_ONNX_ONNXTENSOR_H
