// Fuzzes the DeepSpeed config reader as `zero train --deepspeed FILE` uses it: the file's text
// (strict JSON, DeepSpeed's lenient JSON or HJSON) through DeepSpeedConfig::from_text, then
// engine::settings_from_config on the result. Twice: with no "auto" values known (the library
// default), and with what `zero train` without flags passes (world size, --steps, the tiny
// model's hidden size, the HF Trainer's optimizer) under --strict-config, so "auto" keys
// resolve and reach the later checks.
#include <cstddef>
#include <cstdint>

#include "config/deepspeed_config.h"
#include "engine/engine_settings.h"
#include "fuzz_support.h"

namespace {

zero::config::AutoValues values_zero_train_passes() {
  zero::config::AutoValues autos;
  autos.world_size = 1;
  autos.total_steps = 1000;
  autos.hidden_size = 64;
  autos.add_trainer_optimizer = true;
  return autos;
}

void read_config(const std::string& text, const zero::config::AutoValues& autos,
                 const zero::config::ConfigReadOptions& options) {
  zero::fuzz::expect_only_user_errors([&] {
    const auto config = zero::config::DeepSpeedConfig::from_text(text, "fuzz", autos, options);
    const auto settings = zero::engine::settings_from_config(config, "fuzz");
    (void)settings;
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = zero::fuzz::as_text(data, size);
  read_config(text, zero::config::AutoValues{}, zero::config::ConfigReadOptions{});
  static const zero::config::AutoValues autos = values_zero_train_passes();
  read_config(text, autos, zero::config::ConfigReadOptions{.strict = true});
  return 0;
}
