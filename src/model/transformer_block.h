// TransformerBlock: one pre-norm decoder block — norm, fused QKV projection, (rotary),
// causal attention, output projection, residual; norm, MLP (GELU or SwiGLU), residual.
// The same unit serves GPT-2, Llama, Qwen2 and Mistral; the config picks norms, biases, MLP and
// positions, and the Hugging Face names of its parameters.
//
// Layout trick: parameters that are used as one matrix are declared adjacently, so q/k/v
// (and gate/up) run as one matmul through a fused view while loading and saving still see the
// separate Hugging Face tensors.
#pragma once
#include <optional>

#include "model/norm_layer.h"
#include "model/rope_table.h"
#include "model/tiled_mlp.h"
#include "model/transformer_config.h"
#include "model/ulysses_attention.h"
#include "model/unit.h"

namespace zero::model {

class TransformerBlock final : public Unit {
 public:
  TransformerBlock(const TransformerConfig& config, int64_t layer_index);

  std::string kind() const override { return "transformer_block"; }
  Tensor forward(StepContext& ctx, const Tensor& x) override;
  Tensor backward(StepContext& ctx, const Tensor& dy) override;
  void release_activations() override;
  bool recomputable() const override { return true; }

 private:
  struct Indices {
    size_t norm1_weight = 0, norm1_bias = 0;
    size_t qkv_first = 0, qkv_last = 0;            // weight(s) of q, k, v
    size_t qkv_bias_first = 0, qkv_bias_last = 0;  // valid when config.qkv_bias
    size_t out_weight = 0, out_bias = 0;
    size_t norm2_weight = 0, norm2_bias = 0;
    size_t up_first = 0, up_last = 0;              // c_fc, or gate_proj + up_proj
    size_t up_bias_first = 0, up_bias_last = 0;
    size_t down_weight = 0, down_bias = 0;
  };
  void declare_gpt2_parameters(const std::string& prefix);
  void declare_llama_parameters(const std::string& prefix);
  const RopeTable& rope_for(backend::Backend& backend, int64_t seq_len, DType dtype);
  // Rotary rows for positions first .. first + seq_len - 1 (views into rope_for's table).
  RopeTable rope_rows(backend::Backend& backend, int64_t first, int64_t seq_len, DType dtype);
  // Views of q, k, v [B, T, heads, D] inside a fused [B*T, (H + 2 KVH) * D] buffer.
  Tensor head_view(const Tensor& fused, int64_t batch, int64_t seq_len, int64_t column,
                   int64_t heads) const;
  // Views of the MLP half's parameters (gradients), bound now (ZeRO-3 rebinds them).
  MlpTensors mlp_params();
  MlpTensors mlp_grads();

  TransformerConfig config_;
  Indices idx_;
  NormLayer norm1_;
  TiledMlp mlp_;  // norm2 + MLP + residual, over row shards (ctx.sequence_tiling)
  std::optional<RopeTable> rope_;
  UlyssesAttention ulysses_;  // used when the step's sequence is split over ranks
  int64_t batch_ = 0, seq_len_ = 0;
  // Saved by forward for backward.
  Tensor x_, h1_, qkv_, attn_, lse_;
};

}  // namespace zero::model
