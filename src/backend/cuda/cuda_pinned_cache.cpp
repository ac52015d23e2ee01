#include "backend/cuda/cuda_pinned_cache.h"

#include "backend/cuda/cuda_check.h"
#include "core/caching_allocator.h"

namespace zero::backend::cuda {

CudaPinnedCache::CudaPinnedCache(std::vector<cudaStream_t> streams) : streams_(std::move(streams)) {}

CudaPinnedCache::~CudaPinnedCache() {
  empty_cache();
  for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
  cudaGetLastError();  // destructors never throw; a failure resurfaces at the next checked call
}

PinnedCacheStats CudaPinnedCache::cache_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CudaPinnedCache::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_locked();
}

bool CudaPinnedCache::events_done(const FreeBlock& block) const {
  for (cudaEvent_t event : block.freed_after) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaErrorNotReady) return false;
    if (status != cudaSuccess) {
      cudaGetLastError();
      return false;  // the wait below reports it
    }
  }
  return true;
}

void CudaPinnedCache::wait_and_recycle_events(FreeBlock& block) {
  for (cudaEvent_t event : block.freed_after) {
    const cudaError_t status = cudaEventSynchronize(event);
    spare_events_.push_back(event);
    ZERO_CUDA_CHECK(status);
  }
  block.freed_after.clear();
}

void* CudaPinnedCache::raw_allocate(size_t bytes) {
  const size_t block = CachingAllocator::size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = free_blocks_.find(block);
  if (found != free_blocks_.end() && !found->second.empty()) {
    std::deque<FreeBlock>& blocks = found->second;
    auto pick = blocks.begin();
    while (pick != blocks.end() && !events_done(*pick)) ++pick;
    if (pick == blocks.end()) {
      pick = blocks.begin();  // none finished: wait for the oldest
      ++stats_.host_waits;
    }
    FreeBlock reused = std::move(*pick);
    blocks.erase(pick);
    stats_.cached_bytes -= block;
    ++stats_.cache_hits;
    wait_and_recycle_events(reused);
    return reused.ptr;
  }
  void* ptr = nullptr;
  cudaError_t status = cudaHostAlloc(&ptr, block, cudaHostAllocDefault);  // page aligned
  if (status == cudaErrorMemoryAllocation && stats_.cached_bytes > 0) {
    cudaGetLastError();
    release_locked();  // blocks of other sizes go back, then once more
    status = cudaHostAlloc(&ptr, block, cudaHostAllocDefault);
  }
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;  // Allocator::allocate reports it
  }
  ZERO_CUDA_CHECK(status);
  ++stats_.raw_allocations;
  stats_.reserved_bytes += block;
  return ptr;
}

void CudaPinnedCache::raw_deallocate(void* ptr, size_t bytes) {
  // Runs inside Tensor destructors: never throws. If an event cannot be recorded, the host waits
  // for the whole device instead, which orders the block's next user just as well.
  const size_t block = CachingAllocator::size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  FreeBlock freed{ptr, {}};
  bool recorded = true;
  for (cudaStream_t stream : streams_) {
    cudaEvent_t event = nullptr;
    if (!spare_events_.empty()) {
      event = spare_events_.back();
      spare_events_.pop_back();
    } else if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess) {
      recorded = false;
      break;
    }
    if (cudaEventRecord(event, stream) != cudaSuccess) {
      spare_events_.push_back(event);
      recorded = false;
      break;
    }
    freed.freed_after.push_back(event);
  }
  if (!recorded) {
    cudaGetLastError();
    cudaDeviceSynchronize();
    cudaGetLastError();
    for (cudaEvent_t event : freed.freed_after) spare_events_.push_back(event);
    freed.freed_after.clear();
  }
  free_blocks_[block].push_back(std::move(freed));
  stats_.cached_bytes += block;
}

void CudaPinnedCache::release_locked() {
  for (auto& [block, blocks] : free_blocks_) {
    for (FreeBlock& freed : blocks) {
      for (cudaEvent_t event : freed.freed_after) {
        cudaEventSynchronize(event);
        spare_events_.push_back(event);
      }
      cudaFreeHost(freed.ptr);
      stats_.reserved_bytes -= block;
    }
    blocks.clear();
  }
  stats_.cached_bytes = 0;
  cudaGetLastError();
}

}  // namespace zero::backend::cuda
