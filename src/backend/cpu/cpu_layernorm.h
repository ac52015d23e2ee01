// CPU LayerNorm forward/backward over the last dimension (torch.nn.LayerNorm semantics:
// biased variance, rstd = 1/sqrt(var + eps)). See Backend::layernorm_* for the contract.
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                       const Tensor& weight, const Tensor* bias, double eps);
void layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                        const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd);

}  // namespace zero::backend::cpu
