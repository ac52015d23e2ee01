// Flash-style causal attention on the CPU: forward against a naive full-softmax reference,
// backward against central finite differences in f64, f32 against f64, strided fused q/k/v
// views, grouped-query heads, sliding windows, tile-boundary lengths and determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "core/error.h"
#include "support/gradcheck.h"

namespace zero::backend::cpu {
namespace {

using testing::converted;
using testing::random_tensor;
using testing::relative_error;

struct Case {
  int64_t batch, seq, heads, kv_heads, dim, window;
};

// q, k, v as strided views into one fused [B, T, (H + 2 KVH) * D] buffer, as the model uses them.
struct Fused {
  Tensor buffer, q, k, v;
};

Tensor head_view(const Tensor& buffer, const Case& c, int64_t column, int64_t heads) {
  const int64_t row = buffer.size(2);
  return Tensor(buffer.storage(), buffer.dtype(), {c.batch, c.seq, heads, c.dim},
                {c.seq * row, row, c.dim, 1}, buffer.offset() + column);
}

Fused fused(const Case& c, const Tensor& buffer) {
  const int64_t q_cols = c.heads * c.dim, kv_cols = c.kv_heads * c.dim;
  return Fused{buffer, head_view(buffer, c, 0, c.heads), head_view(buffer, c, q_cols, c.kv_heads),
               head_view(buffer, c, q_cols + kv_cols, c.kv_heads)};
}

Tensor make_buffer(const Case& c, DType dtype, uint64_t seed) {
  return random_tensor({c.batch, c.seq, (c.heads + 2 * c.kv_heads) * c.dim}, dtype, seed);
}

double at(const Tensor& view, int64_t b, int64_t t, int64_t h, int64_t x) {
  const int64_t i = b * view.stride(0) + t * view.stride(1) + h * view.stride(2) + x;
  return view.dtype() == DType::kF64 ? static_cast<const double*>(view.raw_data())[i]
                                     : static_cast<const float*>(view.raw_data())[i];
}

// Naive attention in long double with an explicit mask: out[B,T,H,D] and lse[B,H,T].
void naive_attention(const Case& c, const Fused& f, double scale, std::vector<long double>& out,
                     std::vector<long double>& lse) {
  out.assign(static_cast<size_t>(c.batch * c.seq * c.heads * c.dim), 0.0L);
  lse.assign(static_cast<size_t>(c.batch * c.heads * c.seq), 0.0L);
  const int64_t group = c.heads / c.kv_heads;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.seq; ++i) {
        std::vector<long double> s(static_cast<size_t>(c.seq), -INFINITY);
        long double m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          if (c.window > 0 && i - j >= c.window) continue;
          long double dot = 0;
          for (int64_t x = 0; x < c.dim; ++x) dot += at(f.q, b, i, h, x) * at(f.k, b, j, h / group, x);
          s[static_cast<size_t>(j)] = dot * scale;
          m = std::max(m, s[static_cast<size_t>(j)]);
        }
        long double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[static_cast<size_t>(j)] - m);
        lse[static_cast<size_t>((b * c.heads + h) * c.seq + i)] = m + std::log(sum);
        for (int64_t j = 0; j <= i; ++j) {
          const long double p = std::exp(s[static_cast<size_t>(j)] - m) / sum;
          for (int64_t x = 0; x < c.dim; ++x) {
            out[static_cast<size_t>(((b * c.seq + i) * c.heads + h) * c.dim + x)] +=
                p * at(f.v, b, j, h / group, x);
          }
        }
      }
    }
  }
}

Tensor run_forward(const Case& c, const Fused& f, double scale, Tensor* lse_out = nullptr) {
  Tensor out = Tensor::zeros_host({c.batch, c.seq, c.heads, c.dim}, f.buffer.dtype());
  Tensor lse = Tensor::zeros_host({c.batch, c.heads, c.seq}, f.buffer.dtype());
  attention_forward(out, lse, f.q, f.k, f.v, scale, c.window);
  if (lse_out != nullptr) *lse_out = lse;
  return out;
}

class Attention : public ::testing::TestWithParam<Case> {};

TEST_P(Attention, ForwardMatchesNaiveSoftmax) {
  const Case c = GetParam();
  Fused f = fused(c, make_buffer(c, DType::kF64, 1));
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
  Tensor lse;
  Tensor out = run_forward(c, f, scale, &lse);
  std::vector<long double> ref_out, ref_lse;
  naive_attention(c, f, scale, ref_out, ref_lse);
  Tensor ref = Tensor::zeros_host(out.shape(), DType::kF64);
  for (int64_t i = 0; i < ref.numel(); ++i) ref.data<double>()[i] = static_cast<double>(ref_out[static_cast<size_t>(i)]);
  Tensor ref_l = Tensor::zeros_host(lse.shape(), DType::kF64);
  for (int64_t i = 0; i < ref_l.numel(); ++i) ref_l.data<double>()[i] = static_cast<double>(ref_lse[static_cast<size_t>(i)]);
  // f64 online softmax vs long double: only rounding differs (~1e-16 per op).
  EXPECT_LE(relative_error(out, ref), 1e-12);
  EXPECT_LE(relative_error(lse, ref_l), 1e-12);
}

