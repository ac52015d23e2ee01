// The data side of Ulysses sequence parallelism (DeepSpeed's UlyssesSPDataLoaderAdapter): every
// rank of a sequence-parallel group reads the same full micro-batch, whose targets were built
// from the whole sequence (targets[t] = token t + 1, model::Batch's shift), and keeps its
// consecutive slice of the sequence. Slicing after the shift keeps the target of a shard's last
// token, which is the next shard's first token. The loss is the mean over the whole sequence's
// non-ignored targets: every rank counts them on the host (it holds the full batch) and its
// shard carries the count, so each rank's loss is its part of that mean and the group's parts
// sum to it without a per-token exchange.
#pragma once
#include <cstdint>

#include "model/step_context.h"

namespace zero::engine {

// The number of targets that count towards the loss (not model::kIgnoreIndex). Host i32/i64.
int64_t count_valid_targets(const Tensor& targets);

// Columns [rank * T / ranks, (rank + 1) * T / ranks) of `batch` (host [B, T] tokens and
// targets), with loss_valid_targets set to the full batch's count (or kept when the batch
// already carries one). Throws ShapeError naming the sequence length and
// sequence_parallel_size when T is not a multiple of `ranks`.
model::Batch shard_sequence(const model::Batch& batch, int rank, int ranks);

}  // namespace zero::engine
