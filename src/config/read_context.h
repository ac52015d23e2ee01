// The state one config read carries through every section reader: where the text came from (for
// messages), each key's line, whether warnings are errors (--strict-config), and the notes.
#pragma once
#include <string>

#include "config/config_notes.h"
#include "config/lenient_json.h"

namespace zero::config {

class ReadContext {
 public:
  ReadContext(std::string source, const KeyLines* key_lines, bool strict, ConfigNotes& notes)
      : source_(std::move(source)), key_lines_(key_lines), strict_(strict), notes_(notes) {}

  const std::string& source() const { return source_; }
  bool strict() const { return strict_; }

  // "ds.json:12" when the key's line is known, else "ds.json".
  std::string where(const std::string& key_path) const;

  // A warning: with strict reading it is a ConfigError instead, saying how to accept it.
  void warn(const std::string& key_path, const std::string& text) const;
  void note(const std::string& key_path, const std::string& text) const;
  void record_auto(const std::string& key_path, const std::string& text) const;

 private:
  std::string source_;
  const KeyLines* key_lines_;
  bool strict_;
  ConfigNotes& notes_;
};

}  // namespace zero::config
