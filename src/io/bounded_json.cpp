#include "io/bounded_json.h"

#include <set>
#include <vector>

#include "core/error.h"
#include "io/input_file.h"

namespace zero::io {
namespace {

// Thrown from the parser callback; caught below and turned into a FileError.
struct TooDeep {};
struct DuplicateKey {
  std::string key;
};

bool opens_container(nlohmann::json::parse_event_t event) {
  return event == nlohmann::json::parse_event_t::object_start ||
         event == nlohmann::json::parse_event_t::array_start;
}

}  // namespace

nlohmann::json parse_json_bounded(std::string_view text, const std::string& source,
                                  const std::string& what, int max_depth,
                                  bool reject_duplicate_keys) {
  using Event = nlohmann::json::parse_event_t;
  // The keys seen so far in each open object (only when duplicates are rejected).
  std::vector<std::set<std::string>> open_objects;
  const nlohmann::json::parser_callback_t limit_depth =
      [&](int depth, Event event, nlohmann::json& parsed) {
        // `depth` is the number of containers around this event, so a container opening at
        // depth d is nesting level d + 1.
        if (opens_container(event) && depth >= max_depth) throw TooDeep{};
        if (!reject_duplicate_keys) return true;
        if (event == Event::object_start) {
          open_objects.emplace_back();
        } else if (event == Event::object_end) {
          if (!open_objects.empty()) open_objects.pop_back();
        } else if (event == Event::key && !open_objects.empty()) {
          std::string key = parsed.get<std::string>();
          if (!open_objects.back().insert(key).second) throw DuplicateKey{std::move(key)};
        }
        return true;
      };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), limit_depth);
  } catch (const TooDeep&) {
    throw FileError(source + ": " + what + " nests deeper than " + std::to_string(max_depth) +
                    " levels; this is not a file zero can read");
  } catch (const DuplicateKey& duplicate) {
    throw FileError(source + ": " + what + " has the key \"" + duplicate.key +
                    "\" twice in one object; the file is corrupt (rewrite it with its writer)");
  } catch (const nlohmann::json::parse_error& e) {
    throw FileError(source + ": " + what + " is not valid JSON (at byte " +
                    std::to_string(e.byte) + "); is the file complete?");
  } catch (const nlohmann::json::exception& e) {
    throw FileError(source + ": " + what + " could not be read as JSON (" + e.what() + ")");
  }
}

nlohmann::json read_json_file(const std::string& path, const std::string& what,
                              uint64_t max_bytes) {
  return parse_json_bounded(read_text_file(path, what, max_bytes), path, what);
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  // Values zero.cpp parsed are depth-limited, so dump() cannot recurse deeply; invalid UTF-8
  // in a string is replaced rather than thrown about.
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_chars) {
    text.resize(max_chars);
    text += "...";
  }
  return text;
}

}  // namespace zero::io
