// The per-head query/key RMSNorm ops (Backend::qk_rmsnorm_forward and qk_rmsnorm_backward,
// Qwen3's q_norm and k_norm over a fused q | k | v projection) on the CPU oracle and the
// simulated device. The forward against a reference written out here in f64 (each query and key
// head row y = x / sqrt(mean(x^2) + eps) * weight, value heads copied bit for bit, rstd
// [N, H + KVH]); the backward against central finite differences (f64) of sum(dy * y) for the
// input and both weight gradients, which accumulate onto nonzero start values. bf16 and f16
// round once from the f32 computation; bad calls throw ShapeError naming the argument. Shapes:
// H = KVH, GQA (H = 4, KVH = 2 and H = 2, KVH = 1), H = KVH = 1; D = 5 (odd), 8 and 64; one
// token and 130 tokens (two of the CPU's 128-token blocks of the weight-gradient sums).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/qk_norm_test_inputs.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"
#include "core/half.h"

namespace zero::backend {
namespace test_qk_norm_ops {

using namespace backend_test;

std::unique_ptr<Backend> make(const std::string& name) {
  if (name == "sim") return std::make_unique<SimulatedDeviceBackend>();
  return std::make_unique<CpuBackend>();
}

using Inputs = qk_norm_test::QkInputs;

struct QkCase : qk_norm_test::QkShape {
  const char* what;
};

const QkCase kCases[] = {
    {{3, 2, 2, 8}, "H = KVH = 2, D = 8"},
    {{6, 4, 2, 5}, "GQA H = 4 KVH = 2, odd D = 5"},
    {{1, 1, 1, 64}, "one token, H = KVH = 1, D = 64"},
    {{2, 4, 2, 64}, "GQA, D = 64"},
    {{130, 2, 1, 5}, "130 tokens: two 128-token blocks, GQA H = 2 KVH = 1"},
};

std::string describe(const QkCase& c, DType dtype, double eps) {
  return std::string(c.what) + " " + dtype_name(dtype) + " eps " + std::to_string(eps);
}

// Both epsilons: Qwen3's 1e-6, and 0.5, where a misplaced eps changes the result by far more
// than rounding does (for x in [-2, 2], mean(x^2) is about 1.3).
constexpr double kEpsilons[] = {1e-6, 0.5};

std::vector<double> widened(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

// `values` as `dtype` stores them, widened back to f32.
std::vector<float> stored(std::vector<float> values, DType dtype) {
  for (float& v : values) {
    if (dtype == DType::kBF16) v = round_to_bf16(v);
    if (dtype == DType::kF16) v = round_to_f16(v);
  }
  return values;
}

Tensor poisoned(Backend& be, const Shape& shape, DType dtype) {
  Tensor t = be.empty(shape, dtype, MemoryCategory::kOther);
  be.fill(t, std::nan(""));
  return t;
}

// The op written out in f64, head row by head row.
struct Forward {
  std::vector<double> y, rstd;
};
Forward reference_forward(const QkCase& c, const std::vector<double>& x,
                          const std::vector<double>& wq, const std::vector<double>& wk,
                          double eps) {
  Forward f{x, std::vector<double>(static_cast<size_t>(c.rows * c.normed()))};
  for (int64_t t = 0; t < c.rows; ++t) {
    for (int64_t head = 0; head < c.normed(); ++head) {  // value heads stay copied
      const size_t at = static_cast<size_t>((t * c.per_row() + head) * c.dim);
      const std::vector<double>& w = head < c.heads ? wq : wk;
      double squares = 0.0;
      for (int64_t i = 0; i < c.dim; ++i) squares += x[at + i] * x[at + i];
      const double s = 1.0 / std::sqrt(squares / static_cast<double>(c.dim) + eps);
      for (int64_t i = 0; i < c.dim; ++i) f.y[at + i] = x[at + i] * s * w[static_cast<size_t>(i)];
      f.rstd[static_cast<size_t>(t * c.normed() + head)] = s;
    }
  }
  return f;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Central differences of a scalar f at every element of v (f64, step 1e-5).
std::vector<double> numeric_gradient(std::vector<double> v,
                                     const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> g(v.size());
  const double h = 1e-5;
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = f(v);
    v[i] = keep - h;
    const double down = f(v);
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// Everything one forward and backward on a backend gives, as doubles.
struct Results {
  std::vector<double> y, rstd, dx, dq, dk;
};

// The forward and backward of `in` stored as `dtype` (the weights as `weight_dtype`, by default
// `dtype`), weight gradients in `grad_dtype` accumulating onto the start values; every output
// poisoned first.
Results run(Backend& be, const QkCase& c, const Inputs& in, DType dtype, DType grad_dtype,
            double eps, std::optional<DType> weight_dtype = std::nullopt) {
  const Shape fused{c.rows, c.columns()};
  const Tensor x = upload(be, in.x, fused, dtype);
  const Tensor wq = upload(be, in.wq, {c.dim}, weight_dtype.value_or(dtype));
  const Tensor wk = upload(be, in.wk, {c.dim}, weight_dtype.value_or(dtype));
  Tensor y = poisoned(be, fused, dtype);
  Tensor rstd = poisoned(be, {c.rows, c.normed()}, stats_dtype(dtype));
  be.qk_rmsnorm_forward(y, rstd, x, wq, wk, c.heads, c.kv_heads, eps);
  Tensor dx = poisoned(be, fused, dtype);
  Tensor dq = upload(be, in.dq_start, {c.dim}, grad_dtype);
  Tensor dk = upload(be, in.dk_start, {c.dim}, grad_dtype);
  be.qk_rmsnorm_backward(dx, dq, dk, upload(be, in.dy, fused, dtype), x, wq, wk, rstd, c.heads,
                         c.kv_heads);
  return {download(be, y), download(be, rstd), download(be, dx), download(be, dq),
          download(be, dk)};
}

// |got - want| <= bound[i] element by element.
void expect_within(const std::vector<double>& want, const std::vector<double>& got,
                   const std::vector<double>& bound, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= bound[i]) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: want " << want[i] << " got " << got[i]
                    << " (limit " << bound[i] << ")";
    }
  }
}

// want and got bit for bit (the first mismatches reported, not the whole vectors).
void expect_identical(const std::vector<double>& want, const std::vector<double>& got,
                      const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(double)) != 0 && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: want " << want[i] << " got " << got[i];
    }
  }
}

