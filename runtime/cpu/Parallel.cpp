//===- runtime/cpu/Parallel.cpp - A thread pool for the CPU kernels -------===//
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <cassert>
#include <chrono>

namespace remat::runtime::cpu {

ParallelFor::~ParallelFor() = default;

namespace {
/// Tells the core that this thread is spinning (x86's pause).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// How long a worker waiting for the next job, and a caller waiting for the
/// workers' last chunks, poll before they sleep on a condition variable:
/// waking a sleeping thread costs tens of microseconds on a VM
/// (measured with remat-bench-parallel), and a training step's
/// kernels follow each other closer than that.
constexpr std::chrono::microseconds kSpin{100};

/// Polls \p waiting (a cheap read, no lock) until it is false or kSpin has
/// passed; the caller then waits on its condition variable as before, so
/// spinning only saves the wake-up, it never decides anything.
template <typename Pred> void spinWhile(Pred &&waiting) {
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (waiting()) {
    for (int i = 0; i < 16; ++i)
      cpuRelax();
    if (std::chrono::steady_clock::now() > deadline)
      return;
  }
}

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
      workers_.emplace_back([this] { workerLoop(); });
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

void ThreadPoolParallelFor::runChunks(Job &job) {
  while (true) {
    int64_t chunk = job.nextChunk.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.numChunks)
      return;
    auto [begin, end] = chunkBounds(job.count, job.numChunks, chunk);
    (*job.body)(begin, end);
  }
}

void ThreadPoolParallelFor::workerLoop() {
  insideParallelRegion = true;
  uint64_t seenGeneration = 0;
  while (true) {
    spinWhile([&] {
      return generation_.load(std::memory_order_acquire) == seenGeneration;
    });
    Job *job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      jobReady_.wait(
          lock, [&] { return stopping_ || generation_ != seenGeneration; });
      if (stopping_)
        return;
      seenGeneration = generation_;
      job = job_;
      if (!job)
        continue; // woke after its caller finished every chunk
      ++activeWorkers_;
    }
    runChunks(*job);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--activeWorkers_ == 0)
      jobDone_.notify_one();
  }
}

void ThreadPoolParallelFor::run(
    int64_t count, int64_t grain,
    const std::function<void(int64_t, int64_t)> &body) {
  if (count <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t numChunks = std::min<int64_t>(numThreads_ * kChunksPerThread,
                                        (count + grain - 1) / grain);
  if (numChunks <= 1 || numThreads_ == 1 || insideParallelRegion) {
    body(0, count);
    return;
  }
  std::unique_lock<std::mutex> runLock(runMutex_, std::try_to_lock);
  if (!runLock.owns_lock()) {
    // Another thread is using the workers; do not wait for them.
    body(0, count);
    return;
  }
  Job job{&body, count, numChunks};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
  }
  jobReady_.notify_all();
  insideParallelRegion = true;
  runChunks(job);
  insideParallelRegion = false;
  // Every chunk is claimed; wait for the workers still running theirs.
  spinWhile(
      [&] { return activeWorkers_.load(std::memory_order_acquire) != 0; });
  std::unique_lock<std::mutex> lock(mutex_);
  jobDone_.wait(lock, [&] { return activeWorkers_ == 0; });
  job_ = nullptr;
}

} // namespace remat::runtime::cpu
