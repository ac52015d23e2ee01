// `zero train --seq-len` past the model's max_position_embeddings: an error naming the value,
// the limit and --allow-long-sequences; with the flag a rotary model trains, and a learned
// position table (GPT-2) still refuses, saying it cannot extend.
#include <gtest/gtest.h>

#include <string>

#include "support/cli_runner.h"
#include "tools/cli_helpers.h"

namespace {

using zero::testing::has;

// tiny-llama: rotary, max_position_embeddings 256. Synthetic data, one short step.
const std::string kLlama = "train --model tiny-llama --steps 1 --micro-batch 1 --seq-len 512";

TEST(LongSequenceCli, PastMaxPositionsNeedsTheFlag) {
  const auto r = zero::testing::run_cli(kLlama);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--seq-len 512")) << r.output;
  EXPECT_TRUE(has(r.output, "max_position_embeddings (256)")) << r.output;
  EXPECT_TRUE(has(r.output, "--allow-long-sequences true")) << r.output;
}

TEST(LongSequenceCli, RotaryModelTrainsPastMaxPositionsWithTheFlag) {
  const auto r = zero::testing::run_cli(kLlama + " --allow-long-sequences true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "x 512 tokens")) << r.output;
  EXPECT_TRUE(has(r.output, "final train loss")) << r.output;
  // At the limit no flag is needed.
  const auto at_limit =
      zero::testing::run_cli("train --model tiny-llama --steps 1 --micro-batch 1 --seq-len 256");
  EXPECT_EQ(at_limit.exit_code, 0) << at_limit.output;
}

TEST(LongSequenceCli, LearnedPositionTableCannotExtend) {
  // The tiny GPT-2 preset: a learned wpe table of 256 rows.
  for (const std::string flag : {"", " --allow-long-sequences true"}) {
    const auto r = zero::testing::run_cli(
        "train --model tiny --data synthetic --steps 1 --micro-batch 1 --seq-len 300" + flag);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(has(r.output, "--seq-len 300")) << r.output;
    EXPECT_TRUE(has(r.output, "n_positions = 256")) << r.output;
    EXPECT_TRUE(has(r.output, "cannot extend")) << r.output;
  }
}

TEST(LongSequenceCli, FlagValueIsChecked) {
  const auto r = zero::testing::run_cli(kLlama + " --allow-long-sequences maybe");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "--allow-long-sequences takes true or false")) << r.output;
}

}  // namespace
