// Muon (optim/muon.h, optim/optimizer.h): the Newton-Schulz orthogonalization against an f64
// evaluation of the same iteration, one update of Muon matrices and of the auxiliary AdamW
// against an f64 model of DeepSpeed's MuonWithAuxAdam, and DeepSpeed's params with their
// defaults and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "optim/muon.h"
#include "optim/optimizer.h"
#include "support/text_has.h"

namespace zero::optim {
namespace muon_test {

using zero::testing::has;

std::vector<double> random_values(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return v;
}

// The iteration in f64 on the [rows, cols] row-major x, run on x^T when x is tall.
std::vector<double> newton_schulz_reference(std::vector<double> x, int64_t rows, int64_t cols,
                                            int steps) {
  if (rows > cols) {
    std::vector<double> t(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
    }
    std::vector<double> o = newton_schulz_reference(t, cols, rows, steps);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = o[c * rows + r];
    }
    return x;
  }
  double norm = 0.0;
  for (double v : x) norm += v * v;
  norm = std::sqrt(norm);
  for (double& v : x) v /= norm + kNewtonSchulzEps;
  const int64_t k = rows;
  std::vector<double> a(k * k), b(k * k), next(x.size());
  for (int s = 0; s < steps; ++s) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        double sum = 0.0;
        for (int64_t c = 0; c < cols; ++c) sum += x[i * cols + c] * x[j * cols + c];
        a[i * k + j] = sum;
      }
    }
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        double sum = 0.0;
        for (int64_t l = 0; l < k; ++l) sum += a[i * k + l] * a[l * k + j];
        b[i * k + j] = kNewtonSchulzB * a[i * k + j] + kNewtonSchulzC * sum;
      }
    }
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t c = 0; c < cols; ++c) {
        double sum = 0.0;
        for (int64_t l = 0; l < k; ++l) sum += b[i * k + l] * x[l * cols + c];
        next[i * cols + c] = kNewtonSchulzA * x[i * cols + c] + sum;
      }
    }
    x.swap(next);
  }
  return x;
}

Tensor host_matrix(const std::vector<double>& v, int64_t rows, int64_t cols) {
  Tensor t = Tensor::zeros_host({rows, cols}, DType::kF32);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  return t;
}

// f32 against f64 through 5 iterations: each multiplies small singular directions by up to
// a = 3.4 (3.4^5 ~ 450), so f32's 6e-8 relative rounding grows to a few 1e-5 on O(0.3) entries.
constexpr double kOrthogonalizeTolerance = 2e-4;

TEST(Muon, NewtonSchulzMatchesTheIterationInF64ForWideSquareAndTallMatrices) {
  backend::CpuBackend cpu;
  const int64_t shapes[][2] = {{6, 20}, {12, 12}, {20, 6}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1];
    const std::vector<double> g = random_values(rows * cols, 7u + static_cast<unsigned>(rows));
    Tensor x = host_matrix(g, rows, cols);
    newton_schulz_orthogonalize(cpu, x, 5);
    const std::vector<double> expected = newton_schulz_reference(g, rows, cols, 5);
    double largest = 0.0;
    for (int64_t i = 0; i < rows * cols; ++i) {
      ASSERT_NEAR(x.data<float>()[i], expected[i], kOrthogonalizeTolerance)
          << rows << "x" << cols << " element " << i;
      largest = std::max(largest, std::fabs(expected[i]));
    }
    EXPECT_GT(largest, 0.1) << "the result is not trivially small";
  }
}

// What orthogonalizing means: after enough steps every singular value is near 1 (the quintic
// settles them in about [0.7, 1.2]), so X X^T (wide) is near the identity.
TEST(Muon, NewtonSchulzEqualizesTheSingularValues) {
  backend::CpuBackend cpu;
  const int64_t rows = 5, cols = 16;
  std::vector<double> g = random_values(rows * cols, 3u);
  for (int64_t c = 0; c < cols; ++c) g[c] *= 50.0;  // one dominant direction
  Tensor x = host_matrix(g, rows, cols);
  newton_schulz_orthogonalize(cpu, x, 10);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < rows; ++j) {
      double dot = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        dot += static_cast<double>(x.data<float>()[i * cols + c]) * x.data<float>()[j * cols + c];
      }
      if (i == j) {
        EXPECT_GT(dot, 0.45) << i;  // singular values in [0.67, 1.2] square to [0.45, 1.44]
        EXPECT_LT(dot, 1.45) << i;
      } else {
        EXPECT_LT(std::fabs(dot), 0.5) << i << "," << j;
      }
    }
  }
}

