// mpi-ranks: 4
// Universal checkpoints: save at N=4 stage 3, load at N=2 stage 1 and at N=1 stage 0; both
// continued runs match the uninterrupted N=4 run. N=1 accumulating the four micro-batches in
// rank order reproduces N=4 bit for bit; N=2 x 2 micro-steps groups the sum differently, so it
// matches to f32 rounding.
#include <gtest/gtest.h>


#include <cmath>
#include <filesystem>

#include "comm/self_comm.h"
#include "comm/world.h"
#include "engine/zero_harness.h"
#include "support/job_directory.h"

namespace zero::engine {
namespace {
namespace fs = std::filesystem;
using namespace zero_test;

constexpr int64_t kSeqLen = 8;

TEST(ZeroResharding, SaveAtFourStageThreeLoadAtTwoAndOne) {
  comm::Comm& world = comm::world();
  ASSERT_EQ(world.world_size(), 4);
  const fs::path dir = zero::testing::job_directory(world, "zero_reshard");

  backend::CpuBackend cpu;
  Engine straight(small_model("gpt2", cpu), zero_settings(3, 2, 1, 4), world);
  for (int step = 0; step < 6; ++step) train_step(straight, step, world.rank(), kSeqLen);
  const std::vector<float> expected = to_vector(straight.gather_parameters());

  std::vector<float> at_save;
  {
    Engine first(small_model("gpt2", cpu), zero_settings(3, 2, 1, 4), world);
    for (int step = 0; step < 3; ++step) train_step(first, step, world.rank(), kSeqLen);
    first.save_checkpoint(dir.string());
    at_save = to_vector(first.gather_parameters());
  }
  // Every rank wrote only its own pieces.
  if (world.rank() == 0) {
    const fs::path tag = dir / "global_step3";
    for (int r = 0; r < 4; ++r) {
      EXPECT_TRUE(fs::exists(tag / ("zero_shard_" + std::to_string(r) + "_of_4.safetensors")));
    }
    EXPECT_FALSE(fs::exists(tag / "model.safetensors"));
  }

  // N = 2, stage 1: ranks 0 and 1 continue, each with two micro-steps.
  std::unique_ptr<comm::Comm> pair = world.split(world.rank() < 2 ? 0 : 1, world.rank());
  if (world.rank() < 2) {
    Engine resumed(small_model("gpt2", cpu), zero_settings(1, 2, 2, 2), *pair);
    resumed.load_checkpoint(dir.string());
    EXPECT_EQ(resumed.global_steps(), 3);
    for (int step = 3; step < 6; ++step) train_step(resumed, step, pair->rank(), kSeqLen);
    const std::vector<float> got = to_vector(resumed.gather_parameters());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      diff += (got[i] - expected[i]) * (got[i] - expected[i]);
      norm += expected[i] * expected[i];
    }
    EXPECT_LE(std::sqrt(diff / norm), 1e-5);
  }
  // N = 1, stage 0: every rank on its own, four micro-steps in rank order.
  {
    comm::SelfComm self;
    Engine resumed(small_model("gpt2", cpu), zero_settings(0, 2, 4, 1), self);
    resumed.load_checkpoint(dir.string());
    EXPECT_EQ(to_vector(resumed.gather_parameters()), at_save);
    for (int step = 3; step < 6; ++step) train_step(resumed, step, 0, kSeqLen);
    EXPECT_EQ(to_vector(resumed.gather_parameters()), expected);
  }
  world.barrier();
  if (world.rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace zero::engine
