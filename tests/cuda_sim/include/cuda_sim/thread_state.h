// What device code sees of the simulated thread running it: the built-in indices, the block's
// dynamic shared memory, the block barrier and the warp exchange that the warp intrinsics and the
// mma emulation are built on. One kernel runs at a time (launches are serialised), so these are
// plain globals, switched by the block scheduler as it switches fibers.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace cuda_sim {

struct BuiltinIndices {
  uint3 thread_idx{};
  uint3 block_idx{};
  dim3 block_dim{};
  dim3 grid_dim{};
};
extern BuiltinIndices g_builtins;
extern unsigned char* g_dynamic_shared;  // 128-byte aligned, poisoned before every block

// __syncthreads: waits until every thread of the block that has not exited arrives.
void sync_threads();

// The lane (0..31) of the running thread within its warp.
unsigned lane_id();

// Fills a static __shared__ variable with poison the first time the running block reaches its
// declaration (the rewriter calls it after each one): every block starts with garbage there.
void poison_static_shared(void* variable, size_t bytes);

// A number that differs for every block run (per-block state of the emulations resets on it).
uint64_t block_serial();

// Bytes each lane may contribute to one warp exchange.
inline constexpr size_t kWarpSlotBytes = 32;

// Every lane named in `mask` (the caller among them) contributes `bytes` bytes under the name
// `op`; returns once all of them have, with the 32 lanes' slots (kWarpSlotBytes apart). The slots
// stay valid until the caller's next-but-one exchange. Lanes must agree on mask and op; a lane of
// the mask that has exited (or does not exist) is a fault.
const unsigned char* warp_exchange(unsigned mask, const void* value, size_t bytes, const char* op);

// Ends the running launch with a fault: the launch throws std::runtime_error(what), naming the
// kernel, block and thread.
[[noreturn]] void kernel_fault(const std::string& what);

}  // namespace cuda_sim
