// The device and host tiers of PartitionStore, and the factory.
#include "sharding/partition_store.h"

#include <cstring>

#include "core/check.h"
#include "sharding/nvme_partition_store.h"

namespace zero::sharding {
namespace {

class DevicePartitionStore final : public PartitionStore {
 public:
  DevicePartitionStore(backend::Backend& backend, const PartitionLayout& layout, DType dtype)
      : PartitionStore(backend, layout, dtype, config::OffloadDevice::kNone),
        partition_(backend.zeros({layout.partition_numel()}, dtype, MemoryCategory::kParams)) {}

  Tensor read(size_t first, size_t last) override {
    return partition_.view(range_begin(first), {range_numel(first, last)});
  }
  void write(size_t first, size_t last, const Tensor& values) override {
    Tensor target = partition_.view(range_begin(first), {range_numel(first, last)});
    backend_.copy(target, values);
  }
  void write_from_host(size_t first, size_t last, const Tensor& host_values) override {
    Tensor target = partition_.view(range_begin(first), {range_numel(first, last)});
    ZERO_CHECK(host_values.dtype() == dtype_ && host_values.numel() == target.numel(),
               "partition upload of " << host_values.describe());
    backend_.copy_from_host(target, host_values.raw_data());
    traffic_.host_to_device_bytes += static_cast<int64_t>(target.nbytes());
  }
  PartitionPlacement placement() const override {
    return {static_cast<int64_t>(partition_.nbytes()), 0, 0, 0};
  }

 private:
  Tensor partition_;
};

class HostPartitionStore final : public PartitionStore {
 public:
  HostPartitionStore(backend::Backend& backend, const PartitionLayout& layout, DType dtype, bool pin)
      : PartitionStore(backend, layout, dtype, config::OffloadDevice::kCpu),
        partition_(Tensor::empty(pin ? backend.pinned_host_allocator() : host_pageable_allocator(),
                                 {layout.partition_numel()}, dtype, MemoryCategory::kParams)) {
    std::memset(partition_.raw_data(), 0, partition_.nbytes());
  }

  Tensor read(size_t first, size_t last) override {
    const int64_t n = range_numel(first, last);
    Tensor shard = backend_.empty({n}, dtype_, MemoryCategory::kComm);
    backend_.copy_from_host(shard, host_at(range_begin(first)));
    traffic_.host_to_device_bytes += static_cast<int64_t>(shard.nbytes());
    return shard;
  }
  void write(size_t first, size_t last, const Tensor& values) override {
    // Unit by unit, so a conversion never needs more than one unit's shard on the device.
    for (size_t u = first; u <= last; ++u) {
      const UnitPartition& part = layout_.unit(u);
      const Tensor piece = values.view(part.partition_offset - range_begin(first), {part.shard_numel});
      Tensor narrow = piece;
      if (piece.dtype() != dtype_) {
        narrow = backend_.empty({part.shard_numel}, dtype_, MemoryCategory::kComm);
        backend_.copy(narrow, piece);
      }
      backend_.copy_to_host(host_at(part.partition_offset), narrow);
      traffic_.device_to_host_bytes += static_cast<int64_t>(narrow.nbytes());
    }
  }
  void write_from_host(size_t first, size_t last, const Tensor& host_values) override {
    const int64_t n = range_numel(first, last);
    ZERO_CHECK(host_values.dtype() == dtype_ && host_values.numel() == n,
               "partition write of " << host_values.describe());
    std::memcpy(host_at(range_begin(first)), host_values.raw_data(),
                static_cast<size_t>(n) * dtype_size(dtype_));
  }
  PartitionPlacement placement() const override {
    return {0, static_cast<int64_t>(partition_.nbytes()), 0, 0};
  }

 private:
  void* host_at(int64_t element) const {
    return static_cast<char*>(partition_.raw_data()) + element * static_cast<int64_t>(dtype_size(dtype_));
  }
  Tensor partition_;
};

}  // namespace

std::unique_ptr<PartitionStore> make_partition_store(backend::Backend& backend,
                                                     const PartitionLayout& layout, DType dtype,
                                                     const PartitionStoreOptions& options) {
  switch (options.offload.device) {
    case config::OffloadDevice::kNone:
      return std::make_unique<DevicePartitionStore>(backend, layout, dtype);
    case config::OffloadDevice::kCpu:
      return std::make_unique<HostPartitionStore>(backend, layout, dtype, options.offload.pin_memory);
    case config::OffloadDevice::kNvme:
      return make_nvme_partition_store(backend, layout, dtype, options);
  }
  ZERO_CHECK(false, "unknown offload device");
  return nullptr;
}

}  // namespace zero::sharding
