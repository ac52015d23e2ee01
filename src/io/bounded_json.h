// Parsing JSON from files zero.cpp did not write (HF config.json, safetensors headers and
// indexes, checkpoint metadata): nesting is limited while parsing (nlohmann's parser callback
// sees each depth; nothing recurses on the input's depth), and a syntax error becomes a
// FileError naming the file and the byte where it went wrong, never a library exception.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zero::io {

// Deeper than this is no file zero.cpp reads (real ones nest 3-5 levels). The outermost object
// or array is level 1.
inline constexpr int kMaxJsonDepth = 64;

// `source` names the file in messages ("model/config.json"); `what` its role ("the model
// config"). With `reject_duplicate_keys`, an object holding one key twice is a FileError
// (nlohmann keeps the last silently, which would hide a corrupt or hand-edited file; safetensors
// headers must not have them). Throws FileError.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& source,
                                  const std::string& what, int max_depth = kMaxJsonDepth,
                                  bool reject_duplicate_keys = false);

// read_text_file + parse_json_bounded.
nlohmann::json read_json_file(const std::string& path, const std::string& what,
                              uint64_t max_bytes);

// `value` as compact JSON for an error message, cut to about `max_chars` ("..." marks the cut):
// a message quoting a multi-megabyte value helps nobody.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 80);

}  // namespace zero::io
