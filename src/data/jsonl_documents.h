// JSONL corpora for `zero prepare`: one JSON object per line, a string field of each object is
// one document (--field), or two string fields are a prompt and its response
// (--prompt-field / --response-field). Blank lines are skipped. Every problem with a record is a
// FileError naming the file and the 1-based line number.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zero::data {

// Which fields of a record make its document: `text` alone, or `prompt` and `response`.
struct JsonlFields {
  std::string text;
  std::string prompt;
  std::string response;
  bool prompt_response() const { return !prompt.empty() || !response.empty(); }
};

// One document: `prompt` is model input that is not trained on (empty for plain documents);
// `text` is trained on.
struct Document {
  std::string prompt;
  std::string text;
};

// One line of a JSONL file: a view into the file's text (without the '\n').
struct JsonlLine {
  std::string_view text;
  int64_t number = 0;  // 1-based line number in the file
  size_t offset = 0;   // byte offset of the line's first byte in the file
};

// The lines of `content` that hold something other than whitespace, in order (a last line
// without '\n' counts; "\r\n" endings are fine: '\r' is JSON whitespace).
std::vector<JsonlLine> split_jsonl_lines(std::string_view content);

// The document of one record. `path` names the file in errors. Throws FileError for a line that
// is not valid UTF-8 (with the byte offset in the file), not JSON, not a JSON object, lacks a
// field (listing the keys it has) or holds a field that is not a string; ConfigError when
// `fields` names neither a text field nor both prompt and response fields.
Document parse_jsonl_record(const JsonlLine& line, const JsonlFields& fields,
                            const std::string& path);

}  // namespace zero::data
