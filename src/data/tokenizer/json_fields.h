// Reading the fields of a tokenizer.json with errors that name the JSON path
// ("tokenizer.json: pre_tokenizer.pretokenizers[0].pattern: ...") and the fix.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace zero::data::tokenizer {

using Json = nlohmann::json;

// "origin: path" for messages; origin names the file.
struct JsonPath {
  std::string origin;
  std::string path;
  JsonPath child(const std::string& key) const { return {origin, path.empty() ? key : path + "." + key}; }
  JsonPath index(size_t i) const { return {origin, path + "[" + std::to_string(i) + "]"}; }
  std::string str() const { return origin + ": " + (path.empty() ? "(top level)" : path); }
};

// The member `key` of the object `object` (which must be an object); ConfigError when missing.
const Json& require_field(const Json& object, const std::string& key, const JsonPath& at);
// nullptr when missing or null.
const Json* optional_field(const Json& object, const std::string& key);
std::string string_field(const Json& object, const std::string& key, const JsonPath& at);
bool bool_field(const Json& object, const std::string& key, const JsonPath& at, bool fallback);
uint32_t uint_field(const Json& object, const std::string& key, const JsonPath& at);
// The "type" member of a component object.
std::string type_field(const Json& object, const JsonPath& at);
// ConfigError: `at` has a `kind` ("normalizer") of type `type` that zero.cpp does not support.
[[noreturn]] void unsupported_type(const JsonPath& at, const std::string& kind,
                                   const std::string& type, const std::string& supported);
// A {"String": s} or {"Regex": r} pattern: `text` is the literal or the regex.
struct Pattern {
  bool is_literal = true;
  std::string text;
  // The pattern as a regex (a literal quoted).
  std::string regex() const;
};
Pattern pattern_field(const Json& object, const std::string& key, const JsonPath& at);

}  // namespace zero::data::tokenizer
