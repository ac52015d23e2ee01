// GradientReducer: reduce-scatters completed units' gradients to their owners, grouped into
// buckets of consecutive units of at most reduce_bucket_size elements (DeepSpeed's bucketing),
// and accumulates each rank's reduced shards into its partition gradient buffer.
//
// A bucket is packed rank-major (every unit's shard r, then shard r+1, ...) into one staging
// buffer, so one reduce_scatter hands each rank a contiguous slice of its partition. With
// `overlap` the reduce_scatter runs asynchronously while the caller continues its backward;
// buckets found finished at a later add() are taken in then, the rest by flush(), which waits. Staging buffers are accounted as MemoryCategory::kComm.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "comm/comm.h"
#include "sharding/exposed_comm_time.h"
#include "sharding/partition_layout.h"

namespace zero::sharding {

// How gradients travel (DeepSpeed's zero_optimization.reduce_scatter and the top-level
// prescale_gradients / gradient_predivide_factor).
struct ReductionOptions {
  // false: each bucket is all-reduced whole and every rank keeps its own slice (DeepSpeed's
  // reduce_scatter: false). Moves more data; the sums are the same (MpiComm reduces in rank
  // order either way).
  bool reduce_scatter = true;
  // Factor applied to a bucket before it is communicated (1/world for prescale_gradients,
  // 1/gradient_predivide_factor otherwise): keeps 16-bit sums in range. The caller applies the
  // rest of the averaging afterwards.
  double prescale = 1.0;
  // > 0: ZeRO++'s qgZ - each bucket's reduce-scatter sends int8 codes in groups of this many
  // elements through one all_to_all (comm/quantized_collectives.h) and the decoded chunks are
  // summed in f32. Synchronous even with overlap (the Comm has no asynchronous all_to_all).
  int64_t quantization_group = 0;
  // qgZ in two hops (comm::hierarchical_quantized_reduce_scatter) when both are set: this
  // rank's node (hpZ's group) and the ranks holding its place in every node. Not owned.
  comm::Comm* node = nullptr;
  comm::Comm* column = nullptr;
};

class GradientReducer {
 public:
  // `partition_grads` (partition_numel elements) receives the sums (+=). References must outlive
  // the reducer.
  // Buckets travel in `comm_dtype` (packing converts, rounding to nearest-even when narrowing);
  // results are added into partition_grads in its own dtype. Time blocked on communication is
  // added to `exposed`.
  // With `host` (optimizer offload), partition_grads is a host tensor of `host`: each reduced
  // bucket is copied down as it completes and accumulated there by `host`, so the device never
  // holds the gradient partition.
  GradientReducer(backend::Backend& backend, comm::Comm& comm, const PartitionLayout& layout,
                  int64_t bucket_elements, bool overlap, DType comm_dtype, ExposedCommTime& exposed,
                  ReductionOptions options = {}, backend::Backend* host = nullptr);

  // Unit `u`'s gradient is complete. `unit_grad` is contiguous, element 0 is the unit's first
  // element and it holds at least numel elements (padding beyond is ignored). The reducer keeps
  // a reference until the bucket is packed; the caller must not modify it afterwards.
  void add(size_t u, const Tensor& unit_grad, Tensor& partition_grads);
  // Launches the open bucket, waits for every bucket in flight and adds the results into
  // `partition_grads`.
  void flush(Tensor& partition_grads);

 private:
  struct InFlight {
    std::shared_ptr<comm::Work> work;
    Tensor staging;
    Tensor output;
    int64_t partition_offset = 0;
  };
  void launch(Tensor& partition_grads);
  void complete(InFlight& op, Tensor& partition_grads);
  // Completes the oldest in-flight buckets that have finished, without waiting.
  void complete_finished(Tensor& partition_grads);

  backend::Backend& backend_;
  comm::Comm& comm_;
  const PartitionLayout& layout_;
  int64_t bucket_elements_;
  bool overlap_;
  DType comm_dtype_;
  ExposedCommTime& exposed_;
  ReductionOptions options_;
  backend::Backend* host_;  // not owned; null: partition_grads is on the device
  // The open bucket: units in descending order as backward completes them.
  std::vector<std::pair<size_t, Tensor>> open_;
  int64_t open_elements_ = 0;
  std::vector<InFlight> in_flight_;
};

// Copies rank-major shards of units [first, last] from `sources` (one per unit, element 0 = the
// unit's first element, >= numel elements) into `staging` (world * sum(shard) elements); the
// padding past each unit's numel is written as zeros.
void pack_unit_shards(backend::Backend& backend, const PartitionLayout& layout, size_t first,
                      size_t last, const std::vector<Tensor>& sources, Tensor& staging);
// The inverse for gathered parameters: from rank-major `staging`, writes each unit's numel
// real elements into `targets` (one per unit, element 0 = the unit's first element).
void unpack_unit_shards(backend::Backend& backend, const PartitionLayout& layout, size_t first,
                        size_t last, const Tensor& staging, std::vector<Tensor>& targets);

}  // namespace zero::sharding
