#include "model/embedding_unit.h"

#include "comm/comm.h"
#include "core/error.h"
#include "model/vocab_parallel.h"

namespace zero::model {

EmbeddingUnit::EmbeddingUnit(const TransformerConfig& config,
                             const TensorParallelLayout& tensor_parallel)
    : Unit("embedding"),
      tp_(tensor_parallel),
      vocab_size_(config.vocab_size),
      hidden_size_(config.hidden_size),
      max_positions_(config.max_position_embeddings),
      learned_positions_(config.learned_positions) {
  const bool gpt2 = config.family == ModelFamily::kGpt2;
  const Range rows = vocab_part(vocab_size_, tp_);
  first_id_ = rows.begin;
  ParamSpec token{gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight",
                  {rows.size(), hidden_size_}, true, HfLayout::kSame};
  if (tp_.enabled()) {
    token.slice = make_balanced_slice(token.shape, 0, vocab_size_, tp_.size, tp_.rank);
  }
  token_index_ = add_parameter(std::move(token));
  if (learned_positions_) {
    position_index_ = add_parameter(
        {"transformer.wpe.weight", {max_positions_, hidden_size_}, true, HfLayout::kSame});
  }
}

Tensor EmbeddingUnit::forward(StepContext& ctx, const Tensor& /*x*/) {
  const Batch& batch = ctx.batch;
  const int64_t rows = batch.batch_size() * batch.seq_len();
  // Under sequence parallelism this rank's tokens sit at positions offset .. offset + T - 1.
  const int64_t position_end = ctx.sequence_offset + batch.seq_len();
  if (learned_positions_ && position_end > max_positions_) {
    throw ShapeError("sequence length " + std::to_string(position_end) +
                     " exceeds the model's position table (n_positions = " +
                     std::to_string(max_positions_) + "); use a shorter --seq-len");
  }
  const Tensor& tokens = ctx.device_batch.tokens;
  Tensor out = ctx.backend.empty({rows, hidden_size_},
                                 ctx.activation_dtype.value_or(param(token_index_).dtype()),
                                 MemoryCategory::kActivations);
  comm::Comm* group = checked_tensor_group(ctx.tensor_group, tp_, name());
  if (group != nullptr) {
    // This rank's vocabulary rows, zero for other ids; the group's sum is the full lookup.
    ctx.backend.embedding_forward_slice(out, tokens, param(token_index_), first_id_, false);
    tensor_parallel_all_reduce(group, out);
  } else {
    ctx.backend.embedding_forward(out, tokens, param(token_index_), false);
  }
  if (learned_positions_) {
    const Tensor& positions =
        position_ids(ctx.backend, batch.batch_size(), batch.seq_len(), ctx.sequence_offset);
    ctx.backend.embedding_forward(out, positions, param(position_index_), true);
    if (ctx.training) positions_ = positions;
  }
  if (ctx.training) tokens_ = tokens;
  return out;
}

const Tensor& EmbeddingUnit::position_ids(backend::Backend& backend, int64_t batch_size,
                                          int64_t seq_len, int64_t first_position) {
  const int64_t rows = batch_size * seq_len;
  // Every micro-batch of a run has the same shape: built and uploaded once, not per step.
  if (!position_ids_.defined() || position_ids_.numel() != rows ||
      position_ids_seq_len_ != seq_len || position_ids_first_ != first_position) {
    Tensor host = Tensor::zeros_host({rows}, DType::kI64);
    for (int64_t i = 0; i < rows; ++i) host.data<int64_t>()[i] = first_position + i % seq_len;
    position_ids_ = backend.empty({rows}, DType::kI64, MemoryCategory::kOther);
    backend.copy_from_host(position_ids_, host.raw_data());
    position_ids_seq_len_ = seq_len;
    position_ids_first_ = first_position;
  }
  return position_ids_;
}

Tensor EmbeddingUnit::backward(StepContext& ctx, const Tensor& dy) {
  // dy is the same on every tensor-parallel rank: each adds its own rows' part.
  if (tp_.enabled()) {
    ctx.backend.embedding_backward_slice(grad(token_index_), dy, tokens_, first_id_);
  } else {
    ctx.backend.embedding_backward(grad(token_index_), dy, tokens_);
  }
  if (learned_positions_) ctx.backend.embedding_backward(grad(position_index_), dy, positions_);
  return Tensor();
}

void EmbeddingUnit::release_activations() {
  tokens_ = Tensor();
  positions_ = Tensor();
}

}  // namespace zero::model
