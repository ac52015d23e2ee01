// Tests for the CPU flash attention kernels: forward and logsumexp against a naive full-softmax
// reference, backward against central finite differences (MHA, GQA, MQA, ragged tiles, sliding
// windows, strided views into fused qkv buffers) and against a naive backward on multi-tile
// shapes, f32 against f64, bitwise determinism across thread counts, and shape validation.
#include <gtest/gtest.h>
#include <omp.h>

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
using testing::finite_difference;
using testing::random_tensor;
using testing::relative_error;
using testing::value_at;
using testing::weighted_sum;

// Element [b, t, h, x] of a (possibly strided) 4-D f32/f64 host tensor.
double at4(const Tensor& t, int64_t b, int64_t i, int64_t h, int64_t x) {
  const int64_t off = b * t.stride(0) + i * t.stride(1) + h * t.stride(2) + x * t.stride(3);
  return t.dtype() == DType::kF64 ? static_cast<const double*>(t.raw_data())[off]
                                  : static_cast<const float*>(t.raw_data())[off];
}

// A contiguous f64 copy of a (possibly strided) 4-D view.
Tensor contiguous_f64(const Tensor& t) {
  Tensor c = Tensor::zeros_host(t.shape(), DType::kF64);
  double* dst = c.data<double>();
  for (int64_t b = 0; b < t.size(0); ++b)
    for (int64_t i = 0; i < t.size(1); ++i)
      for (int64_t h = 0; h < t.size(2); ++h)
        for (int64_t x = 0; x < t.size(3); ++x) *dst++ = at4(t, b, i, h, x);
  return c;
}

bool visible(int64_t i, int64_t j, int64_t window) {
  return j <= i && (window == 0 || j > i - window);
}

// Attention with an explicit mask and a full softmax per row, in f64.
struct Reference {
  Tensor out, lse;  // [B, T, H, D], [B, H, T]
};

// Softmax probabilities of query row i of head h (zeros where masked).
std::vector<double> reference_probs(const Tensor& q, const Tensor& k, double scale, int64_t window,
                                    int64_t b, int64_t h, int64_t i, double* lse) {
  const int64_t T = q.size(1), D = q.size(3), g = h / (q.size(2) / k.size(2));
  std::vector<double> s(static_cast<size_t>(T), -std::numeric_limits<double>::infinity());
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < T; ++j) {
    if (!visible(i, j, window)) continue;
    double dot = 0.0;
    for (int64_t x = 0; x < D; ++x) dot += at4(q, b, i, h, x) * at4(k, b, j, g, x);
    s[j] = scale * dot;
    m = std::max(m, s[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < T; ++j) sum += visible(i, j, window) ? std::exp(s[j] - m) : 0.0;
  std::vector<double> p(static_cast<size_t>(T), 0.0);
  for (int64_t j = 0; j < T; ++j) p[j] = visible(i, j, window) ? std::exp(s[j] - m) / sum : 0.0;
  if (lse != nullptr) *lse = m + std::log(sum);
  return p;
}

Reference reference_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                            int64_t window) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
  const int64_t group = H / k.size(2);
  Reference ref{Tensor::zeros_host(q.shape(), DType::kF64),
                Tensor::zeros_host({B, H, T}, DType::kF64)};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < T; ++i) {
        double* lse = ref.lse.data<double>() + (b * H + h) * T + i;
        const std::vector<double> p = reference_probs(q, k, scale, window, b, h, i, lse);
        double* o = ref.out.data<double>() + ((b * T + i) * H + h) * D;
        for (int64_t j = 0; j < T; ++j) {
          for (int64_t x = 0; x < D; ++x) o[x] += p[j] * at4(v, b, j, h / group, x);
        }
      }
    }
  }
  return ref;
}

struct Grads {
  Tensor dq, dk, dv;
};

