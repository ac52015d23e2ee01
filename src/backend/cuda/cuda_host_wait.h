// How the CUDA backend's host waits (copies to the host, synchronize, event waits) wait. Without
// registered checks they block in the CUDA runtime. With checks - NcclComm registers one that
// throws when NCCL reports an asynchronous failure (a peer rank died, the network broke) - they
// poll the stream or event and run every check each kCheckSeconds, so a collective that can never
// finish ends the wait with an error instead of a hang.
// Thread safety: the backend's host thread only (the backend's rule).
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <map>

namespace zero::backend::cuda {

class HostWaitChecks {
 public:
  // Seconds between two runs of the checks while the host waits.
  static constexpr double kCheckSeconds = 0.1;

  // `check` throws zero::Error to end a wait. Returns its id for remove().
  int add(std::function<void()> check);
  void remove(int id);
  bool empty() const { return checks_.empty(); }

  // Returns once `stream`'s work (or `event`) is complete; throws what a check or CUDA throws.
  void wait_for_stream(cudaStream_t stream);
  void wait_for_event(cudaEvent_t event);

 private:
  void poll(const std::function<cudaError_t()>& query);
  void run_checks();

  std::map<int, std::function<void()>> checks_;
  int next_id_ = 1;
};

}  // namespace zero::backend::cuda
