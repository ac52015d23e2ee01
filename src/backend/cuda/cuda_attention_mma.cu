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
//             The default backward (v2-hoist, cuda_attention_mma_backward_v2.cu) runs the same
//             products with fewer shared-memory loads a mma, to the same bytes, and for
//             sequences up to 32 D has the dK/dV kernel store dS for a dQ = dS K kernel
//             (cuda_attention_kernel_choice.h says which kernels run for which shapes).
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
// The shared pieces (staging, fragment products, parameters) are in cuda_attention_mma_common.cuh.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA), lane = 4 * group + thread_in_group:
//   A 16x16 (row major): a0 = (group, 2t..2t+1), a1 = (group + 8, 2t..), a2 = (group, 2t + 8..),
//                        a3 = (group + 8, 2t + 8..); two 16-bit values per register, low first.
//   B 16x8 (k x n):      b0 = (k = 2t..2t+1, n = group), b1 = (k = 2t + 8.., n = group).
//   C 16x8 f32:          c0, c1 = (group, 2t..2t+1), c2, c3 = (group + 8, 2t..2t+1).
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_attention_mma_common.cuh"
#include "core/check.h"

namespace zero::backend::cuda {
namespace {

using namespace mma_attention;  // NOLINT(google-build-using-namespace): this file's building blocks

// The four threads of a quad hold one row's columns: combine across them.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The forward's blocks per SM that the register allocation must allow (ptxas -v, sm_90, CUDA 13).
// One row tile a warp: at D = 64, 4 blocks of 4 warps (125 registers a thread, no spills; 4 x 45
// KiB of tiles fit too) instead of the 3 that ptxas's unbounded 134 registers left; at D = 128,
// whatever ptxas takes (178, one 8-warp block). Two row tiles a warp (4 warps a block): D = 64,
// 3 blocks (166 registers, 12 warps an SM); D = 128, 2 (243). No spills in any of them.
// (Bounding the backward kernels so makes them spill.)
constexpr int forward_min_blocks(int head_dim, int warps, int row_tiles) {
  if (row_tiles == 2) return head_dim == 64 ? 3 : 2;
  return head_dim == 64 ? 16 / warps : 1;
}

// grid: (B * H, query blocks of 16 M W rows, heaviest first); W warps, each owning M tiles of 16
// query rows, share every 64-key tile (W = 8 halves the tile loads per FLOP of W = 4; M = 2 has
// every V fragment a warp loads feed two products; the tiles' scores are computed in turn, which
// keeps the registers under 255). Every row's arithmetic is the same whatever W and M are: the
// same sums in the same order, so the same bytes.
template <int D, int W, int M, bool kBf16>
__global__ void __launch_bounds__(W * kWarp, forward_min_blocks(D, W, M))
    mma_attention_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out,
                          MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  constexpr int kWarpRows = 16 * M;
  constexpr int kBlockRows = kWarpRows * W;
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* kv = qs + kBlockRows * S;  // buffer i: K at kv + 2 i kRows S, V right after it
  const int64_t b = grid_slice() / p.heads, h = grid_slice() % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t q0 = query_block_heaviest_first() * kBlockRows;
  const int64_t warp_first = q0 + warp * kWarpRows, warp_last = warp_first + kWarpRows - 1;
  // The thread's rows: tile m, upper 0 (fragment registers 0-1) and upper 1 (registers 2-3).
  auto row_of = [&](int m, int upper) { return warp_first + m * 16 + group + upper * 8; };
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

