// The real-configs corpus (tests/config/real_configs/): configs written in the shapes real
// projects use — Hugging Face Trainer all-"auto" templates at stages 2 and 3 with and without
// offload, HJSON without root braces, foreign keys, near-miss typos, legacy aliases, absent
// batch keys, Megatron-style fixed batches. Each either trains one optimizer step on a small
// model or fails with the expected message, and the values it resolved follow the Trainer's
// rules. The folder is globbed: a new file must be listed here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "comm/self_comm.h"
#include "config/deepspeed_config.h"
#include "core/error.h"
#include "engine/engine_settings.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace real_configs_test {
namespace fs = std::filesystem;
using config::ConfigNote;
using config::DeepSpeedConfig;

struct Expectation {
  std::string error;  // empty: trains one step; else a substring of the error message
  int warnings = 0;   // ignored keys warned about
  std::function<void(const DeepSpeedConfig&)> check = [](const DeepSpeedConfig&) {};
};

constexpr int64_t kHidden = 32;  // zero_harness's small model

void expect_trainer_defaults(const DeepSpeedConfig& c) {
  EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 1);
  EXPECT_EQ(c.batch.train_batch_size, 8);
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.bf16.enabled);
  const nlohmann::json& p = c.optimizer->params;
  EXPECT_EQ(p["lr"].get<double>(), 5e-5);
  EXPECT_EQ(p["betas"], nlohmann::json::array({0.9, 0.999}));
  EXPECT_EQ(p["eps"].get<double>(), 1e-8);
  EXPECT_EQ(p["weight_decay"].get<double>(), 0.0);
  EXPECT_EQ(c.scheduler->params["warmup_min_lr"].get<double>(), 0.0);
  EXPECT_EQ(c.scheduler->params["warmup_max_lr"].get<double>(), 5e-5);
  EXPECT_EQ(c.scheduler->params["warmup_num_steps"], 0);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, kHidden * kHidden);
}

const std::map<std::string, Expectation>& corpus() {
  static const std::map<std::string, Expectation> expected = {
      {"hf_trainer_zero2_auto.json", {"", 0, expect_trainer_defaults}},
      {"hf_trainer_zero3_auto.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          expect_trainer_defaults(c);
          EXPECT_EQ(c.scheduler->params["total_num_steps"], 3);
          EXPECT_EQ(c.zero_optimization.stage3_prefetch_bucket_size,
                    static_cast<int64_t>(0.9 * kHidden * kHidden));
          EXPECT_EQ(c.zero_optimization.stage3_param_persistence_threshold, 10 * kHidden);
        }}},
      {"hf_trainer_zero2_offload.json", {""}},  // CPU optimizer offload runs
      {"hf_trainer_zero3_offload.json", {""}},  // optimizer and parameter offload at stage 3 run
      {"hjson_without_braces.hjson",
       {"", 2,
        [](const DeepSpeedConfig& c) {
          EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 2);
          EXPECT_EQ(c.optimizer->type, "AdamW");
          EXPECT_EQ(c.optimizer->params["betas"], nlohmann::json::array({0.9, 0.95}));
          EXPECT_EQ(c.zero_optimization.stage, 1);
          EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500000000);
        }}},
      {"foreign_keys.json", {"", 5}},
      {"near_miss_typo.json", {"'zero_optimization.stage3_param_persistence_threshold'"}},
      {"trailing_space_key.json", {"'gradient_accumulation_steps'"}},
      {"case_typo.json", {"'train_micro_batch_size_per_gpu'"}},
      {"legacy_aliases.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          EXPECT_TRUE(c.bf16.enabled);
          EXPECT_EQ(c.zero_optimization.stage, 1);
          EXPECT_EQ(c.batch.gradient_accumulation_steps, 2);
        }}},
      {"no_batch_keys.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 8);
          EXPECT_EQ(c.batch.gradient_accumulation_steps, 1);
          EXPECT_EQ(c.optimizer->type, "AdamW");
          EXPECT_EQ(c.optimizer->params["lr"].get<double>(), 5e-5);
        }}},
      {"amp_o1.json", {"", 0, [](const DeepSpeedConfig& c) { EXPECT_TRUE(c.fp16.enabled); }}},
      {"megatron_style.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          EXPECT_TRUE(c.fp16.enabled);
          EXPECT_EQ(c.batch.gradient_accumulation_steps, 2);
        }}},
      {"prescale_gradients.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          EXPECT_TRUE(c.prescale_gradients);
          EXPECT_EQ(c.gradient_predivide_factor, 2.0);
        }}},
      {"reduce_scatter_off.json",
       {"", 0, [](const DeepSpeedConfig& c) { EXPECT_FALSE(c.zero_optimization.reduce_scatter); }}},
      {"stage2_with_stage3_keys.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          EXPECT_EQ(c.zero_optimization.offload_param.device, config::OffloadDevice::kNone);
          EXPECT_EQ(c.notes.of_kind(ConfigNote::Kind::kNote).size(), 3u);
        }}},
      {"autotuning_and_compile.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          EXPECT_EQ(c.notes.of_kind(ConfigNote::Kind::kNote).size(), 2u);
        }}},
      {"onebit_adam.json", {""}},  // 1-bit Adam warms up (one rank: nothing compressed)
      {"muon.json", {""}},  // DeepSpeed's Muon params: muon_lr / adam_lr split the groups
      {"muon_zero2.json", {""}},  // stage 2 gathers each unit's proposed updates
      {"wandb_monitor.json", {"'wandb.enabled'"}},
      // The Megatron-DeepSpeed GPT recipe's curriculum: 8 tokens first, growing to 1024.
      {"legacy_curriculum.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          EXPECT_TRUE(c.curriculum_learning.enabled);
          EXPECT_EQ(c.curriculum_learning.max_difficulty, 1024);
          EXPECT_EQ(c.curriculum_learning.schedule_config.difficulty_step, 8);
        }}},
      {"flag_mismatch.json", {"train_micro_batch_size_per_gpu' = 4 but --micro-batch 2"}},
      // DeepSpeed's ZeRO++ tutorial settings (one rank here: nothing travels, nothing is
      // quantized; tests/engine/mpi_test_zero_plus_plus.cpp runs them across ranks).
      {"zero_plus_plus.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          EXPECT_TRUE(c.zero_optimization.zero_quantized_weights);
          EXPECT_TRUE(c.zero_optimization.zero_quantized_gradients);
          EXPECT_EQ(c.zero_optimization.zero_hpz_partition_size, 8);
        }}},
      // Below stage 3 DeepSpeed ignores ZeRO++: one note names the keys.
      {"zero_plus_plus_stage2.json",
       {"", 0,
        [](const DeepSpeedConfig& c) {
          const auto notes = c.notes.of_kind(ConfigNote::Kind::kNote);
          ASSERT_EQ(notes.size(), 1u);
          for (const char* key : {"zero_quantized_weights", "zero_quantized_gradients",
                                  "zero_hpz_partition_size"}) {
            EXPECT_NE(notes[0].text.find(key), std::string::npos) << notes[0].text;
          }
        }}},
  };
  return expected;
}

