// The generation ops on the CUDA backend: appending to a key/value cache, and attention of the
// newest queries over the cache (the CUDA-core attention kernel with its keys running ahead of
// its queries; the tensor-core kernels take only plain self-attention).
#include <cstdint>
#include <string>

#include "backend/cached_attention_shapes.h"
#include "backend/cuda/cuda_arg_checks.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace zero::backend {

using cuda_internal::Checks;
using cuda_internal::head_layout;

void CudaBackend::kv_cache_write(Tensor& cache, const Tensor& x, int64_t position) {
  const char* op = "kv_cache_write";
  const Checks check(device(), op);
  check.here(cache, "cache").here(x, "x");
  const KvCacheWriteDims d = check_kv_cache_write(op, cache, x, position);
  cuda::launch_kv_cache_write(cache.raw_data(), x.raw_data(), head_layout(x), d.capacity,
                              position, dtype_size(x.dtype()), current());
}

void CudaBackend::attention_forward_cached(Tensor& out, const Tensor& q, const Tensor& k_cache,
                                           const Tensor& v_cache, int64_t key_count,
                                           double scale, int64_t window) {
  const char* op = "attention_forward_cached";
  const Checks check(device(), op);
  check.here(out, "out").here(q, "q").here(k_cache, "k_cache").here(v_cache, "v_cache");
  const CachedAttentionDims d =
      check_attention_forward_cached(op, out, q, k_cache, v_cache, key_count, window);
  if (d.head_dim > cuda::kMaxAttentionHeadDim) {
    throw UnsupportedError(std::string(op) + " on the CUDA backend supports head dimensions 1.." +
                           std::to_string(cuda::kMaxAttentionHeadDim) + ", not " +
                           std::to_string(d.head_dim));
  }
  cuda::AttentionArgs a;
  a.dtype = q.dtype();
  a.batch = d.batch;
  a.seq = d.queries;
  a.heads = d.heads;
  a.kv_heads = d.kv_heads;
  a.head_dim = d.head_dim;
  a.scale = static_cast<float>(scale);
  a.window = window;
  a.q = q.raw_data();
  a.k = k_cache.raw_data();
  a.v = v_cache.raw_data();
  a.out = out.raw_data();
  a.q_layout = head_layout(q);
  a.k_layout = head_layout(k_cache);
  a.v_layout = head_layout(v_cache);
  a.out_layout = head_layout(out);
  a.key_seq = key_count;
  cuda::launch_attention_forward(a, current());
}

}  // namespace zero::backend
