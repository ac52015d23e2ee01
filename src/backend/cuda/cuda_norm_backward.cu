// The LayerNorm and RMSNorm backward launches, one template over the norm's math (LayerNormMath,
// RmsNormMath): dx, and the weight (and LayerNorm's bias) gradients as per-row-block f32
// partial sums added in block order into the accumulating gradient (deterministic, no atomics).
//   - Rows that are 16-byte vectors within norm_fused_max_vectors: one pass, a warp per row
//     block of norm_fused_row_block(rows) rows computing dx and its partial sums in registers
//     (norm_backward_rows_kernel with kPartials), x and dy read once.
//   - Vector rows past that, up to kNormBackwardMaxVectors: the partials kernel on vectors
//     (blocks of norm_row_block(rows) rows), then the warp-per-row dx.
//   - Any other rows: the block-per-row dx and the partials a thread per channel.
// With a residual, every path adds it to dx as add() would, after rounding dx (one more read).
// The launches live in this .cu file (the CUDA simulator rewrites <<<>>> in .cu files only).
#include "backend/cuda/cuda_layernorm_rows.cuh"
#include "backend/cuda/cuda_rmsnorm_rows.cuh"

namespace zero::backend::cuda {
namespace {

// Partial rows the scratch holds: the most either scheme needs.
int64_t norm_partial_rows_bound(int64_t rows) {
  const int64_t blocks = norm_row_blocks(rows), fused = norm_fused_partial_rows(rows);
  const int64_t most = blocks > fused ? blocks : fused;
  return most > 0 ? most : 1;
}

template <typename Norm>
void launch_norm_backward(const char* op, void* dx, void* dweight, void* dbias, const void* dy,
                          const void* x, const void* weight, const float* mean,
                          const float* rstd, DType dtype, DType grad_dtype, int64_t rows,
                          int64_t channels, void* scratch, cudaStream_t stream,
                          const void* residual) {
  if (rows == 0 || channels == 0) return;
  auto* partial_w = static_cast<float*>(scratch);
  float* partial_b =
      dbias != nullptr ? partial_w + norm_partial_rows_bound(rows) * channels : nullptr;
  dispatch_storage(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    auto* tdx = static_cast<T*>(dx);
    const auto *tdy = static_cast<const T*>(dy), *tx = static_cast<const T*>(x);
    const auto* tw = static_cast<const T*>(weight);
    const auto* tres = static_cast<const T*>(residual);
    constexpr int kFusedMax = norm_fused_max_vectors<Norm, T>();
    const int vectors = norm_vectors_per_lane<T>(channels, kNormBackwardMaxVectors,
                                                 {dx, dy, x, weight, residual});
    const int64_t row_block = norm_fused_row_block(rows);
    int64_t partial_rows = 0;
    if (vectors > 0 && vectors <= kFusedMax) {
      partial_rows = norm_fused_partial_rows(rows);
      dispatch_norm_vectors<kFusedMax>(vectors, [&](auto per_lane) {
        norm_backward_rows_kernel<Norm, T, decltype(per_lane)::value, true>
            <<<norm_fused_grid(rows), kNormRowThreads, 0, stream>>>(
                tdx, partial_w, partial_b, tdy, tx, tw, mean, rstd, rows, channels, row_block,
                tres);
      });
    } else {
      // The partials read dy first: dx may be dy's buffer.
      partial_rows = norm_row_blocks(rows);
      const NormPartialsShape shape = norm_partials_shape<T>(rows, channels, {dy, x});
      if (shape.vectors) {
        norm_partials_vector_kernel<Norm, T><<<shape.grid, shape.threads, 0, stream>>>(
            partial_w, partial_b, tdy, tx, mean, rstd, rows, channels, shape.row_block);
      } else {
        norm_partials_kernel<Norm, T><<<shape.grid, shape.threads, 0, stream>>>(
            partial_w, partial_b, tdy, tx, mean, rstd, rows, channels, shape.row_block);
      }
      ZERO_CUDA_CHECK_LAUNCH();
      if (vectors > 0) {
        dispatch_norm_vectors<kNormBackwardMaxVectors>(vectors, [&](auto per_lane) {
          // Only the widths past the fused bound get here (no kernels for the others).
          if constexpr (decltype(per_lane)::value > kFusedMax) {
            norm_backward_rows_kernel<Norm, T, decltype(per_lane)::value, false>
                <<<norm_fused_grid(rows), kNormRowThreads, 0, stream>>>(
                    tdx, nullptr, nullptr, tdy, tx, tw, mean, rstd, rows, channels, row_block,
                    tres);
          }
        });
      } else {
        norm_dx_kernel<Norm, T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
            tdx, tdy, tx, tw, mean, rstd, rows, channels, tres);
      }
    }
    ZERO_CUDA_CHECK_LAUNCH();
    dispatch_grad<T>(grad_dtype, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      norm_finish_kernel<G><<<finish_grid(channels), kFinishWarps * kWarp, 0, stream>>>(
          static_cast<G*>(dweight), partial_w, partial_rows, channels);
      ZERO_CUDA_CHECK_LAUNCH();
      if (dbias != nullptr) {
        norm_finish_kernel<G><<<finish_grid(channels), kFinishWarps * kWarp, 0, stream>>>(
            static_cast<G*>(dbias), partial_b, partial_rows, channels);
      }
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t norm_backward_scratch_bytes(int64_t rows, int64_t channels, bool with_bias) {
  return static_cast<size_t>(norm_partial_rows_bound(rows) * channels) * sizeof(float) *
         (with_bias ? 2 : 1);
}

void launch_layernorm_backward(void* dx, void* dweight, void* dbias, const void* dy, const void* x,
                               const void* weight, const float* mean, const float* rstd,
                               DType dtype, DType grad_dtype, int64_t rows, int64_t channels,
                               void* scratch, cudaStream_t stream, const void* residual) {
  launch_norm_backward<LayerNormMath>("layernorm_backward", dx, dweight, dbias, dy, x, weight,
                                      mean, rstd, dtype, grad_dtype, rows, channels, scratch,
                                      stream, residual);
}

void launch_rmsnorm_backward(void* dx, void* dweight, const void* dy, const void* x,
                             const void* weight, const float* rstd, DType dtype,
                             DType grad_dtype, int64_t rows, int64_t channels, void* scratch,
                             cudaStream_t stream, const void* residual) {
  launch_norm_backward<RmsNormMath>("rmsnorm_backward", dx, dweight, nullptr, dy, x, weight,
                                    nullptr, rstd, dtype, grad_dtype, rows, channels, scratch,
                                    stream, residual);
}

}  // namespace zero::backend::cuda
