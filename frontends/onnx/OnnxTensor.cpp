//===- frontends/onnx/OnnxTensor.cpp - TensorProto <-> TensorData ---------===//
#include "frontends/onnx/OnnxTensor.h"

#include "ir/Limits.h"
#include "ir/Support.h"

#include "llvm/Support/Endian.h"

#include <climits>
#include <cstring>

using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::SmallVector;
using llvm::StringRef;
using llvm::Twine;

namespace remat::onnx_frontend {

using namespace remat::ir;

/// \returns the ONNX name of TensorProto data type \p code ("STRING").
std::string onnxDTypeName(int64_t code) {
  if (code >= INT_MIN && code <= INT_MAX &&
      onnx::TensorProto_DataType_IsValid(static_cast<int>(code)))
    return onnx::TensorProto_DataType_Name(
        static_cast<onnx::TensorProto_DataType>(code));
  return "code " + std::to_string(code);
}

const char *const kSupportedDTypes =
    "FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32, INT8, UINT8 and BOOL";

std::string formatDims(ArrayRef<int64_t> dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      text += ',';
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

Expected<TensorDataPtr>
tensorFromProto(const onnx::TensorProto &tensor, StringRef what,
                StringRef errorPrefix,
                llvm::function_ref<Expected<std::vector<uint8_t>>(int64_t)>
                    readExternal) {
  auto fileError = [&](const Twine &message) {
    return makeError(errorPrefix + message);
  };
  std::optional<DType> dtype = fromOnnxCode(tensor.data_type());
  if (!dtype)
    return fileError(
        Twine(what) + " has dtype " + onnxDTypeName(tensor.data_type()) +
        ", which remat does not support (supported: " + kSupportedDTypes + ")");
  if (tensor.has_segment())
    return fileError(what + " is segmented, which remat does not support");
  SmallVector<int64_t, 4> dims(tensor.dims().begin(), tensor.dims().end());
  TensorType type(*dtype, dims);
  for (int64_t dim : dims)
    if (dim < 0)
      return fileError(what + " has negative dim " + Twine(dim) + " in " +
                       formatDims(dims));
  if (auto err = type.checkSize())
    return fileError(what + " of type " + dtypeName(*dtype) + formatDims(dims) +
                     ": " + errorToString(std::move(err)));
  int64_t count = type.getNumElements();
  int64_t byteSize = type.getByteSize();
  // The shape is the file's claim; nothing is allocated before the data
  // present is counted and the bytes, with the rest of the load
  // (ir::LoadBudget), fit the memory limit.
  auto checkMemory = [&]() -> Error {
    if (auto err = chargeLoadAllocation(type, what))
      return fileError(errorToString(std::move(err)));
    return Error::success();
  };

  auto finish = [&](std::vector<uint8_t> bytes) -> TensorDataPtr {
    // Bools are one byte, 0 or 1.
    if (*dtype == DType::Bool)
      for (uint8_t &byte : bytes)
        byte = byte != 0;
    return std::make_shared<TensorData>(type, std::move(bytes));
  };

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    // Which would be the data? ONNX says external data has no raw_data.
    if (tensor.has_raw_data())
      return fileError(what + " has both external data and raw_data (ONNX "
                              "allows one)");
    if (!readExternal)
      return fileError(what + " keeps its data in an external file, which "
                              "is not supported here");
    if (auto err = checkMemory())
      return std::move(err);
    auto bytes = readExternal(byteSize);
    if (!bytes)
      return bytes.takeError();
    return finish(std::move(*bytes));
  }
  if (tensor.has_raw_data()) {
    const std::string &raw = tensor.raw_data();
    if (static_cast<int64_t>(raw.size()) != byteSize)
      return fileError(what + " of type " + type.str() + " has " +
                       Twine(raw.size()) + " bytes of raw_data, expected " +
                       Twine(byteSize));
    if (auto err = checkMemory())
      return std::move(err);
    return finish(std::vector<uint8_t>(raw.begin(), raw.end()));
  }

  // Typed fields: float_data, double_data, int64_data, and int32_data,
  // which also holds the bit patterns of f16/bf16 and the values of
  // bool/i8/u8.
  auto checkCount = [&](int64_t have, StringRef field) -> Error {
    if (have == count)
      return Error::success();
    if (have == 0)
      return fileError(what + " of type " + type.str() +
                       " has no data (expected " + Twine(count) +
                       " elements in raw_data or " + field + ")");
    return fileError(what + " of type " + type.str() + " has " + Twine(have) +
                     " elements in " + field + ", expected " + Twine(count));
  };
  int64_t have = 0;
  StringRef field;
  switch (*dtype) {
  case DType::F32:
    have = tensor.float_data_size(), field = "float_data";
    break;
  case DType::F64:
    have = tensor.double_data_size(), field = "double_data";
    break;
  case DType::I64:
    have = tensor.int64_data_size(), field = "int64_data";
    break;
  case DType::I32:
  case DType::F16:
  case DType::BF16:
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    have = tensor.int32_data_size(), field = "int32_data";
    break;
  }
  if (auto err = checkCount(have, field))
    return std::move(err);
  if (auto err = checkMemory())
    return std::move(err);
  std::vector<uint8_t> bytes(byteSize);
  uint8_t *out = bytes.data();
  using llvm::support::endian::write16le;
  using llvm::support::endian::write32le;
  using llvm::support::endian::write64le;
  switch (*dtype) {
  case DType::F32:
    if (auto err = checkCount(tensor.float_data_size(), "float_data"))
      return std::move(err);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t bits;
      float value = tensor.float_data(i);
      std::memcpy(&bits, &value, 4);
      write32le(out + 4 * i, bits);
    }
    break;
  case DType::F64:
    if (auto err = checkCount(tensor.double_data_size(), "double_data"))
      return std::move(err);
    for (int64_t i = 0; i < count; ++i) {
      uint64_t bits;
      double value = tensor.double_data(i);
      std::memcpy(&bits, &value, 8);
      write64le(out + 8 * i, bits);
    }
    break;
  case DType::I64:
    if (auto err = checkCount(tensor.int64_data_size(), "int64_data"))
      return std::move(err);
    for (int64_t i = 0; i < count; ++i)
      write64le(out + 8 * i, static_cast<uint64_t>(tensor.int64_data(i)));
    break;
  case DType::I32:
  case DType::F16:
  case DType::BF16:
  case DType::I8:
  case DType::U8:
  case DType::Bool: {
    if (auto err = checkCount(tensor.int32_data_size(), "int32_data"))
      return std::move(err);
    unsigned size = dtypeSize(*dtype);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t value = static_cast<uint32_t>(tensor.int32_data(i));
      if (size == 4)
        write32le(out + 4 * i, value);
      else if (size == 2)
        write16le(out + 2 * i, static_cast<uint16_t>(value));
      else
        out[i] = static_cast<uint8_t>(value);
    }
    break;
  }
  }
  return finish(std::move(bytes));
}

void tensorToProto(const TensorData &data, StringRef name,
                   onnx::TensorProto &proto) {
  if (!name.empty())
    proto.set_name(name.str());
  for (int64_t dim : data.getType().getDims())
    proto.add_dims(dim);
  proto.set_data_type(onnxCode(data.getType().getDType()));
  ArrayRef<uint8_t> bytes = data.getBytes();
  proto.set_raw_data(reinterpret_cast<const char *>(bytes.data()),
                     bytes.size());
}

} // namespace remat::onnx_frontend
