// Checkpoint segments: which consecutive checkpointed units share one saved input. Activation
// checkpointing (model/activation_checkpointer.h) keeps the input of each SEGMENT and, in
// backward, re-runs the segment's whole forward right before the backward of its last unit.
// Segments of one unit are Hugging Face's gradient_checkpointing (one hidden state per block);
// longer ones are DeepSpeed's PipelineModule activation_checkpoint_interval: the layers run in
// consecutive groups of N, each group checkpointed as one piece. Longer segments keep fewer
// inputs but hold a whole segment's activations during its recompute and backward.
//
// Units are model unit positions. Pure functions; no state.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zero::model {

struct CheckpointSegment {
  size_t first = 0;  // the unit whose input is saved
  size_t last = 0;   // the unit before whose backward the segment is recomputed (inclusive)
  bool operator==(const CheckpointSegment&) const = default;
};

// Cuts every run of consecutive chosen units (`chosen` has one entry per model unit) into
// segments of `units_per_segment` units, counted from the run's first unit (the last segment of
// a run may be shorter). A unit that is not chosen ends a run: segments never span one, since
// it keeps its own activations (the embedding, the final norm, the loss). units_per_segment
// must be >= 1 (1: every chosen unit alone).
std::vector<CheckpointSegment> plan_checkpoint_segments(const std::vector<bool>& chosen,
                                                        int64_t units_per_segment);

}  // namespace zero::model
