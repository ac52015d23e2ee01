// CPU per-head query/key RMSNorm (Qwen3's q_norm and k_norm over a fused q | k | v projection).
// See Backend::qk_rmsnorm_forward / qk_rmsnorm_backward; f32 and f64 (16-bit through F32Twins).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend::cpu {

void qk_rmsnorm_forward(Tensor& qkv_out, Tensor& rstd, const Tensor& qkv_in,
                        const Tensor& q_weight, const Tensor& k_weight, int64_t heads,
                        int64_t kv_heads, double eps);
void qk_rmsnorm_backward(Tensor& d_qkv_in, Tensor& dq_weight, Tensor& dk_weight,
                         const Tensor& d_qkv_out, const Tensor& qkv_in, const Tensor& q_weight,
                         const Tensor& k_weight, const Tensor& rstd, int64_t heads,
                         int64_t kv_heads);

}  // namespace zero::backend::cpu
