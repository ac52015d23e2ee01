// GELU (tanh form) and SwiGLU, forward and backward: pointwise, f32 math, one rounding on store.
// Each op has a vector kernel (16-byte loads and stores, cuda_vector_io.cuh) where the pointers
// are 16-byte aligned (and, for SwiGLU, rows are whole vectors) and a scalar kernel for the rest;
// both evaluate the same inline function per element, so they store the same bits.
#include <initializer_list>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_vector_io.cuh"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// ---- per element ---------------------------------------------------------------------------

__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.0f + tanhf(kGeluScale * (v + kGeluCubic * v * v * v)));
}

// dL/dx from dL/dy = g at x = v.
__device__ __forceinline__ float gelu_gradient(float g, float v) {
  const float t = tanhf(kGeluScale * (v + kGeluCubic * v * v * v));
  const float dt = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v) * (1.0f - t * t);
  return g * (0.5f * (1.0f + t) + 0.5f * v * dt);
}

__device__ __forceinline__ float swiglu(float gate, float up) {
  const float sig = 1.0f / (1.0f + expf(-gate));
  return gate * sig * up;
}

struct SwigluGradient {
  float gate, up;
};
__device__ __forceinline__ SwigluGradient swiglu_gradient(float g, float gate, float up) {
  const float sig = 1.0f / (1.0f + expf(-gate));
  const float silu = gate * sig;
  return {g * up * sig * (1.0f + gate * (1.0f - sig)), g * silu};
}

// ---- scalar kernels (any alignment and size) -----------------------------------------------

template <typename T>
__global__ void gelu_forward_kernel(T* y, const T* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    store_f32(y, i, gelu(load_f32(x, i)));
  }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dx, const T* dy, const T* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    store_f32(dx, i, gelu_gradient(load_f32(dy, i), load_f32(x, i)));
  }
}

// gate_up is [rows, 2 * inner]: the gate in columns [0, inner), up in [inner, 2 * inner).
template <typename T>
__global__ void swiglu_forward_kernel(T* y, const T* gate_up, int64_t rows, int64_t inner) {
  const int64_t n = rows * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inner, c = i % inner;
    const float gate = load_f32(gate_up, r * 2 * inner + c);
    const float up = load_f32(gate_up, r * 2 * inner + inner + c);
    store_f32(y, i, swiglu(gate, up));
  }
}

// dgate_up may be gate_up's buffer: each element pair is read before it is written.
template <typename T>
__global__ void swiglu_backward_kernel(T* dgate_up, const T* dy, const T* gate_up, int64_t rows,
                                       int64_t inner) {
  const int64_t n = rows * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inner, c = i % inner;
    const int64_t gi = r * 2 * inner + c, ui = gi + inner;
    const SwigluGradient d =
        swiglu_gradient(load_f32(dy, i), load_f32(gate_up, gi), load_f32(gate_up, ui));
    store_f32(dgate_up, ui, d.up);
    store_f32(dgate_up, gi, d.gate);
  }
}

// ---- vector kernels ------------------------------------------------------------------------

// GELU over `vectors` whole vectors, then the n % kVectorWidth<T> elements after them (one
// thread each: a grid has at least 256 threads). No division: the 64-bit index only advances.
template <typename T>
__global__ void gelu_forward_vector_kernel(T* y, const T* x, int64_t vectors, int64_t n) {
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  for (int64_t q = first; q < vectors; q += int64_t{gridDim.x} * blockDim.x) {
    float v[kWidth];
    load_vector(x + q * kWidth, v);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) v[k] = gelu(v[k]);
    store_vector(y + q * kWidth, v);
  }
  const int64_t tail = vectors * kWidth + first;
  if (tail < n) store_f32(y, tail, gelu(load_f32(x, tail)));
}

template <typename T>
__global__ void gelu_backward_vector_kernel(T* dx, const T* dy, const T* x, int64_t vectors,
                                            int64_t n) {
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  for (int64_t q = first; q < vectors; q += int64_t{gridDim.x} * blockDim.x) {
    float v[kWidth], g[kWidth];
    load_vector(x + q * kWidth, v);
    load_vector(dy + q * kWidth, g);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) v[k] = gelu_gradient(g[k], v[k]);
    store_vector(dx + q * kWidth, v);
  }
  const int64_t tail = vectors * kWidth + first;
  if (tail < n) store_f32(dx, tail, gelu_gradient(load_f32(dy, tail), load_f32(x, tail)));
}

// SwiGLU's vector work: rows of `row_vectors` vectors (inner / kVectorWidth<T>), `vectors` in
// all, below 2^31 (the launch checks): 32-bit indices, one division per vector; element offsets
// are 64-bit.
struct SwigluVectors {
  uint32_t vectors, row_vectors;
  int64_t inner;
};