// The textbook backward with full probability rows: dV = P^T dO, dS = P * (dO V^T - rowsum),
// dQ = scale dS K, dK = scale dS^T Q.
Grads reference_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                         double scale, int64_t window) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
  const int64_t group = H / k.size(2);
  Grads g{Tensor::zeros_host(q.shape(), DType::kF64), Tensor::zeros_host(k.shape(), DType::kF64),
          Tensor::zeros_host(v.shape(), DType::kF64)};
  const int64_t KVH = k.size(2);
  auto idx = [&](int64_t b, int64_t i, int64_t h, int64_t heads) {
    return ((b * T + i) * heads + h) * D;
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / group;
      for (int64_t i = 0; i < T; ++i) {
        const std::vector<double> p = reference_probs(q, k, scale, window, b, h, i, nullptr);
        std::vector<double> dp(static_cast<size_t>(T), 0.0);
        double row = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          for (int64_t x = 0; x < D; ++x) dp[j] += at4(dout, b, i, h, x) * at4(v, b, j, kvh, x);
          row += p[j] * dp[j];
        }
        for (int64_t j = 0; j < T; ++j) {
          const double ds = p[j] * (dp[j] - row);
          for (int64_t x = 0; x < D; ++x) {
            g.dv.data<double>()[idx(b, j, kvh, KVH) + x] += p[j] * at4(dout, b, i, h, x);
            g.dq.data<double>()[idx(b, i, h, H) + x] += scale * ds * at4(k, b, j, kvh, x);
            g.dk.data<double>()[idx(b, j, kvh, KVH) + x] += scale * ds * at4(q, b, i, h, x);
          }
        }
      }
    }
  }
  return g;
}

struct Case {
  const char* name;
  int64_t B, T, H, KVH, D, window;
};

// Runs the kernel forward on contiguous inputs; returns {out, lse}.
Reference kernel_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                         int64_t window) {
  const DType stats = q.dtype();
  Reference r{Tensor::zeros_host(q.shape(), q.dtype()),
              Tensor::zeros_host({q.size(0), q.size(2), q.size(1)}, stats)};
  attention_forward(r.out, r.lse, q, k, v, scale, window);
  return r;
}

Grads kernel_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Reference& fwd, double scale, int64_t window) {
  Grads g{Tensor::zeros_host(q.shape(), q.dtype()), Tensor::zeros_host(k.shape(), q.dtype()),
          Tensor::zeros_host(v.shape(), q.dtype())};
  attention_backward(g.dq, g.dk, g.dv, dout, q, k, v, fwd.out, fwd.lse, scale, window);
  return g;
}

// Shapes covering MHA, GQA, MQA, ragged tiles (tiles are 128 query rows x 64 keys), multiple
// tiles, sliding windows inside one tile and across tile boundaries.
const Case kForwardCases[] = {
    {"mha_T7", 2, 7, 2, 2, 4, 0},         {"gqa_T70", 1, 70, 4, 2, 8, 0},
    {"mqa_T20", 2, 20, 3, 1, 5, 0},       {"window3", 1, 20, 2, 1, 4, 3},
    {"multi_tile", 1, 300, 2, 1, 8, 0},   {"window_across", 1, 300, 4, 2, 8, 70},
    {"window_1", 1, 150, 2, 2, 4, 1},     {"window_ge_T", 1, 140, 2, 1, 4, 500},
};

TEST(CpuAttention, ForwardAndLseMatchNaiveReferenceInF64) {
  for (const Case& c : kForwardCases) {
    Tensor q = random_tensor({c.B, c.T, c.H, c.D}, DType::kF64, 11);
    Tensor k = random_tensor({c.B, c.T, c.KVH, c.D}, DType::kF64, 12);
    Tensor v = random_tensor({c.B, c.T, c.KVH, c.D}, DType::kF64, 13);
    // A scale above 1/sqrt(D) spreads the softmax so the online rescaling is exercised.
    const double scale = 2.0;
    const Reference ref = reference_forward(q, k, v, scale, c.window);
    const Reference got = kernel_forward(q, k, v, scale, c.window);
    // f64 sums of at most T * D terms of size O(1): rounding ~1e-15 relative; the online
    // softmax only reorders the same sums.
    EXPECT_LT(relative_error(got.out, ref.out), 1e-12) << c.name;
    EXPECT_LT(relative_error(got.lse, ref.lse), 1e-12) << c.name;
  }
}

