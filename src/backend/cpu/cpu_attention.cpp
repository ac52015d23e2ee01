#include "backend/cpu/cpu_attention.h"

#include <omp.h>

#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_attention_tiles.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"

namespace zero::backend::cpu {
namespace {

using namespace attention_detail;

struct Dims {
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t group() const { return heads / kv_heads; }
  int64_t tiles() const { return (seq + kTile - 1) / kTile; }
};

void require_head_layout(const Tensor& t, const char* op, const char* name) {
  if (t.dim() != 4 || !t.device().is_cpu() || t.stride(3) != 1) {
    throw ShapeError(std::string(op) + ": " + name +
                     " must be a CPU [B, T, heads, D] view with contiguous D, got " +
                     (t.defined() ? t.describe() : std::string("an undefined tensor")));
  }
}

Dims check_shapes(const char* op, const Tensor& out, const Tensor& lse, const Tensor& q,
                  const Tensor& k, const Tensor& v) {
  require_head_layout(q, op, "q");
  require_head_layout(k, op, "k");
  require_head_layout(v, op, "v");
  require_head_layout(out, op, "out");
  Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  if (k.shape() != v.shape() || k.size(0) != d.batch || k.size(1) != d.seq ||
      k.size(3) != d.head_dim || out.shape() != q.shape()) {
    throw ShapeError(std::string(op) + ": q " + shape_to_string(q.shape()) + ", k " +
                     shape_to_string(k.shape()) + ", v " + shape_to_string(v.shape()) + " and out " +
                     shape_to_string(out.shape()) + " do not fit [B,T,H,D] / [B,T,KVH,D]");
  }
  if (d.kv_heads == 0 || d.heads % d.kv_heads != 0) {
    throw ShapeError(std::string(op) + ": " + std::to_string(d.heads) +
                     " query heads are not a multiple of " + std::to_string(d.kv_heads) + " kv heads");
  }
  for (const Tensor* t : {&k, &v, &out}) {
    if (t->dtype() != q.dtype()) {
      throw ShapeError(std::string(op) + ": q, k, v and out must share one dtype");
    }
  }
  require_contiguous(lse, op, "lse");
  if (lse.shape() != Shape{d.batch, d.heads, d.seq} || lse.dtype() != stats_dtype(q.dtype())) {
    throw ShapeError(std::string(op) + ": lse must be " + dtype_name(stats_dtype(q.dtype())) +
                     shape_to_string({d.batch, d.heads, d.seq}) + ", got " + lse.describe());
  }
  return d;
}

template <typename T>
void forward_impl(const Dims& d, Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                  const Tensor& v, T scale, int64_t window) {
  const HeadView<T> qv = head_view<T>(q), kv = head_view<T>(k), vv = head_view<T>(v);
  const HeadView<T> ov = head_view<T>(out);
  T* lses = lse.data<T>();
  const int64_t D = d.head_dim;
  const int64_t tiles = d.tiles();
  const int64_t work = d.batch * d.heads * tiles;
#pragma omp parallel
  {
    std::vector<T> scores(static_cast<size_t>(kTile * kTile));
    std::vector<T> acc(static_cast<size_t>(kTile * D));
    std::vector<T> row_max(kTile), row_sum(kTile), rescale(kTile);
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < work; ++w) {
      // Late query tiles see the most keys: hand them out first for balance.
      const int64_t qt = tiles - 1 - w % tiles;
      const int64_t h = (w / tiles) % d.heads;
      const int64_t b = w / (tiles * d.heads);
      const int64_t g = h / d.group();
      const int64_t q0 = qt * kTile, rows = std::min(kTile, d.seq - q0);
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<T>::infinity());
      std::fill(row_sum.begin(), row_sum.end(), T(0));
      for (int64_t k0 = 0; k0 < q0 + rows; k0 += kTile) {
        const int64_t cols = std::min(kTile, d.seq - k0);
        if (!tile_visible(q0, q0 + rows, k0, k0 + cols, window)) continue;
        gemm(false, true, rows, cols, D, scale, qv.row(b, q0, h), qv.seq_stride, kv.row(b, k0, g),
             kv.seq_stride, T(0), scores.data(), kTile);
        // Online softmax: new running max per row, rescale what was accumulated so far.
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = q0 + r;
          const int64_t lo = std::clamp<int64_t>(first_key(i, window) - k0, 0, cols);
          const int64_t hi = std::clamp<int64_t>(i + 1 - k0, 0, cols);
          T m = row_max[r];
          const T* s = scores.data() + r * kTile;
          for (int64_t c = lo; c < hi; ++c) m = std::max(m, s[c]);
          rescale[r] = row_max[r] == m ? T(1) : fast_exp(row_max[r] - m);
          row_max[r] = m;
        }
        exp_tile(scores.data(), kTile, q0, rows, k0, cols, row_max.data(), window);
        for (int64_t r = 0; r < rows; ++r) {
          const T* p = scores.data() + r * kTile;
          T sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < cols; ++c) sum += p[c];
          row_sum[r] = row_sum[r] * rescale[r] + sum;
          if (rescale[r] != T(1)) {
            T* a = acc.data() + r * D;
#pragma omp simd
            for (int64_t x = 0; x < D; ++x) a[x] *= rescale[r];
          }
        }
        gemm(false, false, rows, D, cols, T(1), scores.data(), kTile, vv.row(b, k0, g),
             vv.seq_stride, T(1), acc.data(), D);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const T inv = T(1) / row_sum[r];
        T* o = ov.row(b, q0 + r, h);
        const T* a = acc.data() + r * D;
#pragma omp simd
        for (int64_t x = 0; x < D; ++x) o[x] = a[x] * inv;
        lses[(b * d.heads + h) * d.seq + q0 + r] = row_max[r] + std::log(row_sum[r]);
      }
    }
  }
}

