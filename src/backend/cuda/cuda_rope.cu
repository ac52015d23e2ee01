// Rotary position embedding in place on a [B, T, H, D] view (rotate-half convention; inverse
// rotates by -angle, the backward of the forward). Compiled without fused multiply-add so the
// result has the CPU's bits.
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;

// T: the storage of x; C: of the tables (T, or f32 with 16-bit x: the model's tables stay f32).
template <typename T, typename C>
__global__ void rope_kernel(T* x, HeadLayout layout, const C* cos, const C* sin, float sign) {
  const int64_t half = layout.head_dim / 2;
  const int64_t n = layout.batch * layout.seq * layout.heads * half;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e % half;
    const int64_t h = (e / half) % layout.heads;
    const int64_t t = (e / (half * layout.heads)) % layout.seq;
    const int64_t b = e / (half * layout.heads * layout.seq);
    T* v = x + b * layout.batch_stride + t * layout.seq_stride + h * layout.head_stride;
    const float lo = load_f32(v, i), hi = load_f32(v, i + half);
    const float c = load_f32(cos, t * half + i);
    const float s = sign * load_f32(sin, t * half + i);
    store_f32(v, i, lo * c - hi * s);
    store_f32(v, i + half, hi * c + lo * s);
  }
}

}  // namespace

void launch_rope(void* x, const HeadLayout& layout, const void* cos, const void* sin, DType dtype,
                 DType table_dtype, bool inverse, cudaStream_t stream) {
  const int64_t n = layout.batch * layout.seq * layout.heads * (layout.head_dim / 2);
  if (n == 0) return;
  dispatch_storage(dtype, "rope_apply", [&](auto tag) {
    using T = decltype(tag);
    const float sign = inverse ? -1.0f : 1.0f;
    if (table_dtype == DType::kF32) {
      rope_kernel<T, float><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(x), layout, static_cast<const float*>(cos),
          static_cast<const float*>(sin), sign);
    } else {
      ZERO_CHECK(table_dtype == dtype, "rope tables of " << dtype_name(table_dtype));
      rope_kernel<T, T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(x), layout, static_cast<const T*>(cos), static_cast<const T*>(sin),
          sign);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
