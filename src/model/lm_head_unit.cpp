#include "model/lm_head_unit.h"

#include <algorithm>
#include <vector>

#include "comm/comm.h"
#include "core/check.h"
#include "core/error.h"
#include "model/sequence_tiling.h"
#include "model/vocab_parallel.h"

namespace zero::model {

LmHeadUnit::LmHeadUnit(const TransformerConfig& config, Parameter* tied_embedding,
                       const TensorParallelLayout& tensor_parallel)
    : Unit("lm_head"),
      vocab_size_(config.vocab_size),
      tp_(tensor_parallel),
      columns_(vocab_part(config.vocab_size, tensor_parallel)),
      norm_(config.norm, config.norm_eps),
      tied_embedding_(tied_embedding) {
  const bool gpt2 = config.family == ModelFamily::kGpt2;
  const std::string norm_name = gpt2 ? "transformer.ln_f." : "model.norm.";
  norm_weight_ = add_parameter({norm_name + "weight", {config.hidden_size}, false, HfLayout::kSame});
  if (norm_.has_bias()) {
    norm_bias_ = add_parameter({norm_name + "bias", {config.hidden_size}, false, HfLayout::kSame});
  }
  if (tied_embedding_ == nullptr) {
    ParamSpec head{"lm_head.weight", {columns_.size(), config.hidden_size}, true, HfLayout::kSame};
    if (tp_.enabled()) {
      head.slice = make_balanced_slice(head.shape, 0, vocab_size_, tp_.size, tp_.rank);
    }
    head_index_ = add_parameter(std::move(head));
  } else {
    ZERO_CHECK(tied_embedding_->spec.shape.at(0) == columns_.size(),
               "tied embedding " << tied_embedding_->spec.name << " holds "
                                 << tied_embedding_->spec.shape.at(0) << " rows, the head needs "
                                 << columns_.size());
  }
}

comm::Comm* LmHeadUnit::tensor_group(const StepContext& ctx) const {
  return checked_tensor_group(ctx.tensor_group, tp_, name());
}

std::vector<const Parameter*> LmHeadUnit::borrowed_parameters() const {
  if (tied_embedding_ == nullptr) return {};
  return {tied_embedding_};
}

Tensor& LmHeadUnit::head_weight() {
  return tied_embedding_ != nullptr ? tied_embedding_->value : param(head_index_);
}

Tensor& LmHeadUnit::head_grad() {
  return tied_embedding_ != nullptr ? tied_embedding_->grad : grad(head_index_);
}

Tensor LmHeadUnit::last_position_logits(StepContext& ctx, const Tensor& x) {
  auto& be = ctx.backend;
  if (ctx.training || tp_.enabled()) {
    throw UnsupportedError("the next-token logits serve inference on a whole head, not training "
                           "or tensor parallelism");
  }
  const int64_t batch = ctx.batch.batch_size();
  const int64_t seq_len = ctx.batch.seq_len();
  const int64_t hidden = x.size(1);
  Tensor last = x;
  if (seq_len > 1) {
    // Rows T-1, 2T-1, ... gathered as an embedding lookup with x as the table (the ids are
    // uploaded once per prompt length, a counted copy).
    if (!last_rows_.defined() || last_rows_seq_len_ != seq_len || last_rows_.numel() != batch) {
      Tensor ids = Tensor::zeros_host({batch}, DType::kI64);
      for (int64_t b = 0; b < batch; ++b) ids.data<int64_t>()[b] = (b + 1) * seq_len - 1;
      last_rows_ = be.empty({batch}, DType::kI64, MemoryCategory::kOther);
      be.copy_from_host(last_rows_, ids.raw_data());
      last_rows_seq_len_ = seq_len;
    }
    last = be.empty({batch, hidden}, x.dtype(), MemoryCategory::kActivations);
    be.embedding_forward(last, last_rows_, x, false);
  }
  Tensor bias = norm_.has_bias() ? param(norm_bias_) : Tensor();
  Tensor h = norm_.forward(be, last, param(norm_weight_), norm_.has_bias() ? &bias : nullptr,
                           false);
  Tensor logits = be.empty({batch, vocab_size_}, x.dtype(), MemoryCategory::kActivations);
  be.linear_forward(logits, h, head_weight(), nullptr);
  return logits;
}

Tensor LmHeadUnit::forward(StepContext& ctx, const Tensor& x) {
  if (ctx.kv_cache != nullptr) return last_position_logits(ctx, x);
  auto& be = ctx.backend;
  const int64_t rows = x.size(0);
  const DType dt = x.dtype();
  comm::Comm* group = tensor_group(ctx);
  Tensor bias = norm_.has_bias() ? param(norm_bias_) : Tensor();
  Tensor h = norm_.forward(be, x, param(norm_weight_), norm_.has_bias() ? &bias : nullptr,
                           ctx.training);
  if (group != nullptr && ctx.capture_logits != nullptr) {
    throw UnsupportedError("capturing the logits of a tensor-parallel model is not supported: "
                           "each rank holds only its vocabulary columns");
  }
  if (ctx.capture_logits != nullptr) {
    // An explicit, counted read: tests and evaluation ask for it, training never does.
    *ctx.capture_logits = Tensor::zeros_host({rows, vocab_size_}, dt);
  }
  const Tensor& targets = ctx.device_batch.targets;
  ZERO_CHECK(targets.numel() == rows, "targets " << targets.describe() << " for " << rows << " rows");
  // The mean over valid targets (counted on the host when the batch was uploaded); with none,
  // the loss and its gradient are zero (not NaN).
  const int64_t valid = ctx.device_batch.valid_targets;
  const double grad_scale = valid > 0 ? 1.0 / static_cast<double>(valid) : 0.0;
  // Per-token losses in f32 (f64 for f64 models) even with 16-bit logits, as Hugging Face
  // upcasts the logits for its loss.
  Tensor losses = be.empty({rows}, backend::stats_dtype(dt), MemoryCategory::kActivations);
  const int64_t shards = std::min(
      resolve_logits_shards(ctx.sequence_tiling.logits_shards, ctx.batch.seq_len(), x.size(1),
                            columns_.size()),
      rows);
  Tensor logits;
  if (shards > 1) {
    TiledFusedLogitsLoss::Inputs in;
    in.h = &h;
    in.weight = &head_weight();
    in.targets = &targets;
    in.ignore_index = kIgnoreIndex;
    in.grad_scale = grad_scale;
    in.forward_loss_grad = ctx.loss_grad;
    in.capture_logits = ctx.capture_logits;
    in.tensor_group = group;
    in.first_column = columns_.begin;
    tiled_.forward(be, in, shards, ctx.training, losses);
  } else {
    // Rows padded to the backend's preferred length (16-byte rows on CUDA, so cuBLASLt's fast
    // kernels take both products without pitched copies), used through the [rows, V] view.
    // Tensor parallelism keeps exact rows: the sliced loss ops take contiguous logits.
    const int64_t cols = columns_.size();
    const int64_t pitch = group == nullptr ? be.preferred_row_elements(cols, dt) : cols;
    logits = be.empty({rows, pitch}, dt, MemoryCategory::kActivations);
    if (pitch != cols) logits = logits.narrow(1, 0, cols);
    be.linear_forward(logits, h, head_weight(), nullptr);
    if (ctx.capture_logits != nullptr) be.copy_to_host(ctx.capture_logits->raw_data(), logits);
    vocab_parallel_cross_entropy(be, group, losses, ctx.training ? &logits : nullptr, logits,
                                 targets, columns_.begin, kIgnoreIndex, grad_scale);
  }
  // The mean stays on the device: the engine reads it once per step, with the gradient norm.
  Tensor loss = be.empty({1}, DType::kF64, MemoryCategory::kActivations);
  be.sum(loss, losses, grad_scale, false);

  if (ctx.training) {
    x_ = x;
    if (shards == 1) {
      h_ = h;
      dlogits_ = logits;
    }
  }
  return loss;
}

Tensor LmHeadUnit::backward(StepContext& ctx, const Tensor& /*dy*/) {
  ZERO_CHECK(dlogits_.defined() || tiled_.has_saved(),
             "backward() of " << name() << " without a training forward()");
  auto& be = ctx.backend;
  const double loss_grad = ctx.loss_grad;
  Tensor dh;
  if (tiled_.has_saved()) {
    dh = tiled_.backward(be, loss_grad, head_grad());
  } else {
    if (loss_grad != 1.0) be.scale(dlogits_, loss_grad);
    dh = be.empty(h_.shape(), h_.dtype(), MemoryCategory::kActivations);
    be.linear_backward(&dh, head_grad(), nullptr, dlogits_, h_, head_weight());
    dlogits_ = Tensor();
    // Each rank's vocabulary columns give a partial sum of dh.
    tensor_parallel_all_reduce(tensor_group(ctx), dh);
  }
  Tensor bias_grad = norm_.has_bias() ? grad(norm_bias_) : Tensor();
  Tensor dx = norm_.backward(be, dh, x_, param(norm_weight_), grad(norm_weight_),
                             norm_.has_bias() ? &bias_grad : nullptr);
  release_activations();
  return dx;
}

void LmHeadUnit::release_activations() {
  x_ = h_ = dlogits_ = Tensor();
  tiled_.release();
  norm_.release();
}

}  // namespace zero::model
