// mpi-ranks: 2 4
// Checkpoints under Ulysses sequence parallelism: a run at sp = 2 (x dp = world / 2) saves after
// 3 of 6 steps at ZeRO stage 0, 1 or 2; the checkpoint then resumes
//   - in the same layout: bit-identical to the uninterrupted run (at stages 1-2 the sp ranks of
//     one sequence group write their own, disjoint ZeRO pieces; at stage 0 rank 0 writes the
//     state every rank holds: nothing is lost or overwritten),
//   - on one rank without sequence parallelism (stage 0, accumulating the dp micro-batches in
//     data-rank order): the saved parameters bit for bit, and after 3 more steps the
//     uninterrupted run within the Ulysses tolerance,
//   - at ZeRO stage 3 in another layout where the world allows (world 2: sp = 2 again; world 4:
//     sp = 4 x dp = 1 with 2 micro-steps) within the same tolerance.
// Tolerance (f32): relative 1e-5 on parameters and step losses, as in mpi_test_ulysses.cpp: the
// sequence split associates the loss and gradient sums differently from one rank.
#include <gtest/gtest.h>


#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "comm/mesh.h"
#include "comm/self_comm.h"
#include "comm/world.h"
#include "engine/zero_harness.h"
#include "support/job_directory.h"

namespace zero::engine {
namespace {
namespace fs = std::filesystem;
using namespace zero_test;

constexpr int64_t kSeqLen = 16;  // the tiny models' position table
constexpr int64_t kMicro = 2;
constexpr int kSaveStep = 3;
constexpr int kSteps = 6;
constexpr double kRelative = 1e-5;

// Steps [first, last) of a replica at data rank `data_rank` with `gas` micro-batches per step:
// micro-batch j of a step is global index data_rank * gas + j. Returns the step losses (the mean
// of this replica's micro-batch losses).
std::vector<double> train(Engine& engine, int first, int last, int data_rank) {
  const int64_t gas = engine.settings().gradient_accumulation_steps;
  const int64_t vocab = engine.model().config()->vocab_size;
  std::vector<double> losses;
  for (int step = first; step < last; ++step) {
    double sum = 0.0;
    for (int64_t j = 0; j < gas; ++j) {
      sum += engine.forward(batch_for(step, data_rank * gas + j, kMicro, kSeqLen, vocab));
      engine.backward();
    }
    engine.step();
    losses.push_back(sum / static_cast<double>(gas));
  }
  return losses;
}

// Parameters within kRelative of `want`, relative to max(|want|, 0.02) (the initialisation's
// scale; see mpi_test_ulysses.cpp for why elements near zero are compared at that scale).
void expect_params_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(std::abs(static_cast<double>(want[i])), 0.02);
    const double rel = std::abs(static_cast<double>(got[i]) - want[i]) / scale;
    worst = std::max(worst, rel);
    if (rel > kRelative) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "worst relative difference " << worst;
}

void expect_losses_close(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs(got[i] - want[i]), kRelative * std::abs(want[i]))
        << "step " << kSaveStep + i << ": " << got[i] << " vs " << want[i];
  }
}

// An engine in the layout sp x (world / sp) over `world`, with its mesh.
struct SequenceParallelRun {
  std::unique_ptr<comm::Mesh> mesh;
  std::unique_ptr<Engine> engine;
  int data_rank() const { return mesh->coordinate(comm::MeshAxis::kData); }
  // The mean over the data-parallel replicas of per-replica step losses.
  std::vector<double> global_losses(std::vector<double> losses) const {
    const int dp = mesh->shape().dp;
    for (double& loss : losses) {
      loss = mesh->group(comm::MeshAxis::kData).all_reduce_scalar(loss, comm::ReduceOp::kSum) / dp;
    }
    return losses;
  }
};

SequenceParallelRun sequence_parallel(comm::Comm& world, backend::Backend& backend, int sp,
                                      int stage, int64_t gas) {
  SequenceParallelRun run;
  run.mesh = std::make_unique<comm::Mesh>(
      world, comm::Mesh::sequence_parallel_shape(world.world_size(), sp));
  EngineSettings s = zero_settings(stage, kMicro, gas, run.mesh->shape().dp);
  s.sequence_parallel_size = sp;
  run.engine = std::make_unique<Engine>(small_model("llama", backend), s,
                                        run.mesh->data_sequence_group(),
                                        sp > 1 ? &run.mesh->group(comm::MeshAxis::kSequence) : nullptr);
  return run;
}

