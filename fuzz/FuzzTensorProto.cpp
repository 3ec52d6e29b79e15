//===- fuzz/FuzzTensorProto.cpp - TensorProto input files ------------------===//
//
// Parses the bytes as a TensorProto .pb file (remat-run --input). A tensor
// that parses must write and read back to the same bytes.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"

#include "frontends/onnx/OnnxTensor.h"
#include "frontends/onnx/TensorFile.h"

#include <onnx/onnx_pb.h>

using namespace remat;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto tensor = onnx_frontend::parseTensorProto(bytes, "fuzz.pb");
  if (!tensor) {
    llvm::consumeError(tensor.takeError());
    return 0;
  }
  onnx::TensorProto proto;
  onnx_frontend::tensorToProto(*tensor->data, tensor->name, proto);
  std::string written;
  fuzz::fuzzCheck(proto.SerializeToString(&written),
                  "a tensor does not serialize");
  auto reread = onnx_frontend::parseTensorProto(written, "written.pb");
  if (!reread)
    fuzz::fuzzCheckNoError(reread.takeError(),
                           "a written tensor does not parse");
  fuzz::fuzzCheck(reread->data->getType() == tensor->data->getType() &&
                      reread->data->getBytes() == tensor->data->getBytes(),
                  "a tensor changes when written and read back");
  return 0;
}
