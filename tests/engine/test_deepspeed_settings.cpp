// DeepSpeed configs: batch-size inference exactly as DeepSpeed (every row and the inconsistent
// combinations), lenient JSON, "auto" values, unknown and wrong-typed keys, and features that are
// recognised but not built yet.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/deepspeed_settings.h"

namespace zero::engine {
namespace {

using Opt = std::optional<int64_t>;

struct BatchRow {
  Opt train, micro, gas;
  int world;
  int64_t want_train, want_micro, want_gas;
};

TEST(BatchInference, EveryRowOfDeepSpeedsTable) {
  const BatchRow rows[] = {
      {32, 4, 2, 4, 32, 4, 2},              // all three, consistent
      {32, 4, Opt{}, 4, 32, 4, 2},          // train + micro -> gas
      {32, Opt{}, 2, 4, 32, 4, 2},          // train + gas -> micro
      {Opt{}, 4, 2, 4, 32, 4, 2},           // micro + gas -> train
      {32, Opt{}, Opt{}, 4, 32, 8, 1},      // train only -> gas 1
      {Opt{}, 4, Opt{}, 4, 16, 4, 1},       // micro only -> gas 1
      {8, 8, Opt{}, 1, 8, 8, 1},
  };
  for (const BatchRow& r : rows) {
    EngineSettings s;
    infer_batch_sizes(r.train, r.micro, r.gas, r.world, s, "cfg");
    EXPECT_EQ(s.train_batch_size, r.want_train);
    EXPECT_EQ(s.micro_batch_size, r.want_micro);
    EXPECT_EQ(s.gradient_accumulation_steps, r.want_gas);
  }
}

TEST(BatchInference, InconsistentCombinationsShowTheNumbers) {
  const BatchRow bad[] = {
      {32, 4, 2, 2, 0, 0, 0},           // 4 * 2 * 2 = 16 != 32
      {30, 4, Opt{}, 4, 0, 0, 0},       // not divisible
      {32, Opt{}, 3, 4, 0, 0, 0},       // not divisible
      {2, Opt{}, Opt{}, 4, 0, 0, 0},    // fewer samples than ranks
  };
  for (const BatchRow& r : bad) {
    EngineSettings s;
    try {
      infer_batch_sizes(r.train, r.micro, r.gas, r.world, s, "cfg.json");
      FAIL() << "expected ConfigError";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("cfg.json"), std::string::npos) << m;
      EXPECT_NE(m.find("train_batch_size"), std::string::npos) << m;
      EXPECT_NE(m.find("world size " + std::to_string(r.world)), std::string::npos) << m;
    }
  }
  EngineSettings s;
  EXPECT_THROW(infer_batch_sizes(Opt{}, Opt{}, 2, 1, s, "cfg"), ConfigError);
}

TEST(DeepSpeedJson, CommentsAndTrailingCommas) {
  const std::string text = R"({
    // a line comment
    "train_micro_batch_size_per_gpu": 4, /* block
       comment */ "steps_per_print": 7,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.95,],},},
    "wall_clock_breakdown": false, // "not://a comment"
    "note_in_string": "a // b /* c */ d",
  })";
  const nlohmann::json j = nlohmann::json::parse(strip_json_extensions(text, "t"));
  EXPECT_EQ(j["steps_per_print"], 7);
  EXPECT_EQ(j["note_in_string"], "a // b /* c */ d");
  EXPECT_EQ(j["optimizer"]["params"]["betas"].size(), 2u);
  EXPECT_THROW(strip_json_extensions("{/* open", "t"), ConfigError);
}

TEST(DeepSpeedJson, DefaultsAndAutoValues) {
  AutoValues autos;
  autos.micro_batch_size = 8;
  autos.learning_rate = 3e-4;
  autos.total_steps = 100;
  const nlohmann::json j = {
      {"train_micro_batch_size_per_gpu", "auto"},
      {"train_batch_size", "auto"},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", "auto"}, {"weight_decay", "auto"}}}}},
      {"scheduler", {{"type", "WarmupDecayLR"}, {"params", {{"total_num_steps", "auto"}, {"warmup_max_lr", "auto"}}}}}};
  const EngineSettings s = settings_from_deepspeed_json(j, 2, autos, "cfg");
  EXPECT_EQ(s.micro_batch_size, 8);
  EXPECT_EQ(s.train_batch_size, 16);
  EXPECT_DOUBLE_EQ(s.optimizer_params["lr"].get<double>(), 3e-4);
  EXPECT_EQ(s.scheduler_params["total_num_steps"], 100);
  EXPECT_DOUBLE_EQ(s.gradient_clipping, 1.0);  // DeepSpeed >= 0.19.3 default
  EXPECT_EQ(s.steps_per_print, 10);
  EXPECT_THROW(settings_from_deepspeed_json({{"train_micro_batch_size_per_gpu", "auto"}}, 1, AutoValues{}, "cfg"),
               ConfigError);
}

void expect_error_mentions(const nlohmann::json& j, const std::string& needle, bool unsupported) {
  try {
    settings_from_deepspeed_json(j, 1, AutoValues{}, "ds.json");
    FAIL() << "expected an error for " << j.dump();
  } catch (const UnsupportedError& e) {
    EXPECT_TRUE(unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  } catch (const ConfigError& e) {
    EXPECT_FALSE(unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DeepSpeedJson, BadInputIsNamed) {
  const nlohmann::json base = {{"train_micro_batch_size_per_gpu", 2}};
  nlohmann::json j = base;
  j["train_micro_batch_size_per_gp"] = 2;
  expect_error_mentions(j, "did you mean 'train_micro_batch_size_per_gpu'", false);
  j = base;
  j["gradient_clipping"] = "large";
  expect_error_mentions(j, "'gradient_clipping' must be a number", false);
  j = base;
  j["train_micro_batch_size_per_gpu"] = 2.5;
  expect_error_mentions(j, "positive integer", false);
  j = base;
  j["zero_optimization"] = {{"stage", 5}};
  expect_error_mentions(j, "zero_optimization.stage", false);
}

TEST(DeepSpeedJson, KnownButUnbuiltFeaturesAreUnsupportedErrors) {
  const nlohmann::json base = {{"train_micro_batch_size_per_gpu", 2}};
  nlohmann::json j = base;
  j["fp16"] = {{"enabled", true}};
  expect_error_mentions(j, "fp16.enabled", true);
  j = base;
  j["zero_optimization"] = {{"stage", 2}};
  expect_error_mentions(j, "zero_optimization.stage", true);
  j = base;
  j["zero_optimization"] = {{"stage", 0}, {"offload_optimizer", {{"device", "cpu"}}}};
  expect_error_mentions(j, "offload_optimizer.device", true);
  j = base;
  j["fp16"] = {{"enabled", false}};
  j["bf16"] = {{"enabled", false}};
  j["zero_optimization"] = {{"stage", 0}};
  EXPECT_NO_THROW(settings_from_deepspeed_json(j, 1, AutoValues{}, "ds.json"));
}

}  // namespace
}  // namespace zero::engine
