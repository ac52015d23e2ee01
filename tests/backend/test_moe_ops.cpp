// The mixture-of-experts ops (Backend::moe_route, moe_dispatch, moe_combine,
// moe_combine_backward, moe_route_backward, moe_router_prob_sums,
// moe_router_balance_backward) on the CPU oracle and the simulated device, against
// references written out here: a sorted softmax for the routing, std::stable_sort for the
// dispatch order, the weighted sum for the combine, the softmax's column sums, and central
// finite differences (f64) for the three backwards. Ties, NaN rows and bad calls too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"

namespace zero::backend {
namespace test_moe_ops {

using namespace backend_test;

std::unique_ptr<Backend> make(const std::string& name) {
  if (name == "sim") return std::make_unique<SimulatedDeviceBackend>();
  return std::make_unique<CpuBackend>();
}

Tensor upload_f64(Backend& be, const std::vector<double>& values, const Shape& shape) {
  Tensor t = be.empty(shape, DType::kF64, MemoryCategory::kOther);
  be.copy_from_host(t, values.data());
  return t;
}

std::vector<double> random_doubles(int64_t n, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  const std::vector<float> f = random_values(n, seed, static_cast<float>(lo),
                                             static_cast<float>(hi));
  return {f.begin(), f.end()};
}

// The routing written out: softmax in double, experts sorted by (logit desc, id asc).
struct Routing {
  std::vector<int32_t> ids;
  std::vector<double> weights;
};
Routing reference_route(const std::vector<double>& logits, int64_t n, int64_t e, int64_t k,
                        bool normalize) {
  Routing r;
  for (int64_t t = 0; t < n; ++t) {
    const double* row = logits.data() + t * e;
    const double max = *std::max_element(row, row + e);
    double sum = 0;
    for (int64_t i = 0; i < e; ++i) sum += std::exp(row[i] - max);
    std::vector<int32_t> order(static_cast<size_t>(e));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    double chosen = 0;
    for (int64_t j = 0; j < k; ++j) chosen += std::exp(row[order[j]] - max) / sum;
    for (int64_t j = 0; j < k; ++j) {
      const double p = std::exp(row[order[j]] - max) / sum;
      r.ids.push_back(order[j]);
      r.weights.push_back(normalize ? p / chosen : p);
    }
  }
  return r;
}

class MoeOps : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeOps, RouteTakesTheLargestLogitsAndTheirSoftmaxWeights) {
  auto be = make(GetParam());
  const int64_t n = 13, e = 8, k = 2;
  std::vector<double> logits = random_doubles(n * e, 1);
  // Row 3: a tie between experts 2 and 6 for first place (the lower id goes first).
  logits[3 * e + 2] = logits[3 * e + 6] = 5.0;
  for (bool normalize : {true, false}) {
    for (DType dtype : {DType::kF64, DType::kF32}) {
      const std::string what = std::string(dtype_name(dtype)) + (normalize ? " normalized" : "");
      const std::vector<float> as_float(logits.begin(), logits.end());
      const Tensor x = dtype == DType::kF64 ? upload_f64(*be, logits, {n, e})
                                            : upload(*be, as_float, {n, e}, dtype);
      Tensor ids = be->empty({n, k}, DType::kI32, MemoryCategory::kOther);
      Tensor w = be->empty({n, k}, dtype, MemoryCategory::kOther);
      be->moe_route(ids, w, x, normalize);
      // The float logits are the double ones rounded: the reference routes those.
      const std::vector<double> rounded(as_float.begin(), as_float.end());
      const Routing ref =
          reference_route(dtype == DType::kF64 ? logits : rounded, n, e, k, normalize);
      EXPECT_EQ(download_i32(*be, ids), ref.ids) << what;
      EXPECT_EQ(download_i32(*be, ids)[3 * k], 2) << what;
      EXPECT_EQ(download_i32(*be, ids)[3 * k + 1], 6) << what;
      // f64: rounding only (1e-14); f32: exp and the sums in f32 (1e-6 relative).
      expect_close(ref.weights, download(*be, w),
                   {dtype == DType::kF64 ? 1e-14 : 1e-6, 1e-15}, what);
    }
  }
}

TEST_P(MoeOps, RouteOfANanRowStillChoosesValidExperts) {
  auto be = make(GetParam());
  std::vector<float> logits = {0.5f, std::nanf(""), 2.0f, std::nanf("")};
  Tensor ids = be->empty({1, 3}, DType::kI32, MemoryCategory::kOther);
  Tensor w = be->empty({1, 3}, DType::kF32, MemoryCategory::kOther);
  be->moe_route(ids, w, upload(*be, logits, {1, 4}, DType::kF32), true);
  EXPECT_EQ(download_i32(*be, ids), (std::vector<int32_t>{2, 0, 1}));
  for (double v : download(*be, w)) EXPECT_TRUE(std::isnan(v));
}

TEST_P(MoeOps, DispatchSortsPairsByExpertThenToken) {
  auto be = make(GetParam());
  const int64_t n = 9, k = 3, e = 5;  // expert 4 gets nothing
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) ids.push_back(static_cast<int32_t>((t * 7 + j * 3) % 4));
  }
  Tensor counts = be->empty({e}, DType::kI32, MemoryCategory::kOther);
  Tensor rows = be->empty({n * k}, DType::kI32, MemoryCategory::kOther);
  Tensor slots = be->empty({n, k}, DType::kI32, MemoryCategory::kOther);
  be->moe_dispatch(counts, rows, slots, upload_i32(*be, ids, {n, k}), e);
  std::vector<int32_t> pairs(static_cast<size_t>(n * k));
  std::iota(pairs.begin(), pairs.end(), 0);
  std::stable_sort(pairs.begin(), pairs.end(),
                   [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
  std::vector<int32_t> want_rows, want_slots(pairs.size()), want_counts(e, 0);
  for (size_t i = 0; i < pairs.size(); ++i) {
    want_rows.push_back(static_cast<int32_t>(pairs[i] / k));
    want_slots[static_cast<size_t>(pairs[i])] = static_cast<int32_t>(i);
    ++want_counts[static_cast<size_t>(ids[static_cast<size_t>(pairs[i])])];
  }
  EXPECT_EQ(download_i32(*be, counts), want_counts);
  EXPECT_EQ(download_i32(*be, rows), want_rows);
  EXPECT_EQ(download_i32(*be, slots), want_slots);
  EXPECT_EQ(want_counts[4], 0);
}

// slot_of for N tokens of k choices: a permutation of the N*k slots.
std::vector<int32_t> shuffled_slots(int64_t n, int64_t k) {
  std::vector<int32_t> slots(static_cast<size_t>(n * k));
  std::iota(slots.begin(), slots.end(), 0);
  for (size_t i = 0; i < slots.size(); ++i) std::swap(slots[i], slots[(i * 11 + 5) % slots.size()]);
  return slots;
}

TEST_P(MoeOps, CombineIsTheWeightedSumOfEachTokensSlots) {
  auto be = make(GetParam());
  const int64_t n = 7, k = 2, c = 5;
  const std::vector<int32_t> slots = shuffled_slots(n, k);
  const std::vector<double> rows = random_doubles(n * k * c, 2);
  const std::vector<double> w = random_doubles(n * k, 3, 0.0, 1.0);
  for (bool weighted : {true, false}) {
    Tensor out = be->empty({n, c}, DType::kF64, MemoryCategory::kOther);
    be->fill(out, std::nan(""));
    const Tensor w_t = upload_f64(*be, w, {n, k});
    be->moe_combine(out, upload_f64(*be, rows, {n * k, c}), upload_i32(*be, slots, {n, k}),
                    weighted ? &w_t : nullptr);
    std::vector<double> want(static_cast<size_t>(n * c), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const double scale = weighted ? w[static_cast<size_t>(t * k + j)] : 1.0;
        for (int64_t i = 0; i < c; ++i) {
          want[static_cast<size_t>(t * c + i)] +=
              scale * rows[static_cast<size_t>(slots[static_cast<size_t>(t * k + j)] * c + i)];
        }
      }
    }
    // f64, the same sums in the same order; 1e-14 allows a fused multiply-add.
    expect_close(want, download(*be, out), {1e-14, 1e-15}, weighted ? "weighted" : "unit");
  }
}