// What `zero train` passes: the model's hidden size and --steps 3; flag_mismatch.json also gets
// --micro-batch 2, as a user following a Trainer recipe would type it.
config::AutoValues run_autos(const std::string& file) {
  config::AutoValues autos;
  autos.hidden_size = kHidden;
  autos.total_steps = 3;
  autos.add_trainer_optimizer = true;
  if (file == "flag_mismatch.json") autos.micro_batch_size = 2;
  return autos;
}

void train_one_step(const EngineSettings& settings) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(zero_test::small_model("llama", cpu), settings, self);
  const std::vector<double> losses = zero_test::train_step(engine, 0, 0, 8);
  ASSERT_FALSE(losses.empty());
  for (const double loss : losses) EXPECT_TRUE(std::isfinite(loss));
  EXPECT_EQ(engine.global_steps(), 1);
}

TEST(RealConfigs, EachTrainsOneStepOrFailsWithItsMessage) {
  const fs::path dir = fs::path(ZERO_TEST_FIXTURES) / ".." / "config" / "real_configs";
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    ++seen;
    const auto it = corpus().find(file);
    ASSERT_NE(it, corpus().end()) << file << " is not listed in this test";
    const Expectation& expected = it->second;
    SCOPED_TRACE(file);
    try {
      const DeepSpeedConfig c = DeepSpeedConfig::from_file(entry.path().string(), run_autos(file));
      const EngineSettings settings = settings_from_config(c, file);
      EXPECT_EQ(static_cast<int>(c.notes.of_kind(ConfigNote::Kind::kWarning).size()),
                expected.warnings);
      expected.check(c);
      ASSERT_TRUE(expected.error.empty()) << "read, but should fail with: " << expected.error;
      train_one_step(settings);
    } catch (const Error& e) {
      ASSERT_FALSE(expected.error.empty()) << e.what();
      EXPECT_NE(std::string(e.what()).find(expected.error), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(seen, static_cast<int>(corpus().size()));
}

}  // namespace real_configs_test
}  // namespace zero::engine
