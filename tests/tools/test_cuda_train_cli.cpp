// `zero train --device cuda` as a user runs it: a run whose model states and activations cannot
// fit the GPU is refused before anything of it is allocated, naming the device, both sizes and
// the fixes (the memory preflight against the device's own memory, not the host's); a run that
// fits trains. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/cuda_backend.h"
#include "support/cli_runner.h"
#include "support/text_has.h"

namespace {

using zero::testing::has;

class CudaTrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (zero::backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(CudaTrainCli, RunTooLargeForTheGpuIsRefusedBeforeAllocating) {
  // GPT-2 124M at 4096 x 1024 tokens: the preflight estimates 1.3 TiB, more than any single GPU
  // has (256 x 1024, estimated at 82 GiB, peaked at 57 GiB on an H200 and trained there).
  const auto result = zero::testing::run_cli(
      "train --device cuda --model gpt2-124m --micro-batch 4096 --seq-len 1024 --steps 1 "
      "--bf16 true");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_TRUE(has(result.output, "not enough memory for this run")) << result.output;
  EXPECT_TRUE(has(result.output, "on cuda:0")) << result.output;
  EXPECT_TRUE(has(result.output, "--micro-batch 4096")) << result.output;
  EXPECT_TRUE(has(result.output, "offload_optimizer")) << result.output;
  // Refused before training: no step ran.
  EXPECT_FALSE(has(result.output, "step      1")) << result.output;
}

TEST_F(CudaTrainCli, ARunThatFitsTrains) {
  // The given peak skips the bf16 8192^3 measurement (20 ms on an H100, hours on the CUDA
  // simulator's CPU matmul); gpu_check.sh's training runs measure it.
  const auto result =
      zero::testing::run_cli("train --device cuda --steps 2 --seq-len 16 --peak-tflops 989");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(has(result.output, "final train loss")) << result.output;
}

}  // namespace
