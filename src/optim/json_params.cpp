#include "optim/json_params.h"

#include <cmath>

#include "core/error.h"

namespace zero::optim {

JsonParams::JsonParams(const nlohmann::json& params, std::string where)
    : params_(params), where_(std::move(where)) {
  if (!params_.is_object() && !params_.is_null()) {
    throw ConfigError(where_ + " must be an object, got " + params_.dump());
  }
}

double JsonParams::number(const char* key, double fallback, bool positive) {
  used_.insert(key);
  if (!has(key)) return fallback;
  const auto& v = params_.at(key);
  if (!v.is_number() || v.get<double>() < 0 || (positive && v.get<double>() == 0)) {
    throw ConfigError(where_ + "." + key + " must be a " + (positive ? "positive" : "non-negative") +
                      " number, got " + v.dump());
  }
  return v.get<double>();
}

int64_t JsonParams::integer(const char* key, int64_t fallback) {
  const double v = number(key, static_cast<double>(fallback));
  // Casting a double outside int64's range is undefined; 2^53 is where doubles stop counting.
  if (!(std::fabs(v) <= 9007199254740992.0)) {
    throw ConfigError(where_ + "." + key + " = " + params_.at(key).dump() +
                      " is out of range: it must be at most 2^53 (9007199254740992)");
  }
  if (v != std::floor(v)) {
    throw ConfigError(where_ + "." + key + " must be an integer, got " + params_.at(key).dump());
  }
  return static_cast<int64_t>(v);
}

int64_t JsonParams::required_integer(const char* key) {
  if (!has(key)) throw ConfigError(where_ + "." + key + " is required");
  return integer(key, 0);
}

bool JsonParams::boolean(const char* key, bool fallback) {
  used_.insert(key);
  if (!has(key)) return fallback;
  if (!params_.at(key).is_boolean()) {
    throw ConfigError(where_ + "." + key + " must be true or false, got " + params_.at(key).dump());
  }
  return params_.at(key).get<bool>();
}

std::pair<double, double> JsonParams::betas(double beta1, double beta2) {
  used_.insert("betas");
  if (!has("betas")) return {beta1, beta2};
  const auto& v = params_.at("betas");
  auto in_range = [](const nlohmann::json& b) {
    return b.is_number() && b.get<double>() >= 0 && b.get<double>() < 1;
  };
  if (!v.is_array() || v.size() != 2 || !in_range(v[0]) || !in_range(v[1])) {
    throw ConfigError(where_ + ".betas must be [beta1, beta2] with each in [0, 1), got " + v.dump());
  }
  return {v[0].get<double>(), v[1].get<double>()};
}

std::string JsonParams::choice(const char* key, const std::vector<std::string>& choices) {
  used_.insert(key);
  if (!has(key)) return choices.front();
  const auto& v = params_.at(key);
  for (const auto& c : choices) {
    if (v == c) return c;
  }
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "\"" : ", \"") + c + "\"";
  throw ConfigError(where_ + "." + key + " must be one of " + list + ", got " + v.dump());
}

void JsonParams::reject_unknown() const {
  if (!params_.is_object()) return;
  for (const auto& [key, value] : params_.items()) {
    if (used_.count(key)) continue;
    std::string known;
    for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
    throw ConfigError(where_ + "." + key + " is not a known parameter here (known: " + known + ")");
  }
}

}  // namespace zero::optim
