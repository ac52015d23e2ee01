// The shared skeleton of the LayerNorm and RMSNorm kernels, part 2: the warp-per-row kernels
// (cuda_norm_vector.cuh: a warp per row, the row held in registers as 16-byte vectors,
// warp-shuffle sums) and the vectorised weight-gradient partials, parameterised on a norm's math
// and taking the block-per-row kernels' parameters (both in cuda_norm_common.cuh).
// cuda_layernorm.cu and cuda_rmsnorm.cu instantiate them with their math and launch them where
// norm_vectors_per_lane / norm_rows_are_vectors allow (the launches stay in the .cu files: the
// CUDA simulator rewrites <<<>>> there only). Per element the math runs in the same order on
// either path; the row sums differ in grouping only (per lane: vector tree sums in slot order,
// then the warp tree).
#pragma once
#include "backend/cuda/cuda_norm_common.cuh"
#include "backend/cuda/cuda_norm_vector.cuh"

namespace zero::backend::cuda {

// The rows of this warp: one per warp of the grid at a time (kNormRowWarps per block).
__device__ __forceinline__ int64_t norm_first_warp_row() {
  return blockIdx.x * int64_t{kNormRowWarps} + threadIdx.x / kWarp;
}
__device__ __forceinline__ int64_t norm_warp_row_stride() {
  return int64_t{gridDim.x} * kNormRowWarps;
}

// The row normalised is x's, or x + residual stored to sum_out (norm_load_input); it stays in v
// (kVectors slots per lane, packed as stored) for every pass over it.
template <typename Norm, typename T, int kVectors>
__global__ void __launch_bounds__(kNormRowThreads)
    norm_forward_rows_kernel(T* y, float* mean_out, float* rstd_out, const T* x, const T* weight,
                             const T* bias, int64_t rows, int64_t channels, float eps,
                             T* sum_out, const T* residual) {
  constexpr int kLanes = kNormLanes<T>;
  const int lane = threadIdx.x % kWarp;
  const int64_t vectors = channels / kLanes;
  const uint4* w = reinterpret_cast<const uint4*>(weight);
  const uint4* b = reinterpret_cast<const uint4*>(bias);
  for (int64_t r = norm_first_warp_row(); r < rows; r += norm_warp_row_stride()) {
    uint4 v[kVectors];
    norm_load_input<T>(v, x, sum_out, residual, r, vectors, lane);
    const auto stats = Norm::forward_stats(
        [&](auto term) {
          float sum = 0.0f;
          for_each_row_vector<kVectors>(vectors, lane, [&](int j, int64_t) {
            sum += norm_tree_sum<T>([&](int k) { return term(vector_lane<T>(v[j], k)); });
          });
          return warp_sum(sum) / static_cast<float>(channels);
        },
        eps);
    uint4* out = norm_vectors(y, r, vectors);
    for_each_row_vector<kVectors>(vectors, lane, [&](int j, int64_t i) {
      const uint4 wv = __ldg(w + i);
      uint4 bv = make_uint4(0, 0, 0, 0);
      if constexpr (Norm::kBias) bv = b != nullptr ? __ldg(b + i) : make_uint4(0, 0, 0, 0);
      uint4 o = make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int k = 0; k < kLanes; ++k) {
        float e = Norm::forward(vector_lane<T>(v[j], k), stats, vector_lane<T>(wv, k));
        if constexpr (Norm::kBias) {
          if (b != nullptr) e += vector_lane<T>(bv, k);
        }
        set_vector_lane<T>(o, k, e);
      }
      out[i] = o;
    });
    if (lane == 0) Norm::store_stats(stats, mean_out, rstd_out, r);
  }
}

