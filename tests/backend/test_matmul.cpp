// Tests for the CPU matmul and linear kernels: against naive loops, finite differences in f64,
// f32 against f64, the accumulate contract of dw/dbias, and shape validation.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_matmul.h"
#include "core/error.h"
#include "backend/tensor_difference.h"
#include "support/gradcheck.h"

namespace zero::backend::cpu {
namespace {

using testing::converted;
using testing::finite_difference;
using testing::random_tensor;
using testing::relative_error;
using testing::value_at;
using testing::weighted_sum;

// Element (i, j) of op(m) for a 2-D contiguous tensor.
double op_at(const Tensor& m, bool transpose, int64_t i, int64_t j) {
  return transpose ? value_at(m, j * m.size(1) + i) : value_at(m, i * m.size(1) + j);
}

// y = x @ w^T + bias in f64, rows of x flattened.
Tensor naive_linear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const int64_t out = w.size(0), in = w.size(1), rows = x.numel() / in;
  Shape shape = x.shape();
  shape.back() = out;
  Tensor y = Tensor::zeros_host(shape, DType::kF64);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = bias ? value_at(*bias, o) : 0.0;
      for (int64_t i = 0; i < in; ++i) s += value_at(x, r * in + i) * value_at(w, o * in + i);
      y.data<double>()[r * out + o] = s;
    }
  }
  return y;
}

TEST(CpuMatmul, AllTransposeCombinationsMatchNaiveLoops) {
  const int64_t m = 5, n = 4, k = 7;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, DType::kF64, 1);
      Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, DType::kF64, 2);
      Tensor c = random_tensor({m, n}, DType::kF64, 3);
      Tensor expected = Tensor::zeros_host({m, n}, DType::kF64);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0.0;
          for (int64_t p = 0; p < k; ++p) s += op_at(a, ta, i, p) * op_at(b, tb, p, j);
          expected.data<double>()[i * n + j] = 0.5 * s + 0.25 * value_at(c, i * n + j);
        }
      }
      matmul(c, a, ta, b, tb, 0.5, 0.25);
      // f64 sums of 7 products: rounding ~1e-16 relative.
      EXPECT_LT(relative_error(c, expected), 1e-14) << "ta=" << ta << " tb=" << tb;

      // f32 on the same (rounded) inputs: K = 7 roundings of ~6e-8 each, so the norm-wise
      // error is a few 1e-8; 1e-6 leaves margin for BLAS's summation order.
      Tensor a32 = converted(a, DType::kF32), b32 = converted(b, DType::kF32);
      Tensor c32 = Tensor::zeros_host({m, n}, DType::kF32);
      Tensor c64 = Tensor::zeros_host({m, n}, DType::kF64);
      matmul(c32, a32, ta, b32, tb, 1.0, 0.0);
      matmul(c64, converted(a32, DType::kF64), ta, converted(b32, DType::kF64), tb, 1.0, 0.0);
      EXPECT_LT(relative_error(c32, c64), 1e-6);
    }
  }
}

TEST(CpuMatmul, BetaZeroIgnoresGarbageAndEmptyInnerDimensionScales) {
  Tensor a = random_tensor({3, 2}, DType::kF32, 4);
  Tensor b = random_tensor({2, 3}, DType::kF32, 5);
  Tensor c = Tensor::zeros_host({3, 3}, DType::kF32);
  for (int64_t i = 0; i < 9; ++i) c.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  matmul(c, a, false, b, false, 1.0, 0.0);
  for (int64_t i = 0; i < 9; ++i) EXPECT_TRUE(std::isfinite(c.data<float>()[i]));

  // K = 0: the product is empty, c = beta * c (and beta = 0 clears even NaN).
  Tensor a0 = Tensor::zeros_host({3, 0}, DType::kF64);
  Tensor b0 = Tensor::zeros_host({0, 2}, DType::kF64);
  Tensor c0 = Tensor::zeros_host({3, 2}, DType::kF64);
  for (int64_t i = 0; i < 6; ++i) c0.data<double>()[i] = 2.0;
  matmul(c0, a0, false, b0, false, 1.0, 0.5);
  EXPECT_EQ(c0.data<double>()[5], 1.0);
  c0.data<double>()[0] = std::numeric_limits<double>::quiet_NaN();
  matmul(c0, a0, false, b0, false, 1.0, 0.0);
  EXPECT_EQ(c0.data<double>()[0], 0.0);
}

