// Causal flash attention on tensor cores for bf16/f16 storage: mma.sync m16n8k16 (sm_80 and
// newer, H100 included) with f32 accumulation, head dimensions 64 and 128. It replaces the
// CUDA-core kernels of cuda_attention.cu where it applies (mma_attention_supported), which stay
// for f32, other head dimensions and misaligned views - and as the reference the op tests and
// ZERO_CUDA_ATTENTION=simple select.
//
// The FlashAttention-2 scheme: a block of 4 warps owns 64 rows, each warp 16 of them, and walks
// tiles of 64 keys (or queries) staged in shared memory. Score tiles S = Q K^T live in the
// warps' accumulator registers; their C-fragment layout is exactly the A-fragment layout the
// next product needs, so P (rounded to the storage type) feeds P V without leaving registers.
//   forward:  online softmax in the log2 domain (running max m and sum l per row); out and the
//             row logsumexp (natural log, as the Backend contract says).
//   backward: two kernels, no atomics, every output element summed by one thread in a fixed
//             order (deterministic, as the CPU backend is):
//             dQ by query blocks: recompute P, dP = dO V^T, dS = P (dP - delta), dQ += dS K;
//             dK/dV by key blocks over the GQA group's heads: P^T dO and dS^T Q.
// As in FlashAttention-2, the row sum l adds the f32 probabilities and only the product's copies
// are rounded, so lse is the exact logsumexp up to f32 rounding.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA), lane = 4 * group + thread_in_group:
//   A 16x16 (row major): a0 = (group, 2t..2t+1), a1 = (group + 8, 2t..), a2 = (group, 2t + 8..),
//                        a3 = (group + 8, 2t + 8..); two 16-bit values per register, low first.
//   B 16x8 (k x n):      b0 = (k = 2t..2t+1, n = group), b1 = (k = 2t + 8.., n = group).
//   C 16x8 f32:          c0, c1 = (group, 2t..2t+1), c2, c3 = (group + 8, 2t..2t+1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace zero::backend::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kRows = 16 * kWarps;  // rows a block owns; also the rows of every staged tile
constexpr int kPad = 8;             // 16 bytes of padding per shared row: conflict-free fragments
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ int64_t offset(const HeadLayout& l, int64_t b, int64_t t, int64_t h) {
  return b * l.batch_stride + t * l.seq_stride + h * l.head_stride;
}

__device__ __forceinline__ bool visible(int64_t i, int64_t j, int64_t window) {
  return j <= i && (window == 0 || i - j < window);
}

// Two adjacent 16-bit elements as one register (the lower address in the low half).
__device__ __forceinline__ uint32_t word(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
// Two 16-bit elements one row apart (a B fragment read down a column).
__device__ __forceinline__ uint32_t column_pair(const uint16_t* p, int stride) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[stride]) << 16);
}

template <bool kBf16>
__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint32_t b0, uint32_t b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

// (lo, hi) rounded to the storage type (nearest even) and packed; `lo`/`hi` become the rounded
// values, so sums of them match what the product multiplies.
template <bool kBf16>
__device__ __forceinline__ uint32_t pack_rounded(float& lo, float& hi) {
  uint32_t bits;
  if constexpr (kBf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    lo = __low2float(v);
    hi = __high2float(v);
    std::memcpy(&bits, &v, sizeof(bits));
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    lo = __low2float(v);
    hi = __high2float(v);
    std::memcpy(&bits, &v, sizeof(bits));
  }
  return bits;
}

template <bool kBf16>
__device__ __forceinline__ void store_pair(uint16_t* p, float lo, float hi) {
  *reinterpret_cast<uint32_t*>(p) = pack_rounded<kBf16>(lo, hi);
}

// The four threads of a quad hold one row's columns: combine across them.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Rows [r0, r0 + kRows) of head h (zeros past `rows`) into a [kRows][D + kPad] shared tile,
// 16 bytes at a time (the launcher checked the alignment).
template <int D>
__device__ __forceinline__ void stage(uint16_t* tile, const uint16_t* base, const HeadLayout& l,
                                      int64_t b, int64_t r0, int64_t rows, int64_t h) {
  constexpr int kChunks = D / 8;
  for (int e = threadIdx.x; e < kRows * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows) value = *reinterpret_cast<const uint4*>(base + offset(l, b, r0 + r, h) + c * 8);
    *reinterpret_cast<uint4*>(tile + r * (D + kPad) + c * 8) = value;
  }
}

