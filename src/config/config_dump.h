// DeepSpeed's dump_state: the engine prints its whole configuration when it starts. Here the
// resolved config (DeepSpeedConfig::to_json: every key with the value in effect, "auto" already
// replaced) as one line per setting, sorted by its dotted path, with dots out to a column as
// DeepSpeed's print_configuration pads its names. Pure formatting; the caller prints it.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace zero::config {

// One "  path ...... value\n" line per leaf of `resolved` (objects are walked, arrays and
// scalars are leaves printed as JSON; an empty object is a leaf "{}"), after a title line.
std::string configuration_dump(const nlohmann::json& resolved, const std::string& title);

}  // namespace zero::config
