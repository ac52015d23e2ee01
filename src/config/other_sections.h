// Top-level DeepSpeed keys that zero.cpp recognises but does not model (Apex AMP, expert
// parallelism, compression, autotuning, ...). They are kept as written so a config that
// mentions them in a switched-off form still loads; feature_support rejects them when in use.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zero::config {

struct OtherSection {
  std::string key;   // the top-level key
  std::string what;  // what DeepSpeed does with it, for messages ("Apex AMP")
  std::string fix = "";  // what to do instead, when more can be said than "remove the key"
};

const std::vector<OtherSection>& other_sections();
std::vector<std::string> other_section_keys();

// Whether a value asks for the feature: null, false, {} and {"enabled": false, ...} do not.
bool other_section_in_use(const nlohmann::json& value);

}  // namespace zero::config
