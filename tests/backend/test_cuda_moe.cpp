// The mixture-of-experts ops on the CUDA backend (cuda_moe.cu) against the CPU oracle, outputs
// poisoned first, for f32, bf16 and f16 logits and rows (the CPU, f32 only, runs on the same
// values widened to f32; weights are f32 on both). Proven: moe_route chooses the same experts
// (random logits, then rows full of ties and NaNs) with weights within f32 rounding; the
// dispatch order of the stable radix sort equals the CPU's counting sort exactly, over several
// blocks and with experts that get no token; moe_combine (weighted and unit), its backward and
// moe_route_backward (normalized and plain softmax) agree within the tolerances stated at each
// check; the load-balancing loss's probability sums and gradient likewise; and an expert id
// outside [0, E) is an Error at the next synchronising read. Token,
// expert and column counts are no multiple of a block (1, 37, 300, 3000 tokens; 8 and 60
// experts; k 1, 2, 6; 5, 64, 257 columns).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

class CudaMoe : public CudaTest {};

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// `values` as `dtype` stores them, widened back to f32: what the CPU oracle computes on.
std::vector<float> stored(std::vector<float> values, DType dtype) {
  for (float& v : values) {
    if (dtype == DType::kBF16) v = round_to_bf16(v);
    if (dtype == DType::kF16) v = round_to_f16(v);
  }
  return values;
}

std::vector<float> as_floats(const std::vector<double>& values) {
  return {values.begin(), values.end()};
}

// An i32 output whose every element is a value no op writes (an element left unwritten shows).
Tensor poisoned_i32(Backend& be, const Shape& shape) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  return upload_i32(be, std::vector<int32_t>(static_cast<size_t>(numel), -12345), shape);
}

Tensor poisoned(Backend& be, const Shape& shape, DType dtype) {
  Tensor t = be.empty(shape, dtype, MemoryCategory::kOther);
  be.fill(t, std::nan(""));
  return t;
}

// expect_close with an extra allowance per element: |gpu - cpu| <= atol + rtol * |cpu| +
// extra[i] (a bound relative to the scale of the terms an element cancels from, where its own
// magnitude says nothing).
void expect_close_plus(const std::vector<double>& cpu, const std::vector<double>& gpu,
                       Tolerance tol, const std::vector<double>& extra, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  ASSERT_EQ(cpu.size(), extra.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double limit = tol.atol + tol.rtol * std::fabs(cpu[i]) + extra[i];
    if (!(std::fabs(gpu[i] - cpu[i]) <= limit) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << " gpu " << gpu[i] << " (limit "
                    << limit << ")";
    }
  }
}

// f32's unit roundoff.
const double kF32Unit = std::ldexp(1.0, -24);

struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

// moe_route on the CPU of f32 logits [n, e].
Routing cpu_route(Backend& cpu, const std::vector<float>& logits, int64_t n, int64_t e,
                  int64_t k, bool normalize) {
  Tensor ids = poisoned_i32(cpu, {n, k});
  Tensor w = poisoned(cpu, {n, k}, DType::kF32);
  cpu.moe_route(ids, w, upload(cpu, logits, {n, e}, DType::kF32), normalize);
  return {download_i32(cpu, ids), as_floats(download(cpu, w))};
}

struct Dispatch {
  std::vector<int32_t> counts, source_rows, slot_of;
};

Dispatch dispatch_on(Backend& be, const std::vector<int32_t>& ids, int64_t n, int64_t e,
                     int64_t k) {
  Tensor counts = poisoned_i32(be, {e});
  Tensor source_rows = poisoned_i32(be, {n * k});
  Tensor slot_of = poisoned_i32(be, {n, k});
  be.moe_dispatch(counts, source_rows, slot_of, upload_i32(be, ids, {n, k}), e);
  return {download_i32(be, counts), download_i32(be, source_rows), download_i32(be, slot_of)};
}