class UlyssesCheckpoint : public ::testing::TestWithParam<int> {};

TEST_P(UlyssesCheckpoint, SaveAtSequenceParallelTwoResumesInEveryLayout) {
  const int stage = GetParam();
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  const int dp = n / 2;
  const fs::path dir =
      zero::testing::job_directory(world, "zero_ulysses_ckpt_stage" + std::to_string(stage));
  backend::CpuBackend cpu;

  // The uninterrupted run, saving at step 3 on the way.
  std::vector<float> at_save, expected;
  std::vector<double> expected_losses;
  {
    SequenceParallelRun run = sequence_parallel(world, cpu, 2, stage, 1);
    train(*run.engine, 0, kSaveStep, run.data_rank());
    run.engine->save_checkpoint(dir.string(), "", {{"data", {{"next_sample", kSaveStep}}}});
    at_save = to_vector(run.engine->gather_parameters());
    expected_losses = run.global_losses(train(*run.engine, kSaveStep, kSteps, run.data_rank()));
    expected = to_vector(run.engine->gather_parameters());
  }
  // One ZeRO shard file per rank of the data x sequence group, and the state says so.
  if (world.rank() == 0 && stage > 0) {
    const fs::path tag = dir / ("global_step" + std::to_string(kSaveStep));
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(fs::exists(tag / ("zero_shard_" + std::to_string(r) + "_of_" + std::to_string(n) +
                                    ".safetensors")));
    }
    const nlohmann::json state = nlohmann::json::parse(std::ifstream(tag / "engine_state.json"));
    EXPECT_EQ(state["world_size"], n);
  }

  {
    SCOPED_TRACE("same layout: sp=2 x dp=" + std::to_string(dp));
    SequenceParallelRun run = sequence_parallel(world, cpu, 2, stage, 1);
    const nlohmann::json client = run.engine->load_checkpoint(dir.string());
    EXPECT_EQ(client["data"]["next_sample"], kSaveStep);
    EXPECT_EQ(run.engine->global_steps(), kSaveStep);
    EXPECT_EQ(to_vector(run.engine->gather_parameters()), at_save);
    EXPECT_EQ(run.global_losses(train(*run.engine, kSaveStep, kSteps, run.data_rank())), expected_losses);
    EXPECT_EQ(to_vector(run.engine->gather_parameters()), expected);
  }
  {
    SCOPED_TRACE("one rank, no sequence parallelism, stage 0");
    comm::SelfComm self;
    Engine engine(small_model("llama", cpu), zero_settings(0, kMicro, dp, 1), self);
    engine.load_checkpoint(dir.string());
    EXPECT_EQ(engine.global_steps(), kSaveStep);
    EXPECT_EQ(to_vector(engine.gather_parameters()), at_save);
    expect_losses_close(train(engine, kSaveStep, kSteps, 0), expected_losses);
    expect_params_close(to_vector(engine.gather_parameters()), expected);
  }
  {
    // Stage 3; at world 4 every rank in one sequence group (sp = 4 x dp = 1) accumulating the
    // two micro-batches the two replicas ran.
    const int sp = n == 2 ? 2 : 4;
    const int resumed_stage = 3;
    const int64_t gas = dp * sp / n;
    SCOPED_TRACE("sp=" + std::to_string(sp) + " x dp=" + std::to_string(n / sp) + ", stage " +
                 std::to_string(resumed_stage));
    SequenceParallelRun run = sequence_parallel(world, cpu, sp, resumed_stage, gas);
    run.engine->load_checkpoint(dir.string());
    EXPECT_EQ(to_vector(run.engine->gather_parameters()), at_save);
    expect_losses_close(run.global_losses(train(*run.engine, kSaveStep, kSteps, run.data_rank())),
                        expected_losses);
    expect_params_close(to_vector(run.engine->gather_parameters()), expected);
  }
  world.barrier();
  if (world.rank() == 0) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Stages, UlyssesCheckpoint, ::testing::Values(0, 1, 2),
                         [](const auto& param_info) { return "stage" + std::to_string(param_info.param); });

}  // namespace
}  // namespace zero::engine
