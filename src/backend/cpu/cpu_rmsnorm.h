// CPU RMSNorm forward/backward over the last dimension (Hugging Face LlamaRMSNorm:
// y = weight * (x * rsqrt(mean(x^2) + eps))). See Backend::rmsnorm_*.
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& weight, double eps);
void rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                      const Tensor& weight, const Tensor& rstd);

}  // namespace zero::backend::cpu
