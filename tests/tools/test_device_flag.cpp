// `zero train --device`: the simulated device trains exactly as the CPU backend does (the same
// losses, bit for bit, in the JSON log), devices this build or machine lacks are clear errors,
// and the default (auto) picks the GPU only where one is visible.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "tools/shell_runner.h"

namespace {

namespace fs = std::filesystem;

using zero::testing::logged_losses;

TEST(DeviceFlag, SimulatedDeviceLossesEqualTheCpuBackend) {
  const fs::path dir = fs::temp_directory_path() / "zero_device_flag";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::vector<double>> runs;
  for (const std::string device : {"cpu", "sim"}) {
    const fs::path log = dir / (device + ".jsonl");
    const auto result = zero::testing::run_cli("train --device " + device +
                                               " --steps 6 --seq-len 16 --bf16 true --log-json " +
                                               log.string());
    ASSERT_EQ(result.exit_code, 0) << result.output;
    runs.push_back(logged_losses(log));
  }
  ASSERT_FALSE(runs[0].empty());
  EXPECT_EQ(runs[0], runs[1]);
  fs::remove_all(dir);
}

TEST(DeviceFlag, UnbuiltAndUnknownDevicesAreClearErrors) {
  // Without the CUDA backend in the build, or without a GPU on the machine, `--device cuda` is
  // an error that says which of the two it is.
  // (On a machine with a GPU and a CUDA build the run simply trains.)
  const auto cuda = zero::testing::run_cli("train --device cuda --steps 1");
  if (cuda.exit_code != 0) {
    EXPECT_NE(cuda.output.find("zero: error: "), std::string::npos) << cuda.output;
    EXPECT_NE(cuda.output.find("CUDA"), std::string::npos) << cuda.output;
  } else {
    EXPECT_NE(cuda.output.find("final train loss"), std::string::npos) << cuda.output;
  }
  const auto unknown = zero::testing::run_cli("train --device tpu --steps 1");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("use auto, cpu, sim or cuda"), std::string::npos) << unknown.output;
}

TEST(DeviceFlag, AutoTrainsOnTheGpuWhenOneIsVisibleElseOnTheCpu) {
  // The default is auto: cuda where this build has CUDA and the machine a GPU, else cpu.
  const auto plain = zero::testing::run_cli("train --steps 1 --seq-len 16");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const bool gpu = plain.output.find("device: cuda") != std::string::npos;
  EXPECT_TRUE(gpu || plain.output.find("device: cpu (--device auto)") != std::string::npos)
      << plain.output;
  // Step lines show the device memory in use and its peak.
  EXPECT_NE(plain.output.find(" MiB, peak "), std::string::npos) << plain.output;
  // Named explicitly, it is what was asked for.
  const auto cpu = zero::testing::run_cli("train --device cpu --steps 1 --seq-len 16");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_NE(cpu.output.find("device: cpu\n"), std::string::npos) << cpu.output;
}

}  // namespace