TEST(CpuAttention, WindowOfOneCopiesValuesAndWideWindowEqualsFullCausal) {
  Tensor q = random_tensor({1, 150, 2, 4}, DType::kF32, 1);
  Tensor k = random_tensor({1, 150, 1, 4}, DType::kF32, 2);
  Tensor v = random_tensor({1, 150, 1, 4}, DType::kF32, 3);
  const Reference one = kernel_forward(q, k, v, 0.5, 1);
  for (int64_t i = 0; i < 150; ++i) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t x = 0; x < 4; ++x) ASSERT_EQ(at4(one.out, 0, i, h, x), at4(v, 0, i, 0, x));
    }
  }
  // A window reaching past the start hides nothing: same tiles, same arithmetic, same bits.
  const Reference full = kernel_forward(q, k, v, 0.5, 0);
  const Reference wide = kernel_forward(q, k, v, 0.5, 150);
  EXPECT_EQ(std::memcmp(full.out.raw_data(), wide.out.raw_data(), full.out.nbytes()), 0);
  EXPECT_EQ(std::memcmp(full.lse.raw_data(), wide.lse.raw_data(), full.lse.nbytes()), 0);
  const Reference narrower = kernel_forward(q, k, v, 0.5, 149);
  EXPECT_NE(std::memcmp(full.out.raw_data(), narrower.out.raw_data(), full.out.nbytes()), 0);
}

// Finite differences of loss = sum(probe * out) with respect to q, k and v, against the
// kernel backward with dout = probe.
void expect_backward_matches_finite_differences(const Case& c) {
  Tensor q = random_tensor({c.B, c.T, c.H, c.D}, DType::kF64, 21);
  Tensor k = random_tensor({c.B, c.T, c.KVH, c.D}, DType::kF64, 22);
  Tensor v = random_tensor({c.B, c.T, c.KVH, c.D}, DType::kF64, 23);
  Tensor probe = random_tensor({c.B, c.T, c.H, c.D}, DType::kF64, 24);
  const double scale = 1.5;
  auto loss = [&] { return weighted_sum(kernel_forward(q, k, v, scale, c.window).out, probe); };
  const Grads g = kernel_backward(probe, q, k, v, kernel_forward(q, k, v, scale, c.window), scale,
                                  c.window);
  // Central differences with h = 1e-6 in f64: error ~1e-10 relative (see gradcheck.h).
  EXPECT_LT(relative_error(g.dq, finite_difference(q, loss)), 1e-6) << c.name << " dq";
  EXPECT_LT(relative_error(g.dk, finite_difference(k, loss)), 1e-6) << c.name << " dk";
  EXPECT_LT(relative_error(g.dv, finite_difference(v, loss)), 1e-6) << c.name << " dv";
}

TEST(CpuAttention, BackwardMatchesFiniteDifferencesMha) {
  expect_backward_matches_finite_differences({"mha_T7", 2, 7, 2, 2, 4, 0});
}
TEST(CpuAttention, BackwardMatchesFiniteDifferencesGqaRaggedTile) {
  expect_backward_matches_finite_differences({"gqa_T70", 1, 70, 4, 2, 3, 0});
}
TEST(CpuAttention, BackwardMatchesFiniteDifferencesMqa) {
  expect_backward_matches_finite_differences({"mqa_T20", 2, 20, 3, 1, 4, 0});
}
TEST(CpuAttention, BackwardMatchesFiniteDifferencesSlidingWindow) {
  expect_backward_matches_finite_differences({"window3", 1, 20, 2, 1, 4, 3});
}
TEST(CpuAttention, BackwardMatchesFiniteDifferencesAcrossTiles) {
  // 150 rows: two query tiles and three key tiles; the window reaches across tile edges.
  expect_backward_matches_finite_differences({"multi_tile_window", 1, 150, 2, 1, 2, 70});
}

