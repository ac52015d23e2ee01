#include "model/transformer_block.h"

#include <cmath>

#include "comm/comm.h"
#include "core/check.h"

namespace zero::model {

TransformerBlock::TransformerBlock(const TransformerConfig& config, int64_t layer_index)
    : Unit("block" + std::to_string(layer_index)),
      config_(config),
      norm1_(config.norm, config.norm_eps),
      mlp_(config) {
  config_.source_json = nlohmann::json();  // not needed per block
  if (config.family == ModelFamily::kGpt2) {
    declare_gpt2_parameters("transformer.h." + std::to_string(layer_index) + ".");
  } else {
    declare_llama_parameters("model.layers." + std::to_string(layer_index) + ".");
  }
}

void TransformerBlock::declare_gpt2_parameters(const std::string& p) {
  const int64_t c = config_.hidden_size;
  const int64_t inner = config_.intermediate_size;
  const int64_t qkv = config_.q_dim() + 2 * config_.kv_dim();
  auto weight = [&](const std::string& name, Shape shape) {
    return add_parameter({p + name, std::move(shape), true, HfLayout::kTransposed});
  };
  auto vector = [&](const std::string& name, int64_t n) {
    return add_parameter({p + name, {n}, false, HfLayout::kSame});
  };
  idx_.norm1_weight = vector("ln_1.weight", c);
  idx_.norm1_bias = vector("ln_1.bias", c);
  idx_.qkv_first = idx_.qkv_last = weight("attn.c_attn.weight", {qkv, c});
  idx_.qkv_bias_first = idx_.qkv_bias_last = vector("attn.c_attn.bias", qkv);
  idx_.out_weight = weight("attn.c_proj.weight", {c, config_.q_dim()});
  idx_.out_bias = vector("attn.c_proj.bias", c);
  idx_.norm2_weight = vector("ln_2.weight", c);
  idx_.norm2_bias = vector("ln_2.bias", c);
  idx_.up_first = idx_.up_last = weight("mlp.c_fc.weight", {inner, c});
  idx_.up_bias_first = idx_.up_bias_last = vector("mlp.c_fc.bias", inner);
  idx_.down_weight = weight("mlp.c_proj.weight", {c, inner});
  idx_.down_bias = vector("mlp.c_proj.bias", c);
}

void TransformerBlock::declare_llama_parameters(const std::string& p) {
  const int64_t c = config_.hidden_size;
  const int64_t inner = config_.intermediate_size;
  auto weight = [&](const std::string& name, Shape shape) {
    return add_parameter({p + name, std::move(shape), true, HfLayout::kSame});
  };
  auto vector = [&](const std::string& name, int64_t n) {
    return add_parameter({p + name, {n}, false, HfLayout::kSame});
  };
  idx_.norm1_weight = vector("input_layernorm.weight", c);
  idx_.qkv_first = weight("self_attn.q_proj.weight", {config_.q_dim(), c});
  weight("self_attn.k_proj.weight", {config_.kv_dim(), c});
  idx_.qkv_last = weight("self_attn.v_proj.weight", {config_.kv_dim(), c});
  if (config_.qkv_bias) {
    idx_.qkv_bias_first = vector("self_attn.q_proj.bias", config_.q_dim());
    vector("self_attn.k_proj.bias", config_.kv_dim());
    idx_.qkv_bias_last = vector("self_attn.v_proj.bias", config_.kv_dim());
  }
  idx_.out_weight = weight("self_attn.o_proj.weight", {c, config_.q_dim()});
  if (config_.attn_out_bias) idx_.out_bias = vector("self_attn.o_proj.bias", c);
  idx_.norm2_weight = vector("post_attention_layernorm.weight", c);
  idx_.up_first = weight("mlp.gate_proj.weight", {inner, c});
  idx_.up_last = weight("mlp.up_proj.weight", {inner, c});
  if (config_.mlp_bias) {
    idx_.up_bias_first = vector("mlp.gate_proj.bias", inner);
    idx_.up_bias_last = vector("mlp.up_proj.bias", inner);
  }
  idx_.down_weight = weight("mlp.down_proj.weight", {c, inner});
  if (config_.mlp_bias) idx_.down_bias = vector("mlp.down_proj.bias", c);
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
                                      DType dtype) {
  const RopeTable& table = rope_for(backend, first + seq_len, dtype);
  if (first == 0) return table;
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

Tensor TransformerBlock::head_view(const Tensor& fused, int64_t batch, int64_t seq_len,
                                   int64_t column, int64_t heads) const {
  const int64_t row = fused.size(1);
  const int64_t d = config_.head_dim;
  return Tensor(fused.storage(), fused.dtype(), {batch, seq_len, heads, d},
                {seq_len * row, row, d, 1}, fused.offset() + column);
}

MlpTensors TransformerBlock::mlp_params() {
  const int64_t up_width = (config_.mlp == MlpKind::kSwiGlu ? 2 : 1) * config_.intermediate_size;
  MlpTensors t;
  t.norm_weight = param(idx_.norm2_weight);
  if (mlp_.norm_has_bias()) t.norm_bias = param(idx_.norm2_bias);
  t.up = fused_param(idx_.up_first, idx_.up_last, {up_width, config_.hidden_size});
  if (config_.mlp_bias) {
    t.up_bias = fused_param(idx_.up_bias_first, idx_.up_bias_last, {up_width});
    t.down_bias = param(idx_.down_bias);
  }
  t.down = param(idx_.down_weight);
  return t;
}

MlpTensors TransformerBlock::mlp_grads() {
  const int64_t up_width = (config_.mlp == MlpKind::kSwiGlu ? 2 : 1) * config_.intermediate_size;
  MlpTensors t;
  t.norm_weight = grad(idx_.norm2_weight);
  if (mlp_.norm_has_bias()) t.norm_bias = grad(idx_.norm2_bias);
  t.up = fused_grad(idx_.up_first, idx_.up_last, {up_width, config_.hidden_size});
  if (config_.mlp_bias) {
    t.up_bias = fused_grad(idx_.up_bias_first, idx_.up_bias_last, {up_width});
    t.down_bias = grad(idx_.down_bias);
  }
  t.down = grad(idx_.down_weight);
  return t;
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

  Tensor norm1_bias = norm1_.has_bias() ? param(idx_.norm1_bias) : Tensor();
  Tensor h1 = norm1_.forward(be, x, param(idx_.norm1_weight),
                             norm1_.has_bias() ? &norm1_bias : nullptr, ctx.training);

  Tensor qkv = be.empty({rows, qkv_width}, dt, act);
  Tensor w_qkv = fused_param(idx_.qkv_first, idx_.qkv_last, {qkv_width, c});
  Tensor b_qkv = config_.qkv_bias ? fused_param(idx_.qkv_bias_first, idx_.qkv_bias_last, {qkv_width})
                                  : Tensor();
  be.linear_forward(qkv, h1, w_qkv, config_.qkv_bias ? &b_qkv : nullptr);
  Tensor q = head_view(qkv, batch_, seq_len_, 0, h);
  Tensor k = head_view(qkv, batch_, seq_len_, config_.q_dim(), kvh);
  Tensor v = head_view(qkv, batch_, seq_len_, config_.q_dim() + config_.kv_dim(), kvh);
  if (!config_.learned_positions) {
    const RopeTable rope = rope_rows(be, ctx.sequence_offset, seq_len_, backend::stats_dtype(dt));
    be.rope_apply(q, rope.cos, rope.sin, false);
    be.rope_apply(k, rope.cos, rope.sin, false);
  }
  Tensor attn = be.empty({rows, config_.q_dim()}, dt, act);
  Tensor attn_heads = attn.reshape({batch_, seq_len_, h, d});
  Tensor lse;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (sequence_split(ctx)) {
    // Ulysses: attention over the whole sequence with this rank's share of the heads.
    ulysses_.forward(be, *ctx.sequence_group, attn, qkv, batch_, h, kvh, d, scale,
                     config_.sliding_window, ctx.training);
  } else {
    lse = be.empty({batch_, h, seq_len_}, backend::stats_dtype(dt), act);
    be.attention_forward(attn_heads, lse, q, k, v, scale, config_.sliding_window);
  }

  Tensor x1 = be.empty({rows, c}, dt, act);
  Tensor out_bias = config_.attn_out_bias ? param(idx_.out_bias) : Tensor();
  be.linear_forward(x1, attn, param(idx_.out_weight), config_.attn_out_bias ? &out_bias : nullptr);
  be.add(x1, x, 1.0);

  const int64_t mlp_shards =
      resolve_mlp_shards(ctx.sequence_tiling.mlp_shards, seq_len_, config_.hidden_size);
  Tensor y = mlp_.forward(be, x1, mlp_params(), mlp_shards, ctx.training);

  if (ctx.training) {
    x_ = x;
    h1_ = h1;
    qkv_ = qkv;
    attn_ = attn;
    lse_ = lse;
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

  // MLP branch: y = x1 + down(act(up(norm2(x1)))), the residual included.
  MlpTensors mlp_grad = mlp_grads();
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
    const RopeTable rope = rope_rows(be, ctx.sequence_offset, seq_len_, backend::stats_dtype(dt));
    be.rope_apply(dq, rope.cos, rope.sin, true);
    be.rope_apply(dk, rope.cos, rope.sin, true);
  }
  Tensor d_h1 = be.empty({rows, c}, dt, act);
  Tensor w_qkv = fused_param(idx_.qkv_first, idx_.qkv_last, {qkv_width, c});
  Tensor g_qkv = fused_grad(idx_.qkv_first, idx_.qkv_last, {qkv_width, c});
  Tensor g_qkv_bias = config_.qkv_bias
                          ? fused_grad(idx_.qkv_bias_first, idx_.qkv_bias_last, {qkv_width})
                          : Tensor();
  be.linear_backward(&d_h1, g_qkv, config_.qkv_bias ? &g_qkv_bias : nullptr, d_qkv, h1_, w_qkv);
  d_qkv = Tensor();
  Tensor g_norm1_bias = norm1_.has_bias() ? grad(idx_.norm1_bias) : Tensor();
  Tensor dx = norm1_.backward(be, d_h1, x_, param(idx_.norm1_weight), grad(idx_.norm1_weight),
                              norm1_.has_bias() ? &g_norm1_bias : nullptr);
  be.add(dx, d_x1, 1.0);
  release_activations();
  return dx;
}

void TransformerBlock::release_activations() {
  x_ = h1_ = qkv_ = attn_ = lse_ = Tensor();
  ulysses_.release();
  norm1_.release();
  mlp_.release();
}

}  // namespace zero::model