template <typename T>
__global__ void swiglu_forward_vector_kernel(T* y, const T* gate_up, SwigluVectors work) {
  constexpr int kWidth = kVectorWidth<T>;
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < work.vectors;
       q += gridDim.x * blockDim.x) {
    const uint32_t r = q / work.row_vectors;
    const uint32_t c = (q - r * work.row_vectors) * kWidth;
    const T* row = gate_up + int64_t{r} * 2 * work.inner + c;
    float gate[kWidth], up[kWidth];
    load_vector(row, gate);
    load_vector(row + work.inner, up);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) gate[k] = swiglu(gate[k], up[k]);
    store_vector(y + r * work.inner + c, gate);
  }
}

// dgate_up may be gate_up's buffer: a thread reads its vectors before it writes them.
template <typename T>
__global__ void swiglu_backward_vector_kernel(T* dgate_up, const T* dy, const T* gate_up,
                                              SwigluVectors work) {
  constexpr int kWidth = kVectorWidth<T>;
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < work.vectors;
       q += gridDim.x * blockDim.x) {
    const uint32_t r = q / work.row_vectors;
    const uint32_t c = (q - r * work.row_vectors) * kWidth;
    const int64_t gi = int64_t{r} * 2 * work.inner + c, ui = gi + work.inner;
    float gate[kWidth], up[kWidth], g[kWidth];
    load_vector(gate_up + gi, gate);
    load_vector(gate_up + ui, up);
    load_vector(dy + r * work.inner + c, g);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const SwigluGradient d = swiglu_gradient(g[k], gate[k], up[k]);
      gate[k] = d.gate;
      up[k] = d.up;
    }
    store_vector(dgate_up + ui, up);
    store_vector(dgate_up + gi, gate);
  }
}

// The vector kernels apply when every pointer is 16-byte aligned and, for SwiGLU, a row half
// (inner) is whole vectors and the vector count fits 31 bits.
bool all_aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (!is_aligned16(p)) return false;
  }
  return true;
}

template <typename T>
bool swiglu_vectorizable(int64_t rows, int64_t inner, std::initializer_list<const void*> pointers) {
  return inner % kVectorWidth<T> == 0 && rows * (inner / kVectorWidth<T>) < (int64_t{1} << 31) &&
         all_aligned(pointers);
}

template <typename T>
SwigluVectors swiglu_vectors(int64_t rows, int64_t inner) {
  const int64_t row_vectors = inner / kVectorWidth<T>;
  return {static_cast<uint32_t>(rows * row_vectors), static_cast<uint32_t>(row_vectors), inner};
}

}  // namespace

void launch_gelu_forward(void* y, const void* x, DType dtype, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_storage(dtype, "gelu_forward", [&](auto tag) {
    using T = decltype(tag);
    if (all_aligned({y, x})) {
      const int64_t vectors = n / kVectorWidth<T>;
      gelu_forward_vector_kernel<T>
          <<<grid_for(vectors, kThreads), kThreads, 0, stream>>>(
              static_cast<T*>(y), static_cast<const T*>(x), vectors, n);
    } else {
      gelu_forward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(y), static_cast<const T*>(x), n);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_gelu_backward(void* dx, const void* dy, const void* x, DType dtype, int64_t n,
                          cudaStream_t stream) {
  if (n == 0) return;
  dispatch_storage(dtype, "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    if (all_aligned({dx, dy, x})) {
      const int64_t vectors = n / kVectorWidth<T>;
      gelu_backward_vector_kernel<T>
          <<<grid_for(vectors, kThreads), kThreads, 0, stream>>>(
              static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), vectors,
              n);
    } else {
      gelu_backward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), n);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_forward(void* y, const void* gate_up, DType dtype, int64_t rows, int64_t inner,
                           cudaStream_t stream) {
  if (rows * inner == 0) return;
  dispatch_storage(dtype, "swiglu_forward", [&](auto tag) {
    using T = decltype(tag);
    if (swiglu_vectorizable<T>(rows, inner, {y, gate_up})) {
      const SwigluVectors work = swiglu_vectors<T>(rows, inner);
      swiglu_forward_vector_kernel<T><<<grid_for(work.vectors, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(y), static_cast<const T*>(gate_up), work);
    } else {
      swiglu_forward_kernel<T><<<grid_for(rows * inner, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(y), static_cast<const T*>(gate_up), rows, inner);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(void* dgate_up, const void* dy, const void* gate_up, DType dtype,
                            int64_t rows, int64_t inner, cudaStream_t stream) {
  if (rows * inner == 0) return;
  dispatch_storage(dtype, "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    if (swiglu_vectorizable<T>(rows, inner, {dgate_up, dy, gate_up})) {
      const SwigluVectors work = swiglu_vectors<T>(rows, inner);
      swiglu_backward_vector_kernel<T><<<grid_for(work.vectors, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(dgate_up), static_cast<const T*>(dy), static_cast<const T*>(gate_up),
          work);
    } else {
      swiglu_backward_kernel<T><<<grid_for(rows * inner, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(dgate_up), static_cast<const T*>(dy), static_cast<const T*>(gate_up),
          rows, inner);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
