#include "backend/cpu/cpu_rmsnorm.h"

#include <cmath>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "backend/cpu/cpu_rms_rows.h"

namespace zero::backend::cpu {
namespace {

void check_common(const char* op, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                  int64_t* rows, int64_t* channels) {
  require_contiguous(x, op, "x");
  require_contiguous(weight, op, "weight");
  require_contiguous(rstd, op, "rstd");
  rows_and_channels(x, rows, channels);
  if (weight.numel() != *channels || weight.dtype() != x.dtype()) {
    throw ShapeError(std::string(op) + ": weight " + weight.describe() + " does not match x " +
                     x.describe());
  }
  if (rstd.numel() != *rows || rstd.dtype() != stats_dtype(x.dtype())) {
    throw ShapeError(std::string(op) + ": rstd " + rstd.describe() + " must be " +
                     dtype_name(stats_dtype(x.dtype())) + "[" + std::to_string(*rows) + "]");
  }
}

}  // namespace

void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& weight, double eps) {
  const char* op = "rmsnorm_forward";
  int64_t rows = 0, c = 0;
  check_common(op, x, weight, rstd, &rows, &c);
  require_contiguous(y, op, "y");
  require_same_shape(y, x, op, "y", "x");
  require_dtype(y, x.dtype(), op, "y");
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* xs = x.data<T>();
    const T* w = weight.data<T>();
    T* ys = y.data<T>();
    T* rs = rstd.data<T>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      rs[r] = rms_row_forward(xs + r * c, w, ys + r * c, c, eps);
    }
  });
}

void rmsnorm_backward(Tensor& dx, Tensor& dweight, const Tensor& dy, const Tensor& x,
                      const Tensor& weight, const Tensor& rstd) {
  const char* op = "rmsnorm_backward";
  int64_t rows = 0, c = 0;
  check_common(op, x, weight, rstd, &rows, &c);
  for (const Tensor* t : {static_cast<const Tensor*>(&dx), &dy}) {
    require_contiguous(*t, op, "dx/dy");
    require_same_shape(*t, x, op, "dx/dy", "x");
    require_dtype(*t, x.dtype(), op, "dx/dy");
  }
  require_contiguous(dweight, op, "dweight");
  require_same_shape(dweight, weight, op, "dweight", "weight");
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* xs = x.data<T>();
    const T* dys = dy.data<T>();
    const T* w = weight.data<T>();
    const T* rs = rstd.data<T>();
    T* dxs = dx.data<T>();
    const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
    std::vector<T> partial(static_cast<size_t>(blocks * c), T(0));
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      T* pw = partial.data() + blk * c;
      const int64_t end = std::min(rows, (blk + 1) * kRowBlock);
      for (int64_t r = blk * kRowBlock; r < end; ++r) {
        rms_row_backward(xs + r * c, dys + r * c, w, rs[r], c, pw, dxs + r * c);
      }
    }
    T* dw = dweight.data<T>();
    for (int64_t blk = 0; blk < blocks; ++blk) {
      for (int64_t i = 0; i < c; ++i) dw[i] += partial[static_cast<size_t>(blk * c + i)];
    }
  });
}

}  // namespace zero::backend::cpu
