// `zero train --tiled-mlp N --tiled-logits N`: tiled training of tiny-llama logs the untiled
// losses within 1e-5 relative (f32; tiling only reassociates the weight-gradient sums over rows),
// says how it tiles, and bad values are clear errors naming the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "tools/shell_runner.h"

namespace {

namespace fs = std::filesystem;

using zero::testing::logged_losses;

TEST(TiledComputeCli, TiledLossesMatchUntiled) {
  const fs::path dir = fs::temp_directory_path() / "zero_tiled_compute_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A log line (with its loss) every step.
  const fs::path config = dir / "ds.json";
  std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}}, "gradient_clipping": 1.0})";
  const std::string common =
      "train --model tiny-llama --seq-len 64 --steps 3 --deepspeed " + config.string() + " ";
  const fs::path plain_log = dir / "plain.jsonl", tiled_log = dir / "tiled.jsonl";
  const auto plain = zero::testing::run_cli(common + "--tiled-mlp off --tiled-logits off --log-json " +
                                            plain_log.string());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("tiled compute"), std::string::npos) << plain.output;
  const auto tiled = zero::testing::run_cli(common + "--tiled-mlp 4 --tiled-logits 3 --log-json " +
                                            tiled_log.string());
  ASSERT_EQ(tiled.exit_code, 0) << tiled.output;
  EXPECT_NE(tiled.output.find("MLP in 4 shards"), std::string::npos) << tiled.output;
  EXPECT_NE(tiled.output.find("logits + loss in 3 shards"), std::string::npos) << tiled.output;
  const std::vector<double> expected = logged_losses(plain_log);
  const std::vector<double> got = logged_losses(tiled_log);
  ASSERT_EQ(expected.size(), 3u);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-5 * std::fabs(expected[i])) << "step " << i;
  }
  fs::remove_all(dir);
}

TEST(TiledComputeCli, BadValuesAreClearErrors) {
  for (const std::string bad : {"--tiled-mlp 0", "--tiled-mlp x", "--tiled-logits none",
                                "--tiled-logits 2.5"}) {
    const auto result = zero::testing::run_cli("train --model tiny-llama --steps 1 " + bad);
    EXPECT_NE(result.exit_code, 0) << bad;
    const std::string flag = bad.substr(0, bad.find(' '));
    EXPECT_NE(result.output.find("zero: error: "), std::string::npos) << result.output;
    EXPECT_NE(result.output.find(flag + " takes auto, off or a shard count"), std::string::npos)
        << result.output;
  }
}

}  // namespace
