// RMSNorm forward over the last dimension: RmsNormMath (cuda_rmsnorm_rows.cuh) in the norm
// skeleton's kernels, launched as cuda_layernorm.cu launches LayerNorm's (a warp per row on
// 16-byte vectors in registers where the rows allow it, else a block per row, for the row sums)
// with null mean and bias. The backward is in cuda_norm_backward.cu.
#include "backend/cuda/cuda_rmsnorm_rows.cuh"

namespace zero::backend::cuda {

void launch_rmsnorm_forward(void* y, float* rstd, const void* x, const void* weight, DType dtype,
                            int64_t rows, int64_t channels, float eps, cudaStream_t stream,
                            void* sum, const void* residual) {
  if (rows == 0) return;
  using Norm = RmsNormMath;
  dispatch_storage(dtype, "rmsnorm_forward", [&](auto tag) {
    using T = decltype(tag);
    auto* ty = static_cast<T*>(y);
    auto* tsum = static_cast<T*>(sum);
    const auto *tx = static_cast<const T*>(x), *tw = static_cast<const T*>(weight);
    const auto* tres = static_cast<const T*>(residual);
    const int vectors = norm_vectors_per_lane<T>(channels, kNormForwardMaxVectors,
                                                 {y, x, weight, sum, residual});
    if (vectors > 0) {
      dispatch_norm_vectors<kNormForwardMaxVectors>(vectors, [&](auto per_lane) {
        norm_forward_rows_kernel<Norm, T, decltype(per_lane)::value>
            <<<norm_warp_row_grid(rows), kNormRowThreads, 0, stream>>>(
                ty, nullptr, rstd, tx, tw, nullptr, rows, channels, eps, tsum, tres);
      });
    } else {
      norm_forward_kernel<Norm, T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
          ty, nullptr, rstd, tx, tw, nullptr, rows, channels, eps, tsum, tres);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
