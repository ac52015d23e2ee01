// Optimizers against hand-computed updates and LR schedules against DeepSpeed's closed forms.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <numbers>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace zero::optim {
namespace {

struct Buffers {
  backend::CpuBackend cpu;
  Tensor params = Tensor::zeros_host({2}, DType::kF32);
  Tensor grads = Tensor::zeros_host({2}, DType::kF32);
};

// Two elements: [0] in a decayed segment, [1] in a no-decay segment (a bias).
const backend::ParamSegment kSegments[] = {{0, 1, true}, {1, 1, false}};

TEST(Optimizers, AdamWMatchesHandComputedSteps) {
  Buffers b;
  auto opt = Optimizer::create({"AdamW", {{"lr", 0.1}, {"betas", {0.9, 0.99}}, {"eps", 1e-8}, {"weight_decay", 0.5}}}, "optimizer");
  opt->init_state(b.cpu, 2);
  b.params.data<float>()[0] = 1.0f;
  b.params.data<float>()[1] = -2.0f;
  double p[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0};
  const double g[3][2] = {{0.5, -1.0}, {0.25, 2.0}, {-1.0, 0.5}};
  for (int t = 1; t <= 3; ++t) {
    for (int i = 0; i < 2; ++i) b.grads.data<float>()[i] = static_cast<float>(g[t - 1][i]);
    opt->step(b.cpu, b.params, b.grads, kSegments, 0.1);
    for (int i = 0; i < 2; ++i) {
      const double wd = i == 0 ? 0.5 : 0.0;
      m[i] = 0.9 * m[i] + 0.1 * g[t - 1][i];
      v[i] = 0.99 * v[i] + 0.01 * g[t - 1][i] * g[t - 1][i];
      const double m_hat = m[i] / (1 - std::pow(0.9, t)), v_hat = v[i] / (1 - std::pow(0.99, t));
      p[i] = p[i] * (1 - 0.1 * wd) - 0.1 * m_hat / (std::sqrt(v_hat) + 1e-8);
      // f32 arithmetic over 3 steps: a few float ulps of O(1) values.
      EXPECT_NEAR(b.params.data<float>()[i], p[i], 2e-6) << "step " << t << " element " << i;
    }
  }
  EXPECT_EQ(opt->step_count(), 3);
}

// Gradient clipping is folded into the update (Optimizer::step's grad_scale): the same bits as
// scaling the gradients first (Backend::scale, y *= float(c)) and updating at 1, for every
// optimizer, and the gradients themselves are left as they were.
TEST(Optimizers, ClippingFoldedIntoTheUpdateGivesTheBitsOfScalingFirst) {
  const int64_t n = 1000;
  const backend::ParamSegment segments[] = {{0, 600, true}, {600, 400, false}};
  const double coefficient = 0.3711;
  for (const char* type : {"AdamW", "Adam", "Lamb", "Lion", "Adagrad"}) {
    backend::CpuBackend cpu;
    Tensor params[2], grads[2];
    std::unique_ptr<Optimizer> opts[2];
    for (int run = 0; run < 2; ++run) {
      params[run] = Tensor::zeros_host({n}, DType::kF32);
      grads[run] = Tensor::zeros_host({n}, DType::kF32);
      // "Adam" with L2 decay (adam_w_mode false) puts the decay into the clipped gradient.
      opts[run] = std::string(type) == "Adam"
                      ? Optimizer::create(
                            {type, {{"lr", 0.01}, {"weight_decay", 0.1}, {"adam_w_mode", false}}},
                            "optimizer")
                      : Optimizer::create({type, {{"lr", 0.01}, {"weight_decay", 0.1}}}, "optimizer");
      opts[run]->init_state(cpu, n);
      for (int64_t i = 0; i < n; ++i) {
        params[run].data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
      }
    }
    for (int step = 1; step <= 3; ++step) {
      for (int run = 0; run < 2; ++run) {
        for (int64_t i = 0; i < n; ++i) {
          grads[run].data<float>()[i] = std::cos(0.11f * static_cast<float>(i * step)) * 3.0f;
        }
      }
      Tensor kept = Tensor::zeros_host({n}, DType::kF32);
      cpu.copy(kept, grads[1]);
      cpu.scale(grads[0], coefficient);
      opts[0]->step(cpu, params[0], grads[0], segments, 0.01);
      opts[1]->step(cpu, params[1], grads[1], segments, 0.01, coefficient);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(params[0].data<float>()[i], params[1].data<float>()[i])
            << type << " step " << step << " element " << i;
        ASSERT_EQ(grads[1].data<float>()[i], kept.data<float>()[i]) << type << " gradient changed";
      }
    }
  }
}

