#include "core/caching_allocator.h"

#include <bit>

namespace zero {

CachingAllocator::~CachingAllocator() { empty_cache(); }

size_t CachingAllocator::size_class(size_t bytes) {
  constexpr size_t kSmallQuantum = 512;
  constexpr size_t kSmallLimit = 4096;
  if (bytes <= kSmallLimit) {
    return bytes == 0 ? kSmallQuantum : (bytes + kSmallQuantum - 1) / kSmallQuantum * kSmallQuantum;
  }
  // The largest power of two <= bytes, then the first quarter step at or above bytes.
  const size_t base = std::bit_floor(bytes);
  const size_t quarter = base / 4;
  const size_t steps = (bytes - base + quarter - 1) / quarter;  // 0..4
  return base + steps * quarter;
}

void* CachingAllocator::raw_allocate(size_t bytes) {
  const size_t block = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_blocks_.find(block);
  if (it != free_blocks_.end() && !it->second.empty()) {
    void* ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= block;
    ++stats_.cache_hits;
    return ptr;
  }
  void* ptr = upstream_.allocate(block);
  if (ptr == nullptr && stats_.cached_bytes > 0) {
    // Out of memory with blocks of other sizes cached: give them back and try once more.
    release_cached_locked();
    ptr = upstream_.allocate(block);
  }
  if (ptr == nullptr) return nullptr;  // Allocator::allocate reports it
  ++stats_.raw_allocations;
  stats_.reserved_bytes += block;
  if (stats_.reserved_bytes > stats_.peak_reserved_bytes) {
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  }
  return ptr;
}

void CachingAllocator::raw_deallocate(void* ptr, size_t bytes) {
  const size_t block = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  free_blocks_[block].push_back(ptr);
  stats_.cached_bytes += block;
}

void CachingAllocator::release_cached_locked() {
  for (auto& [block, pointers] : free_blocks_) {
    for (void* ptr : pointers) {
      upstream_.free(ptr, block);
      ++stats_.raw_frees;
      stats_.reserved_bytes -= block;
    }
    pointers.clear();
  }
  stats_.cached_bytes = 0;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

CacheStats CachingAllocator::cache_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace zero
