#include "backend/cuda/cuda_host_wait.h"

#include <chrono>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace zero::backend::cuda {

int HostWaitChecks::add(std::function<void()> check) {
  const int id = next_id_++;
  checks_.emplace(id, std::move(check));
  return id;
}

void HostWaitChecks::remove(int id) { checks_.erase(id); }

void HostWaitChecks::wait_for_stream(cudaStream_t stream) {
  if (checks_.empty()) {
    ZERO_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  poll([stream] { return cudaStreamQuery(stream); });
}

void HostWaitChecks::wait_for_event(cudaEvent_t event) {
  if (checks_.empty()) {
    ZERO_CUDA_CHECK(cudaEventSynchronize(event));
    return;
  }
  poll([event] { return cudaEventQuery(event); });
}

void HostWaitChecks::run_checks() {
  // A copy: a check that fails may lead its owner to remove itself while this runs.
  std::vector<std::function<void()>> checks;
  checks.reserve(checks_.size());
  for (const auto& [id, check] : checks_) checks.push_back(check);
  for (const auto& check : checks) check();
}

void HostWaitChecks::poll(const std::function<cudaError_t()>& query) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_check = start;
  for (;;) {
    const cudaError_t status = query();
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) ZERO_CUDA_CHECK(status);
    const auto now = Clock::now();
    if (now >= next_check) {
      run_checks();
      next_check = now + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(kCheckSeconds));
    }
    // Short waits (a step's one loss read) stay responsive: yield for the first millisecond,
    // then sleep in small steps so a long wait does not hold a core.
    if (now - start < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace zero::backend::cuda
