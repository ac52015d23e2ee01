// `mpirun -np N zero train` with pipeline parallelism, end to end: "pipeline": {"stages": 2} on
// the tied-embedding tiny GPT-2 at 2 ranks and with ZeRO-1 over dp = 2 on tiny-llama at 4 ranks
// give the one-rank per-step losses (--log-json) within 1e-5 relative (f32; the stages sum the
// tied embedding's gradient and the clipping norm in another order than one rank, and dp = 2 sums
// each replica's micro-batches before the all-reduce); sizes that do not divide, ZeRO-2 with a
// pipeline and a stage failing mid-schedule stop the job with the reason; checkpoints of a
// pipeline resume at one stage and at two; pipeline.activation_checkpoint_interval keeps the
// losses.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tools/shell_runner.h"

namespace {
namespace fs = std::filesystem;

using zero::testing::logged_losses;
using zero::testing::mpirun;
using zero::testing::run_shell;
using Result = zero::testing::CliResult;

// `zero` on one process with one OpenMP thread (as each mpirun rank has).
std::string single() { return "env OMP_NUM_THREADS=1 " + zero::testing::zero_cli(); }

class ZeroMpirunPipeline : public zero::testing::ScratchDirTest {
 protected:
  ZeroMpirunPipeline() : ScratchDirTest("zero_pipeline_") {}

  fs::path config(const std::string& name, const std::string& extra) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << R"({
      "train_micro_batch_size_per_gpu": 2,
      "gradient_accumulation_steps": "auto",
      "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}},
      "gradient_clipping": 1.0,
      "steps_per_print": 1)" + extra +
                               "}";
    return path;
  }
  // One rank accumulating dp x 4 micro-batches sees each step's global batch.
  void expect_same_losses(const std::string& model, int ranks, const std::string& extra) {
    const std::string args = " --steps 6 --seq-len 16 --model " + model + " --log-json ";
    const int dp = ranks / 2;
    const fs::path one_cfg = config("one.json", "");
    const Result one =
        run_shell(single() + "train --deepspeed " + one_cfg.string() + args +
            (dir_ / "one.jsonl").string() + " --grad-accum " + std::to_string(4 * dp));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const fs::path pipe_cfg = config("pipe.json", ", \"pipeline\": {\"stages\": 2}" + extra);
    const Result pipe = run_shell(mpirun(ranks) + "train --deepspeed " + pipe_cfg.string() + args +
                            (dir_ / "pipe.jsonl").string() + " --grad-accum 4");
    ASSERT_EQ(pipe.exit_code, 0) << pipe.output;
    EXPECT_NE(pipe.output.find("pipeline parallel: 2 stages"), std::string::npos) << pipe.output;
    const std::vector<double> a = logged_losses(dir_ / "one.jsonl");
    const std::vector<double> b = logged_losses(dir_ / "pipe.jsonl");
    ASSERT_EQ(a.size(), 6u);
    ASSERT_EQ(b.size(), 6u) << pipe.output;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(b[i], a[i], 1e-5 * std::abs(a[i])) << "step " << i + 1;
    }
  }
};

TEST_F(ZeroMpirunPipeline, TwoStagesTiedGpt2MatchOneRank) { expect_same_losses("tiny", 2, ""); }

TEST_F(ZeroMpirunPipeline, TwoStagesTimesTwoReplicasZeroOneLlamaMatchOneRank) {
  expect_same_losses("tiny-llama", 4, ", \"zero_optimization\": {\"stage\": 1}");
}

