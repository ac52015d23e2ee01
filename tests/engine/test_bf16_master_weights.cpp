// DeepSpeed's low-precision options under ZeRO: bf16_master_weights_and_grads (the optimizer's
// weights and gradient partition in bf16) and bf16_optimizer_states (its moments in bf16), plus
// zero.cpp's stochastic rounding of updates into bf16 master weights. Memory shrinks as promised,
// every stage computes the same numbers, checkpoints resume bit for bit, and a run whose updates
// are below half a bf16 spacing stalls with round-to-nearest but moves with stochastic rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "comm/self_comm.h"
#include "core/half.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace bf16_master_test {
using namespace zero_test;

constexpr int64_t kSeqLen = 8;

EngineSettings low_precision(int stage, bool states, bool stochastic) {
  EngineSettings s = zero_settings(stage, 2, 1, 1);
  s.bf16.enabled = true;
  s.bf16.bf16_master_weights_and_grads = true;
  s.bf16.bf16_optimizer_states = states;
  s.bf16.stochastic_rounding = stochastic;
  return s;
}

TEST(Bf16MasterWeights, ModelStatesTakeTheBytesDeepSpeedPromises) {
  // Per element of the partition: 2 (bf16 master) + 2 x 4 (f32 Adam moments) = 10 bytes, or
  // 2 + 2 x 2 = 6 with bf16 optimizer states (12 with fp32 master weights).
  for (int stage : {1, 2, 3}) {
    for (bool states : {false, true}) {
      backend::CpuBackend cpu;
      comm::SelfComm self;
      const MemoryStats before = cpu.allocator().stats();
      Engine engine(small_model("gpt2", cpu), low_precision(stage, states, false), self);
      for (int step = 0; step < 2; ++step) train_step(engine, step, 0, kSeqLen);
      const MemoryStats after = cpu.allocator().stats();
      const int64_t psi = engine.zero_stage().layout().partition_numel();
      const int64_t grown = static_cast<int64_t>(after.live(MemoryCategory::kOptimizer)) -
                            static_cast<int64_t>(before.live(MemoryCategory::kOptimizer));
      EXPECT_EQ(grown, (states ? 6 : 10) * psi) << "stage " << stage << " states " << states;
      // The transient f32 working copies are gone after the step.
      EXPECT_EQ(after.live(MemoryCategory::kWorkspace), before.live(MemoryCategory::kWorkspace))
          << "stage " << stage;
    }
  }
}

TEST(Bf16MasterWeights, RequiresZeroAndBf16) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  EXPECT_THROW(Engine(small_model("gpt2", cpu), low_precision(0, false, false), self), ConfigError);
  EngineSettings s = zero_settings(2, 2, 1, 1);
  s.bf16.bf16_optimizer_states = true;  // without bf16 master weights
  EXPECT_THROW(Engine(small_model("gpt2", cpu), s, self), ConfigError);
  // Settings built in code, not parsed from a config, are held to the same rules: bf16 master
  // weights without bf16 training, and stochastic rounding without bf16 master weights.
  EngineSettings no_bf16 = low_precision(2, false, false);
  no_bf16.bf16.enabled = false;
  EXPECT_THROW(Engine(small_model("gpt2", cpu), no_bf16, self), ConfigError);
  EngineSettings rounding = zero_settings(2, 2, 1, 1);
  rounding.bf16.enabled = true;
  rounding.bf16.stochastic_rounding = true;
  EXPECT_THROW(Engine(small_model("gpt2", cpu), rounding, self), ConfigError);
}

struct TrainedRun {
  std::vector<std::vector<double>> losses;
  std::vector<float> params;
};

TrainedRun train(const EngineSettings& s, int steps) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model("llama", cpu), s, self);
  TrainedRun r;
  for (int step = 0; step < steps; ++step) r.losses.push_back(train_step(engine, step, 0, kSeqLen));
  r.params = to_vector(engine.gather_parameters());
  return r;
}