// A realistic slot_of [n, k] and weights [n, k] (normalized): random logits routed and
// dispatched on the CPU.
struct Routed {
  std::vector<int32_t> slot_of;
  std::vector<float> weights;
};
Routed routed_on_cpu(Backend& cpu, int64_t n, int64_t e, int64_t k, uint32_t seed) {
  const Routing r = cpu_route(cpu, random_values(n * e, seed, -4.0f, 4.0f), n, e, k, true);
  return {dispatch_on(cpu, r.ids, n, e, k).slot_of, r.weights};
}

std::string describe(int64_t n, int64_t e, int64_t k, DType dtype) {
  return "N=" + std::to_string(n) + " E=" + std::to_string(e) + " k=" + std::to_string(k) + " " +
         dtype_name(dtype);
}

struct RouteCase {
  int64_t tokens, experts, k;
};
constexpr RouteCase kRouteCases[] = {{1, 8, 1},  {37, 8, 2},  {300, 8, 6},
                                     {1, 60, 2}, {37, 60, 1}, {300, 60, 6}};

// One routing of `logits` (values as `dtype` stores them) on both backends, compared.
void expect_same_routing(CpuBackend& cpu, CudaBackend& gpu, const std::vector<float>& logits,
                         int64_t n, int64_t e, int64_t k, DType dtype, bool normalize,
                         const std::string& what) {
  const Routing want = cpu_route(cpu, stored(logits, dtype), n, e, k, normalize);
  Tensor ids = poisoned_i32(gpu, {n, k});
  Tensor w = poisoned(gpu, {n, k}, DType::kF32);
  gpu.moe_route(ids, w, upload(gpu, logits, {n, e}, dtype), normalize);
  EXPECT_EQ(want.ids, download_i32(gpu, ids)) << what;
  // The same f32 operations in the same order, except that the GPU's expf may differ from
  // std::exp by an ulp or two (CUDA's documented bound): 1e-5 relative.
  const std::vector<double> want_weights(want.weights.begin(), want.weights.end());
  expect_close(want_weights, download(gpu, w), {1e-5, 0.0}, what);
}

TEST_F(CudaMoe, RouteMatchesTheCpu) {
  for (const RouteCase& c : kRouteCases) {
    // Random f32 logits: no ties. Rounded to 16 bits some may tie; both sides then order them
    // by the same rule (the lower id first), so the ids must still be equal.
    const std::vector<float> logits = random_values(c.tokens * c.experts, 11, -4.0f, 4.0f);
    for (DType dtype : kDtypes) {
      for (bool normalize : {true, false}) {
        expect_same_routing(cpu(), gpu(), logits, c.tokens, c.experts, c.k, dtype, normalize,
                            describe(c.tokens, c.experts, c.k, dtype) +
                                (normalize ? " normalized" : " softmax"));
      }
    }
  }
}

TEST_F(CudaMoe, RouteBreaksTiesAndSkipsNansAsTheCpu) {
  const int64_t n = 37, e = 60, k = 6;
  // Multiples of 0.5 in [-2, 2] (exact in every dtype): nine values over 60 experts, so every
  // row's top 6 is decided by ties.
  std::vector<float> logits = random_values(n * e, 12, -2.0f, 2.0f);
  for (float& x : logits) x = std::round(2.0f * x) / 2.0f;
  // Row 1: all equal; row 2: NaN at every even id; row 3: all NaN.
  for (int64_t i = 0; i < e; ++i) {
    logits[static_cast<size_t>(e + i)] = 0.5f;
    if (i % 2 == 0) logits[static_cast<size_t>(2 * e + i)] = std::nanf("");
    logits[static_cast<size_t>(3 * e + i)] = std::nanf("");
  }
  for (DType dtype : kDtypes) {
    for (bool normalize : {true, false}) {
      const std::string what = describe(n, e, k, dtype) + (normalize ? " normalized" : "");
      expect_same_routing(cpu(), gpu(), logits, n, e, k, dtype, normalize, what);
      Tensor ids = poisoned_i32(gpu(), {n, k});
      Tensor w = poisoned(gpu(), {n, k}, DType::kF32);
      gpu().moe_route(ids, w, upload(gpu(), logits, {n, e}, dtype), normalize);
      const std::vector<int32_t> got = download_i32(gpu(), ids);
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(got[static_cast<size_t>(k + j)], j) << what << ": all equal";
        EXPECT_EQ(got[static_cast<size_t>(3 * k + j)], j) << what << ": all NaN";
        EXPECT_EQ(got[static_cast<size_t>(2 * k + j)] % 2, 1) << what << ": NaNs chosen";
      }
    }
  }
}

