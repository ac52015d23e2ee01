// The RMSNorm kernels of the warp-per-row scheme (cuda_norm_vector.cuh: a warp per row, the row
// in registers as 16-byte vectors, warp-shuffle sums) and the vectorised weight-gradient
// partials. Only cuda_rmsnorm.cu includes this; it launches them where
// norm_vectors_per_lane / norm_rows_are_vectors allow and the block-per-row kernels elsewhere.
#pragma once
#include "backend/cuda/cuda_norm_vector.cuh"

namespace zero::backend::cuda {

// The row normalised is x's, or x + residual stored to sum_out (norm_load_input).
template <typename T, int kVectors>
__global__ void __launch_bounds__(kNormRowThreads)
    rmsnorm_forward_rows_kernel(T* y, float* rstd_out, const T* x, const T* weight, int64_t rows,
                                int64_t channels, float eps, T* sum_out, const T* residual) {
  constexpr int kLanes = kNormLanes<T>;
  const int lane = threadIdx.x % kWarp;
  const int64_t vectors = channels / kLanes;
  const uint4* w = reinterpret_cast<const uint4*>(weight);
  for (int64_t r = blockIdx.x * int64_t{kNormRowWarps} + threadIdx.x / kWarp; r < rows;
       r += int64_t{gridDim.x} * kNormRowWarps) {
    uint4 v[kVectors];
    norm_load_input<T>(v, x, sum_out, residual, r, vectors, lane);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      if (lane + int64_t{j} * kWarp < vectors) {
        sum += norm_tree_sum<T>([&](int k) {
          const float e = vector_lane<T>(v[j], k);
          return e * e;
        });
      }
    }
    const float s = 1.0f / sqrtf(warp_sum(sum) / static_cast<float>(channels) + eps);
    uint4* out = norm_vectors(y, r, vectors);
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int64_t i = lane + int64_t{j} * kWarp;
      if (i < vectors) {
        const uint4 wv = __ldg(w + i);
        uint4 o = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k = 0; k < kLanes; ++k) {
          set_vector_lane<T>(o, k, (vector_lane<T>(v[j], k) * s) * vector_lane<T>(wv, k));
        }
        out[i] = o;
      }
    }
    if (lane == 0) rstd_out[r] = s;
  }
}

// dx = rstd * (dy w - x rstd mean(dy w x rstd)), x and dy held in registers (dx may be dy's
// buffer: a lane loads its vectors before it stores them).
template <typename T, int kVectors>
__global__ void __launch_bounds__(kNormRowThreads)
    rmsnorm_dx_rows_kernel(T* dx, const T* dy, const T* x, const T* weight, const float* rstd,
                           int64_t rows, int64_t channels) {
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
    const float s = rstd[r];
    float sum_gx = 0.0f;
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int64_t i = lane + int64_t{j} * kWarp;
      if (i < vectors) {
        const uint4 wv = __ldg(w + i);
        sum_gx += norm_tree_sum<T>([&](int k) {
          return vector_lane<T>(gv[j], k) * vector_lane<T>(wv, k) * (vector_lane<T>(xv[j], k) * s);
        });
      }
    }
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
          const float xe = vector_lane<T>(xv[j], k);
          set_vector_lane<T>(o, k,
                      s * (vector_lane<T>(gv[j], k) * vector_lane<T>(wv, k) - xe * s * mean_gx));
        }
        out[i] = o;
      }
    }
  }
}

// rmsnorm_partials_kernel with each thread on one 16-byte vector of channels (coalesced 16-byte
// loads); per channel the same sum in the same row order.
template <typename T>
__global__ void __launch_bounds__(kNormPartialThreads)
    rmsnorm_partials_vector_kernel(float* partial, const T* dy, const T* x, const float* rstd,
                                   int64_t rows, int64_t channels, int64_t row_block) {
  constexpr int kLanes = kNormLanes<T>;
  const int64_t vectors = channels / kLanes;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= vectors) return;
  const int64_t r0 = blockIdx.y * row_block;
  const int64_t r1 = min(rows, r0 + row_block);
  float acc[kLanes];
#pragma unroll
  for (int k = 0; k < kLanes; ++k) acc[k] = 0.0f;
#pragma unroll 4
  for (int64_t r = r0; r < r1; ++r) {
    const uint4 gv = norm_vectors(dy, r, vectors)[i];
    const uint4 xv = norm_vectors(x, r, vectors)[i];
    const float s = rstd[r];
#pragma unroll
    for (int k = 0; k < kLanes; ++k) acc[k] += vector_lane<T>(gv, k) * (vector_lane<T>(xv, k) * s);
  }
  float* out = partial + blockIdx.y * channels + i * kLanes;
#pragma unroll
  for (int k = 0; k < kLanes; ++k) out[k] = acc[k];
}

}  // namespace zero::backend::cuda