TEST(Muon, NewtonSchulzKeepsAZeroMatrixAtZero) {
  backend::CpuBackend cpu;
  Tensor x = Tensor::zeros_host({3, 4}, DType::kF32);
  newton_schulz_orthogonalize(cpu, x, 5);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(x.data<float>()[i], 0.0f);
}

TEST(Muon, ScaleByInverseNormDividesByTheDeviceNorm) {
  backend::CpuBackend cpu;
  Tensor x = Tensor::zeros_host({4}, DType::kF32);
  const float values[] = {3.0f, 4.0f, 0.0f, -12.0f};
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = values[i];
  Tensor squared = Tensor::zeros_host({1}, DType::kF64);
  cpu.sum_squares(squared, x, false);
  cpu.scale_by_inverse_norm(x, squared, 1e-7);
  const auto factor = static_cast<float>(1.0 / (13.0 + 1e-7));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(x.data<float>()[i], values[i] * factor) << i;
  EXPECT_THROW(cpu.scale_by_inverse_norm(x, squared, 0.0), ShapeError);
  Tensor wrong = Tensor::zeros_host({1}, DType::kF32);
  EXPECT_THROW(cpu.scale_by_inverse_norm(x, wrong, 1e-7), ShapeError);
}

// The f64 model of one DeepSpeed MuonWithAuxAdam step on a flat buffer: Muon on the matrices
// (nesterov momentum, orthogonalized, scaled, decoupled decay), AdamW with bias correction on
// the rest.
struct ReferenceMuon {
  std::vector<double> p, m, v;
  int64_t step = 0;
  int ns_steps = 5;
  bool nesterov = true;

  void update(const std::vector<double>& g, const std::vector<MuonMatrix>& matrices,
              const std::vector<backend::ParamSegment>& adam_segments, double muon_lr,
              double adam_lr, double momentum, double wd) {
    ++step;
    for (const MuonMatrix& mat : matrices) {
      const int64_t n = mat.rows * mat.cols;
      std::vector<double> u(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t e = mat.offset + i;
        m[e] = momentum * m[e] + (1.0 - momentum) * g[e];
        u[i] = nesterov ? (1.0 - momentum) * g[e] + momentum * m[e] : m[e];
      }
      const std::vector<double> o = newton_schulz_reference(u, mat.rows, mat.cols, ns_steps);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t e = mat.offset + i;
        p[e] = p[e] * (1.0 - muon_lr * wd) - muon_lr * mat.update_scale * o[i];
      }
    }
    const double b1 = 0.9, b2 = 0.95, eps = 1e-10;
    for (const backend::ParamSegment& s : adam_segments) {
      for (int64_t e = s.offset; e < s.offset + s.length; ++e) {
        m[e] = b1 * m[e] + (1.0 - b1) * g[e];
        v[e] = b2 * v[e] + (1.0 - b2) * g[e] * g[e];
        const double m_hat = m[e] / (1.0 - std::pow(b1, step));
        const double v_hat = v[e] / (1.0 - std::pow(b2, step));
        if (s.weight_decay) p[e] -= adam_lr * wd * p[e];
        p[e] -= adam_lr * m_hat / (std::sqrt(v_hat) + eps);
      }
    }
  }
};

