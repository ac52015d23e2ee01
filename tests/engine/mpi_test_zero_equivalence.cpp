// mpi-ranks: 2 3 4
// ZeRO equivalence across processes: N ranks x stages 0-3 x two model families (and Mixtral's
// experts at stages 1 and 3), 10 steps, give exactly the losses and final parameters of one rank
// at stage 0 accumulating the same N micro-batches. Bit for bit: micro-batch gradients are
// summed in rank order (the Comm's deterministic reduction), matching the single rank's
// accumulation order, and the 1/N average is applied once on both sides.
#include <gtest/gtest.h>

#include "comm/self_comm.h"
#include "comm/world.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 10;
constexpr int64_t kSeqLen = 8;

struct Reference {
  std::vector<std::vector<double>> losses;  // per step: micro-batch losses in index order
  std::vector<float> params;
};

Reference single_rank_reference(const std::string& family, int world) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model(family, cpu), zero_settings(0, 2, world, 1), self);
  Reference ref;
  for (int step = 0; step < kSteps; ++step) ref.losses.push_back(train_step(engine, step, 0, kSeqLen));
  ref.params = to_vector(engine.gather_parameters());
  return ref;
}

class ZeroEquivalence : public ::testing::TestWithParam<std::tuple<std::string, int, bool>> {};

TEST_P(ZeroEquivalence, MatchesOneRankBitForBit) {
  const auto& [family, stage, overlap] = GetParam();
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  const Reference ref = single_rank_reference(family, n);

  backend::CpuBackend cpu;
  EngineSettings s = zero_settings(stage, 2, 1, n);
  s.zero.overlap_comm = overlap;
  Engine engine(small_model(family, cpu), s, world);
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<double> losses = train_step(engine, step, world.rank(), kSeqLen);
    ASSERT_EQ(losses.size(), 1u);
    EXPECT_EQ(losses[0], ref.losses[step][world.rank()]) << "step " << step;
  }
  EXPECT_EQ(to_vector(engine.gather_parameters()), ref.params);
  EXPECT_EQ(engine.global_steps(), kSteps);
  EXPECT_EQ(engine.global_samples(), kSteps * 2 * n);
}

INSTANTIATE_TEST_SUITE_P(
    StagesAndModels, ZeroEquivalence,
    ::testing::Combine(::testing::Values("gpt2", "llama"), ::testing::Values(0, 1, 2, 3),
                       ::testing::Bool()),
    [](const auto& param_info) {
      return std::get<0>(param_info.param) + "_stage" + std::to_string(std::get<1>(param_info.param)) +
             (std::get<2>(param_info.param) ? "_overlap" : "_serial");
    });

// Mixtral's experts: ZeRO partitions and reduces them like any parameter; the routing reads its
// counts to the host each block, which must not disturb the bit-exact sums (nor does the
// load-balancing loss, each rank's over its own micro-batch as in Hugging Face).
INSTANTIATE_TEST_SUITE_P(
    Experts, ZeroEquivalence,
    ::testing::Combine(::testing::Values("mixtral", "mixtral_balance"), ::testing::Values(1, 3),
                       ::testing::Values(true)),
    [](const auto& param_info) {
      return std::get<0>(param_info.param) + "_stage" +
             std::to_string(std::get<1>(param_info.param));
    });

// Qwen3's q/k head norms: their small weights partitioned, reduced and gathered like any.
INSTANTIATE_TEST_SUITE_P(
    QkNorm, ZeroEquivalence,
    ::testing::Combine(::testing::Values("qwen3"), ::testing::Values(1, 3),
                       ::testing::Values(true)),
    [](const auto& param_info) {
      return std::get<0>(param_info.param) + "_stage" +
             std::to_string(std::get<1>(param_info.param));
    });

// bf16 master weights, bf16 optimizer states and stochastic rounding across ranks: each
// element's rounding bits come from its place in the model, so N ranks at stages 1-3 match one
// rank at stage 1 accumulating the same N micro-batches, bit for bit (f32 accumulation and
// communication, as in the other bit-exact comparisons).
TEST(ZeroEquivalenceBf16Master, MatchesOneRankBitForBit) {
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  auto make = [](int stage, int64_t gas, int ranks) {
    EngineSettings s = zero_settings(stage, 2, gas, ranks);
    s.bf16.enabled = true;
    s.bf16.bf16_master_weights_and_grads = true;
    s.bf16.bf16_optimizer_states = true;
    s.bf16.stochastic_rounding = true;
    s.data_types.grad_accum_dtype = config::PrecisionType::kFp32;
    s.communication_data_type = config::PrecisionType::kFp32;
    return s;
  };
  backend::CpuBackend ref_cpu;
  comm::SelfComm self;
  Engine reference(small_model("gpt2", ref_cpu), make(1, n, 1), self);
  std::vector<std::vector<double>> ref_losses;
  for (int step = 0; step < kSteps; ++step) ref_losses.push_back(train_step(reference, step, 0, kSeqLen));
  const std::vector<float> expected = to_vector(reference.gather_parameters());
  for (int stage = 1; stage <= 3; ++stage) {
    backend::CpuBackend cpu;
    Engine engine(small_model("gpt2", cpu), make(stage, 1, n), world);
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_EQ(train_step(engine, step, world.rank(), kSeqLen)[0], ref_losses[step][world.rank()])
          << "stage " << stage << " step " << step;
    }
    EXPECT_EQ(to_vector(engine.gather_parameters()), expected) << "stage " << stage;
  }
}

// Accumulation on top of data parallelism: 2 micro-steps per rank. The sum is then grouped
// per rank first ((g0+g1) + (g2+g3) ...), a different association than one rank's running sum,
// so the comparison is to f32 rounding: 1e-5 relative after 10 AdamW steps.
TEST(ZeroEquivalenceWithAccumulation, MatchesOneRankToRounding) {
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  backend::CpuBackend ref_cpu;
  comm::SelfComm self;
  Engine reference(small_model("llama", ref_cpu), zero_settings(0, 2, 2 * n, 1), self);
  for (int step = 0; step < kSteps; ++step) train_step(reference, step, 0, kSeqLen);
  const std::vector<float> expected = to_vector(reference.gather_parameters());
  for (int stage = 0; stage <= 3; ++stage) {
    backend::CpuBackend cpu;
    Engine engine(small_model("llama", cpu), zero_settings(stage, 2, 2, n), world);
    for (int step = 0; step < kSteps; ++step) train_step(engine, step, world.rank(), kSeqLen);
    const std::vector<float> got = to_vector(engine.gather_parameters());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      diff += (got[i] - expected[i]) * (got[i] - expected[i]);
      norm += expected[i] * expected[i];
    }
    EXPECT_LE(std::sqrt(diff / norm), 1e-5) << "stage " << stage;
  }
}

}  // namespace
}  // namespace zero::engine
