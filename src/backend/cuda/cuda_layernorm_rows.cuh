// The LayerNorm kernels of the warp-per-row scheme (cuda_norm_vector.cuh: a warp per row, the row
// in registers as 16-byte vectors, warp-shuffle sums) and the vectorised weight-gradient
// partials. Only cuda_layernorm.cu includes this; it launches them where
// norm_vectors_per_lane / norm_rows_are_vectors allow and the block-per-row kernels elsewhere.
#pragma once
#include "backend/cuda/cuda_norm_vector.cuh"

namespace zero::backend::cuda {

// The row normalised is x's, or x + residual stored to sum_out (norm_load_input).
template <typename T, int kVectors>
__global__ void __launch_bounds__(kNormRowThreads)
    layernorm_forward_rows_kernel(T* y, float* mean_out, float* rstd_out, const T* x,
                                  const T* weight, const T* bias, int64_t rows, int64_t channels,
                                  float eps, T* sum_out, const T* residual) {
  constexpr int kLanes = kNormLanes<T>;
  const int lane = threadIdx.x % kWarp;
  const int64_t vectors = channels / kLanes;
  const uint4* w = reinterpret_cast<const uint4*>(weight);
  const uint4* b = reinterpret_cast<const uint4*>(bias);
  for (int64_t r = blockIdx.x * int64_t{kNormRowWarps} + threadIdx.x / kWarp; r < rows;
       r += int64_t{gridDim.x} * kNormRowWarps) {
    uint4 v[kVectors];
    norm_load_input<T>(v, x, sum_out, residual, r, vectors, lane);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      if (lane + int64_t{j} * kWarp < vectors) {
        sum += norm_tree_sum<T>([&](int k) { return vector_lane<T>(v[j], k); });
      }
    }
    const float m = warp_sum(sum) / static_cast<float>(channels);
    float var = 0.0f;
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      if (lane + int64_t{j} * kWarp < vectors) {
        var += norm_tree_sum<T>([&](int k) {
          const float d = vector_lane<T>(v[j], k) - m;
          return d * d;
        });
      }
    }
    const float s = 1.0f / sqrtf(warp_sum(var) / static_cast<float>(channels) + eps);
    uint4* out = norm_vectors(y, r, vectors);
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int64_t i = lane + int64_t{j} * kWarp;
      if (i < vectors) {
        const uint4 wv = __ldg(w + i);
        const uint4 bv = b != nullptr ? __ldg(b + i) : make_uint4(0, 0, 0, 0);
        uint4 o = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k = 0; k < kLanes; ++k) {
          float e = (vector_lane<T>(v[j], k) - m) * s * vector_lane<T>(wv, k);
          if (b != nullptr) e += vector_lane<T>(bv, k);
          set_vector_lane<T>(o, k, e);
        }
        out[i] = o;
      }
    }
    if (lane == 0) {
      mean_out[r] = m;
      rstd_out[r] = s;
    }
  }
}

// dx = rstd * (dy w - mean(dy w) - xhat mean(dy w xhat)), x and dy held in registers (dx may be
// dy's buffer: a lane loads its vectors before it stores them).
template <typename T, int kVectors>
__global__ void __launch_bounds__(kNormRowThreads)
    layernorm_dx_rows_kernel(T* dx, const T* dy, const T* x, const T* weight, const float* mean,
                             const float* rstd, int64_t rows, int64_t channels) {
  constexpr int kLanes = kNormLanes<T>;
  const int lane = threadIdx.x % kWarp;
  const int64_t vectors = channels / kLanes;
  const uint4* w = reinterpret_cast<const uint4*>(weight);
  for (int64_t r = blockIdx.x * int64_t{kNormRowWarps} + threadIdx.x / kWarp; r < rows;
       r += int64_t{gridDim.x} * kNormRowWarps) {
    const uint4* xr = norm_vectors(x, r, vectors);
    const uint4* gr = norm_vectors(dy, r, vectors);
    uint4 xv[kVectors], gv[kVectors];
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int64_t i = lane + int64_t{j} * kWarp;
      xv[j] = i < vectors ? xr[i] : make_uint4(0, 0, 0, 0);
      gv[j] = i < vectors ? gr[i] : make_uint4(0, 0, 0, 0);
    }
    const float m = mean[r], s = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int64_t i = lane + int64_t{j} * kWarp;
      if (i < vectors) {
        const uint4 wv = __ldg(w + i);
        float gw[kLanes], gwx[kLanes];  // each element widened once for both sums
#pragma unroll
        for (int k = 0; k < kLanes; ++k) {
          gw[k] = vector_lane<T>(gv[j], k) * vector_lane<T>(wv, k);
          gwx[k] = gw[k] * ((vector_lane<T>(xv[j], k) - m) * s);
        }
        sum_g += norm_tree_sum<T>([&](int k) { return gw[k]; });
        sum_gx += norm_tree_sum<T>([&](int k) { return gwx[k]; });
      }
    }
    const float mean_g = warp_sum(sum_g) / static_cast<float>(channels);
    const float mean_gx = warp_sum(sum_gx) / static_cast<float>(channels);
    uint4* out = norm_vectors(dx, r, vectors);
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int64_t i = lane + int64_t{j} * kWarp;
      if (i < vectors) {
        const uint4 wv = __ldg(w + i);
        uint4 o = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k = 0; k < kLanes; ++k) {
          const float xhat = (vector_lane<T>(xv[j], k) - m) * s;
          const float gw = vector_lane<T>(gv[j], k) * vector_lane<T>(wv, k);
          set_vector_lane<T>(o, k, s * (gw - mean_g - xhat * mean_gx));
        }
        out[i] = o;
      }
    }
  }
}

// layernorm_partials_kernel with each thread on one 16-byte vector of channels (coalesced
// 16-byte loads); per channel the same sums in the same row order.
template <typename T>
__global__ void __launch_bounds__(kNormPartialThreads)
    layernorm_partials_vector_kernel(float* partial_w, float* partial_b, const T* dy, const T* x,
                                     const float* mean, const float* rstd, int64_t rows,
                                     int64_t channels, int64_t row_block) {
  constexpr int kLanes = kNormLanes<T>;
  const int64_t vectors = channels / kLanes;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= vectors) return;
  const int64_t r0 = blockIdx.y * row_block;
  const int64_t r1 = min(rows, r0 + row_block);
  float pw[kLanes], pb[kLanes];
#pragma unroll
  for (int k = 0; k < kLanes; ++k) pw[k] = pb[k] = 0.0f;
#pragma unroll 4
  for (int64_t r = r0; r < r1; ++r) {
    const uint4 gv = norm_vectors(dy, r, vectors)[i];
    const uint4 xv = norm_vectors(x, r, vectors)[i];
    const float m = mean[r], s = rstd[r];
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      const float g = vector_lane<T>(gv, k);
      const float xhat = (vector_lane<T>(xv, k) - m) * s;
      pw[k] += g * xhat;
      pb[k] += g;
    }
  }
  float* out_w = partial_w + blockIdx.y * channels + i * kLanes;
#pragma unroll
  for (int k = 0; k < kLanes; ++k) out_w[k] = pw[k];
  if (partial_b != nullptr) {
    float* out_b = partial_b + blockIdx.y * channels + i * kLanes;
#pragma unroll
    for (int k = 0; k < kLanes; ++k) out_b[k] = pb[k];
  }
}

}  // namespace zero::backend::cuda