TEST(Optimizers, AdamWithL2AndLionAndAdagrad) {
  {
    Buffers b;
    auto opt = Optimizer::create({"Adam", {{"lr", 0.1}, {"adam_w_mode", false}, {"weight_decay", 0.5}}}, "optimizer");
    opt->init_state(b.cpu, 2);
    b.params.data<float>()[0] = 1.0f;
    b.grads.data<float>()[0] = 0.5f;
    opt->step(b.cpu, b.params, b.grads, kSegments, 0.1);
    // L2: g' = 0.5 + 0.5 * 1 = 1; first Adam step moves by lr * sign(g') (m_hat / sqrt(v_hat) = 1).
    EXPECT_NEAR(b.params.data<float>()[0], 1.0 - 0.1 * 1.0 / (1.0 + 1e-8), 1e-6);
  }
  {
    Buffers b;
    auto opt = Optimizer::create({"Lion", {{"lr", 0.01}, {"betas", {0.9, 0.99}}, {"weight_decay", 0.1}}}, "optimizer");
    opt->init_state(b.cpu, 2);
    b.params.data<float>()[0] = 2.0f;
    b.grads.data<float>()[0] = -3.0f;
    opt->step(b.cpu, b.params, b.grads, kSegments, 0.01);
    // c = 0.1 * -3 < 0 -> sign -1: p = 2 (1 - 0.001) + 0.01.
    EXPECT_NEAR(b.params.data<float>()[0], 2.0 * (1 - 0.001) + 0.01, 1e-6);
  }
  {
    Buffers b;
    auto opt = Optimizer::create({"Adagrad", {{"lr", 0.1}}}, "optimizer");
    opt->init_state(b.cpu, 2);
    b.params.data<float>()[0] = 1.0f;
    b.grads.data<float>()[0] = 2.0f;
    opt->step(b.cpu, b.params, b.grads, kSegments, 0.1);
    opt->step(b.cpu, b.params, b.grads, kSegments, 0.1);
    // s = 4, then 8: p = 1 - 0.1 * 2/2 - 0.1 * 2/sqrt(8).
    EXPECT_NEAR(b.params.data<float>()[0], 1.0 - 0.1 - 0.2 / std::sqrt(8.0), 1e-6);
  }
}

TEST(Optimizers, LambTrustRatioIsClamped) {
  Buffers b;
  auto opt = Optimizer::create({"Lamb", {{"lr", 0.1}, {"max_coeff", 10.0}, {"min_coeff", 0.01}}}, "optimizer");
  opt->init_state(b.cpu, 2);
  // One segment holding both elements: ||p|| = 1000, first-step update u = (1, 1), ||u|| = sqrt 2:
  // the trust ratio 707 clamps to 10, so p -= 0.1 * 10 * u.
  const backend::ParamSegment whole[] = {{0, 2, true}};
  b.params.data<float>()[0] = 600.0f;
  b.params.data<float>()[1] = 800.0f;
  b.grads.data<float>()[0] = 1.0f;
  b.grads.data<float>()[1] = 3.0f;
  opt->step(b.cpu, b.params, b.grads, whole, 0.1);
  EXPECT_NEAR(b.params.data<float>()[0], 600.0 - 1.0, 1e-3);
  EXPECT_NEAR(b.params.data<float>()[1], 800.0 - 1.0, 1e-3);
}

TEST(Optimizers, BadParamsAreConfigErrors) {
  EXPECT_THROW(Optimizer::create({"AdamW", {{"lr", -1}}}, "optimizer"), ConfigError);
  EXPECT_THROW(Optimizer::create({"AdamW", {{"betas", {0.9}}}}, "optimizer"), ConfigError);
  EXPECT_THROW(Optimizer::create({"AdamW", {{"lrr", 0.1}}}, "optimizer"), ConfigError);
  EXPECT_THROW(Optimizer::create({"Sgdx", {}}, "optimizer"), ConfigError);
  EXPECT_THROW(Optimizer::create({"ZeroOneAdam", {}}, "optimizer"), UnsupportedError);
}

TEST(Schedules, WarmupLrLogAndLinear) {
  auto log = LrSchedule::create({"WarmupLR", {{"warmup_min_lr", 0.0}, {"warmup_max_lr", 0.01}, {"warmup_num_steps", 100}}}, 0.1, "scheduler");
  EXPECT_DOUBLE_EQ(log->current_lr(), 0.0);  // before the first step()
  EXPECT_DOUBLE_EQ(log->lr_at(0), 0.0);      // log(1) = 0
  EXPECT_NEAR(log->lr_at(9), 0.01 * std::log(10.0) / std::log(100.0), 1e-15);
  EXPECT_DOUBLE_EQ(log->lr_at(100), 0.01);
  EXPECT_DOUBLE_EQ(log->lr_at(5000), 0.01);
  auto linear = LrSchedule::create({"WarmupLR", {{"warmup_min_lr", 0.001}, {"warmup_max_lr", 0.011}, {"warmup_num_steps", 10}, {"warmup_type", "linear"}}}, 0.1, "scheduler");
  EXPECT_NEAR(linear->lr_at(5), 0.001 + 0.01 * 0.5, 1e-15);
  linear->step();
  linear->step();
  EXPECT_NEAR(linear->current_lr(), 0.001 + 0.01 * 0.1, 1e-15);  // iteration 1
}

