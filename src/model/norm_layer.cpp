#include "model/norm_layer.h"

#include "core/check.h"

namespace zero::model {

Tensor NormLayer::forward(backend::Backend& backend, const Tensor& x, const Tensor& weight,
                          const Tensor* bias, bool training) {
  return normalize(backend, x, nullptr, weight, bias, training);
}

Tensor NormLayer::forward_after_add(backend::Backend& backend, Tensor& x, const Tensor& residual,
                                   const Tensor& weight, const Tensor* bias, bool training) {
  return normalize(backend, x, &residual, weight, bias, training);
}

Tensor NormLayer::normalize(backend::Backend& backend, const Tensor& x, const Tensor* residual,
                            const Tensor& weight, const Tensor* bias, bool training) {
  Tensor sum = x;  // with a residual the sum is written over x (the same storage)
  const int64_t rows = x.size(0);
  const DType stats = backend::stats_dtype(x.dtype());
  Tensor y = backend.empty(x.shape(), x.dtype(), MemoryCategory::kActivations);
  Tensor rstd = backend.empty({rows}, stats, MemoryCategory::kActivations);
  if (kind_ == NormKind::kLayerNorm) {
    Tensor mean = backend.empty({rows}, stats, MemoryCategory::kActivations);
    if (residual != nullptr) {
      backend.add_layernorm_forward(sum, y, mean, rstd, x, *residual, weight, bias, eps_);
    } else {
      backend.layernorm_forward(y, mean, rstd, x, weight, bias, eps_);
    }
    if (training) mean_ = mean;
  } else if (residual != nullptr) {
    backend.add_rmsnorm_forward(sum, y, rstd, x, *residual, weight, eps_);
  } else {
    backend.rmsnorm_forward(y, rstd, x, weight, eps_);
  }
  if (training) rstd_ = rstd;
  return y;
}

Tensor NormLayer::backward(backend::Backend& backend, const Tensor& dy, const Tensor& x,
                           const Tensor& weight, Tensor& dweight, Tensor* dbias,
                           const Tensor* residual) {
  ZERO_CHECK(rstd_.defined(), "norm backward without a training forward");
  Tensor dx = backend.empty(x.shape(), x.dtype(), MemoryCategory::kActivations);
  if (kind_ == NormKind::kLayerNorm) {
    if (residual != nullptr) {
      backend.layernorm_backward_add(dx, dweight, dbias, dy, x, weight, mean_, rstd_, *residual);
    } else {
      backend.layernorm_backward(dx, dweight, dbias, dy, x, weight, mean_, rstd_);
    }
  } else if (residual != nullptr) {
    backend.rmsnorm_backward_add(dx, dweight, dy, x, weight, rstd_, *residual);
  } else {
    backend.rmsnorm_backward(dx, dweight, dy, x, weight, rstd_);
  }
  release();
  return dx;
}

}  // namespace zero::model
