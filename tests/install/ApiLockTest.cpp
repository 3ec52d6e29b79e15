//===- tests/install/ApiLockTest.cpp - A model's lock, held from outside --===//
//
// remat-c/remat.h promises that threads sharing a model take turns. Two
// threads calling at once would show a missing lock only when their calls
// happen to overlap; here the test holds the model's lock itself, through
// the handle's definition (api/CApiModel.h: the one internal header this
// part of remat-api-tests reads; it still links libremat.so alone), and
// calls each entry point that takes a model on a second thread. The call
// must not return while the lock is held (a call that waits cannot have
// touched the model; one that does not take the lock returns) and must
// return, successfully, once it is released.
//
//===----------------------------------------------------------------------===//
#include <doctest/doctest.h>

#include "ApiTestMlp.h"
#include "api/CApiModel.h"
#include "remat-c/remat.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

/// Runs \p call (which returns its status and frees what it made) on
/// another thread while this one holds \p model's lock, and checks that it
/// returns only after the lock is released.
void checkWaitsForLock(RematModel *model, const char *name,
                       const std::function<RematStatus *()> &call) {
  INFO(std::string(name));
  // How long the call takes with nobody holding the lock (its second run:
  // the first may initialize, e.g. ONNX's schemas), so that a call that
  // ignores the lock has had 50 times that (250 ms at least) to return
  // before the check below, even in a slow (sanitizer) build.
  Clock::duration alone{};
  for (int run = 0; run < 2; ++run) {
    Clock::time_point start = Clock::now();
    RematStatus *status = call();
    alone = Clock::now() - start;
    REQUIRE_MESSAGE(status == nullptr, rematStatusGetMessage(status));
  }
  Clock::duration hold =
      std::max<Clock::duration>(std::chrono::milliseconds(250), 50 * alone);

  std::atomic<bool> returned{false};
  RematStatus *status = nullptr;
  std::unique_lock<std::mutex> lock(model->mutex);
  std::thread caller([&] {
    status = call();
    returned = true;
  });
  for (Clock::time_point deadline = Clock::now() + hold;
       !returned && Clock::now() < deadline;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bool returnedWhileHeld = returned;
  lock.unlock();
  caller.join();
  CHECK_MESSAGE(!returnedWhileHeld,
                "returned while another thread held the model's lock");
  CHECK_MESSAGE(status == nullptr, rematStatusGetMessage(status));
  rematStatusDestroy(status);
}

} // namespace

TEST_CASE("C: every call on a model waits for the model's lock") {
  RematModel *model = nullptr;
  REQUIRE(rematModelLoadRir(kMlp, &model) == nullptr);
  // The report's and the plan's getters are checked after rematModelOptimize
  // has made a training step, so they read a plan.
  checkWaitsForLock(model, "rematModelRunPipeline", [&] {
    return rematModelRunPipeline(model, "canonicalize");
  });
  checkWaitsForLock(model, "rematModelOptimize",
                    [&] { return rematModelOptimize(model, nullptr, "none"); });
  auto getter = [&](RematStatus *(*get)(const RematModel *, RematBuffer **)) {
    return [&, get] {
      RematBuffer *buffer = nullptr;
      RematStatus *status = get(model, &buffer);
      rematBufferDestroy(buffer);
      return status;
    };
  };
  checkWaitsForLock(model, "rematModelGetMemoryReport",
                    getter(rematModelGetMemoryReport));
  checkWaitsForLock(model, "rematModelGetPlan", getter(rematModelGetPlan));
  checkWaitsForLock(model, "rematModelToOnnx", getter(rematModelToOnnx));
  checkWaitsForLock(model, "rematModelWriteOnnx", [&] {
    return rematModelWriteOnnx(model, REMAT_API_LOCK_TEST_OUTPUT);
  });
  std::remove(REMAT_API_LOCK_TEST_OUTPUT);
  rematModelDestroy(model);
}