// The value heads of a fused [N, (H + 2 KVH) D] buffer, in order.
std::vector<double> value_heads(const QkCase& c, const std::vector<double>& fused) {
  std::vector<double> v;
  for (int64_t t = 0; t < c.rows; ++t) {
    const auto first = fused.begin() + (t * c.per_row() + c.normed()) * c.dim;
    v.insert(v.end(), first, first + c.kv_heads * c.dim);
  }
  return v;
}

double unit_of(DType dtype) { return std::ldexp(1.0, dtype == DType::kF64 ? -53 : -24); }

class QkNormOps : public ::testing::TestWithParam<const char*> {};

TEST_P(QkNormOps, ForwardNormalisesQueryAndKeyHeadsAndCopiesValueHeads) {
  auto be = make(GetParam());
  for (const QkCase& c : kCases) {
    const Inputs in(c, 1);
    for (DType dtype : {DType::kF64, DType::kF32}) {
      for (double eps : kEpsilons) {
        const std::string what = describe(c, dtype, eps);
        const Results got = run(*be, c, in, dtype, dtype, eps);
        const Forward want = reference_forward(c, widened(in.x), widened(in.wq),
                                               widened(in.wk), eps);
        // Each y and rstd is a product and quotient of one sum of D positive squares: its
        // relative error is at most about (D / 2 + 6) units of the dtype (the sum's D - 1
        // roundings halved by the square root, then the mean, eps, sqrt, division and the two
        // products), in any summation order. The reference's own f64 error is below that
        // bound for f32 and within it for f64 (each side (D / 2 + 6) units): (D + 12) units.
        const double rel = static_cast<double>(c.dim + 12) * unit_of(dtype);
        expect_close(want.y, got.y, {rel, 0.0}, what + " y");
        expect_close(want.rstd, got.rstd, {rel, 0.0}, what + " rstd");
        // Value heads: copied, not computed - exactly equal.
        expect_identical(value_heads(c, widened(in.x)), value_heads(c, got.y), what + " y");
      }
    }
  }
}