struct DispatchCase {
  int64_t tokens, experts, k;
};

TEST_F(CudaMoe, DispatchEqualsTheCpusCountingSort) {
  // 6000 and 18000 pairs: many blocks of the key and slot kernels, many radix sort tiles.
  const DispatchCase cases[] = {
      {1, 60, 2}, {37, 8, 1}, {300, 60, 6}, {3000, 8, 2}, {3000, 60, 6}};
  for (const DispatchCase& c : cases) {
    const std::string what = describe(c.tokens, c.experts, c.k, DType::kI32);
    std::vector<float> logits = random_values(c.tokens * c.experts, 13, -4.0f, 4.0f);
    // The last expert is never chosen: an expert that gets no token.
    for (int64_t n = 0; n < c.tokens; ++n) {
      logits[static_cast<size_t>(n * c.experts + c.experts - 1)] = -30.0f;
    }
    const Routing r = cpu_route(cpu(), logits, c.tokens, c.experts, c.k, true);
    const Dispatch want = dispatch_on(cpu(), r.ids, c.tokens, c.experts, c.k);
    ASSERT_EQ(want.counts.back(), 0) << what;
    const Dispatch got = dispatch_on(gpu(), r.ids, c.tokens, c.experts, c.k);
    EXPECT_EQ(want.counts, got.counts) << what;
    EXPECT_EQ(want.source_rows, got.source_rows) << what;
    EXPECT_EQ(want.slot_of, got.slot_of) << what;
  }
}

struct CombineCase {
  int64_t tokens, experts, k, columns;
};
constexpr CombineCase kCombineCases[] = {
    {1, 8, 1, 5}, {37, 8, 2, 64}, {37, 60, 6, 5}, {300, 8, 2, 257}, {300, 60, 6, 257}};

std::string describe(const CombineCase& c, DType dtype) {
  return describe(c.tokens, c.experts, c.k, dtype) + " C=" + std::to_string(c.columns);
}

TEST_F(CudaMoe, CombineMatchesTheCpu) {
  for (const CombineCase& c : kCombineCases) {
    const int64_t n = c.tokens, k = c.k, cols = c.columns;
    const Routed routed = routed_on_cpu(cpu(), n, c.experts, k, 14);
    const std::vector<float> rows = random_values(n * k * cols, 15, -2.0f, 2.0f);
    for (DType dtype : kDtypes) {
      for (bool weighted : {true, false}) {
        const std::string what = describe(c, dtype) + (weighted ? " weighted" : " unit");
        std::vector<double> results[2];
        Backend* backends[2] = {&cpu(), &gpu()};
        for (int i = 0; i < 2; ++i) {
          Backend& be = *backends[i];
          const DType storage = i == 0 ? DType::kF32 : dtype;
          const Tensor w = upload(be, routed.weights, {n, k}, DType::kF32);
          Tensor out = poisoned(be, {n, cols}, storage);
          be.moe_combine(out, upload(be, i == 0 ? stored(rows, dtype) : rows, {n * k, cols},
                                     storage),
                         upload_i32(be, routed.slot_of, {n, k}), weighted ? &w : nullptr);
          results[i] = download(be, out);
        }
        // The same f32 products summed over j in the same order; but the CPU oracle is built
        // with -march=native and may fuse each w * x + acc, where the GPU (no contraction)
        // rounds the product first: a few roundings of terms |w x| <= 2 (weights sum to 1, or
        // are 1 and the product exact), ~1e-7, inside 1e-6 relative + 1e-6 absolute (absolute:
        // a sum that cancels). 16-bit: the one rounding of the stored sum on top.
        expect_close(results[0], results[1], storage_tolerance(dtype, 1e-6, 1e-6), what);
      }
    }
  }
}