  // Scores enter the log2 domain as s scale_log2. For a positive scale that product is folded
  // into each probability's FFMA, exp2(s scale_log2 - max), and the tile max is scaled once -
  // the max of the scaled scores, as rounding is monotone - so a pass of multiplies goes. Any
  // other scale is applied to the scores first, with 1 in the FFMA.
  const bool fold_scale = p.scale_log2 > 0.0f;
  const float exp_scale = fold_scale ? p.scale_log2 : 1.0f;
  const float pre_scale = fold_scale ? 1.0f : p.scale_log2;
  float o[M][D / 8][4];
  float row_max[M][2], row_sum[M][2];  // running max (log2 domain) and sum of each row
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) o[m][dt][0] = o[m][dt][1] = o[m][dt][2] = o[m][dt][3] = 0.0f;
    row_max[m][0] = row_max[m][1] = -INFINITY;
    row_sum[m][0] = row_sum[m][1] = 0.0f;
  }
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
      // Each row tile's scores, softmax update and probabilities in turn (its score registers
      // are free again for the next tile's), then P V with each V fragment feeding every tile.
      uint32_t pk[M][4][4];  // P rounded and packed: [row tile][16-key chunk][A fragment register]
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int64_t tile_first = warp_first + m * 16;
        if (!tile_seen(tile_first, tile_first + 15, k0, p)) {
          // Sees none of these keys: p = 0, and m, l and the output stay as they are (alpha 1).
#pragma unroll
          for (int kc = 0; kc < 4; ++kc) {
            pk[m][kc][0] = pk[m][kc][1] = pk[m][kc][2] = pk[m][kc][3] = 0;
          }
          continue;
        }
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        rows_times_rows<D, 8, kBf16>(s, qs + (tile_first - q0) * S, ks, lane);
        if (tile_unmasked(tile_first, tile_first + 15, k0, p)) {
          if (!fold_scale) {
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
              for (int r = 0; r < 4; ++r) s[nt][r] *= pre_scale;
            }
          }
        } else {
          // visible(i, j) in 32-bit offsets, which hold every difference of two positions: the
          // launcher keeps sequences under 2^22 (mma_attention_supported), and a window of the
          // whole sequence or more is no window. Fewer live 64-bit values, fewer registers.
          const int tile_diff = static_cast<int>(tile_first - k0);
          const int keys_left = static_cast<int>(p.seq - k0);
          const int window = p.window >= p.seq ? 0 : static_cast<int>(p.window);
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
              const int dj = nt * 8 + tig * 2 + (r & 1), di = group + (r / 2) * 8;
              const int diff = tile_diff + (di - dj);  // i - j
              const bool seen = dj < keys_left && diff >= 0 && (window == 0 || diff < window);
              s[nt][r] = seen ? s[nt][r] * pre_scale : -INFINITY;
            }
          }
        }
        float base[2];
#pragma unroll
        for (int upper = 0; upper < 2; ++upper) {
          float tile_max = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) {
            tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * upper], s[nt][2 * upper + 1]));
          }
          const float new_max = fmaxf(row_max[m][upper], quad_max(tile_max) * exp_scale);
          // A row that has seen no key yet keeps p = 0 (exp2(-inf - 0)) instead of NaN.
          base[upper] = new_max == -INFINITY ? 0.0f : new_max;
          const float alpha = exp2_ftz(row_max[m][upper] - base[upper]);
          row_max[m][upper] = new_max;
          row_sum[m][upper] *= alpha;
#pragma unroll
          for (int dt = 0; dt < D / 8; ++dt) {
            o[m][dt][2 * upper] *= alpha;
            o[m][dt][2 * upper + 1] *= alpha;
          }
        }
#pragma unroll
        for (int kc = 0; kc < 4; ++kc) {  // 16 keys per chunk: score tiles 2kc and 2kc + 1
          const float(&s0)[4] = s[2 * kc];
          const float(&s1)[4] = s[2 * kc + 1];
          const float neg_a = -base[0], neg_b = -base[1];
          float p0 = exp2_ftz(fmaf(s0[0], exp_scale, neg_a));
          float p1 = exp2_ftz(fmaf(s0[1], exp_scale, neg_a));
          float p2 = exp2_ftz(fmaf(s0[2], exp_scale, neg_b));
          float p3 = exp2_ftz(fmaf(s0[3], exp_scale, neg_b));
          float p4 = exp2_ftz(fmaf(s1[0], exp_scale, neg_a));
          float p5 = exp2_ftz(fmaf(s1[1], exp_scale, neg_a));
          float p6 = exp2_ftz(fmaf(s1[2], exp_scale, neg_b));
          float p7 = exp2_ftz(fmaf(s1[3], exp_scale, neg_b));
          // The row sums take the f32 probabilities (lse is the logsumexp the contract defines);
          // only the product's copies are rounded.
          row_sum[m][0] += (p0 + p1) + (p4 + p5);
          row_sum[m][1] += (p2 + p3) + (p6 + p7);
          pk[m][kc][0] = pack_rounded<kBf16>(p0, p1);
          pk[m][kc][1] = pack_rounded<kBf16>(p2, p3);
          pk[m][kc][2] = pack_rounded<kBf16>(p4, p5);
          pk[m][kc][3] = pack_rounded<kBf16>(p6, p7);
        }
      }
