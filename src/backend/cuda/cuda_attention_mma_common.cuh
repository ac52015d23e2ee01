// What the tensor-core attention kernels share: cuda_attention_mma.cu (forward, backward v1)
// and cuda_attention_mma_backward_v2.cu (backward v2, ZERO_CUDA_ATTENTION_BWD). Tile constants,
// staging with cp.async, the fragment products, the kernel parameters, the dispatch over head
// dimension and dtype. The scheme and the mma.m16n8k16 fragment layouts are described at the top
// of cuda_attention_mma.cu. Device helpers are inline; nothing here launches a kernel.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cuda/cuda_attention_kernel_choice.h"
#include "backend/cuda/cuda_device_math.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_mma_ptx.cuh"

namespace zero::backend::cuda::mma_attention {

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
using mma_ptx::exp2_ftz;
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

// acc[m][dt] += P_m(16 x 16 chunk, A fragments a[m][0..3]) * tile rows [k0, k0 + 16) (all D
// columns) for m < M: the product of M probability (or dS) chunks with a value-like tile read
// down its columns. ldmatrix.x4.trans gives the B fragments of two 8-column tiles (lanes 0-7
// name rows k0.. and 8-15 rows k0 + 8.. at column 8 dt, lanes 16-31 the same rows at column
// 8 dt + 8), which feed all M chunks.
template <int D, int M, bool kBf16>
__device__ __forceinline__ void chunks_times_tile(float (&acc)[M][D / 8][4],
                                                  const uint32_t (&a)[M][4],
                                                  const uint16_t* tile, int k0, int lane) {
  constexpr int S = D + kPad;
  const uint16_t* row = tile + (k0 + lane % 8 + (lane / 8 % 2) * 8) * S + (lane / 16) * 8;
#pragma unroll
  for (int dt = 0; dt < D / 8; dt += 2) {
    uint32_t bf[4];
    ldmatrix_x4<true>(bf, row + dt * 8);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      mma<kBf16>(acc[m][dt], a[m][0], a[m][1], a[m][2], a[m][3], bf[0], bf[1]);
      mma<kBf16>(acc[m][dt + 1], a[m][0], a[m][1], a[m][2], a[m][3], bf[2], bf[3]);
    }
  }
}

// The one-chunk case: acc[dt] += P(16 x 16 chunk, A fragments a0..a3) * tile rows [k0, k0 + 16).
template <int D, bool kBf16>
__device__ __forceinline__ void chunk_times_tile(float (&acc)[D / 8][4], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, const uint16_t* tile,
                                                 int k0, int lane) {
  const uint32_t a[1][4] = {{a0, a1, a2, a3}};
  chunks_times_tile<D, 1, kBf16>(reinterpret_cast<float (&)[1][D / 8][4]>(acc), a, tile, k0, lane);
}

// Stores a warp's 16 x D f32 accumulator of dQ, scaled, to rows row_a (fragment registers 0-1)
// and row_a + 8 (2-3) of head h, batch b; rows past `seq` are not stored.
template <int D, bool kBf16>
__device__ __forceinline__ void store_dq_rows(uint16_t* dq, const HeadLayout& l, int64_t b,
                                              int64_t h, int64_t row_a, int64_t seq, float scale,
                                              const float (&acc)[D / 8][4], int tig) {
#pragma unroll
  for (int upper = 0; upper < 2; ++upper) {
    const int64_t row = row_a + 8 * upper;
    if (row >= seq) continue;
    uint16_t* dst = dq + offset(l, b, row, h) + tig * 2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      store_pair<kBf16>(dst + dt * 8, scale * acc[dt][2 * upper], scale * acc[dt][2 * upper + 1]);
    }
  }
}

struct MmaParams {
  int64_t seq, heads, kv_heads, window;
  float scale;       // the score scale
  float scale_log2;  // scale * log2(e)
  HeadLayout q, k, v, out, dout, dq, dk, dv;
  float* lse;           // [B, H, T]
  const float* delta;   // [B, H, T] (backward)
  uint16_t* ds;         // the backward's dS tiles (ds_tile), or null
};

