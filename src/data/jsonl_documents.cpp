// JSONL records -> documents.
#include "data/jsonl_documents.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/utf8_check.h"
#include "io/bounded_json.h"

namespace zero::data {
namespace {

// A record is a flat object in practice; a deeper one is still read, up to this depth.
constexpr int kMaxRecordDepth = 32;

bool is_blank(std::string_view text) {
  for (const char c : text) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  }
  return true;
}

std::string where(const std::string& path, const JsonlLine& line) {
  return path + " line " + std::to_string(line.number);
}

// "a", "b", "c" (and N more): what the record does have, for a missing-field error.
std::string key_list(const nlohmann::json& object) {
  constexpr size_t kShown = 8;
  std::string keys;
  size_t shown = 0;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (shown == kShown) {
      keys += " and " + std::to_string(object.size() - kShown) + " more";
      break;
    }
    keys += (shown == 0 ? "\"" : ", \"") + it.key() + "\"";
    ++shown;
  }
  return keys.empty() ? "none" : keys;
}

std::string string_field(const nlohmann::json& record, const std::string& field,
                         const std::string& flag, const std::string& path,
                         const JsonlLine& line) {
  const auto it = record.find(field);
  if (it == record.end()) {
    throw FileError(where(path, line) + ": the record has no field \"" + field + "\" (given by " +
                    flag + "); its keys are " + key_list(record) +
                    ". Name the field that holds the text with " + flag + ".");
  }
  if (!it->is_string()) {
    throw FileError(where(path, line) + ": the field \"" + field + "\" is " +
                    std::string(it->type_name()) + " " + io::json_excerpt(*it, 40) +
                    ", not a string; " + flag + " must name a field whose value is text");
  }
  return it->get<std::string>();
}

}  // namespace

std::vector<JsonlLine> split_jsonl_lines(std::string_view content) {
  std::vector<JsonlLine> lines;
  size_t start = 0;
  int64_t number = 1;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    const std::string_view text = content.substr(start, end - start);
    if (!is_blank(text)) lines.push_back({text, number, start});
    start = end + 1;
    ++number;
  }
  return lines;
}

Document parse_jsonl_record(const JsonlLine& line, const JsonlFields& fields,
                            const std::string& path) {
  const bool text_only = !fields.text.empty() && !fields.prompt_response();
  const bool pairs = fields.text.empty() && !fields.prompt.empty() && !fields.response.empty();
  if (!text_only && !pairs) {
    throw ConfigError(
        "JSONL input needs either --field NAME (one text field per record) or both "
        "--prompt-field P and --response-field R");
  }
  // JSON text is UTF-8; nlohmann rejects bad bytes too, but only as "not valid JSON".
  if (const auto bad = invalid_utf8_offset(line.text)) {
    throw FileError(where(path, line) + ": invalid UTF-8 at byte offset " +
                    std::to_string(line.offset + *bad) +
                    " of the file; JSONL must be UTF-8 text (re-encode the file, e.g. with "
                    "iconv)");
  }
  const nlohmann::json record =
      io::parse_json_bounded(line.text, where(path, line), "the JSONL record", kMaxRecordDepth);
  if (!record.is_object()) {
    throw FileError(where(path, line) + ": the record is " + std::string(record.type_name()) +
                    " " + io::json_excerpt(record, 40) +
                    ", not a JSON object; each line of a JSONL file must be one object such "
                    "as {\"text\": \"...\"}");
  }
  Document document;
  if (fields.prompt_response()) {
    document.prompt = string_field(record, fields.prompt, "--prompt-field", path, line);
    document.text = string_field(record, fields.response, "--response-field", path, line);
  } else {
    document.text = string_field(record, fields.text, "--field", path, line);
  }
  return document;
}

}  // namespace zero::data
