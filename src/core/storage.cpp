#include "core/storage.h"

namespace zero {

Storage::Storage(Allocator& allocator, size_t bytes, MemoryCategory category)
    : data_(allocator.allocate(bytes, category)),
      bytes_(bytes),
      device_(allocator.device()),
      category_(category),
      allocator_(&allocator) {}

Storage::Storage(void* data, size_t bytes, Device device, std::shared_ptr<const void> owner)
    : data_(data), bytes_(bytes), device_(device), owner_(std::move(owner)) {}

Storage::~Storage() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, bytes_, category_);
}

}  // namespace zero
