//===- tests/install/ApiTest.cpp - The C and C++ API of libremat.so -------===//
//
// Linked against the shared library alone (no internal header, no internal
// library): what the API promises to a program that only has
// include/remat and include/remat-c.
//
//===----------------------------------------------------------------------===//
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ApiTestMlp.h"
#include "remat-c/remat.h"
#include "remat/remat.h"

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

TEST_CASE("the library and the headers have the same version") {
  CHECK(std::string(remat::getVersion()) == REMAT_VERSION_STRING);
  CHECK(std::string(rematGetVersion()) == REMAT_VERSION_STRING);
}

TEST_CASE("C++: load, build a training step, plan, export") {
  remat::Result<remat::Model> model = remat::Model::fromRir(kMlp);
  REQUIRE_MESSAGE(model.ok(), model.status().message());
  CHECK(model->getName() == "mlp");
  CHECK_FALSE(model->isTrainingStep());
  CHECK(model->getPlanJson() == "null");
  remat::OptimizeOptions options;
  options.strategy = "none";
  remat::Status status = model->optimize(options);
  REQUIRE_MESSAGE(status.ok(), status.message());
  CHECK(model->isTrainingStep());
  CHECK(model->toRir().find("%w_grad") != std::string::npos);
  CHECK(model->getMemoryReportJson().find("\"peak_bytes\"") !=
        std::string::npos);
  CHECK(model->getPlanJson() != "null");
  remat::Result<std::string> onnx = model->toOnnxBytes();
  REQUIRE(onnx.ok());
  // The bytes read back into an equal graph.
  remat::Result<remat::Model> back = remat::Model::fromOnnxBytes(*onnx);
  REQUIRE_MESSAGE(back.ok(), back.status().message());
  CHECK(back->isTrainingStep());
}

TEST_CASE("C++: errors are statuses with the tools' messages") {
  remat::Result<remat::Model> bad = remat::Model::fromRir("graph @g(", "g.rir");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().rfind("g.rir:1:", 0) == 0);

  remat::Result<remat::Model> missing = remat::Model::load("missing.xyz");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "cannot read 'missing.xyz': unsupported input format '.xyz' "
        "(supported: .rir, .onnx, .json)");

  remat::Result<remat::Model> model = remat::Model::fromRir(kMlp);
  REQUIRE(model.ok());
  remat::Status unknown = model->runPipeline("dce,no-such-pass");
  CHECK(unknown.message().rfind("unknown pass 'no-such-pass'", 0) == 0);
  remat::OptimizeOptions options;
  options.budget = "lots";
  CHECK(model->optimize(options).message().rfind("--budget: ", 0) == 0);

  remat::Result<remat::Model> onnx = remat::Model::fromOnnxBytes("garbage");
  CHECK_FALSE(onnx.ok());
}

TEST_CASE("C: handles, buffers and statuses") {
  RematModel *model = nullptr;
  REQUIRE(rematModelLoadRir(kMlp, &model) == nullptr);
  REQUIRE(model != nullptr);
  REQUIRE(rematModelOptimize(model, nullptr, "none") == nullptr);
  RematBuffer *report = nullptr;
  REQUIRE(rematModelGetMemoryReport(model, &report) == nullptr);
  CHECK(std::strlen(rematBufferGetData(report)) == rematBufferGetSize(report));
  CHECK(std::strstr(rematBufferGetData(report), "peak_bytes"));
  rematBufferDestroy(report);
  RematBuffer *onnx = nullptr;
  REQUIRE(rematModelToOnnx(model, &onnx) == nullptr);
  CHECK(rematBufferGetSize(onnx) > 100);
  RematModel *back = nullptr;
  RematStatus *status = rematModelLoadOnnxBytes(
      rematBufferGetData(onnx), rematBufferGetSize(onnx), nullptr, &back);
  CHECK_MESSAGE(status == nullptr, rematStatusGetMessage(status));
  rematBufferDestroy(onnx);
  rematModelDestroy(back);

  status = rematModelRunPipeline(model, "no-such-pass");
  REQUIRE(status != nullptr);
  CHECK(std::string(rematStatusGetMessage(status))
            .rfind("unknown pass 'no-such-pass'", 0) == 0);
  rematStatusDestroy(status);
  rematModelDestroy(model);

  // A failed load leaves no model; null arguments are errors, not crashes.
  RematModel *none = reinterpret_cast<RematModel *>(1);
  status = rematModelLoad("missing.onnx", nullptr, &none);
  REQUIRE(status != nullptr);
  CHECK(none == nullptr);
  CHECK(std::string(rematStatusGetMessage(status)).find("missing.onnx") !=
        std::string::npos);
  rematStatusDestroy(status);
  status = rematModelLoad("x.rir", nullptr, nullptr);
  REQUIRE(status != nullptr);
  rematStatusDestroy(status);
  status = rematModelOptimize(nullptr, "1GiB", nullptr);
  REQUIRE(status != nullptr);
  rematStatusDestroy(status);
  // Destroying nothing is allowed.
  rematModelDestroy(nullptr);
  rematStatusDestroy(nullptr);
  rematBufferDestroy(nullptr);
}