TEST(CpuAttention, BackwardMatchesNaiveBackwardOnMultiTileShapes) {
  // Two query tiles and three or four key tiles each; windows inside and across tiles.
  const Case cases[] = {{"gqa_T200", 1, 200, 4, 2, 8, 0},
                        {"mqa_window", 2, 160, 3, 1, 8, 100},
                        {"mha_window_5", 1, 140, 2, 2, 8, 5}};
  for (const Case& c : cases) {
    Tensor q = random_tensor({c.B, c.T, c.H, c.D}, DType::kF64, 31);
    Tensor k = random_tensor({c.B, c.T, c.KVH, c.D}, DType::kF64, 32);
    Tensor v = random_tensor({c.B, c.T, c.KVH, c.D}, DType::kF64, 33);
    Tensor dout = random_tensor({c.B, c.T, c.H, c.D}, DType::kF64, 34);
    const double scale = 1.0;
    const Grads got = kernel_backward(dout, q, k, v, kernel_forward(q, k, v, scale, c.window),
                                      scale, c.window);
    const Grads ref = reference_backward(dout, q, k, v, scale, c.window);
    // Both are f64 sums of O(T * D) terms in different orders: ~1e-14 relative.
    EXPECT_LT(relative_error(got.dq, ref.dq), 1e-11) << c.name;
    EXPECT_LT(relative_error(got.dk, ref.dk), 1e-11) << c.name;
    EXPECT_LT(relative_error(got.dv, ref.dv), 1e-11) << c.name;
  }
}

// q, k, v as views into one fused [B, T, (H + 2 KVH) * D + pad] activation, out and dout as
// views into padded buffers, and dq, dk, dv as views into one fused gradient buffer: the
// kernel must follow the strides and leave every element outside its views alone.
TEST(CpuAttention, StridedViewsIntoFusedBuffers) {
  const int64_t B = 2, T = 9, H = 4, KVH = 2, D = 4, pad = 3, window = 0;
  const int64_t width = (H + 2 * KVH) * D + pad;
  const double scale = 0.9, sentinel = 1234.5;
  Tensor qkv = random_tensor({B, T, width}, DType::kF64, 41);
  Tensor out_buf = Tensor::zeros_host({B, T, H * D + pad}, DType::kF64);
  Tensor dout_buf = random_tensor({B, T, H * D + pad}, DType::kF64, 42);
  Tensor dqkv = Tensor::zeros_host({B, T, width}, DType::kF64);
  for (int64_t i = 0; i < dqkv.numel(); ++i) dqkv.data<double>()[i] = sentinel;
  auto view = [](const Tensor& buf, int64_t offset, int64_t heads) {
    const int64_t w = buf.size(2);
    return Tensor(buf.storage(), buf.dtype(), {B, T, heads, D}, {T * w, w, D, 1}, offset);
  };
  Tensor q = view(qkv, 0, H), k = view(qkv, H * D, KVH), v = view(qkv, (H + KVH) * D, KVH);
  Tensor dq = view(dqkv, 0, H), dk = view(dqkv, H * D, KVH), dv = view(dqkv, (H + KVH) * D, KVH);
  Tensor out = view(out_buf, 0, H), dout = view(dout_buf, 0, H);
  Tensor lse = Tensor::zeros_host({B, H, T}, DType::kF64);

  attention_forward(out, lse, q, k, v, scale, window);
  const Reference ref = reference_forward(q, k, v, scale, window);
  EXPECT_LT(relative_error(contiguous_f64(out), ref.out), 1e-12);
  EXPECT_LT(relative_error(lse, ref.lse), 1e-12);
  for (int64_t r = 0; r < B * T; ++r) {
    for (int64_t c = H * D; c < H * D + pad; ++c) {
      ASSERT_EQ(out_buf.data<double>()[r * (H * D + pad) + c], 0.0) << "out padding written";
    }
  }

  attention_backward(dq, dk, dv, dout, q, k, v, out, lse, scale, window);
  for (int64_t r = 0; r < B * T; ++r) {
    for (int64_t c = (H + 2 * KVH) * D; c < width; ++c) {
      ASSERT_EQ(dqkv.data<double>()[r * width + c], sentinel) << "gradient padding written";
    }
  }
  // Finite differences through the fused buffer; the padding gets a zero gradient.
  Tensor probe = contiguous_f64(dout);
  auto loss = [&] {
    Tensor o = Tensor::zeros_host({B, T, H, D}, DType::kF64);
    Tensor l = Tensor::zeros_host({B, H, T}, DType::kF64);
    attention_forward(o, l, q, k, v, scale, window);
    return weighted_sum(o, probe);
  };
  const Tensor fd = finite_difference(qkv, loss);
  // Central differences in f64: ~1e-10 relative (see gradcheck.h).
  EXPECT_LT(relative_error(contiguous_f64(dq), contiguous_f64(view(fd, 0, H))), 1e-6);
  EXPECT_LT(relative_error(contiguous_f64(dk), contiguous_f64(view(fd, H * D, KVH))), 1e-6);
  EXPECT_LT(relative_error(contiguous_f64(dv), contiguous_f64(view(fd, (H + KVH) * D, KVH))),
            1e-6);
}