TEST(Bf16MasterWeights, StagesAgreeBitForBitWithStochasticRounding) {
  // Stochastic rounding draws each element's bits from its place in the model, so the
  // partitioning does not change them. f32 accumulation and communication keep every other
  // rounding site identical across stages.
  auto make = [](int stage) {
    EngineSettings s = low_precision(stage, true, true);
    s.data_types.grad_accum_dtype = config::PrecisionType::kFp32;
    s.communication_data_type = config::PrecisionType::kFp32;
    return s;
  };
  const TrainedRun reference = train(make(1), 6);
  for (int stage : {2, 3}) {
    const TrainedRun r = train(make(stage), 6);
    EXPECT_EQ(r.losses, reference.losses) << "stage " << stage;
    EXPECT_EQ(r.params, reference.params) << "stage " << stage;
  }
  for (float v : reference.params) ASSERT_EQ(round_to_bf16(v), v);
}

TEST(Bf16MasterWeights, CheckpointsResumeBitForBit) {
  const auto dir = std::filesystem::temp_directory_path() / "zero_bf16_master_resume";
  std::filesystem::remove_all(dir);
  const EngineSettings s = low_precision(2, true, true);
  const TrainedRun whole = train(s, 6);
  backend::CpuBackend cpu_a;
  comm::SelfComm self;
  {
    Engine first(small_model("llama", cpu_a), s, self);
    for (int step = 0; step < 3; ++step) train_step(first, step, 0, kSeqLen);
    first.save_checkpoint(dir.string());
  }
  backend::CpuBackend cpu_b;
  // Loaded at another stage: checkpoints hold f32 values under logical names.
  EngineSettings other = low_precision(3, true, true);
  Engine resumed(small_model("llama", cpu_b), other, self);
  resumed.load_checkpoint(dir.string());
  for (int step = 3; step < 6; ++step) {
    EXPECT_EQ(train_step(resumed, step, 0, kSeqLen), whole.losses[step]) << "step " << step + 1;
  }
  EXPECT_EQ(to_vector(resumed.gather_parameters()), whole.params);
  std::filesystem::remove_all(dir);
}

// Adam moves each weight by about lr per step. At lr 1e-5 that is below half of bf16's spacing
// for every weight of magnitude >= 2^-7 (spacing >= 2^-14, half of it 3.1e-5), so round-to-
// nearest puts each update back where it was: bf16 master weights stall. Stochastic rounding
// keeps the update in expectation; fp32 master weights accumulate it exactly. Measured over
// those weights after 30 steps: the displacement's projection on the fp32-master run's
// displacement (1 = the same progress, 0 = none; stochastic rounding adds noise orthogonal to it).
std::vector<float> weights_after(bool bf16_master, bool stochastic, int steps) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  EngineSettings s = zero_settings(2, 2, 1, 1);
  s.bf16.enabled = true;
  s.bf16.bf16_master_weights_and_grads = bf16_master;
  s.bf16.stochastic_rounding = stochastic;
  s.optimizer_params = {{"lr", 1e-5}, {"weight_decay", 0.0}};
  s.scheduler_type.clear();
  s.gradient_clipping = 0.0;
  Engine engine(small_model("gpt2", cpu), s, self);
  for (int step = 0; step < steps; ++step) train_step(engine, step, 0, kSeqLen);
  return to_vector(engine.gather_parameters());
}

TEST(Bf16MasterWeights, StochasticRoundingKeepsUpdatesThatRoundToNearestLoses) {
  const std::vector<float> start = weights_after(false, false, 0);
  const std::vector<float> fp32_master = weights_after(false, false, 30);
  const std::vector<float> nearest = weights_after(true, false, 30);
  const std::vector<float> stochastic = weights_after(true, true, 30);
  auto progress = [&](const std::vector<float>& run) {
    double dot = 0, norm = 0;
    for (size_t i = 0; i < start.size(); ++i) {
      if (std::abs(start[i]) < 0x1p-7f) continue;
      const double reference = static_cast<double>(fp32_master[i]) - start[i];
      dot += (static_cast<double>(run[i]) - start[i]) * reference;
      norm += reference * reference;
    }
    return dot / norm;
  };
  std::printf("progress in 30 steps at lr 1e-5, relative to fp32 master weights: bf16 master "
              "round-to-nearest %.3f, bf16 master stochastic rounding %.3f\n",
              progress(nearest), progress(stochastic));
  EXPECT_LT(std::abs(progress(nearest)), 0.1);
  EXPECT_NEAR(progress(stochastic), 1.0, 0.25);
}

}  // namespace bf16_master_test
}  // namespace zero::engine
