// RawMemory: where a caching allocator gets its blocks from - cudaMalloc/cudaFree on a GPU,
// aligned host memory for the simulated device. No accounting here: the CachingAllocator in
// front of it accounts what tensors use (allocated) and what it holds (reserved).
// Thread safety: calls are serialised by the CachingAllocator that owns the use.
#pragma once
#include <cstddef>

#include "core/device.h"

namespace zero {

class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual Device device() const = 0;
  // `bytes` bytes aligned to at least 256 bytes, or nullptr when the memory is exhausted.
  virtual void* allocate(size_t bytes) = 0;
  // Returns a block allocate() gave out, with the same `bytes`.
  virtual void free(void* ptr, size_t bytes) = 0;
};

}  // namespace zero