// delta[b, h, i] = sum_d dout * out: the softmax-backward row term.
template <typename T>
std::vector<T> row_deltas(const Dims& d, const Tensor& dout, const Tensor& out) {
  const HeadView<T> gv = head_view<T>(dout), ov = head_view<T>(out);
  std::vector<T> delta(static_cast<size_t>(d.batch * d.heads * d.seq));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      for (int64_t i = 0; i < d.seq; ++i) {
        const T* g = gv.row(b, i, h);
        const T* o = ov.row(b, i, h);
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t x = 0; x < d.head_dim; ++x) sum += g[x] * o[x];
        delta[static_cast<size_t>((b * d.heads + h) * d.seq + i)] = sum;
      }
    }
  }
  return delta;
}

// For one (query tile, key tile) pair: P = exp(scale QK^T - lse), dS = P * (dO V^T - delta).
// On return `p` holds P and `ds` holds dS (both [rows, cols], leading dimension kTile).
template <typename T>
void probabilities_and_score_grads(const Dims& d, int64_t b, int64_t h, int64_t g, int64_t q0,
                                   int64_t rows, int64_t k0, int64_t cols, T scale,
                                   int64_t window, const HeadView<T>& qv, const HeadView<T>& kv,
                                   const HeadView<T>& vv, const HeadView<T>& gv, const T* lses,
                                   const T* delta, T* p, T* ds) {
  const int64_t D = d.head_dim;
  gemm(false, true, rows, cols, D, scale, qv.row(b, q0, h), qv.seq_stride, kv.row(b, k0, g),
       kv.seq_stride, T(0), p, kTile);
  exp_tile(p, kTile, q0, rows, k0, cols, lses + (b * d.heads + h) * d.seq + q0, window);
  gemm(false, true, rows, cols, D, T(1), gv.row(b, q0, h), gv.seq_stride, vv.row(b, k0, g),
       vv.seq_stride, T(0), ds, kTile);
  const T* dl = delta + (b * d.heads + h) * d.seq + q0;
  for (int64_t r = 0; r < rows; ++r) {
    T* dsr = ds + r * kTile;
    const T* pr = p + r * kTile;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) dsr[c] = pr[c] * (dsr[c] - dl[r]);
  }
}

