// fp16 training through the engine: the loss scaler's trajectory under injected overflows, skipped
// steps that change nothing, the same numbers at every ZeRO stage, the stop at the minimum scale,
// scaler state across a checkpoint, and a case built to underflow where loss scaling is what
// keeps the gradients alive.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "comm/self_comm.h"
#include "core/half.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace fp16_training_test {
using namespace zero_test;

constexpr int64_t kSeqLen = 8;

EngineSettings fp16_settings(int stage, int64_t gas) {
  EngineSettings s = zero_settings(stage, 2, gas, 1);
  s.fp16.enabled = true;
  // 2^8: far enough below fp16's 65504 that these small models do not overflow on their own,
  // so every overflow in these tests is an injected one.
  s.fp16.initial_scale_power = 8;
  s.fp16.loss_scale_window = 3;
  s.fp16.hysteresis = 2;
  return s;
}

struct Trace {
  std::vector<double> scale;  // loss scale after each step
  std::vector<bool> skipped;
  std::vector<std::vector<double>> losses;
  std::vector<float> params;
};

Trace run(Engine& engine, int steps, int first_step = 0) {
  Trace t;
  for (int step = first_step; step < first_step + steps; ++step) {
    t.losses.push_back(train_step(engine, step, 0, kSeqLen));
    t.scale.push_back(engine.loss_scale());
    t.skipped.push_back(engine.last_step_skipped());
  }
  t.params = to_vector(engine.gather_parameters());
  return t;
}

TEST(Fp16Training, InjectedOverflowsFollowDeepSpeedsRules) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model("gpt2", cpu), fp16_settings(0, 1), self);
  for (int64_t step : {3, 4, 9}) engine.inject_gradient_overflow(step);
  std::vector<float> before_skip;
  double lr_before_skip = 0;
  Trace t;
  for (int step = 0; step < 10; ++step) {
    if (step == 2) {
      before_skip = to_vector(engine.gather_parameters());
      lr_before_skip = engine.get_lr();
    }
    train_step(engine, step, 0, kSeqLen);
    t.scale.push_back(engine.loss_scale());
    t.skipped.push_back(engine.last_step_skipped());
    if (step == 3) {
      // Two skipped steps: nothing moved, the schedule did not advance.
      EXPECT_EQ(to_vector(engine.gather_parameters()), before_skip);
      EXPECT_EQ(engine.get_lr(), lr_before_skip);
    }
  }
  // By hand (window 3, hysteresis 2, no consecutive hysteresis), iteration i = step - 1:
  //  1, 2: clean; (i - last_overflow) = 1, 2 -> no doubling          256, 256
  //  3: overflow, hysteresis 2 -> 1, skipped                           256
  //  4: overflow, hysteresis 1 -> halve, skipped                       128
  //  5, 6: clean (i - 3 = 1, 2)                                        128, 128
  //  7: clean, i - 3 = 3: doubles and refills hysteresis               256
  //  8: clean (4)                                                      256
  //  9: overflow, hysteresis 2 -> 1, skipped                           256
  // 10: clean (1)                                                      256
  EXPECT_EQ(t.scale, (std::vector<double>{256, 256, 256, 128, 128, 128, 256, 256, 256, 256}));
  EXPECT_EQ(t.skipped,
            (std::vector<bool>{false, false, true, true, false, false, false, false, true, false}));
  EXPECT_EQ(engine.skipped_steps(), 3);
  EXPECT_EQ(engine.global_steps(), 10);
  EXPECT_EQ(engine.global_samples(), 20);
}

TEST(Fp16Training, EveryStageMatchesStageZeroStepForStep) {
  // With f32 accumulation and communication every stage rounds at the same places (the
  // micro-batch gradient in fp16, the parameters in fp16), so the comparison is bit for bit.
  auto make = [](int stage) {
    EngineSettings s = fp16_settings(stage, 2);
    s.data_types.grad_accum_dtype = config::PrecisionType::kFp32;
    s.communication_data_type = config::PrecisionType::kFp32;
    return s;
  };
  auto traced = [&](int stage) {
    backend::CpuBackend cpu;
    comm::SelfComm self;
    Engine engine(small_model("llama", cpu), make(stage), self);
    for (int64_t step : {2, 3, 7}) engine.inject_gradient_overflow(step);
    return run(engine, 9);
  };
  const Trace reference = traced(0);
  EXPECT_EQ(std::count(reference.skipped.begin(), reference.skipped.end(), true), 3);
  for (int stage = 1; stage <= 3; ++stage) {
    const Trace t = traced(stage);
    EXPECT_EQ(t.losses, reference.losses) << "stage " << stage;
    EXPECT_EQ(t.scale, reference.scale) << "stage " << stage;
    EXPECT_EQ(t.skipped, reference.skipped) << "stage " << stage;
    EXPECT_EQ(t.params, reference.params) << "stage " << stage;
  }
  // Every value the model computes with is an fp16 value.
  for (float v : reference.params) ASSERT_EQ(round_to_f16(v), v);
}

