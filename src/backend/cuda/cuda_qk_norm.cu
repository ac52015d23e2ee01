// Per-head query/key RMSNorm (Qwen3's q_norm and k_norm, Backend::qk_rmsnorm_*) over the fused
// [N, (H + 2 KVH) * D] projection. Its head rows are contiguous D-element rows at r * D, so the
// kernels walk "head rows" r = token * (H + 2 KVH) + head: a warp per row normalises a query or
// key head (or copies a value head), the sums in f32 as rmsnorm_forward's. The weights'
// gradients are per-block partial sums over fixed token blocks, then the blocks in order through
// the norms' finishing pass (cuda_norm_common.cuh): deterministic, no atomics.
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_norm_common.cuh"

namespace zero::backend::cuda {
namespace {

constexpr int kRowThreads = 256;  // 8 warps, a head row each
constexpr int kPartialThreads = 128;

struct QkRows {
  int64_t tokens, heads, kv_heads, head_dim;
  __host__ __device__ int64_t per_row() const { return heads + 2 * kv_heads; }
  __host__ __device__ int64_t normed() const { return heads + kv_heads; }
  __host__ __device__ int64_t head_rows() const { return tokens * per_row(); }
};

template <typename T>
__global__ void qk_norm_forward_kernel(T* out, float* rstd, const T* in, const T* q_weight,
                                       const T* k_weight, QkRows s, float eps) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarp);
  const int64_t dim = s.head_dim;
  for (int64_t r = blockIdx.x * int64_t{blockDim.x / kWarp} + threadIdx.x / kWarp;
       r < s.head_rows(); r += warps) {
    const int64_t head = r % s.per_row();
    const T* x = in + r * dim;
    T* y = out + r * dim;
    if (head >= s.normed()) {  // a value head: copied bit for bit
      for (int64_t i = lane; i < dim; i += kWarp) y[i] = x[i];
      continue;
    }
    const T* w = head < s.heads ? q_weight : k_weight;
    float sum = 0.0f;
    for (int64_t i = lane; i < dim; i += kWarp) {
      const float v = load_f32(x, i);
      sum += v * v;
    }
    sum = warp_sum(sum);
    const float inv = 1.0f / sqrtf(sum / static_cast<float>(dim) + eps);
    for (int64_t i = lane; i < dim; i += kWarp) {
      store_f32(y, i, (load_f32(x, i) * inv) * load_f32(w, i));
    }
    if (lane == 0) rstd[(r / s.per_row()) * s.normed() + head] = inv;
  }
}

template <typename T>
__global__ void qk_norm_dx_kernel(T* dx, const T* dy, const T* x, const T* q_weight,
                                  const T* k_weight, const float* rstd, QkRows s) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarp);
  const int64_t dim = s.head_dim;
  for (int64_t r = blockIdx.x * int64_t{blockDim.x / kWarp} + threadIdx.x / kWarp;
       r < s.head_rows(); r += warps) {
    const int64_t head = r % s.per_row();
    const T* xr = x + r * dim;
    const T* g = dy + r * dim;
    T* out = dx + r * dim;
    if (head >= s.normed()) {
      for (int64_t i = lane; i < dim; i += kWarp) out[i] = g[i];
      continue;
    }
    const T* w = head < s.heads ? q_weight : k_weight;
    const float inv = rstd[(r / s.per_row()) * s.normed() + head];
    float sum_gx = 0.0f;
    for (int64_t i = lane; i < dim; i += kWarp) {
      sum_gx += load_f32(g, i) * load_f32(w, i) * (load_f32(xr, i) * inv);
    }
    const float mean_gx = warp_sum(sum_gx) / static_cast<float>(dim);
    for (int64_t i = lane; i < dim; i += kWarp) {
      const float v = inv * (load_f32(g, i) * load_f32(w, i) - load_f32(xr, i) * inv * mean_gx);
      store_f32(out, i, v);
    }
  }
}