// The backward's stored dS (ZERO_CUDA_ATTENTION_DQ=stored-ds): for each batch x head slice, the
// [kRows keys][kRows queries] tiles of dS^T (as the dK/dV kernel holds it: key rows) at key tile
// j and query tile i >= j, in lower-triangle order - query tile i's tiles j = 0..i contiguous,
// which is the order the dQ kernel reads them in.
__host__ __device__ inline int64_t ds_tiles_per_slice(int64_t seq) {
  const int64_t tiles = (seq + kRows - 1) / kRows;
  return tiles * (tiles + 1) / 2;
}
__device__ __forceinline__ uint16_t* ds_tile(const MmaParams& p, int64_t slice, int64_t i,
                                             int64_t j) {
  return p.ds + (slice * ds_tiles_per_slice(p.seq) + i * (i + 1) / 2 + j) * (kRows * kRows);
}

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

// Grid order, heaviest blocks first. Under a causal mask a query block's work grows with its
// index (it sees every earlier key) and a key block's shrinks. Blocks start in the order of their
// linear index, x fastest, so the grid puts the B x heads slices in x and the row blocks in y,
// ordered so that y = 0 is the heaviest: every slice's longest blocks start in the first waves
// and the launch ends on the shortest ones. With row blocks fastest (the old order) each slice's
// heaviest block started last, and the launch's tail was whole long blocks on a few SMs while
// the rest idled - a greedy-schedule model of the Llama and GPT-2 grids puts that tail at
// 12-20% of each attention kernel's time (bench/gpu_speed_notes.md, attempt 6).
// gridDim.y is at most 65535: mma_attention_supported() keeps longer sequences on the
// CUDA-core kernels.
constexpr int64_t kMaxRowBlocks = 65535;

// Host: the grid for `row_blocks` blocks of rows in each of `slices` (batch x heads) slices.
inline dim3 heaviest_first_grid(int64_t row_blocks, int64_t slices) {
  return dim3(static_cast<unsigned>(slices), static_cast<unsigned>(row_blocks));
}
// Device: this block's slice (b * heads + h, or b * kv_heads + g).
__device__ __forceinline__ int64_t grid_slice() { return blockIdx.x; }
// Device: this block's query block, the last (most keys seen) first.
__device__ __forceinline__ int64_t query_block_heaviest_first() {
  return int64_t{gridDim.y} - 1 - blockIdx.y;
}
// Device: this block's key block, the first (seen by most queries) first.
__device__ __forceinline__ int64_t key_block_heaviest_first() { return blockIdx.y; }

// Bytes of one staged [kRows][head_dim + kPad] tile of 16-bit elements.
inline size_t tile_bytes(int64_t head_dim) {
  return sizeof(uint16_t) * static_cast<size_t>(kRows * (head_dim + kPad));
}

// Calls f.template operator()<D, kBf16>() for the args' head dimension and dtype.
template <typename F>
inline void dispatch_mma(const AttentionArgs& a, F&& f) {
  const bool bf16 = a.dtype == DType::kBF16;
  if (a.head_dim == 64) {
    bf16 ? f.template operator()<64, true>() : f.template operator()<64, false>();
  } else {
    bf16 ? f.template operator()<128, true>() : f.template operator()<128, false>();
  }
}

// The v2 backward's launchers (cuda_attention_mma_backward_v2.cu), for `kernels` other than kV1,
// on `stream`. launch_dq_v2 returns false where the choice keeps v1's dQ kernel at this head
// dimension (the caller launches it then).
bool launch_dq_v2(AttentionBackwardKernels kernels, const AttentionArgs& a, const MmaParams& p,
                  cudaStream_t stream);
void launch_dkv_v2(AttentionBackwardKernels kernels, const AttentionArgs& a, const MmaParams& p,
                   cudaStream_t stream);

}  // namespace zero::backend::cuda::mma_attention
