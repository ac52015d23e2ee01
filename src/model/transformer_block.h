// TransformerBlock: one pre-norm decoder block — norm, fused QKV projection, (rotary),
// causal attention, output projection, residual; norm, MLP (GELU or SwiGLU), residual.
// The same unit serves GPT-2, Llama, Qwen2, Qwen3, Qwen3-MoE, Mistral and Mixtral; the config picks
// norms, biases, Qwen3's per-head query/key norms, MLP (dense, or experts) and positions, and the
// Hugging Face names of its parameters.
//
// Layout trick: parameters that are used as one matrix are declared adjacently, so q/k/v
// (and gate/up) run as one matmul through a fused view while loading and saving still see the
// separate Hugging Face tensors.
//
// Tensor parallelism (model/tensor_parallel.h): built with a layout of size tp, the block holds
// this rank's heads and MLP width only (sliced parameters under the same names, with slice
// metadata), and forward/backward all-reduce over ctx.tensor_group (which must have that size).
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "model/norm_layer.h"
#include "model/rope_table.h"
#include "model/tensor_parallel.h"
#include "model/tiled_mlp.h"
#include "model/transformer_config.h"
#include "model/ulysses_attention.h"
#include "model/unit.h"

namespace zero::model {

class TransformerBlock final : public Unit {
 public:
  TransformerBlock(const TransformerConfig& config, int64_t layer_index,
                   const TensorParallelLayout& tensor_parallel = {});
  ~TransformerBlock() override;  // out of line: comm::Comm is incomplete here

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
    // Mixture of experts: the router, every expert's w1 | w3 (up_first..up_last) and every
    // expert's w2 (down_weight..down_last), each group adjacent so that it is one fused view.
    size_t router = 0, down_last = 0;
    size_t q_norm = 0, k_norm = 0;  // Qwen3's per-head norm weights [head_dim]
  };
  void declare_gpt2_parameters(const std::string& prefix);
  void declare_llama_parameters(const std::string& prefix);
  // The experts' parameters in place of the dense MLP's (Mixtral's block_sparse_moe, Qwen3-MoE's
  // mlp), under their Hugging Face names.
  void declare_expert_parameters(const std::string& prefix);
  // The MLP half's views (of parameters, or of gradients when `grads`).
  MlpTensors mlp_tensors(bool grads);
  const RopeTable& rope_for(backend::Backend& backend, int64_t seq_len, DType dtype);
  // Rotary rows for positions first .. first + seq_len - 1 (views into rope_for's table of
  // table_len >= first + seq_len rows: generation asks for the cache's capacity, so the table is
  // built once and not once per token).
  RopeTable rope_rows(backend::Backend& backend, int64_t first, int64_t seq_len, DType dtype,
                      int64_t table_len);
  // Generation: appends k and v to ctx.kv_cache and attends q over the cache into attn_heads.
  void cached_attention(StepContext& ctx, Tensor& attn_heads, const Tensor& q, const Tensor& k,
                        const Tensor& v, double scale);
  // Views of q, k, v [B, T, heads, D] inside a fused [B*T, (H + 2 KVH) * D] buffer.
  Tensor head_view(const Tensor& fused, int64_t batch, int64_t seq_len, int64_t column,
                   int64_t heads) const;
  // Views of the MLP half's parameters (gradients), bound now (ZeRO-3 rebinds them).
  MlpTensors mlp_params();
  MlpTensors mlp_grads();
  // Tensor parallelism: checks ctx.tensor_group against the layout the block was built for.
  comm::Comm* tensor_group(const StepContext& ctx) const;
  // Sums the key/value weight (bias) gradient added by the last linear_backward over the ranks
  // that hold the same key/value heads; `before` holds their values before it.
  void sum_replicated_kv_grads(backend::Backend& backend, comm::Comm& group,
                               const std::vector<Tensor>& before);
  std::vector<Tensor> replicated_kv_grads();
  // Qwen3: d_qkv (after the norms) -> the gradient before them; the norm weights' gradients
  // accumulate, summed over the tensor group (each rank holds some heads) when there is one.
  Tensor qk_norm_backward(backend::Backend& backend, comm::Comm* tp_group, const Tensor& d_qkv);

  int64_t layer_index_;
  TensorParallelLayout tp_;
  TensorParallelHeads tp_heads_;
  TransformerConfig config_;  // this rank's part: heads and intermediate_size divided by tp
  Indices idx_;
  NormLayer norm1_;
  TiledMlp mlp_;  // norm2 + MLP + residual, over row shards (ctx.sequence_tiling)
  std::optional<RopeTable> rope_;
  UlyssesAttention ulysses_;  // used when the step's sequence is split over ranks
  std::unique_ptr<comm::Comm> kv_replica_group_;  // ranks sharing this rank's key/value heads
  comm::Comm* kv_replica_parent_ = nullptr;        // the tensor group it was split from
  int64_t batch_ = 0, seq_len_ = 0;
  // Saved by forward for backward.
  Tensor x_, h1_, qkv_, attn_, lse_;
  Tensor qkv_raw_, qk_rstd_;  // Qwen3: the projection before the q/k norms, their 1/RMS
};

}  // namespace zero::model
