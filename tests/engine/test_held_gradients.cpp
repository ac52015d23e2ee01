// In 16-bit training at ZeRO stages 0-1 the gradients are held unit by unit
// (sharding/held_unit_gradients.h): no gradient bytes exist during a window's first forward -
// the memory a flat accumulator would add to the activation peak - they appear as backward
// finishes units, carry across the accumulation window, and are gone after the step. The
// numbers are those of every other stage (MixedPrecision.Bf16StagesAgreeBitForBit).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backend/profiling/profiling_backend.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace held_gradients_test {
using namespace zero_test;

constexpr int64_t kMicro = 2;
constexpr int64_t kSeqLen = 8;

class HeldGradients : public ::testing::TestWithParam<int> {};

TEST_P(HeldGradients, ExistOnlyFromBackwardToTheStep) {
  const int stage = GetParam();
  backend::CpuBackend cpu;
  comm::SelfComm self;
  const auto gradient_bytes = [&] { return cpu.allocator().stats().live(MemoryCategory::kGrads); };
  const size_t before_engine = gradient_bytes();
  EngineSettings s = zero_settings(stage, kMicro, 2, 1);
  s.bf16.enabled = true;
  s.data_types.grad_accum_dtype = config::PrecisionType::kFp32;
  Engine engine(small_model("llama", cpu), s, self);
  const int64_t vocab = engine.model().config()->vocab_size;
  const size_t at_start = gradient_bytes();
  EXPECT_EQ(at_start, before_engine) << "a gradient buffer outlives the steps";
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<size_t> before_forward;
    int64_t index = 0;
    engine.train_batch([&] {
      before_forward.push_back(gradient_bytes());
      return batch_for(step, index++, kMicro, kSeqLen, vocab);
    });
    ASSERT_EQ(before_forward.size(), 2u);
    // The window's first forward runs with no gradients; its second with the first
    // micro-batch's, every unit's (at least 4 bytes per parameter).
    EXPECT_EQ(before_forward[0], at_start) << "step " << step;
    EXPECT_GE(before_forward[1], at_start + 4 * static_cast<size_t>(engine.model().num_parameters()))
        << "step " << step;
    EXPECT_EQ(gradient_bytes(), at_start) << "after step " << step;
  }
}

// One bf16 step of the small Llama at `stage` on one rank with one micro-batch, run through a
// ProfilingBackend: the ops it ran and how far the gradients' bytes rose above what the engine
// held before the step.
struct ProfiledStep {
  backend::KernelProfile profile;
  size_t gradient_peak = 0;  // bytes
  int64_t units = 0;
  size_t params = 0;  // elements
};

ProfiledStep profiled_one_micro_batch_step(int stage) {
  backend::ProfilingBackend profiler(std::make_unique<backend::CpuBackend>());
  comm::SelfComm self;
  EngineSettings s = zero_settings(stage, kMicro, 1, 1);
  s.bf16.enabled = true;
  s.data_types.grad_accum_dtype = config::PrecisionType::kFp32;
  Engine engine(small_model("llama", profiler), s, self);
  const int64_t vocab = engine.model().config()->vocab_size;
  Allocator& allocator = profiler.allocator();
  const size_t at_start = allocator.stats().live(MemoryCategory::kGrads);
  allocator.reset_peaks();
  int64_t index = 0;
  profiler.start_profile();
  engine.train_batch([&] { return batch_for(0, index++, kMicro, kSeqLen, vocab); });
  ProfiledStep step;
  step.profile = profiler.stop_profile(1, 1.0);
  step.gradient_peak = allocator.stats().peak(MemoryCategory::kGrads) - at_start;
  step.units = static_cast<int64_t>(engine.model().units().size());
  step.params = static_cast<size_t>(engine.model().num_parameters());
  return step;
}

// Stage 0 on one rank, one micro-batch a step: the gradient norm adds the sums of squares taken
// as each unit's gradient was stored and runs no sum_squares over a gradient (more micro-batches
// or a loss scale would scale the gradients after they are stored); stage 1 reduces first, so
// it sums the reduced gradients. Both give the same step
// (MixedPrecision.Bf16StagesAgreeBitForBit). The profile names the ops the step ran.
TEST_P(HeldGradients, OnOneRankAtStage0TheNormReadsTheSumsTakenAsTheyWereStored) {
  const int stage = GetParam();
  const ProfiledStep step = profiled_one_micro_batch_step(stage);
  std::map<std::string, int64_t> calls;
  for (const backend::KernelRecord& r : step.profile.records) {
    // sum_squares of one element is a loss-scaler read, not a gradient's.
    if (r.op == "sum_squares" && r.shape == "x[1]") continue;
    calls[r.op] += r.calls;
  }
  if (stage == 0) {
    // Stored in bf16 as they are rounded (OneMicroBatchOnOneRankHoldsThemInTheParametersDtype).
    EXPECT_EQ(calls["copy (+sum_squares)"], step.units);
    EXPECT_EQ(calls["round_in_place (+sum_squares)"], 0);
    EXPECT_EQ(calls["add_rounded (+sum_squares)"], 0);
    EXPECT_EQ(calls["sum_squares"], 0);
  } else {
    EXPECT_EQ(calls["round_in_place (+sum_squares)"], 0);
    EXPECT_GT(calls["sum_squares"], 0);
  }
}

// Stage 0 on one rank with one micro-batch: nothing adds to or scales a gradient once stored,
// so it is stored in the parameters' dtype (2 bytes an element, not 4) and the optimizer reads
// it so; stage 1 reduces the f32 gradients into its partition. The losses are those of every
// stage (MixedPrecision.Bf16StagesAgreeBitForBit runs one micro-batch too).
TEST_P(HeldGradients, OneMicroBatchOnOneRankHoldsThemInTheParametersDtype) {
  const int stage = GetParam();
  const ProfiledStep step = profiled_one_micro_batch_step(stage);
  int64_t bf16_updates = 0, updates = 0;
  for (const backend::KernelRecord& r : step.profile.records) {
    if (r.op.rfind("optimizer_update", 0) != 0) continue;
    updates += r.calls;
    if (r.shape.find("grads bf16") != std::string::npos) bf16_updates += r.calls;
  }
  EXPECT_GT(updates, 0);
  if (stage == 0) {
    EXPECT_EQ(bf16_updates, updates);
    // Every unit's bf16 gradient, and f32 micro-batch buffers only while backward fills them.
    EXPECT_GE(step.gradient_peak, 2 * step.params);
    EXPECT_LT(step.gradient_peak, 4 * step.params);
  } else {
    EXPECT_EQ(bf16_updates, 0);
    EXPECT_GE(step.gradient_peak, 4 * step.params);
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, HeldGradients, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return "stage" + std::to_string(param_info.param);
                         });

}  // namespace held_gradients_test
}  // namespace zero::engine
