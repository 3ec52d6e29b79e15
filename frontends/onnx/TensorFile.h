//===- frontends/onnx/TensorFile.h - TensorProto .pb files ------*- C++ -*-===//
//
// Inputs and outputs on the command line are ONNX TensorProto files, the
// format of ONNX's own test data.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_FRONTENDS_ONNX_TENSORFILE_H
#define REMAT_FRONTENDS_ONNX_TENSORFILE_H

#include "ir/Attributes.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace remat::onnx_frontend {

/// A tensor read from a file, with the name stored in it ("" if none).
struct NamedTensor {
  std::string name;
  ir::TensorDataPtr data;
};

/// Reads the TensorProto in \p path. Errors name the file: unreadable,
/// not a TensorProto, an unsupported dtype, a byte count that does not match
/// the dims.
llvm::Expected<NamedTensor> readTensorFile(llvm::StringRef path);

/// Parses \p bytes, the contents of the TensorProto file \p path (named in
/// messages), as readTensorFile() does.
llvm::Expected<NamedTensor> parseTensorProto(llvm::StringRef bytes,
                                             llvm::StringRef path);

/// Writes \p data as a TensorProto named \p name to \p path (through a
/// temporary renamed into place).
llvm::Error writeTensorFile(llvm::StringRef path, llvm::StringRef name,
                            const ir::TensorData &data);

} // namespace remat::onnx_frontend

#endif // REMAT_FRONTENDS_ONNX_TENSORFILE_H
