// Every examples/*.json parses with suitable "auto" values, and support gating either passes
// or names exactly the expected unbuilt features, in table order. A new example must be listed.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/deepspeed_config.h"
#include "config/feature_support.h"
#include "core/error.h"

namespace zero::config {
namespace example_configs_test {

using Keys = std::vector<std::string>;

const std::map<std::string, Keys>& expected_findings() {
  static const std::map<std::string, Keys> expected = {
      {"ds_config_zero0.json", {}},
      {"ds_config_hjson_style.json", {}},
      {"ds_config_warmup_cosine.json", {}},
      {"ds_config_warmup_decay.json", {}},
      {"ds_config_lr_range_test.json", {}},
      {"ds_config_onecycle.json", {}},
      {"ds_config_zero1.json", {}},
      {"ds_config_zero2.json", {}},
      {"ds_config_zero3.json", {}},
      {"ds_config_fp16.json", {}},
      {"ds_config_bf16.json", {}},
      {"ds_config_bf16_low_precision.json", {}},
      {"ds_config_offload_cpu.json", {}},
      {"ds_config_zero3_nvme.json", {}},
      {"ds_config_hjson.hjson", {}},
      {"hf_trainer_zero2.json", {}},
      {"hf_trainer_zero3_offload.json", {}},
      {"llama_factory_zero3.json", {}},
      {"megatron_gpt_zero1.json", {}},
      {"ds_config_onebit_adam.json", {}},
      {"ds_config_muon.json", {}},
      {"ds_config_zero_plus_plus.json", {}},
  };
  return expected;
}

// What `zero train` knows without any flag: the model's hidden size and --steps; every other
// "auto" takes the Hugging Face Trainer's default.
AutoValues example_autos() {
  AutoValues a;
  a.total_steps = 500;
  a.hidden_size = 64;
  return a;
}

std::filesystem::path examples_dir() {
  return std::filesystem::path(ZERO_TEST_FIXTURES) / ".." / ".." / "examples";
}

TEST(ExampleConfigFiles, EveryExampleIsListed) {
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(examples_dir())) {
    if (entry.path().extension() != ".json" && entry.path().extension() != ".hjson") continue;
    ++seen;
    EXPECT_EQ(expected_findings().count(entry.path().filename().string()), 1u)
        << entry.path() << " has no expectation in this test";
  }
  EXPECT_EQ(seen, expected_findings().size());
}

TEST(ExampleConfigFiles, EachParsesAndGatesAsExpected) {
  for (const auto& [file, keys] : expected_findings()) {
    const std::string path = (examples_dir() / file).string();
    const DeepSpeedConfig config = DeepSpeedConfig::from_file(path, example_autos());
    Keys found;
    for (const UnsupportedUse& use : find_unsupported(config, path)) found.push_back(use.key);
    EXPECT_EQ(found, keys) << file;
    if (keys.empty()) {
      EXPECT_NO_THROW(check_supported(config, path)) << file;
    } else {
      try {
        check_supported(config, path);
        ADD_FAILURE() << file << " passed but should name " << keys.front();
      } catch (const UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("key '" + keys.front() + "'"), std::string::npos)
            << e.what();
      }
    }
    // The resolved config reads back equal: what a checkpoint would store.
    EXPECT_EQ(DeepSpeedConfig::from_json(config.to_json(), file), config) << file;
  }
}

}  // namespace example_configs_test
}  // namespace zero::config
