// `zero train --gradient-checkpointing true` with DeepSpeed's activation_checkpointing section:
// partition_activations + cpu_checkpointing + contiguous_memory_optimization give bit for bit
// the per-step losses (from --log-json) of plain checkpointing; profile prints its table; the
// section without checkpointing is a warning, not an error.
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

void write_config(const fs::path& path, const std::string& section) {
  std::ofstream out(path);
  out << R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1)"
      << (section.empty() ? "" : R"(, "activation_checkpointing": )" + section) << "}\n";
}

class CheckpointingCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zero_checkpointing_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  zero::testing::CliResult train(const std::string& name, const std::string& section,
                                 const std::string& checkpointing) {
    const fs::path config = dir_ / (name + ".json");
    write_config(config, section);
    return zero::testing::run_cli("train --model tiny-llama --seq-len 64 --steps 3 "
                                  "--gradient-checkpointing " + checkpointing +
                                  " --deepspeed " + config.string() + " --log-json " +
                                  (dir_ / (name + ".jsonl")).string());
  }
  std::vector<double> losses(const std::string& name) {
    return logged_losses(dir_ / (name + ".jsonl"));
  }

  fs::path dir_;
};

TEST_F(CheckpointingCli, HostCopiesInAContiguousPartitionedBufferGiveTheSameLosses) {
  const auto plain = train("plain", "", "true");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto all = train("all",
                         R"({"partition_activations": true, "cpu_checkpointing": true,
                             "contiguous_memory_optimization": true, "number_checkpoints": 4})",
                         "true");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  ASSERT_EQ(losses("plain").size(), 3u);
  EXPECT_EQ(losses("all"), losses("plain"));
}

TEST_F(CheckpointingCli, ProfilePrintsItsTable) {
  const auto run = train("profile", R"({"profile": true})", "true");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int step = 1; step <= 3; ++step) {
    EXPECT_NE(run.output.find("[step " + std::to_string(step) + "] activation checkpointing profile"),
              std::string::npos)
        << run.output;
  }
  EXPECT_NE(run.output.find("recompute ms"), std::string::npos) << run.output;
}

TEST_F(CheckpointingCli, SectionWithoutCheckpointingWarns) {
  const auto run = train("off", R"({"cpu_checkpointing": true})", "false");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("zero: warning: the activation_checkpointing section sets "
                            "activation_checkpointing.cpu_checkpointing"),
            std::string::npos)
      << run.output;
  const auto bad = train("bad", R"({"contiguous_memory_optimization": true})", "true");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("activation_checkpointing.partition_activations"), std::string::npos)
      << bad.output;
}

}  // namespace
