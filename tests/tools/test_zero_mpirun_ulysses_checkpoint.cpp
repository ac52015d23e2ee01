// `zero train` with Ulysses sequence parallelism beyond the loss equivalence of
// test_zero_mpirun_ulysses.cpp: a checkpoint saved by `mpirun -np 2` at sp = 2 (ZeRO-1) resumes
// on one rank without sequence parallelism (the one-rank run's later losses within 1e-5
// relative: the split associates sums differently, see tests/engine/mpi_test_ulysses.cpp) and
// at sp = 2 again (the uninterrupted sp = 2 run's losses bit for bit: parameters, optimizer
// state and the data position all came back); the banner states the data-parallel size; and
// `--device sim` at sp = 2 x dp = 2 (the groups staged through host buffers, split by the Mesh)
// gives the CPU backend's losses bit for bit. A masked prompt/response shard trains at sp = 2
// as on one rank and resumes there.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/shell_runner.h"

namespace {
namespace fs = std::filesystem;

using zero::testing::run_shell;
using zero::testing::zero_cli;
using Result = zero::testing::CliResult;

constexpr const char* kOneRank = R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
                                     "zero_optimization": {"stage": 1}})";
constexpr const char* kSequenceParallel = R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
                                              "sequence_parallel_size": 2,
                                              "zero_optimization": {"stage": 1}})";

class ZeroMpirunUlyssesCheckpoint : public zero::testing::ScratchDirTest {
 protected:
  ZeroMpirunUlyssesCheckpoint() : ScratchDirTest("zero_ulysses_ckpt_") {}

  // `zero train` on `ranks` processes (mpirun when > 1) with `config`, logging to NAME.jsonl.
  Result train(int ranks, const std::string& name, const std::string& config,
               const std::string& flags) const {
    return train_logged(ranks > 1 ? zero::testing::mpirun(ranks) : zero_cli(), name, config,
                        "--model tiny-llama --seq-len 128 " + flags);
  }

  // Step -> training loss of a --log-json file.
  std::vector<std::pair<int64_t, double>> losses(const std::string& name) const {
    return zero::testing::logged_step_losses(log_path(name));
  }

  std::string checkpoint() const { return (dir_ / "checkpoint").string(); }
};

TEST_F(ZeroMpirunUlyssesCheckpoint, SavedAtSequenceParallelTwoResumesOnOneRankAndAtTwo) {
  const Result one = train(1, "one", kOneRank, "--steps 4");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result straight = train(2, "straight", kSequenceParallel, "--steps 4");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  // One data-parallel replica whose ZeRO-1 partitions span both ranks.
  EXPECT_NE(straight.output.find("data parallel: 1 ranks over"), std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find("ZeRO stage 1 over the 2 ranks of the data x sequence group"),
            std::string::npos)
      << straight.output;
  EXPECT_NE(straight.output.find("each rank holds 64 of 128 tokens per sequence"), std::string::npos)
      << straight.output;

  const Result saved = train(2, "saved", kSequenceParallel, "--steps 2 --save " + checkpoint());
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const fs::path tag = fs::path(checkpoint()) / "global_step2";
  EXPECT_TRUE(fs::exists(tag / "zero_shard_0_of_2.safetensors"));
  EXPECT_TRUE(fs::exists(tag / "zero_shard_1_of_2.safetensors"));

  const Result alone = train(1, "alone", kOneRank, "--steps 4 --resume " + checkpoint());
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const Result again = train(2, "again", kSequenceParallel, "--steps 4 --resume " + checkpoint());
  ASSERT_EQ(again.exit_code, 0) << again.output;

  const auto want_one = losses("one"), want_sp = losses("straight");
  const auto got_one = losses("alone"), got_sp = losses("again");
  ASSERT_EQ(want_one.size(), 4u);
  ASSERT_EQ(want_sp.size(), 4u);
  ASSERT_EQ(got_one.size(), 2u);
  ASSERT_EQ(got_sp.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got_one[i].first, want_one[i + 2].first);
    EXPECT_LE(std::abs(got_one[i].second - want_one[i + 2].second), 1e-5 * std::abs(want_one[i + 2].second))
        << "one rank, step " << got_one[i].first << ": " << got_one[i].second << " vs "
        << want_one[i + 2].second;
    EXPECT_EQ(got_sp[i], want_sp[i + 2]) << "sp=2, step " << got_sp[i].first;
  }
}

// A prompt/response shard from `zero prepare` (prompts masked out of the loss, so masked spans
// fall anywhere in a window, across the two ranks' halves too): sp = 2 gives the one-rank losses,
// and a checkpoint it saves resumes on one rank at the sampler's position (the data-parallel
// size, 1, is what the sampler records).
TEST_F(ZeroMpirunUlyssesCheckpoint, MaskedShardTrainsAndResumesAsOnOneRank) {
  {
    std::ofstream jsonl(dir_ / "qa.jsonl");
    for (int i = 0; i < 300; ++i) {
      jsonl << nlohmann::json{{"p", "question " + std::to_string(i) + ": what is " + std::to_string(i) +
                                        " plus " + std::to_string(i * 7 % 13) + "?"},
                              {"r", "the answer is " + std::to_string(i + i * 7 % 13) + "."}}
                   .dump()
            << "\n";
    }
  }
  const std::string shard = (dir_ / "qa.bin").string();
  const Result prepared = run_shell(zero_cli() + "prepare --out " + shard +
                                    " --prompt-field p --response-field r " + (dir_ / "qa.jsonl").string());
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  const Result one = train(1, "one", kOneRank, "--steps 4 --data " + shard);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result saved = train(2, "saved", kSequenceParallel, "--steps 2 --data " + shard + " --save " + checkpoint());
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const Result resumed = train(1, "resumed", kOneRank, "--steps 4 --data " + shard + " --resume " + checkpoint());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;

  auto got = losses("saved");
  const auto rest = losses("resumed");
  got.insert(got.end(), rest.begin(), rest.end());
  const auto want = losses("one");
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_LE(std::abs(got[i].second - want[i].second), 1e-5 * std::abs(want[i].second))
        << "step " << want[i].first << ": " << got[i].second << " vs " << want[i].second;
  }
}

// Four ranks, sp = 2 x dp = 2 with ZeRO-3: the sequence groups and the data groups are proper
// subsets of the job, each a split of the host-staged communicator.
TEST_F(ZeroMpirunUlyssesCheckpoint, SimulatedDeviceSplitsItsStagedGroups) {
  const std::string config = R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                 "sequence_parallel_size": 2, "zero_optimization": {"stage": 3}})";
  const Result cpu = train(4, "cpu", config, "--steps 2");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_NE(cpu.output.find("data parallel: 2 ranks over"), std::string::npos) << cpu.output;
  const Result sim = train(4, "sim", config, "--steps 2 --device sim");
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  ASSERT_EQ(losses("cpu").size(), 2u);
  EXPECT_EQ(losses("sim"), losses("cpu"));
}

}  // namespace
