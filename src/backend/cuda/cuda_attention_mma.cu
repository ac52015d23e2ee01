// Causal flash attention on tensor cores for bf16/f16 storage: mma.sync m16n8k16 (sm_80 and
// newer, H100 included) with f32 accumulation, head dimensions 64 and 128. It replaces the
// CUDA-core kernels of cuda_attention.cu where it applies (mma_attention_supported), which stay
// for f32, other head dimensions and misaligned views - and as the reference the op tests and
// ZERO_CUDA_ATTENTION=simple select.
//
// The FlashAttention-2 scheme: a block of 4 warps owns 64 rows, each warp 16 of them, and walks
// tiles of 64 keys (or queries) staged in shared memory (the forward takes 8 warps, 128 rows, for
// sequences over 128: each key tile then serves twice the rows). Score tiles S = Q K^T live in the
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
// Memory path: the streamed tiles (K/V in forward and dQ, Q/dO with their lse/delta in dK/dV)
// are double-buffered and filled with 16-byte cp.async, so tile i + 1 loads while tile i is
// multiplied; fragments come out of shared memory with ldmatrix (.trans for the operands read
// down their columns). Every shared row is padded by 16 bytes: the 8 rows one ldmatrix phase
// reads then start 16 bytes apart modulo 128 (row strides 144 and 272 bytes), which touches all
// 32 banks once - conflict-free without a swizzle. Tiles wholly visible to a warp (all but the
// diagonal ones of causal attention) skip the per-element mask, and a forward warp skips the key
// tiles it sees nothing of; both leave every result bit as it was.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA), lane = 4 * group + thread_in_group:
//   A 16x16 (row major): a0 = (group, 2t..2t+1), a1 = (group + 8, 2t..), a2 = (group, 2t + 8..),
//                        a3 = (group + 8, 2t + 8..); two 16-bit values per register, low first.
//   B 16x8 (k x n):      b0 = (k = 2t..2t+1, n = group), b1 = (k = 2t + 8.., n = group).
//   C 16x8 f32:          c0, c1 = (group, 2t..2t+1), c2, c3 = (group + 8, 2t..2t+1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_attention_backward_choice.h"

#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_mma_ptx.cuh"
#include "core/error.h"

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

using mma_ptx::cp_async_16;
using mma_ptx::cp_async_commit;
using mma_ptx::cp_async_wait;
using mma_ptx::ldmatrix_x4;
using mma_ptx::mma;

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

