#include "model/tiled_logits_loss.h"

#include <cmath>
#include <cstddef>

#include "core/check.h"
#include "model/sequence_tiling.h"
#include "model/vocab_parallel.h"

namespace zero::model {

void TiledFusedLogitsLoss::forward(backend::Backend& be, const Inputs& in, int64_t shards,
                                   bool training, Tensor& losses) {
  const Tensor& h = *in.h;
  const Tensor& weight = *in.weight;
  const int64_t rows = h.size(0);
  const int64_t vocab = weight.size(0);
  const DType dt = h.dtype();
  const auto act = MemoryCategory::kActivations;
  ZERO_CHECK(in.targets->numel() == rows && losses.numel() == rows,
             "tiled logits loss: targets " << in.targets->describe() << ", losses "
                                           << losses.describe() << " for " << rows << " rows");
  release();
  ZERO_CHECK(in.forward_loss_grad != 0.0 && std::isfinite(in.forward_loss_grad),
             "tiled logits loss: forward_loss_grad must be finite and non-zero, got "
                 << in.forward_loss_grad);
  forward_loss_grad_ = in.forward_loss_grad;
  if (training) {
    dh_ = be.empty(h.shape(), dt, act);
    dweight_ = be.zeros(weight.shape(), backend::stats_dtype(weight.dtype()), act);
  }
  const Tensor targets = in.targets->flatten();
  for (const RowShard& s : split_rows(rows, shards)) {
    const Tensor h_shard = h.slice_rows(s.begin, s.end);
    Tensor logits = be.empty({s.rows(), vocab}, dt, act);
    be.linear_forward(logits, h_shard, weight, nullptr);
    if (in.capture_logits != nullptr) {
      auto* base = static_cast<std::byte*>(in.capture_logits->raw_data());
      be.copy_to_host(base + static_cast<size_t>(s.begin * vocab) * dtype_size(dt), logits);
    }
    Tensor shard_losses = losses.slice_rows(s.begin, s.end);
    vocab_parallel_cross_entropy(be, in.tensor_group, shard_losses, training ? &logits : nullptr,
                                 logits, targets.slice_rows(s.begin, s.end), in.first_column,
                                 in.ignore_index, in.grad_scale * in.forward_loss_grad);
    if (training) {
      // logits now hold dlogits: fold them into dh and the weight gradient, then drop them.
      Tensor dh_shard = dh_.slice_rows(s.begin, s.end);
      be.linear_backward(&dh_shard, dweight_, nullptr, logits, h_shard, weight);
    }
  }
  // Each rank's vocabulary columns give a partial sum of dh.
  if (training) tensor_parallel_all_reduce(in.tensor_group, dh_);
}

Tensor TiledFusedLogitsLoss::backward(backend::Backend& be, double loss_grad,
                                      Tensor& weight_grad) {
  ZERO_CHECK(dh_.defined(), "tiled logits loss backward without a training forward");
  if (weight_grad.dtype() != dweight_.dtype()) {
    // A 16-bit gradient buffer (the accumulator is f32): rounded once, as a single product is.
    Tensor converted =
        be.empty(weight_grad.shape(), weight_grad.dtype(), MemoryCategory::kActivations);
    be.copy(converted, dweight_);
    dweight_ = converted;
  }
  const double ratio = loss_grad / forward_loss_grad_;
  be.add(weight_grad, dweight_, ratio);
  Tensor dh = dh_;
  if (ratio != 1.0) be.scale(dh, ratio);
  release();
  return dh;
}

}  // namespace zero::model
