// `zero train --deepspeed` with ZeRO-Offload / ZeRO-Infinity configs as users write them:
// offload_optimizer {cpu} at stage 2, and offload_optimizer + offload_param {nvme} at stage 3
// (nvme_path a temporary folder), give bit for bit the per-step losses (from --log-json) of the
// same stage without offload, in bf16; the start-of-training report says where the parameter
// partition lives; the Hugging Face Trainer's offload template runs unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "tools/shell_runner.h"

namespace {

namespace fs = std::filesystem;

using zero::testing::logged_losses;

class OffloadCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zero_offload_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "nvme");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A bf16 config at `stage` with `zero_extra` inside zero_optimization.
  zero::testing::CliResult train(const std::string& name, int stage, const std::string& zero_extra) {
    const fs::path config = dir_ / (name + ".json");
    std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
        "bf16": {"enabled": true}, "aio": {"block_size": 65536},
        "zero_optimization": {"stage": )"
                          << stage << (zero_extra.empty() ? "" : ", " + zero_extra) << "}}\n";
    return zero::testing::run_cli("train --model tiny-llama --seq-len 32 --steps 4 --deepspeed " +
                                  config.string() + " --log-json " + (dir_ / (name + ".jsonl")).string());
  }
  std::vector<double> losses(const std::string& name) { return logged_losses(dir_ / (name + ".jsonl")); }
  std::string nvme() const { return (dir_ / "nvme").string(); }

  fs::path dir_;
};

TEST_F(OffloadCli, OptimizerOffloadAtStage2GivesTheSameLosses) {
  const auto plain = train("stage2", 2, "");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto offloaded = train("stage2_cpu", 2, R"("offload_optimizer": {"device": "cpu", "pin_memory": true})");
  ASSERT_EQ(offloaded.exit_code, 0) << offloaded.output;
  ASSERT_EQ(losses("stage2").size(), 4u);
  EXPECT_EQ(losses("stage2_cpu"), losses("stage2"));
}

TEST_F(OffloadCli, OptimizerAndParametersOnNvmeAtStage3GiveTheSameLosses) {
  const auto plain = train("stage3", 3, "");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto infinity = train(
      "stage3_nvme", 3,
      R"("offload_optimizer": {"device": "nvme", "nvme_path": ")" + nvme() +
          R"(", "pin_memory": true, "buffer_count": 4},
         "offload_param": {"device": "nvme", "nvme_path": ")" + nvme() +
          R"(", "pin_memory": true, "buffer_count": 3, "buffer_size": 1e6, "max_in_cpu": 0})");
  ASSERT_EQ(infinity.exit_code, 0) << infinity.output;
  ASSERT_EQ(losses("stage3").size(), 4u);
  EXPECT_EQ(losses("stage3_nvme"), losses("stage3"));
  EXPECT_NE(infinity.output.find("parameters: nvme"), std::string::npos) << infinity.output;
  EXPECT_TRUE(fs::is_empty(dir_ / "nvme")) << "the swap files go with the run";
  // Parameters in host memory, the optimizer step on the host.
  const auto memory = train("stage3_cpu", 3,
                            R"("offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"})");
  ASSERT_EQ(memory.exit_code, 0) << memory.output;
  EXPECT_EQ(losses("stage3_cpu"), losses("stage3"));
  EXPECT_NE(memory.output.find("parameters: cpu"), std::string::npos) << memory.output;
}

// Two ranks, a Hugging Face folder, stage 3: each rank builds only its partition from the
// folder (zero.Init) and keeps it in a swap file with the optimizer state on NVMe; the per-step
// losses equal the same run with everything on the device (bf16 exactly: the same arithmetic in
// the same order on both sides).
TEST_F(OffloadCli, TwoRanksFromAModelFolderWithEverythingOnNvme) {
  const std::string model = std::string(ZERO_TEST_FIXTURES) + "/hf/tiny-llama";
  auto run = [&](const std::string& name, const std::string& zero_extra) {
    const fs::path config = dir_ / (name + ".json");
    std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
        "bf16": {"enabled": true}, "aio": {"block_size": 65536},
        "zero_optimization": {"stage": 3)"
                          << (zero_extra.empty() ? "" : ", " + zero_extra) << "}}\n";
    return zero::testing::run_shell(zero::testing::mpirun(2) + "train --model " + model +
                                    " --seq-len 16 --steps 3 --deepspeed " + config.string() +
                                    " --log-json " + (dir_ / (name + ".jsonl")).string());
  };
  const auto plain = run("mpi_stage3", "");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto offloaded = run("mpi_nvme", R"("offload_optimizer": {"device": "nvme", "nvme_path": ")" + nvme() +
                                        R"("}, "offload_param": {"device": "nvme", "nvme_path": ")" + nvme() +
                                        R"(", "max_in_cpu": 0, "buffer_size": 1e6})");
  ASSERT_EQ(offloaded.exit_code, 0) << offloaded.output;
  ASSERT_EQ(losses("mpi_stage3").size(), 3u);
  EXPECT_EQ(losses("mpi_nvme"), losses("mpi_stage3"));
  EXPECT_NE(offloaded.output.find("parameters: nvme"), std::string::npos) << offloaded.output;
}

TEST_F(OffloadCli, TrainerOffloadTemplateRuns) {
  const fs::path examples = fs::path(ZERO_TEST_FIXTURES) / ".." / ".." / "examples";
  const auto r = zero::testing::run_cli("train --deepspeed " + (examples / "hf_trainer_zero3_offload.json").string() +
                                        " --model tiny-llama --steps 2 --seq-len 16");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("summary: 2 steps"), std::string::npos) << r.output;
}

}  // namespace
