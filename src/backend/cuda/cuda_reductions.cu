// sum / sum of squares of a whole tensor into a device f64 scalar, deterministic: fixed chunks of
// kChunk elements, one block each, reduced in f64 with a fixed tree; then one block adds the
// chunk sums (each thread a fixed strided subset in order, then the fixed tree). The result
// depends only on n, never on timing. Inf/NaN elements propagate (the overflow check relies on it).
#include <type_traits>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kFinishThreads = 1024;
constexpr int64_t kChunk = int64_t{1} << 16;

int64_t chunks_of(int64_t n) { return (n + kChunk - 1) / kChunk; }

template <typename T, bool kSquares>
__global__ void chunk_sums_kernel(double* partial, const T* x, int64_t n) {
  __shared__ double shared[kWarp];
  const int64_t begin = blockIdx.x * kChunk;
  const int64_t end = min(n, begin + kChunk);
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = static_cast<double>(load_f32(x, i));
    acc += kSquares ? v * v : v;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// chunk_sums_kernel<float, true> over the values it first rounds through R: the same chunks, the
// same element per thread and the same tree, so the sums have sum_squares's bits over the stored
// values. The rounded values go to `out`: f32 (possibly `values` itself: rounding in place) or R
// (a copy in the parameters' dtype). Each thread loads kRoundUnroll elements before it stores
// any: the compiler would not move a load above the previous element's store, leaving one 4-byte
// load in flight per thread - a third of the bandwidth a pass over a gradient needs.
constexpr int kRoundUnroll = 8;

template <typename R, typename Out>
__global__ void rounded_chunk_squares_kernel(double* partial, const float* values, Out* out,
                                             int64_t n) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, R>);
  __shared__ double shared[kWarp];
  const int64_t begin = blockIdx.x * kChunk;
  const int64_t end = min(n, begin + kChunk);
  const int64_t step = blockDim.x;
  double acc = 0.0;
  for (int64_t first = begin + threadIdx.x; first < end; first += kRoundUnroll * step) {
    float loaded[kRoundUnroll];
#pragma unroll
    for (int u = 0; u < kRoundUnroll; ++u) {
      const int64_t i = first + u * step;
      loaded[u] = i < end ? values[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kRoundUnroll; ++u) {
      const int64_t i = first + u * step;
      if (i < end) {
        const float stored = rounded_through<R>(loaded[u]);
        store_f32(out, i, stored);  // exact: `stored` is representable in Out
        const double v = static_cast<double>(stored);
        acc += v * v;
      }
    }
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void finish_kernel(double* out, const double* partial, int64_t chunks, double alpha,
                              bool accumulate) {
  __shared__ double shared[kWarp];
  double acc = 0.0;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) acc += partial[c];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) {
    const double value = alpha * acc;
    out[0] = accumulate ? out[0] + value : value;
  }
}

}  // namespace

size_t reduction_scratch_bytes(int64_t n) {
  const int64_t chunks = chunks_of(n);
  return static_cast<size_t>(chunks > 0 ? chunks : 1) * sizeof(double);
}

void launch_sum_into(double* out, const void* x, DType dtype, int64_t n, bool squares, double alpha,
                     bool accumulate, void* scratch, cudaStream_t stream) {
  const int64_t chunks = chunks_of(n);
  ZERO_CHECK(chunks <= INT32_MAX, "sum over " << n << " elements exceeds the grid");
  auto* partial = static_cast<double*>(scratch);
  if (chunks > 0) {
    dispatch_storage(dtype, squares ? "sum_squares" : "sum", [&](auto tag) {
      using T = decltype(tag);
      if (squares) {
        chunk_sums_kernel<T, true><<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
            partial, static_cast<const T*>(x), n);
      } else {
        chunk_sums_kernel<T, false><<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
            partial, static_cast<const T*>(x), n);
      }
    });
    ZERO_CUDA_CHECK_LAUNCH();
  }
  finish_kernel<<<1, kFinishThreads, 0, stream>>>(out, partial, chunks, alpha, accumulate);
  ZERO_CUDA_CHECK_LAUNCH();
}

namespace {

// rounded_chunk_squares_kernel over n values, then the chunk sums into out[0]: the rounded
// values stay f32 (in place, kToDtype false) or go to `rounded` in `dtype`.
template <bool kToDtype>
void launch_rounded_squares(double* out, const float* values, void* rounded, DType dtype,
                            int64_t n, void* scratch, cudaStream_t stream) {
  const int64_t chunks = chunks_of(n);
  ZERO_CHECK(chunks <= INT32_MAX, "sum over " << n << " elements exceeds the grid");
  auto* partial = static_cast<double*>(scratch);
  if (chunks > 0) {
    dispatch_storage(dtype, "rounded_sum_squares", [&](auto tag) {
      using R = decltype(tag);
      using Out = std::conditional_t<kToDtype, R, float>;
      rounded_chunk_squares_kernel<R, Out><<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
          partial, values, static_cast<Out*>(rounded), n);
    });
    ZERO_CUDA_CHECK_LAUNCH();
  }
  finish_kernel<<<1, kFinishThreads, 0, stream>>>(out, partial, chunks, 1.0, false);
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_rounded_sum_squares(double* out, float* values, DType through, int64_t n,
                                void* scratch, cudaStream_t stream) {
  launch_rounded_squares<false>(out, values, values, through, n, scratch, stream);
}

void launch_copy_sum_squares(double* out, void* dst, DType dst_dtype, const float* src, int64_t n,
                             void* scratch, cudaStream_t stream) {
  launch_rounded_squares<true>(out, src, dst, dst_dtype, n, scratch, stream);
}

}  // namespace zero::backend::cuda