TEST_F(CudaMoe, CombineBackwardMatchesTheCpu) {
  for (const CombineCase& c : kCombineCases) {
    const int64_t n = c.tokens, k = c.k, cols = c.columns;
    const Routed routed = routed_on_cpu(cpu(), n, c.experts, k, 16);
    const std::vector<float> rows = random_values(n * k * cols, 17, -2.0f, 2.0f);
    const std::vector<float> dout = random_values(n * cols, 18, -2.0f, 2.0f);
    for (DType dtype : kDtypes) {
      const std::string what = describe(c, dtype);
      std::vector<double> d_rows[2], d_weights[2];
      Backend* backends[2] = {&cpu(), &gpu()};
      for (int i = 0; i < 2; ++i) {
        Backend& be = *backends[i];
        const DType storage = i == 0 ? DType::kF32 : dtype;
        Tensor dr = poisoned(be, {n * k, cols}, storage);
        Tensor dw = poisoned(be, {n, k}, DType::kF32);
        const Tensor g = upload(be, i == 0 ? stored(dout, dtype) : dout, {n, cols}, storage);
        const Tensor x = upload(be, i == 0 ? stored(rows, dtype) : rows, {n * k, cols}, storage);
        const Tensor w = upload(be, routed.weights, {n, k}, DType::kF32);
        be.moe_combine_backward(dr, dw, g, x, upload_i32(be, routed.slot_of, {n, k}), w);
        d_rows[i] = download(be, dr);
        d_weights[i] = download(be, dw);
      }
      // d_rows = w * dout: one f32 product, nothing to fuse (f32: exact; the 1e-6 is slack),
      // 16-bit rounded once.
      expect_close(d_rows[0], d_rows[1], storage_tolerance(dtype, 1e-6, 1e-6), what + " d_rows");
      // d_weights = dot(dout[n], rows[slot]): both sides form the same f32 products, but the
      // GPU sums them in its block's fixed tree (a thread's strided columns, then two 32-lane
      // shuffle trees: depth 1 + 5 + 5 up to 512 columns) and the CPU in column order (depth
      // C - 1). A sum of depth d is off the exact one by at most d * 2^-24 * sum |products|, so
      // the two differ by at most (C + 16) * 2^-24 * sum_c |dout[n, c] * rows[slot, c]|: a
      // bound relative to the row's scale, not to the dot itself, which can cancel to ~0.
      const std::vector<float> g = stored(dout, dtype), r = stored(rows, dtype);
      std::vector<double> bound(static_cast<size_t>(n * k), 0.0);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t j = 0; j < k; ++j) {
          const int64_t slot = routed.slot_of[static_cast<size_t>(t * k + j)];
          double scale = 0.0;
          for (int64_t col = 0; col < cols; ++col) {
            scale += std::fabs(static_cast<double>(g[static_cast<size_t>(t * cols + col)]) *
                               r[static_cast<size_t>(slot * cols + col)]);
          }
          bound[static_cast<size_t>(t * k + j)] = static_cast<double>(cols + 16) * kF32Unit * scale;
        }
      }
      expect_close_plus(d_weights[0], d_weights[1], {0.0, 0.0}, bound, what + " d_weights");
    }
  }
}