// Starts copying rows [r0, r0 + R) of head h into a [R][D + kPad] shared tile, 16 bytes per
// cp.async (the launcher checked the alignment); rows past `rows` are zeroed with plain stores.
// Complete after the caller's commit, wait and __syncthreads.
template <int D, int R = kRows>
__device__ __forceinline__ void stage(uint16_t* tile, const uint16_t* base, const HeadLayout& l,
                                      int64_t b, int64_t r0, int64_t rows, int64_t h) {
  constexpr int kChunks = D / 8;
  for (int e = threadIdx.x; e < R * kChunks; e += blockDim.x) {
    const int r = e / kChunks, c = e % kChunks;
    uint16_t* dst = tile + r * (D + kPad) + c * 8;
    if (r0 + r < rows) {
      cp_async_16(dst, base + offset(l, b, r0 + r, h) + c * 8);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

// acc[nt] += A(16 rows of `a`, all D columns) * B(rows nt*8.. of `b`)^T for nt < N: a 16 x 8N
// block of products of rows (S = Q K^T, dP = dO V^T), both operands row-major in shared memory.
// One ldmatrix.x4 gives the A fragment of a 16-column chunk (lanes 0-15 name its rows, at column
// 0, lanes 16-31 the same rows at column 8), one more the B fragments of two n-tiles (lanes
// 0-7 rows n.. at column 0, 8-15 the same at column 8, 16-31 likewise for rows n + 8..).
template <int D, int N, bool kBf16>
__device__ __forceinline__ void rows_times_rows(float (&acc)[N][4], const uint16_t* a,
                                                const uint16_t* b, int lane) {
  static_assert(N % 2 == 0, "n-tiles are loaded in pairs");
  constexpr int S = D + kPad;
  const uint16_t* a_row = a + (lane % 16) * S + (lane / 16) * 8;
  const uint16_t* b_row = b + (lane % 8 + (lane / 16) * 8) * S + (lane / 8 % 2) * 8;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    uint32_t af[4];
    ldmatrix_x4<false>(af, a_row + kc * 16);
#pragma unroll
    for (int nt = 0; nt < N; nt += 2) {
      uint32_t bf[4];
      ldmatrix_x4<false>(bf, b_row + nt * 8 * S + kc * 16);
      mma<kBf16>(acc[nt], af[0], af[1], af[2], af[3], bf[0], bf[1]);
      mma<kBf16>(acc[nt + 1], af[0], af[1], af[2], af[3], bf[2], bf[3]);
    }
  }
}

// acc[dt] += P(16 x 16 chunk, A fragments a0..a3) * tile rows [k0, k0 + 16) (all D columns):
// the product of a probability (or dS) chunk with a value-like tile read down its columns.
// ldmatrix.x4.trans gives the B fragments of two 8-column tiles: lanes 0-7 name rows k0.. and
// 8-15 rows k0 + 8.. at column 8 dt, lanes 16-31 the same rows at column 8 dt + 8.
template <int D, bool kBf16>
__device__ __forceinline__ void chunk_times_tile(float (&acc)[D / 8][4], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, const uint16_t* tile,
                                                 int k0, int lane) {
  constexpr int S = D + kPad;
  const uint16_t* row = tile + (k0 + lane % 8 + (lane / 8 % 2) * 8) * S + (lane / 16) * 8;
#pragma unroll
  for (int dt = 0; dt < D / 8; dt += 2) {
    uint32_t bf[4];
    ldmatrix_x4<true>(bf, row + dt * 8);
    mma<kBf16>(acc[dt], a0, a1, a2, a3, bf[0], bf[1]);
    mma<kBf16>(acc[dt + 1], a0, a1, a2, a3, bf[2], bf[3]);
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

// Whether every query of [q_first, q_last] sees every key of [k0, k0 + kRows), all of them real
// keys: such tiles (all but the diagonal ones of causal attention) skip the per-element mask,
// whose 64-bit index arithmetic otherwise costs about as much as the exponentials. Queries past
// the sequence are not checked: their rows are computed from zeros and never stored.
__device__ __forceinline__ bool tile_unmasked(int64_t q_first, int64_t q_last, int64_t k0,
                                              const MmaParams& p) {
  return k0 + kRows <= p.seq && k0 + kRows - 1 <= q_first &&
         (p.window == 0 || q_last - k0 < p.window);
}

// Whether any query of [q_first, q_last] sees any key of [k0, k0 + kRows). A forward warp skips
// the tiles it sees none of: their p would all be 0, changing neither m, l nor the output.
__device__ __forceinline__ bool tile_seen(int64_t q_first, int64_t q_last, int64_t k0,
                                          const MmaParams& p) {
  return k0 <= q_last && (p.window == 0 || q_first - (k0 + kRows - 1) < p.window);
}

// The forward's blocks per SM that the register allocation must allow: at D = 64, 4 (128
// registers a thread, no spills; 4 x 45 KiB of tiles fit too) instead of the 3 that ptxas's
// unbounded 134 registers leave. (Bounding the backward kernels so makes them spill.)
constexpr int forward_min_blocks(int head_dim, int warps) {
  return head_dim == 64 ? 16 / warps : 1;
}

// grid: (query blocks of 16 W rows, B * H); W warps, each owning 16 query rows, share every
// 64-key tile (W = 8 halves the tile loads per FLOP of W = 4).
template <int D, int W, bool kBf16>
__global__ void __launch_bounds__(W * kWarp, forward_min_blocks(D, W))
    mma_attention_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out,
                          MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  constexpr int kBlockRows = 16 * W;
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* kv = qs + kBlockRows * S;  // buffer i: K at kv + 2 i kRows S, V right after it
  const int64_t b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t q0 = int64_t{blockIdx.x} * kBlockRows;
  const int64_t warp_first = q0 + warp * 16, warp_last = warp_first + 15;
  const int64_t row_a = warp_first + group, row_b = row_a + 8;
  const int64_t last = min(p.seq - 1, q0 + kBlockRows - 1);
  const int64_t first = p.window > 0 ? max(int64_t{0}, q0 - p.window + 1) : 0;
  const int64_t k_begin = first / kRows * kRows;
  auto stage_kv = [&](int64_t k0, int buf) {
    stage<D>(kv + 2 * buf * kRows * S, k, p.k, b, k0, p.seq, g);
    stage<D>(kv + (2 * buf + 1) * kRows * S, v, p.v, b, k0, p.seq, g);
  };
  stage<D, kBlockRows>(qs, q, p.q, b, q0, p.seq, h);
  stage_kv(k_begin, 0);
  cp_async_commit();

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  int buf = 0;
  for (int64_t k0 = k_begin; k0 <= last; k0 += kRows, buf ^= 1) {
    // Prefetch the next tiles into the other buffer (which the previous iteration finished
    // reading before its closing barrier), then wait for this tile's group only.
    if (k0 + kRows <= last) stage_kv(k0 + kRows, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // every thread's copies of this tile (and Q) are visible
    const uint16_t* ks = kv + 2 * buf * kRows * S;
    const uint16_t* vs = ks + kRows * S;
    if (tile_seen(warp_first, warp_last, k0, p)) {
      float s[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      rows_times_rows<D, 8, kBf16>(s, qs + warp * 16 * S, ks, lane);
      if (tile_unmasked(warp_first, warp_last, k0, p)) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) s[nt][r] *= p.scale_log2;
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int64_t i = r < 2 ? row_a : row_b;
            const int64_t j = k0 + nt * 8 + tig * 2 + (r & 1);
            s[nt][r] = j < p.seq && visible(i, j, p.window) ? s[nt][r] * p.scale_log2 : -INFINITY;
          }
        }
      }
      float max_a = -INFINITY, max_b = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
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
        chunk_times_tile<D, kBf16>(o, a0, a1, a2, a3, vs, kc * 16, lane);
      }
    }
    __syncthreads();  // this buffer is refilled by the next iteration's prefetch
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
  uint16_t* kv = dos + kRows * S;  // buffer i: K at kv + 2 i kRows S, V right after it
  const int64_t b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t q0 = int64_t{blockIdx.x} * kRows;
  const int64_t row_a = q0 + warp * 16 + group, row_b = row_a + 8;
  const int64_t last = min(p.seq - 1, q0 + kRows - 1);
  const int64_t first = p.window > 0 ? max(int64_t{0}, q0 - p.window + 1) : 0;
  const int64_t k_begin = first / kRows * kRows;
  auto stage_kv = [&](int64_t k0, int buf) {
    stage<D>(kv + 2 * buf * kRows * S, k, p.k, b, k0, p.seq, g);
    stage<D>(kv + (2 * buf + 1) * kRows * S, v, p.v, b, k0, p.seq, g);
  };
  stage<D>(qs, q, p.q, b, q0, p.seq, h);
  stage<D>(dos, dout, p.dout, b, q0, p.seq, h);
  stage_kv(k_begin, 0);
  cp_async_commit();
  const int64_t stats = (b * p.heads + h) * p.seq;
  const float lse_a = row_a < p.seq ? p.lse[stats + row_a] * kLog2e : 0.0f;
  const float lse_b = row_b < p.seq ? p.lse[stats + row_b] * kLog2e : 0.0f;
  const float delta_a = row_a < p.seq ? p.delta[stats + row_a] : 0.0f;
  const float delta_b = row_b < p.seq ? p.delta[stats + row_b] : 0.0f;

  float acc[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.0f;
  int buf = 0;
  for (int64_t k0 = k_begin; k0 <= last; k0 += kRows, buf ^= 1) {
    if (k0 + kRows <= last) stage_kv(k0 + kRows, buf ^ 1);  // as in the forward
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint16_t* ks = kv + 2 * buf * kRows * S;
    const uint16_t* vs = ks + kRows * S;
    float s[8][4], dp[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) s[nt][r] = dp[nt][r] = 0.0f;
    }
    rows_times_rows<D, 8, kBf16>(s, qs + warp * 16 * S, ks, lane);
    rows_times_rows<D, 8, kBf16>(dp, dos + warp * 16 * S, vs, lane);
    // dS = P (dP - delta), zero where hidden; kept in s.
    const bool unmasked = tile_unmasked(q0 + warp * 16, q0 + warp * 16 + 15, k0, p);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float prob = exp2f(s[nt][r] * p.scale_log2 - (r < 2 ? lse_a : lse_b));
        s[nt][r] = prob * (dp[nt][r] - (r < 2 ? delta_a : delta_b));
      }
    }
    if (!unmasked) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int64_t i = r < 2 ? row_a : row_b;
          const int64_t j = k0 + nt * 8 + tig * 2 + (r & 1);
          if (!(i < p.seq && j < p.seq && visible(i, j, p.window))) s[nt][r] = 0.0f;
        }
      }
    }
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {
      const uint32_t a0 = pack_rounded<kBf16>(s[2 * kc][0], s[2 * kc][1]);
      const uint32_t a1 = pack_rounded<kBf16>(s[2 * kc][2], s[2 * kc][3]);
      const uint32_t a2 = pack_rounded<kBf16>(s[2 * kc + 1][0], s[2 * kc + 1][1]);
      const uint32_t a3 = pack_rounded<kBf16>(s[2 * kc + 1][2], s[2 * kc + 1][3]);
      chunk_times_tile<D, kBf16>(acc, a0, a1, a2, a3, ks, kc * 16, lane);
    }
    __syncthreads();  // this buffer is refilled by the next iteration's prefetch
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
  uint16_t* qdo = vs + kRows * S;  // buffer i: Q at qdo + 2 i kRows S, dO right after it
  float* stats_tiles = reinterpret_cast<float*>(qdo + 4 * kRows * S);  // buffer i: lse, delta
  const int64_t b = blockIdx.y / p.kv_heads, g = blockIdx.y % p.kv_heads;
  const int64_t group_heads = p.heads / p.kv_heads;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t k0 = int64_t{blockIdx.x} * kRows;
  const int64_t key_a = k0 + warp * 16 + group, key_b = key_a + 8;
  const int64_t last_key = min(p.seq - 1, k0 + kRows - 1);
  const int64_t end = p.window > 0 ? min(p.seq, last_key + p.window) : p.seq;
  // The (head, query tile) steps, heads of the GQA group outermost: step -> head
  // g group_heads + step / q_tiles, queries from k0 + kRows (step % q_tiles).
  const int64_t q_tiles = (end - k0 + kRows - 1) / kRows;
  const int64_t steps = group_heads * q_tiles;
  // Starts loading step `step`'s Q and dO tiles (cp.async) and its lse (log2 domain) and delta
  // rows (plain loads and stores) into buffer `buf`.
  auto stage_step = [&](int64_t step, int buf) {
    const int64_t h = g * group_heads + step / q_tiles, q0 = k0 + kRows * (step % q_tiles);
    stage<D>(qdo + 2 * buf * kRows * S, q, p.q, b, q0, p.seq, h);
    stage<D>(qdo + (2 * buf + 1) * kRows * S, dout, p.dout, b, q0, p.seq, h);
    if (threadIdx.x < kRows) {
      const int64_t i = q0 + threadIdx.x, stats = (b * p.heads + h) * p.seq;
      stats_tiles[2 * buf * kRows + threadIdx.x] = i < p.seq ? p.lse[stats + i] * kLog2e : 0.0f;
      stats_tiles[(2 * buf + 1) * kRows + threadIdx.x] = i < p.seq ? p.delta[stats + i] : 0.0f;
    }
  };
  stage<D>(ks, k, p.k, b, k0, p.seq, g);
  stage<D>(vs, v, p.v, b, k0, p.seq, g);
  stage_step(0, 0);
  cp_async_commit();

  float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
    for (int r = 0; r < 4; ++r) dk_acc[dt][r] = dv_acc[dt][r] = 0.0f;
  }
  int buf = 0;
  for (int64_t step = 0; step < steps; ++step, buf ^= 1) {
    if (step + 1 < steps) stage_step(step + 1, buf ^ 1);  // as in the forward
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int64_t q0 = k0 + kRows * (step % q_tiles);
    const uint16_t* qs = qdo + 2 * buf * kRows * S;
    const uint16_t* dos = qs + kRows * S;
    const float* lse_tile = stats_tiles + 2 * buf * kRows;  // log2 domain
    const float* delta_tile = lse_tile + kRows;
    // Queries past the sequence must not count here (their rows would add to dK and dV).
    const bool unmasked = q0 + kRows <= p.seq && tile_unmasked(q0, q0 + kRows - 1, k0, p);
    // Queries in parts of 16 (two score tiles), not unrolled: D = 128 then fits the registers.
#pragma unroll 1
    for (int part = 0; part < kRows / 16; ++part) {  // queries q0 + 16 part .. + 15
      float st[2][4], dpt[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) st[nt][r] = dpt[nt][r] = 0.0f;
      }
      rows_times_rows<D, 2, kBf16>(st, ks + warp * 16 * S, qs + part * 16 * S, lane);
      rows_times_rows<D, 2, kBf16>(dpt, vs + warp * 16 * S, dos + part * 16 * S, lane);
      // st becomes P^T, dpt becomes dS^T (zero where hidden).
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int col = part * 16 + nt * 8 + tig * 2 + (r & 1);
          st[nt][r] = exp2f(st[nt][r] * p.scale_log2 - lse_tile[col]);
        }
      }
      if (!unmasked) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int64_t j = r < 2 ? key_a : key_b;
            const int64_t i = q0 + part * 16 + nt * 8 + tig * 2 + (r & 1);
            if (!(i < p.seq && j < p.seq && visible(i, j, p.window))) st[nt][r] = 0.0f;
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int col = part * 16 + nt * 8 + tig * 2 + (r & 1);
          dpt[nt][r] = st[nt][r] * (dpt[nt][r] - delta_tile[col]);
        }
      }
      const uint32_t p0 = pack_rounded<kBf16>(st[0][0], st[0][1]);
      const uint32_t p1 = pack_rounded<kBf16>(st[0][2], st[0][3]);
      const uint32_t p2 = pack_rounded<kBf16>(st[1][0], st[1][1]);
      const uint32_t p3 = pack_rounded<kBf16>(st[1][2], st[1][3]);
      chunk_times_tile<D, kBf16>(dv_acc, p0, p1, p2, p3, dos, part * 16, lane);
      const uint32_t d0 = pack_rounded<kBf16>(dpt[0][0], dpt[0][1]);
      const uint32_t d1 = pack_rounded<kBf16>(dpt[0][2], dpt[0][3]);
      const uint32_t d2 = pack_rounded<kBf16>(dpt[1][0], dpt[1][1]);
      const uint32_t d3 = pack_rounded<kBf16>(dpt[1][2], dpt[1][3]);
      chunk_times_tile<D, kBf16>(dk_acc, d0, d1, d2, d3, qs, part * 16, lane);
    }
    __syncthreads();  // this buffer is refilled by the next step's prefetch
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

