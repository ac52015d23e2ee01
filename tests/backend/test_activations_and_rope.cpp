// GELU (tanh), SwiGLU and rotary embeddings on the CPU: forward against closed forms, backward
// against central finite differences in f64, f32 against f64, rope on strided views.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_activations.h"
#include "backend/cpu/cpu_rope.h"
#include "core/error.h"
#include "support/gradcheck.h"

namespace zero::backend::cpu {
namespace {

using testing::converted;
using testing::finite_difference;
using testing::random_tensor;
using testing::relative_error;
using testing::weighted_sum;

Tensor gelu(const Tensor& x) {
  Tensor y = Tensor::zeros_host(x.shape(), x.dtype());
  gelu_forward(y, x);
  return y;
}

Tensor swiglu(const Tensor& gate_up) {
  Tensor y = Tensor::zeros_host({gate_up.size(0), gate_up.size(1) / 2}, gate_up.dtype());
  swiglu_forward(y, gate_up);
  return y;
}

TEST(Gelu, ForwardBackwardAndPrecision) {
  Tensor x = random_tensor({4, 9}, DType::kF64, 1, -4, 4);
  Tensor y = gelu(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const long double v = x.data<double>()[i];
    const long double ref = 0.5L * v * (1 + std::tanh(std::sqrt(2.0L / M_PIl) * (v + 0.044715L * v * v * v)));
    EXPECT_NEAR(y.data<double>()[i], static_cast<double>(ref), 1e-15);
  }
  const Tensor probe = random_tensor(x.shape(), DType::kF64, 2);
  Tensor dx = Tensor::zeros_host(x.shape(), DType::kF64);
  gelu_backward(dx, probe, x);
  // 1e-6: f64 central differences are accurate to ~1e-9 (support/gradcheck.h).
  EXPECT_LE(relative_error(dx, finite_difference(x, [&] { return weighted_sum(gelu(x), probe); })), 1e-6);
  // f32: one tanh and a few products per element: a few ulps, 1e-6 relative norm-wise.
  Tensor x32 = converted(x, DType::kF32), dx32 = Tensor::zeros_host(x.shape(), DType::kF32);
  gelu_backward(dx32, converted(probe, DType::kF32), x32);
  EXPECT_LE(relative_error(converted(gelu(x32), DType::kF64), y), 1e-6);
  EXPECT_LE(relative_error(converted(dx32, DType::kF64), dx), 1e-6);
}

TEST(SwiGlu, ForwardBackwardAndPrecision) {
  Tensor gate_up = random_tensor({3, 10}, DType::kF64, 3, -4, 4);
  Tensor y = swiglu(gate_up);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t i = 0; i < 5; ++i) {
      const long double g = gate_up.data<double>()[r * 10 + i], u = gate_up.data<double>()[r * 10 + 5 + i];
      EXPECT_NEAR(y.data<double>()[r * 5 + i], static_cast<double>(g / (1 + std::exp(-g)) * u), 1e-14);
    }
  }
  const Tensor probe = random_tensor(y.shape(), DType::kF64, 4);
  Tensor d = Tensor::zeros_host(gate_up.shape(), DType::kF64);
  swiglu_backward(d, probe, gate_up);
  EXPECT_LE(relative_error(d, finite_difference(gate_up, [&] { return weighted_sum(swiglu(gate_up), probe); })), 1e-6);
  // f32: exp, a division and two products per element: 1e-6 norm-wise.
  Tensor g32 = converted(gate_up, DType::kF32), d32 = Tensor::zeros_host(gate_up.shape(), DType::kF32);
  swiglu_backward(d32, converted(probe, DType::kF32), g32);
  EXPECT_LE(relative_error(converted(swiglu(g32), DType::kF64), y), 1e-6);
  EXPECT_LE(relative_error(converted(d32, DType::kF64), d), 1e-6);
  Tensor bad = Tensor::zeros_host({3, 4}, DType::kF64);
  EXPECT_THROW(swiglu_forward(bad, gate_up), ShapeError);
}