TEST_P(Attention, BackwardMatchesFiniteDifferences) {
  const Case c = GetParam();
  Tensor buffer = make_buffer(c, DType::kF64, 2);
  Fused f = fused(c, buffer);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
  const Tensor probe = random_tensor({c.batch, c.seq, c.heads, c.dim}, DType::kF64, 3);
  Tensor lse;
  Tensor out = run_forward(c, f, scale, &lse);
  // Gradient buffers are views into one fused buffer too; poison it to catch stray writes.
  Tensor grads = Tensor::zeros_host(buffer.shape(), DType::kF64);
  for (int64_t i = 0; i < grads.numel(); ++i) grads.data<double>()[i] = 777.0;
  Fused g = fused(c, grads);
  attention_backward(g.q, g.k, g.v, probe, f.q, f.k, f.v, out, lse, scale, c.window);
  Tensor numeric = testing::finite_difference(buffer, [&] {
    return testing::weighted_sum(run_forward(c, f, scale), probe);
  });
  // 1e-6: f64 central differences are accurate to ~1e-9 here (support/gradcheck.h).
  EXPECT_LE(relative_error(grads, numeric), 1e-6);
}

TEST_P(Attention, F32MatchesF64) {
  const Case c = GetParam();
  Tensor b32 = make_buffer(c, DType::kF32, 4);
  Tensor b64 = converted(b32, DType::kF64);
  Fused f32 = fused(c, b32), f64 = fused(c, b64);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
  Tensor lse32, lse64;
  Tensor o32 = run_forward(c, f32, scale, &lse32);
  Tensor o64 = run_forward(c, f64, scale, &lse64);
  const Tensor probe = random_tensor(o64.shape(), DType::kF64, 5);
  Tensor g32 = Tensor::zeros_host(b32.shape(), DType::kF32), g64 = Tensor::zeros_host(b64.shape(), DType::kF64);
  Fused d32 = fused(c, g32), d64 = fused(c, g64);
  attention_backward(d32.q, d32.k, d32.v, converted(probe, DType::kF32), f32.q, f32.k, f32.v, o32, lse32, scale, c.window);
  attention_backward(d64.q, d64.k, d64.v, probe, f64.q, f64.k, f64.v, o64, lse64, scale, c.window);
  // f32: unit roundoff 6e-8; dot products of length D and softmax sums of length <= T grow it to
  // ~1e-6 norm-wise, and the float exp polynomial adds < 1 ulp per term. Bound 1e-5.
  EXPECT_LE(relative_error(converted(o32, DType::kF64), o64), 1e-5);
  EXPECT_LE(relative_error(converted(g32, DType::kF64), g64), 1e-5);
}

TEST_P(Attention, BackwardIsDeterministic) {
  const Case c = GetParam();
  Fused f = fused(c, make_buffer(c, DType::kF32, 6));
  Tensor lse;
  Tensor out = run_forward(c, f, 0.3, &lse);
  const Tensor probe = random_tensor(out.shape(), DType::kF32, 7);
  Tensor a = Tensor::zeros_host(f.buffer.shape(), DType::kF32), b = Tensor::zeros_host(f.buffer.shape(), DType::kF32);
  Fused ga = fused(c, a), gb = fused(c, b);
  attention_backward(ga.q, ga.k, ga.v, probe, f.q, f.k, f.v, out, lse, 0.3, c.window);
  attention_backward(gb.q, gb.k, gb.v, probe, f.q, f.k, f.v, out, lse, 0.3, c.window);
  EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Attention,
    ::testing::Values(Case{2, 7, 2, 2, 4, 0},      // MHA, T below one tile
                      Case{1, 9, 4, 2, 4, 0},      // GQA
                      Case{1, 8, 4, 1, 4, 0},      // MQA
                      Case{1, 9, 2, 1, 4, 3},      // sliding window
                      Case{1, 130, 2, 1, 2, 0},    // crosses the 128-row tile boundary
                      Case{1, 130, 1, 1, 2, 70}),  // window spanning tiles
    [](const auto& param_info) {
      const Case& c = param_info.param;
      return "B" + std::to_string(c.batch) + "_T" + std::to_string(c.seq) + "_H" +
             std::to_string(c.heads) + "_KV" + std::to_string(c.kv_heads) + "_W" + std::to_string(c.window);
    });

TEST(AttentionErrors, BadShapesAreShapeErrors) {
  Tensor q = Tensor::zeros_host({1, 4, 3, 4}, DType::kF32);
  Tensor kv = Tensor::zeros_host({1, 4, 2, 4}, DType::kF32);  // 3 heads over 2 kv heads
  Tensor out = Tensor::zeros_host({1, 4, 3, 4}, DType::kF32);
  Tensor lse = Tensor::zeros_host({1, 3, 4}, DType::kF32);
  EXPECT_THROW(attention_forward(out, lse, q, kv, kv, 1.0, 0), ShapeError);
  Tensor kv1 = Tensor::zeros_host({1, 4, 1, 4}, DType::kF32);
  Tensor bad_lse = Tensor::zeros_host({1, 3, 5}, DType::kF32);
  EXPECT_THROW(attention_forward(out, bad_lse, q, kv1, kv1, 1.0, 0), ShapeError);
  Tensor k64 = Tensor::zeros_host({1, 4, 1, 4}, DType::kF64);
  EXPECT_THROW(attention_forward(out, lse, q, k64, k64, 1.0, 0), ShapeError);
  EXPECT_NO_THROW(attention_forward(out, lse, q, kv1, kv1, 1.0, 0));
}

}  // namespace
}  // namespace zero::backend::cpu
