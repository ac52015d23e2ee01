// Appending keys or values to a generation cache: a strided [B, T, KVH, D] view (a part of the
// fused qkv buffer) copied into positions position.. of a contiguous [B, S, KVH, D] cache. A
// plain copy of the element bits, so the kernel is dtype-agnostic (by element size).
#include <cstdint>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kThreads = 256;

template <typename Bits>
__global__ void kv_cache_write_kernel(Bits* cache, const Bits* x, HeadLayout layout,
                                      int64_t capacity, int64_t position) {
  const int64_t d_count = layout.head_dim;
  const int64_t n = layout.batch * layout.seq * layout.heads * d_count;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = e % d_count;
    const int64_t h = (e / d_count) % layout.heads;
    const int64_t t = (e / (d_count * layout.heads)) % layout.seq;
    const int64_t b = e / (d_count * layout.heads * layout.seq);
    const int64_t to = ((b * capacity + position + t) * layout.heads + h) * d_count + d;
    cache[to] = x[b * layout.batch_stride + t * layout.seq_stride + h * layout.head_stride + d];
  }
}

template <typename Bits>
void launch_with(void* cache, const void* x, const HeadLayout& layout, int64_t capacity,
                 int64_t position, cudaStream_t stream) {
  const int64_t n = layout.batch * layout.seq * layout.heads * layout.head_dim;
  kv_cache_write_kernel<Bits><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
      static_cast<Bits*>(cache), static_cast<const Bits*>(x), layout, capacity, position);
}

}  // namespace

void launch_kv_cache_write(void* cache, const void* x, const HeadLayout& x_layout,
                           int64_t capacity, int64_t position, size_t element_bytes,
                           cudaStream_t stream) {
  if (x_layout.batch * x_layout.seq * x_layout.heads * x_layout.head_dim == 0) return;
  switch (element_bytes) {
    case 2: launch_with<uint16_t>(cache, x, x_layout, capacity, position, stream); break;
    case 4: launch_with<uint32_t>(cache, x, x_layout, capacity, position, stream); break;
    case 8: launch_with<uint64_t>(cache, x, x_layout, capacity, position, stream); break;
    default:
      throw UnsupportedError("kv_cache_write on the CUDA backend copies 2-, 4- or 8-byte "
                             "elements, not " + std::to_string(element_bytes) + "-byte ones");
  }
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
