// ActivationCheckpointer: HOW a Model's activation checkpointing keeps the input of each
// checkpointed unit between that unit's forward and its recompute in backward. WHETHER the model
// checkpoints at all is the model's choice (Model::set_activation_checkpointing, Hugging Face's
// gradient_checkpointing); these options are DeepSpeed's `activation_checkpointing` section:
//
// * Per-unit choice (`unit_mask`): which recomputable units (the transformer blocks, counted in
//   model order from 0) are checkpointed; empty means all. A unit left out keeps its
//   activations as without checkpointing. every_kth() builds the common "every k-th block" mask.
// * partition_activations: each rank of the activation partition group keeps 1/N of the
//   flattened input (the last piece zero-padded, so every piece has ceil(numel/N) elements) and
//   all_gather restores it bit-exactly right before the recompute. The group must be the ranks
//   that hold IDENTICAL activations: DeepSpeed uses its model-parallel group, and in zero.cpp
//   that is the tensor-parallel group (a later issue). Data-parallel ranks hold different
//   batches and Ulysses sequence-parallel ranks hold different sequence shards, so partitioning
//   across either would lose data or save nothing. A null group or a group of one rank makes
//   it a no-op (DeepSpeed with model-parallel size 1).
// * cpu_checkpointing: the saved (partitioned) inputs live in the backend's pinned host memory.
//   The download runs on the transfer stream after the unit's input is ready (event), so on a
//   device it overlaps the unit's forward; the device copy is dropped only after the compute
//   stream waited on the download's completion event. Before recomputing unit i the input is
//   uploaded on the transfer stream and the compute stream waits on that upload's event. The
//   upload of the previous checkpointed unit's input is PREFETCHED: issued right after unit i's
//   input is restored, so it overlaps unit i's recompute and backward (one extra hidden state
//   on the device at a time).
// * contiguous_memory_optimization: the saved pieces are copied into ONE preallocated buffer of
//   `number_checkpoints` slots (unset: the checkpointed unit count) in the memory they are
//   kept in (device, or pinned host with cpu_checkpointing), kept across steps. Every
//   checkpointed input must then have the same dtype and size. DeepSpeed requires
//   partition_activations for it; so does validate().
// * synchronize_checkpoint_boundary: backend.synchronize() after each checkpointed unit's
//   forward (TransferStats::synchronizations counts them).
// * profile: each checkpointed unit's forward and recompute are timed, with a backend
//   synchronize before each clock read; take_profile() returns and clears the numbers (the
//   engine prints them: nothing in src/model prints).
//
// Units: sizes are bytes unless named *_numel (elements). Ownership: the Backend and the
// partition group are not owned and must outlive the checkpointer. One host thread drives it,
// in the order begin_forward, forward() per checkpointed unit, recompute() per checkpointed
// unit in reverse order (every rank of the partition group in the same order: all_gather is a
// collective).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "model/step_context.h"

namespace zero::comm {
class Comm;
}  // namespace zero::comm

namespace zero::model {

class Unit;

struct CheckpointingOptions {
  // One entry per recomputable unit, in model order; empty: every recomputable unit.
  std::vector<bool> unit_mask;
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  std::optional<int64_t> number_checkpoints;  // slots of the contiguous buffer
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

// Seconds per checkpointed unit (model unit index), summed since the last take_profile().
struct CheckpointProfile {
  struct UnitTimes {
    size_t unit = 0;
    int64_t forwards = 0;
    double forward_seconds = 0.0;
    int64_t recomputes = 0;
    double recompute_seconds = 0.0;
  };
  std::vector<UnitTimes> units;
};

// Bytes the saved inputs occupy (pieces, or the contiguous buffer), by where they live.
struct CheckpointMemory {
  size_t device_bytes = 0;
  size_t host_bytes = 0;
  size_t peak_device_bytes = 0;  // since construction or the last reset_peaks()
  size_t peak_host_bytes = 0;
};

class ActivationCheckpointer {
 public:
  explicit ActivationCheckpointer(backend::Backend& backend);
  ~ActivationCheckpointer();
  ActivationCheckpointer(const ActivationCheckpointer&) = delete;
  ActivationCheckpointer& operator=(const ActivationCheckpointer&) = delete;

  // Options (validated against the model's units: `recomputable` has one entry per unit).
  // Throws ConfigError for a mask of the wrong length, contiguous_memory_optimization without
  // partition_activations, or number_checkpoints below the checkpointed unit count.
  void set_options(const CheckpointingOptions& options, const std::vector<bool>& recomputable);
  const CheckpointingOptions& options() const { return options_; }
  // The activation partition group (see above; null: no partitioning). Not owned.
  void set_partition_group(comm::Comm* group) { group_ = group; }
  comm::Comm* partition_group() const { return group_; }
  // Units 0, k, 2k, ... of `count` recomputable units (k >= 1).
  static std::vector<bool> every_kth(size_t count, size_t k);
  // The number of units a training forward checkpoints.
  size_t checkpointed_count(const std::vector<bool>& recomputable) const;

  // Starts a pass over units whose recomputable() flags are `recomputable`; `enabled` false (an
  // evaluation, or checkpointing off) checkpoints nothing. Drops anything left from a pass
  // whose backward never ran.
  void begin_forward(const std::vector<bool>& recomputable, bool enabled);
  bool checkpoints(size_t unit) const { return unit < chosen_.size() && chosen_[unit]; }
  // Runs checkpointed unit `unit`'s forward on `x`, releases its activations and saves `x`
  // (partitioned / on the host / in the contiguous buffer as configured). Returns the output.
  Tensor forward(size_t unit, Unit& u, StepContext& ctx, const Tensor& x);
  // Whether `unit` has a saved input waiting for its recompute.
  bool holds(size_t unit) const;
  // Restores `unit`'s input and re-runs its forward (prefetching the previous one's input).
  void recompute(size_t unit, Unit& u, StepContext& ctx);
  // Drops every saved input (after an evaluation or an abandoned pass). Keeps the buffer.
  void clear();

  CheckpointProfile take_profile();
  CheckpointMemory memory() const;
  void reset_peaks();

 private:
  struct Saved;
  Tensor restore(size_t unit);
  void start_upload(size_t unit);
  void release(Saved& saved);
  void note_memory();
  void ensure_contiguous_buffer(int64_t piece_numel, DType dtype);
  CheckpointProfile::UnitTimes& times(size_t unit);
  int group_size() const;
  double now_synchronized();

  backend::Backend& backend_;
  CheckpointingOptions options_;
  comm::Comm* group_ = nullptr;
  std::vector<bool> chosen_;       // per model unit, this pass
  std::vector<Saved> saved_;       // per model unit
  size_t slots_needed_ = 0;        // checkpointed units per pass
  size_t next_slot_ = 0;
  Tensor contiguous_;              // [slots, slot_numel], device or pinned host
  int64_t slot_numel_ = 0;
  CheckpointProfile profile_;
  CheckpointMemory memory_;
};

}  // namespace zero::model
