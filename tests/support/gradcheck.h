// Test helpers: host tensors filled with reproducible random values, f32 <-> f64 conversion,
// error norms and central finite differences. Header-only; used by every kernel and unit test.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace zero::testing {

// Host tensor with values uniform in [lo, hi), reproducible from `seed`.
inline Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo = -1.0,
                            double hi = 1.0) {
  Tensor t = Tensor::zeros_host(shape, dtype);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  const int64_t n = t.numel();
  if (dtype == DType::kF64) {
    for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = dist(rng);
  } else {
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(dist(rng));
  }
  return t;
}

// Reads element i of a contiguous f32 or f64 host tensor as double.
inline double value_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF64 ? t.data<double>()[i]
                                  : static_cast<double>(t.data<float>()[i]);
}
inline void set_value_at(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::kF64) {
    t.data<double>()[i] = v;
  } else {
    t.data<float>()[i] = static_cast<float>(v);
  }
}

// A contiguous host copy of `t` converted to `dtype` (f32 <-> f64).
inline Tensor converted(const Tensor& t, DType dtype) {
  Tensor out = Tensor::zeros_host(t.shape(), dtype);
  for (int64_t i = 0; i < t.numel(); ++i) set_value_at(out, i, value_at(t, i));
  return out;
}

// Norm-wise relative error ||a - b|| / max(||b||, tiny): robust where single entries are ~0.
inline double relative_error(const Tensor& a, const Tensor& b) {
  double diff = 0.0;
  double ref = 0.0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = value_at(a, i) - value_at(b, i);
    diff += d * d;
    ref += value_at(b, i) * value_at(b, i);
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-300);
}

// Central finite-difference gradient of the scalar `loss()` with respect to every element of
// the f64 host tensor `x` (perturbed in place and restored): (f(x+h) - f(x-h)) / 2h.
// With h = 1e-6 in f64 the truncation error is O(h^2) ~ 1e-12 and rounding ~1e-16/h ~ 1e-10,
// relative to O(1) gradients, well inside the 1e-6 budget the tests use.
inline Tensor finite_difference(Tensor& x, const std::function<double()>& loss, double h = 1e-6) {
  Tensor grad = Tensor::zeros_host(x.shape(), DType::kF64);
  double* data = x.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double saved = data[i];
    data[i] = saved + h;
    const double plus = loss();
    data[i] = saved - h;
    const double minus = loss();
    data[i] = saved;
    grad.data<double>()[i] = (plus - minus) / (2.0 * h);
  }
  return grad;
}

// sum_i w_i * y_i: a scalar "loss" whose gradient with respect to y is w (the probe weights).
inline double weighted_sum(const Tensor& y, const Tensor& w) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += value_at(y, i) * value_at(w, i);
  return s;
}

}  // namespace zero::testing