TEST_P(MoeOps, CombineIn16BitsRoundsOnceFromTheF32Sum) {
  auto be = make(GetParam());
  const int64_t n = 6, k = 3, c = 33;
  const std::vector<int32_t> slots = shuffled_slots(n, k);
  const std::vector<float> rows = random_values(n * k * c, 4);
  const std::vector<float> w = random_values(n * k, 5, 0.0f, 1.0f);
  Tensor out32 = be->empty({n, c}, DType::kF32, MemoryCategory::kOther);
  Tensor out16 = be->empty({n, c}, DType::kBF16, MemoryCategory::kOther);
  const Tensor w_t = upload(*be, w, {n, k}, DType::kF32);
  const Tensor slot_t = upload_i32(*be, slots, {n, k});
  // bf16 rows hold rounded values: the f32 reference sums those same values.
  const Tensor rows16 = upload(*be, rows, {n * k, c}, DType::kBF16);
  Tensor rows32 = be->empty({n * k, c}, DType::kF32, MemoryCategory::kOther);
  be->copy(rows32, rows16);
  be->moe_combine(out32, rows32, slot_t, &w_t);
  be->moe_combine(out16, rows16, slot_t, &w_t);
  Tensor want16 = be->empty({n, c}, DType::kBF16, MemoryCategory::kOther);
  be->copy(want16, out32);
  EXPECT_EQ(download_bytes(*be, want16), download_bytes(*be, out16));
}