#pragma unroll
      for (int kc = 0; kc < 4; ++kc) {
        uint32_t a[M][4];
#pragma unroll
        for (int m = 0; m < M; ++m) {
#pragma unroll
          for (int r = 0; r < 4; ++r) a[m][r] = pk[m][kc][r];
        }
        chunks_times_tile<D, M, kBf16>(o, a, vs, kc * 16, lane);
      }
    }
    __syncthreads();  // this buffer is refilled by the next iteration's prefetch
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int upper = 0; upper < 2; ++upper) {
      const int64_t row = row_of(m, upper);
      const float sum = quad_sum(row_sum[m][upper]);
      if (row >= p.seq) continue;
      const float inv = 1.0f / sum;
      uint16_t* dst = out + offset(p.out, b, row, h) + tig * 2;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        store_pair<kBf16>(dst + dt * 8, o[m][dt][2 * upper] * inv, o[m][dt][2 * upper + 1] * inv);
      }
      if (tig == 0) {
        p.lse[(b * p.heads + h) * p.seq + row] = row_max[m][upper] * kLn2 + logf(sum);
      }
    }
  }
}

// dQ. grid: (B * H, query blocks, heaviest first).
template <int D, bool kBf16>
__global__ void __launch_bounds__(kThreads)
    mma_attention_dq(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                     const uint16_t* dout, uint16_t* dq, MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_words);
  uint16_t* dos = qs + kRows * S;
  uint16_t* kv = dos + kRows * S;  // buffer i: K at kv + 2 i kRows S, V right after it
  const int64_t b = grid_slice() / p.heads, h = grid_slice() % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t q0 = query_block_heaviest_first() * kRows;
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
  store_dq_rows<D, kBf16>(dq, p.dq, b, h, row_a, p.seq, p.scale, acc, tig);
}

