// The shared skeleton of the LayerNorm and RMSNorm kernels, part 1: the contract a norm's math
// meets, the kernels' parameters, the block-per-row kernels (the fallback where the warp-per-row
// kernels of cuda_norm_rows.cuh cannot run) with their launch geometry, and the weight-gradient
// finishing pass (the per-row-block partial sums added in block order into the accumulating
// gradient).
//
// A norm's math (LayerNormMath in cuda_layernorm_rows.cuh, RmsNormMath in cuda_rmsnorm_rows.cuh)
// is a struct of static device functions on f32 values; the skeleton owns the rows (loads,
// stores, loops, reductions, launch geometry) and calls it per row and per element, so the
// warp-per-row and block-per-row paths run one expression per element (an edit there changes
// the bits of both):
//   kBias      the forward adds an optional bias and the backward sums its gradient (a second
//              partial sum per channel)
//   kDxSums    how many row means of dx_terms the dx needs
//   Stats      a row's statistics: what the forward stores (store_stats into mean / rstd at row
//              r) and the backward reads back (load_stats)
//   forward_stats(row_mean, eps): the row's Stats, where row_mean(term) is the f32 mean over
//              the row of term(x) (per thread in element order, then the warp or block sum)
//   forward(x, stats, w): y before the bias
//   dx_terms(t, x, dy, w, stats): the element's kDxSums terms into t
//   dx(x, dy, w, stats, means): dx from the row means of those terms
//   partial_terms(acc, dy, x, stats): adds the element to the weight (and bias) gradient sums
#pragma once
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {

inline constexpr int kNormThreads = 256;

// The kernels' parameters, the same for both norms (LayerNorm's; the RMSNorm passes null for
// mean and bias): rows of `channels` T; mean and rstd f32 per row; with a residual the forward
// stores x + residual to sum_out (which may be x) and normalises that; dx may be dy's buffer;
// the weight-gradient partials are [row blocks, channels] f32 (block b over rows
// [b row_block, (b + 1) row_block)), partial_b null without a bias gradient.

// Weight-gradient sums per channel: the weight's, and the bias's for kBias norms.
template <typename Norm>
inline constexpr int kNormPartials = Norm::kBias ? 2 : 1;

// Rows per partial-sum block of the weight gradients, and how many blocks.
inline int64_t norm_row_block(int64_t rows) { return partial_row_block(rows, kNormRowBlock); }
inline int64_t norm_row_blocks(int64_t rows) {
  const int64_t block = norm_row_block(rows);
  return (rows + block - 1) / block;
}

inline unsigned norm_row_grid(int64_t rows) {
  constexpr int64_t kMaxBlocks = 65535;
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

// The fused residual add of the forward norms: with a residual, row r's x + residual is stored
// to sum_out (rounded to T, as the add op rounds it) and that stored row is what gets
// normalised; each thread reads back only the elements it wrote. Without one, x's row. (The
// block-per-row kernels' version; norm_load_input in cuda_norm_vector.cuh is the warp-per-row
// one, with the same rounding.)
template <typename T>
__device__ __forceinline__ const T* norm_input_row(const T* x, T* sum_out, const T* residual,
                                                   int64_t r, int64_t channels) {
  const T* row = x + r * channels;
  if (residual == nullptr) return row;
  T* stored = sum_out + r * channels;
  const T* res = residual + r * channels;
  for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
    store_f32(stored, i, load_f32(row, i) + load_f32(res, i));
  }
  return stored;
}

// ---- the block-per-row kernels ---------------------------------------------------------------
// A block per row (grid-stride), each thread on channels threadIdx.x, + blockDim.x, ...; any
// channel count and alignment.

// The CUDA simulator rewrites __shared__ declarations in .cu files only (static storage poisoned
// when a block first reaches it, as shared memory holds garbage until written); the kernels in
// this header poison theirs here. Nothing under nvcc.
template <typename S>
__device__ __forceinline__ void norm_poison_shared([[maybe_unused]] S& shared) {
#ifdef ZERO_CUDA_SIM
  ::cuda_sim::poison_static_shared(&shared, sizeof(shared));
#endif
}

template <typename Norm, typename T>
__global__ void norm_forward_kernel(T* y, float* mean_out, float* rstd_out, const T* x,
                                    const T* weight, const T* bias, int64_t rows,
                                    int64_t channels, float eps, T* sum_out, const T* residual) {
  __shared__ float shared[kWarp];
  norm_poison_shared(shared);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = norm_input_row(x, sum_out, residual, r, channels);
    const auto stats = Norm::forward_stats(
        [&](auto term) {
          float sum = 0.0f;
          for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
            sum += term(load_f32(row, i));
          }
          return block_sum(sum, shared) / static_cast<float>(channels);
        },
        eps);
    T* out = y + r * channels;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      float v = Norm::forward(load_f32(row, i), stats, load_f32(weight, i));
      if constexpr (Norm::kBias) {
        if (bias != nullptr) v += load_f32(bias, i);
      }
      store_f32(out, i, v);
    }
    if (threadIdx.x == 0) Norm::store_stats(stats, mean_out, rstd_out, r);
  }
}

