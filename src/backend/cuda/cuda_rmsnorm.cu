// RMSNorm forward and backward over the last dimension: the LayerNorm scheme without the mean
// (a warp per row on 16-byte vectors in registers where the rows allow it, else a block per row,
// for the row sums; deterministic per-row-block weight-gradient partials).
#include "backend/cuda/cuda_norm_common.cuh"
#include "backend/cuda/cuda_rmsnorm_rows.cuh"

namespace zero::backend::cuda {
namespace {

// With a residual, the row normalised is x + residual, stored to `sum_out` (norm_input_row).
template <typename T>
__global__ void rmsnorm_forward_kernel(T* y, float* rstd_out, const T* x, const T* weight,
                                       int64_t rows, int64_t channels, float eps, T* sum_out,
                                       const T* residual) {
  __shared__ float shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = norm_input_row(x, sum_out, residual, r, channels);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      const float v = load_f32(row, i);
      sum += v * v;
    }
    const float s = 1.0f / sqrtf(block_sum(sum, shared) / static_cast<float>(channels) + eps);
    T* out = y + r * channels;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      store_f32(out, i, (load_f32(row, i) * s) * load_f32(weight, i));
    }
    if (threadIdx.x == 0) rstd_out[r] = s;
  }
}

template <typename T>
__global__ void rmsnorm_dx_kernel(T* dx, const T* dy, const T* x, const T* weight,
                                  const float* rstd, int64_t rows, int64_t channels) {
  __shared__ float shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * channels;
    const T* g = dy + r * channels;
    const float s = rstd[r];
    float sum_gx = 0.0f;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      sum_gx += load_f32(g, i) * load_f32(weight, i) * (load_f32(row, i) * s);
    }
    const float mean_gx = block_sum(sum_gx, shared) / static_cast<float>(channels);
    T* out = dx + r * channels;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      const float xv = load_f32(row, i);
      store_f32(out, i, s * (load_f32(g, i) * load_f32(weight, i) - xv * s * mean_gx));
    }
  }
}

template <typename T>
__global__ void rmsnorm_partials_kernel(float* partial, const T* dy, const T* x, const float* rstd,
                                        int64_t rows, int64_t channels, int64_t row_block) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const int64_t r0 = blockIdx.y * row_block;
  const int64_t r1 = min(rows, r0 + row_block);
  float acc = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    acc += load_f32(dy, r * channels + c) * (load_f32(x, r * channels + c) * rstd[r]);
  }
  partial[blockIdx.y * channels + c] = acc;
}

}  // namespace

void launch_rmsnorm_forward(void* y, float* rstd, const void* x, const void* weight, DType dtype,
                            int64_t rows, int64_t channels, float eps, cudaStream_t stream,
                            void* sum, const void* residual) {
  if (rows == 0) return;
  dispatch_storage(dtype, "rmsnorm_forward", [&](auto tag) {
    using T = decltype(tag);
    const int vectors = norm_vectors_per_lane<T>(channels, kNormForwardMaxVectors,
                                                 {y, x, weight, sum, residual});
    if (vectors > 0) {
      dispatch_norm_vectors<kNormForwardMaxVectors>(vectors, [&](auto per_lane) {
        rmsnorm_forward_rows_kernel<T, decltype(per_lane)::value>
            <<<norm_warp_row_grid(rows), kNormRowThreads, 0, stream>>>(
                static_cast<T*>(y), rstd, static_cast<const T*>(x), static_cast<const T*>(weight),
                rows, channels, eps, static_cast<T*>(sum), static_cast<const T*>(residual));
      });
      return;
    }
    rmsnorm_forward_kernel<T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
        static_cast<T*>(y), rstd, static_cast<const T*>(x), static_cast<const T*>(weight), rows,
        channels, eps, static_cast<T*>(sum), static_cast<const T*>(residual));
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_rmsnorm_backward(void* dx, void* dweight, const void* dy, const void* x,
                             const void* weight, const float* rstd, DType dtype,
                             DType grad_dtype, int64_t rows, int64_t channels, void* scratch,
                             cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const int64_t blocks = norm_row_blocks(rows);  // at most 65535 (norm_row_block)
  auto* partial = static_cast<float*>(scratch);
  const unsigned channel_tiles =
      static_cast<unsigned>((channels + kNormThreads - 1) / kNormThreads);
  dispatch_storage(dtype, "rmsnorm_backward", [&](auto tag) {
    using T = decltype(tag);
    // The partials read dy first: dx may be dy's buffer.
    if (norm_rows_are_vectors<T>(channels, {dy, x})) {
      const int64_t vector_columns = channels / kNormLanes<T>;
      const auto tiles = static_cast<unsigned>(
          (vector_columns + kNormPartialThreads - 1) / kNormPartialThreads);
      rmsnorm_partials_vector_kernel<T>
          <<<dim3(tiles, static_cast<unsigned>(blocks)), kNormPartialThreads, 0, stream>>>(
              partial, static_cast<const T*>(dy), static_cast<const T*>(x), rstd, rows, channels,
              norm_row_block(rows));
    } else {
      rmsnorm_partials_kernel<T>
          <<<dim3(channel_tiles, static_cast<unsigned>(blocks)), kNormThreads, 0, stream>>>(
              partial, static_cast<const T*>(dy), static_cast<const T*>(x), rstd, rows, channels,
              norm_row_block(rows));
    }
    ZERO_CUDA_CHECK_LAUNCH();
    const int vectors = norm_vectors_per_lane<T>(channels, kNormBackwardMaxVectors,
                                                 {dx, dy, x, weight});
    if (vectors > 0) {
      dispatch_norm_vectors<kNormBackwardMaxVectors>(vectors, [&](auto per_lane) {
        rmsnorm_dx_rows_kernel<T, decltype(per_lane)::value>
            <<<norm_warp_row_grid(rows), kNormRowThreads, 0, stream>>>(
                static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x),
                static_cast<const T*>(weight), rstd, rows, channels);
      });
    } else {
      rmsnorm_dx_kernel<T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
          static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x),
          static_cast<const T*>(weight), rstd, rows, channels);
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
