// GELU (tanh form) and SwiGLU, forward and backward: pointwise, f32 math, one rounding on store.
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

template <typename T>
__global__ void gelu_forward_kernel(T* y, const T* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = load_f32(x, i);
    store_f32(y, i, 0.5f * v * (1.0f + tanhf(kGeluScale * (v + kGeluCubic * v * v * v))));
  }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dx, const T* dy, const T* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = load_f32(x, i);
    const float t = tanhf(kGeluScale * (v + kGeluCubic * v * v * v));
    const float dt = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v) * (1.0f - t * t);
    store_f32(dx, i, load_f32(dy, i) * (0.5f * (1.0f + t) + 0.5f * v * dt));
  }
}

template <typename T>
__global__ void swiglu_forward_kernel(T* y, const T* gate_up, int64_t rows, int64_t inner) {
  const int64_t n = rows * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inner, c = i % inner;
    const float gate = load_f32(gate_up, r * 2 * inner + c);
    const float up = load_f32(gate_up, r * 2 * inner + inner + c);
    const float sig = 1.0f / (1.0f + expf(-gate));
    store_f32(y, i, gate * sig * up);
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
    const float gate = load_f32(gate_up, gi);
    const float up = load_f32(gate_up, ui);
    const float g = load_f32(dy, i);
    const float sig = 1.0f / (1.0f + expf(-gate));
    const float silu = gate * sig;
    store_f32(dgate_up, ui, g * silu);
    store_f32(dgate_up, gi, g * up * sig * (1.0f + gate * (1.0f - sig)));
  }
}

}  // namespace

void launch_gelu_forward(void* y, const void* x, DType dtype, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_storage(dtype, "gelu_forward", [&](auto tag) {
    using T = decltype(tag);
    gelu_forward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(x), n);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_gelu_backward(void* dx, const void* dy, const void* x, DType dtype, int64_t n,
                          cudaStream_t stream) {
  if (n == 0) return;
  dispatch_storage(dtype, "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    gelu_backward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), n);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_forward(void* y, const void* gate_up, DType dtype, int64_t rows, int64_t inner,
                           cudaStream_t stream) {
  if (rows * inner == 0) return;
  dispatch_storage(dtype, "swiglu_forward", [&](auto tag) {
    using T = decltype(tag);
    swiglu_forward_kernel<T><<<grid_for(rows * inner, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(gate_up), rows, inner);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(void* dgate_up, const void* dy, const void* gate_up, DType dtype,
                            int64_t rows, int64_t inner, cudaStream_t stream) {
  if (rows * inner == 0) return;
  dispatch_storage(dtype, "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    swiglu_backward_kernel<T><<<grid_for(rows * inner, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(dgate_up), static_cast<const T*>(dy), static_cast<const T*>(gate_up), rows,
        inner);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
