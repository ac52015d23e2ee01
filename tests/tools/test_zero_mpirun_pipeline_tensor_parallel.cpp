// `mpirun -np N zero train --pipeline-parallel-size 2 --tensor-parallel-size 2` (3D parallelism
// with the data axis) gives the one-rank run's per-step losses: pp = 2 x tp = 2 x dp = 2 on eight
// ranks on the tied-embedding tiny GPT-2 (ZeRO-1, activations sent partitioned: DeepSpeed's
// default), and pp = 2 x tp = 2 on four ranks on tiny-llama (GQA) with pipe_partitioned and
// grad_partitioned false. Losses read from --log-json; f32, relative 1e-5 (the tensor-parallel
// all-reduces and the per-stage norm sums associate the sums differently;
// tests/engine/mpi_test_pipeline_tensor_parallel.cpp). Sizes that do not multiply to the world
// stop with the numbers; a checkpoint saved at pp = 2 x tp = 2 resumes at one rank and again.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tools/shell_runner.h"

namespace {
using zero::testing::mpirun;
using zero::testing::zero_cli;
using Result = zero::testing::CliResult;

class ZeroMpirunPipelineTensorParallel : public zero::testing::ScratchDirTest {
 protected:
  ZeroMpirunPipelineTensorParallel() : ScratchDirTest("zero_pp_tp_") {}

  Result train(int ranks, const std::string& name, const std::string& config,
               const std::string& flags) const {
    return train_logged(ranks > 0 ? mpirun(ranks) : "env OMP_NUM_THREADS=1 " + zero_cli(), name,
                        config, flags);
  }
};

TEST_F(ZeroMpirunPipelineTensorParallel, EightRanksThreeAxesGiveTheOneRankLosses) {
  // One rank accumulating 2 x 2 micro-batches sees each step's global batch (dp = 2, gas = 2).
  const std::string flags = "--model tiny --seq-len 32 --steps 3";
  const Result one = train(0, "one", R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                         "gradient_accumulation_steps": 4})",
                           flags);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result eight = train(8, "eight", R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                             "gradient_accumulation_steps": 2,
                                             "zero_optimization": {"stage": 1}})",
                             flags + " --pipeline-parallel-size 2 --tensor-parallel-size 2");
  ASSERT_EQ(eight.exit_code, 0) << eight.output;
  EXPECT_NE(eight.output.find("pipeline parallel: 2 stages x dp=2"), std::string::npos)
      << eight.output;
  EXPECT_NE(eight.output.find("tensor parallel within each stage: tp=2"), std::string::npos)
      << eight.output;
  EXPECT_NE(eight.output.find("activations sent partitioned"), std::string::npos) << eight.output;
  expect_same_losses("eight", "one", 3);
}

TEST_F(ZeroMpirunPipelineTensorParallel, WholeSendsOnFourRanksGiveTheOneRankLosses) {
  const std::string flags = "--model tiny-llama --seq-len 32 --steps 3";
  const Result one = train(0, "one", R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                         "gradient_accumulation_steps": 2})",
                           flags);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result four = train(4, "four", R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                           "gradient_accumulation_steps": 2,
                                           "pipeline": {"stages": 2, "pipe_partitioned": false,
                                                        "grad_partitioned": false},
                                           "tensor_parallel": {"autotp_size": 2}})",
                            flags);
  ASSERT_EQ(four.exit_code, 0) << four.output;
  EXPECT_NE(four.output.find("activations sent whole, their gradients whole"), std::string::npos)
      << four.output;
  expect_same_losses("four", "one", 3);
}

TEST_F(ZeroMpirunPipelineTensorParallel, HuggingFaceFolderLoadsBySlicesIntoStages) {
  // A Qwen2-style fixture (q/k/v biases, GQA): each rank reads its tensor rank's slices and
  // keeps its stage's parameters.
  const std::string flags = std::string("--model ") + ZERO_TEST_FIXTURES +
                            "/hf/tiny-llama-bias --seq-len 32 --steps 3";
  const Result one = train(0, "one", R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                         "gradient_accumulation_steps": 2})",
                           flags);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result four = train(4, "four", R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                           "gradient_accumulation_steps": 2})",
                            flags + " --pipeline-parallel-size 2 --tensor-parallel-size 2");
  ASSERT_EQ(four.exit_code, 0) << four.output;
  expect_same_losses("four", "one", 3);
}

TEST_F(ZeroMpirunPipelineTensorParallel, SizesThatDoNotMultiplyToTheWorldStopWithTheNumbers) {
  const Result three = train(3, "three", R"({"train_micro_batch_size_per_gpu": 1})",
                             "--model tiny --seq-len 32 --steps 1 --pipeline-parallel-size 2 "
                             "--tensor-parallel-size 2");
  EXPECT_NE(three.exit_code, 0) << three.output;
  EXPECT_NE(three.output.find("--pipeline-parallel-size 2"), std::string::npos) << three.output;
  EXPECT_NE(three.output.find("--tensor-parallel-size 2"), std::string::npos) << three.output;
  EXPECT_NE(three.output.find("does not divide the number of ranks, 3"), std::string::npos)
      << three.output;
}

// A checkpoint saved at pp = 2 x tp = 2 holds the whole model by logical names: one rank resumes
// it, and so does pp = 2 x tp = 2 again; the continued losses match an uninterrupted one-rank run.
TEST_F(ZeroMpirunPipelineTensorParallel, SaveAtPipeTimesTensorResumeAtOneRankAndAgain) {
  const std::string one_cfg = R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1,
                                  "gradient_accumulation_steps": 2})";
  const std::string args = "--model tiny --seq-len 32 ";
  const std::string layout = " --pipeline-parallel-size 2 --tensor-parallel-size 2";
  const Result whole = train(0, "whole", one_cfg, args + "--steps 6");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string ckpt = path("ckpt");
  const Result saved = train(4, "saved", one_cfg, args + "--steps 3 --save " + ckpt + layout);
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const Result one = train(0, "one", one_cfg, args + "--steps 6 --resume " + ckpt);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result again = train(4, "again", one_cfg, args + "--steps 6 --resume " + ckpt + layout);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const std::vector<double> want = losses("whole");
  ASSERT_EQ(want.size(), 6u);
  for (const char* name : {"one", "again"}) {
    const std::vector<double> got = losses(name);
    ASSERT_EQ(got.size(), 3u) << name;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(got[i], want[i + 3], 1e-5 * std::abs(want[i + 3])) << name << " step " << i + 4;
    }
  }
  // `zero convert` consolidates it into a Hugging Face folder that trains as the whole model.
  const Result converted = zero::testing::run_shell(zero_cli() + "convert " + ckpt + " " + path("hf"));
  ASSERT_EQ(converted.exit_code, 0) << converted.output;
  const Result from_hf = train(0, "hf", one_cfg, "--model " + path("hf") + " --seq-len 32 --steps 1");
  ASSERT_EQ(from_hf.exit_code, 0) << from_hf.output;
  ASSERT_EQ(losses("hf").size(), 1u);
}

}  // namespace
