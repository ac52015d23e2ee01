// Building blocks of the CPU flash attention: strided head views, row-major GEMM on tiles
// (OpenBLAS; single-threaded inside our OpenMP regions) and the causal / sliding-window mask.
#pragma once
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/cpu_math.h"
#include "core/tensor.h"

namespace zero::backend::cpu::attention_detail {

// Query and key tile sizes: a 128 x 128 score tile (64 KiB in f32) stays in L2 and makes the
// tile products large enough for BLAS to run near its peak.
inline constexpr int64_t kTile = 128;

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

// c[m, n] = alpha * a[m, k] @ op(b) + beta * c, row-major with leading dimensions.
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                 double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

inline float fast_exp(float x) { return exp_nonpositive(x); }
inline double fast_exp(double x) { return std::exp(x); }

// Key range [first, last] visible from query row i (inclusive).
inline int64_t first_key(int64_t i, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
}

// Whether the key tile [k0, k1) has any key visible from the query tile [q0, q1).
inline bool tile_visible(int64_t q0, int64_t q1, int64_t k0, int64_t k1, int64_t window) {
  if (k0 > q1 - 1) return false;                      // entirely in the future
  if (window > 0 && k1 - 1 < q0 - window + 1) return false;  // entirely before the window
  return true;
}

// P[r, c] = exp(S[r, c] - row_offset[r]) where visible, 0 elsewhere; S is overwritten.
template <typename T>
void exp_tile(T* s, int64_t ld, int64_t q0, int64_t rows, int64_t k0, int64_t cols,
              const T* row_offset, int64_t window) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = q0 + r;
    const int64_t lo = std::clamp<int64_t>(first_key(i, window) - k0, 0, cols);
    const int64_t hi = std::clamp<int64_t>(i + 1 - k0, 0, cols);  // exclusive
    T* row = s + r * ld;
    const T offset = row_offset[r];
    for (int64_t c = 0; c < lo; ++c) row[c] = 0;
#pragma omp simd
    for (int64_t c = lo; c < hi; ++c) row[c] = fast_exp(row[c] - offset);
    for (int64_t c = hi; c < cols; ++c) row[c] = 0;
  }
}

}  // namespace zero::backend::cpu::attention_detail
