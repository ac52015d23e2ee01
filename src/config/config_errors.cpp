// Message formatting shared by every DeepSpeed-config check.
#include "config/config_errors.h"

#include "core/error.h"

namespace zero::config {
namespace {

constexpr size_t kMaxShownChars = 80;

}  // namespace

std::string join_key(const std::string& prefix, std::string_view name) {
  if (prefix.empty()) return std::string(name);
  return prefix + "." + std::string(name);
}

std::string show_value(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > kMaxShownChars) text = text.substr(0, kMaxShownChars - 3) + "...";
  return text;
}

void throw_type_error(const std::string& source, const std::string& key,
                      const std::string& expected, const nlohmann::json& value,
                      const nlohmann::json& fallback) {
  throw ConfigError(source + ": key '" + key + "' must be " + expected + ", got " +
                    show_value(value) + " (" + value.type_name() + "); write " + expected +
                    " or remove the key to use the default (" + show_value(fallback) + ")");
}

void throw_range_error(const std::string& source, const std::string& key,
                       const nlohmann::json& value, const std::string& requirement) {
  throw ConfigError(source + ": key '" + key + "' = " + show_value(value) +
                    " is out of range: it " + requirement + "; change the value");
}

void throw_unresolved_auto(const std::string& source, const std::string& key) {
  throw ConfigError(
      source + ": key '" + key +
      "' is \"auto\" but nothing resolves it; zero.cpp resolves \"auto\" only where the Hugging "
      "Face Trainer does (batch sizes, gradient_clipping, optimizer lr/betas/eps/weight_decay, "
      "scheduler warmup_min_lr/warmup_max_lr/warmup_num_steps/total_num_steps, fp16/bf16 "
      "enabled and the hidden-size based zero_optimization sizes); write a value instead");
}

std::string shown_key(const std::string& key_path) {
  if (key_path.size() <= kMaxShownChars) return key_path;
  return key_path.substr(0, kMaxShownChars - 3) + "...";
}

}  // namespace zero::config
