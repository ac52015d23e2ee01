// Argument checks of the per-head query/key RMSNorm ops (Backend::qk_rmsnorm_forward and
// qk_rmsnorm_backward), shared by every backend so that a bad call reads the same on the CPU and
// on a GPU. Device placement is each backend's own check.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend {

// Sizes of one call: N rows (tokens) of H query, KVH key and KVH value heads of D elements.
struct QkNormDims {
  int64_t rows = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t heads_per_row() const { return heads + 2 * kv_heads; }
  int64_t normalised_per_row() const { return heads + kv_heads; }
};

// The weights' dtype: the inputs' (a device kernel reads both as one storage type), or also
// f32 with 16-bit inputs (the CPU backend, which computes 16-bit calls in f32 anyway, as its
// other norms do for the engine's f32 parameters under bf16 activations).
enum class QkWeightDtypes { kInputs, kInputsOrF32 };

// Each throws ShapeError naming `op` and the bad argument.
QkNormDims check_qk_rmsnorm_forward(const char* op, const Tensor& qkv_out, const Tensor& rstd,
                                    const Tensor& qkv_in, const Tensor& q_weight,
                                    const Tensor& k_weight, int64_t heads, int64_t kv_heads,
                                    QkWeightDtypes weights = QkWeightDtypes::kInputs);
QkNormDims check_qk_rmsnorm_backward(const char* op, const Tensor& d_qkv_in,
                                     const Tensor& dq_weight, const Tensor& dk_weight,
                                     const Tensor& d_qkv_out, const Tensor& qkv_in,
                                     const Tensor& q_weight, const Tensor& k_weight,
                                     const Tensor& rstd, int64_t heads, int64_t kv_heads,
                                     QkWeightDtypes weights = QkWeightDtypes::kInputs);

}  // namespace zero::backend
