// The visitor that reads one section of a DeepSpeed config into its struct, checking as it goes:
// unknown keys (with the closest known key), JSON types, DeepSpeed's numeric limits and enum
// spellings. Absent keys keep the struct's defaults, which are DeepSpeed 0.19's.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/field_spec.h"
#include "config/key_collector.h"
#include "config/read_context.h"

namespace zero::config {

class SectionReader {
 public:
  // `path` is the section's key path ("" for the top level); `context` names the source in every
  // message and collects warnings.
  SectionReader(const nlohmann::json& object, std::string path, const ReadContext& context);

  void field(const Key& key, bool& out);
  void field(const Key& key, std::optional<bool>& out);
  // Integral doubles are accepted, as DeepSpeed accepts sizes written like 5e8.
  void field(const Key& key, int64_t& out, const Limits& limits = Limits::none());
  void field(const Key& key, std::optional<int64_t>& out, const Limits& limits = Limits::none());
  void field(const Key& key, double& out, const Limits& limits = Limits::none());
  void field(const Key& key, std::optional<double>& out, const Limits& limits = Limits::none());
  // A list of whole numbers, each within `limits`.
  void field(const Key& key, std::vector<int64_t>& out, const Limits& limits = Limits::none());
  void field(const Key& key, std::string& out);
  void field(const Key& key, std::optional<std::string>& out);
  void field(const Key& key, std::vector<std::string>& out);
  // Any JSON value, kept as written (sections zero.cpp recognises but does not model); null is
  // "not set".
  void field(const Key& key, std::optional<nlohmann::json>& out);
  // A JSON object kept as written (optimizer and scheduler params: their modules check them).
  void object(const Key& key, nlohmann::json& out);

  template <class E>
  void choice(const Key& key, E& out, const ChoiceList<E>& choices,
              CaseMode mode = CaseMode::kExact) {
    std::string path;
    const nlohmann::json* value = find(key, path);
    if (value == nullptr) return;
    out = choices[choice_index(*value, path, names_of(choices), mode, choice_name(choices, out))]
              .second;
  }
  template <class E>
  void choice(const Key& key, std::optional<E>& out, const ChoiceList<E>& choices,
              CaseMode mode = CaseMode::kExact) {
    std::string path;
    const nlohmann::json* value = find(key, path);
    if (value == nullptr) return;
    if (value->is_null()) {
      out.reset();
      return;
    }
    const std::string fallback = out ? choice_name(choices, *out) : std::string("null");
    out = choices[choice_index(*value, path, names_of(choices), mode, fallback)].second;
  }

  template <class S>
  void section(const Key& key, S& out);
  template <class S>
  void section(const Key& key, std::optional<S>& out);

  // Top-level sections kept as written, by name (see other_sections.h).
  void passthrough(const std::vector<std::string>& names,
                   std::map<std::string, nlohmann::json>& out);

 private:
  // The value under `key` or its alias, or nullptr when absent; sets `path` to the full key path
  // of the spelling found. Both spellings at once is an error.
  const nlohmann::json* find(const Key& key, std::string& path) const;
  // "auto" is resolved before reading (auto_values.h); one that is still here has no resolver.
  void reject_auto(const nlohmann::json& value, const std::string& path) const;
  void check_limits(const nlohmann::json& value, double number, const std::string& path,
                    const Limits& limits) const;
  int64_t to_int(const nlohmann::json& value, const std::string& path,
                 const nlohmann::json& fallback) const;
  size_t choice_index(const nlohmann::json& value, const std::string& path,
                      const std::vector<std::string>& names, CaseMode mode,
                      const std::string& fallback) const;

  template <class E>
  static std::vector<std::string> names_of(const ChoiceList<E>& choices) {
    std::vector<std::string> names;
    for (const auto& choice : choices) names.push_back(choice.first);
    return names;
  }

  const nlohmann::json& object_;
  std::string path_;
  const ReadContext& context_;
  const std::string& source_;
};

// Throws ConfigError unless `value` is a JSON object.
void expect_object(const nlohmann::json& value, const std::string& path, const std::string& source);
// Keys of `object` that are not in `known`: a near miss of a known key (edit distance <= 2, or
// equal up to case, spaces and separators) is a ConfigError naming both, because the user's
// setting would otherwise be lost; any other unknown key is ignored with a warning (DeepSpeed
// ignores it too), an error under --strict-config.
void check_unknown_keys(const nlohmann::json& object, const std::vector<std::string>& known,
                        const std::string& path, const ReadContext& context);

// Reads the section `value` (at key path `path`) into `out`: unknown keys first, then values.
template <class S>
void read_section(const nlohmann::json& value, S& out, const std::string& path,
                  const ReadContext& context) {
  expect_object(value, path, context.source());
  KeyCollector keys;
  out.visit(keys);
  check_unknown_keys(value, keys.names(), path, context);
  SectionReader reader(value, path, context);
  out.visit(reader);
}

// A section that is absent or null keeps its defaults, as in DeepSpeed.
template <class S>
void SectionReader::section(const Key& key, S& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr || value->is_null()) return;
  read_section(*value, out, path, context_);
}

template <class S>
void SectionReader::section(const Key& key, std::optional<S>& out) {
  std::string path;
  const nlohmann::json* value = find(key, path);
  if (value == nullptr || value->is_null()) {
    out.reset();
    return;
  }
  S parsed;
  read_section(*value, parsed, path, context_);
  out = std::move(parsed);
}

}  // namespace zero::config