template <typename T>
void backward_impl(const Dims& d, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                   const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   const Tensor& lse, T scale, int64_t window) {
  const HeadView<T> qv = head_view<T>(q), kv = head_view<T>(k), vv = head_view<T>(v);
  const HeadView<T> gv = head_view<T>(dout);
  const HeadView<T> dqv = head_view<T>(dq), dkv = head_view<T>(dk), dvv = head_view<T>(dv);
  const T* lses = lse.data<T>();
  const std::vector<T> delta = row_deltas<T>(d, dout, out);
  const int64_t D = d.head_dim;
  const int64_t tiles = d.tiles();

  // Pass 1: dK and dV, one (batch, kv head, key tile) per task, summing over every query head
  // of the group and every query tile that sees the keys: no two tasks write the same rows.
  const int64_t kv_work = d.batch * d.kv_heads * tiles;
#pragma omp parallel
  {
    std::vector<T> p(static_cast<size_t>(kTile * kTile)), ds(static_cast<size_t>(kTile * kTile));
    std::vector<T> dk_acc(static_cast<size_t>(kTile * D)), dv_acc(static_cast<size_t>(kTile * D));
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < kv_work; ++w) {
      const int64_t kt = w % tiles;
      const int64_t g = (w / tiles) % d.kv_heads;
      const int64_t b = w / (tiles * d.kv_heads);
      const int64_t k0 = kt * kTile, cols = std::min(kTile, d.seq - k0);
      std::fill(dk_acc.begin(), dk_acc.end(), T(0));
      std::fill(dv_acc.begin(), dv_acc.end(), T(0));
      for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
        for (int64_t q0 = k0 - k0 % kTile; q0 < d.seq; q0 += kTile) {
          const int64_t rows = std::min(kTile, d.seq - q0);
          if (!tile_visible(q0, q0 + rows, k0, k0 + cols, window)) {
            if (window > 0 && q0 > k0) break;  // later query tiles are further out of the window
            continue;
          }
          probabilities_and_score_grads(d, b, h, g, q0, rows, k0, cols, scale, window, qv, kv, vv,
                                        gv, lses, delta.data(), p.data(), ds.data());
          gemm(true, false, cols, D, rows, T(1), p.data(), kTile, gv.row(b, q0, h), gv.seq_stride,
               T(1), dv_acc.data(), D);
          gemm(true, false, cols, D, rows, scale, ds.data(), kTile, qv.row(b, q0, h),
               qv.seq_stride, T(1), dk_acc.data(), D);
        }
      }
      for (int64_t c = 0; c < cols; ++c) {
        std::copy_n(dk_acc.data() + c * D, D, dkv.row(b, k0 + c, g));
        std::copy_n(dv_acc.data() + c * D, D, dvv.row(b, k0 + c, g));
      }
    }
  }

  // Pass 2: dQ, one (batch, head, query tile) per task.
  const int64_t q_work = d.batch * d.heads * tiles;
#pragma omp parallel
  {
    std::vector<T> p(static_cast<size_t>(kTile * kTile)), ds(static_cast<size_t>(kTile * kTile));
    std::vector<T> dq_acc(static_cast<size_t>(kTile * D));
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < q_work; ++w) {
      const int64_t qt = tiles - 1 - w % tiles;
      const int64_t h = (w / tiles) % d.heads;
      const int64_t b = w / (tiles * d.heads);
      const int64_t g = h / d.group();
      const int64_t q0 = qt * kTile, rows = std::min(kTile, d.seq - q0);
      std::fill(dq_acc.begin(), dq_acc.end(), T(0));
      for (int64_t k0 = 0; k0 < q0 + rows; k0 += kTile) {
        const int64_t cols = std::min(kTile, d.seq - k0);
        if (!tile_visible(q0, q0 + rows, k0, k0 + cols, window)) continue;
        probabilities_and_score_grads(d, b, h, g, q0, rows, k0, cols, scale, window, qv, kv, vv, gv,
                                      lses, delta.data(), p.data(), ds.data());
        gemm(false, false, rows, D, cols, scale, ds.data(), kTile, kv.row(b, k0, g), kv.seq_stride,
             T(1), dq_acc.data(), D);
      }
      for (int64_t r = 0; r < rows; ++r) std::copy_n(dq_acc.data() + r * D, D, dqv.row(b, q0 + r, h));
    }
  }
}

}  // namespace

void attention_forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, double scale, int64_t window) {
  const Dims d = check_shapes("attention_forward", out, lse, q, k, v);
  if (window < 0) throw ShapeError("attention_forward: window must be >= 0");
  dispatch_floating(q.dtype(), "attention_forward", [&]<typename T>() {
    forward_impl<T>(d, out, lse, q, k, v, static_cast<T>(scale), window);
  });
}

void attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        double scale, int64_t window) {
  const char* op = "attention_backward";
  const Dims d = check_shapes(op, out, lse, q, k, v);
  require_head_layout(dout, op, "dout");
  require_head_layout(dq, op, "dq");
  require_head_layout(dk, op, "dk");
  require_head_layout(dv, op, "dv");
  if (dout.shape() != q.shape() || dq.shape() != q.shape() || dk.shape() != k.shape() ||
      dv.shape() != v.shape()) {
    throw ShapeError(std::string(op) + ": gradient shapes must match q, k, v");
  }
  if (window < 0) throw ShapeError("attention_backward: window must be >= 0");
  dispatch_floating(q.dtype(), op, [&]<typename T>() {
    backward_impl<T>(d, dq, dk, dv, dout, q, k, v, out, lse, static_cast<T>(scale), window);
  });
}

}  // namespace zero::backend::cpu