TEST(CpuAttention, F32AgreesWithF64) {
  for (const int64_t window : {int64_t{0}, int64_t{50}}) {
    const int64_t B = 2, T = 200, H = 4, KVH = 2, D = 16;
    // f32 inputs, then the same (exactly representable) values in f64.
    Tensor q32 = random_tensor({B, T, H, D}, DType::kF32, 51);
    Tensor k32 = random_tensor({B, T, KVH, D}, DType::kF32, 52);
    Tensor v32 = random_tensor({B, T, KVH, D}, DType::kF32, 53);
    Tensor g32 = random_tensor({B, T, H, D}, DType::kF32, 54);
    Tensor q64 = converted(q32, DType::kF64), k64 = converted(k32, DType::kF64);
    Tensor v64 = converted(v32, DType::kF64), g64 = converted(g32, DType::kF64);
    const double scale = 1.0;  // scores up to ~16: a peaked softmax, rescaled tile by tile
    const Reference f32 = kernel_forward(q32, k32, v32, scale, window);
    const Reference f64 = kernel_forward(q64, k64, v64, scale, window);
    const Grads b32 = kernel_backward(g32, q32, k32, v32, f32, scale, window);
    const Grads b64 = kernel_backward(g64, q64, k64, v64, f64, scale, window);
    // f32 has unit roundoff 6e-8; scores are sums of D = 16 products, softmax sums and the
    // P @ V / dS products run over up to T = 200 terms, and exp is within 1 ulp. Errors grow
    // like sqrt(terms) * 6e-8 ~ 1e-6 norm-wise; 1e-5 leaves margin (a wrong mask, scale or
    // missing rescale gives errors of order 1e-2 or more).
    EXPECT_LT(relative_error(f32.out, f64.out), 1e-5) << window;
    EXPECT_LT(relative_error(f32.lse, f64.lse), 1e-5) << window;
    EXPECT_LT(relative_error(b32.dq, b64.dq), 1e-5) << window;
    EXPECT_LT(relative_error(b32.dk, b64.dk), 1e-5) << window;
    EXPECT_LT(relative_error(b32.dv, b64.dv), 1e-5) << window;
  }
}

TEST(CpuAttention, LargeScoresStayFiniteAndAccurateInF32) {
  // Scores of several hundred would overflow exp without the running max.
  Tensor q32 = random_tensor({1, 130, 2, 8}, DType::kF32, 61);
  Tensor k32 = random_tensor({1, 130, 1, 8}, DType::kF32, 62);
  Tensor v32 = random_tensor({1, 130, 1, 8}, DType::kF32, 63);
  const double scale = 100.0;
  const Reference got = kernel_forward(q32, k32, v32, scale, 0);
  const Reference ref = reference_forward(converted(q32, DType::kF64), converted(k32, DType::kF64),
                                          converted(v32, DType::kF64), scale, 0);
  for (int64_t i = 0; i < got.out.numel(); ++i) ASSERT_TRUE(std::isfinite(value_at(got.out, i)));
  // Scores ~100 carry an absolute f32 error ~1e-5 which moves probabilities by ~1e-5 relative.
  EXPECT_LT(relative_error(got.out, ref.out), 1e-4);
  EXPECT_LT(relative_error(got.lse, ref.lse), 1e-6);
}

