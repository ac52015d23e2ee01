#include "backend/cached_attention_shapes.h"

#include <string>

#include "core/error.h"

namespace zero::backend {
namespace {

std::string described(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

// A [B, T, heads, D] view with contiguous D whose rows do not overlap along T.
void require_head_view(const char* op, const Tensor& t, const char* name) {
  const bool ok = t.defined() && t.dim() == 4 && (t.stride(3) == 1 || t.size(3) <= 1) &&
                  (t.size(1) <= 1 || t.stride(1) >= t.size(3));
  if (!ok) {
    throw ShapeError(std::string(op) + ": " + name +
                     " must be a [B, T, heads, D] tensor or view with contiguous D, got " +
                     described(t));
  }
}

void require_cache(const char* op, const Tensor& t, const char* name) {
  if (!t.defined() || t.dim() != 4 || !t.is_contiguous()) {
    throw ShapeError(std::string(op) + ": " + name +
                     " must be a contiguous [B, S, KVH, D] cache, got " + described(t));
  }
}

}  // namespace

KvCacheWriteDims check_kv_cache_write(const char* op, const Tensor& cache, const Tensor& x,
                                      int64_t position) {
  require_cache(op, cache, "cache");
  require_head_view(op, x, "x");
  KvCacheWriteDims d{x.size(0), x.size(1), cache.size(1), x.size(2), x.size(3)};
  if (cache.size(0) != d.batch || cache.size(2) != d.kv_heads || cache.size(3) != d.head_dim) {
    throw ShapeError(std::string(op) + ": x " + shape_to_string(x.shape()) +
                     " does not fit the cache " + shape_to_string(cache.shape()) +
                     "; both are [B, ., KVH, D] with the same B, KVH and D");
  }
  if (x.dtype() != cache.dtype()) {
    throw ShapeError(std::string(op) + ": x is " + dtype_name(x.dtype()) + " but the cache is " +
                     dtype_name(cache.dtype()));
  }
  if (position < 0 || position > d.capacity - d.rows) {
    throw ShapeError(std::string(op) + ": positions " + std::to_string(position) + " .. " +
                     std::to_string(position + d.rows - 1) + " do not fit a cache of " +
                     std::to_string(d.capacity) + " positions");
  }
  return d;
}

CachedAttentionDims check_attention_forward_cached(const char* op, const Tensor& out,
                                                   const Tensor& q, const Tensor& k_cache,
                                                   const Tensor& v_cache, int64_t key_count,
                                                   int64_t window) {
  require_head_view(op, q, "q");
  require_head_view(op, out, "out");
  require_cache(op, k_cache, "k_cache");
  require_cache(op, v_cache, "v_cache");
  CachedAttentionDims d{q.size(0), q.size(1), q.size(2), k_cache.size(2), q.size(3), key_count,
                        k_cache.size(1)};
  if (out.shape() != q.shape()) {
    throw ShapeError(std::string(op) + ": out " + shape_to_string(out.shape()) +
                     " must have q's shape " + shape_to_string(q.shape()));
  }
  if (v_cache.shape() != k_cache.shape()) {
    throw ShapeError(std::string(op) + ": v_cache " + shape_to_string(v_cache.shape()) +
                     " must have k_cache's shape " + shape_to_string(k_cache.shape()));
  }
  if (k_cache.size(0) != d.batch || k_cache.size(3) != d.head_dim) {
    throw ShapeError(std::string(op) + ": k_cache " + shape_to_string(k_cache.shape()) +
                     " does not fit q " + shape_to_string(q.shape()) +
                     "; the cache must be [B, S, KVH, D] with q's B and D");
  }
  if (d.kv_heads <= 0 || d.heads <= 0 || d.heads % d.kv_heads != 0) {
    throw ShapeError(std::string(op) + ": q has " + std::to_string(d.heads) +
                     " heads, which is not a multiple of the cache's " +
                     std::to_string(d.kv_heads) + " kv heads");
  }
  if (d.head_dim <= 0) throw ShapeError(std::string(op) + ": head dimension D must be positive");
  for (const Tensor* t : {&out, &k_cache, &v_cache}) {
    if (t->dtype() != q.dtype()) {
      throw ShapeError(std::string(op) + ": " + dtype_name(t->dtype()) + " tensor " +
                       t->describe() + " with " + dtype_name(q.dtype()) +
                       " q; all tensors share q's dtype");
    }
  }
  if (key_count < d.queries || key_count > d.capacity) {
    throw ShapeError(std::string(op) + ": key_count " + std::to_string(key_count) +
                     " must lie between the " + std::to_string(d.queries) +
                     " queries and the cache's " + std::to_string(d.capacity) + " positions");
  }
  if (window < 0) {
    throw ShapeError(std::string(op) + ": window " + std::to_string(window) +
                     " is negative; use 0 for full causal attention or w > 0 for a sliding window");
  }
  return d;
}

}  // namespace zero::backend