// |d(sum dy*y)/d input| scales: per element of dx, s (|g w| + s |x| mean_j |g_j w_j x_j s|);
// per channel of a weight gradient, the sum of |g x s| over the heads it collects and the
// number of those terms.
struct GradientScales {
  std::vector<double> dx, dq, dk;
  double dq_terms = 0, dk_terms = 0;
};
GradientScales gradient_scales(const QkCase& c, const std::vector<double>& x,
                               const std::vector<double>& wq, const std::vector<double>& wk,
                               const std::vector<double>& dy, const std::vector<double>& rstd) {
  GradientScales s{std::vector<double>(x.size(), 0.0), std::vector<double>(wq.size(), 0.0),
                   std::vector<double>(wk.size(), 0.0)};
  s.dq_terms = static_cast<double>(c.rows * c.heads);
  s.dk_terms = static_cast<double>(c.rows * c.kv_heads);
  for (int64_t t = 0; t < c.rows; ++t) {
    for (int64_t head = 0; head < c.normed(); ++head) {
      const size_t at = static_cast<size_t>((t * c.per_row() + head) * c.dim);
      const bool query = head < c.heads;
      const std::vector<double>& w = query ? wq : wk;
      std::vector<double>& dw = query ? s.dq : s.dk;
      const double r = rstd[static_cast<size_t>(t * c.normed() + head)];
      double mean = 0.0;
      for (int64_t i = 0; i < c.dim; ++i) {
        const auto k = static_cast<size_t>(i);
        mean += std::fabs(dy[at + k] * w[k] * x[at + k] * r) / static_cast<double>(c.dim);
        dw[k] += std::fabs(dy[at + k] * x[at + k] * r);
      }
      for (int64_t i = 0; i < c.dim; ++i) {
        const auto k = static_cast<size_t>(i);
        s.dx[at + k] = r * (std::fabs(dy[at + k] * w[k]) + r * std::fabs(x[at + k]) * mean);
      }
    }
  }
  return s;
}

