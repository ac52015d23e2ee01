#include "tools/estimate_flag_values.h"

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/parse_number.h"

namespace zero::tools {

namespace fs = std::filesystem;
using sharding::OffloadDevice;

int64_t parse_count(const std::string& flag, const std::string& text) {
  std::string number = text;
  double scale = 1.0;
  if (!number.empty()) {
    switch (number.back()) {
      case 'K': case 'k': scale = 1e3; break;
      case 'M': case 'm': scale = 1e6; break;
      case 'B': case 'b': case 'G': case 'g': scale = 1e9; break;
      case 'T': case 't': scale = 1e12; break;
      default: break;
    }
    if (scale != 1.0) number.pop_back();
  }
  const std::optional<double> value = parse_finite_double(number);
  if (value && *value > 0 && *value * scale < 9e18) {
    return static_cast<int64_t>(std::llround(*value * scale));
  }
  throw ConfigError("zero estimate: --" + flag +
                    " must be a positive count below 9e18 like 176e9, 176B or 350M, got \"" +
                    ArgParser::shown(text) + "\"");
}

double parse_gib(const std::string& flag, const std::string& text) {
  const std::optional<double> value = parse_finite_double(text);
  if (value && *value > 0 && *value <= kMaxGiB) return *value;
  throw ConfigError("zero estimate: --" + flag + " must be a positive number of GiB up to 2^30 "
                    "(e.g. 80), got \"" + ArgParser::shown(text) + "\"");
}

int64_t positive_int(const ArgParser& parser, const std::string& flag, int64_t max) {
  const int64_t value = parser.get_int(flag);
  if (value <= 0) {
    throw ConfigError("zero estimate: --" + flag + " must be at least 1, got " +
                      std::to_string(value));
  }
  if (value > max) {
    throw ConfigError("zero estimate: --" + flag + " must be at most " + std::to_string(max) +
                      ", got " + std::to_string(value));
  }
  return value;
}

std::optional<OffloadDevice> parse_device(const ArgParser& parser, const std::string& flag) {
  const std::string text = parser.get(flag);
  if (text.empty()) return std::nullopt;
  if (text == "none") return OffloadDevice::kNone;
  if (text == "cpu") return OffloadDevice::kCpu;
  if (text == "nvme") return OffloadDevice::kNvme;
  throw ConfigError("zero estimate: --" + flag + " must be none, cpu or nvme, got \"" + text +
                    "\"");
}

bool parse_flag_bool(const std::string& flag, const std::string& text) {
  if (text == "on") return true;
  if (text == "off") return false;
  if (const std::optional<bool> value = parse_bool(text)) return *value;
  throw ConfigError("zero estimate: --" + flag + " takes no value or true/false, got \"" +
                    ArgParser::shown(text) + "\"");
}

model::TransformerConfig load_model(const std::string& name) {
  std::error_code error;
  if (fs::is_directory(name, error)) {
    return model::TransformerConfig::from_hf_file((fs::path(name) / "config.json").string());
  }
  try {
    return model::preset_config(name);
  } catch (const ConfigError& e) {
    throw ConfigError("zero estimate: --model " + name + " is not a folder; " + e.what());
  }
}

}  // namespace zero::tools