TEST(Schedules, WarmupDecayAndCosine) {
  auto decay = LrSchedule::create({"WarmupDecayLR", {{"warmup_max_lr", 0.01}, {"warmup_num_steps", 10}, {"total_num_steps", 110}, {"warmup_type", "linear"}}}, 0.1, "scheduler");
  EXPECT_NEAR(decay->lr_at(10), 0.01, 1e-15);       // end of warmup
  EXPECT_NEAR(decay->lr_at(60), 0.01 * 0.5, 1e-15); // halfway down
  EXPECT_DOUBLE_EQ(decay->lr_at(110), 0.0);         // decay end
  EXPECT_DOUBLE_EQ(decay->lr_at(500), 0.0);
  auto cosine = LrSchedule::create({"WarmupCosineLR", {{"total_num_steps", 110}, {"warmup_num_steps", 10}, {"warmup_type", "linear"}, {"cos_min_ratio", 0.1}}}, 0.02, "scheduler");
  EXPECT_DOUBLE_EQ(cosine->lr_at(-1), 0.0);
  EXPECT_NEAR(cosine->lr_at(5), 0.02 * 0.5, 1e-15);
  const double half = (1 + std::cos(std::numbers::pi * 51.0 / 100.0)) / 2;
  EXPECT_NEAR(cosine->lr_at(60), 0.02 * (0.1 + 0.9 * half), 1e-15);
  EXPECT_NEAR(cosine->lr_at(109), 0.02 * 0.1, 1e-15);  // cosine end: cos_min_ratio
}

TEST(Schedules, LrRangeTestAndErrors) {
  auto range = LrSchedule::create({"LRRangeTest", {{"lr_range_test_min_lr", 0.001}, {"lr_range_test_step_size", 10}, {"lr_range_test_step_rate", 2.0}, {"lr_range_test_staircase", true}}}, 0.1, "scheduler");
  EXPECT_NEAR(range->lr_at(8), 0.001, 1e-15);             // interval floor(9/10) = 0
  EXPECT_NEAR(range->lr_at(9), 0.001 * (1 + 2.0), 1e-15);  // interval 1
  EXPECT_THROW(LrSchedule::create({"WarmupLR", {{"warmup_steps", 10}}}, 0.1, "scheduler"), ConfigError);
  EXPECT_THROW(LrSchedule::create({"WarmupDecayLR", {}}, 0.1, "scheduler"), ConfigError);
  EXPECT_THROW(LrSchedule::create({"Cosine", {}}, 0.1, "scheduler"), ConfigError);
  auto constant = LrSchedule::create({"", {}}, 0.3, "scheduler");
  EXPECT_DOUBLE_EQ(constant->lr_at(123), 0.3);
}

TEST(Schedules, OneCycleLrAndMomentumPeaks) {
  auto one = LrSchedule::create({"OneCycle", {{"cycle_min_lr", 0.001}, {"cycle_max_lr", 0.011}, {"cycle_first_step_size", 10},
                                              {"cycle_second_step_size", 30}, {"cycle_min_mom", 0.8}, {"cycle_max_mom", 0.9},
                                              {"decay_lr_rate", 0.5}, {"decay_step_size", 4}}}, 0.1, "scheduler");
  EXPECT_DOUBLE_EQ(one->lr_at(-1), 0.001);
  EXPECT_NEAR(one->betas_at(-1)->first, 0.8, 1e-15);
  EXPECT_NEAR(one->lr_at(9), 0.011, 1e-15);          // (9 + 1) / 40 = the peak at step_ratio 1/4
  EXPECT_NEAR(one->betas_at(9)->first, 0.8, 1e-15);  // momentum at its minimum at the lr peak
  EXPECT_NEAR(one->betas_at(9)->second, 0.99, 1e-15);
  EXPECT_NEAR(one->lr_at(4), 0.001 + 0.01 * 0.5, 1e-15);   // halfway up
  EXPECT_NEAR(one->lr_at(24), 0.001 + 0.01 * 0.5, 1e-15);  // halfway down the 30-step side
  EXPECT_NEAR(one->betas_at(24)->first, 0.85, 1e-15);
  EXPECT_NEAR(one->lr_at(39 + 8), 0.001 / (1 + 0.5 * 2.0), 1e-15);  // decay: 8 steps = 2 intervals
}

TEST(GradClip, DeepSpeedCoefficient) {
  EXPECT_NEAR(clip_coefficient(10.0, 1.0), 1.0 / (10.0 + 1e-6), 1e-15);
  EXPECT_GT(clip_coefficient(0.5, 1.0), 1.0);  // not applied by the engine when >= 1
}

}  // namespace
}  // namespace zero::optim