TEST_P(QkNormOps, BackwardMatchesFiniteDifferencesAndAccumulatesTheWeightGradients) {
  auto be = make(GetParam());
  for (const QkCase& c : kCases) {
    const Inputs in(c, 2);
    const std::vector<double> x = widened(in.x), wq = widened(in.wq), wk = widened(in.wk);
    const std::vector<double> dy = widened(in.dy);
    for (double eps : kEpsilons) {
      // d(sum dy * y) by central differences of the f64 reference (checked above).
      const std::vector<double> want_dx = numeric_gradient(x, [&](const std::vector<double>& v) {
        return dot(dy, reference_forward(c, v, wq, wk, eps).y);
      });
      std::vector<double> want_dq = numeric_gradient(wq, [&](const std::vector<double>& v) {
        return dot(dy, reference_forward(c, x, v, wk, eps).y);
      });
      std::vector<double> want_dk = numeric_gradient(wk, [&](const std::vector<double>& v) {
        return dot(dy, reference_forward(c, x, wq, v, eps).y);
      });
      for (size_t i = 0; i < want_dq.size(); ++i) {  // accumulated onto the start values
        want_dq[i] += in.dq_start[i];
        want_dk[i] += in.dk_start[i];
      }
      const GradientScales scale =
          gradient_scales(c, x, wq, wk, dy, reference_forward(c, x, wq, wk, eps).rstd);
      for (DType dtype : {DType::kF64, DType::kF32}) {
        const std::string what = describe(c, dtype, eps);
        const Results got = run(*be, c, in, dtype, dtype, eps);
        // Central differences with h = 1e-5 of a loss of at most a few hundred: truncation
        // h^2 f''' / 6 and cancellation 1e-16 |loss| / h, each ~1e-9; 1e-7 absolute plus 1e-7
        // relative is a wide margin while a wrong term is off by O(0.1). f32 adds its own
        // rounding: dx from s and a row sum of D terms, each element off by at most about
        // (3 D + 32) units times its scale s (|g w| + s |x| mean |g w x s|); a weight
        // gradient channel sums T = N H (N KVH) terms of (D / 2 + 8) units each, at most
        // (T + D + 8) units of the sum of their magnitudes (f64: the same, negligible).
        const double u = unit_of(dtype), d = static_cast<double>(c.dim);
        std::vector<double> bx(want_dx.size()), bq(want_dq.size()), bk(want_dk.size());
        for (size_t i = 0; i < bx.size(); ++i) {
          bx[i] = 1e-7 + 1e-7 * std::fabs(want_dx[i]) + (3 * d + 32) * u * scale.dx[i];
        }
        for (size_t i = 0; i < bq.size(); ++i) {
          bq[i] = 1e-7 + 1e-7 * std::fabs(want_dq[i]) +
                  (scale.dq_terms + d + 8) * u * (scale.dq[i] + std::fabs(want_dq[i]));
          bk[i] = 1e-7 + 1e-7 * std::fabs(want_dk[i]) +
                  (scale.dk_terms + d + 8) * u * (scale.dk[i] + std::fabs(want_dk[i]));
        }
        expect_within(want_dx, got.dx, bx, what + " d_qkv_in");
        expect_within(want_dq, got.dq, bq, what + " dq_weight");
        expect_within(want_dk, got.dk, bk, what + " dk_weight");
        // Value heads of d_qkv_in: d_qkv_out's, copied exactly.
        expect_identical(value_heads(c, dy), value_heads(c, got.dx), what + " d_qkv_in");
      }
    }
  }
}

// 16-bit inputs: the f32 computation on the stored values, rounded once - so exactly the f32
// op's results rounded to the dtype. Weight gradients in the dtype (the start values stored in
// it) or in f32.
TEST_P(QkNormOps, SixteenBitRoundsTheF32ResultOnce) {
  auto be = make(GetParam());
  for (const QkCase& c : kCases) {
    const Inputs in(c, 3);
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      for (DType grad_dtype : {dtype, DType::kF32}) {
        const double eps = 1e-6;
        const std::string what = describe(c, dtype, eps) + " gradients in " +
                                 dtype_name(grad_dtype);
        Inputs wide = in;  // the values as the dtype stores them
        wide.x = stored(in.x, dtype);
        wide.wq = stored(in.wq, dtype);
        wide.wk = stored(in.wk, dtype);
        wide.dy = stored(in.dy, dtype);
        wide.dq_start = stored(in.dq_start, grad_dtype);
        wide.dk_start = stored(in.dk_start, grad_dtype);
        const Results f32 = run(*be, c, wide, DType::kF32, DType::kF32, eps);
        const Results got = run(*be, c, in, dtype, grad_dtype, eps);
        auto rounded = [](const std::vector<double>& v, DType to) {
          std::vector<double> out;
          for (double x : stored(std::vector<float>(v.begin(), v.end()), to)) out.push_back(x);
          return out;
        };
        expect_identical(rounded(f32.y, dtype), got.y, what + " y");
        expect_identical(f32.rstd, got.rstd, what + " rstd (f32 for 16-bit inputs)");
        expect_identical(rounded(f32.dx, dtype), got.dx, what + " d_qkv_in");
        expect_identical(rounded(f32.dq, grad_dtype), got.dq, what + " dq_weight");
        expect_identical(rounded(f32.dk, grad_dtype), got.dk, what + " dk_weight");
      }
    }
  }
}

