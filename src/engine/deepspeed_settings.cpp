#include "engine/deepspeed_settings.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace zero::engine {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Top-level keys DeepSpeed 0.19 documents. The sections marked "gated" are checked by
// reject_unbuilt_features(): present and enabled means UnsupportedError until the feature lands.
const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> keys = {
      "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
      "optimizer", "scheduler", "gradient_clipping", "steps_per_print", "wall_clock_breakdown",
      "prescale_gradients", "gradient_predivide_factor", "dump_state", "fp16", "bf16", "amp",
      "zero_optimization", "activation_checkpointing", "aio", "communication_data_type",
      "data_types", "sequence_parallel_size", "comms_logger", "csv_monitor", "tensorboard",
      "wandb", "flops_profiler", "checkpoint", "zero_allow_untested_optimizer",
      "zero_force_ds_cpu_optimizer", "memory_breakdown", "sparse_attention",
      "elasticity", "pipeline", "compression_training", "data_efficiency", "autotuning",
      "tensor_parallel", "nebula", "disable_allgather", "seed"};
  return keys;
}

std::string closest_key(const std::string& key) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& k : known_keys()) {
    const size_t d = edit_distance(key, k);
    if (d < best_distance) best_distance = d, best = k;
  }
  return best;
}

std::optional<int64_t> read_positive_int(const nlohmann::json& config, const char* key,
                                         const std::optional<int64_t>& auto_value,
                                         const std::string& source, const char* flag) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const auto& v = config[key];
  if (v == "auto") {
    if (!auto_value) {
      throw ConfigError(source + ": '" + key + "' is \"auto\" but nothing resolves it; pass " + flag);
    }
    return auto_value;
  }
  if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() != static_cast<double>(v.get<int64_t>())) {
    throw ConfigError(source + ": '" + key + "' must be a positive integer, got " + v.dump());
  }
  return v.get<int64_t>();
}

bool section_enabled(const nlohmann::json& section) {
  return section.is_object() && section.value("enabled", false) == true;
}

void unsupported(const std::string& source, const std::string& key, const std::string& what) {
  throw UnsupportedError(source + ": '" + key + "': " + what +
                         " is not supported yet by zero.cpp; remove the key or disable it");
}

void reject_unbuilt_features(const nlohmann::json& c, const std::string& source) {
  for (const char* key : {"fp16", "bf16", "amp"}) {
    if (c.contains(key) && section_enabled(c[key])) unsupported(source, std::string(key) + ".enabled", std::string(key) + " training");
  }
  if (c.contains("fp16") && c.contains("bf16") && section_enabled(c["fp16"]) && section_enabled(c["bf16"])) {
    throw ConfigError(source + ": fp16 and bf16 are both enabled; enable at most one");
  }
  if (c.contains("zero_optimization")) {
    const auto& z = c["zero_optimization"];
    if (!z.is_object()) throw ConfigError(source + ": 'zero_optimization' must be an object");
    const auto stage = z.value("stage", nlohmann::json(0));
    if (!stage.is_number_integer() || stage.get<int>() < 0 || stage.get<int>() > 3) {
      throw ConfigError(source + ": 'zero_optimization.stage' must be 0, 1, 2 or 3, got " + stage.dump());
    }
    if (stage.get<int>() > 0) unsupported(source, "zero_optimization.stage", "ZeRO stage " + stage.dump());
    for (const char* off : {"offload_param", "offload_optimizer"}) {
      if (z.contains(off) && z[off].is_object() && z[off].value("device", "none") != "none") {
        unsupported(source, std::string("zero_optimization.") + off + ".device", "offloading");
      }
    }
  }
  if (c.contains("activation_checkpointing")) {
    const auto& a = c["activation_checkpointing"];
    for (const char* flag : {"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization"}) {
      if (a.is_object() && a.value(flag, false) == true) unsupported(source, std::string("activation_checkpointing.") + flag, "activation checkpointing");
    }
  }
  if (c.contains("sequence_parallel_size") && c["sequence_parallel_size"] != 1) {
    unsupported(source, "sequence_parallel_size", "sequence parallelism");
  }
  for (const char* key : {"comms_logger", "csv_monitor", "tensorboard", "wandb", "flops_profiler",
                          "sparse_attention", "elasticity", "compression_training", "autotuning", "nebula"}) {
    if (c.contains(key) && section_enabled(c[key])) unsupported(source, std::string(key) + ".enabled", key);
  }
  if (c.value("prescale_gradients", false) == true) unsupported(source, "prescale_gradients", "gradient prescaling");
  for (const char* key : {"pipeline", "tensor_parallel", "data_efficiency"}) {
    if (c.contains(key) && c[key].is_object() && !c[key].empty()) unsupported(source, key, key);
  }
  if (c.contains("communication_data_type") && !c["communication_data_type"].is_null() &&
      c["communication_data_type"] != "fp32") {
    unsupported(source, "communication_data_type", "16-bit communication");
  }
  if (c.contains("data_types") && c["data_types"].is_object() &&
      c["data_types"].value("grad_accum_dtype", nlohmann::json("fp32")) != "fp32" &&
      !c["data_types"].value("grad_accum_dtype", nlohmann::json()).is_null()) {
    unsupported(source, "data_types.grad_accum_dtype", "16-bit gradient accumulation");
  }
}