TEST(Muon, StepsTheMatricesWithMuonAndTheRestWithAdamW) {
  backend::CpuBackend cpu;
  // A wide matrix, a tall one (DeepSpeed's shape taller still: scale sqrt(10/6)), a bias.
  const std::vector<MuonMatrix> matrices = {{0, 6, 10, 1.0}, {60, 10, 6, std::sqrt(10.0 / 6.0)}};
  const std::vector<backend::ParamSegment> segments = {
      {0, 60, true}, {60, 60, true}, {120, 10, false}};
  const std::vector<backend::ParamSegment> adam_segments = {{120, 10, false}};
  const int64_t n = 130;
  auto opt = Optimizer::create(
      {"Muon", {{"lr", 0.02}, {"adam_lr", 0.004}, {"weight_decay", 0.1}}}, "optimizer");
  opt->set_muon_units({MuonUnit{0, 0, n, 0, matrices}}, nullptr);
  opt->init_state(cpu, n);
  ASSERT_EQ(opt->state_buffers()[1].numel(), 10) << "the second moment of the bias only";
  ReferenceMuon ref;
  ref.p = random_values(n, 11u);
  ref.m.assign(n, 0.0);
  ref.v.assign(n, 0.0);
  Tensor p = Tensor::zeros_host({n}, DType::kF32), g = Tensor::zeros_host({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) {
    p.data<float>()[i] = static_cast<float>(ref.p[i]);
    ref.p[i] = p.data<float>()[i];
  }
  const double grad_scale = 0.5;  // clipping folded into the gradient read
  for (int step = 1; step <= 3; ++step) {
    std::vector<double> scaled(n);
    for (int64_t i = 0; i < n; ++i) {
      g.data<float>()[i] = std::sin(0.37f * static_cast<float>(i * step + 1));
      scaled[i] = g.data<float>()[i] * grad_scale;
    }
    // The schedule halves the lr at step 3: both groups follow it.
    const double factor = step == 3 ? 0.5 : 1.0;
    opt->step(cpu, p, g, segments, 0.02 * factor, grad_scale);
    ref.update(scaled, matrices, adam_segments, 0.02 * factor, 0.004 * factor, 0.95, 0.1);
    for (int64_t i = 0; i < n; ++i) {
      // Muon elements: the orthogonalization's f32 error times lr; Adam's: f32 rounding.
      ASSERT_NEAR(p.data<float>()[i], ref.p[i], 1e-5) << "step " << step << " element " << i;
      // The momentum, O(1): a few f32 roundings of three elementwise steps.
      ASSERT_NEAR(opt->state_buffers()[0].data<float>()[i], ref.m[i], 1e-6) << i;
    }
  }
  // Checkpoints see the second moment at full length, zero on the matrices.
  const auto tensors = opt->state_tensors();
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].second.numel(), n);
  ASSERT_EQ(tensors[1].first, "exp_avg_sq");
  ASSERT_EQ(tensors[1].second.numel(), n);
  for (int64_t i = 0; i < n; ++i) {
    const float v = tensors[1].second.data<float>()[i];
    if (i < 120) {
      ASSERT_EQ(v, 0.0f) << "no second moment on the matrices, element " << i;
    } else {
      ASSERT_NEAR(v, ref.v[i], 1e-7) << i;  // O(0.1) second moment: f32 rounding
      ASSERT_EQ(v, opt->state_buffers()[1].data<float>()[i - 120]) << i;
    }
  }
  // And a loaded expansion goes back into the compact buffer.
  for (int64_t i = 120; i < n; ++i) tensors[1].second.data<float>()[i] = static_cast<float>(i);
  opt->states_loaded(tensors);
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(opt->state_buffers()[1].data<float>()[i], static_cast<float>(120 + i)) << i;
  }
  EXPECT_EQ(opt->step_count(), 3);
}