// Per dlogits element: (2k + 2) * 2^-24 * c_e * (|d'_e| + sum_j |w_j d_j|), c_e as below, from
// the f32 logits the CPU routed (p_e in f64: its own error is the 1e-5 relative part).
std::vector<double> route_backward_bounds(const std::vector<float>& logits, const Routing& r,
                                          const std::vector<float>& d, int64_t e, int64_t k,
                                          bool normalize) {
  const int64_t n = static_cast<int64_t>(r.ids.size()) / k;
  std::vector<double> bounds(static_cast<size_t>(n * e), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    const float* row = logits.data() + t * e;
    double max = row[0], sum = 0.0, weighted = 0.0;
    for (int64_t i = 1; i < e; ++i) max = std::max(max, static_cast<double>(row[i]));
    for (int64_t i = 0; i < e; ++i) sum += std::exp(row[i] - max);
    std::vector<double> chosen_d(static_cast<size_t>(e), 0.0), coefficient(static_cast<size_t>(e));
    for (int64_t i = 0; i < e; ++i) {
      coefficient[static_cast<size_t>(i)] = normalize ? 0.0 : std::exp(row[i] - max) / sum;
    }
    for (int64_t j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(t * k + j);
      const auto id = static_cast<size_t>(r.ids[at]);
      chosen_d[id] = d[at];
      if (normalize) coefficient[id] = r.weights[at];
      weighted += std::fabs(static_cast<double>(r.weights[at]) * d[at]);
    }
    for (int64_t i = 0; i < e; ++i) {
      const auto at = static_cast<size_t>(i);
      bounds[static_cast<size_t>(t * e + i)] = static_cast<double>(2 * k + 2) * kF32Unit *
                                               coefficient[at] *
                                               (std::fabs(chosen_d[at]) + weighted);
    }
  }
  return bounds;
}

TEST_F(CudaMoe, RouteBackwardMatchesTheCpu) {
  for (const RouteCase& c : kRouteCases) {
    const int64_t n = c.tokens, e = c.experts, k = c.k;
    const std::vector<float> logits = random_values(n * e, 19, -4.0f, 4.0f);
    const std::vector<float> d = random_values(n * k, 20, -1.0f, 1.0f);
    for (DType dtype : kDtypes) {
      for (bool normalize : {true, false}) {
        const std::string what =
            describe(n, e, k, dtype) + (normalize ? " normalized" : " softmax");
        // The routing the forward chose (on the CPU), given to both.
        const Routing r = cpu_route(cpu(), stored(logits, dtype), n, e, k, normalize);
        std::vector<double> results[2];
        Backend* backends[2] = {&cpu(), &gpu()};
        for (int i = 0; i < 2; ++i) {
          Backend& be = *backends[i];
          const DType storage = i == 0 ? DType::kF32 : dtype;
          Tensor dlogits = poisoned(be, {n, e}, storage);
          be.moe_route_backward(
              dlogits, upload(be, d, {n, k}, DType::kF32), upload_i32(be, r.ids, {n, k}),
              upload(be, r.weights, {n, k}, DType::kF32),
              upload(be, i == 0 ? stored(logits, dtype) : logits, {n, e}, storage), normalize);
          results[i] = download(be, dlogits);
        }
        // Both compute dl_e = c_e (d'_e - s) in f32 with s = sum_j w_j d_j, c_e = w_j for a
        // chosen e (0 for the others) when normalized, else c_e = p_e recomputed from the
        // logits. Two differences: (1) the GPU's expf may be an ulp or two off std::exp: 1e-5
        // relative to dl_e; (2) s: the GPU (no contraction) and the CPU (built with
        // -march=native, which may fuse s's multiply-adds) each round s by at most
        // k * 2^-24 * sum_j |w_j d_j|; where d'_e - s cancels, that difference is not relative
        // to dl_e, so allow (2k + 2) * 2^-24 * c_e * (|d'_e| + sum_j |w_j d_j|) on top (the +2:
        // the subtraction's and the product's own roundings). 16-bit: one rounding of the
        // stored result (storage_tolerance).
        expect_close_plus(results[0], results[1], storage_tolerance(dtype, 1e-5, 1e-9),
                          route_backward_bounds(stored(logits, dtype), r, d, e, k, normalize),
                          what);
      }
    }
  }
}

