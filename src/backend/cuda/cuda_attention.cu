// Causal self-attention (GQA, sliding window) on CUDA cores, flash-style: no T x T buffer; the
// forward keeps out and the row logsumexp, the backward recomputes the probabilities.
// Correctness first: bf16/f16 with head_dim 64 or 128 go to the tensor-core kernels of
// cuda_attention_mma.cu instead; these serve f32, the other head dimensions, misaligned views,
// and ZERO_CUDA_ATTENTION=simple (the reference for the tensor-core path on a GPU).
//
// Layout of the work: a block is kRowsPerBlock warps, one query row (or, for dK/dV, one key row)
// per warp. Key (or query) tiles of 32 rows are staged in shared memory as f32; lane j of a warp
// handles row j of the tile for the dot products, and each lane owns the head dimensions
// d = lane + 32 t (t < kMaxAttentionHeadDim / 32) of the accumulators. Every output element is
// summed by one warp in a fixed order: deterministic, no atomics.
//   forward:  online softmax over the key tiles (running max m and sum l per row).
//   backward: delta_i = dout_i . out_i; dQ by query rows (dS k summed over key tiles); dK and dV by
//             key rows (P^T dout and dS^T q summed over the group's query heads and query tiles).
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kRowsPerBlock = 8;
constexpr int kThreads = kRowsPerBlock * kWarp;
constexpr int kTile = 32;
constexpr int kDimsPerLane = static_cast<int>(kMaxAttentionHeadDim) / kWarp;

struct Views {
  HeadLayout layout;
  __device__ __forceinline__ int64_t row(int64_t b, int64_t t, int64_t h) const {
    return b * layout.batch_stride + t * layout.seq_stride + h * layout.head_stride;
  }
};

__device__ __forceinline__ bool visible(int64_t i, int64_t j, int64_t window) {
  return j <= i && (window == 0 || i - j < window);
}

// Copies rows [r0, r0 + kTile) of head h (zeros past `rows`) into tile[kTile][stride] as f32.
template <typename T>
__device__ void stage_tile(float* tile, int stride, const T* base, const Views& view, int64_t b,
                           int64_t r0, int64_t rows, int64_t h, int64_t head_dim) {
  for (int64_t e = threadIdx.x; e < kTile * head_dim; e += blockDim.x) {
    const int64_t r = e / head_dim, d = e % head_dim;
    tile[r * stride + d] = r0 + r < rows ? load_f32(base, view.row(b, r0 + r, h) + d) : 0.0f;
  }
}

// dot(a[0..D), b[0..D)) for f32 arrays in shared memory.
__device__ __forceinline__ float dot(const float* a, const float* b, int64_t head_dim) {
  float acc = 0.0f;
  for (int64_t d = 0; d < head_dim; ++d) acc += a[d] * b[d];
  return acc;
}

struct ForwardParams {
  int64_t seq, heads, kv_heads, head_dim, window;
  float scale;
  Views q, k, v, out;
  float* lse;  // null: not kept (attention over a key/value cache)
  // Keys: key_seq rows of k and v; query row i sits at position query_offset + i. Plain causal
  // self-attention has key_seq == seq and query_offset == 0.
  int64_t key_seq, query_offset;
};

