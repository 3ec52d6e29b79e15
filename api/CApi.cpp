//===- api/CApi.cpp - remat's C API over the C++ API ----------------------===//
//
// remat-c/remat.h. Each entry point catches what the C++ side may throw
// (std::bad_alloc, an exception from a third-party library) so that nothing
// but a RematStatus reaches C. A null handle or out-pointer is an error
// status. Each model has a mutex that every call on it holds (RematModel,
// api/CApiModel.h): remat::Model is not safe to share, so two threads using
// one model take turns.
//
//===----------------------------------------------------------------------===//
#include "remat-c/remat.h"

#include "api/CApiModel.h"
#include "remat/remat.h"

#include <exception>
#include <mutex>
#include <new>
#include <string>

struct RematStatus {
  std::string message;
};

struct RematBuffer {
  std::string bytes;
};

namespace {

RematStatus *makeStatus(std::string message) {
  return new (std::nothrow) RematStatus{std::move(message)};
}

RematStatus *toStatus(const remat::Status &status) {
  return status.ok() ? nullptr : makeStatus(status.message());
}

/// Runs \p body, turning an exception into a status.
template <typename Body> RematStatus *guard(Body body) {
  try {
    return body();
  } catch (const std::exception &e) {
    return makeStatus(std::string("internal error: ") + e.what());
  } catch (...) {
    return makeStatus("internal error: unknown exception");
  }
}

RematStatus *checkOut(const void *out, const char *function) {
  if (out)
    return nullptr;
  return makeStatus(std::string(function) + ": a required pointer argument is null");
}

RematStatus *takeModel(remat::Result<remat::Model> result,
                       RematModel **model) {
  if (!result.ok())
    return toStatus(result.status());
  *model = new RematModel{std::move(*result), {}};
  return nullptr;
}

RematStatus *makeBuffer(std::string bytes, RematBuffer **buffer) {
  *buffer = new RematBuffer{std::move(bytes)};
  return nullptr;
}

/// Both ONNX-bytes loaders: \p baseDir NULL or "" reads no external data.
/// Errors name the entry point \p function.
RematStatus *loadOnnxBytes(const void *data, size_t size, const char *baseDir,
                           const char *bind, RematModel **model,
                           const char *function) {
  if (RematStatus *status = checkOut(model, function))
    return status;
  *model = nullptr;
  return guard([&] {
    remat::LoadOptions options;
    options.bind = bind ? bind : "";
    if (!data && size != 0)
      return makeStatus(std::string(function) +
                        ": the data pointer is null but the size is " +
                        std::to_string(size));
    std::string_view bytes(static_cast<const char *>(data), data ? size : 0);
    return takeModel(
        remat::Model::fromOnnxBytes(bytes, baseDir ? baseDir : "", options),
        model);
  });
}

} // namespace

extern "C" {

const char *rematGetVersion(void) { return remat::getVersion(); }

const char *rematStatusGetMessage(const RematStatus *status) {
  return status ? status->message.c_str() : "";
}

void rematStatusDestroy(RematStatus *status) { delete status; }

const char *rematBufferGetData(const RematBuffer *buffer) {
  return buffer ? buffer->bytes.c_str() : "";
}

size_t rematBufferGetSize(const RematBuffer *buffer) {
  return buffer ? buffer->bytes.size() : 0;
}

void rematBufferDestroy(RematBuffer *buffer) { delete buffer; }

RematStatus *rematModelLoad(const char *path, const char *bind,
                            RematModel **model) {
  if (RematStatus *status = checkOut(model, "rematModelLoad"))
    return status;
  *model = nullptr;
  return guard([&] {
    remat::LoadOptions options;
    options.bind = bind ? bind : "";
    return takeModel(remat::Model::load(path ? path : "", options), model);
  });
}

RematStatus *rematModelLoadOnnxBytes(const void *data, size_t size,
                                     const char *bind, RematModel **model) {
  return loadOnnxBytes(data, size, /*baseDir=*/nullptr, bind, model,
                       "rematModelLoadOnnxBytes");
}

RematStatus *rematModelLoadOnnxBytesWithBaseDir(const void *data, size_t size,
                                                const char *baseDir,
                                                const char *bind,
                                                RematModel **model) {
  return loadOnnxBytes(data, size, baseDir, bind, model,
                       "rematModelLoadOnnxBytesWithBaseDir");
}

RematStatus *rematModelLoadRir(const char *text, RematModel **model) {
  if (RematStatus *status = checkOut(model, "rematModelLoadRir"))
    return status;
  *model = nullptr;
  return guard(
      [&] { return takeModel(remat::Model::fromRir(text ? text : ""), model); });
}

void rematModelDestroy(RematModel *model) { delete model; }

RematStatus *rematModelRunPipeline(RematModel *model, const char *pipeline) {
  if (RematStatus *status = checkOut(model, "rematModelRunPipeline"))
    return status;
  std::lock_guard<std::mutex> lock(model->mutex);
  return guard([&] {
    return toStatus(model->model.runPipeline(pipeline ? pipeline : ""));
  });
}

RematStatus *rematModelOptimize(RematModel *model, const char *budget,
                                const char *strategy) {
  if (RematStatus *status = checkOut(model, "rematModelOptimize"))
    return status;
  std::lock_guard<std::mutex> lock(model->mutex);
  return guard([&] {
    remat::OptimizeOptions options;
    options.budget = budget ? budget : "";
    options.strategy = strategy ? strategy : "";
    return toStatus(model->model.optimize(options));
  });
}

RematStatus *rematModelGetMemoryReport(const RematModel *model,
                                       RematBuffer **json) {
  if (RematStatus *status = checkOut(model && json ? json : nullptr,
                                     "rematModelGetMemoryReport"))
    return status;
  std::lock_guard<std::mutex> lock(model->mutex);
  return guard(
      [&] { return makeBuffer(model->model.getMemoryReportJson(), json); });
}

RematStatus *rematModelGetPlan(const RematModel *model, RematBuffer **json) {
  if (RematStatus *status =
          checkOut(model && json ? json : nullptr, "rematModelGetPlan"))
    return status;
  std::lock_guard<std::mutex> lock(model->mutex);
  return guard([&] { return makeBuffer(model->model.getPlanJson(), json); });
}

RematStatus *rematModelToOnnx(const RematModel *model, RematBuffer **onnx) {
  if (RematStatus *status =
          checkOut(model && onnx ? onnx : nullptr, "rematModelToOnnx"))
    return status;
  std::lock_guard<std::mutex> lock(model->mutex);
  return guard([&]() -> RematStatus * {
    remat::Result<std::string> bytes = model->model.toOnnxBytes();
    if (!bytes.ok())
      return toStatus(bytes.status());
    return makeBuffer(std::move(*bytes), onnx);
  });
}

RematStatus *rematModelWriteOnnx(const RematModel *model, const char *path) {
  if (RematStatus *status = checkOut(model, "rematModelWriteOnnx"))
    return status;
  std::lock_guard<std::mutex> lock(model->mutex);
  return guard(
      [&] { return toStatus(model->model.writeOnnx(path ? path : "")); });
}

} // extern "C"
