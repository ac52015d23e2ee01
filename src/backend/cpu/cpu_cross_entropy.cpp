// CPU fused softmax cross-entropy. The logits of a language model are the largest activation
// (4096 x 50257 for GPT-2 at B*T = 4096), so each row is streamed from memory once: a max pass,
// then a pass that computes exp(x - max), sums it and (when a gradient is wanted) parks it in
// dlogits, then an in-place scaling pass that hits cache (a row is ~200 KB, within L2).
// Probabilities are never stored separately and each exp is computed once.
//
// f32 rows: exp is a branch-free polynomial that vectorises (libm's expf does not without
// -ffast-math); the row sum and the loss are formed in double, so the loss is accurate to a few
// float ulps however long the row. f64 rows use std::exp: they are the finite-difference oracle.
#include "backend/cpu/cpu_cross_entropy.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "backend/cpu/cpu_math.h"
#include "core/error.h"

namespace zero::backend::cpu {
namespace {

inline float row_exp(float x) { return exp_nonpositive(x); }
inline double row_exp(double x) { return std::exp(x); }

template <typename T>
T row_max(const T* x, int64_t v) {
  T m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t j = 1; j < v; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// One row: returns the loss and, when dl is non-null, writes grad_scale * (softmax - onehot)
// into dl. dl may equal x: every pass reads x[j] before it writes dl[j], and x[target] is read
// first of all.
template <typename T>
double cross_entropy_row(const T* x, T* dl, int64_t v, int64_t target, double grad_scale) {
  const T x_target = x[target];
  const T m = row_max(x, v);
  double sum = 0.0;
  if (dl != nullptr) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < v; ++j) {
      const T e = row_exp(x[j] - m);
      dl[j] = e;
      sum += static_cast<double>(e);
    }
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < v; ++j) sum += static_cast<double>(row_exp(x[j] - m));
  }
  // m - x_target first (exact for f32 logits held in double, one rounding of the difference
  // for f64): adding log(sum) to a large m first would round away the small loss of a row with
  // huge logits.
  const double loss = (static_cast<double>(m) - static_cast<double>(x_target)) + std::log(sum);
  if (dl != nullptr) {
    const double e_target = static_cast<double>(dl[target]);
    const T factor = static_cast<T>(grad_scale / sum);
#pragma omp simd
    for (int64_t j = 0; j < v; ++j) dl[j] *= factor;
    // p - 1 as (e - sum) / sum: `sum` holds exactly the terms that were added, so the
    // difference is the sum of the other terms, free of the cancellation that rounding p to T
    // and subtracting 1 would suffer when p is close to 1.
    dl[target] = static_cast<T>(grad_scale * ((e_target - sum) / sum));
  }
  return loss;
}

template <typename Id>
void check_targets(const Id* targets, int64_t n, int64_t vocab, int64_t ignore_index) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = static_cast<int64_t>(targets[i]);
    if ((t < 0 || t >= vocab) && t != ignore_index) [[unlikely]] {
      throw Error("softmax_cross_entropy: target " + std::to_string(t) + " at row " +
                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(vocab) +
                  ") and is not ignore_index (" + std::to_string(ignore_index) +
                  "); check the labels and the model's vocab_size");
    }
  }
}

}  // namespace

void softmax_cross_entropy(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index, double grad_scale) {
  const char* op = "softmax_cross_entropy";
  expect_host_contiguous(losses, op, "losses");
  expect_host_contiguous(logits, op, "logits");
  expect_host_contiguous(targets, op, "targets");
  if (targets.dtype() != DType::kI32 && targets.dtype() != DType::kI64) {
    throw ShapeError(std::string(op) + ": targets " + targets.describe() + " must be i32 or i64");
  }
  if (losses.dtype() != logits.dtype()) {
    throw ShapeError(std::string(op) + ": losses " + losses.describe() +
                     " must have the dtype of logits " + logits.describe());
  }
  if (logits.dim() < 1) {
    throw ShapeError(std::string(op) + ": logits " + logits.describe() + " must be [..., V]");
  }
  const int64_t vocab = logits.size(-1);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < logits.dim(); ++d) rows *= logits.size(d);
  if (targets.numel() != rows || losses.numel() != rows) {
    throw ShapeError(std::string(op) + ": logits " + shape_to_string(logits.shape()) + " has " +
                     std::to_string(rows) + " rows but targets are " +
                     shape_to_string(targets.shape()) + " and losses " +
                     shape_to_string(losses.shape()) + "; need one target and one loss per row");
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
    T* loss = losses.data<T>();
    auto run = [&]<typename Id>(const Id* tg) {
      check_targets(tg, rows, vocab, ignore_index);
#pragma omp parallel for schedule(static) if (rows * vocab >= (int64_t{1} << 15))
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t t = static_cast<int64_t>(tg[i]);
        T* dl_row = dl != nullptr ? dl + i * vocab : nullptr;
        if (t == ignore_index) {
          loss[i] = T(0);
          if (dl_row != nullptr) std::memset(dl_row, 0, static_cast<size_t>(vocab) * sizeof(T));
          continue;
        }
        loss[i] = static_cast<T>(cross_entropy_row(x + i * vocab, dl_row, vocab, t, grad_scale));
      }
    };
    if (targets.dtype() == DType::kI64) {
      run(targets.data<int64_t>());
    } else {
      run(targets.data<int32_t>());
    }
  });
}

}  // namespace zero::backend::cpu