// acc[nt] += A(16 rows of `a`, all D columns) * B(rows nt*8.. of `b`)^T for nt < N: a 16 x 8N
// block of products of rows (S = Q K^T, dP = dO V^T), both operands row-major in shared memory.
template <int D, int N, bool kBf16>
__device__ __forceinline__ void rows_times_rows(float (&acc)[N][4], const uint16_t* a,
                                                const uint16_t* b, int group, int tig) {
  constexpr int S = D + kPad;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    const uint16_t* ar = a + group * S + kc * 16 + tig * 2;
    const uint32_t a0 = word(ar), a1 = word(ar + 8 * S), a2 = word(ar + 8), a3 = word(ar + 8 * S + 8);
#pragma unroll
    for (int nt = 0; nt < N; ++nt) {
      const uint16_t* br = b + (nt * 8 + group) * S + kc * 16 + tig * 2;
      mma<kBf16>(acc[nt], a0, a1, a2, a3, word(br), word(br + 8));
    }
  }
}

// acc[dt] += P(16 x 16 chunk, A fragments a0..a3) * tile rows [k0, k0 + 16) (all D columns):
// the product of a probability (or dS) chunk with a value-like tile read down its columns.
template <int D, bool kBf16>
__device__ __forceinline__ void chunk_times_tile(float (&acc)[D / 8][4], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, const uint16_t* tile,
                                                 int k0, int group, int tig) {
  constexpr int S = D + kPad;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const uint16_t* col = tile + (k0 + tig * 2) * S + dt * 8 + group;
    mma<kBf16>(acc[dt], a0, a1, a2, a3, column_pair(col, S), column_pair(col + 8 * S, S));
  }
}

struct MmaParams {
  int64_t seq, heads, kv_heads, window;
  float scale;       // the score scale
  float scale_log2;  // scale * log2(e)
  HeadLayout q, k, v, out, dout, dq, dk, dv;
  float* lse;           // [B, H, T]
  const float* delta;   // [B, H, T] (backward)
};

