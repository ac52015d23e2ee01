// Building blocks of the CPU flash attention: strided head views, row-major GEMM on tiles
// (OpenBLAS; called inside our OpenMP regions, where it runs single-threaded), the causal /
// sliding-window geometry of a (query tile, key tile) pair, and the masked exponentials.
#pragma once
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/cpu_math.h"
#include "core/tensor.h"

namespace zero::backend::cpu::attention_detail {

// Tile sizes. 128 query rows x 64 keys keeps every tile product (128x64x64 at D = 64) inside
// L1/L2 where OpenBLAS runs at its peak, while the narrow key tile halves the wasted work on the
// causal diagonal compared with square 128 tiles (pair_block() trims the rest).
inline constexpr int64_t kQueryTile = 128;
inline constexpr int64_t kKeyTile = 64;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One [B, T, heads, D] tensor seen as rows of D contiguous elements.
template <typename T>
struct HeadView {
  T* base;
  int64_t batch_stride, seq_stride, head_stride;
  T* row(int64_t b, int64_t t, int64_t h) const {
    return base + b * batch_stride + t * seq_stride + h * head_stride;
  }
};

template <typename T>
HeadView<T> head_view(const Tensor& t) {
  return HeadView<T>{static_cast<T*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}

// c[m, n] = alpha * op(a) @ op(b) + beta * c, row-major with leading dimensions.
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                 double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// dst[x, c] = rows[c][x] for c < cols, x < D: a key (or value) tile transposed to [D, cols]
// with leading dimension ld. q @ k^T then runs as a plain NN product, which OpenBLAS serves with
// its unpacked small-matrix kernels, clearly faster on these tile shapes than the packed path it
// takes for NT (measured ~93 vs ~83 GFLOP/s for 128x64x64 in f32).
template <typename T>
void transpose_rows(T* dst, int64_t ld, const HeadView<T>& src, int64_t b, int64_t j0,
                    int64_t cols, int64_t h, int64_t head_dim) {
  constexpr int64_t kBlock = 16;  // 16 source rows at a time: stores stay within a few lines
  for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
    const int64_t c1 = std::min(cols, c0 + kBlock);
    for (int64_t x = 0; x < head_dim; ++x) {
      T* out = dst + x * ld;
      for (int64_t c = c0; c < c1; ++c) out[c] = src.row(b, j0 + c, h)[x];
    }
  }
}

// exp for arguments that are (up to rounding) <= 0: score - row max, or score - logsumexp.
// f32 uses the branch-free polynomial so the tile loops vectorise; f64 is the oracle: libm.
inline float tile_exp(float x) { return exp_nonpositive(x); }
inline double tile_exp(double x) { return std::exp(x); }

// Keys visible from query row i are [first_key(i), i].
inline int64_t first_key(int64_t i, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
}

// The part of a (query tile, key tile) pair that has any visible (row, key): rows [r0, r1) and
// keys [c0, c1), absolute positions. Rows of the tile outside [r0, r1) see none of the tile's
// keys and keys outside [c0, c1) are seen by none of its rows, so only this block is computed.
struct PairBlock {
  int64_t r0, r1, c0, c1;
  bool empty() const { return r0 >= r1 || c0 >= c1; }
  int64_t rows() const { return r1 - r0; }
  int64_t cols() const { return c1 - c0; }
};

inline PairBlock pair_block(int64_t q0, int64_t q1, int64_t k0, int64_t k1, int64_t window) {
  PairBlock p{std::max(q0, k0), q1, k0, std::min(k1, q1)};
  if (window > 0) {
    p.r1 = std::min(q1, k1 - 1 + window);  // row i sees key j only when j > i - window
    p.c0 = std::max(k0, q0 - window + 1);
  }
  return p;
}

// Visible keys of row i inside the block, as column offsets [lo, hi) relative to blk.c0.
inline void visible_columns(const PairBlock& blk, int64_t i, int64_t window, int64_t* lo,
                            int64_t* hi) {
  *lo = std::clamp<int64_t>(first_key(i, window) - blk.c0, 0, blk.cols());
  *hi = std::clamp<int64_t>(i + 1 - blk.c0, 0, blk.cols());
}

}  // namespace zero::backend::cpu::attention_detail
