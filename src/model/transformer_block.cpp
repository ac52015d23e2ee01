#include "model/transformer_block.h"

#include <algorithm>
#include <cmath>

#include "comm/comm.h"
#include "core/check.h"
#include "core/error.h"
#include "model/kv_cache.h"

namespace zero::model {

TransformerBlock::TransformerBlock(const TransformerConfig& config, int64_t layer_index,
                                   const TensorParallelLayout& tensor_parallel)
    : Unit("block" + std::to_string(layer_index)),
      layer_index_(layer_index),
      tp_(tensor_parallel),
      tp_heads_(tensor_parallel_heads(config.num_heads, config.num_kv_heads, tensor_parallel)),
      config_(tensor_parallel_block_config(config, tensor_parallel)),
      norm1_(config.norm, config.norm_eps),
      mlp_(config_) {
  config_.source_json = nlohmann::json();  // not needed per block
  // This layer's window (Qwen's max_window_layers, layer_types): uniform within the block.
  config_.set_attention_windows(config.window_of_layer(layer_index));
  if (config.family == ModelFamily::kGpt2) {
    declare_gpt2_parameters("transformer.h." + std::to_string(layer_index) + ".");
  } else {
    declare_llama_parameters("model.layers." + std::to_string(layer_index) + ".");
  }
}

TransformerBlock::~TransformerBlock() = default;

namespace {
// What a tensor-parallel parameter is cut along: its row-parallel input columns, its
// column-parallel output rows (q/k/v in `blocks` blocks), or key/value-head rows.
enum class Split { kNone, kRows, kColumns, kKvRows };

ParamSpec split_spec(ParamSpec spec, Split split, const TensorParallelLayout& tp,
                     const TensorParallelHeads& heads, int64_t blocks = 1) {
  if (!tp.enabled() || split == Split::kNone) return spec;
  if (split == Split::kKvRows) {
    spec.slice = make_tensor_slice(spec.shape, 0, heads.kv_parts, heads.kv_index, 1,
                                   heads.kv_replicas);
  } else {
    spec.slice = make_tensor_slice(spec.shape, split == Split::kColumns ? 1 : 0, tp.size,
                                   tp.rank, blocks);
  }
  return spec;
}
}  // namespace

void TransformerBlock::declare_gpt2_parameters(const std::string& p) {
  const int64_t c = config_.hidden_size;
  const int64_t inner = config_.intermediate_size;
  const int64_t qkv = config_.q_dim() + 2 * config_.kv_dim();
  auto weight = [&](const std::string& name, Shape shape, Split split, int64_t blocks = 1) {
    return add_parameter(split_spec({p + name, std::move(shape), true, HfLayout::kTransposed},
                                    split, tp_, tp_heads_, blocks));
  };
  auto vector = [&](const std::string& name, int64_t n, Split split = Split::kNone,
                    int64_t blocks = 1) {
    return add_parameter(
        split_spec({p + name, {n}, false, HfLayout::kSame}, split, tp_, tp_heads_, blocks));
  };
  idx_.norm1_weight = vector("ln_1.weight", c);
  idx_.norm1_bias = vector("ln_1.bias", c);
  // c_attn is q | k | v in one tensor: each rank keeps its heads' rows of each of the three.
  idx_.qkv_first = idx_.qkv_last = weight("attn.c_attn.weight", {qkv, c}, Split::kRows, 3);
  idx_.qkv_bias_first = idx_.qkv_bias_last = vector("attn.c_attn.bias", qkv, Split::kRows, 3);
  idx_.out_weight = weight("attn.c_proj.weight", {c, config_.q_dim()}, Split::kColumns);
  idx_.out_bias = vector("attn.c_proj.bias", c);
  idx_.norm2_weight = vector("ln_2.weight", c);
  idx_.norm2_bias = vector("ln_2.bias", c);
  idx_.up_first = idx_.up_last = weight("mlp.c_fc.weight", {inner, c}, Split::kRows);
  idx_.up_bias_first = idx_.up_bias_last = vector("mlp.c_fc.bias", inner, Split::kRows);
  idx_.down_weight = weight("mlp.c_proj.weight", {c, inner}, Split::kColumns);
  idx_.down_bias = vector("mlp.c_proj.bias", c);
}

void TransformerBlock::declare_llama_parameters(const std::string& p) {
  const int64_t c = config_.hidden_size;
  const int64_t inner = config_.intermediate_size;
  auto weight = [&](const std::string& name, Shape shape, Split split) {
    return add_parameter(
        split_spec({p + name, std::move(shape), true, HfLayout::kSame}, split, tp_, tp_heads_));
  };
  auto vector = [&](const std::string& name, int64_t n, Split split = Split::kNone) {
    return add_parameter(split_spec({p + name, {n}, false, HfLayout::kSame}, split, tp_, tp_heads_));
  };
  idx_.norm1_weight = vector("input_layernorm.weight", c);
  idx_.qkv_first = weight("self_attn.q_proj.weight", {config_.q_dim(), c}, Split::kRows);
  weight("self_attn.k_proj.weight", {config_.kv_dim(), c}, Split::kKvRows);
  idx_.qkv_last = weight("self_attn.v_proj.weight", {config_.kv_dim(), c}, Split::kKvRows);
  if (config_.qkv_bias) {
    idx_.qkv_bias_first = vector("self_attn.q_proj.bias", config_.q_dim(), Split::kRows);
    vector("self_attn.k_proj.bias", config_.kv_dim(), Split::kKvRows);
    idx_.qkv_bias_last = vector("self_attn.v_proj.bias", config_.kv_dim(), Split::kKvRows);
  }
  idx_.out_weight = weight("self_attn.o_proj.weight", {c, config_.q_dim()}, Split::kColumns);
  if (config_.attn_out_bias) idx_.out_bias = vector("self_attn.o_proj.bias", c);
  if (config_.qk_norm) {
    // Every tensor-parallel rank holds both whole (each normalises its own heads with them).
    idx_.q_norm = vector("self_attn.q_norm.weight", config_.head_dim);
    idx_.k_norm = vector("self_attn.k_norm.weight", config_.head_dim);
  }
  idx_.norm2_weight = vector("post_attention_layernorm.weight", c);
  if (config_.is_moe()) return declare_expert_parameters(p);
  idx_.up_first = weight("mlp.gate_proj.weight", {inner, c}, Split::kRows);
  idx_.up_last = weight("mlp.up_proj.weight", {inner, c}, Split::kRows);
  if (config_.mlp_bias) {
    idx_.up_bias_first = vector("mlp.gate_proj.bias", inner, Split::kRows);
    idx_.up_bias_last = vector("mlp.up_proj.bias", inner, Split::kRows);
  }
  idx_.down_weight = weight("mlp.down_proj.weight", {c, inner}, Split::kColumns);
  if (config_.mlp_bias) idx_.down_bias = vector("mlp.down_proj.bias", c);
}

void TransformerBlock::declare_expert_parameters(const std::string& p) {
  // Tensor parallelism never reaches here (tensor_parallel_block_config refuses experts).
  const int64_t c = config_.hidden_size;
  const int64_t inner = config_.intermediate_size;
  // Hugging Face's names: Mixtral's block_sparse_moe with w1 (gate), w3 (up), w2 (down);
  // Qwen3-MoE's mlp with gate_proj, up_proj, down_proj. The router is "gate" in both.
  const bool mixtral = config_.family == ModelFamily::kMixtral;
  const std::string module = mixtral ? "block_sparse_moe." : "mlp.";
  const char* gate = mixtral ? "w1" : "gate_proj";
  const char* up = mixtral ? "w3" : "up_proj";
  const char* down = mixtral ? "w2" : "down_proj";
  auto weight = [&](const std::string& name, Shape shape) {
    return add_parameter({p + module + name, std::move(shape), true, HfLayout::kSame});
  };
  idx_.router = weight("gate.weight", {config_.num_experts, c});
  // Gate then up per expert: expert e's [2I, C] rows are the SwiGLU's gate | up.
  for (int64_t e = 0; e < config_.num_experts; ++e) {
    const std::string expert = "experts." + std::to_string(e) + ".";
    const size_t w1 = weight(expert + gate + ".weight", {inner, c});
    const size_t w3 = weight(expert + up + ".weight", {inner, c});
    if (e == 0) idx_.up_first = w1;
    idx_.up_last = w3;
  }
  for (int64_t e = 0; e < config_.num_experts; ++e) {
    const size_t w2 = weight("experts." + std::to_string(e) + "." + down + ".weight", {c, inner});
    if (e == 0) idx_.down_weight = w2;
    idx_.down_last = w2;
  }
}

// `dtype`: the table's dtype - f32 for 16-bit activations (the rotation is computed in f32
// and only its result is stored in 16 bits), else the activations' own.
const RopeTable& TransformerBlock::rope_for(backend::Backend& backend, int64_t seq_len,
                                            DType dtype) {
  if (!rope_ || rope_->seq_len != seq_len || rope_->cos.dtype() != dtype) {
    rope_ = build_rope_table(backend, seq_len, config_.head_dim, config_.rope_theta, dtype);
  }
  return *rope_;
}

RopeTable TransformerBlock::rope_rows(backend::Backend& backend, int64_t first, int64_t seq_len,
                                      DType dtype, int64_t table_len) {
  ZERO_CHECK(table_len >= first + seq_len, "a rotary table of " << table_len << " rows for "
                                               << "positions up to " << first + seq_len - 1);
  const RopeTable& table = rope_for(backend, table_len, dtype);
  if (first == 0 && table_len == seq_len) return table;
  const int64_t half = table.cos.size(1);
  return RopeTable{seq_len, table.cos.view(first * half, {seq_len, half}),
                   table.sin.view(first * half, {seq_len, half})};
}

namespace {
// Whether this step's sequences are split over a sequence-parallel group (Ulysses).
bool sequence_split(const StepContext& ctx) {
  return ctx.sequence_group != nullptr && ctx.sequence_group->world_size() > 1;
}
}  // namespace

comm::Comm* TransformerBlock::tensor_group(const StepContext& ctx) const {
  // With Ulysses too, the sequence group exchanges this rank's heads (config_ holds the tensor
  // part's heads, which Ulysses splits further: heads / (tp * sp) per rank).
  return checked_tensor_group(ctx.tensor_group, tp_, name());
}

std::vector<Tensor> TransformerBlock::replicated_kv_grads() {
  // Llama-family blocks declare q, k, v adjacently, so k | v is one contiguous range.
  const int64_t c = config_.hidden_size;
  std::vector<Tensor> out{fused_grad(idx_.qkv_first + 1, idx_.qkv_last, {2 * config_.kv_dim() * c})};
  if (config_.qkv_bias) {
    out.push_back(fused_grad(idx_.qkv_bias_first + 1, idx_.qkv_bias_last, {2 * config_.kv_dim()}));
  }
  return out;
}

void TransformerBlock::sum_replicated_kv_grads(backend::Backend& be, comm::Comm& group,
                                               const std::vector<Tensor>& before) {
  if (kv_replica_parent_ != &group) {
    // Replicas of one key/value part are consecutive ranks (tensor_parallel_heads).
    kv_replica_group_ = group.split(static_cast<int>(tp_.rank / tp_heads_.kv_replicas),
                                    static_cast<int>(tp_.rank));
    kv_replica_parent_ = &group;
  }
  std::vector<Tensor> grads = replicated_kv_grads();
  for (size_t i = 0; i < grads.size(); ++i) {
    // grad = before + (this rank's new part summed over the replicas).
    be.add(grads[i], before[i], -1.0);
    kv_replica_group_->all_reduce(grads[i], comm::ReduceOp::kSum);
    be.add(grads[i], before[i], 1.0);
  }
}

Tensor TransformerBlock::head_view(const Tensor& fused, int64_t batch, int64_t seq_len,
                                   int64_t column, int64_t heads) const {
  const int64_t row = fused.size(1);
  const int64_t d = config_.head_dim;
  return Tensor(fused.storage(), fused.dtype(), {batch, seq_len, heads, d},
                {seq_len * row, row, d, 1}, fused.offset() + column);
}

MlpTensors TransformerBlock::mlp_tensors(bool grads) {
  auto one = [&](size_t i) { return grads ? grad(i) : param(i); };
  auto fused = [&](size_t first, size_t last, const Shape& shape) {
    return grads ? fused_grad(first, last, shape) : fused_param(first, last, shape);
  };
  const int64_t c = config_.hidden_size;
  const int64_t inner = config_.intermediate_size;
  // Experts stack along the rows: [E * up_width, C] and [E * C, inner].
  const int64_t experts = config_.is_moe() ? config_.num_experts : 1;
  const int64_t up_width = (config_.mlp == MlpKind::kSwiGlu ? 2 : 1) * inner;
  MlpTensors t;
  t.norm_weight = one(idx_.norm2_weight);
  if (mlp_.norm_has_bias()) t.norm_bias = one(idx_.norm2_bias);
  t.up = fused(idx_.up_first, idx_.up_last, {experts * up_width, c});
  if (config_.mlp_bias) {
    t.up_bias = fused(idx_.up_bias_first, idx_.up_bias_last, {up_width});
    t.down_bias = one(idx_.down_bias);
  }
  if (config_.is_moe()) {
    t.router = one(idx_.router);
    t.down = fused(idx_.down_weight, idx_.down_last, {experts * c, inner});
  } else {
    t.down = one(idx_.down_weight);
  }
  return t;
}

MlpTensors TransformerBlock::mlp_params() { return mlp_tensors(false); }
MlpTensors TransformerBlock::mlp_grads() { return mlp_tensors(true); }

void TransformerBlock::cached_attention(StepContext& ctx, Tensor& attn_heads, const Tensor& q,
                                        const Tensor& k, const Tensor& v, double scale) {
  if (ctx.training || sequence_split(ctx) || tp_.enabled()) {
    throw UnsupportedError(name() + ": a key/value cache serves inference on whole blocks, not "
                           "training, sequence parallelism or tensor parallelism");
  }
  KvCache& cache = *ctx.kv_cache;
  ZERO_CHECK(ctx.sequence_offset == cache.length(),
             "a step at position " << ctx.sequence_offset << " with " << cache.length()
                                   << " positions cached");
  auto& be = ctx.backend;
  be.kv_cache_write(cache.keys(layer_index_), k, cache.length());
  be.kv_cache_write(cache.values(layer_index_), v, cache.length());
  be.attention_forward_cached(attn_heads, q, cache.keys(layer_index_), cache.values(layer_index_),
                              cache.length() + seq_len_, scale, config_.sliding_window);
}

Tensor TransformerBlock::forward(StepContext& ctx, const Tensor& x) {
  auto& be = ctx.backend;
  batch_ = ctx.batch.batch_size();
  seq_len_ = ctx.batch.seq_len();
  const int64_t rows = batch_ * seq_len_;
  const int64_t c = config_.hidden_size;
  const int64_t h = config_.num_heads;
  const int64_t kvh = config_.num_kv_heads;
  const int64_t d = config_.head_dim;
  const int64_t qkv_width = config_.q_dim() + 2 * config_.kv_dim();
  const DType dt = x.dtype();
  const auto act = MemoryCategory::kActivations;
  comm::Comm* tp_group = tensor_group(ctx);

  Tensor norm1_bias = norm1_.has_bias() ? param(idx_.norm1_bias) : Tensor();
  Tensor h1 = norm1_.forward(be, x, param(idx_.norm1_weight),
                             norm1_.has_bias() ? &norm1_bias : nullptr, ctx.training);

  Tensor qkv = be.empty({rows, qkv_width}, dt, act);
  Tensor w_qkv = fused_param(idx_.qkv_first, idx_.qkv_last, {qkv_width, c});
  Tensor b_qkv = config_.qkv_bias ? fused_param(idx_.qkv_bias_first, idx_.qkv_bias_last, {qkv_width})
                                  : Tensor();
  be.linear_forward(qkv, h1, w_qkv, config_.qkv_bias ? &b_qkv : nullptr);
  Tensor qkv_raw, qk_rstd;
  if (config_.qk_norm) {
    // Qwen3: every query and key head RMS-normalised before the rotation; value heads copied.
    qkv_raw = qkv;
    qkv = be.empty({rows, qkv_width}, dt, act);
    qk_rstd = be.empty({rows, h + kvh}, backend::stats_dtype(dt), act);
    be.qk_rmsnorm_forward(qkv, qk_rstd, qkv_raw, param(idx_.q_norm), param(idx_.k_norm), h, kvh,
                          config_.norm_eps);
  }
  Tensor q = head_view(qkv, batch_, seq_len_, 0, h);
  Tensor k = head_view(qkv, batch_, seq_len_, config_.q_dim(), kvh);
  Tensor v = head_view(qkv, batch_, seq_len_, config_.q_dim() + config_.kv_dim(), kvh);
  if (!config_.learned_positions) {
    const int64_t table_len = ctx.kv_cache != nullptr ? ctx.kv_cache->capacity()
                                                      : ctx.sequence_offset + seq_len_;
    const RopeTable rope =
        rope_rows(be, ctx.sequence_offset, seq_len_, backend::stats_dtype(dt), table_len);
    // q's and k's heads sit side by side in each qkv row: one launch rotates both.
    Tensor qk = head_view(qkv, batch_, seq_len_, 0, h + kvh);
    be.rope_apply(qk, rope.cos, rope.sin, false);
  }
  Tensor attn = be.empty({rows, config_.q_dim()}, dt, act);
  Tensor attn_heads = attn.reshape({batch_, seq_len_, h, d});
  Tensor lse;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (ctx.kv_cache != nullptr) {
    cached_attention(ctx, attn_heads, q, k, v, scale);
  } else if (sequence_split(ctx)) {
    // Ulysses: attention over the whole sequence with this rank's share of the heads.
    ulysses_.forward(be, *ctx.sequence_group, attn, qkv, batch_, h, kvh, d, scale,
                     config_.sliding_window, ctx.training);
  } else {
    lse = be.empty({batch_, h, seq_len_}, backend::stats_dtype(dt), act);
    be.attention_forward(attn_heads, lse, q, k, v, scale, config_.sliding_window);
  }

  Tensor x1 = be.empty({rows, c}, dt, act);
  Tensor out_bias = config_.attn_out_bias ? param(idx_.out_bias) : Tensor();
  // Row-parallel: each rank's heads give a partial sum; the bias is added once.
  const bool out_bias_here = config_.attn_out_bias && adds_row_parallel_bias(tp_group);
  be.linear_forward(x1, attn, param(idx_.out_weight), out_bias_here ? &out_bias : nullptr);
  tensor_parallel_all_reduce(tp_group, x1);

  const int64_t mlp_shards = std::min(
      rows, resolve_mlp_shards(ctx.sequence_tiling.mlp_shards, seq_len_, config_.hidden_size));
  mlp_.set_tensor_group(tp_group);
  mlp_.set_router_balance(ctx.router_balance, ctx.loss_grad);
  Tensor y;
  if (mlp_shards <= 1) {
    // The residual add and the MLP's norm in one op (x1 becomes x1 + x).
    y = mlp_.forward_after_residual(be, x1, x, mlp_params(), ctx.training);
  } else {
    be.add(x1, x, 1.0);
    y = mlp_.forward(be, x1, mlp_params(), mlp_shards, ctx.training);
  }

  if (ctx.training) {
    x_ = x;
    h1_ = h1;
    qkv_ = qkv;
    attn_ = attn;
    lse_ = lse;
    qkv_raw_ = qkv_raw;
    qk_rstd_ = qk_rstd;
  }
  return y;
}

Tensor TransformerBlock::backward(StepContext& ctx, const Tensor& dy) {
  ZERO_CHECK(x_.defined(), "backward() of " << name() << " without a training forward()");
  auto& be = ctx.backend;
  const int64_t rows = batch_ * seq_len_;
  const int64_t c = config_.hidden_size;
  const int64_t h = config_.num_heads;
  const int64_t kvh = config_.num_kv_heads;
  const int64_t d = config_.head_dim;
  const int64_t qkv_width = config_.q_dim() + 2 * config_.kv_dim();
  const DType dt = dy.dtype();
  const auto act = MemoryCategory::kActivations;
  comm::Comm* tp_group = tensor_group(ctx);

  // MLP branch: y = x1 + down(act(up(norm2(x1)))), the residual included.
  MlpTensors mlp_grad = mlp_grads();
  mlp_.set_tensor_group(tp_group);
  mlp_.set_router_balance(ctx.router_balance, ctx.loss_grad);
  Tensor d_x1 = mlp_.backward(be, dy, mlp_params(), mlp_grad);

  // Attention branch: x1 = x + out(attention(rope(qkv(norm1(x))))).
  Tensor d_attn = be.empty({rows, config_.q_dim()}, dt, act);
  Tensor g_out_bias = config_.attn_out_bias ? grad(idx_.out_bias) : Tensor();
  be.linear_backward(&d_attn, grad(idx_.out_weight), config_.attn_out_bias ? &g_out_bias : nullptr,
                     d_x1, attn_, param(idx_.out_weight));
  Tensor d_qkv = be.empty({rows, qkv_width}, dt, act);
  Tensor dq = head_view(d_qkv, batch_, seq_len_, 0, h);
  Tensor dk = head_view(d_qkv, batch_, seq_len_, config_.q_dim(), kvh);
  Tensor dv = head_view(d_qkv, batch_, seq_len_, config_.q_dim() + config_.kv_dim(), kvh);
  Tensor q = head_view(qkv_, batch_, seq_len_, 0, h);
  Tensor k = head_view(qkv_, batch_, seq_len_, config_.q_dim(), kvh);
  Tensor v = head_view(qkv_, batch_, seq_len_, config_.q_dim() + config_.kv_dim(), kvh);
  Tensor attn_heads = attn_.reshape({batch_, seq_len_, h, d});
  Tensor d_attn_heads = d_attn.reshape({batch_, seq_len_, h, d});
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (sequence_split(ctx)) {
    ulysses_.backward(be, *ctx.sequence_group, d_qkv, d_attn);
  } else {
    be.attention_backward(dq, dk, dv, d_attn_heads, q, k, v, attn_heads, lse_, scale,
                          config_.sliding_window);
  }
  d_attn = Tensor();
  if (!config_.learned_positions) {
    const RopeTable rope = rope_rows(be, ctx.sequence_offset, seq_len_, backend::stats_dtype(dt),
                                     ctx.sequence_offset + seq_len_);
    Tensor dqk = head_view(d_qkv, batch_, seq_len_, 0, h + kvh);  // dq's and dk's heads
    be.rope_apply(dqk, rope.cos, rope.sin, true);
  }
  if (config_.qk_norm) d_qkv = qk_norm_backward(be, tp_group, d_qkv);
  Tensor d_h1 = be.empty({rows, c}, dt, act);
  Tensor w_qkv = fused_param(idx_.qkv_first, idx_.qkv_last, {qkv_width, c});
  Tensor g_qkv = fused_grad(idx_.qkv_first, idx_.qkv_last, {qkv_width, c});
  Tensor g_qkv_bias = config_.qkv_bias
                          ? fused_grad(idx_.qkv_bias_first, idx_.qkv_bias_last, {qkv_width})
                          : Tensor();
  // Key/value heads held by several tensor-parallel ranks: each adds the part of their gradient
  // from its own query heads; the replicas sum what this backward adds.
  std::vector<Tensor> kv_before;
  if (tp_group != nullptr && tp_heads_.kv_replicas > 1) {
    for (const Tensor& g : replicated_kv_grads()) {
      kv_before.push_back(be.empty(g.shape(), g.dtype(), MemoryCategory::kWorkspace));
      be.copy(kv_before.back(), g);
    }
  }
  be.linear_backward(&d_h1, g_qkv, config_.qkv_bias ? &g_qkv_bias : nullptr, d_qkv, h1_, w_qkv);
  d_qkv = Tensor();
  if (!kv_before.empty()) sum_replicated_kv_grads(be, *tp_group, kv_before);
  // Column-parallel input gradient: each rank's heads give a partial sum (Megatron's "f").
  tensor_parallel_all_reduce(tp_group, d_h1);
  Tensor g_norm1_bias = norm1_.has_bias() ? grad(idx_.norm1_bias) : Tensor();
  // The residual path's gradient d_x1 added in the norm's pass.
  Tensor dx = norm1_.backward(be, d_h1, x_, param(idx_.norm1_weight), grad(idx_.norm1_weight),
                              norm1_.has_bias() ? &g_norm1_bias : nullptr, &d_x1);
  release_activations();
  return dx;
}

Tensor TransformerBlock::qk_norm_backward(backend::Backend& be, comm::Comm* tp_group,
                                          const Tensor& d_qkv) {
  const int64_t h = config_.num_heads;
  const int64_t kvh = config_.num_kv_heads;
  Tensor d_raw = be.empty(d_qkv.shape(), d_qkv.dtype(), MemoryCategory::kActivations);
  Tensor g_q = grad(idx_.q_norm);
  Tensor g_k = grad(idx_.k_norm);
  if (tp_group == nullptr) {
    be.qk_rmsnorm_backward(d_raw, g_q, g_k, d_qkv, qkv_raw_, param(idx_.q_norm),
                           param(idx_.k_norm), qk_rstd_, h, kvh);
    return d_raw;
  }
  // Each tensor-parallel rank's heads give part of the weights' gradients: this backward's
  // share is made apart, summed over the group in one all-reduce, then accumulated.
  const int64_t d = config_.head_dim;
  Tensor shares = be.empty({2 * d}, g_q.dtype(), MemoryCategory::kWorkspace);
  be.fill(shares, 0.0);
  Tensor share_q = shares.view(0, {d});
  Tensor share_k = shares.view(d, {d});
  be.qk_rmsnorm_backward(d_raw, share_q, share_k, d_qkv, qkv_raw_, param(idx_.q_norm),
                         param(idx_.k_norm), qk_rstd_, h, kvh);
  tp_group->all_reduce(shares, comm::ReduceOp::kSum);
  be.add(g_q, share_q, 1.0);
  be.add(g_k, share_k, 1.0);
  return d_raw;
}

void TransformerBlock::release_activations() {
  qkv_raw_ = qk_rstd_ = Tensor();
  x_ = h1_ = qkv_ = attn_ = lse_ = Tensor();
  ulysses_.release();
  norm1_.release();
  mlp_.release();
}

}  // namespace zero::model
