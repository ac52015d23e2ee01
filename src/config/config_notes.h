// What reading a config has to tell the user besides errors: what each "auto" became, keys that
// are ignored (DeepSpeed ignores them too, so they warn), and settings DeepSpeed documents but
// does not use in this configuration (notes). `zero train` prints them once at the start.
#pragma once
#include <string>
#include <vector>

namespace zero::config {

struct ConfigNote {
  enum class Kind { kAuto, kWarning, kNote };
  Kind kind;
  std::string key;   // full key path, e.g. "zero_optimization.reduce_bucket_size"
  std::string text;  // one line, already naming the source and line where known

  bool operator==(const ConfigNote&) const = default;
};

// Notes describe how the text was read, not the settings: two configs with equal settings are
// equal whatever was said while reading them (a config read back from a checkpoint has none).
struct ConfigNotes {
  std::vector<ConfigNote> items;

  bool operator==(const ConfigNotes&) const { return true; }
  std::vector<ConfigNote> of_kind(ConfigNote::Kind kind) const {
    std::vector<ConfigNote> out;
    for (const ConfigNote& note : items) {
      if (note.kind == kind) out.push_back(note);
    }
    return out;
  }
};

}  // namespace zero::config