// The engine's f32 parameters under 16-bit activations: the CPU backends take f32 weights with
// bf16 inputs (as their other norms do) and give the f32 computation on the rounded inputs and
// the unrounded weights, each output rounded once (bit for bit, as above).
TEST_P(QkNormOps, SixteenBitInputsTakeF32Weights) {
  auto be = make(GetParam());
  for (const QkCase& c : kCases) {
    const Inputs in(c, 4);
    const double eps = 1e-6;
    const std::string what = describe(c, DType::kBF16, eps) + " with f32 weights";
    Inputs wide = in;
    wide.x = stored(in.x, DType::kBF16);
    wide.dy = stored(in.dy, DType::kBF16);
    const Results f32 = run(*be, c, wide, DType::kF32, DType::kF32, eps);
    const Results got = run(*be, c, in, DType::kBF16, DType::kF32, eps, DType::kF32);
    std::vector<double> y, dx;
    for (double v : stored(std::vector<float>(f32.y.begin(), f32.y.end()), DType::kBF16)) {
      y.push_back(v);
    }
    for (double v : stored(std::vector<float>(f32.dx.begin(), f32.dx.end()), DType::kBF16)) {
      dx.push_back(v);
    }
    expect_identical(y, got.y, what + " y");
    expect_identical(f32.rstd, got.rstd, what + " rstd");
    expect_identical(dx, got.dx, what + " d_qkv_in");
    expect_identical(f32.dq, got.dq, what + " dq_weight");
    expect_identical(f32.dk, got.dk, what + " dk_weight");
  }
}

using qk_norm_test::expect_shape_error;

