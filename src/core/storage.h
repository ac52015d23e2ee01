// Storage: one block of device memory shared by every Tensor view into it. Owned storage came
// from an accounted Allocator and is returned to it on destruction; borrowed storage wraps
// memory somebody else owns (a memory-mapped file) and keeps that owner alive.
#pragma once
#include <cstddef>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"
#include "core/memory_category.h"

namespace zero {

class Storage {
 public:
  // Allocates `bytes` bytes from `allocator` (which must outlive the storage).
  Storage(Allocator& allocator, size_t bytes, MemoryCategory category);
  // Wraps `data` (bytes long, on `device`); `owner` is kept alive while the storage lives.
  Storage(void* data, size_t bytes, Device device, std::shared_ptr<const void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  MemoryCategory category() const { return category_; }
  // The allocator the bytes came from; null for borrowed memory.
  const Allocator* allocator() const { return allocator_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  MemoryCategory category_ = MemoryCategory::kOther;
  Allocator* allocator_ = nullptr;  // null for borrowed memory
  std::shared_ptr<const void> owner_;
};

}  // namespace zero