// A [B, T, H, D] view into a wider fused row, as q and k are in the model.
struct Rope {
  int64_t b = 2, t = 5, h = 3, d = 6, row = 40, column = 4;
  Tensor view(const Tensor& buffer) const {
    return Tensor(buffer.storage(), buffer.dtype(), {b, t, h, d}, {t * row, row, d, 1}, column);
  }
};

Tensor tables(int64_t t, int64_t half, bool sine) {
  Tensor out = Tensor::zeros_host({t, half}, DType::kF64);
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / (2.0 * half));
      out.data<double>()[p * half + i] = sine ? std::sin(angle) : std::cos(angle);
    }
  }
  return out;
}

TEST(Rope, RotatesPairsAndInverseIsTranspose) {
  Rope r;
  Tensor cos = tables(r.t, r.d / 2, false), sin = tables(r.t, r.d / 2, true);
  Tensor buffer = random_tensor({r.b * r.t * r.row}, DType::kF64, 5);
  const Tensor original = converted(buffer, DType::kF64);
  Tensor x = r.view(buffer);
  rope_apply(x, cos, sin, false);
  const double* o = original.data<double>();
  const double* n = buffer.data<double>();
  for (int64_t i = 0; i < buffer.numel(); ++i) {
    const int64_t col = i % r.row;
    if (col < r.column || col >= r.column + r.h * r.d) {
      EXPECT_EQ(o[i], n[i]) << "outside the view";
    }
  }
  // Each (i, i + D/2) pair keeps its length; position 0 is the identity.
  for (int64_t b = 0; b < r.b; ++b) {
    for (int64_t t = 0; t < r.t; ++t) {
      for (int64_t h = 0; h < r.h; ++h) {
        const int64_t base = b * r.t * r.row + t * r.row + r.column + h * r.d;
        for (int64_t i = 0; i < r.d / 2; ++i) {
          const double before = std::hypot(o[base + i], o[base + i + r.d / 2]);
          const double after = std::hypot(n[base + i], n[base + i + r.d / 2]);
          EXPECT_NEAR(before, after, 1e-14);
          if (t == 0) {
            EXPECT_EQ(o[base + i], n[base + i]);
          }
        }
      }
    }
  }
  rope_apply(x, cos, sin, true);
  EXPECT_LE(relative_error(buffer, original), 1e-15);
}

TEST(Rope, InverseIsTheBackwardAndF32MatchesF64) {
  Rope r;
  Tensor cos = tables(r.t, r.d / 2, false), sin = tables(r.t, r.d / 2, true);
  Tensor buffer = random_tensor({r.b * r.t * r.row}, DType::kF64, 6);
  const Tensor probe = random_tensor({r.b * r.t * r.row}, DType::kF64, 7);
  auto loss = [&] {
    Tensor copy = converted(buffer, DType::kF64);
    Tensor v = r.view(copy);
    rope_apply(v, cos, sin, false);
    return weighted_sum(copy, probe);
  };
  Tensor grad = converted(probe, DType::kF64);
  Tensor gv = r.view(grad);
  rope_apply(gv, cos, sin, true);
  EXPECT_LE(relative_error(grad, finite_difference(buffer, loss)), 1e-6);
  // f32: two products and a sum per element: within 2 ulps, 1e-6 norm-wise.
  Tensor b32 = converted(buffer, DType::kF32);
  Tensor v32 = r.view(b32);
  rope_apply(v32, converted(cos, DType::kF32), converted(sin, DType::kF32), false);
  Tensor b64 = converted(buffer, DType::kF64);
  Tensor v64 = r.view(b64);
  rope_apply(v64, cos, sin, false);
  EXPECT_LE(relative_error(converted(b32, DType::kF64), b64), 1e-6);
  Tensor bad_cos = tables(r.t + 1, r.d / 2, false);
  EXPECT_THROW(rope_apply(v64, bad_cos, sin, false), ShapeError);
}

}  // namespace
}  // namespace zero::backend::cpu