// dQ from the stored dS (ZERO_CUDA_ATTENTION_DQ=stored-ds, after the dK/dV kernel stored it): dQ =
// scale dS K, the products of mma_attention_dq in its order (key tiles ascending, 16 keys a
// chunk) without recomputing S and dP. grid: (B * H, query blocks, heaviest first); each warp 16
// query rows. The dS^T tile (key rows) gives dS's A fragments through ldmatrix.trans.
template <int D, bool kBf16>
__global__ void __launch_bounds__(kThreads)
    mma_attention_dq_from_ds(const uint16_t* k, uint16_t* dq, MmaParams p) {
  extern __shared__ uint4 smem_words[];
  constexpr int S = D + kPad;
  constexpr int kDsStride = kRows + kPad;
  // buffer i: dS^T at tiles + i (kRows kDsStride + kRows S), K right after it.
  uint16_t* tiles = reinterpret_cast<uint16_t*>(smem_words);
  constexpr int kBufferElements = kRows * kDsStride + kRows * S;
  const int64_t slice = grid_slice();
  const int64_t b = slice / p.heads, h = slice % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t qi = query_block_heaviest_first(), q0 = qi * kRows;
  const int64_t row_a = q0 + warp * 16 + group;  // and row_a + 8
  const int64_t first = p.window > 0 ? max(int64_t{0}, q0 - p.window + 1) : 0;
  const int64_t j_begin = first / kRows;
  auto stage_tiles = [&](int64_t j, int buf) {
    uint16_t* ds_smem = tiles + buf * kBufferElements;
    const uint16_t* src = ds_tile(p, slice, qi, j);
    constexpr int kChunks = kRows / 8;  // 16-byte pieces of a dS^T row
    for (int e = threadIdx.x; e < kRows * kChunks; e += blockDim.x) {
      const int r = e / kChunks, c = e % kChunks;
      cp_async_16(ds_smem + r * kDsStride + c * 8, src + r * kRows + c * 8);
    }
    stage<D>(ds_smem + kRows * kDsStride, k, p.k, b, j * kRows, p.seq, g);
  };
  stage_tiles(j_begin, 0);
  cp_async_commit();

  float acc[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.0f;
  // ldmatrix.x4.trans of dS^T rows (keys) 16 kc + lane % 8 (+ 8 for lanes 16-31) at query column
  // warp * 16 (+ 8 for lanes 8-15, 24-31): the four 8 x 8 pieces of dS's A fragment.
  const int frag_row = lane % 8 + (lane / 16) * 8, frag_col = warp * 16 + (lane / 8 % 2) * 8;
  int buf = 0;
  for (int64_t j = j_begin; j <= qi; ++j, buf ^= 1) {
    if (j + 1 <= qi) stage_tiles(j + 1, buf ^ 1);  // as in the forward
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint16_t* ds_smem = tiles + buf * kBufferElements;
    const uint16_t* ks = ds_smem + kRows * kDsStride;
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {
      uint32_t a[4];
      ldmatrix_x4<true>(a, ds_smem + (kc * 16 + frag_row) * kDsStride + frag_col);
      chunk_times_tile<D, kBf16>(acc, a[0], a[1], a[2], a[3], ks, kc * 16, lane);
    }
    __syncthreads();  // this buffer is refilled by the next iteration's prefetch
  }
  store_dq_rows<D, kBf16>(dq, p.dq, b, h, row_a, p.seq, p.scale, acc, tig);
}

// dK and dV. grid: (B * KVH, key blocks, heaviest first). Each warp owns 16 keys; the scores
// are computed transposed (keys as rows), 16 queries at a time to bound the registers.
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
  const int64_t b = grid_slice() / p.kv_heads, g = grid_slice() % p.kv_heads;
  const int64_t group_heads = p.heads / p.kv_heads;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t k0 = key_block_heaviest_first() * kRows;
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
      if (p.ds != nullptr) {  // the rounded dS^T, for mma_attention_dq_from_ds
        // This step's tile; key rows warp * 16 + group (+ 8), query columns 2 tig (+ 1).
        const int64_t slice = b * p.heads + g * group_heads + step / q_tiles;
        uint16_t* ds_rows = ds_tile(p, slice, q0 / kRows, k0 / kRows) +
                            (warp * 16 + group) * kRows + part * 16 + tig * 2;
        uint32_t* row_a = reinterpret_cast<uint32_t*>(ds_rows);
        uint32_t* row_b = reinterpret_cast<uint32_t*>(ds_rows + 8 * kRows);
        row_a[0] = d0;  // queries part * 16 + 2 tig, + 1
        row_b[0] = d1;
        row_a[4] = d2;  // queries part * 16 + 8 + 2 tig, + 1
        row_b[4] = d3;
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
  p.ds = static_cast<uint16_t*>(a.ds);
  return p;
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
  if (a.seq > kMaxRowBlocks * kRows) return false;  // the grid's y (row blocks) would overflow
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
  // 128 query rows a block once a block has more than one key tile to share (8 warps of one row
  // tile, or with v2, the default at D = 128, 4 warps of two); short sequences keep 64 rows, 4
  // warps of one tile, for more blocks.
  const bool long_rows = a.seq > 128;
  const bool two_row_tiles =
      long_rows &&
      attention_forward_kernels(a.head_dim) == AttentionForwardKernels::kV2TwoRowTiles;
  const int64_t block_rows = long_rows ? 128 : 64;
  const size_t shared = (block_rows / kRows + 4) * tile_bytes(a.head_dim);  // Q, two K/V buffers
  const dim3 grid = heaviest_first_grid((a.seq + block_rows - 1) / block_rows, a.batch * a.heads);
  const auto* q = static_cast<const uint16_t*>(a.q);
  const auto* k = static_cast<const uint16_t*>(a.k);
  const auto* v = static_cast<const uint16_t*>(a.v);
  auto* out = static_cast<uint16_t*>(a.out);
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    if (two_row_tiles) {
      allow_shared<mma_attention_forward<D, 4, 2, kBf16>>(shared);
      mma_attention_forward<D, 4, 2, kBf16><<<grid, 4 * kWarp, shared, stream>>>(q, k, v, out, p);
    } else if (long_rows) {
      allow_shared<mma_attention_forward<D, 8, 1, kBf16>>(shared);
      mma_attention_forward<D, 8, 1, kBf16><<<grid, 8 * kWarp, shared, stream>>>(q, k, v, out, p);
    } else {
      allow_shared<mma_attention_forward<D, 4, 1, kBf16>>(shared);
      mma_attention_forward<D, 4, 1, kBf16><<<grid, 4 * kWarp, shared, stream>>>(q, k, v, out, p);
    }
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

size_t attention_backward_ds_bytes(const AttentionArgs& a) {
  if (attention_dq_source(a.seq, a.head_dim) != AttentionDqSource::kStoredDs) return 0;
  if (!mma_attention_supported(a, true)) return 0;
  return sizeof(uint16_t) * static_cast<size_t>(a.batch * a.heads * ds_tiles_per_slice(a.seq) *
                                                kRows * kRows);
}

namespace {

// v1's dK/dV kernel, storing dS where p.ds is set.
void launch_dkv_v1(const AttentionArgs& a, const MmaParams& p, cudaStream_t stream) {
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    const int64_t blocks = (a.seq + kRows - 1) / kRows;
    // K, V, two Q/dO buffers, two lse/delta buffers.
    const size_t shared = 6 * tile_bytes(D) + 4 * sizeof(float) * kRows;
    allow_shared<mma_attention_dkv<D, kBf16>>(shared);
    mma_attention_dkv<D, kBf16><<<heaviest_first_grid(blocks, a.batch * a.kv_heads), kThreads,
                                  shared, stream>>>(
        static_cast<const uint16_t*>(a.q), static_cast<const uint16_t*>(a.k),
        static_cast<const uint16_t*>(a.v), static_cast<const uint16_t*>(a.dout),
        static_cast<uint16_t*>(a.dk), static_cast<uint16_t*>(a.dv), p);
  });
  ZERO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_backward_mma(const AttentionArgs& a, cudaStream_t stream) {
  const AttentionBackwardKernels kernels = attention_backward_kernels();
  const bool v2 = kernels != AttentionBackwardKernels::kV1;
  if (attention_dq_source(a.seq, a.head_dim) == AttentionDqSource::kStoredDs) {
    ZERO_CHECK(a.ds != nullptr, "the attention backward from a stored dS needs its scratch "
                                    << "(attention_backward_ds_bytes)");
    const MmaParams p = params_of(a);
    // The dK/dV kernel stores dS, which the dQ kernel then reads.
    if (v2) {
      launch_dkv_v2(kernels, a, p, stream);
      ZERO_CUDA_CHECK_LAUNCH();
    } else {
      launch_dkv_v1(a, p, stream);
    }
    dispatch_mma(a, [&]<int D, bool kBf16>() {
      const int64_t blocks = (a.seq + kRows - 1) / kRows;
      // Two buffers of a dS^T tile and a K tile.
      const size_t shared = 2 * (sizeof(uint16_t) * kRows * (kRows + kPad) + tile_bytes(D));
      allow_shared<mma_attention_dq_from_ds<D, kBf16>>(shared);
      mma_attention_dq_from_ds<D, kBf16><<<heaviest_first_grid(blocks, a.batch * a.heads),
                                           kThreads, shared, stream>>>(
          static_cast<const uint16_t*>(a.k), static_cast<uint16_t*>(a.dq), p);
    });
    ZERO_CUDA_CHECK_LAUNCH();
    return;
  }
  MmaParams p = params_of(a);
  p.ds = nullptr;  // dS is stored only for mma_attention_dq_from_ds
  const bool v2_dq = v2 && launch_dq_v2(kernels, a, p, stream);
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    if (v2_dq) return;
    const int64_t blocks = (a.seq + kRows - 1) / kRows;
    const size_t shared = 6 * tile_bytes(D);  // Q, dO, two K/V buffers
    allow_shared<mma_attention_dq<D, kBf16>>(shared);
    mma_attention_dq<D, kBf16><<<heaviest_first_grid(blocks, a.batch * a.heads), kThreads,
                                 shared, stream>>>(
        static_cast<const uint16_t*>(a.q), static_cast<const uint16_t*>(a.k),
        static_cast<const uint16_t*>(a.v), static_cast<const uint16_t*>(a.dout),
        static_cast<uint16_t*>(a.dq), p);
  });
  ZERO_CUDA_CHECK_LAUNCH();
  if (v2) {
    launch_dkv_v2(kernels, a, p, stream);
  } else {
    launch_dkv_v1(a, p, stream);
  }
}

}  // namespace zero::backend::cuda