// Backward run to run and across thread counts: 1 thread takes the one-pass schedule, many
// threads with few (batch, kv head) groups take the two-pass one; all must agree bitwise.
TEST(CpuAttention, BackwardIsBitwiseDeterministicAcrossThreadCounts) {
  const int64_t B = 1, T = 300, H = 4, KVH = 2, D = 16;
  Tensor q = random_tensor({B, T, H, D}, DType::kF32, 71);
  Tensor k = random_tensor({B, T, KVH, D}, DType::kF32, 72);
  Tensor v = random_tensor({B, T, KVH, D}, DType::kF32, 73);
  Tensor dout = random_tensor({B, T, H, D}, DType::kF32, 74);
  const int saved_threads = omp_get_max_threads();
  std::vector<Grads> runs;
  std::vector<Reference> forwards;
  for (const int threads : {1, 1, 2, 8}) {
    omp_set_num_threads(threads);
    forwards.push_back(kernel_forward(q, k, v, 0.25, 0));
    runs.push_back(kernel_backward(dout, q, k, v, forwards.front(), 0.25, 0));
  }
  omp_set_num_threads(saved_threads);
  for (size_t r = 1; r < runs.size(); ++r) {
    EXPECT_EQ(std::memcmp(forwards[r].out.raw_data(), forwards[0].out.raw_data(),
                          forwards[0].out.nbytes()), 0) << "run " << r;
    EXPECT_EQ(std::memcmp(runs[r].dq.raw_data(), runs[0].dq.raw_data(), runs[0].dq.nbytes()), 0)
        << "run " << r;
    EXPECT_EQ(std::memcmp(runs[r].dk.raw_data(), runs[0].dk.raw_data(), runs[0].dk.nbytes()), 0)
        << "run " << r;
    EXPECT_EQ(std::memcmp(runs[r].dv.raw_data(), runs[0].dv.raw_data(), runs[0].dv.nbytes()), 0)
        << "run " << r;
  }
}

