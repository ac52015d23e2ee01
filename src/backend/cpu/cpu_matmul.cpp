// CPU matmul / linear forward / linear backward. Every product is one OpenBLAS gemm on row-major
// data; parameter-gradient accumulation uses beta = 1 so no temporary is ever allocated. The
// only loops of our own are the bias broadcast and the bias-gradient column sums.
#include "backend/cpu/cpu_matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "core/error.h"

namespace zero::backend::cpu {
namespace {

void expect_same_dtype(const Tensor& t, const Tensor& ref, const char* op, const char* name,
                       const char* ref_name) {
  if (t.dtype() != ref.dtype()) {
    throw ShapeError(std::string(op) + ": " + name + " " + t.describe() + " and " + ref_name +
                     " " + ref.describe() + " must have the same dtype");
  }
}

blasint to_blas_int(int64_t v, const char* op) {
  if (v > static_cast<int64_t>(INT_MAX)) {
    throw UnsupportedError(std::string(op) + ": dimension " + std::to_string(v) +
                           " exceeds the 32-bit BLAS index range; split the product");
  }
  return static_cast<blasint>(v);
}

// Row-major c[m,n] = alpha * op(a) @ op(b) + beta * c, where op(a) is [m,k] and op(b) is [k,n];
// lda/ldb/ldc are the row lengths of a, b and c as stored.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc, const char* op) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // BLAS rejects the zero leading dimension an empty a or b has; the product is zero. As in
    // BLAS, beta == 0 overwrites c without reading it (c may hold NaN).
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    }
    return;
  }
  const CBLAS_TRANSPOSE trans_a = ta ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE trans_b = tb ? CblasTrans : CblasNoTrans;
  const blasint bm = to_blas_int(m, op), bn = to_blas_int(n, op), bk = to_blas_int(k, op);
  const blasint blda = to_blas_int(lda, op), bldb = to_blas_int(ldb, op);
  const blasint bldc = to_blas_int(ldc, op);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, trans_a, trans_b, bm, bn, bk, alpha, a, blda, b, bldb, beta, c,
                bldc);
  } else {
    cblas_dgemm(CblasRowMajor, trans_a, trans_b, bm, bn, bk, alpha, a, blda, b, bldb, beta, c,
                bldc);
  }
}

// Product of all dimensions but the last: the "rows" of an activation tensor.
int64_t leading_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return rows;
}

Shape with_last_dim(const Shape& shape, int64_t last) {
  Shape out = shape;
  out.back() = last;
  return out;
}

// Validates w[out,in] against x[..., in] and returns (out, in).
void check_linear_weight(const Tensor& x, const Tensor& w, const char* op) {
  if (w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(1)) {
    throw ShapeError(std::string(op) + ": x " + shape_to_string(x.shape()) + " does not fit w " +
                     shape_to_string(w.shape()) +
                     "; w must be [out, in] with in equal to x's last dimension");
  }
}

// dbias[j] += sum over rows of dy[r, j]. Columns are split into tiles, one tile per task, and
// each column is summed over rows in order in double: deterministic whatever the thread count,
// and the inner loop runs along contiguous columns so it vectorises.
template <typename T>
void accumulate_column_sums(T* dbias, const T* dy, int64_t rows, int64_t cols) {
  constexpr int64_t kMaxTile = 512;
  const int64_t threads = std::max(1, omp_get_max_threads());
  const int64_t rounds = (cols + threads * kMaxTile - 1) / (threads * kMaxTile);
  const int64_t tiles_wanted = std::max<int64_t>(1, threads * rounds);
  int64_t tile = (cols + tiles_wanted - 1) / tiles_wanted;
  tile = std::min(kMaxTile, (tile + 7) / 8 * 8);
  const int64_t tiles = (cols + tile - 1) / tile;
#pragma omp parallel for schedule(static) if (tiles > 1 && rows * cols >= (int64_t{1} << 15))
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t c0 = t * tile;
    const int64_t width = std::min(tile, cols - c0);
    double acc[kMaxTile] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = dy + r * cols + c0;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
    }
    for (int64_t j = 0; j < width; ++j) {
      dbias[c0 + j] = static_cast<T>(static_cast<double>(dbias[c0 + j]) + acc[j]);
    }
  }
}

}  // namespace

void matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
            double alpha, double beta) {
  const char* op = "matmul";
  expect_host_contiguous(c, op, "c");
  expect_host_contiguous(a, op, "a");
  expect_host_contiguous(b, op, "b");
  expect_same_dtype(a, c, op, "a", "c");
  expect_same_dtype(b, c, op, "b", "c");
  if (a.dim() != 2 || b.dim() != 2 || c.dim() != 2) {
    throw ShapeError(std::string("matmul: a ") + shape_to_string(a.shape()) + ", b " +
                     shape_to_string(b.shape()) + " and c " + shape_to_string(c.shape()) +
                     " must all be 2-D");
  }
  const int64_t m = transpose_a ? a.size(1) : a.size(0);
  const int64_t k = transpose_a ? a.size(0) : a.size(1);
  const int64_t kb = transpose_b ? b.size(1) : b.size(0);
  const int64_t n = transpose_b ? b.size(0) : b.size(1);
  if (k != kb || c.size(0) != m || c.size(1) != n) {
    throw ShapeError(std::string("matmul: op(a) from a ") + shape_to_string(a.shape()) +
                     (transpose_a ? " (transposed)" : "") + " and op(b) from b " +
                     shape_to_string(b.shape()) + (transpose_b ? " (transposed)" : "") +
                     " do not multiply into c " + shape_to_string(c.shape()) +
                     "; need op(a) [M,K], op(b) [K,N], c [M,N]");
  }
  dispatch_floating(c.dtype(), op, [&]<typename T>() {
    gemm<T>(transpose_a, transpose_b, m, n, k, static_cast<T>(alpha), a.data<T>(), a.size(1),
            b.data<T>(), b.size(1), static_cast<T>(beta), c.data<T>(), n, op);
  });
}

void linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) {
  const char* op = "linear_forward";
  expect_host_contiguous(y, op, "y");
  expect_host_contiguous(x, op, "x");
  expect_host_contiguous(w, op, "w");
  expect_same_dtype(x, y, op, "x", "y");
  expect_same_dtype(w, y, op, "w", "y");
  check_linear_weight(x, w, op);
  const int64_t out = w.size(0);
  const int64_t in = w.size(1);
  const Shape y_shape = with_last_dim(x.shape(), out);
  if (y.shape() != y_shape) {
    throw ShapeError(std::string("linear_forward: y ") + shape_to_string(y.shape()) +
                     " does not match x " + shape_to_string(x.shape()) + " and w " +
                     shape_to_string(w.shape()) + "; expected y " + shape_to_string(y_shape));
  }
  if (bias != nullptr) {
    expect_host_contiguous(*bias, op, "bias");
    expect_same_dtype(*bias, y, op, "bias", "y");
    if (bias->shape() != Shape{out}) {
      throw ShapeError(std::string("linear_forward: bias ") + shape_to_string(bias->shape()) +
                       " does not match w " + shape_to_string(w.shape()) + "; expected [" +
                       std::to_string(out) + "]");
    }
  }
  const int64_t rows = leading_rows(x);
  dispatch_floating(y.dtype(), op, [&]<typename T>() {
    T* yd = y.data<T>();
    T beta = T(0);
    if (bias != nullptr) {
      // Broadcast the bias into y, then let gemm add the product on top (beta = 1): one write
      // pass instead of a second read-modify-write pass after the product.
      const T* bd = bias->data<T>();
#pragma omp parallel for schedule(static) if (rows * out >= (int64_t{1} << 15))
      for (int64_t r = 0; r < rows; ++r) {
        T* row = yd + r * out;
#pragma omp simd
        for (int64_t j = 0; j < out; ++j) row[j] = bd[j];
      }
      beta = T(1);
    }
    gemm<T>(false, true, rows, out, in, T(1), x.data<T>(), in, w.data<T>(), in, beta, yd, out,
            op);
  });
}

void linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy, const Tensor& x,
                     const Tensor& w) {
  const char* op = "linear_backward";
  expect_host_contiguous(dw, op, "dw");
  expect_host_contiguous(dy, op, "dy");
  expect_host_contiguous(x, op, "x");
  expect_host_contiguous(w, op, "w");
  expect_same_dtype(x, w, op, "x", "w");
  expect_same_dtype(dy, w, op, "dy", "w");
  expect_same_dtype(dw, w, op, "dw", "w");
  check_linear_weight(x, w, op);
  const int64_t out = w.size(0);
  const int64_t in = w.size(1);
  const Shape dy_shape = with_last_dim(x.shape(), out);
  if (dy.shape() != dy_shape) {
    throw ShapeError(std::string("linear_backward: dy ") + shape_to_string(dy.shape()) +
                     " does not match x " + shape_to_string(x.shape()) + " and w " +
                     shape_to_string(w.shape()) + "; expected dy " + shape_to_string(dy_shape));
  }
  if (dw.shape() != w.shape()) {
    throw ShapeError(std::string("linear_backward: dw ") + shape_to_string(dw.shape()) +
                     " must have the shape of w " + shape_to_string(w.shape()));
  }
  if (dx != nullptr) {
    expect_host_contiguous(*dx, op, "dx");
    expect_same_dtype(*dx, w, op, "dx", "w");
    if (dx->shape() != x.shape()) {
      throw ShapeError(std::string("linear_backward: dx ") + shape_to_string(dx->shape()) +
                       " must have the shape of x " + shape_to_string(x.shape()));
    }
  }
  if (dbias != nullptr) {
    expect_host_contiguous(*dbias, op, "dbias");
    expect_same_dtype(*dbias, w, op, "dbias", "w");
    if (dbias->shape() != Shape{out}) {
      throw ShapeError(std::string("linear_backward: dbias ") + shape_to_string(dbias->shape()) +
                       " does not match w " + shape_to_string(w.shape()) + "; expected [" +
                       std::to_string(out) + "]");
    }
  }
  const int64_t rows = leading_rows(x);
  dispatch_floating(w.dtype(), op, [&]<typename T>() {
    const T* dyd = dy.data<T>();
    if (dx != nullptr) {
      // dx[rows,in] = dy[rows,out] @ w[out,in]
      gemm<T>(false, false, rows, in, out, T(1), dyd, out, w.data<T>(), in, T(0), dx->data<T>(),
              in, op);
    }
    // dw[out,in] += dy^T[out,rows] @ x[rows,in]
    gemm<T>(true, false, out, in, rows, T(1), dyd, out, x.data<T>(), in, T(1), dw.data<T>(), in,
            op);
    if (dbias != nullptr) accumulate_column_sums(dbias->data<T>(), dyd, rows, out);
  });
}

}  // namespace zero::backend::cpu