// grid: (query blocks, B * H).
template <int D, bool kBf16>
__global__ void __launch_bounds__(kThreads)
    mma_attention_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out,
                          MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* ks = qs + kRows * S;
  uint16_t* vs = ks + kRows * S;
  const int64_t b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t q0 = int64_t{blockIdx.x} * kRows;
  const int64_t row_a = q0 + warp * 16 + group, row_b = row_a + 8;
  stage<D>(qs, q, p.q, b, q0, p.seq, h);

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  const int64_t last = min(p.seq - 1, q0 + kRows - 1);
  const int64_t first = p.window > 0 ? max(int64_t{0}, q0 - p.window + 1) : 0;
  for (int64_t k0 = first / kRows * kRows; k0 <= last; k0 += kRows) {
    __syncthreads();  // the previous tiles are no longer read (and Q is staged)
    stage<D>(ks, k, p.k, b, k0, p.seq, g);
    stage<D>(vs, v, p.v, b, k0, p.seq, g);
    __syncthreads();
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    rows_times_rows<D, 8, kBf16>(s, qs + warp * 16 * S, ks, group, tig);
    float max_a = -INFINITY, max_b = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t i = r < 2 ? row_a : row_b;
        const int64_t j = k0 + nt * 8 + tig * 2 + (r & 1);
        s[nt][r] = j < p.seq && visible(i, j, p.window) ? s[nt][r] * p.scale_log2 : -INFINITY;
      }
      max_a = fmaxf(max_a, fmaxf(s[nt][0], s[nt][1]));
      max_b = fmaxf(max_b, fmaxf(s[nt][2], s[nt][3]));
    }
    const float new_a = fmaxf(m_a, quad_max(max_a)), new_b = fmaxf(m_b, quad_max(max_b));
    // A row that has seen no key yet keeps p = 0 (exp2(-inf - 0)) instead of NaN.
    const float base_a = new_a == -INFINITY ? 0.0f : new_a;
    const float base_b = new_b == -INFINITY ? 0.0f : new_b;
    const float alpha_a = exp2f(m_a - base_a), alpha_b = exp2f(m_b - base_b);
    m_a = new_a;
    m_b = new_b;
    l_a *= alpha_a;
    l_b *= alpha_b;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= alpha_a;
      o[dt][1] *= alpha_a;
      o[dt][2] *= alpha_b;
      o[dt][3] *= alpha_b;
    }
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {  // 16 keys per chunk: score tiles 2kc and 2kc + 1
      float p0 = exp2f(s[2 * kc][0] - base_a), p1 = exp2f(s[2 * kc][1] - base_a);
      float p2 = exp2f(s[2 * kc][2] - base_b), p3 = exp2f(s[2 * kc][3] - base_b);
      float p4 = exp2f(s[2 * kc + 1][0] - base_a), p5 = exp2f(s[2 * kc + 1][1] - base_a);
      float p6 = exp2f(s[2 * kc + 1][2] - base_b), p7 = exp2f(s[2 * kc + 1][3] - base_b);
      // The row sums take the f32 probabilities (lse is the logsumexp the contract defines);
      // only the product's copies are rounded.
      l_a += (p0 + p1) + (p4 + p5);
      l_b += (p2 + p3) + (p6 + p7);
      const uint32_t a0 = pack_rounded<kBf16>(p0, p1), a1 = pack_rounded<kBf16>(p2, p3);
      const uint32_t a2 = pack_rounded<kBf16>(p4, p5), a3 = pack_rounded<kBf16>(p6, p7);
      chunk_times_tile<D, kBf16>(o, a0, a1, a2, a3, vs, kc * 16, group, tig);
    }
  }
  l_a = quad_sum(l_a);
  l_b = quad_sum(l_b);
  const int64_t rows[2] = {row_a, row_b};
  const float inv[2] = {1.0f / l_a, 1.0f / l_b};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (rows[half] >= p.seq) continue;
    uint16_t* dst = out + offset(p.out, b, rows[half], h) + tig * 2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      store_pair<kBf16>(dst + dt * 8, o[dt][2 * half] * inv[half], o[dt][2 * half + 1] * inv[half]);
    }
  }
  if (tig == 0) {
    const int64_t stats = (b * p.heads + h) * p.seq;
    if (row_a < p.seq) p.lse[stats + row_a] = m_a * kLn2 + logf(l_a);
    if (row_b < p.seq) p.lse[stats + row_b] = m_b * kLn2 + logf(l_b);
  }
}

