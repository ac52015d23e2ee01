// The tensor-core attention backward, version 2 (ZERO_CUDA_ATTENTION_BWD=v2-hoist, the default,
// or v2-w8; cuda_attention_kernel_choice.h): the products of cuda_attention_mma.cu's
// mma_attention_dq and mma_attention_dkv, in their order per output element - the same bytes,
// as tests/backend/test_cuda_attention_variants.cpp checks - with fewer shared-memory fragment
// loads per mma, more independent mma chains, or more warps a block. An H200 measured them
// (bench/gpu_speed_notes.md, attempt 9): v2-hoist's dK/dV is the fastest; the plain v2 shape (4
// warps, nothing hoisted) lost to it everywhere and is gone.
#include "backend/cuda/cuda_attention_mma_common.cuh"

namespace zero::backend::cuda {
namespace {

using namespace mma_attention;  // NOLINT(google-build-using-namespace): the shared building blocks

// ---- dK/dV, version 2 (ZERO_CUDA_ATTENTION_BWD=v2-hoist, v2-w8) -------------------------------
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
// (blocks: an SM's resident blocks the registers allow)
//   kernel (choice)                            D = 64                    D = 128
//   mma_attention_dkv (v1)                     0.75, 127 regs, 4 blocks  0.75, 223 regs, 2
//   v2-hoist: W 4, K and V hoisted, kPart 32   0.50, 167 regs, 3
//             (D = 128: K hoisted, kPart 16)                             0.63, 253 regs, 2
//   v2-w8:    W 8, kPart 32, nothing hoisted   0.63, 128 regs, 2 (x 8)   0.63, 248 regs, 1 (x 8)
// No spills anywhere. Shared memory a block: W 4 56.3 KB (D = 64) / 105.5 KB (D = 128), as v1;
// W 8 74.8 / 140.3 KB (the K/V tiles double).
// Measured on an H200 (commit beee794, bench/results/gpu_attention_ab_2026-11-26_beee794_h200.json;
// the backward's ms for 16 llama layers at D = 128, T = 2048 / 12 GPT-2 layers at D = 64,
// T = 1024): recomputed dQ with v1 24.9 / 7.3, the removed v2 23.5, v2-w8 21.6; stored dS with
// v1's dK/dV 20.8 / 6.8, with v2-hoist's 18.1-18.3 / 6.6. The prediction had been ldmatrix-
// bound time (v2 ~15% faster than v1): v2 gained 6% of the backward, v2-hoist, which loads the
// fewest fragments, the most (2.7 ms of 16 layers against v1's dK/dV at D = 128).

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

// grid: (B * KVH, key blocks of 16 W keys, heaviest first).
// kStoreDs: also store dS for mma_attention_dq_from_ds (p.ds; ZERO_CUDA_ATTENTION_DQ=stored-ds),
// in instantiations of its own - the stores' registers made the others spill.
template <int D, int W, int kPart, bool kHoistK, bool kHoistV, int kMinBlocks, bool kStoreDs,
          bool kBf16>
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
  const int64_t b = grid_slice() / p.kv_heads, g = grid_slice() % p.kv_heads;
  const int64_t group_heads = p.heads / p.kv_heads;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t k0 = key_block_heaviest_first() * kKeys;
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
  if constexpr (kHoistK || kHoistV) {  // the fragments come from the staged K/V tiles
    cp_async_wait<0>();
    __syncthreads();
  }
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
    // The stored dS (ZERO_CUDA_ATTENTION_DQ=stored-ds): this warp's 16 key rows of the tile at
    // (query tile q0 / kRows, key tile warp_k0 / kRows) - in the lower triangle whenever the
    // warp sees any query - every element written, zeros where it sees none (the scratch is not
    // initialised, and the dQ kernel reads whole tiles).
    int64_t ds_slice = 0;
    if constexpr (kStoreDs) {
      ds_slice = b * p.heads + g * group_heads + step / q_tiles;
      if (!seen && warp_k0 / kRows <= q0 / kRows) {
        uint16_t* tile =
            ds_tile(p, ds_slice, q0 / kRows, warp_k0 / kRows) + (warp_k0 % kRows) * kRows;
        for (int e = lane; e < 16 * kRows / 8; e += kWarp) {
          *reinterpret_cast<uint4*>(tile + e * 8) = make_uint4(0, 0, 0, 0);
        }
      }
    }
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
            // visible(i, j) with i - j from the part's int64 base: fewer live 64-bit values
            // (without it, the hoisted D = 64 part of 32 spills at 168 registers).
            const int di = nt * 8 + tig * 2 + (r & 1), dj = group + (r < 2 ? 0 : 8);
            const int64_t diff = part_q0 - warp_k0 + (di - dj);  // i - j
            const bool real = part_q0 + di < p.seq && warp_k0 + dj < p.seq;
            if (!(real && diff >= 0 && (p.window == 0 || diff < p.window))) st[nt][r] = 0.0f;
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
        if constexpr (kStoreDs) {  // the rounded dS^T, for mma_attention_dq_from_ds
          uint16_t* ds_rows = ds_tile(p, ds_slice, q0 / kRows, warp_k0 / kRows) +
                              (warp_k0 % kRows + group) * kRows + row0 + tig * 2;
          uint32_t* row_a = reinterpret_cast<uint32_t*>(ds_rows);
          uint32_t* row_b = reinterpret_cast<uint32_t*>(ds_rows + 8 * kRows);
          row_a[0] = d0;  // queries row0 + 2 tig, + 1
          row_b[0] = d1;
          row_a[4] = d2;  // queries row0 + 8 + 2 tig, + 1
          row_b[4] = d3;
        }
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
  const int64_t b = grid_slice() / p.heads, h = grid_slice() % p.heads;
  const int64_t g = h / (p.heads / p.kv_heads);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t q0 = query_block_heaviest_first() * kBlockRows;
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
  store_dq_rows<D, kBf16>(dq, p.dq, b, h, row_a, p.seq, p.scale, acc, tig);
}

// One dK/dV kernel instance: W warps, kPart queries a part, hoisted fragments, the blocks per SM
// the registers must allow (ptxas -v in mma_attention_dkv_v2's comment), dS stored or not.
template <int D, int W, int kPart, bool kHoistK, bool kHoistV, int kMinBlocks, bool kStoreDs,
          bool kBf16>
void launch_dkv_instance(const AttentionArgs& a, const MmaParams& p, cudaStream_t stream) {
  constexpr int kKeys = 16 * W;
  const size_t shared = sizeof(uint16_t) * (2 * kKeys + 4 * kRows) * (D + kPad) +
                        4 * sizeof(float) * kRows;  // K, V, two Q/dO buffers, lse/delta
  const dim3 grid = heaviest_first_grid((a.seq + kKeys - 1) / kKeys, a.batch * a.kv_heads);
  allow_shared<mma_attention_dkv_v2<D, W, kPart, kHoistK, kHoistV, kMinBlocks, kStoreDs, kBf16>>(
      shared);
  mma_attention_dkv_v2<D, W, kPart, kHoistK, kHoistV, kMinBlocks, kStoreDs, kBf16>
      <<<grid, W * kWarp, shared, stream>>>(
          static_cast<const uint16_t*>(a.q), static_cast<const uint16_t*>(a.k),
          static_cast<const uint16_t*>(a.v), static_cast<const uint16_t*>(a.dout),
          static_cast<uint16_t*>(a.dk), static_cast<uint16_t*>(a.dv), p);
}

// One dK/dV configuration, storing dS where p.ds is set.
template <int D, int W, int kPart, bool kHoistK, bool kHoistV, int kMinBlocks, bool kBf16>
void launch_dkv_config(const AttentionArgs& a, const MmaParams& p, cudaStream_t stream) {
  if (p.ds != nullptr) {
    launch_dkv_instance<D, W, kPart, kHoistK, kHoistV, kMinBlocks, true, kBf16>(a, p, stream);
  } else {
    launch_dkv_instance<D, W, kPart, kHoistK, kHoistV, kMinBlocks, false, kBf16>(a, p, stream);
  }
}
// One dQ configuration: W warps (16 W query rows a block), hoisted Q/dO fragments, blocks per SM.
template <int D, int W, bool kHoist, int kMinBlocks, bool kBf16>
void launch_dq_config(const AttentionArgs& a, const MmaParams& p, cudaStream_t stream) {
  constexpr int kBlockRows = 16 * W;
  // Q, dO (16 W rows each), two K/V buffers.
  const size_t shared = sizeof(uint16_t) * (2 * kBlockRows + 4 * kRows) * (D + kPad);
  const dim3 grid = heaviest_first_grid((a.seq + kBlockRows - 1) / kBlockRows, a.batch * a.heads);
  allow_shared<mma_attention_dq_v2<D, W, kHoist, kMinBlocks, kBf16>>(shared);
  mma_attention_dq_v2<D, W, kHoist, kMinBlocks, kBf16><<<grid, W * kWarp, shared, stream>>>(
      static_cast<const uint16_t*>(a.q), static_cast<const uint16_t*>(a.k),
      static_cast<const uint16_t*>(a.v), static_cast<const uint16_t*>(a.dout),
      static_cast<uint16_t*>(a.dq), p);
}

}  // namespace

