// fill / dtype conversion / stochastic rounding / add / scale. Compiled without fused
// multiply-add (CMake: --fmad=false) so y += a * x rounds twice, as the CPU backend's loops do:
// these ops give the CPU's bits.
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_vector_io.cuh"
#include "core/stochastic_rounding.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void fill_kernel(T* dst, T value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = value;
  }
}

// Widening loads to double (exact from every floating storage type) and narrowing stores.
__device__ __forceinline__ double load_wide(const double* p, int64_t i) { return p[i]; }
template <typename T>
__device__ __forceinline__ double load_wide(const T* p, int64_t i) {
  return static_cast<double>(load_f32(p, i));
}

// f64 -> float rounded toward zero with the lowest bit set when anything was discarded (round to
// odd): rounding that float once more to 16 bits gives the correctly rounded 16-bit value.
__device__ __forceinline__ float narrow_to_odd(double v) {
  const float f = __double2float_rz(v);
  if (static_cast<double>(f) == v || isnan(v)) return f;
  return __uint_as_float(__float_as_uint(f) | 1u);
}

template <typename D, typename S>
__global__ void convert_kernel(D* dst, const S* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    if constexpr (std::is_same_v<D, double>) {
      dst[i] = load_wide(src, i);
    } else if constexpr (std::is_same_v<S, double>) {
      if constexpr (std::is_same_v<D, float>) {
        dst[i] = __double2float_rn(src[i]);
      } else {
        store_f32(dst, i, narrow_to_odd(src[i]));
      }
    } else {
      store_f32(dst, i, load_f32(src, i));
    }
  }
}

__global__ void stochastic_round_kernel(bf16* dst, const float* src, int64_t n, uint64_t seed,
                                        uint64_t first_index) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t index = first_index + static_cast<uint64_t>(i);
    dst[i].bits = float_to_bf16_bits_stochastic(src[i], stochastic_rounding_bits(seed, index));
  }
}

template <typename Y, typename X>
__global__ void add_kernel(Y* y, const X* x, float alpha, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    store_f32(y, i, load_f32(y, i) + alpha * load_f32(x, i));
  }
}

// add_kernel for y and x of one storage type, both 16-byte aligned: one 16-byte vector of each
// per thread and step (the residual-gradient adds of a backward are bandwidth-bound), the
// same f32 arithmetic and rounding per element; the last n % width elements go one by one.
template <typename T>
__global__ void add_vector_kernel(T* y, const T* x, float alpha, int64_t n) {
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t vectors = n / kWidth;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < vectors; v += stride) {
    float yl[kWidth], xl[kWidth];
    load_vector<T, kWidth>(y + v * kWidth, yl);
    load_vector<T, kWidth>(x + v * kWidth, xl);
#pragma unroll
    for (int l = 0; l < kWidth; ++l) yl[l] = yl[l] + alpha * xl[l];
    store_vector<T, kWidth>(y + v * kWidth, yl);
  }
  for (int64_t i = vectors * kWidth + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += stride) {
    store_f32(y, i, load_f32(y, i) + alpha * load_f32(x, i));
  }
}

// acc += x rounded to R: store_f32 rounds as the conversion kernel does, load_f32 widens back,
// and 1.0f * v + acc is add_kernel's arithmetic at alpha 1 - so the bits of convert, convert,
// add. Four elements per 16-byte access where acc and x allow it.
template <typename R>
__global__ void add_rounded_kernel(float* acc, const float* x, int64_t n) {
  const bool vectors = reinterpret_cast<uintptr_t>(acc) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(x) % 16 == 0;
  const int64_t quads = vectors ? n / 4 : 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < quads; q += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[q];
    float4 a = reinterpret_cast<float4*>(acc)[q];
    a.x = a.x + 1.0f * rounded_through<R>(v.x);
    a.y = a.y + 1.0f * rounded_through<R>(v.y);
    a.z = a.z + 1.0f * rounded_through<R>(v.z);
    a.w = a.w + 1.0f * rounded_through<R>(v.w);
    reinterpret_cast<float4*>(acc)[q] = a;
  }
  for (int64_t i = 4 * quads + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    acc[i] = acc[i] + 1.0f * rounded_through<R>(x[i]);
  }
}

// values = R(values) widened back: the conversion kernels' rounding, in place, four elements per
// 16-byte access where the buffer allows it.
template <typename R>
__global__ void round_in_place_kernel(float* values, int64_t n) {
  const int64_t quads = reinterpret_cast<uintptr_t>(values) % 16 == 0 ? n / 4 : 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < quads; q += stride) {
    float4 v = reinterpret_cast<float4*>(values)[q];
    v.x = rounded_through<R>(v.x);
    v.y = rounded_through<R>(v.y);
    v.z = rounded_through<R>(v.z);
    v.w = rounded_through<R>(v.w);
    reinterpret_cast<float4*>(values)[q] = v;
  }
  for (int64_t i = 4 * quads + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    values[i] = rounded_through<R>(values[i]);
  }
}

template <typename T>
__global__ void scale_kernel(T* y, float alpha, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    store_f32(y, i, load_f32(y, i) * alpha);
  }
}

// Every thread derives the factor itself from the f64 norm: IEEE f64 sqrt and division are
// correctly rounded, so it is the CPU's factor bit for bit, with no extra launch to share it.
__global__ void scale_by_inverse_norm_kernel(float* x, const double* squared_norm, double eps,
                                             int64_t n) {
  const float factor = static_cast<float>(1.0 / (sqrt(*squared_norm) + eps));
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = x[i] * factor;
  }
}

