// LayerNorm and RMSNorm on the CPU: forward against a long-double reference, every backward
// (x, weight, bias) against central finite differences in f64, accumulation of parameter
// gradients, f32 against f64, determinism and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_layernorm.h"
#include "backend/cpu/cpu_rmsnorm.h"
#include "core/error.h"
#include "support/gradcheck.h"

namespace zero::backend::cpu {
namespace {

using testing::converted;
using testing::finite_difference;
using testing::random_tensor;
using testing::relative_error;
using testing::weighted_sum;

constexpr int64_t kRows = 5, kChannels = 7;
constexpr double kEps = 1e-5;

struct NormOut {
  Tensor y, dx, dw, db;
};

// Runs forward, then backward with dy = probe; dw/db start from `start` to check accumulation.
NormOut run(bool layernorm, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& probe,
            double start) {
  const DType dt = x.dtype();
  NormOut o{Tensor::zeros_host(x.shape(), dt), Tensor::zeros_host(x.shape(), dt),
            Tensor::zeros_host(w.shape(), dt), Tensor::zeros_host(w.shape(), dt)};
  for (int64_t i = 0; i < kChannels; ++i) {
    testing::set_value_at(o.dw, i, start);
    testing::set_value_at(o.db, i, start);
  }
  Tensor mean = Tensor::zeros_host({kRows}, dt), rstd = Tensor::zeros_host({kRows}, dt);
  if (layernorm) {
    layernorm_forward(o.y, mean, rstd, x, w, b, kEps);
    layernorm_backward(o.dx, o.dw, b != nullptr ? &o.db : nullptr, probe, x, w, mean, rstd);
  } else {
    rmsnorm_forward(o.y, rstd, x, w, kEps);
    rmsnorm_backward(o.dx, o.dw, probe, x, w, rstd);
  }
  return o;
}

Tensor forward_only(bool layernorm, const Tensor& x, const Tensor& w, const Tensor* b) {
  Tensor probe = Tensor::zeros_host(x.shape(), x.dtype());
  return run(layernorm, x, w, b, probe, 0.0).y;
}

Tensor minus(const Tensor& a, double c) {
  Tensor out = converted(a, DType::kF64);
  for (int64_t i = 0; i < out.numel(); ++i) out.data<double>()[i] -= c;
  return out;
}

class Norms : public ::testing::TestWithParam<bool> {};  // true: LayerNorm, false: RMSNorm

TEST_P(Norms, ForwardMatchesReference) {
  const bool ln = GetParam();
  Tensor x = random_tensor({kRows, kChannels}, DType::kF64, 1, -2, 3);
  Tensor w = random_tensor({kChannels}, DType::kF64, 2), b = random_tensor({kChannels}, DType::kF64, 3);
  Tensor y = forward_only(ln, x, w, ln ? &b : nullptr);
  Tensor ref = Tensor::zeros_host(x.shape(), DType::kF64);
  for (int64_t r = 0; r < kRows; ++r) {
    long double mean = 0, sq = 0;
    for (int64_t i = 0; i < kChannels; ++i) mean += x.data<double>()[r * kChannels + i];
    mean = ln ? mean / kChannels : 0;
    for (int64_t i = 0; i < kChannels; ++i) {
      const long double d = x.data<double>()[r * kChannels + i] - mean;
      sq += d * d;
    }
    const long double rstd = 1.0L / std::sqrt(sq / kChannels + kEps);
    for (int64_t i = 0; i < kChannels; ++i) {
      const long double v = (x.data<double>()[r * kChannels + i] - mean) * rstd * w.data<double>()[i] +
                            (ln ? b.data<double>()[i] : 0.0);
      ref.data<double>()[r * kChannels + i] = static_cast<double>(v);
    }
  }
  EXPECT_LE(relative_error(y, ref), 1e-14);
}

TEST_P(Norms, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const bool ln = GetParam();
  Tensor x = random_tensor({kRows, kChannels}, DType::kF64, 4, -2, 3);
  Tensor w = random_tensor({kChannels}, DType::kF64, 5), b = random_tensor({kChannels}, DType::kF64, 6);
  const Tensor probe = random_tensor(x.shape(), DType::kF64, 7);
  const Tensor* bias = ln ? &b : nullptr;
  // Parameter gradients start at 0.25: the result must be 0.25 + gradient.
  NormOut o = run(ln, x, w, bias, probe, 0.25);
  auto loss = [&] { return weighted_sum(forward_only(ln, x, w, bias), probe); };
  // 1e-6: f64 central differences are accurate to ~1e-9 here (support/gradcheck.h).
  EXPECT_LE(relative_error(o.dx, finite_difference(x, loss)), 1e-6);
  EXPECT_LE(relative_error(minus(o.dw, 0.25), finite_difference(w, loss)), 1e-6);
  if (ln) {
    EXPECT_LE(relative_error(minus(o.db, 0.25), finite_difference(b, loss)), 1e-6);
  }
}

TEST_P(Norms, LayerNormWithoutBiasAndF32MatchesF64) {
  const bool ln = GetParam();
  Tensor x32 = random_tensor({kRows, kChannels}, DType::kF32, 8, -2, 3);
  Tensor w32 = random_tensor({kChannels}, DType::kF32, 9);
  Tensor p32 = random_tensor(x32.shape(), DType::kF32, 10);
  NormOut a = run(ln, x32, w32, nullptr, p32, 0.0);
  NormOut b = run(ln, converted(x32, DType::kF64), converted(w32, DType::kF64), nullptr,
                  converted(p32, DType::kF64), 0.0);
  // f32: row statistics over C terms and the backward's two row sums keep the error within a few
  // units of roundoff (6e-8) times C; 1e-5 norm-wise leaves a wide margin.
  EXPECT_LE(relative_error(converted(a.y, DType::kF64), b.y), 1e-5);
  EXPECT_LE(relative_error(converted(a.dx, DType::kF64), b.dx), 1e-5);
  EXPECT_LE(relative_error(converted(a.dw, DType::kF64), b.dw), 1e-5);
}

TEST_P(Norms, BackwardIsDeterministicOverManyRows) {
  const bool ln = GetParam();
  const int64_t rows = 1000;  // several row blocks
  Tensor x = random_tensor({rows, 16}, DType::kF32, 11), w = random_tensor({16}, DType::kF32, 12);
  Tensor probe = random_tensor({rows, 16}, DType::kF32, 13);
  Tensor mean = Tensor::zeros_host({rows}, DType::kF32), rstd = Tensor::zeros_host({rows}, DType::kF32);
  Tensor y = Tensor::zeros_host(x.shape(), DType::kF32);
  Tensor dx = Tensor::zeros_host(x.shape(), DType::kF32);
  Tensor dw1 = Tensor::zeros_host({16}, DType::kF32), dw2 = Tensor::zeros_host({16}, DType::kF32);
  for (Tensor* dw : {&dw1, &dw2}) {
    if (ln) {
      layernorm_forward(y, mean, rstd, x, w, nullptr, kEps);
      layernorm_backward(dx, *dw, nullptr, probe, x, w, mean, rstd);
    } else {
      rmsnorm_forward(y, rstd, x, w, kEps);
      rmsnorm_backward(dx, *dw, probe, x, w, rstd);
    }
  }
  EXPECT_EQ(0, std::memcmp(dw1.raw_data(), dw2.raw_data(), dw1.nbytes()));
}

TEST_P(Norms, BadShapesAreShapeErrors) {
  const bool ln = GetParam();
  Tensor x = Tensor::zeros_host({3, 4}, DType::kF32), w = Tensor::zeros_host({5}, DType::kF32);
  Tensor y = Tensor::zeros_host({3, 4}, DType::kF32), s = Tensor::zeros_host({3}, DType::kF32);
  if (ln) {
    EXPECT_THROW(layernorm_forward(y, s, s, x, w, nullptr, kEps), ShapeError);
  } else {
    EXPECT_THROW(rmsnorm_forward(y, s, x, w, kEps), ShapeError);
  }
  Tensor w4 = Tensor::zeros_host({4}, DType::kF32), bad_stats = Tensor::zeros_host({2}, DType::kF32);
  if (ln) {
    EXPECT_THROW(layernorm_forward(y, bad_stats, bad_stats, x, w4, nullptr, kEps), ShapeError);
  } else {
    EXPECT_THROW(rmsnorm_forward(y, bad_stats, x, w4, kEps), ShapeError);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, Norms, ::testing::Values(true, false),
                         [](const auto& param_info) {
                           return std::string(param_info.param ? "LayerNorm" : "RMSNorm");
                         });

}  // namespace
}  // namespace zero::backend::cpu
