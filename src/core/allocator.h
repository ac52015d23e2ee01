// Accounted allocators. Every byte zero.cpp allocates for tensors goes through an Allocator,
// which tracks live and peak bytes per MemoryCategory for its device.
// Thread safety: allocate/deallocate and the statistics may be called from any thread.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>

#include "core/device.h"
#include "core/memory_category.h"

namespace zero {

struct MemoryStats {
  std::array<size_t, kNumMemoryCategories> live_bytes{};
  std::array<size_t, kNumMemoryCategories> peak_bytes{};
  size_t total_live_bytes = 0;
  size_t total_peak_bytes = 0;

  size_t live(MemoryCategory c) const { return live_bytes[static_cast<size_t>(c)]; }
  size_t peak(MemoryCategory c) const { return peak_bytes[static_cast<size_t>(c)]; }
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // Returns memory for `bytes` bytes (aligned to at least 64 bytes), never null; throws
  // zero::Error (out of memory names the category and the request) on failure.
  void* allocate(size_t bytes, MemoryCategory category);
  // `bytes` and `category` must match the allocate() call.
  void deallocate(void* ptr, size_t bytes, MemoryCategory category);

  MemoryStats stats() const;
  // Starts a new peak window: peaks become the current live values.
  void reset_peaks();

 protected:
  virtual void* raw_allocate(size_t bytes) = 0;
  virtual void raw_deallocate(void* ptr, size_t bytes) = 0;

 private:
  mutable std::mutex mutex_;
  MemoryStats stats_;
};

// Host memory, 64-byte aligned (one cache line; what AVX-512 loads like).
class CpuAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }

 protected:
  void* raw_allocate(size_t bytes) override;
  void raw_deallocate(void* ptr, size_t bytes) override;
};

// The process-wide CPU allocator (host tensors of any backend are accounted here).
CpuAllocator& cpu_allocator();
// The CPU backend's "pinned" host memory (Backend::pinned_host_allocator()): ordinary aligned
// host memory - nothing needs page-locking without a device - in its own accounting, so
// staging buffers show up apart from cpu_allocator()'s tensors as they do on a GPU backend.
CpuAllocator& cpu_pinned_allocator();
// Ordinary (pageable) host memory that holds offloaded training state when pin_memory is off
// (ZeRO-Offload without page-locking), in its own accounting: on the CPU backend, whose device
// memory is cpu_allocator(), offloaded bytes then still show as having left the "device".
CpuAllocator& host_pageable_allocator();

}  // namespace zero
