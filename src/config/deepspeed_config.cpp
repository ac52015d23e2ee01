// Parsing order for a DeepSpeed config: lenient JSON -> legacy forms -> "auto" resolution ->
// typed section readers (unknown keys, types, ranges) -> batch inference -> cross-key rules.
#include "config/deepspeed_config.h"

#include <initializer_list>

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

// A model-parallel size written in the config at `path` (an integer > 1), else 1: other forms
// ("auto", a typo'd type) are left to the key's reader, which reports them.
int64_t size_in_config(const nlohmann::json& json, std::initializer_list<const char*> path) {
  const nlohmann::json* node = &json;
  for (const char* key : path) {
    if (!node->is_object()) return 1;
    const auto it = node->find(key);
    if (it == node->end()) return 1;
    node = &*it;
  }
  if (!node->is_number_integer()) return 1;
  const int64_t size = node->get<int64_t>();
  return size > 1 ? size : 1;
}

// The data-parallel world size DeepSpeed counts batch sizes over: the ranks divided by the
// pipeline stages, the tensor-parallel size and sequence_parallel_size (flags override the
// first two). A product that does not divide the ranks is a ConfigError naming every size.
int64_t data_parallel_world(const nlohmann::json& json, const AutoValues& autos,
                            const std::string& source) {
  const int64_t pp = autos.pipeline_parallel_size.value_or(size_in_config(json, {"pipeline", "stages"}));
  const int64_t tp =
      autos.tensor_parallel_size.value_or(size_in_config(json, {"tensor_parallel", "autotp_size"}));
  const int64_t sp = size_in_config(json, {"sequence_parallel_size"});
  if (pp < 1 || tp < 1) {
    throw ConfigError(source + ": pipeline and tensor-parallel sizes must be >= 1 (got " +
                      std::to_string(pp) + " and " + std::to_string(tp) + ")");
  }
  const int64_t world = autos.world_size;
  // Each size is a positive int64; their product is checked against the world before dividing.
  const bool fits = pp <= world && tp <= world && sp <= world && pp * tp <= world &&
                    pp * tp * sp <= world && world % (pp * tp * sp) == 0;
  if (!fits) {
    const std::string pp_text = (autos.pipeline_parallel_size ? "--pipeline-parallel-size "
                                                              : "pipeline.stages ") +
                                std::to_string(pp);
    const std::string tp_text = (autos.tensor_parallel_size ? "--tensor-parallel-size "
                                                            : "tensor_parallel.autotp_size ") +
                                std::to_string(tp);
    throw ConfigError(source + ": " + pp_text + " x " + tp_text + " x sequence_parallel_size " +
                      std::to_string(sp) + " does not divide the number of ranks, " +
                      std::to_string(world) +
                      " (the data-parallel size is ranks / their product); run a multiple of "
                      "it, or change the sizes");
  }
  return world / (pp * tp * sp);
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
  // DeepSpeed counts batch sizes over data-parallel ranks: world / (pipeline stages x
  // tensor-parallel size x sequence_parallel_size) ("auto" batch sizes too).
  const int64_t data_parallel = data_parallel_world(resolved, autos, source);
  AutoValues data_autos = autos;
  data_autos.world_size = data_parallel;
  resolve_auto_values(resolved, data_autos, context);
  resolve_pipeline_auto(resolved, context);

  read_section(resolved, config, "", context);
  config.batch = infer_batch_config(
      given(config.batch.train_batch_size), given(config.batch.train_micro_batch_size_per_gpu),
      given(config.batch.gradient_accumulation_steps), data_parallel, source);
  finalize_zero_config(config.zero_optimization, source);
  validate_curriculum_config(config.curriculum_learning, source);
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
