// ParameterFetcher: ZeRO-3's parameter life cycle. Each unit's parameters live partitioned
// (1/N per rank); just before a unit runs (forward or backward) its shards are all-gathered
// into a full buffer the unit's views are bound to, the next units are prefetched
// asynchronously (up to stage3_prefetch_bucket_size elements), and after use a unit is released
// unless it is reused within stage3_max_reuse_distance elements. stage3_max_live_parameters
// bounds the gathered elements at any time (except that the unit about to run is always
// gathered), and units smaller than stage3_param_persistence_threshold stay gathered until the
// parameters change.
//
// The order of use is known in advance: forward visits units 0..U-1, backward U-1..0, and a
// unit that borrows another unit's parameters (a tied LM head) needs both. Buffers are
// MemoryCategory::kComm; sizes are elements.
//
// ZeRO++ (GatherOptions below; DeepSpeed's zero_quantized_weights and zero_hpz_partition_size):
//   qwZ: a gather from the partition sends int8 codes in groups (comm/quantized_collectives.h):
//        the layers then compute with the decoded values (the partition itself stays exact);
//   hpZ: in a pass with backward, a unit released while it is still to be used in the pass
//        (reuse distance, eviction) first keeps this rank's slice of it, 1/k of the unit for a
//        secondary group of k ranks (a node's GPUs), until the unit's last use in the pass; every
//        later gather of the unit in the pass - the backward's, a recompute's - all-gathers those
//        slices within the secondary group instead of the whole data-parallel group, in the
//        storage dtype. The slices hold the values the first gather produced (decoded ones under
//        qwZ), so forward and backward see the same weights. A unit that stays gathered keeps no
//        slice. The slices are MemoryCategory::kParams.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "comm/comm.h"
#include "comm/quantized_collectives.h"
#include "config/zero_config.h"
#include "model/model.h"
#include "sharding/exposed_comm_time.h"
#include "sharding/partition_store.h"
#include "sharding/partition_layout.h"

namespace zero::sharding {

// ZeRO++'s options for gathers from a partition (ignored for a full source).
struct GatherOptions {
  int64_t quantization_group = 0;   // > 0: qwZ, int8 codes in groups of this many elements
  comm::Comm* secondary = nullptr;  // hpZ: the secondary group (its size divides the world)
};

class ParameterFetcher {
 public:
  // Where parameters come from, exactly one of:
  //   partition: this rank's partition (partition_store.h: on the device, in host memory or on
  //              NVMe); a unit's shard is read from it and all-gathered (ZeRO-3). Units ahead of
  //              use are hinted to it (prefetch) so NVMe reads overlap the compute.
  //   full:      the full flat buffer (the model's layout) in 16 bits; a unit is converted
  //              locally (16-bit storage without ZeRO-3), no communication.
  // Either way, on the CPU backend a unit in a 16-bit dtype is widened to an f32 working copy the
  // layers read (the CPU computes in f32); on a device the layers read the 16-bit unit itself.
  // The source must outlive the fetcher and be current whenever a unit is fetched.
  struct Source {
    PartitionStore* partition = nullptr;
    const Tensor* full = nullptr;
  };
  ParameterFetcher(model::Model& model, backend::Backend& backend, comm::Comm& comm,
                   const PartitionLayout& layout, Source source, const config::ZeroConfig& zero,
                   std::vector<std::vector<size_t>> needs, ExposedCommTime& exposed,
                   GatherOptions gathering = {});

  // Starts a pass over the model: forward only (evaluation) or forward then backward.
  void begin_pass(bool with_backward);
  // Gathers and binds what unit `u` needs, then prefetches ahead.
  void before_use(size_t u, bool backward);
  // Releases what is not reused soon.
  void after_use(size_t u, bool backward);
  // Waits for prefetches and releases every non-persistent unit.
  void end_pass();
  // The partitioned parameters changed (optimizer step, checkpoint load): persistent units are
  // released so their next use gathers the new values.
  void invalidate();

  int64_t live_elements() const { return live_elements_; }
  // Elements of hpZ secondary slices held now, and the most held at once since reset_peak().
  int64_t secondary_elements() const { return secondary_elements_; }
  int64_t peak_secondary_elements() const { return peak_secondary_elements_; }
  int64_t peak_live_elements() const { return peak_live_elements_; }
  void reset_peak() {
    peak_live_elements_ = live_elements_;
    peak_secondary_elements_ = secondary_elements_;
  }

 private:
  struct Slot {
    bool active = false;                // gathered, in flight, or (local) claimed
    Tensor shard;                       // this rank's shard while the gather reads it
    Tensor gathered;                    // the all-gathered unit in the storage dtype
    Tensor working;                     // what the unit's views are bound to (f32)
    std::shared_ptr<comm::Work> work;   // in flight while set
    std::unique_ptr<comm::QuantizedAllGather> quantized;  // a qwZ gather in flight while set
    bool bound = false;
  };
  int64_t position(size_t u, bool backward) const;
  int64_t next_use(size_t u, int64_t after) const;  // -1 when none in this pass
  void start_gather(size_t u, bool async);
  void make_ready(size_t u);
  void release(size_t u);
  void evict_for(int64_t elements, const std::vector<size_t>& keep, int64_t now);
  void prefetch_after(int64_t now);
  bool persistent(size_t u) const;
  // Waits for a gather in flight into the slot (a buffer may not be freed while written).
  void wait_for_gather(Slot& slot);
  // Releases unit `u`, which is used again in this pass; under hpZ in a pass with backward it
  // first keeps this rank's slice of it (storage dtype) for the gathers to come.
  void release_keeping_secondary(size_t u);
  void drop_secondary(size_t u);

  model::Model& model_;
  backend::Backend& backend_;
  comm::Comm& comm_;
  const PartitionLayout& layout_;
  Source source_;
  config::ZeroConfig zero_;
  ExposedCommTime& exposed_;
  std::vector<std::vector<size_t>> needs_;  // per unit: the units it reads (itself first)
  std::vector<std::vector<size_t>> trace_;  // per position of the pass: units needed
  std::vector<int64_t> trace_prefix_;       // elements needed before each position
  std::vector<Slot> slots_;
  GatherOptions gathering_;
  std::vector<Tensor> secondary_;  // per unit: its hpZ slice while held
  bool with_backward_ = false;
  int64_t pass_length_ = 0;
  int64_t live_elements_ = 0;
  int64_t peak_live_elements_ = 0;
  int64_t secondary_elements_ = 0;
  int64_t peak_secondary_elements_ = 0;
};

}  // namespace zero::sharding