// grid: (query-row blocks, B * H).
template <typename T>
__global__ void attention_forward_kernel(const T* q, const T* k, const T* v, T* out,
                                         ForwardParams p) {
  extern __shared__ float smem[];
  const int64_t D = p.head_dim;
  const int kstride = static_cast<int>(D) + 1;  // padded: lane j reads row j without conflicts
  float* q_rows = smem;                         // [kRowsPerBlock][D]
  float* k_tile = q_rows + kRowsPerBlock * D;   // [kTile][D + 1]
  float* v_tile = k_tile + kTile * kstride;     // [kTile][D]
  const int64_t b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t i0 = blockIdx.x * int64_t{kRowsPerBlock};
  const int64_t i = i0 + warp;
  const bool active = i < p.seq;
  for (int64_t e = threadIdx.x; e < kRowsPerBlock * D; e += blockDim.x) {
    const int64_t r = e / D, d = e % D;
    q_rows[e] = i0 + r < p.seq ? load_f32(q, p.q.row(b, i0 + r, h) + d) : 0.0f;
  }
  float acc[kDimsPerLane];
#pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) acc[t] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  // The block's queries see keys up to the last one's position (and from the first's window).
  const int64_t last = min(p.key_seq - 1, p.query_offset + min(p.seq - 1, i0 + kRowsPerBlock - 1));
  const int64_t first = p.window > 0 ? max(int64_t{0}, p.query_offset + i0 - p.window + 1) : 0;
  for (int64_t k0 = first / kTile * kTile; k0 <= last; k0 += kTile) {
    __syncthreads();  // the previous tile is no longer read
    stage_tile(k_tile, kstride, k, p.k, b, k0, p.key_seq, g, D);
    stage_tile(v_tile, static_cast<int>(D), v, p.v, b, k0, p.key_seq, g, D);
    __syncthreads();
    if (!active) continue;
    const int64_t j = k0 + lane;
    const bool seen = j < p.key_seq && visible(p.query_offset + i, j, p.window);
    const float s = seen ? p.scale * dot(q_rows + warp * D, k_tile + lane * kstride, D) : -INFINITY;
    const float m_new = fmaxf(m, warp_max(s));
    if (m_new == -INFINITY) continue;  // no key of this tile is visible yet
    const float e = seen ? expf(s - m_new) : 0.0f;
    const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    l = l * alpha + warp_sum(e);
    m = m_new;
#pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) acc[t] *= alpha;
    for (int jj = 0; jj < kTile; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, e, jj);
      if (pj == 0.0f) continue;  // uniform across the warp: pj is broadcast
#pragma unroll
      for (int t = 0; t < kDimsPerLane; ++t) {
        const int64_t d = lane + t * kWarp;
        if (d < D) acc[t] += pj * v_tile[jj * D + d];
      }
    }
  }
  if (!active) return;
  const float inv = 1.0f / l;
#pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) {
    const int64_t d = lane + t * kWarp;
    if (d < D) store_f32(out, p.out.row(b, i, h) + d, acc[t] * inv);
  }
  if (lane == 0 && p.lse != nullptr) p.lse[(b * p.heads + h) * p.seq + i] = m + logf(l);
}

// delta[b, h, i] = dout_i . out_i, one warp per row. grid: (row blocks, B * H).
template <typename T>
__global__ void attention_delta_kernel(const T* dout, const T* out, float* delta, Views dout_view,
                                       Views out_view, int64_t seq, int64_t heads,
                                       int64_t head_dim) {
  const int64_t b = blockIdx.y / heads, h = blockIdx.y % heads;
  const int64_t i = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  if (i >= seq) return;
  const int lane = threadIdx.x % kWarp;
  float acc = 0.0f;
  for (int64_t d = lane; d < head_dim; d += kWarp) {
    acc += load_f32(dout, dout_view.row(b, i, h) + d) * load_f32(out, out_view.row(b, i, h) + d);
  }
  acc = warp_sum(acc);
  if (lane == 0) delta[(b * heads + h) * seq + i] = acc;
}

struct BackwardParams {
  int64_t seq, heads, kv_heads, head_dim, window;
  float scale;
  Views q, k, v, dout, dq, dk, dv;
  const float* lse;
  const float* delta;
};

