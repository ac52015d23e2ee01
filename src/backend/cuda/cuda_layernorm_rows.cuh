// LayerNorm's math for the norm skeleton (the contract: cuda_norm_common.cuh; the kernels: the
// block-per-row ones there and the warp-per-row ones of cuda_norm_rows.cuh, which hold the row
// in registers as 16-byte vectors). Per row the mean, then the variance about it (a second pass
// over the row): y = (x - mean) rstd w (+ b), rstd = 1 / sqrt(var + eps);
// dx = rstd (dy w - mean(dy w) - xhat mean(dy w xhat)) with xhat = (x - mean) rstd; weight and
// bias gradients sum(dy xhat) and sum(dy) over rows. cuda_layernorm.cu and cuda_norm_backward.cu
// include this.
#pragma once
#include "backend/cuda/cuda_norm_rows.cuh"

namespace zero::backend::cuda {

struct LayerNormMath {
  static constexpr bool kBias = true;
  static constexpr int kDxSums = 2;  // mean(dy w), mean(dy w xhat)
  struct Stats {
    float mean, rstd;
  };

  template <typename RowMean>
  __device__ __forceinline__ static Stats forward_stats(RowMean&& row_mean, float eps) {
    const float m = row_mean([](float x) { return x; });
    const float var = row_mean([m](float x) {
      const float d = x - m;
      return d * d;
    });
    return {m, 1.0f / sqrtf(var + eps)};
  }
  __device__ __forceinline__ static void store_stats(const Stats& st, float* mean, float* rstd,
                                                     int64_t r) {
    mean[r] = st.mean;
    rstd[r] = st.rstd;
  }
  __device__ __forceinline__ static Stats load_stats(const float* mean, const float* rstd,
                                                     int64_t r) {
    return {mean[r], rstd[r]};
  }
  __device__ __forceinline__ static float forward(float x, const Stats& st, float w) {
    return (x - st.mean) * st.rstd * w;
  }
  __device__ __forceinline__ static void dx_terms(float (&t)[kDxSums], float x, float g, float w,
                                                  const Stats& st) {
    const float gw = g * w;
    t[0] = gw;
    t[1] = gw * ((x - st.mean) * st.rstd);
  }
  __device__ __forceinline__ static float dx(float x, float g, float w, const Stats& st,
                                             const float (&means)[kDxSums]) {
    const float xhat = (x - st.mean) * st.rstd;
    return st.rstd * (g * w - means[0] - xhat * means[1]);
  }
  __device__ __forceinline__ static void partial_terms(float (&acc)[2], float g, float x,
                                                       const Stats& st) {
    acc[0] += g * ((x - st.mean) * st.rstd);
    acc[1] += g;
  }
};

}  // namespace zero::backend::cuda