// Adam's elements between matrices: each run of them updates against its own place in the
// compact second moment (a bias before, between and after two matrices).
TEST(Muon, AdamRunsBetweenMatricesKeepTheirOwnSecondMoment) {
  backend::CpuBackend cpu;
  const std::vector<MuonMatrix> matrices = {{3, 2, 4, 1.0}, {13, 4, 2, std::sqrt(2.0)}};
  // [0,3) bias | [3,11) matrix | [11,13) bias | [13,21) matrix | [21,24) bias
  const std::vector<backend::ParamSegment> segments = {
      {0, 3, false}, {3, 8, true}, {11, 2, false}, {13, 8, true}, {21, 3, false}};
  const int64_t n = 24;
  auto opt = Optimizer::create({"Muon", {{"lr", 0.02}, {"adam_lr", 0.01}}}, "optimizer");
  opt->set_muon_units({MuonUnit{0, 0, n, 0, matrices}}, nullptr);
  opt->init_state(cpu, n);
  ASSERT_EQ(opt->state_buffers()[1].numel(), 8);
  ReferenceMuon ref;
  ref.p.assign(n, 0.5);
  ref.m.assign(n, 0.0);
  ref.v.assign(n, 0.0);
  Tensor p = Tensor::zeros_host({n}, DType::kF32), g = Tensor::zeros_host({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) p.data<float>()[i] = 0.5f;
  const std::vector<backend::ParamSegment> adam_segments = {
      {0, 3, false}, {11, 2, false}, {21, 3, false}};
  for (int step = 1; step <= 2; ++step) {
    std::vector<double> grads(n);
    for (int64_t i = 0; i < n; ++i) {
      g.data<float>()[i] = 0.1f * static_cast<float>((i * 7 + step) % 11) - 0.5f;
      grads[i] = g.data<float>()[i];
    }
    opt->step(cpu, p, g, segments, 0.02);
    ref.update(grads, matrices, adam_segments, 0.02, 0.01, 0.95, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      // As above: lr times the orthogonalization's f32 error, or f32 rounding.
      ASSERT_NEAR(p.data<float>()[i], ref.p[i], 1e-5) << "step " << step << " element " << i;
    }
  }
  // The second moments (O(0.1)): f32 rounding.
  const int64_t compact_of[] = {0, 1, 2, 11, 12, 21, 22, 23};
  for (int64_t c = 0; c < 8; ++c) {
    EXPECT_NEAR(opt->state_buffers()[1].data<float>()[c], ref.v[compact_of[c]], 1e-7) << c;
  }
}

// momentum, nesterov and ns_steps from the config reach the step.
TEST(Muon, TheConfiguredMomentumNesterovAndStepsAreUsed) {
  backend::CpuBackend cpu;
  const std::vector<MuonMatrix> matrices = {{0, 4, 6, 1.0}};
  const std::vector<backend::ParamSegment> segments = {{0, 24, true}, {24, 4, false}};
  const int64_t n = 28;
  auto opt = Optimizer::create(
      {"Muon", {{"lr", 0.02}, {"momentum", 0.8}, {"nesterov", false}, {"ns_steps", 2}}},
      "optimizer");
  opt->set_muon_units({MuonUnit{0, 0, n, 0, matrices}}, nullptr);
  opt->init_state(cpu, n);
  ReferenceMuon ref;
  ref.ns_steps = 2;
  ref.nesterov = false;
  ref.p.assign(n, 0.25);
  ref.m.assign(n, 0.0);
  ref.v.assign(n, 0.0);
  Tensor p = Tensor::zeros_host({n}, DType::kF32), g = Tensor::zeros_host({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) p.data<float>()[i] = 0.25f;
  for (int step = 1; step <= 2; ++step) {
    std::vector<double> grads(n);
    for (int64_t i = 0; i < n; ++i) {
      g.data<float>()[i] = std::cos(0.71f * static_cast<float>(i + 3 * step));
      grads[i] = g.data<float>()[i];
    }
    opt->step(cpu, p, g, segments, 0.02);
    // Without lr or adam_lr, the Adam half takes lr too.
    ref.update(grads, matrices, {{24, 4, false}}, 0.02, 0.02, 0.8, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      // As above: lr times the orthogonalization's f32 error, or f32 rounding.
      ASSERT_NEAR(p.data<float>()[i], ref.p[i], 1e-5) << "step " << step << " element " << i;
    }
  }
}

TEST(Muon, WithoutNesterovTheUpdateIsTheOrthogonalizedMomentum) {
  backend::CpuBackend cpu;
  const MuonMatrix matrix{0, 4, 8, 1.0};
  Tensor p = Tensor::zeros_host({32}, DType::kF32), g = Tensor::zeros_host({32}, DType::kF32);
  Tensor m = Tensor::zeros_host({32}, DType::kF32);
  const std::vector<double> grads = random_values(32, 5u);
  for (int i = 0; i < 32; ++i) g.data<float>()[i] = static_cast<float>(grads[i]);
  MuonHyper hyper;
  hyper.nesterov = false;
  hyper.momentum = 0.5;
  muon_update_matrix(cpu, matrix, p, g, m, hyper, 0.1, 0.0, true, 1.0, nullptr);
  std::vector<double> momentum(32);
  for (int i = 0; i < 32; ++i) momentum[i] = 0.5 * static_cast<float>(grads[i]);
  const std::vector<double> o = newton_schulz_reference(momentum, 4, 8, 5);
  // lr 0.1 times the orthogonalization's f32 error (kOrthogonalizeTolerance).
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(p.data<float>()[i], -0.1 * o[i], 1e-5) << i;
}

std::string config_error(const nlohmann::json& params) {
  try {
    Optimizer::create({"Muon", params}, "optimizer");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Muon, ReadsDeepSpeedsParamsWithTheGroupDefaults) {
  const auto plain = Optimizer::create({"Muon", {}}, "optimizer");
  EXPECT_TRUE(plain->is_muon());
  EXPECT_EQ(plain->muon_lr(), 0.02);
  EXPECT_EQ(plain->adam_lr(), 3e-4);
  EXPECT_EQ(plain->base_lr(), 0.02);
  EXPECT_EQ(plain->muon_hyper().momentum, 0.95);
  EXPECT_TRUE(plain->muon_hyper().nesterov);
  EXPECT_EQ(plain->muon_hyper().ns_steps, 5);
  EXPECT_EQ(plain->state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_TRUE(plain->notes().empty());

  const auto shared = Optimizer::create({"muon", {{"lr", 1e-3}}}, "optimizer");
  EXPECT_EQ(shared->muon_lr(), 1e-3);
  EXPECT_EQ(shared->adam_lr(), 1e-3);

  const auto split = Optimizer::create(
      {"Muon", {{"lr", 1e-3}, {"muon_lr", 0.01}, {"adam_lr", 1e-4}, {"momentum", 0.9},
                {"nesterov", false}, {"ns_steps", 6}, {"ns_method", "standard"},
                {"betas", {0.8, 0.99}}, {"eps", 1e-8}, {"weight_decay", 0.1}}},
      "optimizer");
  EXPECT_EQ(split->muon_lr(), 0.01);
  EXPECT_EQ(split->adam_lr(), 1e-4);
  EXPECT_EQ(split->base_lr(), 1e-3);
  EXPECT_EQ(split->muon_hyper().momentum, 0.9);
  EXPECT_FALSE(split->muon_hyper().nesterov);
  EXPECT_EQ(split->muon_hyper().ns_steps, 6);
  EXPECT_TRUE(split->notes().empty());

  const auto muon_only = Optimizer::create({"Muon", {{"muon_lr", 0.05}}}, "optimizer");
  EXPECT_EQ(muon_only->base_lr(), 0.05) << "the schedule starts from the Muon lr";
  EXPECT_EQ(muon_only->adam_lr(), 3e-4);
  EXPECT_FALSE(Optimizer::create({"AdamW", {}}, "optimizer")->is_muon());
  EXPECT_TRUE(Optimizer::is_muon_type("MUON"));
}

TEST(Muon, BadParamsNameTheKeyAndTheFix) {
  EXPECT_TRUE(has(config_error({{"momentum", 1.0}}), "optimizer.params.momentum = 1"));
  EXPECT_TRUE(has(config_error({{"momentum", -0.1}}), "optimizer.params.momentum"));
  EXPECT_TRUE(has(config_error({{"ns_steps", 0}}), "optimizer.params.ns_steps = 0"));
  EXPECT_TRUE(has(config_error({{"ns_steps", 2.5}}), "ns_steps"));
  EXPECT_TRUE(has(config_error({{"ns_method", "svd"}}), "\"gram\", \"standard\""));
  EXPECT_TRUE(has(config_error({{"muon_lr", 0}}), "optimizer.params.muon_lr"));
  EXPECT_TRUE(has(config_error({{"adam_lr", "auto"}}), "optimizer.params.adam_lr"));
  EXPECT_TRUE(has(config_error({{"eps", 0}}), "optimizer.params.eps"));
  EXPECT_TRUE(has(config_error({{"betas", {0.9}}}), "optimizer.params.betas"));
  EXPECT_TRUE(has(config_error({{"momentun", 0.9}}), "momentun"));
}

TEST(Muon, TheGramMethodIsNotedAsTheSamePolynomial) {
  const auto opt = Optimizer::create({"Muon", {{"ns_method", "gram"}}}, "optimizer");
  ASSERT_EQ(opt->notes().size(), 1u);
  EXPECT_TRUE(has(opt->notes()[0], "ns_method = \"gram\"")) << opt->notes()[0];
}

}  // namespace muon_test
}  // namespace zero::optim
