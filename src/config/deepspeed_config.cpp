// Parsing order for a DeepSpeed config: lenient JSON -> legacy forms -> "auto" resolution ->
// typed section readers (unknown keys, types, ranges) -> batch inference -> cross-key rules.
#include "config/deepspeed_config.h"


#include "config/lenient_json.h"
#include "config/read_context.h"
#include "config/section_reader.h"
#include "config/section_writer.h"
#include "config/unused_settings.h"
#include "core/error.h"
#include "io/input_file.h"

namespace zero::config {
namespace {

std::optional<int64_t> given(int64_t value) {
  return value == 0 ? std::nullopt : std::optional<int64_t>(value);
}

void require_zero_stage(const DeepSpeedConfig& c, const std::string& key,
                        const std::string& source) {
  if (c.zero_optimization.stage >= 1) return;
  throw ConfigError(source + ": key '" + key +
                    "' = true needs ZeRO (zero_optimization.stage 1, 2 or 3), but the stage is " +
                    std::to_string(c.zero_optimization.stage) +
                    "; set it to false or raise the stage");
}

void require_type(const std::string& type, const std::string& section, const std::string& example,
                  const std::string& source) {
  if (!type.empty()) return;
  throw ConfigError(source + ": key '" + section + ".type' is missing or empty; name the " +
                    section + ", e.g. \"type\": \"" + example + "\"");
}

// Rules DeepSpeed checks across keys (runtime/config.py: _do_error_check and the fp16/bf16
// assertion), applied once every section is read.
void check_cross_keys(const DeepSpeedConfig& c, const std::string& source) {
  if (c.fp16.enabled && c.bf16.enabled) {
    throw ConfigError(source +
                      ": keys 'fp16.enabled' and 'bf16.enabled' are both true; "
                      "DeepSpeed trains in one 16-bit format at a time, so set one of "
                      "them to false");
  }
  if (c.fp16.fp16_master_weights_and_grads) {
    require_zero_stage(c, "fp16.fp16_master_weights_and_grads", source);
  }
  if (c.bf16.bf16_master_weights_and_grads) {
    require_zero_stage(c, "bf16.bf16_master_weights_and_grads", source);
    if (!c.bf16.enabled) {
      throw ConfigError(source + ": key 'bf16.bf16_master_weights_and_grads' = true needs "
                                 "'bf16.enabled' = true (bf16 training)");
    }
  }
  if (c.bf16.stochastic_rounding && !c.bf16.bf16_master_weights_and_grads) {
    throw ConfigError(source + ": key 'bf16.stochastic_rounding' = true needs "
                               "'bf16.bf16_master_weights_and_grads' = true: it rounds updates into "
                               "bf16 master weights (with fp32 master weights no update is lost)");
  }
  if (c.bf16.bf16_optimizer_states) {
    require_zero_stage(c, "bf16.bf16_optimizer_states", source);
    if (!c.bf16.bf16_master_weights_and_grads) {
      throw ConfigError(source +
                        ": key 'bf16.bf16_optimizer_states' = true needs "
                        "'bf16.bf16_master_weights_and_grads' = true; set both or "
                        "neither");
    }
  }
  if (c.optimizer) require_type(c.optimizer->type, "optimizer", "AdamW", source);
  c.pipeline.validate(source);
  c.tensor_parallel.validate(source);
  if (c.scheduler) require_type(c.scheduler->type, "scheduler", "WarmupLR", source);
}

}  // namespace

DeepSpeedConfig DeepSpeedConfig::from_file(const std::string& path, const AutoValues& autos,
                                           const ConfigReadOptions& options) {
  return from_text(io::read_text_file(path, "the DeepSpeed config", io::kMaxConfigBytes), path,
                   autos, options);
}

DeepSpeedConfig DeepSpeedConfig::from_text(const std::string& text, const std::string& source_name,
                                           const AutoValues& autos,
                                           const ConfigReadOptions& options) {
  KeyLines key_lines;
  const nlohmann::json json = parse_lenient_json(text, source_name, &key_lines);
  return from_json(json, source_name, autos, options, &key_lines);
}

namespace {

// The data-parallel world size: `world_size` / sequence_parallel_size (a positive integer that
// divides the world, else a ConfigError naming both; other forms are left to the key's reader).
int64_t data_parallel_world(const nlohmann::json& json, int64_t world_size, const std::string& source) {
  const auto it = json.find("sequence_parallel_size");
  if (it == json.end() || !it->is_number_integer()) return world_size;
  const int64_t sp = it->get<int64_t>();
  if (sp <= 1) return world_size;
  if (world_size % sp != 0) {
    throw ConfigError(source + ": sequence_parallel_size " + std::to_string(sp) +
                      " does not divide the number of ranks, " + std::to_string(world_size) +
                      " (the data-parallel size is ranks / sequence_parallel_size); run a "
                      "multiple of it, or change the key");
  }
  return world_size / sp;
}

}  // namespace

DeepSpeedConfig DeepSpeedConfig::from_json(const nlohmann::json& json, const std::string& source,
                                           const AutoValues& autos,
                                           const ConfigReadOptions& options,
                                           const KeyLines* key_lines) {
  expect_object(json, "", source);
  DeepSpeedConfig config;
  const ReadContext context(source, key_lines, options.strict, config.notes);
  nlohmann::json resolved = json;
  upgrade_legacy_zero_flag(resolved);
  apply_amp_section(resolved, context);
  // DeepSpeed counts batch sizes over data-parallel ranks: with Ulysses sequence parallelism
  // that is world / sequence_parallel_size ("auto" batch sizes too).
  const int64_t data_parallel = data_parallel_world(resolved, autos.world_size, source);
  AutoValues data_autos = autos;
  data_autos.world_size = data_parallel;
  resolve_auto_values(resolved, data_autos, context);
  resolve_pipeline_auto(resolved, context);

  read_section(resolved, config, "", context);
  config.batch = infer_batch_config(
      given(config.batch.train_batch_size), given(config.batch.train_micro_batch_size_per_gpu),
      given(config.batch.gradient_accumulation_steps), data_parallel, source);
  finalize_zero_config(config.zero_optimization, source);
  check_cross_keys(config, source);
  note_unused_settings(config, resolved, context);
  return config;
}

DeepSpeedConfig DeepSpeedConfig::defaults(int64_t micro_batch_size,
                                          int64_t gradient_accumulation_steps, int64_t world_size) {
  const nlohmann::json json = {{"train_micro_batch_size_per_gpu", micro_batch_size},
                               {"gradient_accumulation_steps", gradient_accumulation_steps}};
  AutoValues autos;
  autos.world_size = world_size;
  return from_json(json, "DeepSpeedConfig::defaults", autos);
}

nlohmann::json DeepSpeedConfig::to_json() const { return write_section(*this); }

}  // namespace zero::config