TEST_CASE("C: ONNX bytes read external data only from a base folder given") {
  const std::string folder = REMAT_API_TEST_INPUTS "/external";
  std::ifstream file(folder + "/model.onnx", std::ios::binary);
  REQUIRE(file);
  std::string bytes((std::istreambuf_iterator<char>(file)),
                    std::istreambuf_iterator<char>());

  RematModel *model = reinterpret_cast<RematModel *>(1);
  RematStatus *status =
      rematModelLoadOnnxBytes(bytes.data(), bytes.size(), nullptr, &model);
  REQUIRE(status != nullptr);
  CHECK(model == nullptr);
  CHECK(std::string(rematStatusGetMessage(status)) ==
        "<onnx bytes>: initializer 'w': external data location 'w.bin' "
        "cannot be read: the model was given as bytes with no base folder "
        "(give one to allow external data)");
  rematStatusDestroy(status);
  status = rematModelLoadOnnxBytesWithBaseDir(bytes.data(), bytes.size(),
                                              nullptr, nullptr, &model);
  REQUIRE(status != nullptr);
  rematStatusDestroy(status);

  status = rematModelLoadOnnxBytesWithBaseDir(
      bytes.data(), bytes.size(), folder.c_str(), nullptr, &model);
  REQUIRE_MESSAGE(status == nullptr, rematStatusGetMessage(status));
  REQUIRE(rematModelOptimize(model, nullptr, "none") == nullptr);
  rematModelDestroy(model);

  // The C++ API's overload.
  remat::Result<remat::Model> cpp =
      remat::Model::fromOnnxBytes(bytes, folder, {});
  REQUIRE_MESSAGE(cpp.ok(), cpp.status().message());
  CHECK(cpp->getName() == "ext");
}

