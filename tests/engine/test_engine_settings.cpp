// A DeepSpeed config becomes engine settings end to end: batch sizes inferred for the world
// size, sections carried over, "auto" resolved from the command line, and an unbuilt feature
// surfaces as an UnsupportedError naming its key.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_settings.h"

namespace zero::engine {
namespace engine_settings_test {

config::DeepSpeedConfig parse(const std::string& text, const config::AutoValues& autos = {}) {
  return config::DeepSpeedConfig::from_text(text, "ds.json", autos);
}

TEST(EngineSettings, CarriesEverySectionTheEngineReads) {
  config::AutoValues autos;
  autos.world_size = 4;
  autos.learning_rate = 3e-4;
  const EngineSettings s = settings_from_config(parse(R"({
    "train_batch_size": 64, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}},
    "gradient_clipping": 0.5, "steps_per_print": 3, "wall_clock_breakdown": true,
    "zero_optimization": {"stage": 3, "overlap_comm": true, "reduce_bucket_size": 1000,
                          "stage3_max_live_parameters": 5000},
    "comms_logger": {"enabled": false}
  })", autos), "ds.json");
  EXPECT_EQ(s.train_batch_size, 64);
  EXPECT_EQ(s.micro_batch_size, 8);  // 64 / (2 x 4 ranks)
  EXPECT_EQ(s.gradient_accumulation_steps, 2);
  EXPECT_EQ(s.optimizer_type, "AdamW");
  EXPECT_DOUBLE_EQ(s.optimizer_params["lr"].get<double>(), 3e-4);
  EXPECT_EQ(s.scheduler_type, "WarmupLR");
  EXPECT_DOUBLE_EQ(s.gradient_clipping, 0.5);
  EXPECT_EQ(s.steps_per_print, 3);
  EXPECT_TRUE(s.wall_clock_breakdown);
  EXPECT_EQ(s.zero.stage, 3);
  EXPECT_TRUE(s.zero.overlap_comm_enabled());
  EXPECT_EQ(s.zero.reduce_bucket_size, 1000);
  EXPECT_EQ(s.zero.stage3_max_live_parameters, 5000);
  EXPECT_EQ(s.source_config["train_batch_size"], 64);
}

TEST(EngineSettings, DefaultsAreDeepSpeeds) {
  const EngineSettings s = settings_from_config(parse(R"({"train_micro_batch_size_per_gpu": 2})"), "ds.json");
  EXPECT_EQ(s.train_batch_size, 2);
  EXPECT_EQ(s.gradient_accumulation_steps, 1);
  EXPECT_DOUBLE_EQ(s.gradient_clipping, 1.0);  // DeepSpeed >= 0.19.3
  EXPECT_EQ(s.steps_per_print, 10);
  EXPECT_EQ(s.zero.stage, 0);
  EXPECT_TRUE(s.scheduler_type.empty());
}

TEST(EngineSettings, UnbuiltFeaturesNameTheirKey) {
  try {
    settings_from_config(parse(R"({"train_micro_batch_size_per_gpu": 2,
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme",
                                                              "ratio": 0.5}}})"),
                         "ds.json");
    FAIL() << "partial optimizer offload to NVMe accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("zero_optimization.offload_optimizer.ratio"), std::string::npos)
        << e.what();
  }
}

TEST(EngineSettings, CpuOptimizerOffloadAndItsLegacyKeyAreAccepted) {
  for (const char* zero : {R"({"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true}})",
                           R"({"stage": 1, "cpu_offload": true})"}) {
    const EngineSettings s = settings_from_config(
        parse(std::string(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": )") + zero +
              "}"),
        "ds.json");
    EXPECT_EQ(s.zero.offload_optimizer.device, config::OffloadDevice::kCpu) << zero;
  }
  // Partial offload (ratio < 1) runs at stage 3 with device "cpu".
  const EngineSettings partial = settings_from_config(
      parse(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization":
      {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})"), "ds.json");
  EXPECT_EQ(partial.zero.offload_optimizer.ratio, 0.5);
}

TEST(EngineSettings, MisspelledKeyNamesTheClosestKey) {
  try {
    parse(R"({"train_micro_batch_size_per_gp": 2})");
    FAIL() << "misspelled key accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train_micro_batch_size_per_gpu"), std::string::npos) << e.what();
  }
}

}  // namespace engine_settings_test
}  // namespace zero::engine