TEST_P(QkNormOps, BadCallsNameTheArgument) {
  auto be = make(GetParam());
  const int64_t n = 3, h = 2, kvh = 1, d = 4, cols = (h + 2 * kvh) * d;
  const DType f32 = DType::kF32;
  auto make_t = [&](const Shape& shape, DType dtype) {
    return be->zeros(shape, dtype, MemoryCategory::kOther);
  };
  Tensor x = make_t({n, cols}, f32), y = make_t({n, cols}, f32);
  Tensor wq = make_t({d}, f32), wk = make_t({d}, f32);
  Tensor rstd = make_t({n, h + kvh}, f32);
  Tensor dy = make_t({n, cols}, f32), dx = make_t({n, cols}, f32);
  Tensor dq = make_t({d}, f32), dk = make_t({d}, f32);
  // A call with these arguments, run later (by expect_shape_error).
  auto forward = [&be](Tensor& out, Tensor& r, const Tensor& in, const Tensor& q,
                       const Tensor& k, int64_t heads, int64_t kv_heads) {
    return std::function<void()>([&be, o = &out, rs = &r, i = &in, pq = &q, pk = &k, heads,
                                  kv_heads] {
      be->qk_rmsnorm_forward(*o, *rs, *i, *pq, *pk, heads, kv_heads, 1e-6);
    });
  };
  auto backward = [&](Tensor& g_in, Tensor& gq, Tensor& gk, const Tensor& g_out,
                      const Tensor& r) {
    return std::function<void()>([&, gi = &g_in, pq = &gq, pk = &gk, go = &g_out, rs = &r] {
      be->qk_rmsnorm_backward(*gi, *pq, *pk, *go, x, wq, wk, *rs, h, kvh);
    });
  };
  // The well-formed calls run.
  forward(y, rstd, x, wq, wk, h, kvh)();
  backward(dx, dq, dk, dy, rstd)();

  Tensor x_odd = make_t({n, cols + 1}, f32), y_odd = make_t({n, cols + 1}, f32);
  expect_shape_error(forward(y_odd, rstd, x_odd, wq, wk, h, kvh), {"qkv_in", "columns"},
                     "a column count that is no multiple of H + 2 KVH");
  expect_shape_error(forward(y, rstd, x, wq, wk, 3, kvh), {"qkv_in"},
                     "H + 2 KVH heads that do not fit the columns");
  expect_shape_error(forward(y, rstd, x, wq, wk, 0, kvh), {"heads", "at least 1"}, "heads 0");
  expect_shape_error(forward(y, rstd, x, wq, wk, h, 0), {"kv_heads", "at least 1"},
                     "kv_heads 0");
  expect_shape_error(forward(x, rstd, x, wq, wk, h, kvh), {"qkv_out", "qkv_in", "storage"},
                     "qkv_out over qkv_in");
  Tensor pair = make_t({2 * n, cols}, f32);
  Tensor pair_in = pair.view(0, {n, cols}), pair_out = pair.view(n * cols, {n, cols});
  expect_shape_error(forward(pair_out, rstd, pair_in, wq, wk, h, kvh), {"qkv_out", "storage"},
                     "qkv_out in another part of qkv_in's storage");
  Tensor y_bf16 = make_t({n, cols}, DType::kBF16);
  expect_shape_error(forward(y_bf16, rstd, x, wq, wk, h, kvh), {"qkv_out"}, "qkv_out's dtype");
  Tensor w_long = make_t({d + 1}, f32), w_f64 = make_t({d}, DType::kF64);
  expect_shape_error(forward(y, rstd, x, w_long, wk, h, kvh), {"q_weight", "head_dim"},
                     "q_weight of D + 1");
  expect_shape_error(forward(y, rstd, x, wq, w_long, h, kvh), {"k_weight", "head_dim"},
                     "k_weight of D + 1");
  expect_shape_error(forward(y, rstd, x, w_f64, wk, h, kvh), {"q_weight", "f32"},
                     "q_weight in f64");
  expect_shape_error(forward(y, rstd, x, wq, w_f64, h, kvh), {"k_weight", "f32"},
                     "k_weight in f64");
  Tensor rstd_all = make_t({n, h + 2 * kvh}, f32), rstd_f64 = make_t({n, h + kvh}, DType::kF64);
  expect_shape_error(forward(y, rstd_all, x, wq, wk, h, kvh), {"rstd"},
                     "rstd with a column per value head too");
  expect_shape_error(forward(y, rstd_f64, x, wq, wk, h, kvh), {"rstd", "f32"}, "rstd in f64");
  // 16-bit inputs: rstd is f32, and the message names the caller's dtypes (checked before the
  // CPU's f32 twins).
  Tensor x16 = make_t({n, cols}, DType::kBF16), w16 = make_t({d}, DType::kBF16);
  Tensor rstd16 = make_t({n, h + kvh}, DType::kBF16);
  expect_shape_error(forward(y_bf16, rstd16, x16, w16, w16, h, kvh), {"rstd", "f32", "bf16"},
                     "rstd in bf16");

  expect_shape_error(backward(dy, dq, dk, dy, rstd), {"d_qkv_in", "d_qkv_out", "storage"},
                     "d_qkv_in over d_qkv_out");
  expect_shape_error([&] { be->qk_rmsnorm_backward(x, dq, dk, dy, x, wq, wk, rstd, h, kvh); },
                     {"d_qkv_in", "qkv_in", "storage"}, "d_qkv_in over qkv_in");
  expect_shape_error(backward(dx, dq, dk, dy, rstd_all), {"rstd"}, "backward rstd's shape");
  expect_shape_error(backward(dx, dq, dk, dy, rstd_f64), {"rstd"}, "backward rstd's dtype");
  Tensor dq_bf16 = make_t({d}, DType::kBF16), dk_long = make_t({d + 1}, f32);
  expect_shape_error(backward(dx, dq_bf16, dk, dy, rstd), {"dq_weight"},
                     "a bf16 gradient of f32 weights");
  expect_shape_error(backward(dx, dq, dk_long, dy, rstd), {"dk_weight"}, "dk_weight of D + 1");
  Tensor both = make_t({2 * d}, f32);
  Tensor dq_in_both = both.view(0, {d}), dk_overlapping = both.view(d - 1, {d});
  expect_shape_error(backward(dx, dq_in_both, dk_overlapping, dy, rstd), {"overlap"},
                     "dq_weight and dk_weight overlapping");
  Tensor dy_odd = make_t({n, cols + 1}, f32);
  expect_shape_error(backward(dx, dq, dk, dy_odd, rstd), {"d_qkv_out"}, "d_qkv_out's shape");
}

INSTANTIATE_TEST_SUITE_P(Backends, QkNormOps, ::testing::Values("cpu", "sim"));

}  // namespace test_qk_norm_ops
}  // namespace zero::backend
