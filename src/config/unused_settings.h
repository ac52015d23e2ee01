// Settings DeepSpeed documents but does not act on in the configuration at hand, and legacy
// spellings mapped onto what zero.cpp runs. Each is accepted with a note saying what happens,
// so a config copied from another project runs without losing anything silently:
//   - zero_optimization.offload_param below stage 3 (DeepSpeed offloads parameters only at 3);
//   - stage-3 keys (stage3_*) at stages 0-2;
//   - an `autotuning` block (DeepSpeed reads it only under `deepspeed --autotuning`);
//   - a `compile` block (DeepSpeed compiles only when the program calls engine.compile());
//   - elastic_checkpoint (zero.cpp checkpoints always load at any world size);
//   - `amp` (Apex AMP) runs as fp16 mixed precision with dynamic loss scaling.
#pragma once
#include <nlohmann/json.hpp>

#include "config/deepspeed_config.h"
#include "config/read_context.h"

namespace zero::config {

// Before "auto" resolution: an enabled `amp` section becomes fp16.enabled = true (with a note)
// and is removed; amp together with fp16 or bf16 is a ConfigError, as in DeepSpeed.
void apply_amp_section(nlohmann::json& config, const ReadContext& context);

// After reading: notes for the settings listed above, turning off what is unused (so
// `config` holds the values in effect and the feature gate sees them as off). `raw` is the
// resolved JSON the config was read from (to tell keys written from defaults).
void note_unused_settings(DeepSpeedConfig& config, const nlohmann::json& raw,
                          const ReadContext& context);

}  // namespace zero::config
