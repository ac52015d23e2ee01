// FifoWatchdog: tests that hand a FIFO to a reader must fail, not hang, when the reader blocks
// in open() (the bug they guard against). After `seconds` the watchdog opens the FIFO's write
// end, which releases a reader stuck in open(); the test then sees fired() and the elapsed time.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace zero::testing {

class FifoWatchdog {
 public:
  FifoWatchdog(std::string fifo, double seconds)
      : fifo_(std::move(fifo)), seconds_(seconds), thread_([this] { watch(); }) {}
  ~FifoWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  FifoWatchdog(const FifoWatchdog&) = delete;
  FifoWatchdog& operator=(const FifoWatchdog&) = delete;

  bool fired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fired_;
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto limit = std::chrono::duration<double>(seconds_);
    if (wake_.wait_for(lock, limit, [this] { return done_; })) return;
    fired_ = true;
    // Keep opening until the reader is released (it may not be in open() yet) or we are done.
    while (!done_) {
      const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
      wake_.wait_for(lock, std::chrono::milliseconds(50), [this] { return done_; });
    }
  }

  std::string fifo_;
  double seconds_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;  // last: starts after every member above is initialised
};

}  // namespace zero::testing