// dQ. grid: (query blocks, B * H).
template <int D, bool kBf16>
__global__ void __launch_bounds__(kThreads)
    mma_attention_dq(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                     const uint16_t* dout, uint16_t* dq, MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* dos = qs + kRows * S;
  uint16_t* ks = dos + kRows * S;
  uint16_t* vs = ks + kRows * S;
  const int64_t b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t q0 = int64_t{blockIdx.x} * kRows;
  const int64_t row_a = q0 + warp * 16 + group, row_b = row_a + 8;
  stage<D>(qs, q, p.q, b, q0, p.seq, h);
  stage<D>(dos, dout, p.dout, b, q0, p.seq, h);
  const int64_t stats = (b * p.heads + h) * p.seq;
  const float lse_a = row_a < p.seq ? p.lse[stats + row_a] * kLog2e : 0.0f;
  const float lse_b = row_b < p.seq ? p.lse[stats + row_b] * kLog2e : 0.0f;
  const float delta_a = row_a < p.seq ? p.delta[stats + row_a] : 0.0f;
  const float delta_b = row_b < p.seq ? p.delta[stats + row_b] : 0.0f;

  float acc[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.0f;
  const int64_t last = min(p.seq - 1, q0 + kRows - 1);
  const int64_t first = p.window > 0 ? max(int64_t{0}, q0 - p.window + 1) : 0;
  for (int64_t k0 = first / kRows * kRows; k0 <= last; k0 += kRows) {
    __syncthreads();
    stage<D>(ks, k, p.k, b, k0, p.seq, g);
    stage<D>(vs, v, p.v, b, k0, p.seq, g);
    __syncthreads();
    float s[8][4], dp[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) s[nt][r] = dp[nt][r] = 0.0f;
    }
    rows_times_rows<D, 8, kBf16>(s, qs + warp * 16 * S, ks, group, tig);
    rows_times_rows<D, 8, kBf16>(dp, dos + warp * 16 * S, vs, group, tig);
    // dS = P (dP - delta), zero where hidden; kept in s.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t i = r < 2 ? row_a : row_b;
        const int64_t j = k0 + nt * 8 + tig * 2 + (r & 1);
        const bool seen = i < p.seq && j < p.seq && visible(i, j, p.window);
        const float prob = exp2f(s[nt][r] * p.scale_log2 - (r < 2 ? lse_a : lse_b));
        s[nt][r] = seen ? prob * (dp[nt][r] - (r < 2 ? delta_a : delta_b)) : 0.0f;
      }
    }
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {
      const uint32_t a0 = pack_rounded<kBf16>(s[2 * kc][0], s[2 * kc][1]);
      const uint32_t a1 = pack_rounded<kBf16>(s[2 * kc][2], s[2 * kc][3]);
      const uint32_t a2 = pack_rounded<kBf16>(s[2 * kc + 1][0], s[2 * kc + 1][1]);
      const uint32_t a3 = pack_rounded<kBf16>(s[2 * kc + 1][2], s[2 * kc + 1][3]);
      chunk_times_tile<D, kBf16>(acc, a0, a1, a2, a3, ks, kc * 16, group, tig);
    }
  }
  const int64_t rows[2] = {row_a, row_b};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (rows[half] >= p.seq) continue;
    uint16_t* dst = dq + offset(p.dq, b, rows[half], h) + tig * 2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      store_pair<kBf16>(dst + dt * 8, p.scale * acc[dt][2 * half], p.scale * acc[dt][2 * half + 1]);
    }
  }
}

