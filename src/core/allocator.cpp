#include "core/allocator.h"

#include <cstdlib>
#include <new>
#include <string>

#include "core/check.h"
#include "core/error.h"

namespace zero {

void* Allocator::allocate(size_t bytes, MemoryCategory category) {
  void* ptr = raw_allocate(bytes == 0 ? 1 : bytes);
  if (ptr == nullptr) {
    throw Error("out of memory on " + device().to_string() + ": could not allocate " +
                std::to_string(bytes) + " bytes for " + memory_category_name(category) + " (" +
                std::to_string(stats().total_live_bytes) + " bytes already live)");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const auto index = static_cast<size_t>(category);
  stats_.live_bytes[index] += bytes;
  stats_.total_live_bytes += bytes;
  if (stats_.live_bytes[index] > stats_.peak_bytes[index]) {
    stats_.peak_bytes[index] = stats_.live_bytes[index];
  }
  if (stats_.total_live_bytes > stats_.total_peak_bytes) {
    stats_.total_peak_bytes = stats_.total_live_bytes;
  }
  return ptr;
}

void Allocator::deallocate(void* ptr, size_t bytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto index = static_cast<size_t>(category);
    ZERO_CHECK(stats_.live_bytes[index] >= bytes, "freeing more " << memory_category_name(category)
                                                                  << " bytes than are live");
    stats_.live_bytes[index] -= bytes;
    stats_.total_live_bytes -= bytes;
  }
  raw_deallocate(ptr, bytes == 0 ? 1 : bytes);
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Allocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.live_bytes;
  stats_.total_peak_bytes = stats_.total_live_bytes;
}

void* CpuAllocator::raw_allocate(size_t bytes) {
  constexpr size_t kAlignment = 64;
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded);
}

void CpuAllocator::raw_deallocate(void* ptr, size_t /*bytes*/) { std::free(ptr); }

CpuAllocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

CpuAllocator& cpu_pinned_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

CpuAllocator& host_pageable_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

}  // namespace zero
