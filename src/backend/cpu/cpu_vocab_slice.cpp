// Vocabulary-slice kernels. The cross-entropy runs in three passes so that a tensor-parallel
// group can all-reduce between them (max, then the sums, then the loss and its gradient); every
// statistic is f64, and exp is taken in f64 for f32 logits too, so the loss assembled from the
// slices equals softmax_cross_entropy's up to the order of the sums.
#include "backend/cpu/cpu_vocab_slice.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "core/error.h"

namespace zero::backend::cpu {
namespace {

void expect_ids(const Tensor& ids, int64_t n, const char* op, const char* name) {
  expect_host_contiguous(ids, op, name);
  if ((ids.dtype() != DType::kI32 && ids.dtype() != DType::kI64) || ids.numel() != n) {
    throw ShapeError(std::string(op) + ": " + name + " " + ids.describe() + " must be " +
                     std::to_string(n) + " i32 or i64 ids");
  }
}

void expect_stats(const Tensor& t, int64_t n, const char* op, const char* name) {
  expect_host_contiguous(t, op, name);
  if (t.dtype() != DType::kF64 || t.numel() != n) {
    throw ShapeError(std::string(op) + ": " + name + " " + t.describe() + " must be f64 [" +
                     std::to_string(n) + "]");
  }
}

int64_t id_at(const Tensor& ids, int64_t i) {
  return ids.dtype() == DType::kI64 ? ids.data<int64_t>()[i]
                                    : static_cast<int64_t>(ids.data<int32_t>()[i]);
}

// Rows and columns of a [..., V] tensor.
void rows_cols(const Tensor& t, int64_t& rows, int64_t& cols) {
  cols = t.size(-1);
  rows = cols > 0 ? t.numel() / cols : 0;
}

}  // namespace

void embedding_forward_slice(Tensor& out, const Tensor& ids, const Tensor& table,
                             int64_t first_id, bool accumulate) {
  const char* op = "embedding_forward_slice";
  expect_host_contiguous(out, op, "out");
  expect_host_contiguous(table, op, "table");
  const int64_t n = out.size(0), c = out.size(1), count = table.size(0);
  expect_ids(ids, n, op, "ids");
  if (table.dim() != 2 || table.size(1) != c || table.dtype() != out.dtype()) {
    throw ShapeError(std::string(op) + ": table " + table.describe() + " does not match out " +
                     out.describe());
  }
  dispatch_floating(out.dtype(), op, [&]<typename T>() {
    T* y = out.data<T>();
    const T* w = table.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t local = id_at(ids, i) - first_id;
      T* row = y + i * c;
      if (local < 0 || local >= count) {  // another rank's id: a zero row
        if (!accumulate) std::memset(row, 0, static_cast<size_t>(c) * sizeof(T));
        continue;
      }
      const T* src = w + local * c;
      for (int64_t j = 0; j < c; ++j) row[j] = accumulate ? row[j] + src[j] : src[j];
    }
  });
}

void embedding_backward_slice(Tensor& dtable, const Tensor& dout, const Tensor& ids,
                              int64_t first_id) {
  const char* op = "embedding_backward_slice";
  expect_host_contiguous(dtable, op, "dtable");
  expect_host_contiguous(dout, op, "dout");
  const int64_t n = dout.size(0), c = dout.size(1), count = dtable.size(0);
  expect_ids(ids, n, op, "ids");
  if (dtable.dim() != 2 || dtable.size(1) != c || dtable.dtype() != dout.dtype()) {
    throw ShapeError(std::string(op) + ": dtable " + dtable.describe() + " does not match dout " +
                     dout.describe());
  }
  dispatch_floating(dout.dtype(), op, [&]<typename T>() {
    T* g = dtable.data<T>();
    const T* dy = dout.data<T>();
    for (int64_t i = 0; i < n; ++i) {  // in position order: deterministic
      const int64_t local = id_at(ids, i) - first_id;
      if (local < 0 || local >= count) continue;
      for (int64_t j = 0; j < c; ++j) g[local * c + j] += dy[i * c + j];
    }
  });
}

