// dump_state's text (config/config_dump.h): one line per setting, sorted by dotted path, values as
// JSON, names padded with dots to one column; nested sections flattened, lists and empty
// sections kept whole.
#include <gtest/gtest.h>

#include <string>

#include "config/config_dump.h"
#include "config/deepspeed_config.h"

namespace zero::config {
namespace config_dump_test {

TEST(ConfigDump, OneSortedLinePerSettingWithDotsToAColumn) {
  const nlohmann::json resolved = {
      {"zero_optimization", {{"stage", 3}, {"offload_param", {{"device", "cpu"}}}}},
      {"gradient_clipping", 1.0},
      {"optimizer", {{"params", {{"betas", {0.9, 0.95}}}}}},
      {"monitor", nlohmann::json::object()}};
  const std::string text = configuration_dump(resolved, "title:");
  const std::string want =
      "title:\n"
      "  gradient_clipping ....................... 1.0\n"
      "  monitor ................................. {}\n"
      "  optimizer.params.betas .................. [0.9,0.95]\n"
      "  zero_optimization.offload_param.device .. \"cpu\"\n"
      "  zero_optimization.stage ................. 3\n";
  EXPECT_EQ(text, want);
}

TEST(ConfigDump, AResolvedConfigShowsEveryKeyInEffect) {
  const DeepSpeedConfig c = DeepSpeedConfig::from_text(
      R"({"train_micro_batch_size_per_gpu": 2, "dump_state": true,
          "zero_optimization": {"stage": 2}})",
      "test.json");
  const std::string text = configuration_dump(c.to_json(), "t");
  EXPECT_NE(text.find("  zero_optimization.stage "), std::string::npos) << text;
  EXPECT_NE(text.find("  train_batch_size ."), std::string::npos) << text;
  EXPECT_NE(text.find("  dump_state .") , std::string::npos) << text;
  // Defaults the file never named are there too.
  EXPECT_NE(text.find("  zero_optimization.reduce_bucket_size ."), std::string::npos) << text;
}

}  // namespace config_dump_test
}  // namespace zero::config
