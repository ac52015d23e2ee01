// State of the fake CUDA runtime that the launcher shares with it.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "cuda_sim/streams.h"

// The runtime's stream handle: its flags and its queue (streams.h).
struct CUstream_st {
  unsigned flags = 0;
  std::shared_ptr<cuda_sim::StreamQueue> queue;
};

namespace cuda_sim {

// The error cudaGetLastError returns (and clears) next; a launch failure sets it.
void set_last_error(cudaError_t error);
// The null stream, the legacy/per-thread handles, or a created and not yet destroyed stream.
bool is_known_stream(cudaStream_t stream);

// cudaFuncAttributeMaxDynamicSharedMemorySize, per kernel (default 48 KiB).
void set_max_dynamic_shared(const void* kernel, int bytes);
// The most any kernel may opt in to (an H100's 227 KiB).
inline constexpr int kMaxDynamicSharedOptIn = 232448;
inline constexpr int kDefaultDynamicShared = 48 * 1024;

}  // namespace cuda_sim
