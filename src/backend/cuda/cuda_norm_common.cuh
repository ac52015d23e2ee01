// Shared pieces of the LayerNorm and RMSNorm kernels: the weight-gradient finishing pass (the
// per-row-block partial sums added in block order into the accumulating gradient) and the
// launch geometry of the block-per-row kernels (the fallback where the warp-per-row kernels of
// cuda_norm_vector.cuh cannot run).
#pragma once
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {

inline constexpr int kNormThreads = 256;

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

// grad[c] += the partials of every row block. 32 channels per block of kFinishWarps warps: warp w
// adds blocks w, w + kFinishWarps, ... in order, then warp 0 adds grad and the warp sums in warp
// order - a fixed order (deterministic), and each thread walks blocks / kFinishWarps partials
// instead of all of them on ceil(C / 256) blocks.
template <typename T>
__global__ void norm_finish_kernel(T* grad, const float* partial, int64_t blocks,
                                   int64_t channels) {
  __shared__ float warp_sums[kFinishWarps][kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t c = blockIdx.x * int64_t{kWarp} + lane;
  float acc = 0.0f;
  if (c < channels) {
#pragma unroll 4
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
