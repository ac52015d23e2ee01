// Device memory of the CUDA backend. CudaDeviceMemory is the RawMemory under the backend's
// CachingAllocator: cudaMalloc/cudaFree on one device (cudaMalloc synchronises the device and
// costs far more than a kernel, which is why the cache sits in front of it). Page-locked host
// memory is cuda_pinned_cache.h's.
// Thread safety: calls are serialised by the allocator that owns them (RawMemory's rule).
#pragma once
#include <cstddef>

#include "core/raw_memory.h"

namespace zero::backend::cuda {

class CudaDeviceMemory final : public RawMemory {
 public:
  explicit CudaDeviceMemory(int device_index) : index_(device_index) {}
  Device device() const override { return Device::cuda(index_); }
  // nullptr when the device is out of memory (the caching allocator then frees its cache and
  // retries, and Allocator::allocate reports it); any other CUDA failure throws.
  void* allocate(size_t bytes) override;
  void free(void* ptr, size_t bytes) override;

 private:
  int index_;
};

}  // namespace zero::backend::cuda