TEST(Fp16Training, OverflowAtTheMinimumScaleStopsWithADiagnosis) {
  EngineSettings s = fp16_settings(2, 1);
  s.fp16.hysteresis = 1;
  s.fp16.min_loss_scale = 128;
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model("gpt2", cpu), s, self);
  engine.inject_gradient_overflow(2);
  engine.inject_gradient_overflow(4);
  train_step(engine, 0, 0, kSeqLen);
  train_step(engine, 1, 0, kSeqLen);  // 256 -> 128, the minimum
  EXPECT_EQ(engine.loss_scale(), 128);
  train_step(engine, 2, 0, kSeqLen);
  try {
    train_step(engine, 3, 0, kSeqLen);
    FAIL() << "an overflow at the minimum loss scale did not stop training";
  } catch (const NumericError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("step 4"), std::string::npos) << m;
    EXPECT_NE(m.find("2: 256 overflow"), std::string::npos) << m;
    // The poisoned element is the first one: the token embedding.
    EXPECT_NE(m.find("transformer.wte.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("bf16"), std::string::npos) << m;
  }
}

TEST(Fp16Training, ScalerStateResumesBitForBit) {
  const auto dir = std::filesystem::temp_directory_path() / "zero_fp16_resume";
  std::filesystem::remove_all(dir);
  auto make = [](backend::CpuBackend& cpu, comm::SelfComm& self) {
    auto engine = std::make_unique<Engine>(small_model("gpt2", cpu), fp16_settings(1, 1), self);
    for (int64_t step : {2, 5, 6}) engine->inject_gradient_overflow(step);
    return engine;
  };
  backend::CpuBackend cpu_a;
  comm::SelfComm self;
  auto straight = make(cpu_a, self);
  const Trace whole = run(*straight, 8);

  backend::CpuBackend cpu_b;
  auto first = make(cpu_b, self);
  run(*first, 3);
  first->save_checkpoint(dir.string());
  backend::CpuBackend cpu_c;
  auto resumed = make(cpu_c, self);
  resumed->load_checkpoint(dir.string());
  EXPECT_EQ(resumed->loss_scale(), whole.scale[2]);
  const Trace rest = run(*resumed, 5, 3);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(rest.losses[i], whole.losses[3 + i]) << "step " << 4 + i;
    EXPECT_EQ(rest.scale[i], whole.scale[3 + i]) << "step " << 4 + i;
  }
  EXPECT_EQ(rest.params, whole.params);
  EXPECT_EQ(resumed->skipped_steps(), straight->skipped_steps());
  std::filesystem::remove_all(dir);
}

// A case built to underflow: the final norm's weight is tiny (2^-20), so nearly every gradient
// that reaches the transformer blocks is below half of fp16's smallest subnormal (2^-25). Stored
// in fp16 without scaling they round to zero and the first step leaves the blocks where they
// were; the dynamic scaler's 2^16 lifts them into range and (nearly) every block parameter moves,
// as in fp32 (the few that do not have gradients below 2^-41 even in f32). One step from the same start, no LR warmup: Adam moves every parameter whose
// gradient is nonzero, so "moved" is exactly "its gradient survived".
struct UnderflowRun {
  double block_params_moved;  // fraction of transformer-block parameters the step changed
  int64_t block_params;
};

UnderflowRun underflow_case(bool fp16, double static_scale) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  auto net = small_model("gpt2", cpu);
  model::Parameter& norm = net->parameter("transformer.ln_f.weight");
  cpu.fill(norm.value, std::ldexp(1.0, -20));
  int64_t block_begin = -1, block_end = -1;
  for (model::Parameter* p : net->parameters()) {
    if (p->spec.name.rfind("transformer.h.", 0) != 0) continue;
    if (block_begin < 0) block_begin = p->flat_offset;
    block_end = p->flat_offset + p->numel();
  }
  EngineSettings s = zero_settings(0, 2, 1, 1);
  s.gradient_clipping = 0.0;
  s.optimizer_params = {{"lr", 1e-2}, {"weight_decay", 0.0}};  // decay would move them anyway
  s.scheduler_type.clear();
  s.fp16.enabled = fp16;
  s.fp16.loss_scale = static_scale;
  Engine engine(std::move(net), s, self);
  const std::vector<float> before = to_vector(engine.gather_parameters());
  train_step(engine, 0, 0, kSeqLen);
  EXPECT_FALSE(engine.last_step_skipped());
  const std::vector<float> after = to_vector(engine.gather_parameters());
  int64_t moved = 0;
  for (int64_t i = block_begin; i < block_end; ++i) moved += after[i] != before[i] ? 1 : 0;
  return {static_cast<double>(moved) / static_cast<double>(block_end - block_begin),
          block_end - block_begin};
}

TEST(Fp16Training, WithoutLossScalingGradientsUnderflowAndScalingRecoversThem) {
  const UnderflowRun f32 = underflow_case(false, 0);
  const UnderflowRun unscaled = underflow_case(true, 1.0);   // static scale 1: no scaling
  const UnderflowRun dynamic = underflow_case(true, 0.0);    // dynamic, from 2^16
  std::printf("of %lld block parameters the first step moved: f32 %.4f, fp16 unscaled %.4f, "
              "fp16 dynamic %.4f\n", static_cast<long long>(f32.block_params),
              f32.block_params_moved, unscaled.block_params_moved, dynamic.block_params_moved);
  EXPECT_GT(f32.block_params_moved, 0.9);
  EXPECT_LT(unscaled.block_params_moved, 0.02);
  EXPECT_GT(dynamic.block_params_moved, 0.95);
}

}  // namespace fp16_training_test
}  // namespace zero::engine
