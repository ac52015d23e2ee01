// Argument checks of the key/value-cache ops (Backend::kv_cache_write and
// Backend::attention_forward_cached), shared by every backend so that a bad call reads the same
// on the CPU and on a GPU. Device placement is each backend's own check.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend {

struct KvCacheWriteDims {
  int64_t batch = 0, rows = 0, capacity = 0, kv_heads = 0, head_dim = 0;  // rows: x's T
};
// Throws ShapeError naming `op` and the bad argument.
KvCacheWriteDims check_kv_cache_write(const char* op, const Tensor& cache, const Tensor& x,
                                      int64_t position);

struct CachedAttentionDims {
  int64_t batch = 0, queries = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t key_count = 0, capacity = 0;
  int64_t first_query_position() const { return key_count - queries; }
};
CachedAttentionDims check_attention_forward_cached(const char* op, const Tensor& out,
                                                   const Tensor& q, const Tensor& k_cache,
                                                   const Tensor& v_cache, int64_t key_count,
                                                   int64_t window);

}  // namespace zero::backend
