//===- runtime/cpu/Parallel.h - Thread pool for the CPU kernels -*- C++ -*-===//
//
// The CPU backend owns one ThreadPoolParallelFor and hands it to every kernel
// through KernelContext. How work is split over threads never changes what a
// kernel computes (see runtime/cpu/Kernels.h), so the thread count is a pure
// speed setting.
//
//===----------------------------------------------------------------------===//
#ifndef REMAT_RUNTIME_CPU_PARALLEL_H
#define REMAT_RUNTIME_CPU_PARALLEL_H

#include "runtime/cpu/Kernels.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace remat::runtime::cpu {

/// A ParallelFor over a fixed set of worker threads. run() splits [0, count)
/// into up to kChunksPerThread chunks per thread (none smaller than the
/// grain); the calling thread and the woken workers claim chunks from a
/// shared counter until none is left, so a thread that wakes late or is
/// descheduled by the machine delays the run by at most a chunk, and a
/// worker that wakes after the last chunk was claimed does nothing. Which
/// thread runs a chunk, and how many chunks there are, never changes a
/// kernel's result (runtime/cpu/Kernels.h). A run() issued from inside a
/// body, or while another thread's run() is in flight, executes inline on its
/// caller: nesting never deadlocks and never oversubscribes.
class ThreadPoolParallelFor final : public ParallelFor {
public:
  /// Starts \p numThreads - 1 workers (the caller is the last thread); 0
  /// means std::thread::hardware_concurrency().
  explicit ThreadPoolParallelFor(unsigned numThreads = 0);
  ~ThreadPoolParallelFor() override;
  ThreadPoolParallelFor(const ThreadPoolParallelFor &) = delete;
  ThreadPoolParallelFor &operator=(const ThreadPoolParallelFor &) = delete;

  void run(int64_t count, int64_t grain,
           const std::function<void(int64_t, int64_t)> &body) override;
  unsigned getNumThreads() const override { return numThreads_; }

private:
  /// Chunks per thread: enough that a late or slow thread leaves little to
  /// wait for, few enough that a chunk stays worth its claim.
  static constexpr int64_t kChunksPerThread = 4;

  /// One run(): its body and the counter its chunks are claimed from. Lives
  /// on the stack of run(), which returns only when no worker uses it.
  struct Job {
    const std::function<void(int64_t, int64_t)> *body;
    int64_t count, numChunks;
    std::atomic<int64_t> nextChunk{0};
  };

  void workerLoop();
  /// Claims and runs chunks of \p job until none is left.
  static void runChunks(Job &job);

  unsigned numThreads_;
  std::vector<std::thread> workers_;

  /// Serializes run() calls that use the workers.
  std::mutex runMutex_;

  // The job in flight, guarded by mutex_.
  std::mutex mutex_;
  std::condition_variable jobReady_;
  std::condition_variable jobDone_;
  /// Null once the job's caller has seen all its chunks done.
  Job *job_ = nullptr;
  /// Incremented for every job so that workers tell a new job from the last.
  /// Written under mutex_; atomic so that a spinning worker may read it
  /// without.
  std::atomic<uint64_t> generation_{0};
  /// Workers that took job_ and may still run its chunks. Written under
  /// mutex_; atomic so that a spinning caller may read it without.
  std::atomic<unsigned> activeWorkers_{0};
  bool stopping_ = false;
};

/// \returns the bounds of chunk \p chunk of [0, \p count) split into
/// \p numChunks near-equal parts (the first count % numChunks one longer).
inline std::pair<int64_t, int64_t> chunkBounds(int64_t count, int64_t numChunks,
                                               int64_t chunk) {
  int64_t base = count / numChunks, extra = count % numChunks;
  int64_t begin = chunk * base + std::min(chunk, extra);
  return {begin, begin + base + (chunk < extra ? 1 : 0)};
}

} // namespace remat::runtime::cpu

#endif // REMAT_RUNTIME_CPU_PARALLEL_H