// x and dy held in registers between the sums and dx (dx may be dy's buffer: a lane loads its
// vectors before it stores them).
template <typename Norm, typename T, int kVectors>
__global__ void __launch_bounds__(kNormRowThreads)
    norm_dx_rows_kernel(T* dx, const T* dy, const T* x, const T* weight, const float* mean,
                        const float* rstd, int64_t rows, int64_t channels) {
  constexpr int kLanes = kNormLanes<T>;
  constexpr int kSums = Norm::kDxSums;
  const int lane = threadIdx.x % kWarp;
  const int64_t vectors = channels / kLanes;
  const uint4* w = reinterpret_cast<const uint4*>(weight);
  for (int64_t r = norm_first_warp_row(); r < rows; r += norm_warp_row_stride()) {
    uint4 xv[kVectors], gv[kVectors];
    norm_load_row<T>(xv, x, r, vectors, lane);
    norm_load_row<T>(gv, dy, r, vectors, lane);
    const auto stats = Norm::load_stats(mean, rstd, r);
    float sums[kSums] = {};
    for_each_row_vector<kVectors>(vectors, lane, [&](int j, int64_t i) {
      const uint4 wv = __ldg(w + i);
      float t[kLanes][kSums];  // each element widened once for all its terms
#pragma unroll
      for (int k = 0; k < kLanes; ++k) {
        Norm::dx_terms(t[k], vector_lane<T>(xv[j], k), vector_lane<T>(gv[j], k),
                       vector_lane<T>(wv, k), stats);
      }
#pragma unroll
      for (int n = 0; n < kSums; ++n) sums[n] += norm_tree_sum<T>([&](int k) { return t[k][n]; });
    });
    float means[kSums];
#pragma unroll
    for (int n = 0; n < kSums; ++n) means[n] = warp_sum(sums[n]) / static_cast<float>(channels);
    uint4* out = norm_vectors(dx, r, vectors);
    for_each_row_vector<kVectors>(vectors, lane, [&](int j, int64_t i) {
      const uint4 wv = __ldg(w + i);
      uint4 o = make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int k = 0; k < kLanes; ++k) {
        set_vector_lane<T>(o, k,
                           Norm::dx(vector_lane<T>(xv[j], k), vector_lane<T>(gv[j], k),
                                    vector_lane<T>(wv, k), stats, means));
      }
      out[i] = o;
    });
  }
}

// norm_partials_kernel with each thread on one 16-byte vector of channels (coalesced 16-byte
// loads); per channel the same sums in the same row order.
template <typename Norm, typename T>
__global__ void __launch_bounds__(kNormPartialThreads)
    norm_partials_vector_kernel(float* partial_w, float* partial_b, const T* dy, const T* x,
                                const float* mean, const float* rstd, int64_t rows,
                                int64_t channels, int64_t row_block) {
  constexpr int kLanes = kNormLanes<T>;
  constexpr int kPartials = kNormPartials<Norm>;
  const int64_t vectors = channels / kLanes;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= vectors) return;
  const int64_t r0 = blockIdx.y * row_block;
  const int64_t r1 = min(rows, r0 + row_block);
  float acc[kLanes][kPartials];
#pragma unroll
  for (int k = 0; k < kLanes; ++k) {
#pragma unroll
    for (int p = 0; p < kPartials; ++p) acc[k][p] = 0.0f;
  }
#pragma unroll 4
  for (int64_t r = r0; r < r1; ++r) {
    const uint4 gv = norm_vectors(dy, r, vectors)[i];
    const uint4 xv = norm_vectors(x, r, vectors)[i];
    const auto stats = Norm::load_stats(mean, rstd, r);
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      Norm::partial_terms(acc[k], vector_lane<T>(gv, k), vector_lane<T>(xv, k), stats);
    }
  }
  float* out_w = partial_w + blockIdx.y * channels + i * kLanes;
#pragma unroll
  for (int k = 0; k < kLanes; ++k) out_w[k] = acc[k][0];
  if constexpr (kPartials > 1) {
    if (partial_b != nullptr) {
      float* out_b = partial_b + blockIdx.y * channels + i * kLanes;
#pragma unroll
      for (int k = 0; k < kLanes; ++k) out_b[k] = acc[k][1];
    }
  }
}

// The launch shape of the weight-gradient partials, grid (channel tiles, row blocks): a thread
// per 16-byte vector of channels where the rows are vectors (norm_partials_vector_kernel), else
// a thread per channel (norm_partials_kernel).
struct NormPartialsShape {
  bool vectors;
  dim3 grid;
  int threads;
  int64_t row_block;
};
template <typename T>
NormPartialsShape norm_partials_shape(int64_t rows, int64_t channels,
                                      std::initializer_list<const void*> pointers) {
  const bool vectors = norm_rows_are_vectors<T>(channels, pointers);
  const int64_t columns = vectors ? channels / kNormLanes<T> : channels;
  const int threads = vectors ? kNormPartialThreads : kNormThreads;
  const auto tiles = static_cast<unsigned>((columns + threads - 1) / threads);
  return {vectors, dim3(tiles, static_cast<unsigned>(norm_row_blocks(rows))), threads,
          norm_row_block(rows)};
}

}  // namespace zero::backend::cuda