// Central differences of a scalar f(x) at every element of x (f64: step 1e-6, error ~1e-10).
template <typename F>
std::vector<double> numeric_gradient(std::vector<double> x, F&& f) {
  std::vector<double> g(x.size());
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

TEST_P(MoeOps, CombineBackwardMatchesFiniteDifferences) {
  auto be = make(GetParam());
  const int64_t n = 5, k = 2, c = 4;
  const std::vector<int32_t> slots = shuffled_slots(n, k);
  const Tensor slot_t = upload_i32(*be, slots, {n, k});
  const std::vector<double> rows = random_doubles(n * k * c, 6);
  const std::vector<double> w = random_doubles(n * k, 7, 0.0, 1.0);
  const std::vector<double> g = random_doubles(n * c, 8);  // d(objective)/d(out)
  auto objective = [&](const std::vector<double>& r, const std::vector<double>& wt) {
    Tensor out = be->empty({n, c}, DType::kF64, MemoryCategory::kOther);
    const Tensor w_t = upload_f64(*be, wt, {n, k});
    be->moe_combine(out, upload_f64(*be, r, {n * k, c}), slot_t, &w_t);
    return dot(download(*be, out), g);
  };
  Tensor d_rows = be->empty({n * k, c}, DType::kF64, MemoryCategory::kOther);
  Tensor d_w = be->empty({n, k}, DType::kF64, MemoryCategory::kOther);
  be->fill(d_rows, std::nan(""));
  be->moe_combine_backward(d_rows, d_w, upload_f64(*be, g, {n, c}),
                           upload_f64(*be, rows, {n * k, c}), slot_t,
                           upload_f64(*be, w, {n, k}));
  const auto want_rows =
      numeric_gradient(rows, [&](const std::vector<double>& r) { return objective(r, w); });
  const auto want_w =
      numeric_gradient(w, [&](const std::vector<double>& wt) { return objective(rows, wt); });
  // Central differences in f64 with h = 1e-6 are good to ~1e-10 here; 1e-7 is a wide margin
  // while a wrong term is off by O(1).
  expect_close(want_rows, download(*be, d_rows), {1e-7, 1e-8}, "d_rows");
  expect_close(want_w, download(*be, d_w), {1e-7, 1e-8}, "d_weights");
}

TEST_P(MoeOps, RouteBackwardMatchesFiniteDifferences) {
  auto be = make(GetParam());
  const int64_t n = 4, e = 6, k = 2;
  const std::vector<double> logits = random_doubles(n * e, 9);
  const std::vector<double> d = random_doubles(n * k, 10);  // d(objective)/d(weights)
  for (bool normalize : {true, false}) {
    Tensor ids = be->empty({n, k}, DType::kI32, MemoryCategory::kOther);
    auto objective = [&](const std::vector<double>& l) {
      Tensor w = be->empty({n, k}, DType::kF64, MemoryCategory::kOther);
      be->moe_route(ids, w, upload_f64(*be, l, {n, e}), normalize);
      return dot(download(*be, w), d);
    };
    const std::vector<double> want = numeric_gradient(logits, objective);
    const Tensor x = upload_f64(*be, logits, {n, e});
    Tensor w = be->empty({n, k}, DType::kF64, MemoryCategory::kOther);
    be->moe_route(ids, w, x, normalize);
    Tensor dlogits = be->empty({n, e}, DType::kF64, MemoryCategory::kOther);
    be->fill(dlogits, std::nan(""));
    be->moe_route_backward(dlogits, upload_f64(*be, d, {n, k}), ids, w, x, normalize);
    // Central differences (f64, h = 1e-6, ~1e-10): 1e-7 against O(1) errors of a wrong term.
    expect_close(want, download(*be, dlogits), {1e-7, 1e-8},
                 normalize ? "normalized" : "plain softmax");
  }
}

// softmax(logits) row by row, in double.
std::vector<double> softmax_rows(const std::vector<double>& logits, int64_t n, int64_t e) {
  std::vector<double> p(logits.size());
  for (int64_t t = 0; t < n; ++t) {
    const double* row = logits.data() + t * e;
    const double max = *std::max_element(row, row + e);
    double sum = 0;
    for (int64_t i = 0; i < e; ++i) sum += std::exp(row[i] - max);
    for (int64_t i = 0; i < e; ++i) {
      p[static_cast<size_t>(t * e + i)] = std::exp(row[i] - max) / sum;
    }
  }
  return p;
}

TEST_P(MoeOps, RouterProbSumsAreTheSoftmaxColumnSums) {
  auto be = make(GetParam());
  const int64_t n = 9, e = 7;
  const std::vector<double> logits = random_doubles(n * e, 12);
  const std::vector<double> p = softmax_rows(logits, n, e);
  std::vector<double> want(static_cast<size_t>(e), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < e; ++i) {
      want[static_cast<size_t>(i)] += p[static_cast<size_t>(t * e + i)];
    }
  }
  Tensor sums = be->empty({e}, DType::kF64, MemoryCategory::kOther);
  be->fill(sums, std::nan(""));
  const Tensor x = upload_f64(*be, logits, {n, e});
  be->moe_router_prob_sums(sums, x, false);
  // f64 softmax and sums in the same row order; 1e-14 allows exp's last bit.
  expect_close(want, download(*be, sums), {1e-14, 1e-15}, "sums");
  be->moe_router_prob_sums(sums, x, true);  // accumulates
  for (double& w : want) w *= 2;
  expect_close(want, download(*be, sums), {1e-14, 1e-15}, "accumulated");
}

