// Rotary position embedding in place on a [B, T, H, D] view (rotate-half convention; inverse
// rotates by -angle, the backward of the forward). Compiled without fused multiply-add so the
// result has the CPU's bits.
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_vector_io.cuh"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;

// The rotation of one pair (x[i], x[i + half]) by the angle whose cosine is c and sine sign * s.
// Both kernels call it: the vector kernel's bits are the scalar kernel's (and the CPU's).
struct Rotated {
  float lo, hi;
};
__device__ __forceinline__ Rotated rotate(float lo, float hi, float c, float s_table, float sign) {
  const float s = sign * s_table;
  return {lo * c - hi * s, hi * c + lo * s};
}

// The general kernel (any strides, sizes, alignment): one thread per element pair.
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
    const Rotated r = rotate(load_f32(v, i), load_f32(v, i + half), load_f32(cos, t * half + i),
                             load_f32(sin, t * half + i), sign);
    store_f32(v, i, r.lo);
    store_f32(v, i + half, r.hi);
  }
}

// The vector kernel's work: rows (b, t, h) of `chunks` chunks, a chunk being kVectorWidth<T>
// consecutive pairs. Every count is below 2^31 (the launch checks), so the indices are 32-bit
// and a grid-stride step cannot wrap; element offsets are 64-bit.
struct RopeChunks {
  uint32_t items;   // rows * chunks
  uint32_t chunks;  // per row: half / kVectorWidth<T>
  uint32_t heads, seq;
};

// One thread per (row, chunk): x's two halves of the chunk and the table entries of position t
// as 16-byte vectors, the row's position t found with three 32-bit divisions per chunk.
template <typename T, typename C>
__global__ void rope_vector_kernel(T* x, HeadLayout layout, const C* cos, const C* sin, float sign,
                                   RopeChunks work) {
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t half = layout.head_dim / 2;
  for (uint32_t w = blockIdx.x * blockDim.x + threadIdx.x; w < work.items;
       w += gridDim.x * blockDim.x) {
    const uint32_t row = w / work.chunks;
    const uint32_t i = (w - row * work.chunks) * kWidth;
    const uint32_t bt = row / work.heads;
    const uint32_t h = row - bt * work.heads;
    const uint32_t b = bt / work.seq;
    const uint32_t t = bt - b * work.seq;
    T* v = x + b * layout.batch_stride + t * layout.seq_stride + h * layout.head_stride + i;
    const int64_t table = t * half + i;
    float lo[kWidth], hi[kWidth], c[kWidth], s[kWidth];
    load_vector(v, lo);
    load_vector(v + half, hi);
    load_vector(cos + table, c);
    load_vector(sin + table, s);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const Rotated r = rotate(lo[k], hi[k], c[k], s[k], sign);
      lo[k] = r.lo;
      hi[k] = r.hi;
    }
    store_vector(v, lo);
    store_vector(v + half, hi);
  }
}

// Whether the vector kernel applies: every vector address 16-byte aligned (bases aligned; half,
// and the strides of dimensions longer than 1, whole vectors of x; the tables then follow, as
// their element is no narrower than x's) and the work countable in 31 bits.
template <typename T>
bool rope_vectorizable(const void* x, const HeadLayout& l, const void* cos, const void* sin,
                       int64_t items) {
  constexpr int64_t kWidth = kVectorWidth<T>;
  const auto stride_ok = [](int64_t stride, int64_t size) {
    return size <= 1 || stride % kWidth == 0;
  };
  return (l.head_dim / 2) % kWidth == 0 && is_aligned16(x) && is_aligned16(cos) &&
         is_aligned16(sin) && stride_ok(l.batch_stride, l.batch) &&
         stride_ok(l.seq_stride, l.seq) && stride_ok(l.head_stride, l.heads) &&
         items < (int64_t{1} << 31);
}

template <typename T, typename C>
void launch_typed(T* x, const HeadLayout& layout, const C* cos, const C* sin, float sign,
                  int64_t pairs, cudaStream_t stream) {
  const int64_t items = pairs / kVectorWidth<T>;
  if (rope_vectorizable<T>(x, layout, cos, sin, items)) {
    const RopeChunks work{static_cast<uint32_t>(items),
                          static_cast<uint32_t>(layout.head_dim / 2 / kVectorWidth<T>),
                          static_cast<uint32_t>(layout.heads), static_cast<uint32_t>(layout.seq)};
    rope_vector_kernel<T, C><<<grid_for(items, kThreads), kThreads, 0, stream>>>(
        x, layout, cos, sin, sign, work);
  } else {
    rope_kernel<T, C><<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(x, layout, cos, sin,
                                                                           sign);
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
      launch_typed(static_cast<T*>(x), layout, static_cast<const float*>(cos),
                   static_cast<const float*>(sin), sign, n, stream);
    } else {
      ZERO_CHECK(table_dtype == dtype, "rope tables of " << dtype_name(table_dtype));
      launch_typed(static_cast<T*>(x), layout, static_cast<const T*>(cos),
                   static_cast<const T*>(sin), sign, n, stream);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
