// Parallel work for `zero prepare` (std::thread; the library's OpenMP pool is for kernels).
// Results are written by item index, so what a caller builds from them does not depend on the
// thread count, and a failure is reported for the lowest failing item, so the error a user sees
// does not depend on the thread count or on timing either.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zero::data {

// The thread count `--threads` defaults to: std::thread::hardware_concurrency(), at least 1.
int default_thread_count();

// Runs task(i) for every i in [0, count) on `threads` threads (the calling thread is one of
// them; threads < 1 counts as 1). Items are handed out in increasing order. When tasks throw,
// items after the lowest failing one may be skipped, every item before it still runs, and once
// all threads have joined the exception of the lowest failing item is rethrown.
void parallel_for(size_t count, int threads, const std::function<void(size_t)>& task);

// The same on threads that live as long as the pool, and without the caller's thread: start()
// returns at once, so the caller can do other work (append the previous batch) until wait().
// Threads that persist keep their thread-local state between jobs (a tokenizer's word cache
// stays warm from one batch to the next, where fresh threads would start it empty each time).
class WorkerPool {
 public:
  explicit WorkerPool(int threads);  // threads < 1 counts as 1
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Begins running task(i) for i in [0, count). `task` must stay alive until wait() returns.
  // One job at a time: call wait() before the next start().
  void start(size_t count, const std::function<void(size_t)>& task);
  // Blocks until the job is done; rethrows the exception of its lowest failing item.
  void wait();

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable wake_;  // workers: a job started, or the pool is closing
  std::condition_variable done_;  // wait(): the last worker finished the job
  const std::function<void(size_t)>* task_ = nullptr;
  size_t count_ = 0;
  size_t next_ = 0;                 // the next item to hand out (under mutex_)
  size_t first_failure_ = 0;        // lowest failing item so far; count_ when none
  std::exception_ptr failure_;
  size_t job_ = 0;                  // increases with every start()
  int busy_ = 0;                    // workers still inside the current job
  bool closing_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace zero::data
