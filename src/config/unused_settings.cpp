#include "config/unused_settings.h"

#include <string>
#include <vector>

#include "config/other_sections.h"
#include "core/error.h"

namespace zero::config {
namespace {

bool enabled_in(const nlohmann::json& config, const char* section) {
  const auto it = config.find(section);
  if (it == config.end() || !it->is_object()) return false;
  const auto enabled = it->find("enabled");
  return enabled != it->end() && enabled->is_boolean() && enabled->get<bool>();
}

// zero_optimization keys that only stage 3 reads (both spellings).
bool is_stage3_key(const std::string& key) {
  static const std::vector<std::string> kStage3Only = {
      "prefetch_bucket_size",          "param_persistence_threshold",
      "model_persistence_threshold",   "max_live_parameters",
      "max_reuse_distance",            "gather_16bit_weights_on_model_save",
      "module_granularity_threshold",  "use_all_reduce_for_fetch_params",
      "allgather_sequential",          "partition_stream_chunk_size",
      // ZeRO++ (sharding/zero_plus_plus.h) is built on stage 3's gathers.
      "zero_quantized_weights",        "zero_quantized_gradients",
      "zero_hpz_partition_size"};
  if (key.rfind("stage3_", 0) == 0) return true;
  for (const std::string& name : kStage3Only) {
    if (key == name) return true;
  }
  return false;
}

}  // namespace

void apply_amp_section(nlohmann::json& config, const ReadContext& context) {
  const auto amp = config.find("amp");
  if (amp == config.end()) return;
  if (!other_section_in_use(*amp)) return;  // switched off: kept, and the gate lets it pass
  for (const char* other : {"fp16", "bf16", "bfloat16"}) {
    if (enabled_in(config, other)) {
      throw ConfigError(context.where("amp") + ": keys 'amp' and '" + other +
                        ".enabled' are both on; DeepSpeed runs one of them (it asserts the same), "
                        "so remove the amp section or switch " + other + " off");
    }
  }
  std::string levels;
  if (amp->is_object()) {
    for (const auto& [key, value] : amp->items()) {
      if (key != "enabled") levels += (levels.empty() ? "" : ", ") + key + " " + value.dump();
    }
  }
  if (!config.contains("fp16") || !config.at("fp16").is_object()) {
    config["fp16"] = nlohmann::json::object();
  }
  config["fp16"]["enabled"] = true;
  config.erase("amp");
  context.note("amp", "Apex AMP runs as fp16 mixed precision with DeepSpeed's dynamic loss "
                      "scaling and fp32 master weights (what AMP's O1/O2 levels amount to)" +
                          (levels.empty() ? std::string()
                                          : "; the amp options (" + levels + ") are not used"));
}

void note_unused_settings(DeepSpeedConfig& config, const nlohmann::json& raw,
                          const ReadContext& context) {
  ZeroConfig& zero = config.zero_optimization;
  if (zero.stage < 3 && zero.offload_param.device != OffloadDevice::kNone) {
    context.note("zero_optimization.offload_param",
                 "zero_optimization.offload_param is ignored at stage " +
                     std::to_string(zero.stage) +
                     " (DeepSpeed offloads parameters only at stage 3)");
    zero.offload_param.device = OffloadDevice::kNone;
    zero.cpu_offload_param = false;
  }
  if (zero.stage < 3) {
    const auto section = raw.find("zero_optimization");
    std::string keys;
    if (section != raw.end() && section->is_object()) {
      for (const auto& [key, value] : section->items()) {
        if (is_stage3_key(key)) keys += (keys.empty() ? "" : ", ") + key;
      }
    }
    if (!keys.empty()) {
      context.note("zero_optimization", "stage-3 settings are unused at stage " +
                                            std::to_string(zero.stage) + ": " + keys);
    }
  }
  if (const auto it = raw.find("zero_optimization");
      it != raw.end() && it->is_object() && it->contains("elastic_checkpoint")) {
    context.note("zero_optimization.elastic_checkpoint",
                 "zero_optimization.elastic_checkpoint needs nothing: zero.cpp checkpoints "
                 "always load at any world size and ZeRO stage");
  }
  // Blocks DeepSpeed reads only on request from outside the config.
  const struct {
    const char* key;
    const char* why;
  } kOnRequest[] = {
      {"autotuning", "the autotuning block is unused: DeepSpeed reads it only when started with "
                     "`deepspeed --autotuning`, and zero.cpp does not autotune"},
      {"compile", "the compile block is unused: DeepSpeed compiles only when the program calls "
                  "engine.compile(), and zero.cpp's kernels are compiled ahead of time"},
  };
  for (const auto& block : kOnRequest) {
    if (const auto it = config.unmodeled_sections.find(block.key);
        it != config.unmodeled_sections.end()) {
      context.note(block.key, block.why);
      config.unmodeled_sections.erase(it);
    }
  }
}

}  // namespace zero::config
