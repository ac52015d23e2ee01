#include "model/tiled_mlp.h"

#include <utility>

#include "core/check.h"
#include "model/tensor_parallel.h"

namespace zero::model {
namespace {

const Tensor* optional(const Tensor& t) { return t.defined() ? &t : nullptr; }
Tensor* optional(Tensor& t) { return t.defined() ? &t : nullptr; }

}  // namespace

TiledMlp::TiledMlp(const TransformerConfig& config)
    : inner_(config.intermediate_size),
      swiglu_(config.mlp == MlpKind::kSwiGlu),
      norm_(config.norm, config.norm_eps) {
  if (config.is_moe()) {
    experts_.emplace(config.num_experts, config.experts_per_token, config.intermediate_size,
                     config.normalize_expert_weights);
  }
}

void TiledMlp::shard_forward(backend::Backend& be, const Tensor& x1, Tensor* y,
                             const MlpTensors& p, bool save) {
  const Tensor h2 = norm_.forward(be, x1, p.norm_weight, optional(p.norm_bias), save);
  shard_after_norm(be, x1, h2, y, p, save);
}

void TiledMlp::shard_after_norm(backend::Backend& be, const Tensor& x1, const Tensor& h2,
                                Tensor* y, const MlpTensors& p, bool save) {
  if (experts_) {
    // Tensor parallelism never reaches experts (tensor_parallel_block_config refuses them).
    experts_->forward(be, h2, p.router, p.up, p.down, y, save, balance_);
    if (y != nullptr) be.add(*y, x1, 1.0);  // the residual
    if (save) {
      x1_ = x1;
      h2_ = h2;
    }
    return;
  }
  const int64_t rows = x1.size(0);
  const DType dt = x1.dtype();
  const auto act = MemoryCategory::kActivations;
  Tensor up = be.empty({rows, p.up.size(0)}, dt, act);
  Tensor activated = be.empty({rows, inner_}, dt, act);
  if (swiglu_) {
    be.linear_forward(up, h2, p.up, optional(p.up_bias));
    be.swiglu_forward(activated, up);
  } else {
    be.linear_gelu_forward(activated, up, h2, p.up, optional(p.up_bias));
  }
  if (y != nullptr) {
    const bool bias_here = adds_row_parallel_bias(tensor_group_);
    be.linear_forward(*y, activated, p.down, bias_here ? optional(p.down_bias) : nullptr);
    tensor_parallel_all_reduce(tensor_group_, *y);  // row-parallel partial sums
    be.add(*y, x1, 1.0);  // the residual
  }
  if (save) {
    x1_ = x1;
    h2_ = h2;
    up_ = up;
    act_ = activated;
  }
}

Tensor TiledMlp::shard_backward(backend::Backend& be, const Tensor& dy, const MlpTensors& p,
                                MlpTensors& g) {
  const int64_t rows = dy.size(0);
  const DType dt = dy.dtype();
  const auto act = MemoryCategory::kActivations;
  if (experts_) {
    ZERO_CHECK(h2_.defined(), "MLP backward without a saved forward");
    Tensor d_h2 = experts_->backward(be, dy, p.router, p.up, p.down, g.router, g.up, g.down,
                                     balance_, loss_grad_);
    h2_ = Tensor();
    Tensor d_x1 = norm_.backward(be, d_h2, x1_, p.norm_weight, g.norm_weight,
                                 optional(g.norm_bias), &dy);
    x1_ = Tensor();
    return d_x1;
  }
  ZERO_CHECK(act_.defined(), "MLP backward without a saved forward");
  Tensor d_up;
  if (swiglu_) {
    Tensor d_act = be.empty({rows, inner_}, dt, act);
    be.linear_backward(&d_act, g.down, optional(g.down_bias), dy, act_, p.down);
    act_ = Tensor();
    d_up = be.empty(up_.shape(), dt, act);
    be.swiglu_backward(d_up, d_act, up_);
  } else {
    // act_ moves in, so the op frees it once read (before d_up exists, as in the swiglu branch).
    d_up = be.linear_backward_gelu(g.down, optional(g.down_bias), dy, std::move(act_), p.down,
                                   up_);
  }
  up_ = Tensor();
  Tensor d_h2 = be.empty({rows, x1_.size(1)}, dt, act);
  be.linear_backward(&d_h2, g.up, optional(g.up_bias), d_up, h2_, p.up);
  d_up = Tensor();
  h2_ = Tensor();
  tensor_parallel_all_reduce(tensor_group_, d_h2);  // column-parallel input gradient
  // The residual path's gradient dy added in the norm's pass.
  Tensor d_x1 = norm_.backward(be, d_h2, x1_, p.norm_weight, g.norm_weight, optional(g.norm_bias),
                               &dy);
  x1_ = Tensor();
  return d_x1;
}

Tensor TiledMlp::forward(backend::Backend& be, const Tensor& x1, const MlpTensors& params,
                         int64_t shards, bool training) {
  return tiles_.forward(be, x1, shards, x1.size(1), x1.dtype(), training,
                        [&](const Tensor& x, Tensor* y, bool save) {
                          shard_forward(be, x, y, params, save);
                        });
}

Tensor TiledMlp::forward_after_residual(backend::Backend& be, Tensor& x1, const Tensor& residual,
                                        const MlpTensors& params, bool training) {
  const Tensor h2 =
      norm_.forward_after_add(be, x1, residual, params.norm_weight, optional(params.norm_bias),
                              training);
  // One shard: the tiler runs it once and, training, keeps what it saves (no recompute).
  return tiles_.forward(be, x1, 1, x1.size(1), x1.dtype(), training,
                        [&](const Tensor& x, Tensor* y, bool save) {
                          shard_after_norm(be, x, h2, y, params, save);
                        });
}

Tensor TiledMlp::backward(backend::Backend& be, const Tensor& dy, const MlpTensors& params,
                          MlpTensors& grads) {
  Tensor dx = tiles_.backward(
      be, dy,
      [&](const Tensor& x, Tensor* y, bool save) { shard_forward(be, x, y, params, save); },
      [&](const Tensor& dy_shard) { return shard_backward(be, dy_shard, params, grads); });
  release();
  return dx;
}

void TiledMlp::release() {
  x1_ = h2_ = up_ = act_ = Tensor();
  if (experts_) experts_->release();
  norm_.release();
  tiles_.release();
}

}  // namespace zero::model
