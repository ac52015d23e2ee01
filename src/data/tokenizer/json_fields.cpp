// tokenizer.json field access with path-naming errors; see json_fields.h.
#include "data/tokenizer/json_fields.h"

#include "core/error.h"
#include "data/tokenizer/split_regex.h"
#include "io/bounded_json.h"

namespace zero::data::tokenizer {

const Json& require_field(const Json& object, const std::string& key, const JsonPath& at) {
  if (!object.is_object()) {
    throw ConfigError(at.str() + " must be a JSON object, got " + io::json_excerpt(object));
  }
  const auto it = object.find(key);
  if (it == object.end()) {
    throw ConfigError(at.child(key).str() + " is missing; is this a Hugging Face tokenizer.json?");
  }
  return *it;
}

const Json* optional_field(const Json& object, const std::string& key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string string_field(const Json& object, const std::string& key, const JsonPath& at) {
  const Json& value = require_field(object, key, at);
  if (!value.is_string()) {
    throw ConfigError(at.child(key).str() + " must be a string, got " + io::json_excerpt(value));
  }
  return value.get<std::string>();
}

bool bool_field(const Json& object, const std::string& key, const JsonPath& at, bool fallback) {
  const Json* value = optional_field(object, key);
  if (!value) return fallback;
  if (!value->is_boolean()) {
    throw ConfigError(at.child(key).str() + " must be true or false, got " +
                      io::json_excerpt(*value));
  }
  return value->get<bool>();
}

uint32_t uint_field(const Json& object, const std::string& key, const JsonPath& at) {
  const Json& value = require_field(object, key, at);
  if (!value.is_number_unsigned() || value.get<uint64_t>() > 0xFFFFFFFEull) {
    throw ConfigError(at.child(key).str() + " must be a token id (an integer from 0 to " +
                      std::to_string(0xFFFFFFFEull) + "), got " + io::json_excerpt(value));
  }
  return static_cast<uint32_t>(value.get<uint64_t>());
}

std::string type_field(const Json& object, const JsonPath& at) {
  return string_field(object, "type", at);
}

void unsupported_type(const JsonPath& at, const std::string& kind, const std::string& type,
                      const std::string& supported) {
  throw ConfigError(at.str() + ": the " + kind + " type \"" + type +
                    "\" is not supported by zero.cpp (supported: " + supported + ")");
}

std::string Pattern::regex() const { return is_literal ? escape_regex_literal(text) : text; }

Pattern pattern_field(const Json& object, const std::string& key, const JsonPath& at) {
  const Json& pattern = require_field(object, key, at);
  const JsonPath here = at.child(key);
  if (const Json* literal = optional_field(pattern, "String")) {
    if (!literal->is_string()) throw ConfigError(here.str() + ".String must be a string");
    return Pattern{true, literal->get<std::string>()};
  }
  if (const Json* regex = optional_field(pattern, "Regex")) {
    if (!regex->is_string()) throw ConfigError(here.str() + ".Regex must be a string");
    return Pattern{false, regex->get<std::string>()};
  }
  throw ConfigError(here.str() + " must be {\"String\": ...} or {\"Regex\": ...}, got " +
                    io::json_excerpt(pattern));
}

}  // namespace zero::data::tokenizer
