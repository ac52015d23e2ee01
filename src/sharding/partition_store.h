// PartitionStore: where ZeRO-3 keeps this rank's parameter partition (layout.partition_numel()
// elements in the parameters' storage dtype, unit shards in unit order) between the units' uses.
//
//   device (default): a device tensor; a unit's shard is a view of it.
//   host   (zero_optimization.offload_param {device: cpu}, DeepSpeed's ZeRO-Offload of
//          parameters): host memory (pinned when pin_memory); each use uploads the unit's shard
//          into a transient device buffer (MemoryCategory::kComm) that the all-gather reads.
//   nvme   (offload_param {device: nvme}, ZeRO-Infinity): the first units, as many as fit in
//          max_in_cpu elements, stay in host memory; every other unit's shard is a block of a
//          swap file under nvme_path (offload/nvme_block_store.h), read ahead into one of
//          buffer_count pinned buffers (each the largest shard, at most buffer_size elements)
//          and uploaded from there.
//
// So the device never holds the partition with offload_param: only the units being gathered.
// The values are the same bits in every tier (the stored dtype is the same), which is what makes
// offloaded runs equal device runs bit for bit.
//
// Thread/stream rules: used by the thread that drives the model; device tensors follow the
// backend's stream order, host buffers are handed to copy_from_host/copy_to_host, which are
// synchronous with respect to the host buffer.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "config/aio_config.h"
#include "config/offload_config.h"
#include "sharding/partition_layout.h"

namespace zero::sharding {

// Bytes of the partition per tier (for the start-of-training report and the accounting tests).
struct PartitionPlacement {
  int64_t device_bytes = 0;
  int64_t host_bytes = 0;     // resident in host memory (offload cpu, or max_in_cpu under nvme)
  int64_t nvme_bytes = 0;     // in the swap file (logical bytes, without block padding)
  int64_t staging_bytes = 0;  // pinned staging buffers of the NVMe swap
};

// Traffic since construction (bytes); the step lines show it.
struct PartitionTraffic {
  int64_t host_to_device_bytes = 0;  // shards uploaded for gathers
  int64_t device_to_host_bytes = 0;  // updated partitions written back
  int64_t nvme_read_bytes = 0;
  int64_t nvme_write_bytes = 0;
};

class PartitionStore {
 public:
  virtual ~PartitionStore() = default;

  DType dtype() const { return dtype_; }
  config::OffloadDevice tier() const { return tier_; }
  const PartitionLayout& layout() const { return layout_; }

  // Units [first, last]'s shards, i.e. partition elements [unit(first).partition_offset,
  // unit(last).partition_offset + unit(last).shard_numel), as a device tensor in dtype(): a view
  // (device tier) or a fresh transient buffer. Keep it alive while a collective reads it.
  virtual Tensor read(size_t first, size_t last) = 0;
  // Hint: `unit` will be read soon (the NVMe tier starts its disk read). Returns false when
  // nothing more can be started now (every staging buffer is busy).
  virtual bool prefetch(size_t unit) {
    (void)unit;
    return false;
  }
  // Replaces units [first, last]'s shards with `values`, a device tensor of that many elements in
  // any floating dtype (rounded to dtype() on the way, round-to-nearest-even).
  virtual void write(size_t first, size_t last, const Tensor& values) = 0;
  // Replaces units [first, last]'s shards from host memory: `host_values` is a host tensor of
  // that range's elements in dtype() (the CPU optimizer step's 16-bit copy, or its f32 master
  // weights). The host tier copies it without touching the device.
  virtual void write_from_host(size_t first, size_t last, const Tensor& host_values) = 0;

  virtual PartitionPlacement placement() const = 0;
  const PartitionTraffic& traffic() const { return traffic_; }

 protected:
  PartitionStore(backend::Backend& backend, const PartitionLayout& layout, DType dtype,
                 config::OffloadDevice tier)
      : backend_(backend), layout_(layout), dtype_(dtype), tier_(tier) {}
  int64_t range_begin(size_t first) const { return layout_.unit(first).partition_offset; }
  int64_t range_numel(size_t first, size_t last) const {
    return layout_.unit(last).partition_offset + layout_.unit(last).shard_numel - range_begin(first);
  }

  backend::Backend& backend_;
  const PartitionLayout& layout_;
  DType dtype_;
  config::OffloadDevice tier_;
  PartitionTraffic traffic_;
};

struct PartitionStoreOptions {
  config::OffloadParamConfig offload;  // device kNone: the device tier
  config::AioConfig aio;               // the NVMe tier's I/O engine
};

// The store for `options.offload.device`, zero-filled. Throws ConfigError/UnsupportedError for
// NVMe settings it cannot honour (nvme_path, buffer_size smaller than a unit's shard, use_gds).
std::unique_ptr<PartitionStore> make_partition_store(backend::Backend& backend,
                                                     const PartitionLayout& layout, DType dtype,
                                                     const PartitionStoreOptions& options);

}  // namespace zero::sharding