TEST(CpuMatmul, RejectsMismatchedShapesAndDtypes) {
  Tensor a = Tensor::zeros_host({3, 4}, DType::kF32);
  Tensor b = Tensor::zeros_host({5, 2}, DType::kF32);
  Tensor c = Tensor::zeros_host({3, 2}, DType::kF32);
  EXPECT_THROW(matmul(c, a, false, b, false, 1.0, 0.0), ShapeError);  // K 4 vs 5
  Tensor b_ok = Tensor::zeros_host({4, 2}, DType::kF32);
  EXPECT_THROW(matmul(c, a, true, b_ok, false, 1.0, 0.0), ShapeError);  // op(a) is [4,3]
  Tensor c_bad = Tensor::zeros_host({2, 3}, DType::kF32);
  EXPECT_THROW(matmul(c_bad, a, false, b_ok, false, 1.0, 0.0), ShapeError);
  Tensor b64 = Tensor::zeros_host({4, 2}, DType::kF64);
  EXPECT_THROW(matmul(c, a, false, b64, false, 1.0, 0.0), ShapeError);
  Tensor a3 = Tensor::zeros_host({1, 3, 4}, DType::kF32);
  EXPECT_THROW(matmul(c, a3, false, b_ok, false, 1.0, 0.0), ShapeError);
  try {
    matmul(c, a, false, b, false, 1.0, 0.0);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[3, 4]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[5, 2]"), std::string::npos) << e.what();
  }
}

TEST(CpuLinear, ForwardMatchesNaiveWithAndWithoutBias) {
  Tensor x = random_tensor({2, 3, 5}, DType::kF64, 6);
  Tensor w = random_tensor({4, 5}, DType::kF64, 7);
  Tensor bias = random_tensor({4}, DType::kF64, 8);
  Tensor y = random_tensor({2, 3, 4}, DType::kF64, 9);  // garbage: forward overwrites
  linear_forward(y, x, w, &bias);
  EXPECT_LT(relative_error(y, naive_linear(x, w, &bias)), 1e-14);
  linear_forward(y, x, w, nullptr);
  EXPECT_LT(relative_error(y, naive_linear(x, w, nullptr)), 1e-14);
}

// Gradients of L = sum(probe * linear(x, w, b)) against central differences, in f64.
TEST(CpuLinear, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int64_t in = 5, out = 4;
  Tensor x = random_tensor({2, 3, in}, DType::kF64, 10);
  Tensor w = random_tensor({out, in}, DType::kF64, 11);
  Tensor bias = random_tensor({out}, DType::kF64, 12);
  Tensor probe = random_tensor({2, 3, out}, DType::kF64, 13);
  Tensor y = Tensor::zeros_host({2, 3, out}, DType::kF64);
  auto loss = [&] {
    linear_forward(y, x, w, &bias);
    return weighted_sum(y, probe);
  };
  Tensor fd_x = finite_difference(x, loss);
  Tensor fd_w = finite_difference(w, loss);
  Tensor fd_b = finite_difference(bias, loss);

  Tensor dx = random_tensor(x.shape(), DType::kF64, 14);  // overwritten
  Tensor dw0 = random_tensor(w.shape(), DType::kF64, 15);
  Tensor db0 = random_tensor(bias.shape(), DType::kF64, 16);
  Tensor dw = converted(dw0, DType::kF64), db = converted(db0, DType::kF64);
  linear_backward(&dx, dw, &db, probe, x, w);
  // Central differences with h = 1e-6 are accurate to ~1e-10 here (see gradcheck.h).
  EXPECT_LT(relative_error(dx, fd_x), 1e-6);
  EXPECT_LT(relative_error(difference(dw, dw0), fd_w), 1e-6);
  EXPECT_LT(relative_error(difference(db, db0), fd_b), 1e-6);

  // Again without dx: dw and db accumulate a second copy of the gradient.
  linear_backward(nullptr, dw, &db, probe, x, w);
  Tensor two_fd_w = converted(fd_w, DType::kF64), two_fd_b = converted(fd_b, DType::kF64);
  for (int64_t i = 0; i < two_fd_w.numel(); ++i) two_fd_w.data<double>()[i] *= 2;
  for (int64_t i = 0; i < two_fd_b.numel(); ++i) two_fd_b.data<double>()[i] *= 2;
  EXPECT_LT(relative_error(difference(dw, dw0), two_fd_w), 1e-6);
  EXPECT_LT(relative_error(difference(db, db0), two_fd_b), 1e-6);

  // No bias gradient requested: dw alone.
  Tensor dw_only = Tensor::zeros_host(w.shape(), DType::kF64);
  linear_backward(nullptr, dw_only, nullptr, probe, x, w);
  EXPECT_LT(relative_error(dw_only, fd_w), 1e-6);
}

