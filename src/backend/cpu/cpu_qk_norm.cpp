#include "backend/cpu/cpu_qk_norm.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_dispatch.h"
#include "backend/cpu/cpu_rms_rows.h"
#include "backend/qk_norm_shapes.h"

namespace zero::backend::cpu {
namespace {

void require_host_tensors(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (!t->device().is_cpu()) {
      throw ShapeError(std::string(op) + ": " + t->describe() + " is not on the CPU");
    }
  }
}

}  // namespace

void qk_rmsnorm_forward(Tensor& qkv_out, Tensor& rstd, const Tensor& qkv_in,
                        const Tensor& q_weight, const Tensor& k_weight, int64_t heads,
                        int64_t kv_heads, double eps) {
  const char* op = "qk_rmsnorm_forward";
  const QkNormDims d =
      check_qk_rmsnorm_forward(op, qkv_out, rstd, qkv_in, q_weight, k_weight, heads, kv_heads);
  require_host_tensors(op, {&qkv_out, &rstd, &qkv_in, &q_weight, &k_weight});
  dispatch_floating(qkv_in.dtype(), op, [&]<typename T>() {
    const int64_t dim = d.head_dim;
    const int64_t per_row = d.heads_per_row();
    const int64_t normed = d.normalised_per_row();
    const T* in = qkv_in.data<T>();
    T* out = qkv_out.data<T>();
    T* rs = rstd.data<T>();  // stats_dtype: T itself for f32 and f64
    const T* wq = q_weight.data<T>();
    const T* wk = k_weight.data<T>();
    // Head row r of the fused buffer starts at r * D; head (r % per_row) picks what it is.
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < d.rows * per_row; ++r) {
      const int64_t head = r % per_row;
      const T* x = in + r * dim;
      T* y = out + r * dim;
      if (head >= normed) {
        std::copy(x, x + dim, y);  // a value head
        continue;
      }
      // As rmsnorm_forward normalises a row.
      const T* w = head < d.heads ? wq : wk;
      rs[(r / per_row) * normed + head] = rms_row_forward(x, w, y, dim, eps);
    }
  });
}

void qk_rmsnorm_backward(Tensor& d_qkv_in, Tensor& dq_weight, Tensor& dk_weight,
                         const Tensor& d_qkv_out, const Tensor& qkv_in, const Tensor& q_weight,
                         const Tensor& k_weight, const Tensor& rstd, int64_t heads,
                         int64_t kv_heads) {
  const char* op = "qk_rmsnorm_backward";
  const QkNormDims d = check_qk_rmsnorm_backward(op, d_qkv_in, dq_weight, dk_weight, d_qkv_out,
                                                 qkv_in, q_weight, k_weight, rstd, heads,
                                                 kv_heads);
  require_host_tensors(op, {&d_qkv_in, &dq_weight, &dk_weight, &d_qkv_out, &qkv_in, &q_weight,
                            &k_weight, &rstd});
  dispatch_floating(qkv_in.dtype(), op, [&]<typename T>() {
    const int64_t dim = d.head_dim;
    const int64_t per_row = d.heads_per_row();
    const int64_t normed = d.normalised_per_row();
    const T* xs = qkv_in.data<T>();
    const T* dys = d_qkv_out.data<T>();
    T* dxs = d_qkv_in.data<T>();
    const T* rs = rstd.data<T>();
    const T* wq = q_weight.data<T>();
    const T* wk = k_weight.data<T>();
    // The weights' gradients: a partial sum per block of kRowBlock tokens for the query and
    // the key weight, then the blocks in order - the same sums for any thread count.
    const int64_t blocks = (d.rows + kRowBlock - 1) / kRowBlock;
    std::vector<T> partial(static_cast<size_t>(blocks * 2 * dim), T(0));
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      T* pq = partial.data() + blk * 2 * dim;
      T* pk = pq + dim;
      const int64_t end = std::min(d.rows, (blk + 1) * kRowBlock);
      for (int64_t token = blk * kRowBlock; token < end; ++token) {
        for (int64_t head = 0; head < per_row; ++head) {
          const int64_t r = token * per_row + head;
          const T* x = xs + r * dim;
          const T* g = dys + r * dim;
          T* dx = dxs + r * dim;
          if (head >= normed) {
            std::copy(g, g + dim, dx);
            continue;
          }
          // As rmsnorm_backward: dx = s (g w - x s mean(g w x s)); dweight += g x s.
          const bool query = head < d.heads;
          rms_row_backward(x, g, query ? wq : wk, rs[token * normed + head], dim,
                           query ? pq : pk, dx);
        }
      }
    }
    T* gq = dq_weight.data<T>();
    T* gk = dk_weight.data<T>();
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const T* pq = partial.data() + blk * 2 * dim;
      for (int64_t i = 0; i < dim; ++i) {
        gq[i] += pq[i];
        gk[i] += pq[dim + i];
      }
    }
  });
}

}  // namespace zero::backend::cpu
