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
// Streams (an asynchronous device; set_streams): a block belongs to the stream that was current
// when it was allocated, its home, and is reused only by requests on that stream, so stream order
// alone keeps a reused block's old and new work apart and no stream waits for another to get
// memory. A block freed while another stream is current (a batch uploaded on the transfer stream
// and freed by the compute stream after use) comes back with a marker of the freeing stream's
// work so far, and its home stream waits for that marker before the block's next user runs - on
// the device, never the host. The caller's part: every use of a tensor on a stream other than
// the one current when it is freed must be ordered before the free (an event the freeing stream
// waited for), as every cross-stream read must be anyway. Without set_streams there is one stream.
//
// Thread safety: every method may be called from any thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
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
  int64_t cross_stream_frees = 0;  // blocks freed by a stream other than their home
};

class CachingAllocator final : public Allocator {
 public:
  // How the allocator sees an asynchronous device's streams (implemented by its backend).
  class Streams {
   public:
    virtual ~Streams() = default;
    // The stream new work is enqueued on now (a small index: 0, 1, ...).
    virtual int current_stream() const = 0;
    // A marker of the work enqueued on `stream` so far; destroying it releases it.
    virtual std::shared_ptr<void> mark(int stream) = 0;
    // Work enqueued on `stream` from now on runs after `marker`'s work.
    virtual void wait(int stream, const std::shared_ptr<void>& marker) = 0;
  };

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
  // From now on blocks are kept per stream (see the header comment). Call before the first
  // allocation; `streams` must outlive the allocator, or be unset (nullptr) before it dies.
  void set_streams(Streams* streams);

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void* ptr, size_t bytes) override;

 private:
  struct FreeBlock {
    void* ptr = nullptr;
    std::shared_ptr<void> freed_after;  // the freeing stream's marker, when not the home stream
  };
  void release_cached_locked();
  int current_stream_locked() const;

  RawMemory& upstream_;
  mutable std::mutex mutex_;
  Streams* streams_ = nullptr;
  // (home stream, size class) -> free blocks.
  std::map<std::pair<int, size_t>, std::vector<FreeBlock>> free_blocks_;
  std::unordered_map<void*, int> home_stream_;  // live blocks (with streams set)
  CacheStats stats_;
};

}  // namespace zero
