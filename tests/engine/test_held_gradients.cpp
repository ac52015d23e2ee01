// In 16-bit training at ZeRO stages 0-1 the gradients are held unit by unit
// (sharding/held_unit_gradients.h): no gradient bytes exist during a window's first forward -
// the memory a flat accumulator would add to the activation peak - they appear as backward
// finishes units, carry across the accumulation window, and are gone after the step. The
// numbers are those of every other stage (MixedPrecision.Bf16StagesAgreeBitForBit).
#include <gtest/gtest.h>

#include <vector>

#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
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

INSTANTIATE_TEST_SUITE_P(Stages, HeldGradients, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return "stage" + std::to_string(param_info.param);
                         });

}  // namespace
}  // namespace zero::engine
