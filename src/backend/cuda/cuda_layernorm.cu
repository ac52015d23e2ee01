// LayerNorm forward and backward over the last dimension, f32 throughout. The row reductions
// (mean, variance, the two dx sums) run a warp per row on 16-byte vectors held in registers
// (cuda_norm_vector.cuh) where the rows allow it, else a block per row; the weight and bias
// gradients are summed per block of norm_row_block(rows) rows (each thread one channel, or one
// vector of channels, rows in order) and the blocks then added in order: deterministic, no
// atomics.
#include "backend/cuda/cuda_norm_common.cuh"
#include "backend/cuda/cuda_layernorm_rows.cuh"

namespace zero::backend::cuda {
namespace {

// With a residual, the row normalised is x + residual, stored to `sum_out` (norm_input_row).
template <typename T>
__global__ void layernorm_forward_kernel(T* y, float* mean_out, float* rstd_out, const T* x,
                                         const T* weight, const T* bias, int64_t rows,
                                         int64_t channels, float eps, T* sum_out,
                                         const T* residual) {
  __shared__ float shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = norm_input_row(x, sum_out, residual, r, channels);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) sum += load_f32(row, i);
    const float m = block_sum(sum, shared) / static_cast<float>(channels);
    float var = 0.0f;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      const float d = load_f32(row, i) - m;
      var += d * d;
    }
    const float s = 1.0f / sqrtf(block_sum(var, shared) / static_cast<float>(channels) + eps);
    T* out = y + r * channels;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      float v = (load_f32(row, i) - m) * s * load_f32(weight, i);
      if (bias != nullptr) v += load_f32(bias, i);
      store_f32(out, i, v);
    }
    if (threadIdx.x == 0) {
      mean_out[r] = m;
      rstd_out[r] = s;
    }
  }
}

template <typename T>
__global__ void layernorm_dx_kernel(T* dx, const T* dy, const T* x, const T* weight,
                                    const float* mean, const float* rstd, int64_t rows,
                                    int64_t channels) {
  __shared__ float shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * channels;
    const T* g = dy + r * channels;
    const float m = mean[r], s = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      const float xhat = (load_f32(row, i) - m) * s;
      const float gw = load_f32(g, i) * load_f32(weight, i);
      sum_g += gw;
      sum_gx += gw * xhat;
    }
    const float mean_g = block_sum(sum_g, shared) / static_cast<float>(channels);
    const float mean_gx = block_sum(sum_gx, shared) / static_cast<float>(channels);
    T* out = dx + r * channels;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      const float xhat = (load_f32(row, i) - m) * s;
      store_f32(out, i, s * (load_f32(g, i) * load_f32(weight, i) - mean_g - xhat * mean_gx));
    }
  }
}

// grid (channel tiles, row blocks): partial sums of dy * xhat (and dy) over the block's rows.
template <typename T>
__global__ void layernorm_partials_kernel(float* partial_w, float* partial_b, const T* dy,
                                          const T* x, const float* mean, const float* rstd,
                                          int64_t rows, int64_t channels, int64_t row_block) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const int64_t r0 = blockIdx.y * row_block;
  const int64_t r1 = min(rows, r0 + row_block);
  float pw = 0.0f, pb = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const float g = load_f32(dy, r * channels + c);
    const float xhat = (load_f32(x, r * channels + c) - mean[r]) * rstd[r];
    pw += g * xhat;
    pb += g;
  }
  partial_w[blockIdx.y * channels + c] = pw;
  if (partial_b != nullptr) partial_b[blockIdx.y * channels + c] = pb;
}

}  // namespace

size_t norm_backward_scratch_bytes(int64_t rows, int64_t channels, bool with_bias) {
  const int64_t blocks = norm_row_blocks(rows) > 0 ? norm_row_blocks(rows) : 1;
  return static_cast<size_t>(blocks * channels) * sizeof(float) * (with_bias ? 2 : 1);
}