TEST(CpuAttention, BadShapesAndDtypesThrowShapeError) {
  const DType f = DType::kF32;
  Tensor q = Tensor::zeros_host({2, 5, 4, 8}, f);
  Tensor k = Tensor::zeros_host({2, 5, 2, 8}, f);
  Tensor v = Tensor::zeros_host({2, 5, 2, 8}, f);
  Tensor out = Tensor::zeros_host({2, 5, 4, 8}, f);
  Tensor lse = Tensor::zeros_host({2, 4, 5}, f);
  EXPECT_NO_THROW(attention_forward(out, lse, q, k, v, 1.0, 0));

  Tensor k3 = Tensor::zeros_host({2, 5, 3, 8}, f);  // 4 heads are not a multiple of 3
  EXPECT_THROW(attention_forward(out, lse, q, k3, k3, 1.0, 0), ShapeError);
  Tensor k_d = Tensor::zeros_host({2, 5, 2, 6}, f);  // head dim differs from q's
  EXPECT_THROW(attention_forward(out, lse, q, k_d, k_d, 1.0, 0), ShapeError);
  Tensor k_t = Tensor::zeros_host({2, 6, 2, 8}, f);  // sequence length differs
  EXPECT_THROW(attention_forward(out, lse, q, k_t, k_t, 1.0, 0), ShapeError);
  Tensor v_h = Tensor::zeros_host({2, 5, 1, 8}, f);  // v does not match k
  EXPECT_THROW(attention_forward(out, lse, q, k, v_h, 1.0, 0), ShapeError);
  Tensor out_bad = Tensor::zeros_host({2, 5, 2, 8}, f);
  EXPECT_THROW(attention_forward(out_bad, lse, q, k, v, 1.0, 0), ShapeError);
  Tensor lse_shape = Tensor::zeros_host({2, 5, 4}, f);  // [B, T, H] instead of [B, H, T]
  EXPECT_THROW(attention_forward(out, lse_shape, q, k, v, 1.0, 0), ShapeError);
  Tensor lse_f64 = Tensor::zeros_host({2, 4, 5}, DType::kF64);  // f32 inputs keep f32 stats
  EXPECT_THROW(attention_forward(out, lse_f64, q, k, v, 1.0, 0), ShapeError);
  Tensor k64 = Tensor::zeros_host({2, 5, 2, 8}, DType::kF64);
  EXPECT_THROW(attention_forward(out, lse, q, k64, v, 1.0, 0), ShapeError);
  Tensor q3 = Tensor::zeros_host({2, 5, 32}, f);  // not 4-D
  EXPECT_THROW(attention_forward(out, lse, q3, k, v, 1.0, 0), ShapeError);
  // D not contiguous: every other element of a [.., 16] buffer.
  Tensor wide = Tensor::zeros_host({2, 5, 4, 16}, f);
  Tensor q_strided(wide.storage(), f, {2, 5, 4, 8}, {320, 64, 16, 2}, 0);
  EXPECT_THROW(attention_forward(out, lse, q_strided, k, v, 1.0, 0), ShapeError);
  EXPECT_THROW(attention_forward(out, lse, q, k, v, 1.0, -1), ShapeError);
  Tensor qi = Tensor::zeros_host({2, 5, 4, 8}, DType::kI32);
  Tensor ki = Tensor::zeros_host({2, 5, 2, 8}, DType::kI32);
  Tensor oi = Tensor::zeros_host({2, 5, 4, 8}, DType::kI32);
  EXPECT_THROW(attention_forward(oi, lse, qi, ki, ki, 1.0, 0), UnsupportedError);

  Tensor dq = Tensor::zeros_host(q.shape(), f), dk = Tensor::zeros_host(k.shape(), f);
  Tensor dv = Tensor::zeros_host(v.shape(), f), dout = Tensor::zeros_host(q.shape(), f);
  EXPECT_NO_THROW(attention_backward(dq, dk, dv, dout, q, k, v, out, lse, 1.0, 0));
  EXPECT_THROW(attention_backward(dk, dk, dv, dout, q, k, v, out, lse, 1.0, 0), ShapeError);
  EXPECT_THROW(attention_backward(dq, dq, dv, dout, q, k, v, out, lse, 1.0, 0), ShapeError);
  EXPECT_THROW(attention_backward(dq, dk, dq, dout, q, k, v, out, lse, 1.0, 0), ShapeError);
  EXPECT_THROW(attention_backward(dq, dk, dv, dk, q, k, v, out, lse, 1.0, 0), ShapeError);
  Tensor dq64 = Tensor::zeros_host(q.shape(), DType::kF64);
  EXPECT_THROW(attention_backward(dq64, dk, dv, dout, q, k, v, out, lse, 1.0, 0), ShapeError);
  EXPECT_THROW(attention_backward(dq, dk, dv, dout, q, k, v, out, lse_shape, 1.0, 0), ShapeError);
}

TEST(CpuAttention, ShapeErrorNamesTheHeadCounts) {
  Tensor q = Tensor::zeros_host({1, 3, 4, 2}, DType::kF32);
  Tensor k = Tensor::zeros_host({1, 3, 3, 2}, DType::kF32);
  Tensor out = Tensor::zeros_host({1, 3, 4, 2}, DType::kF32);
  Tensor lse = Tensor::zeros_host({1, 4, 3}, DType::kF32);
  try {
    attention_forward(out, lse, q, k, k, 1.0, 0);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("4 heads"), std::string::npos) << message;
    EXPECT_NE(message.find("3 kv heads"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace zero::backend::cpu