// ---- dK/dV, version 2 (ZERO_CUDA_ATTENTION_BWD=v2, v2-hoist, v2-w8; NOT YET MEASURED) ----------
// The same products in the same order per output element as mma_attention_dkv, so the same
// bytes (tests/backend/test_cuda_attention_variants.cpp, on the simulator), with fewer
// shared-memory fragment loads per mma. ncu of mma_attention_dkv (H200, D = 64, commit 6e995c8):
// L1/shared throughput 75%, 44% of the issue rate, 25% occupancy: per 16 queries a warp issues
// 24 ldmatrix.x4 for 32 mma (D = 64), 8 of them re-reading its own K and V rows (the A operands
// of S^T = K Q^T and dP^T = V dO^T, which never change).
//   - kPart = 32 queries per part (4 score tiles) instead of 16: each A fragment feeds 4 mma
//     instead of 2, and S^T, dP^T give 8 independent accumulator chains to overlap.
//   - kHoistK / kHoistV: the warp's K (V) A fragments are loaded once into D / 4 registers each.
//   - Each warp tests its own 16 keys: query tiles it sees nothing of (a window's far end, the
//     upper warps of an 8-warp block on the diagonal) are skipped, and the per-element mask runs
//     only where this warp's keys are cut. Skipped terms are exact zeros: the sums keep their bits.
//   - W warps a block (16 W keys share each staged Q/dO tile); kMinBlocks bounds the registers.
// ldmatrix.x4 per mma (per warp, any 32 queries), and ptxas -v (sm_90, CUDA 12, both dtypes):
//   kernel (choice)                              D = 64                     D = 128
//   mma_attention_dkv (v1)                       0.75, 127 regs, 4 blocks   0.75, 223 regs, 2
//   v2:       W 4, kPart 32, nothing hoisted     0.63, 128 regs, 4 blocks   0.63, 247 regs, 2
//   v2-hoist: W 4, kPart 16, K+V (D=128: K)      0.50, 168 regs, 3 blocks   0.63, 250 regs, 2
//   v2-w8:    W 8, kPart 32, nothing hoisted     0.63, 128 regs, 2 x 8 warps 0.63, 247 regs, 1 x 8
// No spills anywhere. Shared memory a block: W 4 56.3 KB (D = 64) / 105.5 KB (D = 128), as v1;
// W 8 74.8 / 140.3 KB (the K/V tiles double).
// PREDICTION for the H200 (not measured; written before any run): if the kernel stays bound by
// its shared-memory loads, time follows the ldmatrix count: v2 ~15% faster than v1 at both head
// dimensions (dK/dV from ~83 to ~95 TFLOP/s; about 4/7 of the backward's time is dK/dV, so the
// Llama's 26.4 ms backward -> ~24.5 ms, GPT-2's 7.6 -> ~7.0). v2-hoist at D = 64 loads a third
// fewer fragments than v1 but runs 12 warps an SM instead of 16: between v1 and 1.3x, the
// least certain. v2-w8 halves the Q/dO staging per FLOP: v2's speed to +5%. At D = 128 all keep
// v1's 8 warps an SM. Whichever wins in the A/B should become the default (and v1 go).