void cross_entropy_slice_max(Tensor& row_max, const Tensor& logits) {
  const char* op = "cross_entropy_slice_max";
  expect_host_contiguous(logits, op, "logits");
  int64_t rows = 0, cols = 0;
  rows_cols(logits, rows, cols);
  expect_stats(row_max, rows, op, "row_max");
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    const T* x = logits.data<T>();
    double* m = row_max.data<double>();
    for (int64_t r = 0; r < rows; ++r) {
      double best = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < cols; ++j) best = std::max(best, static_cast<double>(x[r * cols + j]));
      m[r] = best;
    }
  });
}

void cross_entropy_slice_sums(Tensor& sum_exp, Tensor& target_logit, const Tensor& logits,
                              const Tensor& row_max, const Tensor& targets, int64_t first_column) {
  const char* op = "cross_entropy_slice_sums";
  expect_host_contiguous(logits, op, "logits");
  int64_t rows = 0, cols = 0;
  rows_cols(logits, rows, cols);
  expect_stats(sum_exp, rows, op, "sum_exp");
  expect_stats(target_logit, rows, op, "target_logit");
  expect_stats(row_max, rows, op, "row_max");
  expect_ids(targets, rows, op, "targets");
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    const T* x = logits.data<T>();
    const double* m = row_max.data<double>();
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(x[r * cols + j]) - m[r]);
      sum_exp.data<double>()[r] = sum;
      const int64_t local = id_at(targets, r) - first_column;
      target_logit.data<double>()[r] =
          local >= 0 && local < cols ? static_cast<double>(x[r * cols + local]) : 0.0;
    }
  });
}

void cross_entropy_slice_finish(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                const Tensor& row_max, const Tensor& sum_exp,
                                const Tensor& target_logit, const Tensor& targets,
                                int64_t first_column, int64_t ignore_index, double grad_scale) {
  const char* op = "cross_entropy_slice_finish";
  expect_host_contiguous(logits, op, "logits");
  expect_host_contiguous(losses, op, "losses");
  int64_t rows = 0, cols = 0;
  rows_cols(logits, rows, cols);
  expect_stats(row_max, rows, op, "row_max");
  expect_stats(sum_exp, rows, op, "sum_exp");
  expect_stats(target_logit, rows, op, "target_logit");
  expect_ids(targets, rows, op, "targets");
  if (losses.numel() != rows || losses.dtype() != logits.dtype()) {
    throw ShapeError(std::string(op) + ": losses " + losses.describe() + " must be [" +
                     std::to_string(rows) + "] in the dtype of logits " + logits.describe());
  }
  if (dlogits != nullptr) {
    expect_host_contiguous(*dlogits, op, "dlogits");
    if (dlogits->shape() != logits.shape() || dlogits->dtype() != logits.dtype()) {
      throw ShapeError(std::string(op) + ": dlogits " + dlogits->describe() +
                       " must have the shape and dtype of logits " + logits.describe());
    }
  }
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    const T* x = logits.data<T>();
    T* dl = dlogits != nullptr ? dlogits->data<T>() : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t target = id_at(targets, r);
      if (target == ignore_index) {
        losses.data<T>()[r] = T(0);
        if (dl != nullptr) std::memset(dl + r * cols, 0, static_cast<size_t>(cols) * sizeof(T));
        continue;
      }
      const double m = row_max.data<double>()[r], sum = sum_exp.data<double>()[r];
      losses.data<T>()[r] =
          static_cast<T>((m - target_logit.data<double>()[r]) + std::log(sum));
      if (dl == nullptr) continue;
      const int64_t local = target - first_column;
      for (int64_t j = 0; j < cols; ++j) {
        const double e = std::exp(static_cast<double>(x[r * cols + j]) - m);
        // At the target p - 1 as (e - sum) / sum: no cancellation when p is close to 1.
        dl[r * cols + j] = static_cast<T>(j == local ? grad_scale * ((e - sum) / sum)
                                                     : grad_scale * (e / sum));
      }
    }
  });
}

}  // namespace zero::backend::cpu
