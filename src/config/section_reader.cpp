// Type, range and spelling checks behind SectionReader; every failure is a ConfigError that
// names the source, the full key path, the value and the fix (see config_errors.h).
#include "config/section_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include "config/config_errors.h"
#include "config/key_suggestion.h"
#include "core/error.h"

namespace zero::config {
namespace {

std::string show_number(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string describe_limits(const Limits& limits) {
  if (limits.min && limits.max) {
    return "must be between " + show_number(*limits.min) + " and " + show_number(*limits.max);
  }
  if (limits.min)
    return std::string("must be ") + (limits.min_exclusive ? "> " : ">= ") +
           show_number(*limits.min);
  return "must be <= " + show_number(*limits.max);
}

bool equal_names(const std::string& a, const std::string& b, CaseMode mode) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    const char y = b[i];
    if (mode == CaseMode::kIgnoreCase) {
      if (std::tolower(static_cast<unsigned char>(x)) !=
          std::tolower(static_cast<unsigned char>(y))) {
        return false;
      }
    } else if (x != y) {
      return false;
    }
  }
  return true;
}

// 2^63 as a double: the first value that no longer fits int64.
constexpr double kInt64Bound = 9223372036854775808.0;

}  // namespace

SectionReader::SectionReader(const nlohmann::json& object, std::string path,
                             const ReadContext& context)
    : object_(object), path_(std::move(path)), context_(context), source_(context.source()) {}

const nlohmann::json* SectionReader::find(const Key& key, std::string& path) const {
  const auto main = object_.find(key.name);
  const auto other = key.alias != nullptr ? object_.find(key.alias) : object_.end();
  if (main != object_.end() && other != object_.end()) {
    throw ConfigError(source_ + ": keys '" + join_key(path_, key.name) + "' and '" +
                      join_key(path_, key.alias) +
                      "' are two spellings of the same setting; keep only one of them");
  }
  if (main != object_.end()) {
    path = join_key(path_, key.name);
    return &*main;
  }
  if (other != object_.end()) {
    path = join_key(path_, key.alias);
    return &*other;
  }
  return nullptr;
}

void SectionReader::reject_auto(const nlohmann::json& value, const std::string& path) const {
  if (value.is_string() && value.get_ref<const std::string&>() == "auto") {
    throw_unresolved_auto(source_, path);
  }
}

void SectionReader::check_limits(const nlohmann::json& value, double number,
                                 const std::string& path, const Limits& limits) const {
  const bool below =
      limits.min && (limits.min_exclusive ? number <= *limits.min : number < *limits.min);
  const bool above = limits.max && number > *limits.max;
  if (below || above || std::isnan(number)) {
    throw_range_error(source_, path, value, describe_limits(limits));
  }
}

int64_t SectionReader::to_int(const nlohmann::json& value, const std::string& path,
                              const nlohmann::json& fallback) const {
  reject_auto(value, path);
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw_range_error(source_, path, value, "must fit a signed 64-bit integer");
    }
    return static_cast<int64_t>(value.get<uint64_t>());
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (std::isfinite(number) && number == std::floor(number) && number >= -kInt64Bound &&
        number < kInt64Bound) {
      return static_cast<int64_t>(number);
    }
  }
  throw_type_error(source_, path, "an integer", value, fallback);
}

size_t SectionReader::choice_index(const nlohmann::json& value, const std::string& path,
                                   const std::vector<std::string>& names, CaseMode mode,
                                   const std::string& fallback) const {
  reject_auto(value, path);
  std::string listed;
  for (const std::string& name : names) listed += (listed.empty() ? "\"" : ", \"") + name + "\"";
  if (!value.is_string()) throw_type_error(source_, path, "one of " + listed, value, fallback);
  const std::string& text = value.get_ref<const std::string&>();
  for (size_t i = 0; i < names.size(); ++i) {
    if (equal_names(text, names[i], mode)) return i;
  }
  throw ConfigError(source_ + ": key '" + path + "' = " + show_value(value) +
                    " is not a valid choice; use one of " + listed + " (did you mean \"" +
                    closest_name(text, names) + "\"?)");
}

void SectionReader::field(const Key& key, bool& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  reject_auto(*value, path);
  if (!value->is_boolean()) throw_type_error(source_, path, "true or false", *value, out);
  out = value->get<bool>();
}

void SectionReader::field(const Key& key, std::optional<bool>& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  if (value->is_null()) {
    out.reset();
    return;
  }
  reject_auto(*value, path);
  if (!value->is_boolean()) {
    throw_type_error(source_, path, "true, false or null", *value,
                     out ? nlohmann::json(*out) : nlohmann::json(nullptr));
  }
  out = value->get<bool>();
}

