// CPU fused softmax + cross-entropy loss and gradient. Semantics are those of
// Backend::softmax_cross_entropy (backend/backend.h); CpuBackend forwards to this.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend::cpu {

// logits [..., V] (f32/f64; leading dimensions are N rows), targets (i32/i64, N ids), losses
// (N values, dtype of logits) = logsumexp(row) - row[target], 0 where target == ignore_index.
// dlogits (optional, shape of logits, may alias logits) = grad_scale * (softmax - onehot), zero
// rows where ignored. A target outside [0, V) that is not ignore_index throws zero::Error before
// anything is written.
void softmax_cross_entropy(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index, double grad_scale);

}  // namespace zero::backend::cpu
