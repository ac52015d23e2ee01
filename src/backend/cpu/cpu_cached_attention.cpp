// Each (batch, head, query row) is one task: scores against the visible keys, their maximum,
// exp and sum, then the weighted sum of the values, every sum in key order - so a row's result
// does not depend on the thread that computes it.
#include "backend/cpu/cpu_cached_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "backend/cached_attention_shapes.h"
#include "backend/cpu/cpu_dispatch.h"

namespace zero::backend::cpu {
namespace {

void require_cpu(const char* op, const Tensor& t, const char* name) {
  if (!t.device().is_cpu()) {
    throw ShapeError(std::string(op) + ": " + name + " " + t.describe() + " is not on the CPU");
  }
}

}  // namespace

void kv_cache_write(Tensor& cache, const Tensor& x, int64_t position) {
  const char* op = "kv_cache_write";
  const KvCacheWriteDims d = check_kv_cache_write(op, cache, x, position);
  require_cpu(op, cache, "cache");
  require_cpu(op, x, "x");
  const size_t element = dtype_size(x.dtype());
  const size_t row_bytes = static_cast<size_t>(d.head_dim) * element;
  auto* dst = static_cast<char*>(cache.raw_data());
  const auto* src = static_cast<const char*>(x.raw_data());
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t t = 0; t < d.rows; ++t) {
      for (int64_t h = 0; h < d.kv_heads; ++h) {
        const int64_t to = ((b * d.capacity + position + t) * d.kv_heads + h) * d.head_dim;
        const int64_t from = b * x.stride(0) + t * x.stride(1) + h * x.stride(2);
        std::memcpy(dst + static_cast<size_t>(to) * element,
                    src + static_cast<size_t>(from) * element, row_bytes);
      }
    }
  }
}

void attention_forward_cached(Tensor& out, const Tensor& q, const Tensor& k_cache,
                              const Tensor& v_cache, int64_t key_count, double scale,
                              int64_t window) {
  const char* op = "attention_forward_cached";
  const CachedAttentionDims d =
      check_attention_forward_cached(op, out, q, k_cache, v_cache, key_count, window);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&out, &q, &k_cache, &v_cache}) {
    require_cpu(op, *t, "an argument");
  }
  const int64_t group = d.heads / d.kv_heads;
  const int64_t tasks = d.batch * d.heads * d.queries;
  dispatch_floating(q.dtype(), op, [&]<typename T>() {
    const T* qp = q.data<T>();
    const T* kp = k_cache.data<T>();
    const T* vp = v_cache.data<T>();
    T* op_out = out.data<T>();
    const T s = static_cast<T>(scale);
#pragma omp parallel
    {
      std::vector<T> scores(static_cast<size_t>(key_count));
      std::vector<T> acc(static_cast<size_t>(d.head_dim));
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t i = task % d.queries;
        const int64_t h = task / d.queries % d.heads;
        const int64_t b = task / d.queries / d.heads;
        const int64_t g = h / group;
        const int64_t position = d.first_query_position() + i;
        const int64_t first = window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
        const T* q_row = qp + b * q.stride(0) + i * q.stride(1) + h * q.stride(2);
        auto cache_row = [&](const T* base, int64_t j) {
          return base + ((b * d.capacity + j) * d.kv_heads + g) * d.head_dim;
        };
        T max_score = -std::numeric_limits<T>::infinity();
        for (int64_t j = first; j <= position; ++j) {
          const T* k_row = cache_row(kp, j);
          T dot = 0;
          for (int64_t e = 0; e < d.head_dim; ++e) dot += q_row[e] * k_row[e];
          scores[static_cast<size_t>(j)] = s * dot;
          max_score = std::max(max_score, scores[static_cast<size_t>(j)]);
        }
        std::fill(acc.begin(), acc.end(), T{0});
        T sum = 0;
        for (int64_t j = first; j <= position; ++j) {
          const T p = std::exp(scores[static_cast<size_t>(j)] - max_score);
          sum += p;
          const T* v_row = cache_row(vp, j);
          for (int64_t e = 0; e < d.head_dim; ++e) acc[static_cast<size_t>(e)] += p * v_row[e];
        }
        T* out_row = op_out + b * out.stride(0) + i * out.stride(1) + h * out.stride(2);
        for (int64_t e = 0; e < d.head_dim; ++e) out_row[e] = acc[static_cast<size_t>(e)] / sum;
      }
    }
  });
}

}  // namespace zero::backend::cpu