// A checkpoint saved by two stages holds the whole model by parameter names (the tied copy not
// duplicated): one rank resumes it, two stages resume it, and `zero convert` reads it; the
// continued losses match an uninterrupted one-rank run, and the converted Hugging Face folder
// trains at two stages as at one.
TEST_F(ZeroMpirunPipeline, SaveAtTwoStagesResumeAtOneAndTwo) {
  const fs::path one_cfg = config("one.json", "");
  const fs::path pipe_cfg = config("pipe.json", ", \"pipeline\": {\"stages\": 2}");
  const std::string args = " --model tiny --seq-len 16 --grad-accum 4 ";
  const Result whole = run_shell(single() + "train --deepspeed " + one_cfg.string() + args +
                           "--steps 6 --log-json " + (dir_ / "whole.jsonl").string());
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const fs::path ckpt = dir_ / "ckpt";
  const Result saved = run_shell(mpirun(2) + "train --deepspeed " + pipe_cfg.string() + args +
                           "--steps 3 --save " + ckpt.string());
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  EXPECT_TRUE(fs::exists(ckpt / "global_step3" / "zero_shard_1_of_2.safetensors"));
  const Result one =
      run_shell(single() + "train --deepspeed " + one_cfg.string() + args + "--steps 6 --resume " +
          ckpt.string() + " --log-json " + (dir_ / "one.jsonl").string());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Result two =
      run_shell(mpirun(2) + "train --deepspeed " + pipe_cfg.string() + args + "--steps 6 --resume " +
          ckpt.string() + " --log-json " + (dir_ / "two.jsonl").string());
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const std::vector<double> a = logged_losses(dir_ / "whole.jsonl");
  ASSERT_EQ(a.size(), 6u);
  for (const char* log : {"one.jsonl", "two.jsonl"}) {
    const std::vector<double> b = logged_losses(dir_ / log);
    ASSERT_EQ(b.size(), 3u) << log;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(b[i], a[i + 3], 1e-5 * std::abs(a[i + 3])) << log << " step " << i + 4;
    }
  }
  const Result converted =
      run_shell(zero::testing::zero_cli() + "convert " + ckpt.string() + " " + (dir_ / "hf").string());
  ASSERT_EQ(converted.exit_code, 0) << converted.output;
  EXPECT_TRUE(fs::exists(dir_ / "hf" / "model.safetensors"));

  // The converted folder trains at two stages (each loads its parameters by name) as at one.
  const std::string from_hf =
      " --model " + (dir_ / "hf").string() + " --seq-len 16 --grad-accum 4 --steps 2 --log-json ";
  const Result hf_one = run_shell(single() + "train --deepspeed " + one_cfg.string() + from_hf +
                            (dir_ / "hf_one.jsonl").string());
  ASSERT_EQ(hf_one.exit_code, 0) << hf_one.output;
  const Result hf_two = run_shell(mpirun(2) + "train --deepspeed " + pipe_cfg.string() + from_hf +
                            (dir_ / "hf_two.jsonl").string());
  ASSERT_EQ(hf_two.exit_code, 0) << hf_two.output;
  const std::vector<double> c = logged_losses(dir_ / "hf_one.jsonl");
  const std::vector<double> d = logged_losses(dir_ / "hf_two.jsonl");
  ASSERT_EQ(c.size(), 2u);
  ASSERT_EQ(d.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(d[i], c[i], 1e-5 * std::abs(c[i])) << "step " << i + 1;
}

TEST_F(ZeroMpirunPipeline, FlagOverridesTheConfig) {
  const fs::path cfg = config("auto.json", ", \"pipeline\": {\"stages\": \"auto\"}");
  const Result r = run_shell(mpirun(2) + "train --deepspeed " + cfg.string() +
                       " --steps 2 --seq-len 16 --pipeline-parallel-size 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline parallel: 2 stages x dp=1"), std::string::npos) << r.output;
}

