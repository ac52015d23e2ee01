// Every config in examples/ either loads (with the command line's "auto" values) or fails with
// an UnsupportedError naming the key of the feature that is not built yet.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "engine/deepspeed_settings.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace zero::engine {
namespace {

TEST(ExampleConfigs, EachLoadsOrNamesItsUnsupportedKey) {
  const std::string dir = std::string(ZERO_TEST_FIXTURES) + "/../../examples/";
  const std::map<std::string, std::string> expected = {
      {"ds_config_zero0.json", ""},
      {"ds_config_hjson_style.json", ""},
      {"ds_config_warmup_cosine.json", ""},
      {"ds_config_lr_range_test.json", ""},
      {"ds_config_onecycle.json", ""},
      {"ds_config_zero2.json", "zero_optimization.stage"},
      {"ds_config_zero3.json", "zero_optimization.stage"},
      {"ds_config_fp16.json", "fp16.enabled"},
      {"ds_config_bf16.json", "bf16.enabled"},
      {"ds_config_offload_cpu.json", "zero_optimization.stage"},
  };
  AutoValues autos;
  autos.micro_batch_size = 8;
  autos.gradient_accumulation_steps = 1;
  autos.learning_rate = 1e-3;
  autos.weight_decay = 0.0;
  autos.total_steps = 500;
  autos.warmup_steps = 20;
  autos.max_grad_norm = 1.0;
  for (const auto& [file, unsupported_key] : expected) {
    try {
      const EngineSettings s = settings_from_deepspeed_file(dir + file, 1, autos);
      auto opt = optim::Optimizer::create({s.optimizer_type, s.optimizer_params}, "optimizer");
      optim::LrSchedule::create({s.scheduler_type, s.scheduler_params}, opt->base_lr(), "scheduler");
      EXPECT_TRUE(unsupported_key.empty()) << file << " loaded but should name " << unsupported_key;
    } catch (const UnsupportedError& e) {
      EXPECT_FALSE(unsupported_key.empty()) << file << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(unsupported_key), std::string::npos) << file << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace zero::engine