// dK and dV. grid: (key blocks, B * KVH). Each warp owns 16 keys; the scores are computed
// transposed (keys as rows), 16 queries at a time to bound the registers.
template <int D, bool kBf16>
__global__ void __launch_bounds__(kThreads)
    mma_attention_dkv(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                      const uint16_t* dout, uint16_t* dk, uint16_t* dv, MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  uint16_t* ks = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* vs = ks + kRows * S;
  uint16_t* qs = vs + kRows * S;
  uint16_t* dos = qs + kRows * S;
  float* lse_tile = reinterpret_cast<float*>(dos + kRows * S);  // [kRows], log2 domain
  float* delta_tile = lse_tile + kRows;                          // [kRows]
  const int64_t b = blockIdx.y / p.kv_heads, g = blockIdx.y % p.kv_heads;
  const int64_t group_heads = p.heads / p.kv_heads;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t k0 = int64_t{blockIdx.x} * kRows;
  const int64_t key_a = k0 + warp * 16 + group, key_b = key_a + 8;
  stage<D>(ks, k, p.k, b, k0, p.seq, g);
  stage<D>(vs, v, p.v, b, k0, p.seq, g);

  float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
    for (int r = 0; r < 4; ++r) dk_acc[dt][r] = dv_acc[dt][r] = 0.0f;
  }
  const int64_t last_key = min(p.seq - 1, k0 + kRows - 1);
  const int64_t end = p.window > 0 ? min(p.seq, last_key + p.window) : p.seq;
  for (int64_t h = g * group_heads; h < (g + 1) * group_heads; ++h) {
    const int64_t stats = (b * p.heads + h) * p.seq;
    for (int64_t q0 = k0 / kRows * kRows; q0 < end; q0 += kRows) {
      __syncthreads();
      stage<D>(qs, q, p.q, b, q0, p.seq, h);
      stage<D>(dos, dout, p.dout, b, q0, p.seq, h);
      if (threadIdx.x < kRows) {
        const int64_t i = q0 + threadIdx.x;
        lse_tile[threadIdx.x] = i < p.seq ? p.lse[stats + i] * kLog2e : 0.0f;
        delta_tile[threadIdx.x] = i < p.seq ? p.delta[stats + i] : 0.0f;
      }
      __syncthreads();
      // Queries in parts of 16 (two score tiles), not unrolled: D = 128 then fits the registers.
#pragma unroll 1
      for (int part = 0; part < kRows / 16; ++part) {  // queries q0 + 16 part .. + 15
        float st[2][4], dpt[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) st[nt][r] = dpt[nt][r] = 0.0f;
        }
        rows_times_rows<D, 2, kBf16>(st, ks + warp * 16 * S, qs + part * 16 * S, group, tig);
        rows_times_rows<D, 2, kBf16>(dpt, vs + warp * 16 * S, dos + part * 16 * S, group, tig);
        // st becomes P^T, dpt becomes dS^T (zero where hidden).
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int64_t j = r < 2 ? key_a : key_b;
            const int col = part * 16 + nt * 8 + tig * 2 + (r & 1);
            const int64_t i = q0 + col;
            const bool seen = i < p.seq && j < p.seq && visible(i, j, p.window);
            const float prob = seen ? exp2f(st[nt][r] * p.scale_log2 - lse_tile[col]) : 0.0f;
            st[nt][r] = prob;
            dpt[nt][r] = prob * (dpt[nt][r] - delta_tile[col]);
          }
        }
        const uint32_t p0 = pack_rounded<kBf16>(st[0][0], st[0][1]);
        const uint32_t p1 = pack_rounded<kBf16>(st[0][2], st[0][3]);
        const uint32_t p2 = pack_rounded<kBf16>(st[1][0], st[1][1]);
        const uint32_t p3 = pack_rounded<kBf16>(st[1][2], st[1][3]);
        chunk_times_tile<D, kBf16>(dv_acc, p0, p1, p2, p3, dos, part * 16, group, tig);
        const uint32_t d0 = pack_rounded<kBf16>(dpt[0][0], dpt[0][1]);
        const uint32_t d1 = pack_rounded<kBf16>(dpt[0][2], dpt[0][3]);
        const uint32_t d2 = pack_rounded<kBf16>(dpt[1][0], dpt[1][1]);
        const uint32_t d3 = pack_rounded<kBf16>(dpt[1][2], dpt[1][3]);
        chunk_times_tile<D, kBf16>(dk_acc, d0, d1, d2, d3, qs, part * 16, group, tig);
      }
    }
  }
  const int64_t keys[2] = {key_a, key_b};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (keys[half] >= p.seq) continue;
    uint16_t* dk_row = dk + offset(p.dk, b, keys[half], g) + tig * 2;
    uint16_t* dv_row = dv + offset(p.dv, b, keys[half], g) + tig * 2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      store_pair<kBf16>(dk_row + dt * 8, p.scale * dk_acc[dt][2 * half],
                        p.scale * dk_acc[dt][2 * half + 1]);
      store_pair<kBf16>(dv_row + dt * 8, dv_acc[dt][2 * half], dv_acc[dt][2 * half + 1]);
    }
  }
}

size_t tile_bytes(int64_t head_dim) {
  return sizeof(uint16_t) * static_cast<size_t>(kRows * (head_dim + kPad));
}

// Opts `Kernel` into `bytes` of dynamic shared memory, once per kernel and size rather than on
// every launch (the call goes into the driver). One process drives one GPU (a rank per GPU).
template <auto Kernel>
void allow_shared(size_t bytes) {
  static size_t allowed = 0;  // one per kernel: Kernel is a template argument
  if (bytes <= allowed) return;
  ZERO_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
  allowed = bytes;
}

bool aligned_view(const void* base, const HeadLayout& l) {
  // 16-byte rows: every row start a multiple of 8 elements from a 16-byte aligned base.
  return reinterpret_cast<uintptr_t>(base) % 16 == 0 && l.batch_stride % 8 == 0 &&
         l.seq_stride % 8 == 0 && l.head_stride % 8 == 0;
}

