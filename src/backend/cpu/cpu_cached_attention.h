// CPU attention over a key/value cache (Backend::kv_cache_write, attention_forward_cached): the
// generation path, one query row at a time against every cached key it can see. No tiling: a
// decoding step has one query per sequence, so the work is a pass over the cache.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend::cpu {

// Any dtype (a copy of elements).
void kv_cache_write(Tensor& cache, const Tensor& x, int64_t position);
// f32 and f64 (16-bit through F32Twins in CpuBackend). Deterministic for any thread count.
void attention_forward_cached(Tensor& out, const Tensor& q, const Tensor& k_cache,
                              const Tensor& v_cache, int64_t key_count, double scale,
                              int64_t window);

}  // namespace zero::backend::cpu
