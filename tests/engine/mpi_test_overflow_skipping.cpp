// mpi-ranks: 2 4
// Overflow handling across processes: an overflow injected on rank 0 only (NaN in its gradients)
// must skip the step on every rank - the overflow flag is the all-reduced gradient norm - and the
// loss scale must follow the same trajectory everywhere. Every ZeRO stage at N ranks matches one
// rank at stage 0 accumulating the same N micro-batches, step for step. fp16 with dynamic
// scaling, and bf16 with check_grad_overflow. Accumulation and communication in f32 keep the
// rounding sites identical to the single rank's, so the comparison is bit for bit.
#include <gtest/gtest.h>

#include "comm/self_comm.h"
#include "comm/world.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 9;
constexpr int64_t kSeqLen = 8;
const std::vector<int64_t> kOverflowSteps = {2, 3, 7};

EngineSettings settings(bool fp16, int stage, int64_t gas, int world) {
  EngineSettings s = zero_settings(stage, 2, gas, world);
  if (fp16) {
    s.fp16.enabled = true;
    s.fp16.initial_scale_power = 8;  // no overflows of its own: only the injected ones
    s.fp16.loss_scale_window = 3;
    s.fp16.hysteresis = 2;
  } else {
    s.bf16.enabled = true;
    s.bf16.check_grad_overflow = true;
  }
  s.data_types.grad_accum_dtype = config::PrecisionType::kFp32;
  s.communication_data_type = config::PrecisionType::kFp32;
  return s;
}

struct Trace {
  std::vector<std::vector<double>> losses;
  std::vector<double> scale;
  std::vector<bool> skipped;
  std::vector<float> params;
};

Trace trace(Engine& engine, int rank) {
  for (int64_t step : kOverflowSteps) engine.inject_gradient_overflow(step);
  Trace t;
  for (int step = 0; step < kSteps; ++step) {
    t.losses.push_back(train_step(engine, step, rank, kSeqLen));
    t.scale.push_back(engine.loss_scale());
    t.skipped.push_back(engine.last_step_skipped());
  }
  t.params = to_vector(engine.gather_parameters());
  return t;
}

class OverflowSkipping : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(OverflowSkipping, EveryRankSkipsTheStepsOneRankOverflowed) {
  const auto& [fp16, stage] = GetParam();
  comm::Comm& world = comm::world();
  const int n = world.world_size();

  backend::CpuBackend ref_cpu;
  comm::SelfComm self;
  Engine reference_engine(small_model("gpt2", ref_cpu), settings(fp16, 0, n, 1), self);
  const Trace reference = trace(reference_engine, 0);
  ASSERT_EQ(reference_engine.skipped_steps(), 3);

  backend::CpuBackend cpu;
  Engine engine(small_model("gpt2", cpu), settings(fp16, stage, 1, n), world);
  const Trace got = trace(engine, world.rank());
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(got.losses[step][0], reference.losses[step][world.rank()]) << "step " << step + 1;
    EXPECT_EQ(got.skipped[step], reference.skipped[step]) << "step " << step + 1;
    EXPECT_EQ(got.scale[step], reference.scale[step]) << "step " << step + 1;
  }
  EXPECT_EQ(got.params, reference.params);
  EXPECT_EQ(engine.skipped_steps(), 3);
  EXPECT_EQ(engine.global_steps(), kSteps);
}

INSTANTIATE_TEST_SUITE_P(
    PrecisionsAndStages, OverflowSkipping,
    ::testing::Combine(::testing::Bool(), ::testing::Values(0, 1, 2, 3)),
    [](const auto& param_info) {
      return std::string(std::get<0>(param_info.param) ? "fp16" : "bf16") + "_stage" +
             std::to_string(std::get<1>(param_info.param));
    });

}  // namespace
}  // namespace zero::engine