// dQ, one warp per query row. grid: (query-row blocks, B * H).
template <typename T>
__global__ void attention_dq_kernel(const T* q, const T* k, const T* v, const T* dout, T* dq,
                                    BackwardParams p) {
  extern __shared__ float smem[];
  const int64_t D = p.head_dim;
  const int kstride = static_cast<int>(D) + 1;
  float* q_rows = smem;                         // [kRowsPerBlock][D]
  float* do_rows = q_rows + kRowsPerBlock * D;  // [kRowsPerBlock][D]
  float* k_tile = do_rows + kRowsPerBlock * D;  // [kTile][D + 1]
  float* v_tile = k_tile + kTile * kstride;     // [kTile][D + 1]
  const int64_t b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t i0 = blockIdx.x * int64_t{kRowsPerBlock};
  const int64_t i = i0 + warp;
  const bool active = i < p.seq;
  for (int64_t e = threadIdx.x; e < kRowsPerBlock * D; e += blockDim.x) {
    const int64_t r = e / D, d = e % D;
    const bool in = i0 + r < p.seq;
    q_rows[e] = in ? load_f32(q, p.q.row(b, i0 + r, h) + d) : 0.0f;
    do_rows[e] = in ? load_f32(dout, p.dout.row(b, i0 + r, h) + d) : 0.0f;
  }
  const int64_t stat = (b * p.heads + h) * p.seq + (active ? i : 0);
  const float row_lse = p.lse[stat], row_delta = p.delta[stat];
  float acc[kDimsPerLane];
#pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) acc[t] = 0.0f;
  const int64_t last = min(p.seq - 1, i0 + kRowsPerBlock - 1);
  const int64_t first = p.window > 0 ? max(int64_t{0}, i0 - p.window + 1) : 0;
  for (int64_t k0 = first / kTile * kTile; k0 <= last; k0 += kTile) {
    __syncthreads();
    stage_tile(k_tile, kstride, k, p.k, b, k0, p.seq, g, D);
    stage_tile(v_tile, kstride, v, p.v, b, k0, p.seq, g, D);
    __syncthreads();
    if (!active) continue;
    const int64_t j = k0 + lane;
    float ds = 0.0f;
    if (j < p.seq && visible(i, j, p.window)) {
      const float pj = expf(p.scale * dot(q_rows + warp * D, k_tile + lane * kstride, D) - row_lse);
      const float dp = dot(do_rows + warp * D, v_tile + lane * kstride, D);
      ds = pj * (dp - row_delta);
    }
    for (int jj = 0; jj < kTile; ++jj) {
      const float dsj = __shfl_sync(0xffffffffu, ds, jj);
      if (dsj == 0.0f) continue;
#pragma unroll
      for (int t = 0; t < kDimsPerLane; ++t) {
        const int64_t d = lane + t * kWarp;
        if (d < D) acc[t] += dsj * k_tile[jj * kstride + d];
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) {
    const int64_t d = lane + t * kWarp;
    if (d < D) store_f32(dq, p.dq.row(b, i, h) + d, p.scale * acc[t]);
  }
}

// dK and dV, one warp per key row. grid: (key-row blocks, B * KVH).
template <typename T>
__global__ void attention_dkv_kernel(const T* q, const T* k, const T* v, const T* dout, T* dk,
                                     T* dv, BackwardParams p) {
  extern __shared__ float smem[];
  const int64_t D = p.head_dim;
  const int qstride = static_cast<int>(D) + 1;
  float* k_rows = smem;                         // [kRowsPerBlock][D]
  float* v_rows = k_rows + kRowsPerBlock * D;   // [kRowsPerBlock][D]
  float* q_tile = v_rows + kRowsPerBlock * D;   // [kTile][D + 1]
  float* do_tile = q_tile + kTile * qstride;    // [kTile][D + 1]
  float* lse_tile = do_tile + kTile * qstride;  // [kTile]
  float* delta_tile = lse_tile + kTile;         // [kTile]
  const int64_t b = blockIdx.y / p.kv_heads, g = blockIdx.y % p.kv_heads;
  const int64_t group = p.heads / p.kv_heads;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t j0 = blockIdx.x * int64_t{kRowsPerBlock};
  const int64_t j = j0 + warp;
  const bool active = j < p.seq;
  for (int64_t e = threadIdx.x; e < kRowsPerBlock * D; e += blockDim.x) {
    const int64_t r = e / D, d = e % D;
    const bool in = j0 + r < p.seq;
    k_rows[e] = in ? load_f32(k, p.k.row(b, j0 + r, g) + d) : 0.0f;
    v_rows[e] = in ? load_f32(v, p.v.row(b, j0 + r, g) + d) : 0.0f;
  }
  float dk_acc[kDimsPerLane], dv_acc[kDimsPerLane];
#pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) dk_acc[t] = dv_acc[t] = 0.0f;
  const int64_t last_key = min(p.seq - 1, j0 + kRowsPerBlock - 1);
  const int64_t end = p.window > 0 ? min(p.seq, last_key + p.window) : p.seq;
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t q0 = j0 / kTile * kTile; q0 < end; q0 += kTile) {
      __syncthreads();
      stage_tile(q_tile, qstride, q, p.q, b, q0, p.seq, h, D);
      stage_tile(do_tile, qstride, dout, p.dout, b, q0, p.seq, h, D);
      if (threadIdx.x < kTile) {
        const int64_t qi = q0 + threadIdx.x;
        const int64_t stat = (b * p.heads + h) * p.seq + qi;
        lse_tile[threadIdx.x] = qi < p.seq ? p.lse[stat] : 0.0f;
        delta_tile[threadIdx.x] = qi < p.seq ? p.delta[stat] : 0.0f;
      }
      __syncthreads();
      if (!active) continue;
      const int64_t qi = q0 + lane;
      float pi = 0.0f, dsi = 0.0f;
      if (qi < p.seq && visible(qi, j, p.window)) {
        pi = expf(p.scale * dot(q_tile + lane * qstride, k_rows + warp * D, D) - lse_tile[lane]);
        const float dp = dot(do_tile + lane * qstride, v_rows + warp * D, D);
        dsi = pi * (dp - delta_tile[lane]);
      }
      for (int ii = 0; ii < kTile; ++ii) {
        const float pv = __shfl_sync(0xffffffffu, pi, ii);
        const float ds = __shfl_sync(0xffffffffu, dsi, ii);
        if (pv == 0.0f && ds == 0.0f) continue;
#pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) {
          const int64_t d = lane + t * kWarp;
          if (d < D) {
            dv_acc[t] += pv * do_tile[ii * qstride + d];
            dk_acc[t] += ds * q_tile[ii * qstride + d];
          }
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) {
    const int64_t d = lane + t * kWarp;
    if (d < D) {
      store_f32(dk, p.dk.row(b, j, g) + d, p.scale * dk_acc[t]);
      store_f32(dv, p.dv.row(b, j, g) + d, dv_acc[t]);
    }
  }
}

template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  ZERO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
}

unsigned row_blocks(int64_t seq) {
  return static_cast<unsigned>((seq + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void launch_attention_forward(const AttentionArgs& a, cudaStream_t stream) {
  if (a.batch == 0 || a.seq == 0) return;
  const bool cached = a.key_seq != 0;  // the tensor-core kernels take only plain self-attention
  if (!cached && mma_attention_supported(a, false)) {
    launch_attention_forward_mma(a, stream);
    return;
  }
  ForwardParams p{a.seq,
                  a.heads,
                  a.kv_heads,
                  a.head_dim,
                  a.window,
                  a.scale,
                  Views{a.q_layout},
                  Views{a.k_layout},
                  Views{a.v_layout},
                  Views{a.out_layout},
                  a.lse,
                  cached ? a.key_seq : a.seq,
                  cached ? a.key_seq - a.seq : 0};
  const int64_t D = a.head_dim;
  const size_t shared =
      sizeof(float) * static_cast<size_t>(kRowsPerBlock * D + kTile * (D + 1) + kTile * D);
  const dim3 grid(row_blocks(a.seq), static_cast<unsigned>(a.batch * a.heads));
  dispatch_storage(a.dtype, "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    allow_shared(attention_forward_kernel<T>, shared);
    attention_forward_kernel<T>
        <<<grid, kThreads, shared, stream>>>(static_cast<const T*>(a.q), static_cast<const T*>(a.k),
                                             static_cast<const T*>(a.v), static_cast<T*>(a.out), p);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_attention_backward(const AttentionArgs& a, cudaStream_t stream) {
  if (a.batch == 0 || a.seq == 0) return;
  BackwardParams p{a.seq,
                   a.heads,
                   a.kv_heads,
                   a.head_dim,
                   a.window,
                   a.scale,
                   Views{a.q_layout},
                   Views{a.k_layout},
                   Views{a.v_layout},
                   Views{a.dout_layout},
                   Views{a.dq_layout},
                   Views{a.dk_layout},
                   Views{a.dv_layout},
                   a.lse,
                   a.delta};
  const int64_t D = a.head_dim;
  const size_t rows_bytes = sizeof(float) * static_cast<size_t>(2 * kRowsPerBlock * D);
  const size_t tiles_bytes = sizeof(float) * static_cast<size_t>(2 * kTile * (D + 1));
  const size_t dq_shared = rows_bytes + tiles_bytes;
  const size_t dkv_shared = rows_bytes + tiles_bytes + sizeof(float) * 2 * kTile;
  dispatch_storage(a.dtype, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    attention_delta_kernel<T>
        <<<dim3(row_blocks(a.seq), static_cast<unsigned>(a.batch * a.heads)), kThreads, 0,
           stream>>>(static_cast<const T*>(a.dout), static_cast<const T*>(a.out), a.delta,
                     Views{a.dout_layout}, Views{a.out_layout}, a.seq, a.heads, D);
    ZERO_CUDA_CHECK_LAUNCH();
    if (mma_attention_supported(a, true)) {
      launch_attention_backward_mma(a, stream);
      return;
    }
    allow_shared(attention_dq_kernel<T>, dq_shared);
    attention_dq_kernel<T><<<dim3(row_blocks(a.seq), static_cast<unsigned>(a.batch * a.heads)),
                             kThreads, dq_shared, stream>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
        static_cast<const T*>(a.dout), static_cast<T*>(a.dq), p);
    ZERO_CUDA_CHECK_LAUNCH();
    allow_shared(attention_dkv_kernel<T>, dkv_shared);
    attention_dkv_kernel<T><<<dim3(row_blocks(a.seq), static_cast<unsigned>(a.batch * a.kv_heads)),
                              kThreads, dkv_shared, stream>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
        static_cast<const T*>(a.dout), static_cast<T*>(a.dk), static_cast<T*>(a.dv), p);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
