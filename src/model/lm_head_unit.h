// LmHeadUnit: the last unit — final norm, LM head projection to the vocabulary, and the fused
// softmax + cross-entropy. Logits exist only as one [B*T, V] buffer that the loss overwrites with
// dlogits (probabilities are never stored); its rows are Backend::preferred_row_elements long
// (padded to 16 bytes on CUDA) and the ops see its [B*T, V] view. With tied embeddings it reads
// and accumulates into the embedding unit's table instead of owning a weight. With
// ctx.sequence_tiling.logits_shards resolving to N > 1 the head + loss run tiled
// (model/tiled_logits_loss.h, exact rows): no [B*T, V] buffer.
//
// Generation (StepContext::kv_cache set): the head returns the logits [B, V] of each sequence's
// last position (activation dtype, on the device) instead of the loss; no targets are read.
//
// Tensor parallelism (model/vocab_parallel.h): built with a layout of size tp, the head weight
// (or the tied embedding's slice) holds this rank's vocabulary rows; the logits are this rank's
// columns only, the loss is combined over ctx.tensor_group without gathering a row, and the
// hidden state's gradient is all-reduced. Capturing logits is not supported then.
#pragma once
#include "model/norm_layer.h"
#include "model/tensor_parallel.h"
#include "model/tiled_logits_loss.h"
#include "model/transformer_config.h"
#include "model/unit.h"

namespace zero::model {

class LmHeadUnit final : public Unit {
 public:
  // `tied_embedding`: the token embedding parameter to reuse (must outlive this unit), or null.
  // With tensor parallelism a tied embedding must hold the same vocabulary part.
  LmHeadUnit(const TransformerConfig& config, Parameter* tied_embedding,
             const TensorParallelLayout& tensor_parallel = {});

  std::string kind() const override { return "lm_head"; }
  Tensor forward(StepContext& ctx, const Tensor& x) override;
  Tensor backward(StepContext& ctx, const Tensor& dy) override;
  void release_activations() override;
  std::vector<const Parameter*> borrowed_parameters() const override;

 private:
  // Generation (ctx.kv_cache set): the logits [B, V] of each sequence's last position of x.
  Tensor last_position_logits(StepContext& ctx, const Tensor& x);
  Tensor& head_weight();
  comm::Comm* tensor_group(const StepContext& ctx) const;  // checked against the layout
  Tensor& head_grad();

  int64_t vocab_size_;
  TensorParallelLayout tp_;
  Range columns_;  // this rank's vocabulary part: the logits' columns
  NormLayer norm_;
  size_t norm_weight_ = 0, norm_bias_ = 0, head_index_ = 0;
  Parameter* tied_embedding_;
  Tensor x_, h_, dlogits_;
  Tensor last_rows_;  // generation: ids of each sequence's last row, for T = last_rows_seq_len_
  int64_t last_rows_seq_len_ = 0;
  TiledFusedLogitsLoss tiled_;
};

}  // namespace zero::model
