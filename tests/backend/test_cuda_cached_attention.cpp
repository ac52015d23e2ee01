// The generation ops on the CUDA backend against the CPU oracle: kv_cache_write (bit copies of
// strided key/value views, any 2/4-byte dtype) and attention_forward_cached (the CUDA-core
// attention kernel with its keys running ahead of its queries), outputs poisoned first; caches
// longer than the keys they hold (the rest is NaN and must never be read), GQA/MQA, windows,
// head dims that are no multiple of 32, one query (decoding) and several (a prompt).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

struct CachedCase {
  int64_t batch, queries, key_count, capacity, heads, kv_heads, head_dim, window;
};

std::string describe(const CachedCase& c, DType dtype) {
  return "B=" + std::to_string(c.batch) + " Tq=" + std::to_string(c.queries) +
         " keys=" + std::to_string(c.key_count) + "/" + std::to_string(c.capacity) +
         " H=" + std::to_string(c.heads) + " KVH=" + std::to_string(c.kv_heads) +
         " D=" + std::to_string(c.head_dim) + " window=" + std::to_string(c.window) + " " +
         dtype_name(dtype);
}

// A cache of `capacity` positions whose first key_count hold values (written with
// kv_cache_write from a [B, key_count, KVH, D] upload) and the rest NaN.
Tensor filled_cache(Backend& be, const CachedCase& c, DType dtype, const std::vector<float>& values) {
  Tensor cache = be.empty({c.batch, c.capacity, c.kv_heads, c.head_dim}, dtype,
                          MemoryCategory::kOther);
  be.fill(cache, std::nan(""));
  const Tensor keys = upload(be, values, {c.batch, c.key_count, c.kv_heads, c.head_dim}, dtype);
  be.kv_cache_write(cache, keys, 0);
  return cache;
}

class CudaCachedAttention : public CudaTest {};

TEST_F(CudaCachedAttention, MatchesTheCpuOracle) {
  const CachedCase cases[] = {
      {2, 1, 37, 40, 4, 2, 64, 0},     // decoding, GQA
      {1, 1, 70, 70, 2, 1, 80, 0},     // MQA, a head dim that is no multiple of 32
      {2, 5, 33, 48, 4, 4, 16, 0},     // a prompt's rows past a tile edge
      {1, 9, 100, 120, 2, 1, 128, 17}, // a sliding window across key tiles
      {1, 1, 65, 65, 3, 1, 24, 1},     // window of one
  };
  for (const CachedCase& c : cases) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      const std::string what = describe(c, dtype);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
      const int64_t kv_elements = c.batch * c.key_count * c.kv_heads * c.head_dim;
      const std::vector<float> k = random_values(kv_elements, 3, -2.0f, 2.0f);
      const std::vector<float> v = random_values(kv_elements, 4, -2.0f, 2.0f);
      const std::vector<float> q =
          random_values(c.batch * c.queries * c.heads * c.head_dim, 5, -2.0f, 2.0f);
      const Shape q_shape{c.batch, c.queries, c.heads, c.head_dim};
      std::vector<double> results[2];
      Backend* backends[2] = {&cpu(), &gpu()};
      for (int i = 0; i < 2; ++i) {
        Backend& be = *backends[i];
        const Tensor k_cache = filled_cache(be, c, dtype, k);
        const Tensor v_cache = filled_cache(be, c, dtype, v);
        Tensor out = be.empty(q_shape, dtype, MemoryCategory::kOther);
        be.fill(out, std::nan(""));
        be.attention_forward_cached(out, upload(be, q, q_shape, dtype), k_cache, v_cache,
                                    c.key_count, scale, c.window);
        results[i] = download(be, out);
      }
      // f32: summation order only (the CPU sums keys in order, the kernel per 32-key tile with
      // a running max): 2e-5 relative. 16-bit: one rounding unit of the stored output on top.
      expect_close(results[0], results[1], storage_tolerance(dtype, 2e-5, 2e-5), what);
    }
  }
}

TEST_F(CudaCachedAttention, CacheWriteCopiesBitsAtThePosition) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Shape x_shape{2, 3, 2, 8};
    // x as a strided view: every other [.., 2, 8] row block of a [2, 6, 2, 8] buffer.
    const std::vector<float> values = random_values(2 * 6 * 2 * 8, 9);
    std::vector<uint8_t> bytes[2];
    Backend* backends[2] = {&cpu(), &gpu()};
    for (int i = 0; i < 2; ++i) {
      Backend& be = *backends[i];
      const Tensor buffer = upload(be, values, {2, 6, 2, 8}, dtype);
      const Tensor x(buffer.storage(), dtype, x_shape, {96, 32, 8, 1}, buffer.offset());
      Tensor cache = be.zeros({2, 7, 2, 8}, dtype, MemoryCategory::kOther);
      be.kv_cache_write(cache, x, 4);
      bytes[i] = download_bytes(be, cache);
    }
    EXPECT_EQ(bytes[0], bytes[1]) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test
