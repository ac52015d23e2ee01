// parallel_for and WorkerPool: items are handed out in increasing order; failures are kept by
// lowest index.
#include "data/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

namespace zero::data {

int default_thread_count() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(std::min<unsigned>(cores, 1024));
}

void parallel_for(size_t count, int threads, const std::function<void(size_t)>& task) {
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  std::atomic<size_t> next{0};
  std::atomic<size_t> first_failure{kNone};
  std::mutex failure_mutex;
  std::exception_ptr failure;

  const auto work = [&] {
    for (;;) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      // Items are taken in increasing order, so once one past a failure is taken, all later
      // ones are past it too.
      if (i >= count || i > first_failure.load(std::memory_order_relaxed)) return;
      try {
        task(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (i < first_failure.load(std::memory_order_relaxed)) {
          failure = std::current_exception();
          first_failure.store(i, std::memory_order_relaxed);
        }
      }
    }
  };

  const auto extra = static_cast<size_t>(std::clamp(threads, 1, 1024) - 1);
  std::vector<std::thread> pool;
  pool.reserve(std::min(extra, count));
  try {
    for (size_t t = 0; t < extra && t + 1 < count; ++t) pool.emplace_back(work);
  } catch (...) {
    // A thread that cannot be started (resource limits): the threads already running and this
    // one finish the work.
  }
  work();
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

WorkerPool::WorkerPool(int threads) {
  const int count = std::clamp(threads, 1, 1024);
  threads_.reserve(static_cast<size_t>(count));
  try {
    for (int t = 0; t < count; ++t) threads_.emplace_back([this] { work(); });
  } catch (...) {
    // Threads that cannot be started (resource limits): the ones running do the work; with
    // none at all there is no pool.
    if (threads_.empty()) throw;
  }
}

WorkerPool::~WorkerPool() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void WorkerPool::start(size_t count, const std::function<void(size_t)>& task) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    count_ = count;
    next_ = 0;
    first_failure_ = count;
    failure_ = nullptr;
    busy_ = static_cast<int>(threads_.size());
    ++job_;
  }
  wake_.notify_all();
}

void WorkerPool::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return busy_ == 0; });
  task_ = nullptr;
  if (failure_) {
    std::exception_ptr failure = failure_;
    failure_ = nullptr;
    std::rethrow_exception(failure);
  }
}

void WorkerPool::work() {
  size_t seen_job = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return closing_ || job_ != seen_job; });
    if (closing_) return;
    seen_job = job_;
    // Items one at a time under the lock: a document takes microseconds to milliseconds to
    // tokenize, far longer than taking the lock.
    while (next_ < count_ && next_ <= first_failure_) {
      const size_t i = next_++;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*task_)(i);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && i < first_failure_) {
        first_failure_ = i;
        failure_ = error;
      }
    }
    if (--busy_ == 0) done_.notify_all();
  }
}

}  // namespace zero::data
