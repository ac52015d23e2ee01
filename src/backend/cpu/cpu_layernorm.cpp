#include "backend/cpu/cpu_layernorm.h"

#include <cmath>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"

namespace zero::backend::cpu {
namespace {

void check_common(const char* op, const Tensor& x, const Tensor& weight, const Tensor* bias,
                  const Tensor& mean, const Tensor& rstd, int64_t* rows, int64_t* channels) {
  require_contiguous(x, op, "x");
  require_contiguous(weight, op, "weight");
  rows_and_channels(x, rows, channels);
  if (weight.numel() != *channels || weight.dtype() != x.dtype()) {
    throw ShapeError(std::string(op) + ": weight " + weight.describe() + " does not match x " +
                     x.describe());
  }
  if (bias != nullptr && (bias->numel() != *channels || bias->dtype() != x.dtype())) {
    throw ShapeError(std::string(op) + ": bias " + bias->describe() + " does not match x " +
                     x.describe());
  }
  for (const Tensor* s : {&mean, &rstd}) {
    require_contiguous(*s, op, "statistics");
    if (s->numel() != *rows || s->dtype() != stats_dtype(x.dtype())) {
      throw ShapeError(std::string(op) + ": statistics " + s->describe() + " must be " +
                       dtype_name(stats_dtype(x.dtype())) + "[" + std::to_string(*rows) + "]");
    }
  }
}

}  // namespace

void layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                       const Tensor& weight, const Tensor* bias, double eps) {
  int64_t rows = 0, channels = 0;
  check_common("layernorm_forward", x, weight, bias, mean, rstd, &rows, &channels);
  require_contiguous(y, "layernorm_forward", "y");
  require_same_shape(y, x, "layernorm_forward", "y", "x");
  require_dtype(y, x.dtype(), "layernorm_forward", "y");
  dispatch_floating(x.dtype(), "layernorm_forward", [&]<typename T>() {
    const T* xs = x.data<T>();
    const T* w = weight.data<T>();
    const T* b = bias != nullptr ? bias->data<T>() : nullptr;
    T* ys = y.data<T>();
    T* means = mean.data<T>();
    T* rstds = rstd.data<T>();
    const int64_t c = channels;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = xs + r * c;
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < c; ++i) sum += row[i];
      const T m = sum / static_cast<T>(c);
      T var = 0;
#pragma omp simd reduction(+ : var)
      for (int64_t i = 0; i < c; ++i) var += (row[i] - m) * (row[i] - m);
      const T s = static_cast<T>(1) / std::sqrt(var / static_cast<T>(c) + static_cast<T>(eps));
      T* out = ys + r * c;
      if (b != nullptr) {
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) out[i] = (row[i] - m) * s * w[i] + b[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) out[i] = (row[i] - m) * s * w[i];
      }
      means[r] = m;
      rstds[r] = s;
    }
  });
}

void layernorm_backward(Tensor& dx, Tensor& dweight, Tensor* dbias, const Tensor& dy,
                        const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd) {
  int64_t rows = 0, channels = 0;
  const char* op = "layernorm_backward";
  check_common(op, x, weight, nullptr, mean, rstd, &rows, &channels);
  for (const Tensor* t : {static_cast<const Tensor*>(&dx), &dy}) {
    require_contiguous(*t, op, "dx/dy");
    require_same_shape(*t, x, op, "dx/dy", "x");
    require_dtype(*t, x.dtype(), op, "dx/dy");
  }
  require_contiguous(dweight, op, "dweight");
  require_same_shape(dweight, weight, op, "dweight", "weight");
  if (dbias != nullptr) require_contiguous(*dbias, op, "dbias");
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* xs = x.data<T>();
    const T* dys = dy.data<T>();
    const T* w = weight.data<T>();
    const T* means = mean.data<T>();
    const T* rstds = rstd.data<T>();
    T* dxs = dx.data<T>();
    const int64_t c = channels;
    const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
    // Per-block partial sums of dy * xhat and dy, in T (f64 for the oracle); summed in order.
    std::vector<T> partial_w(static_cast<size_t>(blocks * c), T(0));
    std::vector<T> partial_b(static_cast<size_t>(blocks * c), T(0));
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      T* pw = partial_w.data() + blk * c;
      T* pb = partial_b.data() + blk * c;
      const int64_t end = std::min(rows, (blk + 1) * kRowBlock);
      for (int64_t r = blk * kRowBlock; r < end; ++r) {
        const T* row = xs + r * c;
        const T* g = dys + r * c;
        const T m = means[r];
        const T s = rstds[r];
        T sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int64_t i = 0; i < c; ++i) {
          const T xhat = (row[i] - m) * s;
          const T gw = g[i] * w[i];
          sum_g += gw;
          sum_gx += gw * xhat;
          pw[i] += g[i] * xhat;
          pb[i] += g[i];
        }
        const T mean_g = sum_g / static_cast<T>(c);
        const T mean_gx = sum_gx / static_cast<T>(c);
        T* out = dxs + r * c;
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) {
          const T xhat = (row[i] - m) * s;
          out[i] = s * (g[i] * w[i] - mean_g - xhat * mean_gx);
        }
      }
    }
    T* dw = dweight.data<T>();
    T* db = dbias != nullptr ? dbias->data<T>() : nullptr;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      for (int64_t i = 0; i < c; ++i) {
        dw[i] += partial_w[static_cast<size_t>(blk * c + i)];
        if (db != nullptr) db[i] += partial_b[static_cast<size_t>(blk * c + i)];
      }
    }
  });
}

}  // namespace zero::backend::cpu
