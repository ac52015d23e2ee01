// LayerNorm forward over the last dimension, f32 throughout: LayerNormMath
// (cuda_layernorm_rows.cuh) in the norm skeleton's kernels. The row reductions (mean, variance)
// run a warp per row on 16-byte vectors held in registers (cuda_norm_rows.cuh) where the rows
// allow it, else a block per row (cuda_norm_common.cuh). cuda_rmsnorm.cu launches the same
// kernels the same way with RmsNormMath; the backward of both is in cuda_norm_backward.cu.
#include "backend/cuda/cuda_layernorm_rows.cuh"

namespace zero::backend::cuda {

void launch_layernorm_forward(void* y, float* mean, float* rstd, const void* x, const void* weight,
                              const void* bias, DType dtype, int64_t rows, int64_t channels,
                              float eps, cudaStream_t stream, void* sum, const void* residual) {
  if (rows == 0) return;
  using Norm = LayerNormMath;
  dispatch_storage(dtype, "layernorm_forward", [&](auto tag) {
    using T = decltype(tag);
    auto* ty = static_cast<T*>(y);
    auto* tsum = static_cast<T*>(sum);
    const auto *tx = static_cast<const T*>(x), *tw = static_cast<const T*>(weight);
    const auto *tb = static_cast<const T*>(bias), *tres = static_cast<const T*>(residual);
    const int vectors = norm_vectors_per_lane<T>(channels, kNormForwardMaxVectors,
                                                 {y, x, weight, bias, sum, residual});
    if (vectors > 0) {
      dispatch_norm_vectors<kNormForwardMaxVectors>(vectors, [&](auto per_lane) {
        norm_forward_rows_kernel<Norm, T, decltype(per_lane)::value>
            <<<norm_warp_row_grid(rows), kNormRowThreads, 0, stream>>>(
                ty, mean, rstd, tx, tw, tb, rows, channels, eps, tsum, tres);
      });
    } else {
      norm_forward_kernel<Norm, T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
          ty, mean, rstd, tx, tw, tb, rows, channels, eps, tsum, tres);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
