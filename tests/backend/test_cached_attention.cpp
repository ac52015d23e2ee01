// The key/value-cache ops (Backend::kv_cache_write, attention_forward_cached) on the CPU oracle
// and the simulated device: attention of the last Tq queries over a cache filled from the same
// keys and values gives the rows of plain causal attention (attention_forward, itself checked
// against a full softmax in test_attention.cpp), whether the cache is filled at once or one
// position at a time; windows, GQA/MQA, strided views of a fused qkv buffer; bad calls throw.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"

namespace zero::backend {
namespace test_cached_attention {

using namespace backend_test;

struct Case {
  int64_t batch, seq, heads, kv_heads, head_dim, window;
};

std::string describe(const Case& c) {
  return "B=" + std::to_string(c.batch) + " T=" + std::to_string(c.seq) +
         " H=" + std::to_string(c.heads) + " KVH=" + std::to_string(c.kv_heads) +
         " D=" + std::to_string(c.head_dim) + " window=" + std::to_string(c.window);
}

// q, k, v as views of one fused [B, T, H + 2 KVH, D] buffer (the model's layout).
struct Fused {
  Tensor qkv, q, k, v;
};

Tensor head_view(const Tensor& fused, const Case& c, int64_t first_head, int64_t heads) {
  const int64_t width = (c.heads + 2 * c.kv_heads) * c.head_dim;
  return Tensor(fused.storage(), fused.dtype(), {c.batch, c.seq, heads, c.head_dim},
                {c.seq * width, width, c.head_dim, 1}, fused.offset() + first_head * c.head_dim);
}

Fused fused_inputs(Backend& be, const Case& c, DType dtype, uint32_t seed) {
  const int64_t width = c.heads + 2 * c.kv_heads;
  Fused f;
  f.qkv = upload(be, random_values(c.batch * c.seq * width * c.head_dim, seed, -2.0f, 2.0f),
                 {c.batch * c.seq, width * c.head_dim}, dtype);
  f.q = head_view(f.qkv, c, 0, c.heads);
  f.k = head_view(f.qkv, c, c.heads, c.kv_heads);
  f.v = head_view(f.qkv, c, c.heads + c.kv_heads, c.kv_heads);
  return f;
}

// Rows [first, first + rows) of every (b, h) of a contiguous [B, T, H, D] download.
std::vector<double> rows_of(const std::vector<double>& all, const Case& c, int64_t first,
                            int64_t rows) {
  std::vector<double> out;
  const int64_t row = c.heads * c.head_dim;
  for (int64_t b = 0; b < c.batch; ++b) {
    const auto begin = all.begin() + (b * c.seq + first) * row;
    out.insert(out.end(), begin, begin + rows * row);
  }
  return out;
}

// The query rows [first, first + rows) of q as a view (strided like q).
Tensor query_rows(const Tensor& q, int64_t first, int64_t rows) {
  return Tensor(q.storage(), q.dtype(), {q.size(0), rows, q.size(2), q.size(3)},
                {q.stride(0), q.stride(1), q.stride(2), q.stride(3)},
                q.offset() + first * q.stride(1));
}

std::unique_ptr<Backend> make(const std::string& name) {
  if (name == "sim") return std::make_unique<SimulatedDeviceBackend>();
  return std::make_unique<CpuBackend>();
}

class CachedAttention : public ::testing::TestWithParam<const char*> {};

// f64: the cached and the tiled kernels sum in different orders; 1e-12 is ~1e4 ulps of the
// O(1) outputs, far below any indexing or masking error (which moves outputs by O(0.1)).
// f32: the same orders at 2^-24: 2e-5 relative. bf16 storage: one bf16 rounding unit (2^-8)
// of the output plus the f32 difference.
Tolerance tolerance_for(DType dtype) {
  if (dtype == DType::kF64) return {1e-12, 1e-12};
  return storage_tolerance(dtype, 2e-5, 2e-5);
}

TEST_P(CachedAttention, LastQueriesOverAFullCacheMatchCausalAttentionRows) {
  auto be = make(GetParam());
  const Case cases[] = {
      {2, 9, 4, 2, 16, 0},  // GQA
      {1, 13, 3, 1, 8, 0},  // MQA, odd sizes
      {2, 11, 2, 2, 12, 4}, // sliding window
      {1, 7, 2, 1, 5, 1},   // window of one: the diagonal alone
  };
  for (const Case& c : cases) {
    for (DType dtype : {DType::kF64, DType::kF32, DType::kBF16}) {
      const std::string what = describe(c) + " " + dtype_name(dtype);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
      const Fused in = fused_inputs(*be, c, dtype, 7);
      Tensor full = be->empty({c.batch, c.seq, c.heads, c.head_dim}, dtype, MemoryCategory::kOther);
      Tensor lse = be->empty({c.batch, c.heads, c.seq}, stats_dtype(dtype), MemoryCategory::kOther);
      be->attention_forward(full, lse, in.q, in.k, in.v, scale, c.window);
      const std::vector<double> expected_all = download(*be, full);

      const int64_t capacity = c.seq + 3;  // room past the keys: never read
      Tensor k_cache = be->empty({c.batch, capacity, c.kv_heads, c.head_dim}, dtype,
                                 MemoryCategory::kOther);
      Tensor v_cache = be->empty(k_cache.shape(), dtype, MemoryCategory::kOther);
      be->fill(k_cache, std::nan(""));  // positions never written must never be read
      be->fill(v_cache, std::nan(""));
      be->kv_cache_write(k_cache, in.k, 0);
      be->kv_cache_write(v_cache, in.v, 0);
      for (int64_t queries : {int64_t{1}, int64_t{3}, c.seq}) {
        Tensor out = be->empty({c.batch, queries, c.heads, c.head_dim}, dtype,
                               MemoryCategory::kOther);
        be->fill(out, std::nan(""));
        be->attention_forward_cached(out, query_rows(in.q, c.seq - queries, queries), k_cache,
                                     v_cache, c.seq, scale, c.window);
        expect_close(rows_of(expected_all, c, c.seq - queries, queries), download(*be, out),
                     tolerance_for(dtype), what + " Tq=" + std::to_string(queries));
      }
    }
  }
}

TEST_P(CachedAttention, OnePositionAtATimeGivesEveryRow) {
  auto be = make(GetParam());
  const Case c{2, 10, 4, 2, 8, 3};
  const DType dtype = DType::kF64;
  const double scale = 0.3;
  const Fused in = fused_inputs(*be, c, dtype, 11);
  Tensor full = be->empty({c.batch, c.seq, c.heads, c.head_dim}, dtype, MemoryCategory::kOther);
  Tensor lse = be->empty({c.batch, c.heads, c.seq}, dtype, MemoryCategory::kOther);
  be->attention_forward(full, lse, in.q, in.k, in.v, scale, c.window);
  const std::vector<double> expected_all = download(*be, full);
  Tensor k_cache = be->zeros({c.batch, c.seq, c.kv_heads, c.head_dim}, dtype, MemoryCategory::kOther);
  Tensor v_cache = be->zeros(k_cache.shape(), dtype, MemoryCategory::kOther);
  for (int64_t t = 0; t < c.seq; ++t) {
    be->kv_cache_write(k_cache, query_rows(in.k, t, 1), t);
    be->kv_cache_write(v_cache, query_rows(in.v, t, 1), t);
    Tensor out = be->empty({c.batch, 1, c.heads, c.head_dim}, dtype, MemoryCategory::kOther);
    be->attention_forward_cached(out, query_rows(in.q, t, 1), k_cache, v_cache, t + 1, scale,
                                 c.window);
    expect_close(rows_of(expected_all, c, t, 1), download(*be, out), tolerance_for(dtype),
                 "position " + std::to_string(t));
  }
}

TEST_P(CachedAttention, CacheWriteCopiesTheBitsOfAStridedView) {
  auto be = make(GetParam());
  const Case c{2, 3, 2, 2, 4, 0};
  const Fused in = fused_inputs(*be, c, DType::kBF16, 5);
  Tensor cache = be->zeros({c.batch, 6, c.kv_heads, c.head_dim}, DType::kBF16,
                           MemoryCategory::kOther);
  be->kv_cache_write(cache, in.v, 2);
  const std::vector<double> qkv = download(*be, in.qkv);
  const std::vector<double> got = download(*be, cache);
  const int64_t width = (c.heads + 2 * c.kv_heads) * c.head_dim;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t p = 0; p < 6; ++p) {
      for (int64_t e = 0; e < c.kv_heads * c.head_dim; ++e) {
        const double cached = got[static_cast<size_t>((b * 6 + p) * c.kv_heads * c.head_dim + e)];
        const bool written = p >= 2 && p < 2 + c.seq;
        const double expected =
            written ? qkv[static_cast<size_t>((b * c.seq + p - 2) * width +
                                              (c.heads + c.kv_heads) * c.head_dim + e)]
                    : 0.0;
        ASSERT_EQ(cached, expected) << "b " << b << " position " << p << " element " << e;
      }
    }
  }
}

