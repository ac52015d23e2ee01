#include "core/caching_allocator.h"

#include <bit>

#include "core/check.h"

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

void CachingAllocator::set_streams(Streams* streams) {
  std::lock_guard<std::mutex> lock(mutex_);
  ZERO_CHECK(streams == nullptr || (home_stream_.empty() && stats_.reserved_bytes == 0),
             "CachingAllocator::set_streams after blocks were allocated");
  streams_ = streams;
}

int CachingAllocator::current_stream_locked() const {
  return streams_ != nullptr ? streams_->current_stream() : 0;
}

void* CachingAllocator::raw_allocate(size_t bytes) {
  const size_t block = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  const int stream = current_stream_locked();
  auto it = free_blocks_.find({stream, block});
  if (it != free_blocks_.end() && !it->second.empty()) {
    FreeBlock reused = std::move(it->second.back());
    it->second.pop_back();
    stats_.cached_bytes -= block;
    ++stats_.cache_hits;
    // Freed by another stream: the new user waits, on the device, for that stream's last use.
    if (reused.freed_after != nullptr) streams_->wait(stream, reused.freed_after);
    if (streams_ != nullptr) home_stream_[reused.ptr] = stream;
    return reused.ptr;
  }
  void* ptr = upstream_.allocate(block);
  if (ptr == nullptr && stats_.cached_bytes > 0) {
    // Out of memory with blocks of other sizes cached: give them back and try once more.
    release_cached_locked();
    ptr = upstream_.allocate(block);
  }
  if (ptr == nullptr) return nullptr;  // Allocator::allocate reports it
  if (streams_ != nullptr) home_stream_[ptr] = stream;
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
  FreeBlock freed{ptr, nullptr};
  int home = 0;
  if (streams_ != nullptr) {
    const auto it = home_stream_.find(ptr);
    ZERO_CHECK(it != home_stream_.end(), "CachingAllocator: free of a block it did not hand out");
    home = it->second;
    home_stream_.erase(it);
    const int freeing = streams_->current_stream();
    if (freeing != home) {
      freed.freed_after = streams_->mark(freeing);
      ++stats_.cross_stream_frees;
    }
  }
  free_blocks_[{home, block}].push_back(std::move(freed));
  stats_.cached_bytes += block;
}

void CachingAllocator::release_cached_locked() {
  // RawMemory::free waits for the device (cudaFree does), so pending markers need no wait.
  for (auto& [key, blocks] : free_blocks_) {
    const size_t block = key.second;
    for (FreeBlock& freed : blocks) {
      upstream_.free(freed.ptr, block);
      ++stats_.raw_frees;
      stats_.reserved_bytes -= block;
    }
    blocks.clear();
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
