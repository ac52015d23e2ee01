// The per-head query/key RMSNorm ops on the CUDA backend: argument checks shared with the CPU
// (backend/qk_norm_shapes.h), placement checks, then the kernels of cuda_qk_norm.cu.
#include <string>

#include "backend/cuda/cuda_arg_checks.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/qk_norm_shapes.h"
#include "core/error.h"

namespace zero::backend {

using cuda_internal::Checks;

void CudaBackend::qk_rmsnorm_forward(Tensor& qkv_out, Tensor& rstd, const Tensor& qkv_in,
                                     const Tensor& q_weight, const Tensor& k_weight,
                                     int64_t heads, int64_t kv_heads, double eps) {
  const char* op = "qk_rmsnorm_forward";
  const Checks check(device(), op);
  check.here(qkv_out, "qkv_out").here(rstd, "rstd").here(qkv_in, "qkv_in");
  check.here(q_weight, "q_weight").here(k_weight, "k_weight");
  const QkNormDims d =
      check_qk_rmsnorm_forward(op, qkv_out, rstd, qkv_in, q_weight, k_weight, heads, kv_heads);
  cuda::launch_qk_rmsnorm_forward(qkv_out.raw_data(), static_cast<float*>(rstd.raw_data()),
                                  qkv_in.raw_data(), q_weight.raw_data(), k_weight.raw_data(),
                                  qkv_in.dtype(), d.rows, d.heads, d.kv_heads, d.head_dim,
                                  static_cast<float>(eps), current());
}

void CudaBackend::qk_rmsnorm_backward(Tensor& d_qkv_in, Tensor& dq_weight, Tensor& dk_weight,
                                      const Tensor& d_qkv_out, const Tensor& qkv_in,
                                      const Tensor& q_weight, const Tensor& k_weight,
                                      const Tensor& rstd, int64_t heads, int64_t kv_heads) {
  const char* op = "qk_rmsnorm_backward";
  const Checks check(device(), op);
  check.here(d_qkv_in, "d_qkv_in").here(dq_weight, "dq_weight").here(dk_weight, "dk_weight");
  check.here(d_qkv_out, "d_qkv_out").here(qkv_in, "qkv_in").here(rstd, "rstd");
  check.here(q_weight, "q_weight").here(k_weight, "k_weight");
  const QkNormDims d = check_qk_rmsnorm_backward(op, d_qkv_in, dq_weight, dk_weight, d_qkv_out,
                                                 qkv_in, q_weight, k_weight, rstd, heads,
                                                 kv_heads);
  if (dq_weight.dtype() != dk_weight.dtype()) {
    // One finishing kernel type serves both; the engine keeps all gradients in one dtype.
    throw ShapeError(std::string(op) + ": dq_weight " + dq_weight.describe() + " and dk_weight " +
                     dk_weight.describe() + " must have one dtype on the CUDA backend");
  }
  Tensor partials = scratch(cuda::qk_rmsnorm_backward_scratch_bytes(d.rows, d.head_dim));
  cuda::launch_qk_rmsnorm_backward(
      d_qkv_in.raw_data(), dq_weight.raw_data(), dk_weight.raw_data(), dq_weight.dtype(),
      d_qkv_out.raw_data(), qkv_in.raw_data(), q_weight.raw_data(), k_weight.raw_data(),
      static_cast<const float*>(rstd.raw_data()), qkv_in.dtype(), d.rows, d.heads, d.kv_heads,
      d.head_dim, partials.raw_data(), current());
}

}  // namespace zero::backend
