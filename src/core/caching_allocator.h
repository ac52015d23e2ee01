// CachingAllocator: the device allocator. Device memory allocation (cudaMalloc) synchronises the
// device and costs far more than a kernel, so a training step must not call it: freed blocks are
// kept in per-size-class free lists and handed out again. A training step allocates the same
// sizes every step, so after the first step every request is served from the cache and the raw
// allocation count stops growing - the test of "no cudaMalloc in the steady-state step".
//
// Accounting (the Allocator base class): live and peak bytes per MemoryCategory of what tensors
// asked for, like torch.cuda.memory_allocated / max_memory_allocated. reserved_bytes() is what
// the cache holds from RawMemory (live blocks rounded up to their class, plus free cached
// blocks), like torch.cuda.memory_reserved.
//
// Size classes: requests round up to 512 bytes below 4 KiB, else to the next of 2^k x {1, 1.25,
// 1.5, 1.75}: at most 25% rounding waste, and a block is reused only for its own class (no
// splitting; simple and enough for the repeating shapes of a training step).
//
// Thread safety: every method may be called from any thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "core/raw_memory.h"

namespace zero {

struct CacheStats {
  size_t reserved_bytes = 0;       // held from RawMemory: in use (rounded) + cached
  size_t cached_bytes = 0;         // free blocks waiting for reuse
  size_t peak_reserved_bytes = 0;
  int64_t raw_allocations = 0;     // RawMemory::allocate calls that succeeded
  int64_t raw_frees = 0;
  int64_t cache_hits = 0;          // requests served from a free list
};

class CachingAllocator final : public Allocator {
 public:
  // `upstream` must outlive the allocator.
  explicit CachingAllocator(RawMemory& upstream) : upstream_(upstream) {}
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  Device device() const override { return upstream_.device(); }
  CacheStats cache_stats() const;
  // Returns every cached (free) block to RawMemory (torch.cuda.empty_cache).
  void empty_cache();
  // The size a request of `bytes` is served with.
  static size_t size_class(size_t bytes);

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void* ptr, size_t bytes) override;

 private:
  void release_cached_locked();

  RawMemory& upstream_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_blocks_;  // size class -> free blocks
  CacheStats stats_;
};

}  // namespace zero
