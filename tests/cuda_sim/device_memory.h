// The simulated device's allocations (cudaMalloc: "device" memory; cudaHostAlloc/cudaMallocHost:
// pinned host memory, which kernels may also reach through unified addressing). Both are host
// memory underneath; the registry lets the runtime check what CUDA would fault on: copies that
// run past an allocation, device pointers that are not device memory, frees of foreign pointers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

namespace cuda_sim {

enum class MemoryKind { kDevice, kPinnedHost };

struct Allocation {
  uintptr_t begin = 0;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kDevice;
};

// New device memory is filled with this byte: 0xff...ff is a NaN in f32, f16 and bf16, so a read
// of memory no kernel or copy has written shows up in the results.
inline constexpr unsigned char kPoisonByte = 0xff;
// cudaMalloc's alignment guarantee.
inline constexpr size_t kDeviceAlignment = 256;
// The simulated device's memory size (an H100's 80 GB).
inline constexpr size_t kDeviceMemoryBytes = size_t{80} << 30;

// nullptr when the bytes are not available (a cudaErrorMemoryAllocation).
void* allocate(size_t bytes, MemoryKind kind);
// False when `pointer` is not the start of a live allocation of that kind.
bool release(void* pointer, MemoryKind kind);
// The live allocation holding the address `pointer`, if any.
std::optional<Allocation> find_allocation(const void* pointer);
size_t device_bytes_in_use();

}  // namespace cuda_sim
