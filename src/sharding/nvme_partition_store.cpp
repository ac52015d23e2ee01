#include "sharding/nvme_partition_store.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/error.h"
#include "offload/nvme_block_store.h"
#include "offload/nvme_offload_validation.h"

namespace zero::sharding {
namespace {

class NvmePartitionStore final : public PartitionStore {
 public:
  NvmePartitionStore(backend::Backend& backend, const PartitionLayout& layout, DType dtype,
                     const PartitionStoreOptions& options)
      : PartitionStore(backend, layout, dtype, config::OffloadDevice::kNvme),
        element_bytes_(static_cast<int64_t>(dtype_size(dtype))) {
    const config::OffloadParamConfig& offload = options.offload;
    offload::validate_nvme_param_offload(options.aio, offload);
    const size_t units = layout.units().size();
    // The resident prefix: whole units, in model order, within max_in_cpu elements.
    while (resident_units_ < units) {
      const UnitPartition& part = layout.unit(resident_units_);
      if (part.partition_offset + part.shard_numel > offload.max_in_cpu) break;
      ++resident_units_;
    }
    const int64_t resident_numel =
        resident_units_ == 0 ? 0
                             : layout.unit(resident_units_ - 1).partition_offset +
                                   layout.unit(resident_units_ - 1).shard_numel;
    Allocator& host = offload.pin_memory ? backend.pinned_host_allocator() : host_pageable_allocator();
    resident_ = Tensor::empty(host, {resident_numel}, dtype, MemoryCategory::kParams);
    if (resident_numel > 0) std::memset(resident_.raw_data(), 0, resident_.nbytes());

    // Everything within max_in_cpu: no unit is swapped, so no swap file is made.
    if (resident_units_ == units) return;
    offload::NvmeBlockStoreOptions o;
    o.nvme_path = *offload.nvme_path;
    o.rank = layout.rank();
    o.buffer_count = offload.buffer_count;
    o.aio = offload::AioEngineOptions::from_config(options.aio);
    int64_t largest = 0;
    for (size_t u = resident_units_; u < units; ++u) {
      const int64_t shard = layout.unit(u).shard_numel;
      if (shard > largest) {
        largest = shard;
        largest_unit_ = u;
      }
      o.block_bytes.push_back(shard * element_bytes_);
    }
    if (largest > offload.buffer_size) {
      throw ConfigError("zero_optimization.offload_param.buffer_size is " +
                        std::to_string(offload.buffer_size) + " elements, but unit " +
                        std::to_string(largest_unit_) + " has a shard of " + std::to_string(largest) +
                        " elements on this rank and each shard is read into one buffer: set "
                        "buffer_size to at least " + std::to_string(largest));
    }
    o.buffer_bytes = std::max<int64_t>(largest, 1) * element_bytes_;
    // Never more buffers than swapped blocks: extra ones would only hold pinned memory.
    o.buffer_count = std::max<int64_t>(1, std::min<int64_t>(o.buffer_count, static_cast<int64_t>(o.block_bytes.size())));
    blocks_ = std::make_unique<offload::NvmeBlockStore>(o, backend.pinned_host_allocator());
    // The file starts as zeros, as the other tiers do: write every block once, so each has a
    // checksum from the start.
    for (int64_t b = 0; b < blocks_->block_count(); ++b) {
      void* target = blocks_->fill_for_write(b);
      std::memset(target, 0, static_cast<size_t>(o.block_bytes[static_cast<size_t>(b)]));
      blocks_->submit_write(b);
    }
    blocks_->flush();
    sync_io_traffic();
  }

  Tensor read(size_t first, size_t last) override {
    Tensor shard = backend_.empty({range_numel(first, last)}, dtype_, MemoryCategory::kComm);
    for (size_t u = first; u <= last; ++u) {
      const UnitPartition& part = layout_.unit(u);
      Tensor target = shard.view(part.partition_offset - range_begin(first), {part.shard_numel});
      if (u < resident_units_) {
        backend_.copy_from_host(target, resident_at(part.partition_offset));
      } else {
        const int64_t block = block_of(u);
        const void* bytes = blocks_->acquire(block);
        backend_.copy_from_host(target, bytes);
        blocks_->release(block);
      }
    }
    traffic_.host_to_device_bytes += static_cast<int64_t>(shard.nbytes());
    sync_io_traffic();
    return shard;
  }

  bool prefetch(size_t unit) override {
    if (unit < resident_units_) return true;
    return blocks_->prefetch(block_of(unit));
  }

  void write(size_t first, size_t last, const Tensor& values) override {
    for (size_t u = first; u <= last; ++u) {
      const UnitPartition& part = layout_.unit(u);
      const Tensor piece = values.view(part.partition_offset - range_begin(first), {part.shard_numel});
      Tensor narrow = piece;
      if (piece.dtype() != dtype_) {
        narrow = backend_.empty({part.shard_numel}, dtype_, MemoryCategory::kComm);
        backend_.copy(narrow, piece);
      }
      if (u < resident_units_) {
        backend_.copy_to_host(resident_at(part.partition_offset), narrow);
      } else {
        const int64_t block = block_of(u);
        backend_.copy_to_host(blocks_->fill_for_write(block), narrow);
        blocks_->submit_write(block);
      }
      traffic_.device_to_host_bytes += static_cast<int64_t>(narrow.nbytes());
    }
    if (blocks_) blocks_->flush();
    sync_io_traffic();
  }

  void write_from_host(size_t first, size_t last, const Tensor& host_values) override {
    ZERO_CHECK(host_values.dtype() == dtype_ && host_values.numel() == range_numel(first, last),
               "partition write of " << host_values.describe());
    const char* base = static_cast<const char*>(host_values.raw_data());
    for (size_t u = first; u <= last; ++u) {
      const UnitPartition& part = layout_.unit(u);
      const char* from = base + (part.partition_offset - range_begin(first)) * element_bytes_;
      if (u < resident_units_) {
        std::memcpy(resident_at(part.partition_offset), from,
                    static_cast<size_t>(part.shard_numel * element_bytes_));
      } else {
        blocks_->write(block_of(u), from);
      }
    }
    if (blocks_) blocks_->flush();
    sync_io_traffic();
  }

  PartitionPlacement placement() const override {
    int64_t swapped = 0;
    for (size_t u = resident_units_; u < layout_.units().size(); ++u) {
      swapped += layout_.unit(u).shard_numel * element_bytes_;
    }
    return {0, static_cast<int64_t>(resident_.nbytes()), swapped,
            blocks_ ? blocks_->staging_bytes() : 0};
  }

 private:
  int64_t block_of(size_t unit) const { return static_cast<int64_t>(unit - resident_units_); }
  void* resident_at(int64_t element) const {
    return static_cast<char*>(resident_.raw_data()) + element * element_bytes_;
  }
  void sync_io_traffic() {
    if (!blocks_) return;  // nothing swapped
    traffic_.nvme_read_bytes = blocks_->stats().bytes_read;
    traffic_.nvme_write_bytes = blocks_->stats().bytes_written;
  }

  int64_t element_bytes_;
  size_t resident_units_ = 0;
  size_t largest_unit_ = 0;
  Tensor resident_;
  std::unique_ptr<offload::NvmeBlockStore> blocks_;  // null when every unit is resident
};

}  // namespace

std::unique_ptr<PartitionStore> make_nvme_partition_store(backend::Backend& backend,
                                                          const PartitionLayout& layout, DType dtype,
                                                          const PartitionStoreOptions& options) {
  return std::make_unique<NvmePartitionStore>(backend, layout, dtype, options);
}

}  // namespace zero::sharding
