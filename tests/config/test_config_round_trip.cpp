// to_json writes the resolved config (every key, no "auto"); reading it back gives an equal
// config, and files load through from_file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/deepspeed_config.h"
#include "core/error.h"

namespace zero::config {
namespace {

const char* kRich = R"({
  "train_batch_size": 32, "gradient_accumulation_steps": 2,
  "gradient_clipping": 0.7, "steps_per_print": 3, "wall_clock_breakdown": true,
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": [0.9, 0.95]}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto"}},
  "communication_data_type": "fp32",
  "data_types": {"grad_accum_dtype": "torch.float32"},
  "fp16": {"enabled": false, "initial_scale_power": 10},
  "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e7, "stage3_max_live_parameters": 1e8,
                        "offload_param": {"device": "nvme", "nvme_path": "/nvme"},
                        "zeropp_loco_param": {"err_beta": 0.8}},
  "activation_checkpointing": {"number_checkpoints": 4},
  "aio": {"queue_depth": 16},
  "wandb": {"team": "t"},
  "flops_profiler": {"output_file": "flops.txt"},
  "checkpoint": {"tag_validation": "ignore"},
  "amp": {"enabled": false}
})";

AutoValues autos() {
  AutoValues a;
  a.learning_rate = 1e-3;
  a.warmup_steps = 10;
  a.world_size = 2;
  return a;
}

TEST(ConfigRoundTrip, ToJsonReadsBackEqual) {
  const DeepSpeedConfig c = DeepSpeedConfig::from_text(kRich, "rich.json", autos());
  const nlohmann::json j = c.to_json();
  AutoValues same_world;
  same_world.world_size = 2;
  const DeepSpeedConfig back = DeepSpeedConfig::from_json(j, "checkpoint", same_world);
  EXPECT_EQ(back, c);
  EXPECT_EQ(back.to_json(), j);
}

TEST(ConfigRoundTrip, ToJsonIsResolvedAndComplete) {
  const nlohmann::json j = DeepSpeedConfig::from_text(kRich, "rich.json", autos()).to_json();
  EXPECT_EQ(j["train_batch_size"], 32);
  EXPECT_EQ(j["train_micro_batch_size_per_gpu"], 8);
  EXPECT_EQ(j["gradient_accumulation_steps"], 2);
  EXPECT_EQ(j["optimizer"]["params"]["lr"].get<double>(), 1e-3);
  EXPECT_EQ(j["scheduler"]["params"]["warmup_num_steps"], 10);
  EXPECT_EQ(j["data_types"]["grad_accum_dtype"], "fp32");  // canonical spelling
  EXPECT_EQ(j["checkpoint"]["tag_validation"], "Ignore");
  EXPECT_EQ(j["zero_optimization"]["stage3_max_live_parameters"], 100'000'000);
  EXPECT_EQ(j["zero_optimization"]["offload_param"]["device"], "nvme");
  EXPECT_EQ(j["zero_optimization"]["stage3_prefetch_bucket_size"], 50'000'000);  // default
  EXPECT_EQ(j["bf16"]["enabled"], false);                                        // default
  EXPECT_EQ(j["amp"], nlohmann::json({{"enabled", false}}));
  EXPECT_FALSE(j.dump().find("\"auto\"") != std::string::npos);
}

TEST(ConfigRoundTrip, DefaultsRoundTrip) {
  const DeepSpeedConfig d = DeepSpeedConfig::defaults();
  EXPECT_EQ(DeepSpeedConfig::from_json(d.to_json(), "defaults"), d);
}

TEST(ConfigRoundTrip, FromFileReadsHjsonStyleText) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "zero_config_round_trip_test.json";
  {
    std::ofstream out(path);
    out << "// comment\n{\"train_micro_batch_size_per_gpu\": 2, /* c */ \"steps_per_print\": 5,}\n";
  }
  const DeepSpeedConfig c = DeepSpeedConfig::from_file(path.string());
  EXPECT_EQ(c.batch.train_batch_size, 2);
  EXPECT_EQ(c.steps_per_print, 5);
  {
    std::ofstream out(path);
    out << "{\n  \"train_micro_batch_size_per_gpu\": 2,\n  \"stage\": 1\n}\n";
  }
  // An unknown key DeepSpeed would ignore is a warning naming its line; strict reading
  // (--strict-config) makes it an error.
  const DeepSpeedConfig warned = DeepSpeedConfig::from_file(path.string());
  ASSERT_EQ(warned.notes.of_kind(ConfigNote::Kind::kWarning).size(), 1u);
  EXPECT_EQ(warned.notes.of_kind(ConfigNote::Kind::kWarning)[0].text.rfind(
                path.string() + ":3: unknown key 'stage' is ignored", 0),
            0u);
  try {
    DeepSpeedConfig::from_file(path.string(), {}, ConfigReadOptions{true});
    FAIL() << "unknown key accepted under strict reading";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path.string() + ":3: unknown key 'stage'", 0), 0u)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace zero::config