void SectionReader::field(const Key& key, int64_t& out, const Limits& limits) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  const int64_t number = to_int(*value, path, out);
  check_limits(*value, static_cast<double>(number), path, limits);
  out = number;
}

void SectionReader::field(const Key& key, std::optional<int64_t>& out, const Limits& limits) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  if (value->is_null()) {
    out.reset();
    return;
  }
  const int64_t number = to_int(*value, path, out ? nlohmann::json(*out) : nlohmann::json());
  check_limits(*value, static_cast<double>(number), path, limits);
  out = number;
}

void SectionReader::field(const Key& key, double& out, const Limits& limits) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  reject_auto(*value, path);
  if (!value->is_number()) throw_type_error(source_, path, "a number", *value, out);
  const double number = value->get<double>();
  check_limits(*value, number, path, limits);
  out = number;
}

void SectionReader::field(const Key& key, std::optional<double>& out, const Limits& limits) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  if (value->is_null()) {
    out.reset();
    return;
  }
  double number = out.value_or(0.0);  // the plain reader's checks and messages
  field(key, number, limits);
  out = number;
}

void SectionReader::field(const Key& key, std::vector<int64_t>& out, const Limits& limits) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  if (!value->is_array()) throw_type_error(source_, path, "a list of whole numbers", *value, out);
  std::vector<int64_t> numbers;
  for (size_t i = 0; i < value->size(); ++i) {
    const std::string element = path + "[" + std::to_string(i) + "]";
    const nlohmann::json& item = (*value)[i];
    if (!item.is_number()) throw_type_error(source_, element, "a whole number", item, 0);
    const int64_t number = to_int(item, element, nlohmann::json());
    check_limits(item, static_cast<double>(number), element, limits);
    numbers.push_back(number);
  }
  out = std::move(numbers);
}

void SectionReader::field(const Key& key, std::string& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  if (!value->is_string()) throw_type_error(source_, path, "a string", *value, out);
  out = value->get<std::string>();
}

void SectionReader::field(const Key& key, std::optional<std::string>& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  if (value->is_null()) {
    out.reset();
    return;
  }
  if (!value->is_string()) {
    throw_type_error(source_, path, "a string or null", *value,
                     out ? nlohmann::json(*out) : nlohmann::json(nullptr));
  }
  out = value->get<std::string>();
}

void SectionReader::field(const Key& key, std::vector<std::string>& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  const bool all_strings =
      value->is_array() && std::all_of(value->begin(), value->end(),
                                       [](const nlohmann::json& e) { return e.is_string(); });
  if (!all_strings) throw_type_error(source_, path, "a list of strings", *value, out);
  out = value->get<std::vector<std::string>>();
}

void SectionReader::field(const Key& key, std::optional<nlohmann::json>& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr) return;
  if (value->is_null()) {
    out.reset();
  } else {
    out = *value;
  }
}

void SectionReader::object(const Key& key, nlohmann::json& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr || value->is_null()) return;
  if (!value->is_object()) throw_type_error(source_, path, "an object {...}", *value, out);
  out = *value;
}

void SectionReader::passthrough(const std::vector<std::string>& names,
                                std::map<std::string, nlohmann::json>& out) {
  for (const std::string& name : names) {
    const auto it = object_.find(name);
    if (it != object_.end()) out[name] = *it;
  }
}

void expect_object(const nlohmann::json& value, const std::string& path,
                   const std::string& source) {
  if (value.is_object()) return;
  if (path.empty()) {
    throw ConfigError(source + ": a DeepSpeed config must be a JSON object {...}, got " +
                      show_value(value) + " (" + value.type_name() + ")");
  }
  if (value.is_string() && value.get_ref<const std::string&>() == "auto") {
    throw_unresolved_auto(source, path);
  }
  throw_type_error(source, path, "an object {...}", value, nlohmann::json::object());
}

void check_unknown_keys(const nlohmann::json& object, const std::vector<std::string>& known,
                        const std::string& path, const ReadContext& context) {
  for (const auto& [name, value] : object.items()) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string key_path = join_key(path, name);
    if (const std::optional<std::string> meant = near_miss(name, known)) {
      throw ConfigError(context.where(key_path) + ": key '" + shown_key(key_path) +
                        "' looks like a misspelling of '" + join_key(path, *meant) +
                        "'; as written it would be ignored and your setting lost, so fix the "
                        "spelling (or remove the key)");
    }
    context.warn(key_path, "unknown key '" + shown_key(key_path) +
                               "' is ignored (DeepSpeed ignores it too; zero.cpp knows no such "
                               "DeepSpeed setting here)");
  }
}

}  // namespace zero::config