template <typename Norm, typename T>
__global__ void norm_dx_kernel(T* dx, const T* dy, const T* x, const T* weight, const float* mean,
                               const float* rstd, int64_t rows, int64_t channels,
                               const T* residual) {
  __shared__ float shared[kWarp];
  norm_poison_shared(shared);
  constexpr int kSums = Norm::kDxSums;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * channels;
    const T* g = dy + r * channels;
    const auto stats = Norm::load_stats(mean, rstd, r);
    float sums[kSums] = {};
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      float t[kSums];
      Norm::dx_terms(t, load_f32(row, i), load_f32(g, i), load_f32(weight, i), stats);
#pragma unroll
      for (int n = 0; n < kSums; ++n) sums[n] += t[n];
    }
    float means[kSums];
#pragma unroll
    for (int n = 0; n < kSums; ++n) {
      means[n] = block_sum(sums[n], shared) / static_cast<float>(channels);
    }
    T* out = dx + r * channels;
    const T* res = residual != nullptr ? residual + r * channels : nullptr;
    for (int64_t i = threadIdx.x; i < channels; i += blockDim.x) {
      store_f32(out, i,
                Norm::dx(load_f32(row, i), load_f32(g, i), load_f32(weight, i), stats, means));
      // With a residual, add()'s arithmetic on dx as stored (this thread wrote it).
      if (res != nullptr) store_f32(out, i, load_f32(out, i) + load_f32(res, i));
    }
  }
}

// grid (channel tiles, row blocks): each thread one channel's sums over the block's rows, in
// row order.
template <typename Norm, typename T>
__global__ void norm_partials_kernel(float* partial_w, float* partial_b, const T* dy, const T* x,
                                     const float* mean, const float* rstd, int64_t rows,
                                     int64_t channels, int64_t row_block) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const int64_t r0 = blockIdx.y * row_block;
  const int64_t r1 = min(rows, r0 + row_block);
  float acc[kNormPartials<Norm>] = {};
  for (int64_t r = r0; r < r1; ++r) {
    Norm::partial_terms(acc, load_f32(dy, r * channels + c),
                        load_f32(x, r * channels + c), Norm::load_stats(mean, rstd, r));
  }
  partial_w[blockIdx.y * channels + c] = acc[0];
  if constexpr (kNormPartials<Norm> > 1) {
    if (partial_b != nullptr) partial_b[blockIdx.y * channels + c] = acc[1];
  }
}

// grad[c] += the partials of every row block. 32 channels per block of kFinishWarps warps: warp w
// adds blocks w, w + kFinishWarps, ... in order, then warp 0 adds grad and the warp sums in warp
// order - a fixed order (deterministic), and each thread walks blocks / kFinishWarps partials
// instead of all of them on ceil(C / 256) blocks.
template <typename T>
__global__ void __launch_bounds__(kFinishWarps * kWarp)
    norm_finish_kernel(T* grad, const float* partial, int64_t blocks, int64_t channels) {
  __shared__ float warp_sums[kFinishWarps][kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t c = blockIdx.x * int64_t{kWarp} + lane;
  float acc = 0.0f;
  if (c < channels) {
#pragma unroll 8  // loads in flight per thread
    for (int64_t b = warp; b < blocks; b += kFinishWarps) acc += partial[b * channels + c];
  }
  warp_sums[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && c < channels) {
    float total = load_f32(grad, c);
    for (int w = 0; w < kFinishWarps; ++w) total += warp_sums[w][lane];
    store_f32(grad, c, total);
  }
}

}  // namespace zero::backend::cuda
