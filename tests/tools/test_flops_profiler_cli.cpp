// `zero train` with DeepSpeed's flops_profiler section as a user writes it: the report goes to
// output_file (or the terminal) at the profile step, with a row per unit; a bad output_file
// stops the run before the first step with the key and the path named; a profile step the run
// never reaches is a warning.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/cli_runner.h"
#include "tools/shell_runner.h"

namespace {
namespace fs = std::filesystem;

class FlopsProfilerCli : public zero::testing::ScratchDirTest {
 protected:
  FlopsProfilerCli() : ScratchDirTest("zero_flops_cli_") {}

  // A DeepSpeed config whose flops_profiler section holds `profiler` (JSON members).
  std::string config(const std::string& profiler) const {
    const fs::path path = dir_ / "ds.json";
    std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
  "flops_profiler": {"enabled": true, )" << profiler << "}}";
    return path.string();
  }
  static std::string read_text(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

TEST_F(FlopsProfilerCli, TrainWritesTheProfileToOutputFile) {
  const fs::path out = dir_ / "profiles" / "flops.txt";
  const auto r = zero::testing::run_cli("train --deepspeed " +
                                        config(R"("profile_step": 1, "output_file": ")" +
                                               out.string() + "\"") +
                                        " --model tiny-llama --steps 3 --seq-len 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("Flops Profiler"), std::string::npos) << r.output;  // not on stdout
  const std::string text = read_text(out);
  EXPECT_NE(text.find("Profile Summary at step 1:"), std::string::npos) << text;
  EXPECT_NE(text.find("LlamaForCausalLM"), std::string::npos) << text;
  // tiny-llama: embedding, its blocks, lm_head; each a row of the per-unit table.
  EXPECT_NE(text.find("\nembedding "), std::string::npos) << text;
  EXPECT_NE(text.find("\nblock0 "), std::string::npos) << text;
  EXPECT_NE(text.find("\nlm_head "), std::string::npos) << text;
  EXPECT_NE(text.find("\ntotal "), std::string::npos) << text;
}

TEST_F(FlopsProfilerCli, WithoutOutputFileTheReportIsPrinted) {
  const auto r = zero::testing::run_cli("train --deepspeed " +
                                        config(R"("profile_step": 0, "detailed": false)") +
                                        " --model tiny --steps 2 --seq-len 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Profile Summary at step 0:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Per-unit Profile per rank"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Detailed Profile per rank"), std::string::npos) << r.output;
}

TEST_F(FlopsProfilerCli, AnUnwritableOutputFileStopsTheRunBeforeTraining) {
  const fs::path file = dir_ / "a_file";
  std::ofstream(file) << "not a directory";
  const std::string bad = (file / "flops.txt").string();
  const auto r = zero::testing::run_cli("train --deepspeed " +
                                        config(R"("output_file": ")" + bad + "\"") +
                                        " --model tiny --steps 2 --seq-len 16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("flops_profiler.output_file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(bad), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step      1"), std::string::npos) << r.output;
}

TEST_F(FlopsProfilerCli, AProfileStepBeyondTheRunIsAWarning) {
  const auto r = zero::testing::run_cli("train --deepspeed " + config(R"("profile_step": 10)") +
                                        " --model tiny --steps 2 --seq-len 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: flops_profiler: no profile was taken"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Profile Summary"), std::string::npos) << r.output;
}

}  // namespace