// rows_times_rows, with the A fragments either loaded from `a` (kHoisted false) or given in `af`
// (as load_row_fragments loaded them). The same mma in the same order either way.
template <int D, int N, bool kHoisted, bool kBf16>
__device__ __forceinline__ void maybe_hoisted_rows_times_rows(
    float (&acc)[N][4], const uint32_t (&af)[kHoisted ? D / 16 : 1][4], const uint16_t* a,
    const uint16_t* b, int lane) {
  if constexpr (!kHoisted) {
    rows_times_rows<D, N, kBf16>(acc, a, b, lane);
  } else {
    static_assert(N % 2 == 0, "n-tiles are loaded in pairs");
    constexpr int S = D + kPad;
    const uint16_t* b_row = b + (lane % 8 + (lane / 16) * 8) * S + (lane / 8 % 2) * 8;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
#pragma unroll
      for (int nt = 0; nt < N; nt += 2) {
        uint32_t bf[4];
        ldmatrix_x4<false>(bf, b_row + nt * 8 * S + kc * 16);
        mma<kBf16>(acc[nt], af[kc][0], af[kc][1], af[kc][2], af[kc][3], bf[0], bf[1]);
        mma<kBf16>(acc[nt + 1], af[kc][0], af[kc][1], af[kc][2], af[kc][3], bf[2], bf[3]);
      }
    }
  }
}

