// OneBitAdam (optim/optimizer.h): DeepSpeed's params and defaults, the warm-up as Adam without
// bias correction, and the compressed stage's update on one rank (nothing to communicate): the
// momentum from this rank's gradient, the variance frozen at freeze_step.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/self_comm.h"
#include "core/error.h"
#include "optim/optimizer.h"
#include "support/text_has.h"

namespace zero::optim {
namespace onebit_adam_test {

using zero::testing::has;

std::string config_error(const nlohmann::json& params) {
  try {
    Optimizer::create({"OneBitAdam", params}, "optimizer");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OneBitAdam, ReadsDeepSpeedsParamsAndDefaults) {
  const auto opt = Optimizer::create({"OneBitAdam", {}}, "optimizer");
  EXPECT_TRUE(opt->is_onebit());
  EXPECT_EQ(opt->freeze_step(), 100000);
  EXPECT_EQ(opt->base_lr(), 1e-3);
  EXPECT_EQ(opt->state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_TRUE(opt->notes().empty());
  const auto set = Optimizer::create(
      {"onebitadam", {{"lr", 2e-4}, {"freeze_step", 23}, {"betas", {0.8, 0.95}},
                      {"cuda_aware", false}, {"comm_backend_name", "nccl"}}},
      "optimizer");
  EXPECT_EQ(set->freeze_step(), 23);
  EXPECT_EQ(set->base_lr(), 2e-4);
  EXPECT_TRUE(set->notes().empty());
  EXPECT_FALSE(Optimizer::create({"AdamW", {}}, "optimizer")->is_onebit());
}

TEST(OneBitAdam, BadParamsNameTheKeyAndTheFix) {
  EXPECT_TRUE(has(config_error({{"freeze_step", 0}}), "optimizer.params.freeze_step = 0"));
  EXPECT_TRUE(has(config_error({{"freeze_step", 1.5}}), "freeze_step"));
  EXPECT_TRUE(has(config_error({{"amsgrad", true}}), "optimizer.params.amsgrad"));
  EXPECT_TRUE(has(config_error({{"max_grad_norm", 1.0}}), "gradient_clipping"));
  EXPECT_TRUE(has(config_error({{"comm_backend_name", "gloo"}}), "comm_backend_name"));
  EXPECT_TRUE(has(config_error({{"freez_step", 10}}), "freez_step"));
  EXPECT_THROW(Optimizer::create({"OneBitAdam", {{"amsgrad", true}}}, "optimizer"), ConfigError);
}

TEST(OneBitAdam, SettingsWithoutEffectAreNoted) {
  const auto opt = Optimizer::create(
      {"OneBitAdam", {{"bias_correction", false}, {"comm_backend_name", "mpi"}}}, "optimizer");
  ASSERT_EQ(opt->notes().size(), 2u);
  EXPECT_TRUE(has(opt->notes()[0], "bias_correction"));
  EXPECT_TRUE(has(opt->notes()[1], "\"mpi\""));
}

// Steps 1..freeze_step are AdamW without bias correction, bit for bit; then the compressed
// stage: m = b1 m + (1-b1) g, v unchanged, p -= lr wd p; p -= lr m / (sqrt(v) + eps).
TEST(OneBitAdam, WarmsUpAsAdamThenUpdatesAgainstTheFrozenVariance) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  const int64_t n = 300;
  const backend::ParamSegment segments[] = {{0, 200, true}, {200, 100, false}};
  const nlohmann::json common = {{"lr", 0.01}, {"betas", {0.9, 0.99}}, {"weight_decay", 0.1}};
  nlohmann::json onebit_params = common;
  onebit_params["freeze_step"] = 3;
  nlohmann::json adam_params = common;
  adam_params["bias_correction"] = false;
  auto onebit = Optimizer::create({"OneBitAdam", onebit_params}, "optimizer");
  auto adam = Optimizer::create({"AdamW", adam_params}, "optimizer");
  onebit->init_state(cpu, n);
  adam->init_state(cpu, n);
  onebit->set_compression_group(&self);
  Tensor p1 = Tensor::zeros_host({n}, DType::kF32), p2 = Tensor::zeros_host({n}, DType::kF32);
  Tensor g = Tensor::zeros_host({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) p1.data<float>()[i] = p2.data<float>()[i] = 0.01f * (i % 17);
  const auto fill_gradient = [&](int step) {
    for (int64_t i = 0; i < n; ++i) {
      g.data<float>()[i] = std::sin(0.37f * static_cast<float>(i * (step + 1)));
    }
  };
  for (int step = 1; step <= 3; ++step) {
    fill_gradient(step);
    EXPECT_FALSE(onebit->next_step_compressed());
    onebit->step(cpu, p1, g, segments, 0.01);
    adam->step(cpu, p2, g, segments, 0.01);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(p1.data<float>()[i], p2.data<float>()[i]) << "warm-up step " << step;
    }
  }
  EXPECT_TRUE(onebit->next_step_compressed());
  const std::vector<float> v = [&] {
    const Tensor& s = onebit->state_buffers()[1];
    return std::vector<float>(s.data<float>(), s.data<float>() + n);
  }();
  for (int step = 4; step <= 6; ++step) {
    fill_gradient(step);
    std::vector<float> m(n), p(n);
    for (int64_t i = 0; i < n; ++i) {
      m[i] = onebit->state_buffers()[0].data<float>()[i];
      p[i] = p1.data<float>()[i];
    }
    onebit->step(cpu, p1, g, segments, 0.01);
    for (int64_t i = 0; i < n; ++i) {
      const double wd = i < 200 ? 0.1 : 0.0;
      const double m_new = 0.9 * m[i] + 0.1 * g.data<float>()[i];
      const double expected =
          p[i] - 0.01 * wd * p[i] - 0.01 * m_new / (std::sqrt(static_cast<double>(v[i])) + 1e-8);
      // f32 arithmetic of one update: a few ulps of the O(0.1) parameters.
      EXPECT_NEAR(p1.data<float>()[i], expected, 1e-6) << "step " << step << " element " << i;
      EXPECT_NEAR(onebit->state_buffers()[0].data<float>()[i], m_new, 1e-7);
      ASSERT_EQ(onebit->state_buffers()[1].data<float>()[i], v[i]) << "v is frozen";
    }
  }
  EXPECT_EQ(onebit->compression(), nullptr) << "one rank has nothing to compress";
  EXPECT_EQ(onebit->step_count(), 6);
}

// Elements whose variance is exactly 0 at the freeze (their gradient was 0 through the whole
// warm-up) get no momentum: DeepSpeed's exp_avg_mask, read off the variance.
TEST(OneBitAdam, MasksTheMomentumWhereTheVarianceIsZero) {
  backend::CpuBackend cpu;
  const int64_t n = 4;
  const backend::ParamSegment segments[] = {{0, n, true}};
  Tensor p = Tensor::zeros_host({n}, DType::kF32), g = Tensor::zeros_host({n}, DType::kF32);
  Tensor m = Tensor::zeros_host({n}, DType::kF32), v = Tensor::zeros_host({n}, DType::kF32);
  const float v0[n] = {0.0f, 0.25f, 0.0f, 1.0f};
  for (int64_t i = 0; i < n; ++i) {
    p.data<float>()[i] = 1.0f;
    m.data<float>()[i] = 0.5f;
    v.data<float>()[i] = v0[i];
  }
  backend::OptimizerHyper hyper;
  hyper.lr = 0.1;
  hyper.eps = 1e-8;
  hyper.weight_decay = 0.5;
  Tensor state[] = {m, v};
  cpu.optimizer_update(backend::OptimizerKind::kFrozenVarianceAdam, p, g, state, segments, hyper);
  for (int64_t i = 0; i < n; ++i) {
    const float decayed = 1.0f - 0.05f;
    if (v0[i] == 0.0f) {
      EXPECT_EQ(m.data<float>()[i], 0.0f) << i;
      EXPECT_EQ(p.data<float>()[i], decayed) << "only the decay moves element " << i;
    } else {
      EXPECT_EQ(m.data<float>()[i], 0.5f) << i;
      EXPECT_NEAR(p.data<float>()[i], decayed - 0.1 * 0.5 / std::sqrt(v0[i]), 1e-6) << i;
    }
  }
}

}  // namespace onebit_adam_test
}  // namespace zero::optim