// The row-strided twin of scale_kernel: element i of the [rows, cols] view is row i / cols.
template <typename T>
__global__ void scale_rows_kernel(T* y, float alpha, int64_t n, int64_t cols, int64_t pitch) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t at = (i / cols) * pitch + i % cols;
    store_f32(y, at, load_f32(y, at) * alpha);
  }
}

__global__ void scale_rows_f64_kernel(double* y, double alpha, int64_t n, int64_t cols,
                                      int64_t pitch) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[(i / cols) * pitch + i % cols] *= alpha;
  }
}

// f64 add/scale: the engine sums its per-step f64 scalars (the loss) on the device.
__global__ void add_f64_kernel(double* y, const double* x, double alpha, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += alpha * x[i];
  }
}

__global__ void scale_f64_kernel(double* y, double alpha, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] *= alpha;
  }
}

// Calls fn(T{}) with the storage type of any floating dtype, f64 included (conversions only).
template <typename Fn>
void dispatch_any_floating(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF64:
      fn(double{});
      return;
    default:
      dispatch_storage(dtype, "copy", fn);
  }
}

}  // namespace

void launch_fill_pattern(void* dst, size_t element_size, uint64_t pattern, int64_t n,
                         cudaStream_t stream) {
  if (n == 0) return;
  const unsigned grid = grid_for(n, kThreads);
  switch (element_size) {
    case 1:
      fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<uint8_t*>(dst),
                                                 static_cast<uint8_t>(pattern), n);
      break;
    case 2:
      fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<uint16_t*>(dst),
                                                 static_cast<uint16_t>(pattern), n);
      break;
    case 4:
      fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<uint32_t*>(dst),
                                                 static_cast<uint32_t>(pattern), n);
      break;
    default:
      fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<uint64_t*>(dst), pattern, n);
      break;
  }
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, int64_t n,
                    cudaStream_t stream) {
  if (n == 0) return;
  dispatch_any_floating(dst_dtype, [&](auto dst_tag) {
    using D = decltype(dst_tag);
    dispatch_any_floating(src_dtype, [&](auto src_tag) {
      using S = decltype(src_tag);
      convert_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<D*>(dst),
                                                                     static_cast<const S*>(src), n);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_stochastic_round_to_bf16(void* dst, const float* src, int64_t n, uint64_t seed,
                                     int64_t first_index, cudaStream_t stream) {
  if (n == 0) return;
  stochastic_round_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(
      static_cast<bf16*>(dst), src, n, seed, static_cast<uint64_t>(first_index));
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_add(void* y, DType y_dtype, const void* x, DType x_dtype, int64_t n, double alpha,
                cudaStream_t stream) {
  if (n == 0) return;
  if (y_dtype == DType::kF64 || x_dtype == DType::kF64) {
    if (y_dtype != x_dtype) {
      throw UnsupportedError(std::string("add on the CUDA backend: ") + dtype_name(y_dtype) +
                             " += " + dtype_name(x_dtype) +
                             " is not supported (f64 only with f64)");
    }
    add_f64_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<double*>(y), static_cast<const double*>(x), alpha, n);
    ZERO_CUDA_CHECK_LAUNCH();
    return;
  }
  dispatch_storage(y_dtype, "add", [&](auto y_tag) {
    using Y = decltype(y_tag);
    dispatch_storage(x_dtype, "add", [&](auto x_tag) {
      using X = decltype(x_tag);
      if constexpr (std::is_same_v<X, Y>) {
        if (is_aligned16(y) && is_aligned16(x)) {
          add_vector_kernel<Y><<<grid_for((n + kVectorWidth<Y> - 1) / kVectorWidth<Y>, kThreads),
                                 kThreads, 0, stream>>>(static_cast<Y*>(y), static_cast<const X*>(x),
                                                        static_cast<float>(alpha), n);
          return;
        }
      }
      add_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(
          static_cast<Y*>(y), static_cast<const X*>(x), static_cast<float>(alpha), n);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_add_rounded(float* acc, const float* x, DType through, int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return;
  dispatch_storage(through, "add_rounded", [&](auto tag) {
    using R = decltype(tag);
    add_rounded_kernel<R><<<grid_for((n + 3) / 4, kThreads), kThreads, 0, stream>>>(acc, x, n);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_round_in_place(float* values, DType through, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_storage(through, "round_in_place", [&](auto tag) {
    using R = decltype(tag);
    round_in_place_kernel<R><<<grid_for((n + 3) / 4, kThreads), kThreads, 0, stream>>>(values, n);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_scale(void* y, DType dtype, int64_t n, double alpha, cudaStream_t stream) {
  if (n == 0) return;
  if (dtype == DType::kF64) {
    scale_f64_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<double*>(y), alpha,
                                                                     n);
    ZERO_CUDA_CHECK_LAUNCH();
    return;
  }
  dispatch_storage(dtype, "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<T*>(y),
                                                                 static_cast<float>(alpha), n);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_scale_by_inverse_norm(float* x, const double* squared_norm, double eps, int64_t n,
                                  cudaStream_t stream) {
  if (n == 0) return;
  scale_by_inverse_norm_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, squared_norm,
                                                                               eps, n);
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_scale_rows(void* y, DType dtype, int64_t rows, int64_t cols, int64_t pitch,
                       double alpha, cudaStream_t stream) {
  if (pitch == cols) {
    launch_scale(y, dtype, rows * cols, alpha, stream);
    return;
  }
  const int64_t n = rows * cols;
  if (n == 0) return;
  if (dtype == DType::kF64) {
    scale_rows_f64_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<double*>(y), alpha, n, cols, pitch);
    ZERO_CUDA_CHECK_LAUNCH();
    return;
  }
  dispatch_storage(dtype, "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_rows_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<float>(alpha), n, cols, pitch);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