// The A fragments of 16 rows of `a` (all D columns), as rows_times_rows loads them.
template <int D, bool kHoisted>
__device__ __forceinline__ void load_row_fragments(uint32_t (&af)[kHoisted ? D / 16 : 1][4],
                                                   const uint16_t* a, int lane) {
  if constexpr (kHoisted) {
    constexpr int S = D + kPad;
    const uint16_t* a_row = a + (lane % 16) * S + (lane / 16) * 8;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) ldmatrix_x4<false>(af[kc], a_row + kc * 16);
  } else {
    af[0][0] = af[0][1] = af[0][2] = af[0][3] = 0;  // unused
  }
}

// grid: (key blocks of 16 W keys, B * KVH).
template <int D, int W, int kPart, bool kHoistK, bool kHoistV, int kMinBlocks, bool kBf16>
__global__ void __launch_bounds__(W * kWarp, kMinBlocks)
    mma_attention_dkv_v2(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                         const uint16_t* dout, uint16_t* dk, uint16_t* dv, MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  constexpr int kKeys = 16 * W;
  static_assert(kPart == 16 || kPart == 32, "queries per part: one or two 16-query chunks");
  uint16_t* ks = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* vs = ks + kKeys * S;
  uint16_t* qdo = vs + kKeys * S;  // buffer i: Q at qdo + 2 i kRows S, dO right after it
  float* stats_tiles = reinterpret_cast<float*>(qdo + 4 * kRows * S);  // buffer i: lse, delta
  const int64_t b = blockIdx.y / p.kv_heads, g = blockIdx.y % p.kv_heads;
  const int64_t group_heads = p.heads / p.kv_heads;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t k0 = int64_t{blockIdx.x} * kKeys;
  const int64_t warp_k0 = k0 + warp * 16, warp_k1 = warp_k0 + 15;  // this warp's keys
  const int64_t key_a = warp_k0 + group, key_b = key_a + 8;
  const int64_t last_key = min(p.seq - 1, k0 + kKeys - 1);
  const int64_t end = p.window > 0 ? min(p.seq, last_key + p.window) : p.seq;
  // Steps as in mma_attention_dkv: heads of the GQA group outermost, 64-query tiles from k0.
  const int64_t q_tiles = (end - k0 + kRows - 1) / kRows;
  const int64_t steps = group_heads * q_tiles;
  auto stage_step = [&](int64_t step, int buf) {
    const int64_t h = g * group_heads + step / q_tiles, q0 = k0 + kRows * (step % q_tiles);
    stage<D>(qdo + 2 * buf * kRows * S, q, p.q, b, q0, p.seq, h);
    stage<D>(qdo + (2 * buf + 1) * kRows * S, dout, p.dout, b, q0, p.seq, h);
    if (threadIdx.x < kRows) {
      const int64_t i = q0 + threadIdx.x, stats = (b * p.heads + h) * p.seq;
      stats_tiles[2 * buf * kRows + threadIdx.x] = i < p.seq ? p.lse[stats + i] * kLog2e : 0.0f;
      stats_tiles[(2 * buf + 1) * kRows + threadIdx.x] = i < p.seq ? p.delta[stats + i] : 0.0f;
    }
  };
  stage<D, kKeys>(ks, k, p.k, b, k0, p.seq, g);
  stage<D, kKeys>(vs, v, p.v, b, k0, p.seq, g);
  stage_step(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t kf[kHoistK ? D / 16 : 1][4], vf[kHoistV ? D / 16 : 1][4];
  load_row_fragments<D, kHoistK>(kf, ks + warp * 16 * S, lane);
  load_row_fragments<D, kHoistV>(vf, vs + warp * 16 * S, lane);

  float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
    for (int r = 0; r < 4; ++r) dk_acc[dt][r] = dv_acc[dt][r] = 0.0f;
  }
  int buf = 0;
  for (int64_t step = 0; step < steps; ++step, buf ^= 1) {
    if (step + 1 < steps) stage_step(step + 1, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int64_t q0 = k0 + kRows * (step % q_tiles);
    const uint16_t* qs = qdo + 2 * buf * kRows * S;
    const uint16_t* dos = qs + kRows * S;
    const float* lse_tile = stats_tiles + 2 * buf * kRows;  // log2 domain
    const float* delta_tile = lse_tile + kRows;
    // Whether any query of the tile sees any of this warp's keys (warp-uniform: no barrier
    // inside), and whether all of them see all of its keys, all real.
    const bool seen = warp_k0 < p.seq && warp_k0 <= q0 + kRows - 1 &&
                      (p.window == 0 || q0 - warp_k1 < p.window);
    const bool unmasked = q0 + kRows <= p.seq && warp_k1 < p.seq && warp_k1 <= q0 &&
                          (p.window == 0 || q0 + kRows - 1 - warp_k0 < p.window);
#pragma unroll 1
    for (int part = 0; part < kRows / kPart && seen; ++part) {
      const int64_t part_q0 = q0 + part * kPart;  // queries part_q0 .. + kPart - 1

      float st[kPart / 8][4], dpt[kPart / 8][4];
#pragma unroll
      for (int nt = 0; nt < kPart / 8; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) st[nt][r] = dpt[nt][r] = 0.0f;
      }
      maybe_hoisted_rows_times_rows<D, kPart / 8, kHoistK, kBf16>(st, kf, ks + warp * 16 * S,
                                                       qs + part * kPart * S, lane);
      maybe_hoisted_rows_times_rows<D, kPart / 8, kHoistV, kBf16>(dpt, vf, vs + warp * 16 * S,
                                                       dos + part * kPart * S, lane);
      // st becomes P^T, dpt becomes dS^T (zero where hidden), as in mma_attention_dkv.
#pragma unroll
      for (int nt = 0; nt < kPart / 8; ++nt) {
        const int col = part * kPart + nt * 8 + tig * 2;
        const float2 lse2 = *reinterpret_cast<const float2*>(lse_tile + col);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          st[nt][r] = exp2f(st[nt][r] * p.scale_log2 - ((r & 1) ? lse2.y : lse2.x));
        }
      }
      if (!unmasked) {
#pragma unroll
        for (int nt = 0; nt < kPart / 8; ++nt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int64_t j = r < 2 ? key_a : key_b;
            const int64_t i = part_q0 + nt * 8 + tig * 2 + (r & 1);
            if (!(i < p.seq && j < p.seq && visible(i, j, p.window))) st[nt][r] = 0.0f;
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < kPart / 8; ++nt) {
        const int col = part * kPart + nt * 8 + tig * 2;
        const float2 delta2 = *reinterpret_cast<const float2*>(delta_tile + col);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          dpt[nt][r] = st[nt][r] * (dpt[nt][r] - ((r & 1) ? delta2.y : delta2.x));
        }
      }
#pragma unroll
      for (int c = 0; c < kPart / 16; ++c) {  // 16-query chunks in ascending order, as v1
        const int row0 = part * kPart + c * 16;
        const uint32_t p0 = pack_rounded<kBf16>(st[2 * c][0], st[2 * c][1]);
        const uint32_t p1 = pack_rounded<kBf16>(st[2 * c][2], st[2 * c][3]);
        const uint32_t p2 = pack_rounded<kBf16>(st[2 * c + 1][0], st[2 * c + 1][1]);
        const uint32_t p3 = pack_rounded<kBf16>(st[2 * c + 1][2], st[2 * c + 1][3]);
        chunk_times_tile<D, kBf16>(dv_acc, p0, p1, p2, p3, dos, row0, lane);
        const uint32_t d0 = pack_rounded<kBf16>(dpt[2 * c][0], dpt[2 * c][1]);
        const uint32_t d1 = pack_rounded<kBf16>(dpt[2 * c][2], dpt[2 * c][3]);
        const uint32_t d2 = pack_rounded<kBf16>(dpt[2 * c + 1][0], dpt[2 * c + 1][1]);
        const uint32_t d3 = pack_rounded<kBf16>(dpt[2 * c + 1][2], dpt[2 * c + 1][3]);
        chunk_times_tile<D, kBf16>(dk_acc, d0, d1, d2, d3, qs, row0, lane);
      }
    }
    __syncthreads();  // this buffer is refilled by the next step's prefetch
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


// ---- dQ, version 2 (with the v2 choices; NOT YET MEASURED) -----------------------------------
// mma_attention_dq's products in its order (the same bytes), with W warps a block as the forward
// takes them (W = 8 for sequences over 128: each staged K/V tile serves 128 query rows, half the
// tile loads per FLOP), warps skipping the key tiles they see nothing of (exact zeros), and
// optionally (kHoist) the warp's Q and dO A fragments loaded once into registers: per 64-key tile
// and D = 64, 40 + 16 ldmatrix.x4 for 96 mma become 32 + 16 (0.58 -> 0.5 a mma).
// ptxas -v (sm_90, both dtypes; v1's mma_attention_dq: 128 registers at D = 64, 168 at 128):
//   D = 64:  W 8, nothing hoisted, 2 blocks an SM: 128 registers (16 warps an SM, as v1)
//            W 4, Q/dO hoisted, 3 blocks: 168 (12 warps)
//   D = 128: W 8, nothing hoisted, 1 block: 234 (8 warps; v1 runs 12)
//            W 4 bounded to 3 blocks spills (8 bytes), so v2 and v2-hoist keep v1's dQ there.
template <int D, int W, bool kHoist, int kMinBlocks, bool kBf16>
__global__ void __launch_bounds__(W * kWarp, kMinBlocks)
    mma_attention_dq_v2(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                        const uint16_t* dout, uint16_t* dq, MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  constexpr int kBlockRows = 16 * W;
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* dos = qs + kBlockRows * S;
  uint16_t* kv = dos + kBlockRows * S;  // buffer i: K at kv + 2 i kRows S, V right after it
  const int64_t b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t q0 = int64_t{blockIdx.x} * kBlockRows;
  const int64_t warp_first = q0 + warp * 16, warp_last = warp_first + 15;
  const int64_t row_a = warp_first + group, row_b = row_a + 8;
  const int64_t last = min(p.seq - 1, q0 + kBlockRows - 1);
  const int64_t first = p.window > 0 ? max(int64_t{0}, q0 - p.window + 1) : 0;
  const int64_t k_begin = first / kRows * kRows;
  auto stage_kv = [&](int64_t k0, int buf) {
    stage<D>(kv + 2 * buf * kRows * S, k, p.k, b, k0, p.seq, g);
    stage<D>(kv + (2 * buf + 1) * kRows * S, v, p.v, b, k0, p.seq, g);
  };
  stage<D, kBlockRows>(qs, q, p.q, b, q0, p.seq, h);
  stage<D, kBlockRows>(dos, dout, p.dout, b, q0, p.seq, h);
  stage_kv(k_begin, 0);
  cp_async_commit();
  const int64_t stats = (b * p.heads + h) * p.seq;
  const float lse_a = row_a < p.seq ? p.lse[stats + row_a] * kLog2e : 0.0f;
  const float lse_b = row_b < p.seq ? p.lse[stats + row_b] * kLog2e : 0.0f;
  const float delta_a = row_a < p.seq ? p.delta[stats + row_a] : 0.0f;
  const float delta_b = row_b < p.seq ? p.delta[stats + row_b] : 0.0f;
  uint32_t qf[kHoist ? D / 16 : 1][4], dof[kHoist ? D / 16 : 1][4];
  if constexpr (kHoist) {
    cp_async_wait<0>();
    __syncthreads();
  }
  load_row_fragments<D, kHoist>(qf, qs + warp * 16 * S, lane);
  load_row_fragments<D, kHoist>(dof, dos + warp * 16 * S, lane);

  float acc[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.0f;
  int buf = 0;
  for (int64_t k0 = k_begin; k0 <= last; k0 += kRows, buf ^= 1) {
    if (k0 + kRows <= last) stage_kv(k0 + kRows, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint16_t* ks = kv + 2 * buf * kRows * S;
    const uint16_t* vs = ks + kRows * S;
    // Warp-uniform; a warp past the sequence or before the tile adds nothing here.
    if (warp_first < p.seq && tile_seen(warp_first, warp_last, k0, p)) {
      float s[8][4], dp[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) s[nt][r] = dp[nt][r] = 0.0f;
      }
      maybe_hoisted_rows_times_rows<D, 8, kHoist, kBf16>(s, qf, qs + warp * 16 * S, ks, lane);
      maybe_hoisted_rows_times_rows<D, 8, kHoist, kBf16>(dp, dof, dos + warp * 16 * S, vs, lane);
      // dS = P (dP - delta), zero where hidden; kept in s (as mma_attention_dq).
      const bool unmasked = tile_unmasked(warp_first, warp_last, k0, p);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float prob = exp2f(s[nt][r] * p.scale_log2 - (r < 2 ? lse_a : lse_b));
          s[nt][r] = prob * (dp[nt][r] - (r < 2 ? delta_a : delta_b));
        }
      }
      if (!unmasked) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int64_t i = r < 2 ? row_a : row_b;
            const int64_t j = k0 + nt * 8 + tig * 2 + (r & 1);
            if (!(i < p.seq && j < p.seq && visible(i, j, p.window))) s[nt][r] = 0.0f;
          }
        }
      }
