//===- runtime/cpu/Parallel.cpp - A thread pool for the CPU kernels -------===//
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cassert>

namespace remat::runtime::cpu {

ParallelFor::~ParallelFor() = default;

namespace {
/// True on pool workers and on a thread inside run(): a nested run() then
/// executes inline.
thread_local bool insideParallelRegion = false;
} // namespace

ThreadPoolParallelFor::ThreadPoolParallelFor(unsigned numThreads) {
  if (numThreads == 0)
    numThreads = std::max(1u, std::thread::hardware_concurrency());
  numThreads_ = numThreads;
  // A thread that cannot start (std::system_error) leaves the pool with the
  // workers started so far: stop and join them before passing the exception
  // on, since a joinable std::thread must not be destroyed.
  try {
    workers_.reserve(numThreads - 1);
    for (unsigned i = 0; i + 1 < numThreads; ++i)
      workers_.emplace_back([this, i] { workerLoop(i); });
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    jobReady_.notify_all();
    for (std::thread &worker : workers_)
      worker.join();
    throw;
  }
}

ThreadPoolParallelFor::~ThreadPoolParallelFor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  jobReady_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

void ThreadPoolParallelFor::workerLoop(unsigned workerIndex) {
  insideParallelRegion = true;
  uint64_t seenGeneration = 0;
  while (true) {
    const std::function<void(int64_t, int64_t)> *body;
    int64_t count, numChunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      jobReady_.wait(
          lock, [&] { return stopping_ || generation_ != seenGeneration; });
      if (stopping_)
        return;
      seenGeneration = generation_;
      body = body_;
      count = count_;
      numChunks = numChunks_;
    }
    // Chunk 0 belongs to the caller; worker i takes chunk i + 1.
    int64_t chunk = static_cast<int64_t>(workerIndex) + 1;
    if (chunk >= numChunks)
      continue;
    auto [begin, end] = chunkBounds(count, numChunks, chunk);
    (*body)(begin, end);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0)
      jobDone_.notify_one();
  }
}

void ThreadPoolParallelFor::run(
    int64_t count, int64_t grain,
    const std::function<void(int64_t, int64_t)> &body) {
  if (count <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t numChunks =
      std::min<int64_t>(numThreads_, (count + grain - 1) / grain);
  if (numChunks <= 1 || insideParallelRegion) {
    body(0, count);
    return;
  }
  std::unique_lock<std::mutex> runLock(runMutex_, std::try_to_lock);
  if (!runLock.owns_lock()) {
    // Another thread is using the workers; do not wait for them.
    body(0, count);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    count_ = count;
    numChunks_ = numChunks;
    pending_ = numChunks - 1;
    ++generation_;
  }
  jobReady_.notify_all();
  insideParallelRegion = true;
  auto [begin, end] = chunkBounds(count, numChunks, 0);
  body(begin, end);
  insideParallelRegion = false;
  std::unique_lock<std::mutex> lock(mutex_);
  jobDone_.wait(lock, [&] { return pending_ == 0; });
  body_ = nullptr;
}

} // namespace remat::runtime::cpu
