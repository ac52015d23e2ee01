// "auto" values resolve as the Hugging Face Trainer resolves them: from flags, else the Trainer's
// defaults, else (for what only the run knows) an error naming the key; flags that contradict a
// concrete value fail like the Trainer's mismatch check; absent batch keys are filled.
#include <gtest/gtest.h>

#include <string>

#include "config/deepspeed_config.h"
#include "core/error.h"

namespace zero::config {
namespace {

AutoValues all_autos() {
  AutoValues a;
  a.micro_batch_size = 4;
  a.gradient_accumulation_steps = 2;
  a.total_steps = 1000;
  a.warmup_steps = 50;
  a.hidden_size = 768;
  a.learning_rate = 3e-4;
  a.weight_decay = 0.01;
  a.adam_beta1 = 0.9;
  a.adam_beta2 = 0.98;
  a.adam_epsilon = 1e-6;
  a.max_grad_norm = 0.5;
  a.fp16 = false;
  a.bf16 = false;
  a.world_size = 2;
  return a;
}

const char* kHfStyle = R"({
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "fp16": {"enabled": "auto"},
  "bf16": {"enabled": "auto"},
  "optimizer": {"type": "AdamW",
                "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupDecayLR",
                "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                           "warmup_num_steps": "auto", "total_num_steps": "auto"}},
  "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
                        "stage3_prefetch_bucket_size": "auto",
                        "stage3_param_persistence_threshold": "auto"}
})";

TEST(AutoValues, EveryHfKeyResolves) {
  const DeepSpeedConfig c = DeepSpeedConfig::from_text(kHfStyle, "hf.json", all_autos());
  EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 2);
  EXPECT_EQ(c.batch.train_batch_size, 16);  // 4 * 2 * world 2
  EXPECT_EQ(c.gradient_clipping, 0.5);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.bf16.enabled);
  const nlohmann::json& op = c.optimizer->params;
  EXPECT_EQ(op["lr"].get<double>(), 3e-4);
  EXPECT_EQ(op["betas"], nlohmann::json::array({0.9, 0.98}));
  EXPECT_EQ(op["eps"].get<double>(), 1e-6);
  EXPECT_EQ(op["weight_decay"].get<double>(), 0.01);
  const nlohmann::json& sp = c.scheduler->params;
  EXPECT_EQ(sp["warmup_min_lr"].get<double>(), 0.0);
  EXPECT_EQ(sp["warmup_max_lr"].get<double>(), 3e-4);
  EXPECT_EQ(sp["warmup_num_steps"], 50);
  EXPECT_EQ(sp["total_num_steps"], 1000);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 768 * 768);
  EXPECT_EQ(c.zero_optimization.stage3_prefetch_bucket_size, 530841);  // int(0.9 * 768 * 768)
  EXPECT_EQ(c.zero_optimization.stage3_param_persistence_threshold, 7680);
}

TEST(AutoValues, PrecisionFlagsResolveToTrue) {
  AutoValues a = all_autos();
  a.bf16 = true;
  const DeepSpeedConfig c = DeepSpeedConfig::from_text(kHfStyle, "hf.json", a);
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_FALSE(c.fp16.enabled);
}

TEST(AutoValues, TrainBatchAutoUsesTheConfigsMicroBatch) {
  AutoValues a;
  a.world_size = 4;
  const DeepSpeedConfig c = DeepSpeedConfig::from_text(
      R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 2})", "c.json", a);
  EXPECT_EQ(c.batch.train_batch_size, 8);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 1);
}

std::string error_of(const std::string& text, const AutoValues& autos) {
  try {
    DeepSpeedConfig::from_text(text, "hf.json", autos);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AutoValues, WithoutFlagsEveryKeyTakesTheTrainersDefault) {
  AutoValues a;
  a.hidden_size = 64;
  a.total_steps = 100;
  const DeepSpeedConfig c = DeepSpeedConfig::from_text(kHfStyle, "hf.json", a);
  EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 1);
  EXPECT_EQ(c.batch.train_batch_size, 8);
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.bf16.enabled);
  EXPECT_EQ(c.optimizer->params["lr"].get<double>(), 5e-5);
  EXPECT_EQ(c.optimizer->params["betas"], nlohmann::json::array({0.9, 0.999}));
  EXPECT_EQ(c.optimizer->params["eps"].get<double>(), 1e-8);
  EXPECT_EQ(c.optimizer->params["weight_decay"].get<double>(), 0.0);
  EXPECT_EQ(c.scheduler->params["warmup_max_lr"].get<double>(), 5e-5);
  EXPECT_EQ(c.scheduler->params["warmup_num_steps"], 0);
  EXPECT_EQ(c.scheduler->params["total_num_steps"], 100);
  // Each resolution is recorded with where its value came from.
  const auto notes = c.notes.of_kind(ConfigNote::Kind::kAuto);
  ASSERT_GE(notes.size(), 14u);
  bool saw_lr = false;
  for (const ConfigNote& note : notes) {
    if (note.key != "optimizer.params.lr") continue;
    saw_lr = true;
    EXPECT_NE(note.text.find("\"auto\" -> 5e-05"), std::string::npos) << note.text;
    EXPECT_NE(note.text.find("--lr sets it"), std::string::npos) << note.text;
  }
  EXPECT_TRUE(saw_lr);
}

