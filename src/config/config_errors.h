// The wording of every DeepSpeed-config error: each message starts with the config's source (its
// file name), names the full key path and the offending value, and says how to fix it.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zero::config {

// "zero_optimization" + "stage" -> "zero_optimization.stage"; an empty prefix is the top level.
std::string join_key(const std::string& prefix, std::string_view name);

// A JSON value as the user wrote it, shortened to keep one-line messages readable.
std::string show_value(const nlohmann::json& value);

// `expected` reads like "an integer" or "true or false"; `fallback` is the default the key takes
// when removed.
[[noreturn]] void throw_type_error(const std::string& source, const std::string& key,
                                   const std::string& expected, const nlohmann::json& value,
                                   const nlohmann::json& fallback);

// `requirement` reads like "must be >= 0" or "must be between 0 and 3".
[[noreturn]] void throw_range_error(const std::string& source, const std::string& key,
                                    const nlohmann::json& value, const std::string& requirement);

// An "auto" left where nothing resolves it (see auto_values.h for the keys that resolve).
[[noreturn]] void throw_unresolved_auto(const std::string& source, const std::string& key);

// A key path as shown in messages: shortened when absurdly long (a key is text from the file).
std::string shown_key(const std::string& key_path);

}  // namespace zero::config
