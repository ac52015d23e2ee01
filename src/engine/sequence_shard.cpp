#include "engine/sequence_shard.h"

#include <cstring>
#include <string>

#include "core/check.h"
#include "core/error.h"

namespace zero::engine {
namespace {

// A contiguous host copy of columns [first, first + count) of a contiguous host [B, T] tensor.
Tensor copy_columns(const Tensor& full, int64_t first, int64_t count) {
  const int64_t rows = full.size(0);
  const int64_t columns = full.size(1);
  const size_t element = full.element_size();
  Tensor part = Tensor::zeros_host({rows, count}, full.dtype());
  const auto* src = static_cast<const unsigned char*>(full.raw_data());
  auto* dst = static_cast<unsigned char*>(part.raw_data());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + static_cast<size_t>(r * count) * element,
                src + static_cast<size_t>(r * columns + first) * element,
                static_cast<size_t>(count) * element);
  }
  return part;
}

bool usable_ids(const Tensor& t) {
  return t.defined() && t.dim() == 2 && t.is_contiguous() && t.device().is_cpu() &&
         (t.dtype() == DType::kI32 || t.dtype() == DType::kI64);
}

}  // namespace

int64_t count_valid_targets(const Tensor& targets) {
  ZERO_CHECK(targets.device().is_cpu() && targets.is_contiguous() &&
                 (targets.dtype() == DType::kI32 || targets.dtype() == DType::kI64),
             "count_valid_targets needs contiguous host i32/i64 targets, got " << targets.describe());
  int64_t valid = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) {
    const int64_t id = targets.dtype() == DType::kI64 ? targets.data<int64_t>()[i]
                                                      : targets.data<int32_t>()[i];
    if (id != model::kIgnoreIndex) ++valid;
  }
  return valid;
}

model::Batch shard_sequence(const model::Batch& batch, int rank, int ranks) {
  if (!usable_ids(batch.tokens) || !usable_ids(batch.targets) ||
      batch.tokens.shape() != batch.targets.shape()) {
    throw ShapeError("sequence parallelism needs host i32/i64 tokens and targets of one [B, T] "
                     "shape, got tokens " +
                     (batch.tokens.defined() ? batch.tokens.describe() : std::string("undefined")) +
                     " and targets " +
                     (batch.targets.defined() ? batch.targets.describe() : std::string("undefined")));
  }
  ZERO_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "shard_sequence: rank " << rank << " of " << ranks);
  const int64_t seq_len = batch.seq_len();
  if (seq_len % ranks != 0) {
    throw ShapeError("sequence length " + std::to_string(seq_len) +
                     " does not divide by sequence_parallel_size " + std::to_string(ranks) +
                     "; each rank holds an equal part of the sequence: use a --seq-len that is a "
                     "multiple of it");
  }
  const int64_t part = seq_len / ranks;
  model::Batch shard;
  shard.tokens = copy_columns(batch.tokens, rank * part, part);
  shard.targets = copy_columns(batch.targets, rank * part, part);
  shard.loss_valid_targets =
      batch.loss_valid_targets ? *batch.loss_valid_targets : count_valid_targets(batch.targets);
  return shard;
}

}  // namespace zero::engine