TEST(AutoValues, WhatOnlyTheRunKnowsIsAnErrorNamingTheKey) {
  // No model and no step count: the bucket sizes and total_num_steps cannot be resolved.
  std::string m;
  try {
    DeepSpeedConfig::from_text(kHfStyle, "hf.json", AutoValues{});
  } catch (const ConfigError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("key 'scheduler.params.total_num_steps' is \"auto\""), std::string::npos) << m;
  AutoValues a;
  a.total_steps = 10;
  try {
    DeepSpeedConfig::from_text(kHfStyle, "hf.json", a);
  } catch (const ConfigError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("key 'zero_optimization.reduce_bucket_size' is \"auto\" (the model's hidden "
                   "size squared) but no model is known"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("AutoValues"), std::string::npos) << m;
}

TEST(AutoValues, AFlagThatContradictsAConcreteValueIsAnError) {
  AutoValues a;
  a.learning_rate = 1e-4;
  std::string m;
  try {
    DeepSpeedConfig::from_text("{\"train_batch_size\": 8,\n \"optimizer\": {\"type\": \"AdamW\","
                               " \"params\": {\"lr\": 3e-5}}}",
                               "ds.json", a);
  } catch (const ConfigError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("ds.json:2: key 'optimizer.params.lr' = 3e-05 but --lr 0.0001 was given"),
            std::string::npos)
      << m;
  // The same value is no contradiction.
  a.learning_rate = 3e-5;
  EXPECT_NO_THROW(DeepSpeedConfig::from_text(
      R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 3e-5}}})",
      "ds.json", a));
}

TEST(AutoValues, AbsentBatchKeysAreFilledAsTheTrainerDoes) {
  AutoValues a;
  DeepSpeedConfig c = DeepSpeedConfig::from_text("{}", "c.json", a);
  EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 8);
  a.micro_batch_size = 2;
  a.gradient_accumulation_steps = 3;
  a.world_size = 2;
  c = DeepSpeedConfig::from_text("{}", "c.json", a);
  EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 2);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 3);
  EXPECT_EQ(c.batch.train_batch_size, 12);
  // A fixed train_batch_size without flags: DeepSpeed's own inference decides.
  c = DeepSpeedConfig::from_text(R"({"train_batch_size": 32})", "c.json", AutoValues{});
  EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 32);
}

TEST(AutoValues, TrainerOptimizerWhenTheConfigHasNone) {
  AutoValues a;
  a.learning_rate = 2e-4;
  a.add_trainer_optimizer = true;
  const DeepSpeedConfig c = DeepSpeedConfig::from_text("{}", "c.json", a);
  ASSERT_TRUE(c.optimizer.has_value());
  EXPECT_EQ(c.optimizer->type, "AdamW");
  EXPECT_EQ(c.optimizer->params["lr"].get<double>(), 2e-4);
  // Without the Trainer's part, DeepSpeed's meaning stays: no optimizer section.
  EXPECT_FALSE(DeepSpeedConfig::from_text("{}", "c.json", AutoValues{}).optimizer.has_value());
}

TEST(AutoValues, PrecisionFlagEnablesAnAbsentSection) {
  AutoValues a;
  a.bf16 = true;
  EXPECT_TRUE(DeepSpeedConfig::from_text("{}", "c.json", a).bf16.enabled);
  a.bf16.reset();
  a.fp16 = true;
  EXPECT_TRUE(DeepSpeedConfig::from_text("{}", "c.json", a).fp16.enabled);
}

TEST(AutoValues, AutoWhereTheTrainerResolvesNothing) {
  std::string m = error_of(
      R"({"train_batch_size": 1,
          "scheduler": {"type": "OneCycle", "params": {"cycle_max_lr": "auto"}}})",
      all_autos());
  EXPECT_NE(m.find("key 'scheduler.params.cycle_max_lr' is \"auto\" but nothing resolves it"),
            std::string::npos)
      << m;
  m = error_of(
      R"({"train_batch_size": 16, "zero_optimization": {"stage3_max_live_parameters": "auto"}})",
      all_autos());
  EXPECT_NE(m.find("key 'zero_optimization.stage3_max_live_parameters' is \"auto\""),
            std::string::npos)
      << m;
  m = error_of(R"({"train_batch_size": 16, "steps_per_print": "auto"})", all_autos());
  EXPECT_NE(m.find("key 'steps_per_print' is \"auto\""), std::string::npos) << m;
  m = error_of(R"({"train_batch_size": 16, "communication_data_type": "auto"})", all_autos());
  EXPECT_NE(m.find("key 'communication_data_type' is \"auto\""), std::string::npos) << m;
}

TEST(AutoValues, ConcreteValuesAreLeftAloneWithoutFlags) {
  AutoValues a;
  a.hidden_size = 768;
  const DeepSpeedConfig c = DeepSpeedConfig::from_text(
      R"({"train_micro_batch_size_per_gpu": 3, "gradient_clipping": 2.0,
          "optimizer": {"type": "Adam", "params": {"lr": 0.1}}})",
      "c.json", a);
  EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 3);
  EXPECT_EQ(c.gradient_clipping, 2.0);
  EXPECT_EQ(c.optimizer->params["lr"].get<double>(), 0.1);
}

}  // namespace
}  // namespace zero::config
