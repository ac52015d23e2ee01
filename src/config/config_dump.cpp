#include "config/config_dump.h"

#include <algorithm>
#include <map>

namespace zero::config {
namespace {

void collect_leaves(const nlohmann::json& node, const std::string& path,
                    std::map<std::string, std::string>& leaves) {
  if (node.is_object() && !node.empty()) {
    for (const auto& [key, value] : node.items()) {
      collect_leaves(value, path.empty() ? key : path + "." + key, leaves);
    }
    return;
  }
  leaves[path] = node.dump();
}

}  // namespace

std::string configuration_dump(const nlohmann::json& resolved, const std::string& title) {
  std::map<std::string, std::string> leaves;
  collect_leaves(resolved, "", leaves);
  size_t width = 0;
  for (const auto& [path, value] : leaves) width = std::max(width, path.size());
  std::string text = title + "\n";
  for (const auto& [path, value] : leaves) {
    // At least two dots between the name and the value, so a short name is still joined.
    text += "  " + path + " " + std::string(width - path.size() + 2, '.') + " " + value + "\n";
  }
  return text;
}

}  // namespace zero::config