// partial[(which * blocks + block) * D + c] = sum over the block's tokens, then their query
// (which 0) or key (which 1) heads in order, of dy * x * rstd at channel c.
template <typename T>
__global__ void qk_norm_partials_kernel(float* partial, const T* dy, const T* x,
                                        const float* rstd, QkRows s, int64_t token_block) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= s.head_dim) return;
  const int64_t blocks = gridDim.y;
  const int which = static_cast<int>(blockIdx.z);
  const int64_t first_head = which == 0 ? 0 : s.heads;
  const int64_t last_head = which == 0 ? s.heads : s.normed();
  const int64_t t0 = blockIdx.y * token_block;
  const int64_t t1 = min(s.tokens, t0 + token_block);
  float acc = 0.0f;
  for (int64_t t = t0; t < t1; ++t) {
    for (int64_t head = first_head; head < last_head; ++head) {
      const int64_t at = (t * s.per_row() + head) * s.head_dim + c;
      acc += load_f32(dy, at) * (load_f32(x, at) * rstd[t * s.normed() + head]);
    }
  }
  partial[(which * blocks + blockIdx.y) * s.head_dim + c] = acc;
}

int64_t token_block_of(int64_t tokens) { return partial_row_block(tokens, kNormRowBlock); }

int64_t token_blocks_of(int64_t tokens) {
  const int64_t block = token_block_of(tokens);
  return (tokens + block - 1) / block;
}

unsigned warp_row_grid(int64_t head_rows) {
  return grid_for(head_rows * kWarp, kRowThreads);
}

}  // namespace

size_t qk_rmsnorm_backward_scratch_bytes(int64_t tokens, int64_t head_dim) {
  return static_cast<size_t>(2 * token_blocks_of(tokens) * head_dim) * sizeof(float);
}

void launch_qk_rmsnorm_forward(void* qkv_out, float* rstd, const void* qkv_in,
                               const void* q_weight, const void* k_weight, DType dtype,
                               int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim,
                               float eps, cudaStream_t stream) {
  const QkRows s{tokens, heads, kv_heads, head_dim};
  if (s.head_rows() == 0) return;
  dispatch_storage(dtype, "qk_rmsnorm_forward", [&](auto tag) {
    using T = decltype(tag);
    qk_norm_forward_kernel<T><<<warp_row_grid(s.head_rows()), kRowThreads, 0, stream>>>(
        static_cast<T*>(qkv_out), rstd, static_cast<const T*>(qkv_in),
        static_cast<const T*>(q_weight), static_cast<const T*>(k_weight), s, eps);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_qk_rmsnorm_backward(void* d_qkv_in, void* dq_weight, void* dk_weight,
                                DType grad_dtype, const void* d_qkv_out, const void* qkv_in,
                                const void* q_weight, const void* k_weight, const float* rstd,
                                DType dtype, int64_t tokens, int64_t heads, int64_t kv_heads,
                                int64_t head_dim, void* scratch, cudaStream_t stream) {
  const QkRows s{tokens, heads, kv_heads, head_dim};
  if (s.head_rows() == 0) return;
  const int64_t blocks = token_blocks_of(tokens);
  auto* partial = static_cast<float*>(scratch);
  dispatch_storage(dtype, "qk_rmsnorm_backward", [&](auto tag) {
    using T = decltype(tag);
    const auto* dy = static_cast<const T*>(d_qkv_out);
    const auto* x = static_cast<const T*>(qkv_in);
    qk_norm_dx_kernel<T><<<warp_row_grid(s.head_rows()), kRowThreads, 0, stream>>>(
        static_cast<T*>(d_qkv_in), dy, x, static_cast<const T*>(q_weight),
        static_cast<const T*>(k_weight), rstd, s);
    ZERO_CUDA_CHECK_LAUNCH();
    const dim3 grid(static_cast<unsigned>((head_dim + kPartialThreads - 1) / kPartialThreads),
                    static_cast<unsigned>(blocks), 2);
    qk_norm_partials_kernel<T><<<grid, kPartialThreads, 0, stream>>>(partial, dy, x, rstd, s,
                                                                     token_block_of(tokens));
    ZERO_CUDA_CHECK_LAUNCH();
    dispatch_grad<T>(grad_dtype, [&](auto grad_tag) {
      using G = decltype(grad_tag);
      norm_finish_kernel<G><<<finish_grid(head_dim), kFinishWarps * kWarp, 0, stream>>>(
          static_cast<G*>(dq_weight), partial, blocks, head_dim);
      ZERO_CUDA_CHECK_LAUNCH();
      norm_finish_kernel<G><<<finish_grid(head_dim), kFinishWarps * kWarp, 0, stream>>>(
          static_cast<G*>(dk_weight), partial + blocks * head_dim, blocks, head_dim);
    });
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
