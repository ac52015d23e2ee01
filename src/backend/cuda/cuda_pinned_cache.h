// CudaPinnedCache: the CUDA backend's page-locked host memory (Backend::pinned_host_allocator).
// cudaHostAlloc costs milliseconds for large buffers and cudaFreeHost waits for the whole device,
// so buffers that come and go every step (host-staged collectives, cpu_checkpointing's saved
// inputs) are cached by size class (CachingAllocator::size_class) instead of freed.
//
// Safety: a pinned buffer is used both by the host (reads and writes at any time) and by copies
// on any of the backend's streams. When a buffer is freed an event is recorded on every stream,
// and the buffer is handed out again only after the host has seen those events complete: a
// freed block whose events are done is preferred; otherwise the host waits for the oldest one.
// So no copy enqueued before the free can still read or write the buffer its next user gets.
//
// Its tensors are CPU tensors (host-readable). Thread safety: every method may be called from
// any thread; the streams must outlive the cache's blocks (empty_cache() before destroying them).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "core/allocator.h"

namespace zero::backend::cuda {

struct PinnedCacheStats {
  size_t reserved_bytes = 0;     // held from cudaHostAlloc: in use (rounded) + cached
  size_t cached_bytes = 0;       // free blocks waiting for reuse
  int64_t raw_allocations = 0;   // cudaHostAlloc calls that succeeded
  int64_t cache_hits = 0;        // requests served from the cache
  int64_t host_waits = 0;        // hand-outs that waited for a freed block's events
};

class CudaPinnedCache final : public Allocator {
 public:
  // `streams`: every stream that may copy to or from these buffers (not owned).
  explicit CudaPinnedCache(std::vector<cudaStream_t> streams);
  ~CudaPinnedCache() override;
  CudaPinnedCache(const CudaPinnedCache&) = delete;
  CudaPinnedCache& operator=(const CudaPinnedCache&) = delete;

  Device device() const override { return Device::cpu(); }
  PinnedCacheStats cache_stats() const;
  // Waits for every cached block's events and returns the blocks to cudaFreeHost.
  void empty_cache();

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void* ptr, size_t bytes) override;

 private:
  struct FreeBlock {
    void* ptr = nullptr;
    std::vector<cudaEvent_t> freed_after;  // one per stream, recorded at the free
  };
  bool events_done(const FreeBlock& block) const;
  void wait_and_recycle_events(FreeBlock& block);
  void release_locked();

  std::vector<cudaStream_t> streams_;
  mutable std::mutex mutex_;
  std::map<size_t, std::deque<FreeBlock>> free_blocks_;  // size class -> oldest freed first
  std::vector<cudaEvent_t> spare_events_;                // recycled, to spare cudaEventCreate
  PinnedCacheStats stats_;
};

}  // namespace zero::backend::cuda
