// NormLayer: LayerNorm or RMSNorm over the channel dimension, as a helper inside a unit (not a
// unit itself): it knows its parameter indices and keeps the statistics backward needs.
#pragma once
#include <cstdint>
#include <optional>

#include "backend/backend.h"
#include "model/transformer_config.h"

namespace zero::model {

class NormLayer {
 public:
  NormLayer() = default;
  NormLayer(NormKind kind, double eps) : kind_(kind), eps_(eps) {}

  NormKind kind() const { return kind_; }
  bool has_bias() const { return kind_ == NormKind::kLayerNorm; }

  // y = norm(x) for x[N, C]; saves the statistics when `training`.
  Tensor forward(backend::Backend& backend, const Tensor& x, const Tensor& weight,
                 const Tensor* bias, bool training);
  // x += residual, then y = norm(x) as forward() computes it, in one backend op
  // (Backend::add_layernorm_forward / add_rmsnorm_forward): the residual add before a norm.
  Tensor forward_after_add(backend::Backend& backend, Tensor& x, const Tensor& residual,
                           const Tensor& weight, const Tensor* bias, bool training);
  // dx = d norm / dx (+ residual, the gradient of the residual path, where given: one backend op,
  // Backend::layernorm_backward_add / rmsnorm_backward_add); dweight/dbias accumulate. Frees the
  // statistics.
  Tensor backward(backend::Backend& backend, const Tensor& dy, const Tensor& x,
                  const Tensor& weight, Tensor& dweight, Tensor* dbias,
                  const Tensor* residual = nullptr);
  void release() {
    mean_ = Tensor();
    rstd_ = Tensor();
  }

 private:
  // y = norm(x), or with a residual norm(x + residual) with the sum written over x.
  Tensor normalize(backend::Backend& backend, const Tensor& x, const Tensor* residual,
                   const Tensor& weight, const Tensor* bias, bool training);

  NormKind kind_ = NormKind::kLayerNorm;
  double eps_ = 1e-5;
  Tensor mean_;
  Tensor rstd_;
};

}  // namespace zero::model
