#include "config/read_context.h"

#include "core/error.h"

namespace zero::config {

std::string ReadContext::where(const std::string& key_path) const {
  if (key_lines_ != nullptr) {
    if (const auto it = key_lines_->find(key_path); it != key_lines_->end()) {
      return source_ + ":" + std::to_string(it->second);
    }
  }
  return source_;
}

void ReadContext::warn(const std::string& key_path, const std::string& text) const {
  const std::string line = where(key_path) + ": " + text;
  if (strict_) {
    throw ConfigError(line + " (an error because of --strict-config; remove the key, or drop "
                             "--strict-config to let it pass with a warning)");
  }
  notes_.items.push_back({ConfigNote::Kind::kWarning, key_path, line});
}

void ReadContext::note(const std::string& key_path, const std::string& text) const {
  notes_.items.push_back({ConfigNote::Kind::kNote, key_path, where(key_path) + ": " + text});
}

void ReadContext::record_auto(const std::string& key_path, const std::string& text) const {
  notes_.items.push_back({ConfigNote::Kind::kAuto, key_path, text});
}

}  // namespace zero::config