void launch_layernorm_forward(void* y, float* mean, float* rstd, const void* x, const void* weight,
                              const void* bias, DType dtype, int64_t rows, int64_t channels,
                              float eps, cudaStream_t stream, void* sum, const void* residual) {
  if (rows == 0) return;
  dispatch_storage(dtype, "layernorm_forward", [&](auto tag) {
    using T = decltype(tag);
    const int vectors = norm_vectors_per_lane<T>(channels, kNormForwardMaxVectors,
                                                 {y, x, weight, bias, sum, residual});
    if (vectors > 0) {
      dispatch_norm_vectors<kNormForwardMaxVectors>(vectors, [&](auto per_lane) {
        layernorm_forward_rows_kernel<T, decltype(per_lane)::value>
            <<<norm_warp_row_grid(rows), kNormRowThreads, 0, stream>>>(
                static_cast<T*>(y), mean, rstd, static_cast<const T*>(x),
                static_cast<const T*>(weight), static_cast<const T*>(bias), rows, channels, eps,
                static_cast<T*>(sum), static_cast<const T*>(residual));
      });
      return;
    }
    layernorm_forward_kernel<T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
        static_cast<T*>(y), mean, rstd, static_cast<const T*>(x), static_cast<const T*>(weight),
        static_cast<const T*>(bias), rows, channels, eps, static_cast<T*>(sum),
        static_cast<const T*>(residual));
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_layernorm_backward(void* dx, void* dweight, void* dbias, const void* dy, const void* x,
                               const void* weight, const float* mean, const float* rstd,
                               DType dtype, DType grad_dtype, int64_t rows, int64_t channels,
                               void* scratch, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const int64_t blocks = norm_row_blocks(rows);  // at most 65535 (norm_row_block)
  auto* partial_w = static_cast<float*>(scratch);
  float* partial_b = dbias != nullptr ? partial_w + blocks * channels : nullptr;
  const unsigned channel_tiles =
      static_cast<unsigned>((channels + kNormThreads - 1) / kNormThreads);
  dispatch_storage(dtype, "layernorm_backward", [&](auto tag) {
    using T = decltype(tag);
    // The partials read dy first: dx may be dy's buffer.
    if (norm_rows_are_vectors<T>(channels, {dy, x})) {
      const int64_t vector_columns = channels / kNormLanes<T>;
      const auto tiles = static_cast<unsigned>(
          (vector_columns + kNormPartialThreads - 1) / kNormPartialThreads);
      layernorm_partials_vector_kernel<T>
          <<<dim3(tiles, static_cast<unsigned>(blocks)), kNormPartialThreads, 0, stream>>>(
              partial_w, partial_b, static_cast<const T*>(dy), static_cast<const T*>(x), mean,
              rstd, rows, channels, norm_row_block(rows));
    } else {
      layernorm_partials_kernel<T>
          <<<dim3(channel_tiles, static_cast<unsigned>(blocks)), kNormThreads, 0, stream>>>(
              partial_w, partial_b, static_cast<const T*>(dy), static_cast<const T*>(x), mean,
              rstd, rows, channels, norm_row_block(rows));
    }
    ZERO_CUDA_CHECK_LAUNCH();
    const int vectors = norm_vectors_per_lane<T>(channels, kNormBackwardMaxVectors,
                                                 {dx, dy, x, weight});
    if (vectors > 0) {
      dispatch_norm_vectors<kNormBackwardMaxVectors>(vectors, [&](auto per_lane) {
        layernorm_dx_rows_kernel<T, decltype(per_lane)::value>
            <<<norm_warp_row_grid(rows), kNormRowThreads, 0, stream>>>(
                static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x),
                static_cast<const T*>(weight), mean, rstd, rows, channels);
      });
    } else {
      layernorm_dx_kernel<T><<<norm_row_grid(rows), kNormThreads, 0, stream>>>(
          static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x),
          static_cast<const T*>(weight), mean, rstd, rows, channels);
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
