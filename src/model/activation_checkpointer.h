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
//   The download (Backend::copy_to_pinned_async) runs on the transfer stream as soon as the
//   unit's input is ready (event) and the host does not wait for it, so on a device it overlaps
//   the unit's forward, which was enqueued before it; the compute stream waits for it (on the
//   device) only before the next unit's work, and the device copy is dropped after that wait.
//   Before recomputing unit i the input is uploaded on the transfer stream (into memory
//   allocated there) and the compute stream waits on that upload's event. The
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
// * segment_units (not in the section: DeepSpeed's pipeline.activation_checkpoint_interval,
//   set by engine/pipeline_engine.h): consecutive checkpointed units are grouped into segments
//   of that many (model/checkpoint_segments.h); a segment keeps only its first unit's input and
//   backward re-runs the whole segment right before its last unit's backward. 1 (the default):
//   every unit is its own segment. Everything above then applies per segment (a saved input
//   per segment; profile times per segment, listed under its first unit). The recompute runs
//   inside the last unit's UnitObserver::before_backward/after_backward, so the segment's other
//   units' parameters must be resident then: not for ZeRO-3 (the pipeline refuses it).
//
// Units: sizes are bytes unless named *_numel (elements). Ownership: the Backend and the
// partition group are not owned and must outlive the checkpointer. One host thread drives it,
// in the order begin_forward, begin_segment()/end_segment() around each segment's forward,
// recompute() per segment in reverse order (every rank of the partition group in the same
// order: all_gather is a collective).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "model/checkpoint_segments.h"
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
  // Consecutive checkpointed units per segment (>= 1; see above).
  int64_t segment_units = 1;
};

// Seconds per checkpointed segment (under its first unit's model index), summed since the last
// take_profile().
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
  // partition_activations, number_checkpoints below the saved-input count, or segment_units < 1.
  void set_options(const CheckpointingOptions& options, const std::vector<bool>& recomputable);
  const CheckpointingOptions& options() const { return options_; }
  // The activation partition group (see above; null: no partitioning). Not owned.
  void set_partition_group(comm::Comm* group) { group_ = group; }
  comm::Comm* partition_group() const { return group_; }
  // Units 0, k, 2k, ... of `count` recomputable units (k >= 1).
  static std::vector<bool> every_kth(size_t count, size_t k);
  // The number of inputs a training forward saves (segments; with segment_units 1, the
  // checkpointed units).
  size_t checkpointed_count(const std::vector<bool>& recomputable) const;

  // Starts a pass over units whose recomputable() flags are `recomputable`; `enabled` false (an
  // evaluation, or checkpointing off) checkpoints nothing. Drops anything left from a pass
  // whose backward never ran.
  void begin_forward(const std::vector<bool>& recomputable, bool enabled);
  bool checkpoints(size_t unit) const { return unit < chosen_.size() && chosen_[unit]; }
  // The segment of checkpointed unit `unit` (checkpoints(unit) must hold), this pass.
  const CheckpointSegment& segment_of(size_t unit) const;
  // Right before the forward of a segment's first unit: starts saving its input `x`
  // (partitioned / on the host / in the contiguous buffer as configured).
  void begin_segment(size_t first, const Tensor& x);
  // Right after the forward of the segment's last unit: releases the activations of each unit
  // of the segment (`units`: the model's units, indexed by model position) and finishes saving
  // the input (the host download on cpu_checkpointing).
  void end_segment(const CheckpointSegment& segment,
                   const std::vector<std::unique_ptr<Unit>>& units);
  // Whether the segment starting at unit `first` has a saved input waiting for its recompute.
  bool holds(size_t first) const;
  // Restores the segment's input and re-runs the forward of its units, which then hold their
  // activations for their backward (prefetching the previous segment's input).
  void recompute(const CheckpointSegment& segment,
                 const std::vector<std::unique_ptr<Unit>>& units, StepContext& ctx);
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
  std::vector<CheckpointSegment> segments_;  // this pass
  std::vector<size_t> segment_index_;        // per model unit: its entry in segments_
  std::vector<Saved> saved_;       // per model unit (a segment's, under its first unit)
  // Between begin_segment and end_segment: the piece being saved and when it was ready.
  Tensor pending_piece_;
  backend::Event pending_ready_;
  double pending_start_ = 0.0;
  size_t slots_needed_ = 0;        // saved inputs (segments) per pass
  size_t next_slot_ = 0;
  Tensor contiguous_;              // [slots, slot_numel], device or pinned host
  int64_t slot_numel_ = 0;
  CheckpointProfile profile_;
  CheckpointMemory memory_;
};

}  // namespace zero::model
