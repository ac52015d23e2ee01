// `zero train` with DeepSpeed's csv_monitor and tensorboard sections as a user writes them: the
// files appear under output_path/job_name with DeepSpeed's metric names and a row per step, the
// events file parses with the test's own reader, and an output_path that cannot be a directory
// stops the run before training with the key and the path named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_runner.h"
#include "support/tfevents_reader.h"
#include "tools/shell_runner.h"

namespace {
namespace fs = std::filesystem;

class MonitorsCli : public zero::testing::ScratchDirTest {
 protected:
  MonitorsCli() : ScratchDirTest("zero_monitors_cli_") {}

  std::string config(const std::string& output_path) const {
    const fs::path path = dir_ / "ds.json";
    std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 2,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
  "tensorboard": {"enabled": true, "output_path": ")" << output_path << R"(", "job_name": "cli_run"},
  "csv_monitor": {"enabled": true, "output_path": ")" << output_path << R"(", "job_name": "cli_run"}})";
    return path.string();
  }
  static int64_t lines_of(const fs::path& path) {
    std::ifstream in(path);
    int64_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }
};

TEST_F(MonitorsCli, TrainWritesCsvAndTensorBoardFiles) {
  const fs::path logs = dir_ / "logs";
  const auto r = zero::testing::run_cli("train --deepspeed " + config(logs.string()) +
                                        " --model tiny-llama --steps 4 --seq-len 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = logs / "cli_run";
  EXPECT_EQ(lines_of(run / "Train_Samples_train_loss.csv"), 5);  // header + 4 steps
  EXPECT_EQ(lines_of(run / "Train_Samples_lr.csv"), 5);
  EXPECT_FALSE(fs::exists(run / "Train_Samples_loss_scale.csv"));  // fp32 run
  std::ifstream lr(run / "Train_Samples_lr.csv");
  std::string header, first;
  std::getline(lr, header);
  std::getline(lr, first);
  EXPECT_EQ(header, "step,lr");
  EXPECT_EQ(first, "2,0.001");  // 2 samples per step; constant lr

  int event_files = 0;
  for (const auto& entry : fs::directory_iterator(run)) {
    if (entry.path().filename().string().find("tfevents") == std::string::npos) continue;
    ++event_files;
    const auto scalars = zero::testing::read_scalars(entry.path().string());
    // train_loss, lr per step, and the final evaluation on the synthetic data's eval stream.
    ASSERT_EQ(scalars.size(), 4u * 2 + 1) << entry.path();
    EXPECT_EQ(scalars[0].tag, "Train/Samples/train_loss");
    EXPECT_EQ(scalars[0].step, 0);
    EXPECT_EQ(scalars[1].tag, "Train/Samples/lr");
    EXPECT_EQ(scalars[1].step, 2);
    EXPECT_FLOAT_EQ(scalars[1].value, 1e-3f);
    EXPECT_EQ(scalars.back().tag, "Train/Samples/eval_loss");
    EXPECT_EQ(scalars.back().step, 8);
  }
  EXPECT_EQ(event_files, 1);
}

TEST_F(MonitorsCli, OutputPathUnderAFileStopsBeforeTraining) {
  const fs::path file = dir_ / "plain_file";
  std::ofstream(file) << "x";
  const auto r = zero::testing::run_cli("train --deepspeed " + config(file.string()) +
                                        " --model tiny-llama --steps 4 --seq-len 16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("tensorboard.output_path"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find((file / "cli_run").string()), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step      1"), std::string::npos) << r.output;
}

}  // namespace
