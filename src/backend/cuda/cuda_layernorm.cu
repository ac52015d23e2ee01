// LayerNorm forward and backward over the last dimension, f32 throughout: LayerNormMath
// (cuda_layernorm_rows.cuh) in the norm skeleton's kernels. The row reductions (mean, variance,
// the two dx sums) run a warp per row on 16-byte vectors held in registers (cuda_norm_rows.cuh)
// where the rows allow it, else a block per row (cuda_norm_common.cuh); the weight and bias
// gradients are summed per block of norm_row_block(rows) rows (each thread one channel, or one
// vector of channels, rows in order) and the blocks then added in order: deterministic, no
// atomics. cuda_rmsnorm.cu launches the same kernels the same way with RmsNormMath.
#include "backend/cuda/cuda_layernorm_rows.cuh"

namespace zero::backend::cuda {

size_t norm_backward_scratch_bytes(int64_t rows, int64_t channels, bool with_bias) {
  const int64_t blocks = norm_row_blocks(rows) > 0 ? norm_row_blocks(rows) : 1;
  return static_cast<size_t>(blocks * channels) * sizeof(float) * (with_bias ? 2 : 1);
}

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

void launch_layernorm_backward(void* dx, void* dweight, void* dbias, const void* dy, const void* x,
                               const void* weight, const float* mean, const float* rstd,
                               DType dtype, DType grad_dtype, int64_t rows, int64_t channels,
                               void* scratch, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  using Norm = LayerNormMath;
  const int64_t blocks = norm_row_blocks(rows);  // at most 65535 (norm_row_block)
  auto* partial_w = static_cast<float*>(scratch);
  float* partial_b = dbias != nullptr ? partial_w + blocks * channels : nullptr;
  dispatch_storage(dtype, "layernorm_backward", [&](auto tag) {
    using T = decltype(tag);
    auto* tdx = static_cast<T*>(dx);
    const auto *tdy = static_cast<const T*>(dy), *tx = static_cast<const T*>(x);
    const auto* tw = static_cast<const T*>(weight);
    // The partials read dy first: dx may be dy's buffer.
    const NormPartialsShape shape = norm_partials_shape<T>(rows, channels, {dy, x});
    if (shape.vectors) {
      norm_partials_vector_kernel<Norm, T><<<shape.grid, shape.threads, 0, stream>>>(
          partial_w, partial_b, tdy, tx, mean, rstd, rows, channels, shape.row_block);
    } else {
      norm_partials_kernel<Norm, T><<<shape.grid, shape.threads, 0, stream>>>(
          partial_w, partial_b, tdy, tx, mean, rstd, rows, channels, shape.row_block);
    }
    ZERO_CUDA_CHECK_LAUNCH();
    const int vectors = norm_vectors_per_lane<T>(channels, kNormBackwardMaxVectors,
                                                 {dx, dy, x, weight});
    if (vectors > 0) {
      dispatch_norm_vectors<kNormBackwardMaxVectors>(vectors, [&](auto per_lane) {
        norm_dx_rows_kernel<Norm, T, decltype(per_lane)::value>
            <<<norm_warp_row_grid(rows), kNormRowThreads, 0, stream>>>(tdx, tdy, tx, tw, mean,
                                                                        rstd, rows, channels);
      });
    } else {
      norm_dx_kernel<Norm, T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
          tdx, tdy, tx, tw, mean, rstd, rows, channels);
    }
    ZERO_CUDA_CHECK_LAUNCH();
    dispatch_grad<T>(grad_dtype, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      norm_finish_kernel<G><<<finish_grid(channels), kFinishWarps * kWarp, 0, stream>>>(
          static_cast<G*>(dweight), partial_w, blocks, channels);
      ZERO_CUDA_CHECK_LAUNCH();
      if (dbias != nullptr) {
        norm_finish_kernel<G><<<finish_grid(channels), kFinishWarps * kWarp, 0, stream>>>(
            static_cast<G*>(dbias), partial_b, blocks, channels);
      }
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
