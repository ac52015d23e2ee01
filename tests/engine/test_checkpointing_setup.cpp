// The activation_checkpointing section through the engine: DeepSpeed's rule that the contiguous
// buffer needs partition_activations, number_checkpoints below the checkpointed block count,
// the warning when the section sets options but the model does not checkpoint (the model
// decides WHETHER, the section HOW), the engine applying the options (ZeRO-3 training with
// host copies and the contiguous buffer stays bit-identical to plain checkpointing), and the
// profile table printed at steps_per_print.
#include <gtest/gtest.h>

#include <string>

#include "comm/self_comm.h"
#include "config/deepspeed_config.h"
#include "engine/checkpointing_setup.h"
#include "engine/engine_settings.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace checkpointing_setup_test {
using namespace zero_test;

config::DeepSpeedConfig parse(const std::string& section) {
  return config::DeepSpeedConfig::from_text(
      R"({"train_micro_batch_size_per_gpu": 2, "activation_checkpointing": )" + section + "}",
      "ds.json", config::AutoValues{});
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CheckpointingSetup, EveryKeyIsAcceptedAndReachesTheSettings) {
  const EngineSettings s = settings_from_config(
      parse(R"({"partition_activations": true, "cpu_checkpointing": true,
                "contiguous_memory_optimization": true, "number_checkpoints": 4,
                "synchronize_checkpoint_boundary": true, "profile": true})"),
      "ds.json");
  EXPECT_TRUE(s.activation_checkpointing.partition_activations);
  EXPECT_TRUE(s.activation_checkpointing.cpu_checkpointing);
  EXPECT_TRUE(s.activation_checkpointing.contiguous_memory_optimization);
  EXPECT_EQ(s.activation_checkpointing.number_checkpoints, 4);
  EXPECT_TRUE(s.activation_checkpointing.synchronize_checkpoint_boundary);
  EXPECT_TRUE(s.activation_checkpointing.profile);
}

TEST(CheckpointingSetup, ContiguousBufferNeedsPartitionActivations) {
  try {
    settings_from_config(parse(R"({"contiguous_memory_optimization": true})"), "ds.json");
    FAIL() << "contiguous_memory_optimization without partition_activations accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "ds.json")) << e.what();
    EXPECT_TRUE(contains(e.what(), "activation_checkpointing.contiguous_memory_optimization"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "activation_checkpointing.partition_activations")) << e.what();
  }
}

TEST(CheckpointingSetup, NumberCheckpointsBelowTheBlockCountIsAConfigError) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  auto net = small_model("llama", cpu);  // 2 blocks
  net->set_activation_checkpointing(true);
  EngineSettings s = zero_settings(0, 2, 1, 1);
  s.activation_checkpointing.number_checkpoints = 1;
  try {
    Engine engine(std::move(net), s, self);
    FAIL() << "number_checkpoints 1 accepted for 2 checkpointed blocks";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "activation_checkpointing.number_checkpoints")) << e.what();
    EXPECT_TRUE(contains(e.what(), "checkpoints 2 units")) << e.what();
  }
}

TEST(CheckpointingSetup, OptionsWithoutCheckpointingWarnAndDoNothing) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  config::ActivationCheckpointingConfig section;
  section.cpu_checkpointing = true;
  section.number_checkpoints = 1;  // too small, but unused: no error
  auto net = small_model("llama", cpu);
  const auto warning = configure_activation_checkpointing(*net, section);
  ASSERT_TRUE(warning.has_value());
  EXPECT_TRUE(contains(*warning, "activation_checkpointing.cpu_checkpointing")) << *warning;
  EXPECT_TRUE(contains(*warning, "activation_checkpointing.number_checkpoints")) << *warning;
  EXPECT_TRUE(contains(*warning, "--gradient-checkpointing true")) << *warning;
  EXPECT_FALSE(net->activation_checkpointer().options().cpu_checkpointing);
  // No section options, nothing to say.
  EXPECT_FALSE(configure_activation_checkpointing(*net, {}).has_value());
  // The engine prints it.
  EngineSettings s = zero_settings(0, 2, 1, 1);
  s.activation_checkpointing = section;
  ::testing::internal::CaptureStderr();
  Engine engine(std::move(net), s, self);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "zero: warning: the activation_checkpointing section sets")) << err;
}

std::vector<std::vector<double>> train(int stage, bool bf16,
                                       const config::ActivationCheckpointingConfig& section,
                                       std::string* out) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  auto net = small_model("llama", cpu);
  net->set_activation_checkpointing(true);
  EngineSettings s = zero_settings(stage, 2, 2, 1);
  s.bf16.enabled = bf16;
  s.steps_per_print = 2;
  s.activation_checkpointing = section;
  Engine engine(std::move(net), s, self);
  EXPECT_EQ(engine.model().activation_checkpointer().options().cpu_checkpointing,
            section.cpu_checkpointing);
  std::vector<std::vector<double>> losses;
  if (out != nullptr) ::testing::internal::CaptureStdout();
  for (int step = 0; step < 3; ++step) losses.push_back(train_step(engine, step, 0, 8));
  if (out != nullptr) *out = ::testing::internal::GetCapturedStdout();
  return losses;
}

TEST(CheckpointingSetup, EngineAppliesTheSectionBitIdenticallyAndPrintsTheProfile) {
  config::ActivationCheckpointingConfig all;
  all.partition_activations = true;
  all.cpu_checkpointing = true;
  all.contiguous_memory_optimization = true;
  all.synchronize_checkpoint_boundary = true;
  for (bool bf16 : {false, true}) {
    for (int stage : {0, 3}) {
      const auto plain = train(stage, bf16, {}, nullptr);
      EXPECT_EQ(train(stage, bf16, all, nullptr), plain) << "stage " << stage;
    }
  }
  config::ActivationCheckpointingConfig profiled;
  profiled.profile = true;
  std::string printed;
  train(0, false, profiled, &printed);
  // steps_per_print 2 of 3 steps: printed once, for step 2, one row per block.
  EXPECT_TRUE(contains(printed, "[step 2] activation checkpointing profile")) << printed;
  EXPECT_FALSE(contains(printed, "[step 1]")) << printed;
  EXPECT_TRUE(contains(printed, "recompute ms")) << printed;
  EXPECT_TRUE(contains(printed, "total")) << printed;
}

}  // namespace checkpointing_setup_test
}  // namespace zero::engine