#pragma unroll
      for (int kc = 0; kc < 4; ++kc) {
        const uint32_t a0 = pack_rounded<kBf16>(s[2 * kc][0], s[2 * kc][1]);
        const uint32_t a1 = pack_rounded<kBf16>(s[2 * kc][2], s[2 * kc][3]);
        const uint32_t a2 = pack_rounded<kBf16>(s[2 * kc + 1][0], s[2 * kc + 1][1]);
        const uint32_t a3 = pack_rounded<kBf16>(s[2 * kc + 1][2], s[2 * kc + 1][3]);
        chunk_times_tile<D, kBf16>(acc, a0, a1, a2, a3, ks, kc * 16, lane);
      }
    }
    __syncthreads();  // this buffer is refilled by the next iteration's prefetch
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

size_t tile_bytes(int64_t head_dim) {
  return sizeof(uint16_t) * static_cast<size_t>(kRows * (head_dim + kPad));
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

// The v2 dK/dV configurations (warps, queries per part, hoisted fragments, blocks per SM the
// registers must allow) per choice and head dimension; ptxas -v in the kernel's comment.
template <int D, int W, int kPart, bool kHoistK, bool kHoistV, int kMinBlocks, bool kBf16>
void launch_dkv_v2(const AttentionArgs& a, const MmaParams& p, uint16_t* dk, uint16_t* dv,
                   cudaStream_t stream) {
  constexpr int kKeys = 16 * W;
  const size_t shared = sizeof(uint16_t) * (2 * kKeys + 4 * kRows) * (D + kPad) +
                        4 * sizeof(float) * kRows;  // K, V, two Q/dO buffers, lse/delta
  const dim3 grid(static_cast<unsigned>((a.seq + kKeys - 1) / kKeys),
                  static_cast<unsigned>(a.batch * a.kv_heads));
  allow_shared<mma_attention_dkv_v2<D, W, kPart, kHoistK, kHoistV, kMinBlocks, kBf16>>(shared);
  mma_attention_dkv_v2<D, W, kPart, kHoistK, kHoistV, kMinBlocks, kBf16>
      <<<grid, W * kWarp, shared, stream>>>(
          static_cast<const uint16_t*>(a.q), static_cast<const uint16_t*>(a.k),
          static_cast<const uint16_t*>(a.v), static_cast<const uint16_t*>(a.dout), dk, dv, p);
}

template <int D, bool kBf16>
void launch_dkv_v2(AttentionBackwardKernels kernels, const AttentionArgs& a, const MmaParams& p,
                   uint16_t* dk, uint16_t* dv, cudaStream_t stream) {
  constexpr bool kD64 = D == 64;
  switch (kernels) {
    case AttentionBackwardKernels::kV2:  // D = 64: 4 blocks of 4 warps as v1; D = 128: 2 (v1's)
      launch_dkv_v2<D, 4, 32, false, false, kD64 ? 4 : 1, kBf16>(a, p, dk, dv, stream);
      break;
    case AttentionBackwardKernels::kV2Hoisted:  // D = 64: 3 blocks; D = 128: 2, K only
      launch_dkv_v2<D, 4, 16, true, kD64, kD64 ? 3 : 1, kBf16>(a, p, dk, dv, stream);
      break;
    case AttentionBackwardKernels::kV2EightWarps:  // D = 64: 2 blocks of 8; D = 128: 1
      launch_dkv_v2<D, 8, 32, false, false, kD64 ? 2 : 1, kBf16>(a, p, dk, dv, stream);
      break;
    case AttentionBackwardKernels::kV1:
      break;
  }
}


// The dQ kernel of each choice (see mma_attention_dq_v2's comment): v2 at D = 64 takes 8 warps
// for sequences over 128 (4 below, as the forward), v2-hoist 4 warps with Q/dO in registers,
// v2-w8 8 warps at both head dimensions; D = 128 keeps v1's kernel for v2 and v2-hoist.
template <int D, bool kBf16>
void launch_dq(AttentionBackwardKernels kernels, const AttentionArgs& a, const MmaParams& p,
               cudaStream_t stream) {
  const auto* q = static_cast<const uint16_t*>(a.q);
  const auto* k = static_cast<const uint16_t*>(a.k);
  const auto* v = static_cast<const uint16_t*>(a.v);
  const auto* dout = static_cast<const uint16_t*>(a.dout);
  auto* dq = static_cast<uint16_t*>(a.dq);
  auto launch_v2 = [&]<int W, bool kHoist, int kMinBlocks>() {
    constexpr int kBlockRows = 16 * W;
    // Q, dO (W 16 rows each), two K/V buffers.
    const size_t shared = sizeof(uint16_t) * (2 * kBlockRows + 4 * kRows) * (D + kPad);
    const dim3 grid(static_cast<unsigned>((a.seq + kBlockRows - 1) / kBlockRows),
                    static_cast<unsigned>(a.batch * a.heads));
    allow_shared<mma_attention_dq_v2<D, W, kHoist, kMinBlocks, kBf16>>(shared);
    mma_attention_dq_v2<D, W, kHoist, kMinBlocks, kBf16>
        <<<grid, W * kWarp, shared, stream>>>(q, k, v, dout, dq, p);
  };
  if (kernels == AttentionBackwardKernels::kV2EightWarps) {
    launch_v2.template operator()<8, false, D == 64 ? 2 : 1>();
    return;
  }
  if constexpr (D == 64) {  // (only these instantiations: D = 128 would spill in them)
    if (kernels == AttentionBackwardKernels::kV2) {
      if (a.seq > 128) {
        launch_v2.template operator()<8, false, 2>();
      } else {
        launch_v2.template operator()<4, false, 4>();
      }
      return;
    }
    if (kernels == AttentionBackwardKernels::kV2Hoisted) {
      launch_v2.template operator()<4, true, 3>();
      return;
    }
  }
  const unsigned blocks = static_cast<unsigned>((a.seq + kRows - 1) / kRows);
  const size_t shared = 6 * tile_bytes(D);  // Q, dO, two K/V buffers
  allow_shared<mma_attention_dq<D, kBf16>>(shared);
  mma_attention_dq<D, kBf16><<<dim3(blocks, static_cast<unsigned>(a.batch * a.heads)), kThreads,
                               shared, stream>>>(q, k, v, dout, dq, p);
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
  // 8 warps (128 query rows) a block once a block has more than one key tile to share; short
  // sequences keep 4 for more blocks.
  const int warps = a.seq > 128 ? 8 : 4;
  const int64_t block_rows = 16 * warps;
  const size_t shared = (warps / 4 + 4) * tile_bytes(a.head_dim);  // Q, two K/V buffers
  const dim3 grid(static_cast<unsigned>((a.seq + block_rows - 1) / block_rows),
                  static_cast<unsigned>(a.batch * a.heads));
  const auto* q = static_cast<const uint16_t*>(a.q);
  const auto* k = static_cast<const uint16_t*>(a.k);
  const auto* v = static_cast<const uint16_t*>(a.v);
  auto* out = static_cast<uint16_t*>(a.out);
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    if (warps == 8) {
      allow_shared<mma_attention_forward<D, 8, kBf16>>(shared);
      mma_attention_forward<D, 8, kBf16><<<grid, 8 * kWarp, shared, stream>>>(q, k, v, out, p);
    } else {
      allow_shared<mma_attention_forward<D, 4, kBf16>>(shared);
      mma_attention_forward<D, 4, kBf16><<<grid, 4 * kWarp, shared, stream>>>(q, k, v, out, p);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

void launch_attention_backward_mma(const AttentionArgs& a, cudaStream_t stream) {
  const MmaParams p = params_of(a);
  const AttentionBackwardKernels kernels = attention_backward_kernels();
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    launch_dq<D, kBf16>(kernels, a, p, stream);
    ZERO_CUDA_CHECK_LAUNCH();
    auto* dk = static_cast<uint16_t*>(a.dk);
    auto* dv = static_cast<uint16_t*>(a.dv);
    if (kernels != AttentionBackwardKernels::kV1) {
      launch_dkv_v2<D, kBf16>(kernels, a, p, dk, dv, stream);
      return;
    }
    const unsigned blocks = static_cast<unsigned>((a.seq + kRows - 1) / kRows);
    // K, V, two Q/dO buffers, two lse/delta buffers.
    const size_t shared = 6 * tile_bytes(D) + 4 * sizeof(float) * kRows;
    allow_shared<mma_attention_dkv<D, kBf16>>(shared);
    mma_attention_dkv<D, kBf16><<<dim3(blocks, static_cast<unsigned>(a.batch * a.kv_heads)),
                                  kThreads, shared, stream>>>(
        static_cast<const uint16_t*>(a.q), static_cast<const uint16_t*>(a.k),
        static_cast<const uint16_t*>(a.v), static_cast<const uint16_t*>(a.dout), dk, dv, p);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

namespace {
// -1: no override; otherwise an AttentionBackwardKernels value.
std::atomic<int> backward_kernels_override{-1};
}  // namespace

AttentionBackwardKernels attention_backward_kernels() {
  const int chosen = backward_kernels_override.load();
  if (chosen >= 0) return static_cast<AttentionBackwardKernels>(chosen);
  static const AttentionBackwardKernels from_environment = [] {
    const char* choice = std::getenv("ZERO_CUDA_ATTENTION_BWD");
    if (choice == nullptr || std::strcmp(choice, "v1") == 0) return AttentionBackwardKernels::kV1;
    if (std::strcmp(choice, "v2") == 0) return AttentionBackwardKernels::kV2;
    if (std::strcmp(choice, "v2-hoist") == 0) return AttentionBackwardKernels::kV2Hoisted;
    if (std::strcmp(choice, "v2-w8") == 0) return AttentionBackwardKernels::kV2EightWarps;
    throw ConfigError("ZERO_CUDA_ATTENTION_BWD=" + std::string(choice) +
                      " is not a kernel choice: say v1 (the default), v2, v2-hoist or v2-w8, or "
                      "unset it");
  }();
  return from_environment;
}

void set_attention_backward_kernels(std::optional<AttentionBackwardKernels> kernels) {
  backward_kernels_override.store(kernels ? static_cast<int>(*kernels) : -1);
}

}  // namespace zero::backend::cuda
