// Mixed precision through the engine: 16-bit parameter storage with f32 master weights, the same
// numbers at every ZeRO stage, 16-bit values exactly representable where they are stored, the
// memory that 16-bit storage promises, overflow skipping, and training curves that stay close
// to f32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "comm/self_comm.h"
#include "core/half.h"
#include "engine/data_sources.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace mixed_precision_test {
using namespace zero_test;

EngineSettings bf16_settings(int stage, int64_t gas) {
  EngineSettings s = zero_settings(stage, 2, gas, 1);
  s.bf16.enabled = true;
  return s;
}

TEST(MixedPrecision, ResolvesDeepSpeedsDtypes) {
  EngineSettings s = zero_settings(0, 2, 1, 1);
  s.bf16.enabled = true;
  sharding::Precision p = resolve_precision(s);
  EXPECT_EQ(p.param, DType::kBF16);
  EXPECT_EQ(p.accum, DType::kF32);  // bf16 without ZeRO: fp32 accumulation
  EXPECT_EQ(p.comm, DType::kBF16);
  s.zero.stage = 2;
  p = resolve_precision(s);
  EXPECT_EQ(p.accum, DType::kBF16);
  s.data_types.grad_accum_dtype = config::PrecisionType::kFp32;
  s.communication_data_type = config::PrecisionType::kFp32;
  p = resolve_precision(s);
  EXPECT_EQ(p.accum, DType::kF32);
  EXPECT_EQ(p.comm, DType::kF32);
  s.fp16.enabled = true;
  EXPECT_THROW(resolve_precision(s), ConfigError);
}

TEST(MixedPrecision, Bf16StagesAgreeBitForBit) {
  // With f32 accumulation and communication every stage rounds at the same places. One
  // micro-batch a step: stage 0 holds its gradients in bf16 and takes their norm as it stores
  // them (sharding/held_unit_gradients.h); two: in f32, summed.
  for (int64_t gas : {1, 2}) {
    auto make = [gas](int stage) {
      EngineSettings s = bf16_settings(stage, gas);
      s.data_types.grad_accum_dtype = config::PrecisionType::kFp32;
      s.communication_data_type = config::PrecisionType::kFp32;
      return s;
    };
    backend::CpuBackend cpu0;
    comm::SelfComm self;
    Engine reference(small_model("llama", cpu0), make(0), self);
    std::vector<std::vector<double>> losses;
    for (int step = 0; step < 5; ++step) losses.push_back(train_step(reference, step, 0, 8));
    const std::vector<float> expected = to_vector(reference.gather_parameters());
    for (int stage = 1; stage <= 3; ++stage) {
      backend::CpuBackend cpu;
      Engine engine(small_model("llama", cpu), make(stage), self);
      for (int step = 0; step < 5; ++step) {
        EXPECT_EQ(train_step(engine, step, 0, 8), losses[step]) << "stage " << stage << " gas " << gas;
      }
      EXPECT_EQ(to_vector(engine.gather_parameters()), expected) << "stage " << stage << " gas " << gas;
    }
  }
}

TEST(MixedPrecision, ParametersAreStoredIn16Bits) {
  for (int stage : {0, 3}) {
    backend::CpuBackend cpu;
    comm::SelfComm self;
    const MemoryStats before = cpu.allocator().stats();
    Engine engine(small_model("gpt2", cpu), bf16_settings(stage, 1), self);
    for (int step = 0; step < 3; ++step) train_step(engine, step, 0, 8);
    const MemoryStats after = cpu.allocator().stats();
    const auto grown = [&](MemoryCategory c) {
      return static_cast<int64_t>(after.live(c)) - static_cast<int64_t>(before.live(c));
    };
    const int64_t psi = stage == 0 ? engine.model().num_parameters()
                                   : engine.zero_stage().layout().partition_numel();
    EXPECT_EQ(grown(MemoryCategory::kParams), 2 * psi) << "stage " << stage;
    // fp32 master weights + Adam's two moments.
    EXPECT_EQ(grown(MemoryCategory::kOptimizer), 12 * psi) << "stage " << stage;
    // Every value the model computes with is a bf16 value.
    for (float v : to_vector(engine.gather_parameters())) {
      ASSERT_EQ(round_to_bf16(v), v);
    }
  }
}

