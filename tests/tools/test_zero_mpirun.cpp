// `mpirun -np N zero ...` end to end: a ZeRO-2 run trains across two ranks, saves a sharded
// checkpoint that `zero convert` consolidates into a Hugging Face folder, and one failing rank
// brings the whole job down quickly with its rank and cause on stderr. comms_logger prints the
// per-operation summary.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "model/hf_checkpoint.h"
#include "tools/shell_runner.h"

namespace {
namespace fs = std::filesystem;

using zero::testing::mpirun;
using Result = zero::testing::CliResult;
using zero::testing::run_shell;

class ZeroMpirun : public zero::testing::ScratchDirTest {
 protected:
  ZeroMpirun() : ScratchDirTest("zero_mpirun_") {}
};

TEST_F(ZeroMpirun, ZeroTwoTrainsSavesShardsAndConverts) {
  const fs::path config = dir_ / "ds.json";
  std::ofstream(config) << R"({
    "train_micro_batch_size_per_gpu": 4,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}},
    "zero_optimization": {"stage": 2, "overlap_comm": true, "reduce_bucket_size": 20000},
    "steps_per_print": 10,
    "comms_logger": {"enabled": true}
  })";
  const Result r = run_shell(mpirun(2) + "train --deepspeed " + config.string() +
                             " --steps 20 --seq-len 32 --save " + (dir_ / "ckpt").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data parallel: 2 ranks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ZeRO stage 2"), std::string::npos) << r.output;
  // comms_logger: the summary names the collectives ZeRO-2 used.
  EXPECT_NE(r.output.find("communication (rank 0, whole run)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reduce_scatter"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all_gather"), std::string::npos) << r.output;
  const fs::path tag = dir_ / "ckpt" / "global_step20";
  EXPECT_TRUE(fs::exists(tag / "zero_shard_0_of_2.safetensors"));
  EXPECT_TRUE(fs::exists(tag / "zero_shard_1_of_2.safetensors"));

  const Result c = run_shell(zero::testing::zero_cli() + "convert " + (dir_ / "ckpt").string() + " " +
                             (dir_ / "hf").string());
  ASSERT_EQ(c.exit_code, 0) << c.output;
  zero::backend::CpuBackend cpu;
  auto model = zero::model::load_hf_model((dir_ / "hf").string(), cpu, zero::DType::kF32);
  EXPECT_GT(model->num_parameters(), 0);
}

// The ZeRO++ example as its users run it: gradients take qgZ's all-to-all instead of the
// reduce-scatter, and comms_logger prints the hpZ group's gathers in a table of their own.
TEST_F(ZeroMpirun, ZeroPlusPlusExampleTrainsAndShowsItsGroups) {
  const fs::path example = fs::path(ZERO_TEST_FIXTURES) / ".." / ".." / "examples" /
                           "ds_config_zero_plus_plus.json";
  std::ifstream in(example);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.insert(text.rfind('}'), R"(, "comms_logger": {"enabled": true})");
  const fs::path config = dir_ / "zero_plus_plus.json";
  std::ofstream(config) << text;
  const Result r = run_shell(mpirun(2) + "train --deepspeed " + config.string() +
                             " --steps 4 --seq-len 32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all_to_all"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("reduce_scatter"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("change nothing on one data-parallel rank"), std::string::npos);
  EXPECT_NE(r.output.find("within rank 0's hpZ group of 2 ranks (whole run)"), std::string::npos)
      << r.output;
}

TEST_F(ZeroMpirun, AFailingRankBringsTheJobDown) {
  const auto start = std::chrono::steady_clock::now();
  const Result r = run_shell(mpirun(2, "ZERO_TEST_FAULT=1:3") + "train --steps 1000");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(seconds, 30.0) << r.output;
  EXPECT_NE(r.output.find("rank 1 of 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("test fault injected"), std::string::npos) << r.output;
}

}  // namespace