TEST(CpuLinear, F32MatchesF64ForwardAndBackward) {
  const int64_t rows = 33, in = 40, out = 24;
  Tensor x32 = random_tensor({rows, in}, DType::kF32, 17);
  Tensor w32 = random_tensor({out, in}, DType::kF32, 18);
  Tensor b32 = random_tensor({out}, DType::kF32, 19);
  Tensor dy32 = random_tensor({rows, out}, DType::kF32, 20);
  Tensor x64 = converted(x32, DType::kF64), w64 = converted(w32, DType::kF64);
  Tensor b64 = converted(b32, DType::kF64), dy64 = converted(dy32, DType::kF64);

  Tensor y32 = Tensor::zeros_host({rows, out}, DType::kF32);
  Tensor y64 = Tensor::zeros_host({rows, out}, DType::kF64);
  linear_forward(y32, x32, w32, &b32);
  linear_forward(y64, x64, w64, &b64);
  // Same inputs in both precisions; f32 dot products of length K <= 40 with random signs carry
  // ~sqrt(K) * 2^-24 ~ 4e-7 relative error at most in practice (measured ~1e-7): bound 5e-7.
  EXPECT_LT(relative_error(y32, y64), 5e-7);

  Tensor dx32 = Tensor::zeros_host({rows, in}, DType::kF32);
  Tensor dx64 = Tensor::zeros_host({rows, in}, DType::kF64);
  Tensor dw32 = Tensor::zeros_host({out, in}, DType::kF32);
  Tensor dw64 = Tensor::zeros_host({out, in}, DType::kF64);
  Tensor db32 = Tensor::zeros_host({out}, DType::kF32);
  Tensor db64 = Tensor::zeros_host({out}, DType::kF64);
  linear_backward(&dx32, dw32, &db32, dy32, x32, w32);
  linear_backward(&dx64, dw64, &db64, dy64, x64, w64);
  EXPECT_LT(relative_error(dx32, dx64), 5e-7);
  EXPECT_LT(relative_error(dw32, dw64), 5e-7);
  // The bias sums are formed in double and rounded once: 1 ulp, 6e-8 relative.
  EXPECT_LT(relative_error(db32, db64), 1e-7);
}

// Wide outputs split the bias-gradient columns into several tiles over several threads; the
// sums must not depend on the thread count.
TEST(CpuLinear, BiasGradientIsTiledCorrectlyAndDeterministic) {
  const int64_t rows = 40, in = 3, out = 1100;
  Tensor x = random_tensor({rows, in}, DType::kF32, 21);
  Tensor w = random_tensor({out, in}, DType::kF32, 22);
  Tensor dy = random_tensor({rows, out}, DType::kF32, 23);
  Tensor expected = Tensor::zeros_host({out}, DType::kF64);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < out; ++j) expected.data<double>()[j] += value_at(dy, r * out + j);
  }
  const int saved_threads = omp_get_max_threads();
  Tensor results[2] = {Tensor::zeros_host({out}, DType::kF32),
                       Tensor::zeros_host({out}, DType::kF32)};
  const int thread_counts[2] = {1, 3};
  for (int t = 0; t < 2; ++t) {
    omp_set_num_threads(thread_counts[t]);
    Tensor dw = Tensor::zeros_host({out, in}, DType::kF32);
    linear_backward(nullptr, dw, &results[t], dy, x, w);
  }
  omp_set_num_threads(saved_threads);
  // Each column is summed in double and rounded once.
  EXPECT_LT(relative_error(results[0], expected), 1e-7);
  EXPECT_EQ(std::memcmp(results[0].raw_data(), results[1].raw_data(), results[0].nbytes()), 0);
}

TEST(CpuLinear, RejectsMismatchedShapes) {
  Tensor x = random_tensor({6, 5}, DType::kF32, 24);
  Tensor w = random_tensor({4, 5}, DType::kF32, 25);
  Tensor y = random_tensor({6, 4}, DType::kF32, 26);
  Tensor w_bad = Tensor::zeros_host({4, 6}, DType::kF32);
  EXPECT_THROW(linear_forward(y, x, w_bad, nullptr), ShapeError);
  Tensor y_bad = Tensor::zeros_host({6, 5}, DType::kF32);
  EXPECT_THROW(linear_forward(y_bad, x, w, nullptr), ShapeError);
  Tensor bias_bad = Tensor::zeros_host({5}, DType::kF32);
  EXPECT_THROW(linear_forward(y, x, w, &bias_bad), ShapeError);
  Tensor x64 = Tensor::zeros_host({6, 5}, DType::kF64);
  EXPECT_THROW(linear_forward(y, x64, w, nullptr), ShapeError);

  Tensor dw = Tensor::zeros_host({4, 5}, DType::kF32);
  Tensor dx_bad = Tensor::zeros_host({6, 4}, DType::kF32);
  EXPECT_THROW(linear_backward(&dx_bad, dw, nullptr, y, x, w), ShapeError);
  Tensor dw_bad = Tensor::zeros_host({5, 4}, DType::kF32);
  EXPECT_THROW(linear_backward(nullptr, dw_bad, nullptr, y, x, w), ShapeError);
  EXPECT_THROW(linear_backward(nullptr, dw, &bias_bad, y, x, w), ShapeError);
  EXPECT_THROW(linear_backward(nullptr, dw, nullptr, y_bad, x, w), ShapeError);
  // Nothing was accumulated by the rejected calls.
  for (int64_t i = 0; i < dw.numel(); ++i) ASSERT_EQ(dw.data<float>()[i], 0.0f);
}

}  // namespace
}  // namespace zero::backend::cpu