TEST(MixedPrecision, Bf16OverflowCheckSkipsTheStep) {
  EngineSettings s = bf16_settings(2, 1);
  s.bf16.check_grad_overflow = true;
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model("gpt2", cpu), s, self);
  engine.inject_gradient_overflow(3);
  train_step(engine, 0, 0, 8);
  train_step(engine, 1, 0, 8);
  const std::vector<float> before = to_vector(engine.gather_parameters());
  const double lr_before = engine.get_lr();
  train_step(engine, 2, 0, 8);  // step 3: overflow
  EXPECT_TRUE(engine.last_step_skipped());
  EXPECT_EQ(engine.skipped_steps(), 1);
  EXPECT_EQ(engine.global_steps(), 3);
  EXPECT_EQ(to_vector(engine.gather_parameters()), before);
  EXPECT_EQ(engine.get_lr(), lr_before);  // the schedule did not step
  train_step(engine, 3, 0, 8);
  EXPECT_FALSE(engine.last_step_skipped());
  EXPECT_NE(to_vector(engine.gather_parameters()), before);
}

// 200 steps on the Markov source: the bf16 and fp16 loss curves stay within 2% of f32's
// (averaged over windows of 20 steps, which smooths per-batch noise but not drift). fp16 uses
// DeepSpeed's default dynamic scaling from 2^16 (any skipped steps stay in the curve).
enum class Mode { kF32, kBf16, kFp16 };

struct Curve {
  std::vector<double> losses;
  int64_t skipped = 0;
};

Curve curve(Mode mode, int stage) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  model::TransformerConfig c = small_config("gpt2");
  c.vocab_size = 16;
  c.max_position_embeddings = 32;
  auto net = model::build_transformer(c, cpu, DType::kF32);
  model::init_parameters(*net, 5);
  EngineSettings s = zero_settings(stage, 8, 1, 1);
  // 5e-3: at 1e-2 this model sits at the edge of stability, where escaping the unigram plateau
  // is chaotic and bf16's 8-bit activations lag f32 by up to 2.1% (measured); at 5e-3 f32 learns
  // faster and both 16-bit curves track it within 0.03%.
  s.optimizer_params = {{"lr", 5e-3}};
  s.scheduler_type.clear();
  s.bf16.enabled = mode == Mode::kBf16;
  s.fp16.enabled = mode == Mode::kFp16;
  Engine engine(std::move(net), s, self);
  auto source = std::make_shared<data::MarkovSource>(16, 2, 3, 7);
  SyntheticData data(source, 0, 1, 0);
  Curve out;
  for (int i = 0; i < 200; ++i) {
    out.losses.push_back(engine.train_batch([&] { return data.next(8, 32); }));
  }
  out.skipped = engine.skipped_steps();
  return out;
}

void expect_within_two_percent(const std::vector<double>& f32, const std::vector<double>& got,
                               const std::string& what) {
  double worst = 0;
  for (size_t w = 0; w < 200; w += 20) {
    double a = 0, b = 0;
    for (size_t i = w; i < w + 20; ++i) {
      a += f32[i];
      b += got[i];
    }
    worst = std::max(worst, std::abs(b - a) / a);
    EXPECT_LE(std::abs(b - a) / a, 0.02) << what << " steps " << w << ".." << w + 19;
  }
  std::printf("%s: largest 20-step window difference from f32 %.3f%%\n", what.c_str(), 100 * worst);
  EXPECT_LT(got.back(), 0.95 * got.front()) << what;  // it learned (past the unigram plateau)
}

TEST(MixedPrecision, Bf16AndFp16LossCurvesStayWithinTwoPercentOfF32) {
  const Curve f32 = curve(Mode::kF32, 0);
  expect_within_two_percent(f32.losses, curve(Mode::kBf16, 3).losses, "bf16 stage 3");
  const Curve fp16 = curve(Mode::kFp16, 2);
  std::printf("fp16: %lld of 200 steps skipped while the scale settled\n",
              static_cast<long long>(fp16.skipped));
  expect_within_two_percent(f32.losses, fp16.losses, "fp16 stage 2");
}

}  // namespace mixed_precision_test
}  // namespace zero::engine
