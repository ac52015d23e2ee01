// TiledFusedLogitsLoss: the LM head projection + softmax cross-entropy over row shards with the
// backward done inside the forward (ALST's TiledFusedLogitsLoss), so the [rows, V] logits never
// exist in full: one shard's [rows/N, V] logits at a time, overwritten by their gradient, folded
// at once into dh and into the head-weight gradient.
//
// Why the weight gradient goes to an accumulator of the unit's own: under ZeRO stages 2-3 a
// unit's gradient views are bound only just before its backward (sharding/zero_stage.cpp), so
// nothing may write a parameter gradient during forward. The forward accumulates
// sum_shards dlogits^T h into `dweight` [V, C] (the gradient's dtype, kActivations) and keeps
// dh [rows, C], both for the d(objective)/d(loss) the caller expects at forward time
// (`forward_loss_grad`: the Engine knows its fp16 loss scale before the forward, so fp16 dlogits
// are scaled before they are rounded, as in the untiled head); backward() adds
// (loss_grad / forward_loss_grad) * dweight to the head's gradient once and returns dh times
// the same ratio (1 when the caller's expectation held). The accumulator is f32 (f64 for f64
// weights) whatever the weight's storage dtype: summing shards in 16 bits would lose bits the
// untiled head's single product keeps.
//
// Memory: one shard's logits + dh [rows, C] + dweight [V, C]; the untiled head holds [rows, V].
// Evaluation (training == false) computes only the losses.
#pragma once
#include "backend/backend.h"

namespace zero::comm {
class Comm;
}  // namespace zero::comm

namespace zero::model {

class TiledFusedLogitsLoss {
 public:
  struct Inputs {
    const Tensor* h = nullptr;        // [rows, C], the normed hidden state
    const Tensor* weight = nullptr;   // [V, C], the head (or tied embedding) weight
    const Tensor* targets = nullptr;  // [rows] i32/i64, ignore_index where ignored
    int64_t ignore_index = -100;
    double grad_scale = 1.0;  // d loss / d per-token loss: 1 / valid targets ("mean"), 1 ("sum")
    double forward_loss_grad = 1.0;  // the d(objective)/d(loss) expected at backward
    Tensor* capture_logits = nullptr;  // host [rows, V] to copy each shard's logits into, or null
    // Tensor parallelism: `weight` holds vocabulary rows [first_column, ...) and the loss is
    // combined over this group (model/vocab_parallel.h); dh is all-reduced once. Not owned.
    comm::Comm* tensor_group = nullptr;
    int64_t first_column = 0;
  };

  // Per-token losses into `losses` [rows] over `shards` row shards (1 <= shards <= rows); with
  // `training` also dh and the weight-gradient accumulator (scaled by forward_loss_grad).
  void forward(backend::Backend& backend, const Inputs& in, int64_t shards, bool training,
               Tensor& losses);
  // weight_grad += (loss_grad / forward_loss_grad) * accumulator (once); returns dh times that
  // ratio. Releases.
  Tensor backward(backend::Backend& backend, double loss_grad, Tensor& weight_grad);
  bool has_saved() const { return dh_.defined(); }
  void release() { dh_ = dweight_ = Tensor(); }

 private:
  Tensor dh_, dweight_;
  double forward_loss_grad_ = 1.0;
};

}  // namespace zero::model
