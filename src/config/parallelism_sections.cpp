// Checks behind the pipeline and tensor_parallel sections (pipeline_config.h,
// tensor_parallel_config.h): the partition method's form, "stages": "auto", and which settings
// ask for a feature that is not built yet.
#include <cctype>
#include <regex>

#include "config/key_suggestion.h"
#include "config/pipeline_config.h"
#include "config/read_context.h"
#include "config/section_writer.h"
#include "config/tensor_parallel_config.h"
#include "core/error.h"

namespace zero::config {
namespace {

using nlohmann::json;

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The members of `value` that differ from `defaults`, recursing into objects present in both.
json changed(const json& value, const json& defaults) {
  json out = json::object();
  for (const auto& [key, item] : value.items()) {
    const auto base = defaults.find(key);
    if (base == defaults.end()) {
      out[key] = item;
    } else if (item.is_object() && base->is_object()) {
      json inner = changed(item, *base);
      if (!inner.empty()) out[key] = std::move(inner);
    } else if (item != *base) {
      out[key] = item;
    }
  }
  return out;
}

std::optional<json> unless_empty(json keys) {
  if (keys.empty()) return std::nullopt;
  return keys;
}

// Unit type names are short and real patterns a word or two; std::regex compiles recursively,
// so the bound also keeps a hostile pattern from exhausting the stack.
constexpr size_t kMaxTypeRegexChars = 200;

}  // namespace

void PipelineConfig::validate(const std::string& source) const {
  const std::string method = lower(partition);
  const char* methods = "\"parameters\" (the default), \"uniform\" or \"type:REGEX\"";
  if (method == "parameters" || method == "uniform" || method == "best") return;
  if (method.rfind("type:", 0) == 0) {
    // DeepSpeed uses the lower-cased text up to a second colon as a case-insensitive regex.
    const std::string rest = method.substr(5);
    const std::string pattern = rest.substr(0, rest.find(':'));
    if (pattern.empty()) {
      throw ConfigError(source + ": key 'pipeline.partition' = \"" + partition +
                        "\": the type regex is empty; name the unit type to balance, e.g. "
                        "\"type:transformer\"");
    }
    if (pattern.size() > kMaxTypeRegexChars) {
      throw ConfigError(source + ": key 'pipeline.partition': the type regex has " +
                        std::to_string(pattern.size()) + " characters, more than the " +
                        std::to_string(kMaxTypeRegexChars) + " allowed; shorten it");
    }
    try {
      std::regex(pattern, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
      throw ConfigError(source + ": key 'pipeline.partition' = \"" + partition +
                        "\": the regex does not compile (" + e.what() +
                        "); write a valid regular expression after \"type:\"");
    }
    return;
  }
  if (method == "profile") {
    throw ConfigError(source + ": key 'pipeline.partition' = \"profile\": DeepSpeed does not "
                      "implement this partition method either; use " + methods);
  }
  throw ConfigError(source + ": key 'pipeline.partition' = \"" + partition +
                    "\" is not a partition method; use " + methods + " (did you mean \"" +
                    closest_name(method, {"parameters", "uniform", "type:"}) + "\"?)");
}

std::optional<json> PipelineConfig::settings_in_use() const {
  json keys = changed(write_section(*this), write_section(PipelineConfig{}));
  if (stages == 1) keys.erase("stages");  // one stage is no pipeline
  return unless_empty(std::move(keys));
}

void resolve_pipeline_auto(json& config, const ReadContext& context) {
  const auto section = config.find("pipeline");
  if (section == config.end() || !section->is_object()) return;
  const auto stages = section->find("stages");
  if (stages == section->end() || *stages != "auto") return;
  section->erase(stages);
  context.record_auto("pipeline.stages",
                      "pipeline.stages: \"auto\" -> unset (the pipeline-parallel size comes from "
                      "`zero train --pipeline-parallel-size`, else 1)");
}

void TensorParallelConfig::validate(const std::string& source) const {
  if (partition_config && !partition_config->is_object()) {
    throw ConfigError(source + ": key 'tensor_parallel.partition_config' = " +
                      partition_config->dump() +
                      " must be an object {\"use_default_specs\": ..., \"layer_specs\": [...]} "
                      "(as in DeepSpeed), or null");
  }
}

std::optional<json> TensorParallelConfig::settings_in_use() const {
  json keys = changed(write_section(*this), write_section(TensorParallelConfig{}));
  if (autotp_size <= 1) keys.erase("autotp_size");  // 0 is off, 1 splits nothing
  return unless_empty(std::move(keys));
}

}  // namespace zero::config