// pipeline.activation_checkpoint_interval: each stage checkpoints its blocks in groups of N and
// recomputes them in backward; the losses are the same bits as without it (deterministic
// kernels), and a negative interval stops the job naming the key.
TEST_F(ZeroMpirunPipeline, ActivationCheckpointIntervalKeepsTheLosses) {
  const std::string args =
      " --steps 3 --seq-len 16 --model tiny-llama --grad-accum 4 --pipeline-parallel-size 2 ";
  std::vector<std::vector<double>> losses;
  for (int interval : {0, 1, 2}) {
    const std::string name = "interval" + std::to_string(interval);
    const fs::path cfg = config(name + ".json",
                                ", \"pipeline\": {\"activation_checkpoint_interval\": " +
                                    std::to_string(interval) + "}");
    const Result r = run_shell(mpirun(2) + "train --deepspeed " + cfg.string() + args +
                               "--log-json " + (dir_ / (name + ".jsonl")).string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("pipeline parallel: 2 stages"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("blocks in groups of " + std::to_string(interval)) != std::string::npos,
              interval > 0)
        << r.output;
    losses.push_back(logged_losses(dir_ / (name + ".jsonl")));
    ASSERT_EQ(losses.back().size(), 3u) << r.output;
  }
  EXPECT_EQ(losses[1], losses[0]);
  EXPECT_EQ(losses[2], losses[0]);
  const fs::path bad =
      config("negative.json", ", \"pipeline\": {\"activation_checkpoint_interval\": -1}");
  const Result r = run_shell(mpirun(2) + "train --deepspeed " + bad.string() + args);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline.activation_checkpoint_interval"), std::string::npos)
      << r.output;
}

// The activation_checkpointing section reaches each stage's model: the stage checkpoints from
// the start, so its profile table prints (and no "has no effect" warning), with the interval and
// with --gradient-checkpointing alike.
TEST_F(ZeroMpirunPipeline, ActivationCheckpointingSectionAppliesToStages) {
  const std::string args = " --steps 2 --seq-len 16 --model tiny-llama --grad-accum 2 --pipeline-parallel-size 2 ";
  const fs::path by_interval = config(
      "profile_interval.json",
      R"(, "pipeline": {"activation_checkpoint_interval": 1}, "activation_checkpointing": {"profile": true})");
  const fs::path by_flag = config("profile_flag.json", R"(, "activation_checkpointing": {"profile": true})");
  for (const std::string& run : {"--deepspeed " + by_interval.string() + args,
                                 "--deepspeed " + by_flag.string() + args + "--gradient-checkpointing true"}) {
    const Result r = run_shell(mpirun(2) + "train " + run);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("activation checkpointing profile"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("has no effect"), std::string::npos) << r.output;
  }
}

TEST_F(ZeroMpirunPipeline, StagesThatDoNotDivideStopWithTheNumbers) {
  const fs::path cfg = config("three.json", ", \"pipeline\": {\"stages\": 3}");
  const Result r = run_shell(mpirun(2) + "train --deepspeed " + cfg.string() + " --steps 2 --seq-len 16");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline.stages 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("does not divide the number of ranks, 2"), std::string::npos) << r.output;
}

TEST_F(ZeroMpirunPipeline, ZeroTwoWithAPipelineIsRefused) {
  const fs::path cfg =
      config("z2.json", ", \"pipeline\": {\"stages\": 2}, \"zero_optimization\": {\"stage\": 2}");
  const Result r = run_shell(mpirun(2) + "train --deepspeed " + cfg.string() + " --steps 2 --seq-len 16");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("zero_optimization.stage 2 with pipeline parallelism"), std::string::npos)
      << r.output;
}

// The memory preflight charges a pipeline rank its stage, not the whole model: a run too big for
// this machine either way says so with the stage's parameters (llama-1b-mha: 8 of its 16 blocks
// a stage, embedding and head counted as if each stage had them).
TEST_F(ZeroMpirunPipeline, ThePreflightChargesARankItsStage) {
  // About 620 GiB: refused on any machine, before anything is allocated.
  const std::string cfg = write("big.json", R"({"train_micro_batch_size_per_gpu": 64,
    "gradient_accumulation_steps": 4, "pipeline": {"stages": 2},
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}}})");
  const Result r = run_shell(mpirun(2) + "train --deepspeed " + cfg +
                             " --model llama-1b-mha --seq-len 4096 --steps 1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("not enough memory for this run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("of 542148608 parameters (this rank's pipeline stage of 8 blocks"),
            std::string::npos)
      << r.output;
}

TEST_F(ZeroMpirunPipeline, AFailingStageBringsTheJobDown) {
  const fs::path cfg = config("fail.json", ", \"pipeline\": {\"stages\": 2}");
  const auto start = std::chrono::steady_clock::now();
  const Result r = run_shell(mpirun(2, "ZERO_TEST_PIPELINE_FAULT=1:2") + "train --deepspeed " +
                       cfg.string() + " --steps 1000 --seq-len 16 --grad-accum 4");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(seconds, 30.0) << r.output;
  EXPECT_NE(r.output.find("injected failure in the forward pass of micro-batch 2"),
            std::string::npos)
      << r.output;
}

}  // namespace