TEST_CASE("C: every entry point takes NULL handles and buffers") {
  // Each call with NULL for every pointer is an error status (or, for the
  // accessors and destroyers, a harmless default), never a crash.
  // \p message, when given, is the whole message: "any error" would also
  // pass when the check of NULL is gone and a later step fails instead.
  auto expectError = [](RematStatus *status, const char *what,
                        const char *message = nullptr) {
    CHECK_MESSAGE(status != nullptr, what);
    CHECK(std::strlen(rematStatusGetMessage(status)) > 0);
    if (message)
      CHECK(std::string(rematStatusGetMessage(status)) == std::string(message));
    rematStatusDestroy(status);
  };
  CHECK(std::string(rematStatusGetMessage(nullptr)).empty());
  CHECK(std::string(rematBufferGetData(nullptr)).empty());
  CHECK(rematBufferGetSize(nullptr) == 0);
  expectError(rematModelLoad(nullptr, nullptr, nullptr), "Load");
  RematModel *model = nullptr;
  expectError(rematModelLoad(nullptr, nullptr, &model), "Load(path NULL)");
  CHECK(model == nullptr);
  expectError(rematModelLoadOnnxBytes(nullptr, 0, nullptr, nullptr),
              "LoadOnnxBytes");
  expectError(rematModelLoadOnnxBytes(nullptr, 100, nullptr, &model),
              "LoadOnnxBytes(data NULL, size 100)",
              "rematModelLoadOnnxBytes: the data pointer is null but the size "
              "is 100");
  CHECK(model == nullptr);
  expectError(rematModelLoadOnnxBytes(nullptr, 0, nullptr, &model),
              "LoadOnnxBytes(data NULL, size 0)");
  expectError(rematModelLoadOnnxBytesWithBaseDir(nullptr, 0, nullptr, nullptr,
                                                 nullptr),
              "LoadOnnxBytesWithBaseDir");
  expectError(
      rematModelLoadOnnxBytesWithBaseDir(nullptr, 100, ".", nullptr, &model),
      "LoadOnnxBytesWithBaseDir(data NULL, size 100)",
      "rematModelLoadOnnxBytesWithBaseDir: the data pointer is null "
      "but the size is 100");
  CHECK(model == nullptr);
  expectError(rematModelLoadRir(nullptr, nullptr), "LoadRir");
  expectError(rematModelLoadRir(nullptr, &model), "LoadRir(text NULL)");
  expectError(rematModelRunPipeline(nullptr, nullptr), "RunPipeline");
  expectError(rematModelOptimize(nullptr, nullptr, nullptr), "Optimize");
  RematBuffer *buffer = nullptr;
  expectError(rematModelGetMemoryReport(nullptr, &buffer), "GetMemoryReport");
  expectError(rematModelGetPlan(nullptr, &buffer), "GetPlan");
  expectError(rematModelToOnnx(nullptr, &buffer), "ToOnnx");
  expectError(rematModelWriteOnnx(nullptr, nullptr), "WriteOnnx");
  CHECK(buffer == nullptr);

  // A real model with NULL out-pointers and strings.
  REQUIRE(rematModelLoadRir(kMlp, &model) == nullptr);
  expectError(rematModelGetMemoryReport(model, nullptr), "GetMemoryReport(model)");
  expectError(rematModelGetPlan(model, nullptr), "GetPlan(model)");
  expectError(rematModelToOnnx(model, nullptr), "ToOnnx(model)");
  expectError(rematModelWriteOnnx(model, nullptr), "WriteOnnx(model, NULL)");
  RematStatus *status = rematModelRunPipeline(model, nullptr);
  rematStatusDestroy(status);
  rematModelDestroy(model);
}

TEST_CASE("C: two threads using one model take turns") {
  // Each thread plans, reads the report and exports the same model over
  // and over; the model's mutex makes the calls take turns (run under the
  // sanitizer phase, a freed graph would show). The calls overlap only by
  // chance, so without the mutex this fails now and then: ApiLockTest.cpp
  // checks, without a race, that every call waits for the model's lock.
  RematModel *model = nullptr;
  REQUIRE(rematModelLoadRir(kMlp, &model) == nullptr);
  std::atomic<int> failures{0};
  auto hammer = [&](const char *strategy) {
    for (int i = 0; i < 20; ++i) {
      if (RematStatus *status =
              rematModelRunPipeline(model, "canonicalize,dce")) {
        ++failures;
        rematStatusDestroy(status);
      }
      if (i == 0)
        rematStatusDestroy(rematModelOptimize(model, nullptr, strategy));
      RematBuffer *report = nullptr;
      if (RematStatus *status = rematModelGetMemoryReport(model, &report)) {
        ++failures;
        rematStatusDestroy(status);
      } else if (!std::strstr(rematBufferGetData(report), "peak_bytes")) {
        ++failures;
      }
      rematBufferDestroy(report);
      RematBuffer *onnx = nullptr;
      if (RematStatus *status = rematModelToOnnx(model, &onnx)) {
        ++failures;
        rematStatusDestroy(status);
      }
      rematBufferDestroy(onnx);
    }
  };
  std::thread first(hammer, "none"), second(hammer, "none");
  first.join();
  second.join();
  CHECK(failures.load() == 0);
  rematModelDestroy(model);
}
