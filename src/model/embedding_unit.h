// EmbeddingUnit: token embedding (and GPT-2's learned position embedding) — the first unit.
// Its output is the residual stream x[B*T, C].
//
// Tensor parallelism (model/vocab_parallel.h): built with a layout of size tp, the token table
// holds this rank's vocabulary rows only; ids of other ranks give zero rows and the output is
// all-reduced over ctx.tensor_group before the (replicated) position embedding is added.
#pragma once
#include "model/tensor_parallel.h"
#include "model/transformer_config.h"
#include "model/unit.h"

namespace zero::model {

class EmbeddingUnit final : public Unit {
 public:
  // Parameter names follow the Hugging Face model of config.family.
  explicit EmbeddingUnit(const TransformerConfig& config,
                         const TensorParallelLayout& tensor_parallel = {});

  std::string kind() const override { return "embedding"; }
  Tensor forward(StepContext& ctx, const Tensor& x) override;
  Tensor backward(StepContext& ctx, const Tensor& dy) override;
  void release_activations() override;

  // The token embedding table, which a tied LM head reuses.
  Parameter& token_embedding() { return parameters()[token_index_]; }

 private:
  // Position ids 0..T-1 repeated B times, on the device (cached across micro-batches).
  // Position ids first_position .. first_position + seq_len - 1 for each of batch_size rows
  // (first_position > 0 on a later rank of a sequence-parallel group).
  const Tensor& position_ids(backend::Backend& backend, int64_t batch_size, int64_t seq_len,
                             int64_t first_position);

  TensorParallelLayout tp_;
  int64_t first_id_ = 0;  // this rank's first vocabulary row
  int64_t vocab_size_;
  int64_t hidden_size_;
  int64_t max_positions_;
  bool learned_positions_;
  size_t token_index_ = 0;
  size_t position_index_ = 0;
  Tensor tokens_;     // saved for backward: [B*T]
  Tensor positions_;  // saved for backward: [B*T]
  Tensor position_ids_;
  int64_t position_ids_seq_len_ = 0;
  int64_t position_ids_first_ = 0;
};

}  // namespace zero::model
