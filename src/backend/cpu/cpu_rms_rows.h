// One row of RMSNorm on the CPU, shared by rmsnorm_* (rows of the hidden size) and
// qk_rmsnorm_* (query/key head rows), so both compute each row with the same expressions.
#pragma once
#include <cmath>
#include <cstdint>

namespace zero::backend::cpu {

// y = (x * s) * w with s = 1 / sqrt(mean(x^2) + eps), the sum of squares in T; returns s.
template <typename T>
inline T rms_row_forward(const T* x, const T* w, T* y, int64_t n, double eps) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const T s = static_cast<T>(1) / std::sqrt(sum / static_cast<T>(n) + static_cast<T>(eps));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * s) * w[i];
  return s;
}

// dx = s (g w - x s mean(g w x s)) for the row's saved s; dweight_partial += g x s.
template <typename T>
inline void rms_row_backward(const T* x, const T* g, const T* w, T s, int64_t n,
                             T* dweight_partial, T* dx) {
  T sum_gx = 0;
#pragma omp simd reduction(+ : sum_gx)
  for (int64_t i = 0; i < n; ++i) {
    const T xhat = x[i] * s;
    dweight_partial[i] += g[i] * xhat;
    sum_gx += g[i] * w[i] * xhat;
  }
  const T mean_gx = sum_gx / static_cast<T>(n);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = s * (g[i] * w[i] - x[i] * s * mean_gx);
}

}  // namespace zero::backend::cpu