MmaParams params_of(const AttentionArgs& a) {
  MmaParams p{};
  p.seq = a.seq;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.window = a.window;
  p.scale = a.scale;
  p.scale_log2 = a.scale * kLog2e;
  p.q = a.q_layout;
  p.k = a.k_layout;
  p.v = a.v_layout;
  p.out = a.out_layout;
  p.dout = a.dout_layout;
  p.dq = a.dq_layout;
  p.dk = a.dk_layout;
  p.dv = a.dv_layout;
  p.lse = a.lse;
  p.delta = a.delta;
  return p;
}

// Calls f.template operator()<D, kBf16>() for the args' head dimension and dtype.
template <typename F>
void dispatch_mma(const AttentionArgs& a, F&& f) {
  const bool bf16 = a.dtype == DType::kBF16;
  if (a.head_dim == 64) {
    bf16 ? f.template operator()<64, true>() : f.template operator()<64, false>();
  } else {
    bf16 ? f.template operator()<128, true>() : f.template operator()<128, false>();
  }
}

}  // namespace

bool mma_attention_supported(const AttentionArgs& a, bool backward) {
  static const bool forced_simple = [] {
    const char* choice = std::getenv("ZERO_CUDA_ATTENTION");
    return choice != nullptr && std::strcmp(choice, "simple") == 0;
  }();
  if (forced_simple) return false;
  if (a.dtype != DType::kBF16 && a.dtype != DType::kF16) return false;
  if (a.head_dim != 64 && a.head_dim != 128) return false;
  bool ok = aligned_view(a.q, a.q_layout) && aligned_view(a.k, a.k_layout) &&
            aligned_view(a.v, a.v_layout) && aligned_view(a.out, a.out_layout);
  if (backward) {
    ok = ok && aligned_view(a.dout, a.dout_layout) && aligned_view(a.dq, a.dq_layout) &&
         aligned_view(a.dk, a.dk_layout) && aligned_view(a.dv, a.dv_layout);
  }
  return ok;
}

void launch_attention_forward_mma(const AttentionArgs& a, cudaStream_t stream) {
  const MmaParams p = params_of(a);
  const size_t shared = 3 * tile_bytes(a.head_dim);
  const dim3 grid(static_cast<unsigned>((a.seq + kRows - 1) / kRows),
                  static_cast<unsigned>(a.batch * a.heads));
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    allow_shared<mma_attention_forward<D, kBf16>>(shared);
    mma_attention_forward<D, kBf16><<<grid, kThreads, shared, stream>>>(
        static_cast<const uint16_t*>(a.q), static_cast<const uint16_t*>(a.k),
        static_cast<const uint16_t*>(a.v), static_cast<uint16_t*>(a.out), p);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_attention_backward_mma(const AttentionArgs& a, cudaStream_t stream) {
  const MmaParams p = params_of(a);
  const unsigned blocks = static_cast<unsigned>((a.seq + kRows - 1) / kRows);
  const size_t dq_shared = 4 * tile_bytes(a.head_dim);
  const size_t dkv_shared = 4 * tile_bytes(a.head_dim) + 2 * sizeof(float) * kRows;
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    const auto* q = static_cast<const uint16_t*>(a.q);
    const auto* k = static_cast<const uint16_t*>(a.k);
    const auto* v = static_cast<const uint16_t*>(a.v);
    const auto* dout = static_cast<const uint16_t*>(a.dout);
    allow_shared<mma_attention_dq<D, kBf16>>(dq_shared);
    mma_attention_dq<D, kBf16><<<dim3(blocks, static_cast<unsigned>(a.batch * a.heads)), kThreads,
                                 dq_shared, stream>>>(q, k, v, dout,
                                                      static_cast<uint16_t*>(a.dq), p);
    ZERO_CUDA_CHECK_LAUNCH();
    allow_shared<mma_attention_dkv<D, kBf16>>(dkv_shared);
    mma_attention_dkv<D, kBf16><<<dim3(blocks, static_cast<unsigned>(a.batch * a.kv_heads)),
                                  kThreads, dkv_shared, stream>>>(
        q, k, v, dout, static_cast<uint16_t*>(a.dk), static_cast<uint16_t*>(a.dv), p);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace zero::backend::cuda
