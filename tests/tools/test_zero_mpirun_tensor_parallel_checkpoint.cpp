// `zero train --tensor-parallel-size 2 --save` under mpirun writes a checkpoint by logical
// parameter names (engine/tensor_parallel_checkpoint.h) that resumes on one rank without tensor
// parallelism (the later losses within 1e-5 relative of the one-rank run's: f32, the all-reduces
// associate sums differently) and at tp = 2 again (the uninterrupted tp = 2 run's losses bit for
// bit: weights, optimizer states and the data position all came back), and that `zero convert`
// turns into a Hugging Face folder of whole tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "tools/shell_runner.h"

namespace {
namespace fs = std::filesystem;
using zero::testing::mpirun;
using zero::testing::run_shell;
using zero::testing::zero_cli;
using Result = zero::testing::CliResult;

constexpr const char* kConfig = R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
                                    "zero_optimization": {"stage": 1}})";

class ZeroMpirunTensorParallelCheckpoint : public zero::testing::ScratchDirTest {
 protected:
  ZeroMpirunTensorParallelCheckpoint() : ScratchDirTest("zero_tp_ckpt_cli_") {}

  // `zero train` on one rank (tp = 1) or under mpirun at tp = 2.
  Result train(int tp, const std::string& name, const std::string& flags) const {
    return train_logged(tp > 1 ? mpirun(tp) : zero_cli(), name, kConfig,
                        "--model tiny --seq-len 64 " + flags +
                            (tp > 1 ? " --tensor-parallel-size " + std::to_string(tp) : ""));
  }
  std::string checkpoint() const { return path("checkpoint"); }
};

TEST_F(ZeroMpirunTensorParallelCheckpoint, SavedAtTwoResumesOnOneRankAndAtTwoAndConverts) {
  const Result one = train(1, "one", "--steps 4");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result straight = train(2, "straight", "--steps 4");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const Result saved = train(2, "saved", "--steps 2 --save " + checkpoint());
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  // tp = 2 x dp = 1 at ZeRO-1: one shard file per (data, tensor) rank, logical keys inside.
  const fs::path tag = fs::path(checkpoint()) / "global_step2";
  EXPECT_TRUE(fs::exists(tag / "zero_shard_0_of_2.safetensors"));
  EXPECT_TRUE(fs::exists(tag / "zero_shard_1_of_2.safetensors"));

  const Result alone = train(1, "alone", "--steps 4 --resume " + checkpoint());
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const Result again = train(2, "again", "--steps 4 --resume " + checkpoint());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const std::vector<double> want_one = losses("one"), want_tp = losses("straight");
  const std::vector<double> got_one = losses("alone"), got_tp = losses("again");
  ASSERT_EQ(want_one.size(), 4u);
  ASSERT_EQ(want_tp.size(), 4u);
  ASSERT_EQ(got_one.size(), 2u);
  ASSERT_EQ(got_tp.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_LE(std::abs(got_one[i] - want_one[i + 2]), 1e-5 * std::abs(want_one[i + 2]))
        << "one rank, step " << i + 3 << ": " << got_one[i] << " vs " << want_one[i + 2];
    EXPECT_EQ(got_tp[i], want_tp[i + 2]) << "tp = 2, step " << i + 3;
  }

  const Result converted = run_shell(zero_cli() + "convert " + checkpoint() + " " + path("hf"));
  ASSERT_EQ(converted.exit_code, 0) << converted.output;
  EXPECT_TRUE(fs::exists(path("hf") + "/model.safetensors"));
  // The folder trains like any model folder, at tp = 2 too (each rank reads its slices).
  const Result from_hf = train_logged(mpirun(2), "from_hf", kConfig,
                                      "--model " + path("hf") +
                                          " --seq-len 64 --steps 1 --tensor-parallel-size 2");
  ASSERT_EQ(from_hf.exit_code, 0) << from_hf.output;
  ASSERT_EQ(losses("from_hf").size(), 1u);
}

}  // namespace
