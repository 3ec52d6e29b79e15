//===- frontends/onnx/TensorFile.cpp - TensorProto .pb files --------------===//
#include "frontends/onnx/TensorFile.h"

#include "ir/OutputFile.h"
#include "frontends/onnx/OnnxTensor.h"
#include "ir/Limits.h"
#include "ir/Support.h"

#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

namespace remat::onnx_frontend {

llvm::Expected<NamedTensor> readTensorFile(llvm::StringRef path) {
  auto buffer = ir::readInputFile(path);
  if (!buffer)
    return buffer.takeError();
  return parseTensorProto((*buffer)->getBuffer(), path);
}

llvm::Expected<NamedTensor> parseTensorProto(llvm::StringRef bytes,
                                             llvm::StringRef path) {
  onnx::TensorProto proto;
  bool parsed = false;
  try {
    parsed = bytes.size() <= size_t(INT_MAX) &&
             proto.ParseFromArray(bytes.data(), int(bytes.size()));
  } catch (const std::exception &) {
    parsed = false;
  }
  // A TensorProto always has a data type; without one the bytes were
  // something else that happened to parse.
  if (!parsed || proto.data_type() == 0)
    return makeError("cannot parse '" + path + "' as an ONNX TensorProto");
  std::string what = proto.name().empty() ? "tensor" : "tensor '" + proto.name() + "'";
  auto data = tensorFromProto(proto, what, (path + ": ").str());
  if (!data)
    return data.takeError();
  return NamedTensor{proto.name(), std::move(*data)};
}

llvm::Error writeTensorFile(llvm::StringRef path, llvm::StringRef name,
                            const ir::TensorData &data) {
  onnx::TensorProto proto;
  tensorToProto(data, name, proto);
  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    return makeError("cannot serialize tensor '" + name + "' for '" + path +
                     "'");
  return writeOutputFile(path, bytes);
}

} // namespace remat::onnx_frontend
