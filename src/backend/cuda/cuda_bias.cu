// The bias parts of the linear layers: broadcasting a bias into the output rows (used when the
// cuBLASLt bias epilogue is not available for a shape) and the bias gradient, a column sum over
// every row of dy. The column sum is deterministic: each block sums a fixed block of
// rows (partial_row_block) per column in f64 (in row order), and a second pass adds the blocks in
// order into dbias - the CPU's scheme with fixed blocks instead of fixed threads. Where dy's rows
// are 16-byte aligned, a thread sums one 16-byte vector of columns (8 bf16/f16, 4 f32): whole
// 128-byte lines per warp and row instead of 64 bytes, and independent f64 chains per column -
// the same additions in the same order, so the same bits.
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_vector_io.cuh"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void broadcast_rows_kernel(T* y, const T* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = bias[i % cols];
  }
}

// grid: (column tiles of blockDim.x, row blocks). partial[block][c] = sum of its rows.
template <typename T>
__global__ void column_partials_kernel(double* partial, const T* dy, int64_t rows, int64_t cols,
                                       int64_t row_block) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = blockIdx.y * row_block;
  const int64_t r1 = min(rows, r0 + row_block);
  double acc = 0.0;
  for (int64_t r = r0; r < r1; ++r) acc += static_cast<double>(load_f32(dy, r * cols + c));
  partial[blockIdx.y * cols + c] = acc;
}

// column_partials_kernel with kVectorWidth<T> columns per thread; cols % kVectorWidth<T> == 0
// and dy 16-byte aligned. grid: (column groups of blockDim.x vectors, row blocks).
template <typename T>
__global__ void column_partials_vector_kernel(double* partial, const T* dy, int64_t rows,
                                              int64_t cols, int64_t row_block) {
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t c0 = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kWidth;
  if (c0 >= cols) return;
  const int64_t r0 = blockIdx.y * row_block;
  const int64_t r1 = min(rows, r0 + row_block);
  double acc[kWidth];
#pragma unroll
  for (int l = 0; l < kWidth; ++l) acc[l] = 0.0;
#pragma unroll 4
  for (int64_t r = r0; r < r1; ++r) {
    float v[kWidth];
    load_vector<T, kWidth>(dy + r * cols + c0, v);
#pragma unroll
    for (int l = 0; l < kWidth; ++l) acc[l] += static_cast<double>(v[l]);
  }
#pragma unroll
  for (int l = 0; l < kWidth; ++l) partial[blockIdx.y * cols + c0 + l] = acc[l];
}

// dbias[c] += the partials of every row block: 32 columns per block of kFinishWarps warps, warp
// w adding blocks w, w + kFinishWarps, ... in order, then warp 0 the warp sums in warp order - a
// fixed order (deterministic) with blocks / kFinishWarps dependent additions per thread instead
// of all of them on ceil(cols / 256) blocks (3 for GPT-2's 768 columns: a serial tail).
template <typename T>
__global__ void __launch_bounds__(kFinishWarps * kWarp)
    column_finish_kernel(T* dbias, const double* partial, int64_t blocks, int64_t cols) {
  __shared__ double warp_sums[kFinishWarps][kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t c = blockIdx.x * int64_t{kWarp} + lane;
  double acc = 0.0;
  if (c < cols) {
#pragma unroll 8  // loads in flight per thread
    for (int64_t b = warp; b < blocks; b += kFinishWarps) acc += partial[b * cols + c];
  }
  warp_sums[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && c < cols) {
    double total = 0.0;
    for (int w = 0; w < kFinishWarps; ++w) total += warp_sums[w][lane];
    // The CPU adds the f64 column sum to dbias in f64 and rounds once.
    store_f32(dbias, c, static_cast<float>(static_cast<double>(load_f32(dbias, c)) + total));
  }
}

}  // namespace

void launch_broadcast_rows(void* y, const void* bias, DType dtype, int64_t rows, int64_t cols,
                           cudaStream_t stream) {
  if (rows * cols == 0) return;
  dispatch_storage(dtype, "linear_forward", [&](auto tag) {
    using T = decltype(tag);
    broadcast_rows_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(bias), rows, cols);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

size_t column_sum_scratch_bytes(int64_t rows, int64_t cols) {
  const int64_t row_block = partial_row_block(rows, kColumnSumRowBlock);
  const int64_t blocks = (rows + row_block - 1) / row_block;
  return static_cast<size_t>(blocks > 0 ? blocks : 1) * static_cast<size_t>(cols) * sizeof(double);
}

void launch_column_sums_accumulate(void* dbias, DType dbias_dtype, const void* dy, DType dtype,
                                   int64_t rows, int64_t cols, void* scratch,
                                   cudaStream_t stream) {
  if (cols == 0 || rows == 0) return;
  const int64_t row_block = partial_row_block(rows, kColumnSumRowBlock);
  const int64_t blocks = (rows + row_block - 1) / row_block;
  auto* partial = static_cast<double*>(scratch);
  dispatch_storage(dtype, "linear_backward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kWidth = kVectorWidth<T>;
    if (is_aligned16(dy) && cols % kWidth == 0) {
      constexpr int kVectorThreads = 128;
      const int64_t vectors = cols / kWidth;
      const dim3 grid(static_cast<unsigned>((vectors + kVectorThreads - 1) / kVectorThreads),
                      static_cast<unsigned>(blocks));
      column_partials_vector_kernel<<<grid, kVectorThreads, 0, stream>>>(
          partial, static_cast<const T*>(dy), rows, cols, row_block);
    } else {
      const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
                      static_cast<unsigned>(blocks));
      column_partials_kernel<<<grid, kThreads, 0, stream>>>(partial, static_cast<const T*>(dy),
                                                            rows, cols, row_block);
    }
    ZERO_CUDA_CHECK_LAUNCH();
    dispatch_grad<T>(dbias_dtype, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      column_finish_kernel<<<finish_grid(cols), kFinishWarps * kWarp, 0, stream>>>(
          static_cast<G*>(dbias), partial, blocks, cols);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