TEST_P(CachedAttention, BadCallsNameTheProblem) {
  auto be = make(GetParam());
  const Case c{1, 4, 2, 1, 4, 0};
  const Fused in = fused_inputs(*be, c, DType::kF32, 3);
  Tensor cache = be->zeros({1, 5, 1, 4}, DType::kF32, MemoryCategory::kOther);
  Tensor values = be->zeros({1, 5, 1, 4}, DType::kF32, MemoryCategory::kOther);
  auto throws = [](const std::function<void()>& call, const std::string& phrase) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one saying " << phrase;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  throws([&] { be->kv_cache_write(cache, in.k, 2); }, "do not fit a cache of 5 positions");
  throws([&] { be->kv_cache_write(cache, in.k, -1); }, "do not fit");
  Tensor wide = be->zeros({1, 5, 2, 4}, DType::kF32, MemoryCategory::kOther);
  throws([&] { be->kv_cache_write(wide, in.k, 0); }, "does not fit the cache");
  Tensor half = be->zeros({1, 5, 1, 4}, DType::kBF16, MemoryCategory::kOther);
  throws([&] { be->kv_cache_write(half, in.k, 0); }, "but the cache is bf16");
  Tensor out = be->zeros({1, 4, 2, 4}, DType::kF32, MemoryCategory::kOther);
  throws([&] { be->attention_forward_cached(out, in.q, cache, values, 3, 1.0, 0); },
         "key_count 3 must lie between the 4 queries and the cache's 5 positions");
  throws([&] { be->attention_forward_cached(out, in.q, cache, values, 6, 1.0, 0); },
         "key_count 6");
  throws([&] { be->attention_forward_cached(out, in.q, cache, values, 4, 1.0, -2); },
         "window -2 is negative");
  Tensor strided_cache = wide.narrow(2, 0, 1);
  throws([&] { be->attention_forward_cached(out, in.q, strided_cache, values, 4, 1.0, 0); },
         "must be a contiguous [B, S, KVH, D] cache");
}

INSTANTIATE_TEST_SUITE_P(Backends, CachedAttention, ::testing::Values("cpu", "sim"));

}  // namespace test_cached_attention
}  // namespace zero::backend