TEST_F(CudaMoe, RouterProbSumsMatchTheCpu) {
  for (const RouteCase& c : kRouteCases) {
    const int64_t n = c.tokens, e = c.experts;
    const std::vector<float> logits = random_values(n * e, 21, -4.0f, 4.0f);
    for (DType dtype : kDtypes) {
      std::vector<double> results[2];
      Backend* backends[2] = {&cpu(), &gpu()};
      for (int i = 0; i < 2; ++i) {
        Backend& be = *backends[i];
        const DType storage = i == 0 ? DType::kF32 : dtype;
        Tensor sums = be.empty({e}, DType::kF64, MemoryCategory::kOther);
        be.fill(sums, 0.5);  // accumulated into
        be.moe_router_prob_sums(
            sums, upload(be, i == 0 ? stored(logits, dtype) : logits, {n, e}, storage), true);
        results[i] = download(be, sums);
      }
      // Each probability within f32 rounding and expf's ulps (1e-5 relative); the sums (f64)
      // add n of them in another order: 1e-5 relative to the sum bounds the total.
      expect_close(results[0], results[1], {1e-5, 1e-12}, describe(n, e, c.k, dtype));
    }
  }
}

TEST_F(CudaMoe, RouterBalanceBackwardMatchesTheCpu) {
  for (const RouteCase& c : kRouteCases) {
    const int64_t n = c.tokens, e = c.experts;
    const std::vector<float> logits = random_values(n * e, 22, -4.0f, 4.0f);
    const std::vector<float> before = random_values(n * e, 23, -1.0f, 1.0f);
    std::vector<double> g(static_cast<size_t>(e));
    for (int64_t i = 0; i < e; ++i) {
      g[static_cast<size_t>(i)] = 0.01 * static_cast<double>(i % 5);
    }
    for (DType dtype : kDtypes) {
      std::vector<double> results[2];
      Backend* backends[2] = {&cpu(), &gpu()};
      for (int i = 0; i < 2; ++i) {
        Backend& be = *backends[i];
        const DType storage = i == 0 ? DType::kF32 : dtype;
        Tensor dlogits = upload(be, i == 0 ? stored(before, dtype) : before, {n, e}, storage);
        Tensor grad = be.empty({e}, DType::kF64, MemoryCategory::kOther);
        be.copy_from_host(grad, g.data());
        be.moe_router_balance_backward(
            dlogits, upload(be, i == 0 ? stored(logits, dtype) : logits, {n, e}, storage), grad,
            0.5);
        results[i] = download(be, dlogits);
      }
      // dlogits (|values| <= 1) plus p (g - mean) (|.| <= 0.02): f32 rounding and expf's ulps
      // on the small term, below 1e-7 absolute; 16-bit: one rounding of the stored sum.
      expect_close(results[0], results[1], storage_tolerance(dtype, 1e-6, 1e-7),
                   describe(n, e, c.k, dtype));
    }
  }
}

TEST_F(CudaMoe, AnExpertIdOutOfRangeIsAnErrorAtTheNextRead) {
  const int64_t n = 4, k = 2, e = 8;
  // Pair 3 (token 1, choice 1) names expert 8 of 8.
  const Tensor ids = upload_i32(gpu(), {0, 3, 5, 8, 1, 2, 7, 6}, {n, k});
  Tensor counts = poisoned_i32(gpu(), {e});
  Tensor source_rows = poisoned_i32(gpu(), {n * k});
  Tensor slot_of = poisoned_i32(gpu(), {n, k});
  gpu().moe_dispatch(counts, source_rows, slot_of, ids, e);  // asynchronous: no error yet
  std::vector<int32_t> host(static_cast<size_t>(n * k));
  try {
    gpu().copy_to_host(host.data(), slot_of);
    ADD_FAILURE() << "no error for expert id 8";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("expert id 8 at pair 3"), std::string::npos) << message;
    EXPECT_NE(message.find("[0, 8)"), std::string::npos) << message;
  }
  gpu().copy_to_host(host.data(), slot_of);  // reported once, then cleared
}

}  // namespace
}  // namespace zero::backend::cuda_test
