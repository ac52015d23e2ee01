// `zero train --profile-kernels STEP [--profile-kernels-json FILE]` as a user types it: the
// per-kernel table of that step on the terminal and in the JSON file bench/ reads, on the CPU
// and on the simulated device; a bad step or file stops the run with the flag named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_runner.h"
#include "tools/shell_runner.h"

namespace {
namespace fs = std::filesystem;

class KernelProfileCli : public zero::testing::ScratchDirTest {
 protected:
  KernelProfileCli() : ScratchDirTest("zero_kernel_profile_cli_") {}
};

TEST_F(KernelProfileCli, PrintsAndWritesTheTableOfTheStep) {
  for (const std::string device : {"cpu", "sim"}) {
    const fs::path out = dir_ / device / "kernels.json";
    const auto r = zero::testing::run_cli("train --model tiny-llama --steps 3 --seq-len 16 --device " +
                                          device + " --profile-kernels 2 --profile-kernels-json " +
                                          out.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("kernel profile of step 2 on " + std::string(device == "cpu" ? "cpu" : "sim:0")),
              std::string::npos) << r.output;
    EXPECT_NE(r.output.find("rmsnorm_forward"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("of the step (the rest is host work"), std::string::npos) << r.output;
    std::ifstream in(out);
    ASSERT_TRUE(in.good()) << out;
    const nlohmann::json json = nlohmann::json::parse(in);
    EXPECT_EQ(json["step"], 2);
    bool attention = false;
    for (const auto& row : json["kernels"]) attention = attention || row["op"] == "attention_backward";
    EXPECT_TRUE(attention) << json.dump();
  }
}

TEST_F(KernelProfileCli, BadFlagsNameThemselves) {
  auto r = zero::testing::run_cli("train --model tiny --steps 3 --seq-len 16 --profile-kernels 5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--profile-kernels 5: the step to profile must be between 1 and --steps (3)"),
            std::string::npos) << r.output;
  r = zero::testing::run_cli("train --model tiny --steps 3 --seq-len 16 --profile-kernels x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("profile-kernels"), std::string::npos) << r.output;
  fs::create_directories(dir_ / "taken");
  r = zero::testing::run_cli("train --model tiny --steps 3 --seq-len 16 --profile-kernels 1 "
                             "--profile-kernels-json " + (dir_ / "taken").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--profile-kernels-json: cannot write"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step      1"), std::string::npos) << r.output;  // nothing trained
}

}  // namespace
