// RMSNorm forward and backward over the last dimension: RmsNormMath (cuda_rmsnorm_rows.cuh) in
// the norm skeleton's kernels, launched as cuda_layernorm.cu launches LayerNorm's (a warp per
// row on 16-byte vectors in registers where the rows allow it, else a block per row, for the row
// sums; deterministic per-row-block weight-gradient partials) with null mean and bias.
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

void launch_rmsnorm_backward(void* dx, void* dweight, const void* dy, const void* x,
                             const void* weight, const float* rstd, DType dtype,
                             DType grad_dtype, int64_t rows, int64_t channels, void* scratch,
                             cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  using Norm = RmsNormMath;
  const int64_t blocks = norm_row_blocks(rows);  // at most 65535 (norm_row_block)
  auto* partial = static_cast<float*>(scratch);
  dispatch_storage(dtype, "rmsnorm_backward", [&](auto tag) {
    using T = decltype(tag);
    auto* tdx = static_cast<T*>(dx);
    const auto *tdy = static_cast<const T*>(dy), *tx = static_cast<const T*>(x);
    const auto* tw = static_cast<const T*>(weight);
    // The partials read dy first: dx may be dy's buffer.
    const NormPartialsShape shape = norm_partials_shape<T>(rows, channels, {dy, x});
    if (shape.vectors) {
      norm_partials_vector_kernel<Norm, T><<<shape.grid, shape.threads, 0, stream>>>(
          partial, nullptr, tdy, tx, nullptr, rstd, rows, channels, shape.row_block);
    } else {
      norm_partials_kernel<Norm, T><<<shape.grid, shape.threads, 0, stream>>>(
          partial, nullptr, tdy, tx, nullptr, rstd, rows, channels, shape.row_block);
    }
    ZERO_CUDA_CHECK_LAUNCH();
    const int vectors = norm_vectors_per_lane<T>(channels, kNormBackwardMaxVectors,
                                                 {dx, dy, x, weight});
    if (vectors > 0) {
      dispatch_norm_vectors<kNormBackwardMaxVectors>(vectors, [&](auto per_lane) {
        norm_dx_rows_kernel<Norm, T, decltype(per_lane)::value>
            <<<norm_warp_row_grid(rows), kNormRowThreads, 0, stream>>>(tdx, tdy, tx, tw, nullptr,
                                                                        rstd, rows, channels);
      });
    } else {
      norm_dx_kernel<Norm, T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
          tdx, tdy, tx, tw, nullptr, rstd, rows, channels);
    }
    ZERO_CUDA_CHECK_LAUNCH();
    dispatch_grad<T>(grad_dtype, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      norm_finish_kernel<G><<<finish_grid(channels), kFinishWarps * kWarp, 0, stream>>>(
          static_cast<G*>(dweight), partial, blocks, channels);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