TEST_P(MoeOps, BalanceBackwardAddsTheGradientOfTheWeightedProbabilities) {
  auto be = make(GetParam());
  const int64_t n = 4, e = 5;
  const double scale = 0.75;
  const std::vector<double> logits = random_doubles(n * e, 13);
  const std::vector<double> g = random_doubles(e, 14);
  const std::vector<double> before = random_doubles(n * e, 15);
  auto objective = [&](const std::vector<double>& l) {
    const std::vector<double> p = softmax_rows(l, n, e);
    double total = 0;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < e; ++i) {
        total += scale * g[static_cast<size_t>(i)] * p[static_cast<size_t>(t * e + i)];
      }
    }
    return total;
  };
  std::vector<double> want = numeric_gradient(logits, objective);
  for (size_t i = 0; i < want.size(); ++i) want[i] += before[i];  // accumulated into
  Tensor dlogits = upload_f64(*be, before, {n, e});
  be->moe_router_balance_backward(dlogits, upload_f64(*be, logits, {n, e}),
                                  upload_f64(*be, g, {e}), scale);
  // As above: central differences, ~1e-10 accurate.
  expect_close(want, download(*be, dlogits), {1e-7, 1e-8}, "dlogits");
}

TEST_P(MoeOps, BadCallsNameTheArgument) {
  auto be = make(GetParam());
  const Tensor logits = be->zeros({4, 3}, DType::kF32, MemoryCategory::kOther);
  Tensor ids = be->empty({4, 4}, DType::kI32, MemoryCategory::kOther);
  Tensor w = be->empty({4, 4}, DType::kF32, MemoryCategory::kOther);
  EXPECT_THROW(be->moe_route(ids, w, logits, true), ShapeError);  // k = 4 > E = 3
  Tensor ids64 = be->empty({4, 2}, DType::kI64, MemoryCategory::kOther);
  Tensor w2 = be->empty({4, 2}, DType::kF32, MemoryCategory::kOther);
  EXPECT_THROW(be->moe_route(ids64, w2, logits, true), ShapeError);
  Tensor w_bf16 = be->empty({4, 2}, DType::kBF16, MemoryCategory::kOther);
  Tensor ids2 = be->empty({4, 2}, DType::kI32, MemoryCategory::kOther);
  EXPECT_THROW(be->moe_route(ids2, w_bf16, logits, true), ShapeError);
  Tensor out = be->empty({4, 5}, DType::kF32, MemoryCategory::kOther);
  const Tensor rows = be->zeros({7, 5}, DType::kF32, MemoryCategory::kOther);  // not N*k = 8
  const Tensor slots = be->zeros({4, 2}, DType::kI32, MemoryCategory::kOther);
  try {
    be->moe_combine(out, rows, slots, nullptr);
    ADD_FAILURE() << "a combine of 7 rows for 8 slots ran";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("N*k = 8"), std::string::npos) << e.what();
  }
  Tensor counts = be->empty({3}, DType::kI32, MemoryCategory::kOther);
  Tensor source = be->empty({8}, DType::kI32, MemoryCategory::kOther);
  Tensor slot_of = be->empty({4, 2}, DType::kI32, MemoryCategory::kOther);
  const Tensor bad_ids = upload_i32(*be, {0, 1, 2, 3, 0, 1, 2, 0}, {4, 2});  // 3 >= E
  EXPECT_THROW(be->moe_dispatch(counts, source, slot_of, bad_ids, 3), ShapeError);
}

INSTANTIATE_TEST_SUITE_P(Backends, MoeOps, ::testing::Values("cpu", "sim"));

}  // namespace test_moe_ops
}  // namespace zero::backend
