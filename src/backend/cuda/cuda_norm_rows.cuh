// The shared skeleton of the LayerNorm and RMSNorm kernels, part 2: the warp-per-row kernels
// (cuda_norm_vector.cuh: a warp per row, the row held in registers as 16-byte vectors,
// warp-shuffle sums; the backward's also summing the weight gradients of its rows) and the
// vectorised weight-gradient partials, parameterised on a norm's math and taking the
// block-per-row kernels' parameters (both in cuda_norm_common.cuh). cuda_layernorm.cu,
// cuda_rmsnorm.cu (forward) and cuda_norm_backward.cu instantiate them with a norm's math and
// launch them where norm_vectors_per_lane / norm_rows_are_vectors allow (the launches stay in
// the .cu files: the CUDA simulator rewrites <<<>>> there only). Per element the math runs in
// the same order on either path; the row sums differ in grouping only (per lane: vector tree
// sums in slot order, then the warp tree).
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

// Rows per warp of norm_backward_rows_kernel: kNormFusedRowBlock consecutive rows, or more so that
// the grid keeps to about kNormFusedWarps warps - one wave of 256 blocks on an H100 or H200 at
// 2 or more blocks an SM (GPT-2's 16384 rows: 16 a warp; Llama 1B's 8192: 8) - a function of the
// row count alone, so that a shape always sums its weight gradients in the same order. Each warp
// writes one partial row.
inline constexpr int64_t kNormFusedRowBlock = 8;
inline constexpr int64_t kNormFusedWarps = 1024;
inline int64_t norm_fused_row_block(int64_t rows) {
  const int64_t spread = (rows + kNormFusedWarps - 1) / kNormFusedWarps;
  return spread > kNormFusedRowBlock ? spread : kNormFusedRowBlock;
}
inline int64_t norm_fused_partial_rows(int64_t rows) {
  const int64_t block = norm_fused_row_block(rows);
  return (rows + block - 1) / block;
}
inline unsigned norm_fused_grid(int64_t rows) {
  return static_cast<unsigned>((norm_fused_partial_rows(rows) + kNormRowWarps - 1) /
                               kNormRowWarps);
}
// The vectors per lane up to which the backward also keeps the weight-gradient sums in registers
// (kPartials below): the two rows' 4 registers a vector plus the f32 sums, kNormLanes<T> x
// kNormPartials<Norm> a vector, within 128 registers - bf16 RMSNorm rows up to 2048 channels,
// bf16 LayerNorm rows up to 1024, f32 rows up to 1024.
template <typename Norm, typename T>
constexpr int norm_fused_max_vectors() {
  int vectors = 1;
  while (2 * vectors * (8 + kNormLanes<T> * kNormPartials<Norm>) <= 128) vectors *= 2;
  return vectors;
}

// The backward's dx, a warp per row on vectors held in registers (x, dy and the residual between
// the sums and dx; dx may be dy's or the residual's buffer: a lane loads its vectors before it
// stores them). Warp w of the grid takes rows [w row_block, (w + 1) row_block) in order.
// With kPartials it also adds each row's weight (and bias) gradient terms into per-lane f32 sums
// of its channels and stores them as partial row w ([partial rows, channels], partial_b null
// without a bias gradient) for norm_finish_kernel: x and dy are read once, where a separate
// partials kernel read them again.
template <typename Norm, typename T, int kVectors, bool kPartials>
__global__ void __launch_bounds__(kNormRowThreads)
    norm_backward_rows_kernel(T* dx, float* partial_w, float* partial_b, const T* dy, const T* x,
                              const T* weight, const float* mean, const float* rstd,
                              int64_t rows, int64_t channels, int64_t row_block,
                              const T* residual) {
  constexpr int kLanes = kNormLanes<T>;
  constexpr int kSums = Norm::kDxSums;
  constexpr int kSlots = kPartials ? kNormPartials<Norm> : 1;
  const int lane = threadIdx.x % kWarp;
  const int64_t warp_index = blockIdx.x * int64_t{kNormRowWarps} + threadIdx.x / kWarp;
  const int64_t r0 = warp_index * row_block;
  if (r0 >= rows) return;  // the whole warp
  const int64_t r1 = min(rows, r0 + row_block);
  const int64_t vectors = channels / kLanes;
  const uint4* w = reinterpret_cast<const uint4*>(weight);
  float acc[kVectors][kLanes][kSlots];
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
#pragma unroll
      for (int n = 0; n < kSlots; ++n) acc[j][k][n] = 0.0f;
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    // The residual's row is loaded with x's and dy's, before the row sums: its loads then wait
    // in the same DRAM round trip instead of a second one after the warp's reductions (a warp
    // walks its rows one after another, so each row costs its round trips in full).
    uint4 xv[kVectors], gv[kVectors], rv[kVectors];
    norm_load_row<T>(xv, x, r, vectors, lane);
    norm_load_row<T>(gv, dy, r, vectors, lane);
    if (residual != nullptr) {
      norm_load_row<T>(rv, residual, r, vectors, lane);
    } else {
#pragma unroll
      for (int j = 0; j < kVectors; ++j) rv[j] = make_uint4(0, 0, 0, 0);  // unused
    }
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
        const float xk = vector_lane<T>(xv[j], k), gk = vector_lane<T>(gv[j], k);
        set_vector_lane<T>(o, k, Norm::dx(xk, gk, vector_lane<T>(wv, k), stats, means));
        if constexpr (kPartials) Norm::partial_terms(acc[j][k], gk, xk, stats);
      }
      if (residual != nullptr) {  // add(dx, residual): dx as stored + residual, rounded again
#pragma unroll
        for (int k = 0; k < kLanes; ++k) {
          set_vector_lane<T>(o, k, vector_lane<T>(o, k) + vector_lane<T>(rv[j], k));
        }
      }
      out[i] = o;
    });
  }
  if constexpr (kPartials) {
    for_each_row_vector<kVectors>(vectors, lane, [&](int j, int64_t i) {
      float* out_w = partial_w + warp_index * channels + i * kLanes;
#pragma unroll
      for (int k = 0; k < kLanes; ++k) out_w[k] = acc[j][k][0];
      if constexpr (kSlots > 1) {
        if (partial_b != nullptr) {
          float* out_b = partial_b + warp_index * channels + i * kLanes;
#pragma unroll
          for (int k = 0; k < kLanes; ++k) out_b[k] = acc[j][k][1];
        }
      }
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