namespace mma_attention {

void launch_dkv_v2(AttentionBackwardKernels kernels, const AttentionArgs& a, const MmaParams& p,
                   cudaStream_t stream) {
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    constexpr bool kD64 = D == 64;
    switch (kernels) {
      case AttentionBackwardKernels::kV2Hoisted:  // D = 64: 3 blocks; D = 128: 2, K only
        launch_dkv_config<D, 4, kD64 ? 32 : 16, true, kD64, kD64 ? 3 : 1, kBf16>(a, p, stream);
        break;
      case AttentionBackwardKernels::kV2EightWarps:  // D = 64: 2 blocks of 8; D = 128: 1
        launch_dkv_config<D, 8, 32, false, false, kD64 ? 2 : 1, kBf16>(a, p, stream);
        break;
      case AttentionBackwardKernels::kV1:  // v1's kernel (cuda_attention_mma.cu)
        break;
    }
  });
}

// The recomputing dQ kernel (sequences past 32 D, or ZERO_CUDA_ATTENTION_DQ=recompute): v2-hoist
// at D = 64 takes 4 warps with Q/dO in registers, v2-w8 8 warps at both head dimensions; at
// D = 128, v2-hoist keeps v1's kernel (bounded to v1's 3 blocks an SM, the v2 kernel spills).
bool launch_dq_v2(AttentionBackwardKernels kernels, const AttentionArgs& a, const MmaParams& p,
                  cudaStream_t stream) {
  bool launched = false;
  dispatch_mma(a, [&]<int D, bool kBf16>() {
    if (kernels == AttentionBackwardKernels::kV2EightWarps) {
      launch_dq_config<D, 8, false, D == 64 ? 2 : 1, kBf16>(a, p, stream);
      launched = true;
    } else if constexpr (D == 64) {  // (only this instantiation: D = 128 would spill in it)
      if (kernels == AttentionBackwardKernels::kV2Hoisted) {
        launch_dq_config<D, 4, true, 3, kBf16>(a, p, stream);
        launched = true;
      }
    }
  });
  return launched;
}

}  // namespace mma_attention

}  // namespace zero::backend::cuda
