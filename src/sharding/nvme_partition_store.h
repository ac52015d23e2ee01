// The NVMe tier of PartitionStore (partition_store.h): zero_optimization.offload_param
// {device: nvme}. Units whose shards fit, in model order, within max_in_cpu elements stay in host
// memory (DeepSpeed's "parameter elements kept in CPU memory"); the others are blocks of
// `nvme_path/zero_param_swap/rank<r>/params.swp`, read ahead into buffer_count pinned buffers
// (never more than there are swapped units), each sized to the largest swapped shard - DeepSpeed's
// buffer_size is the bound: a larger shard is a ConfigError naming
// zero_optimization.offload_param.buffer_size and the size needed - and written back after each
// optimizer step, with a checksum per block checked on every read.
#pragma once
#include <memory>

#include "sharding/partition_store.h"

namespace zero::sharding {

std::unique_ptr<PartitionStore> make_nvme_partition_store(backend::Backend& backend,
                                                          const PartitionLayout& layout, DType dtype,
                                                          const PartitionStoreOptions& options);

}  // namespace zero::sharding
