// RMSNorm's math for the norm skeleton (the contract: cuda_norm_common.cuh; the kernels: the
// block-per-row ones there and the warp-per-row ones of cuda_norm_rows.cuh, which hold the row
// in registers as 16-byte vectors): LayerNorm without the mean or a bias. Per row
// rstd = 1 / sqrt(mean(x^2) + eps), y = (x rstd) w; dx = rstd (dy w - x rstd mean(dy w x rstd));
// the weight gradient sum(dy x rstd) over rows. cuda_rmsnorm.cu and cuda_norm_backward.cu include this.
#pragma once
#include "backend/cuda/cuda_norm_rows.cuh"

namespace zero::backend::cuda {

struct RmsNormMath {
  static constexpr bool kBias = false;
  static constexpr int kDxSums = 1;  // mean(dy w x rstd)
  struct Stats {
    float rstd;
  };

  template <typename RowMean>
  __device__ __forceinline__ static Stats forward_stats(RowMean&& row_mean, float eps) {
    return {1.0f / sqrtf(row_mean([](float x) { return x * x; }) + eps)};
  }
  __device__ __forceinline__ static void store_stats(const Stats& st, float* /*mean*/,
                                                     float* rstd, int64_t r) {
    rstd[r] = st.rstd;
  }
  __device__ __forceinline__ static Stats load_stats(const float* /*mean*/, const float* rstd,
                                                     int64_t r) {
    return {rstd[r]};
  }
  __device__ __forceinline__ static float forward(float x, const Stats& st, float w) {
    return (x * st.rstd) * w;
  }
  __device__ __forceinline__ static void dx_terms(float (&t)[kDxSums], float x, float g, float w,
                                                  const Stats& st) {
    t[0] = g * w * (x * st.rstd);
  }
  __device__ __forceinline__ static float dx(float x, float g, float w, const Stats& st,
                                             const float (&means)[kDxSums]) {
    return st.rstd * (g * w - x * st.rstd * means[0]);
  }
  __device__ __forceinline__ static void partial_terms(float (&acc)[1], float g, float x,
                                                       const Stats& st) {
    acc[0] += g * (x * st.rstd);
  }
};

}  // namespace zero::backend::cuda
