// mpi-ranks: 2 3
// Muon across processes: N ranks at ZeRO stages 0-3 give exactly the losses and parameters of
// one rank at stage 0 accumulating the same N micro-batches. At stages 1-3 each rank moves the
// momentum of its shard only; the ranks all-gather each unit's proposed updates, and every rank
// orthogonalizes the matrices its shard overlaps (the same values, so the same bits on every
// rank) and updates its part of them. The all-gathers are counted: on top of AdamW's at the
// same stage, one f32 gather of each transformer block's padded unit a step. A checkpoint taken
// at N ranks and stage 2 resumes at one rank and stage 0, bit for bit.
#include <gtest/gtest.h>


#include <filesystem>
#include <string>
#include <vector>

#include "comm/self_comm.h"
#include "comm/world.h"
#include "engine/zero_harness.h"
#include "sharding/partition_layout.h"
#include "support/job_directory.h"

namespace zero::engine {
namespace {
namespace fs = std::filesystem;
using namespace zero_test;

constexpr int kSteps = 5;
constexpr int64_t kSeqLen = 8;

EngineSettings muon_settings(int stage, int64_t gas, int world) {
  EngineSettings s = zero_settings(stage, 2, gas, world);
  s.optimizer_type = "Muon";
  s.optimizer_params = {{"lr", 2e-2}, {"adam_lr", 5e-3}, {"weight_decay", 0.01}};
  return s;
}

class MuonEquivalence : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MuonEquivalence, MatchesOneRankBitForBit) {
  const auto& [family, stage] = GetParam();
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  backend::CpuBackend ref_cpu;
  comm::SelfComm self;
  Engine reference(small_model(family, ref_cpu), muon_settings(0, n, 1), self);
  std::vector<std::vector<double>> ref_losses;
  for (int step = 0; step < kSteps; ++step) {
    ref_losses.push_back(train_step(reference, step, 0, kSeqLen));
  }
  const std::vector<float> expected = to_vector(reference.gather_parameters());

  // AdamW's all-gathers a step at this stage: what Muon adds goes on top.
  backend::CpuBackend adam_cpu;
  EngineSettings adam_settings = muon_settings(stage, 1, n);
  adam_settings.optimizer_type = "AdamW";
  adam_settings.optimizer_params = {{"lr", 1e-3}};
  Engine adam(small_model(family, adam_cpu), adam_settings, world);
  world.reset_stats();
  train_step(adam, 0, world.rank(), kSeqLen);
  const int64_t adam_gather_bytes = world.stats().at(comm::OpKind::kAllGather).message_bytes;
  // Muon at stages 1-3: one f32 all-gather of each transformer block's padded unit a step.
  int64_t muon_gather_bytes = 0;
  if (stage > 0) {
    auto net = small_model(family, adam_cpu);
    const sharding::PartitionLayout layout(*net, n, world.rank());
    for (size_t u = 0; u < net->units().size(); ++u) {
      if (net->units()[u]->kind() == "transformer_block") {
        muon_gather_bytes += 4 * layout.unit(u).padded_numel;
      }
    }
  }

  backend::CpuBackend cpu;
  Engine engine(small_model(family, cpu), muon_settings(stage, 1, n), world);
  for (int step = 0; step < kSteps; ++step) {
    world.reset_stats();
    EXPECT_EQ(train_step(engine, step, world.rank(), kSeqLen)[0], ref_losses[step][world.rank()])
        << "step " << step;
    EXPECT_EQ(world.stats().at(comm::OpKind::kAllGather).message_bytes,
              adam_gather_bytes + muon_gather_bytes)
        << "step " << step;
  }
  EXPECT_EQ(to_vector(engine.gather_parameters()), expected);
}

INSTANTIATE_TEST_SUITE_P(StagesAndModels, MuonEquivalence,
                         ::testing::Combine(::testing::Values("gpt2", "llama"),
                                            ::testing::Values(0, 1, 2, 3)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param) + "_stage" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

// A checkpoint of N ranks at stage 2 (each rank's shard of the momentum and of the compact
// second moment, expanded to the partition) loads into one rank at stage 0, which then takes
// the N-rank run's next steps bit for bit.
TEST(MuonCheckpoint, ReshardsFromNRanksAtStageTwoToOneRankAtStageZero) {
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  const fs::path dir = zero::testing::job_directory(world, "zero_muon_reshard");
  backend::CpuBackend cpu;
  Engine sharded(small_model("llama", cpu), muon_settings(2, 1, n), world);
  for (int step = 0; step < 3; ++step) train_step(sharded, step, world.rank(), kSeqLen);
  sharded.save_checkpoint(dir.string());
  std::vector<double> expected;
  for (int step = 3; step < 5; ++step) {
    expected.push_back(train_step(sharded, step, world.rank(), kSeqLen)[0]);
  }
  const std::vector<float> expected_params = to_vector(sharded.gather_parameters());

  backend::CpuBackend one_cpu;
  comm::SelfComm self;
  Engine whole(small_model("llama", one_cpu), muon_settings(0, n, 1), self);
  whole.load_checkpoint(dir.string());
  for (int step = 3; step < 5; ++step) {
    EXPECT_EQ(train_step(whole, step, 0, kSeqLen)[static_cast<size_t>(world.rank())],
              expected[static_cast<size_t>(step - 3)])
        << "step " << step;
  }
  EXPECT_EQ(to_vector(whole.gather_parameters()), expected_params);
  world.barrier();
  if (world.rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace zero::engine
