// Memory of the CUDA backend. CudaDeviceMemory is the RawMemory under the backend's
// CachingAllocator: cudaMalloc/cudaFree on one device (cudaMalloc synchronises the device and
// costs far more than a kernel, which is why the cache sits in front of it). CudaPinnedAllocator
// is page-locked host memory (cudaHostAlloc) for staging buffers that copies read or write at
// full bus speed; its tensors are CPU tensors.
// Thread safety: calls are serialised by the allocators that own them (RawMemory's rule); the
// pinned allocator may be called from any thread.
#pragma once
#include <cstddef>

#include "core/allocator.h"
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

class CudaPinnedAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void* ptr, size_t bytes) override;
};

}  // namespace zero::backend::cuda