// Replaces "auto" inside optimizer/scheduler params by the resolved values.
void resolve_param_autos(nlohmann::json& params, const AutoValues& a, const std::string& where) {
  for (auto& [key, value] : params.items()) {
    if (value != "auto") continue;
    std::optional<double> v;
    if (key == "lr" || key == "warmup_max_lr") v = a.learning_rate;
    if (key == "warmup_min_lr") v = 0.0;
    if (key == "weight_decay") v = a.weight_decay.value_or(0.0);
    if (key == "total_num_steps" && a.total_steps) v = static_cast<double>(*a.total_steps);
    if (key == "warmup_num_steps") v = static_cast<double>(a.warmup_steps.value_or(0));
    if (!v) throw ConfigError(where + "." + key + " is \"auto\" but nothing resolves it (pass --lr / --steps)");
    if (key == "total_num_steps" || key == "warmup_num_steps") {
      value = static_cast<int64_t>(*v);
    } else {
      value = *v;
    }
  }
}

}  // namespace

std::string strip_json_extensions(const std::string& text, const std::string& source) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      out += '\n';
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const size_t end = text.find("*/", i + 2);
      if (end == std::string::npos) throw ConfigError(source + ": unterminated /* comment");
      for (size_t j = i; j < end + 2; ++j) out += text[j] == '\n' ? '\n' : ' ';  // keep line numbers
      i = end + 1;
    } else if (c == ',') {
      size_t j = i + 1;
      while (j < text.size() && (std::isspace(static_cast<unsigned char>(text[j])) || text[j] == '/')) {
        if (text[j] == '/' && j + 1 < text.size() && text[j + 1] == '/') {
          while (j < text.size() && text[j] != '\n') ++j;
        } else if (text[j] == '/' && j + 1 < text.size() && text[j + 1] == '*') {
          const size_t end = text.find("*/", j + 2);
          j = end == std::string::npos ? text.size() : end + 2;
        } else if (text[j] == '/') {
          break;
        } else {
          ++j;
        }
      }
      if (j < text.size() && (text[j] == '}' || text[j] == ']')) continue;  // trailing comma
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

void infer_batch_sizes(std::optional<int64_t> train, std::optional<int64_t> micro,
                       std::optional<int64_t> gas, int world_size, EngineSettings& out,
                       const std::string& source) {
  const int64_t w = world_size;
  if (train && micro && gas) {
    // checked below
  } else if (train && micro) {
    gas = *train / *micro / w;
  } else if (train && gas) {
    micro = *train / w / *gas;
  } else if (micro && gas) {
    train = *micro * *gas * w;
  } else if (train) {
    gas = 1;
    micro = *train / w;
  } else if (micro) {
    gas = 1;
    train = *micro * w;
  } else {
    throw ConfigError(source + ": set train_batch_size or train_micro_batch_size_per_gpu (DeepSpeed "
                               "needs at least one of them)");
  }
  if (*train <= 0 || *micro <= 0 || *gas <= 0 || *train != *micro * *gas * w) {
    throw ConfigError(source + ": train_batch_size " + std::to_string(*train) +
                      " != train_micro_batch_size_per_gpu " + std::to_string(*micro) +
                      " * gradient_accumulation_steps " + std::to_string(*gas) + " * world size " +
                      std::to_string(w) + " = " + std::to_string(*micro * *gas * w));
  }
  out.train_batch_size = *train;
  out.micro_batch_size = *micro;
  out.gradient_accumulation_steps = *gas;
}

EngineSettings settings_from_deepspeed_json(const nlohmann::json& config, int world_size,
                                            const AutoValues& autos, const std::string& source) {
  if (!config.is_object()) throw ConfigError(source + ": a DeepSpeed config must be a JSON object");
  for (const auto& [key, value] : config.items()) {
    if (std::find(known_keys().begin(), known_keys().end(), key) == known_keys().end()) {
      throw ConfigError(source + ": unknown key '" + key + "' (did you mean '" + closest_key(key) + "'?)");
    }
  }
  reject_unbuilt_features(config, source);
  EngineSettings s;
  std::optional<int64_t> train_auto;
  if (autos.micro_batch_size) {
    train_auto = *autos.micro_batch_size * autos.gradient_accumulation_steps.value_or(1) * world_size;
  }
  infer_batch_sizes(read_positive_int(config, "train_batch_size", train_auto, source, "--micro-batch"),
                    read_positive_int(config, "train_micro_batch_size_per_gpu", autos.micro_batch_size,
                                      source, "--micro-batch"),
                    read_positive_int(config, "gradient_accumulation_steps",
                                      autos.gradient_accumulation_steps.value_or(1), source, "--grad-accum"),
                    world_size, s, source);
  if (config.contains("gradient_clipping")) {
    const auto& g = config["gradient_clipping"];
    if (g == "auto") {
      s.gradient_clipping = autos.max_grad_norm.value_or(1.0);
    } else if (!g.is_number() || g.get<double>() < 0) {
      throw ConfigError(source + ": 'gradient_clipping' must be a number >= 0, got " + g.dump());
    } else {
      s.gradient_clipping = g.get<double>();
    }
  }
  if (config.contains("steps_per_print")) {
    if (!config["steps_per_print"].is_number_integer() || config["steps_per_print"].get<int64_t>() < 1) {
      throw ConfigError(source + ": 'steps_per_print' must be a positive integer, got " + config["steps_per_print"].dump());
    }
    s.steps_per_print = config["steps_per_print"].get<int64_t>();
  }
  if (config.contains("wall_clock_breakdown")) {
    if (!config["wall_clock_breakdown"].is_boolean()) throw ConfigError(source + ": 'wall_clock_breakdown' must be true or false");
    s.wall_clock_breakdown = config["wall_clock_breakdown"].get<bool>();
  }
  if (config.contains("optimizer")) {
    const auto& o = config["optimizer"];
    if (!o.is_object() || !o.contains("type") || !o["type"].is_string()) {
      throw ConfigError(source + ": 'optimizer' must be {\"type\": ..., \"params\": {...}}");
    }
    s.optimizer_type = o["type"].get<std::string>();
    s.optimizer_params = o.value("params", nlohmann::json::object());
    resolve_param_autos(s.optimizer_params, autos, source + ": optimizer.params");
  } else if (autos.learning_rate) {
    s.optimizer_params = {{"lr", *autos.learning_rate}};
  }
  if (config.contains("scheduler")) {
    const auto& o = config["scheduler"];
    if (!o.is_object() || !o.contains("type") || !o["type"].is_string()) {
      throw ConfigError(source + ": 'scheduler' must be {\"type\": ..., \"params\": {...}}");
    }
    s.scheduler_type = o["type"].get<std::string>();
    s.scheduler_params = o.value("params", nlohmann::json::object());
    resolve_param_autos(s.scheduler_params, autos, source + ": scheduler.params");
  }
  s.source_config = config;
  return s;
}

EngineSettings settings_from_deepspeed_file(const std::string& path, int world_size,
                                            const AutoValues& autos) {
  std::ifstream in(path);
  if (!in) throw FileError(path + ": cannot open the DeepSpeed config");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(strip_json_extensions(text.str(), path));
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(path + ": not valid JSON (" + e.what() + ")");
  }
  return settings_from_deepspeed_json(json, world_size, autos, path);
}

}  // namespace zero::engine
