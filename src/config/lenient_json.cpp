// A recursive-descent HJSON parser (a superset of JSON). Written by hand rather than by
// rewriting the text for nlohmann's parser so that positions in messages are the user's own lines
// and columns, duplicate keys are caught with their path, and key lines are known for warnings.
// Recursion is bounded by kMaxDepth, so hostile input cannot exhaust the stack.
#include "config/lenient_json.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <utility>

#include "config/config_errors.h"
#include "core/error.h"

namespace zero::config {
namespace {

// Deeper nesting than this is certainly not a config, and recursion must stay bounded.
constexpr int kMaxDepth = 256;

struct Position {
  size_t line = 1;
  size_t column = 1;
};

bool is_punctuator(char c) {
  return c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':';
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && static_cast<unsigned char>(text.front()) <= ' ') text.remove_prefix(1);
  while (!text.empty() && static_cast<unsigned char>(text.back()) <= ' ') text.remove_suffix(1);
  return text;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Whether `text` is a whole JSON number (hjson reads only those as numbers).
bool is_json_number(std::string_view text) {
  size_t i = 0;
  if (i < text.size() && text[i] == '-') ++i;
  if (i >= text.size() || !is_digit(text[i])) return false;
  if (text[i] == '0') {
    ++i;
  } else {
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (i >= text.size() || !is_digit(text[i])) return false;
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (i >= text.size() || !is_digit(text[i])) return false;
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  return i == text.size();
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source, KeyLines* key_lines)
      : text_(text), source_(source), key_lines_(key_lines) {}

  nlohmann::json parse_document() {
    // Editors on Windows may save a UTF-8 byte-order mark; it is not part of the config.
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
    skip_blanks();
    if (at_end()) {
      fail_here("the text is empty; a DeepSpeed config is an object like {\"train_batch_size\": 8}");
    }
    nlohmann::json value;
    if (peek() == '{' || peek() == '[') {
      value = parse_value("", 0);
    } else {
      value = parse_members("", 0, /*braces=*/false);  // hjson: the root's braces are optional
    }
    skip_blanks();
    if (!at_end()) fail_here("unexpected " + describe_here() + " after the end of the config");
    return value;
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  bool next_is(std::string_view what) const { return text_.substr(pos_, what.size()) == what; }

  Position position_of(size_t offset) const {
    Position p;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++p.line;
        p.column = 1;
      } else {
        ++p.column;
      }
    }
    return p;
  }

  // Line of `offset`; keys are recorded in increasing offset order, so a cursor that only moves
  // forward keeps this linear in the text's length.
  size_t line_of(size_t offset) {
    for (; line_cursor_ < offset && line_cursor_ < text_.size(); ++line_cursor_) {
      if (text_[line_cursor_] == '\n') ++line_;
    }
    return line_;
  }

  [[noreturn]] void fail_at(size_t offset, const std::string& message) const {
    const Position p = position_of(offset);
    throw ConfigError(source_ + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) +
                      ": " + message);
  }
  [[noreturn]] void fail_here(const std::string& message) const { fail_at(pos_, message); }

  std::string describe_here() const {
    if (at_end()) return "end of text";
    const char c = peek();
    if (static_cast<unsigned char>(c) < 0x20) return "control character";
    if (static_cast<unsigned char>(c) >= 0x80) return "a non-ASCII character";
    return std::string("'") + c + "'";
  }

  // Whitespace and the three comment forms.
  void skip_blanks() {
    while (!at_end()) {
      const char c = peek();
      if (is_blank(c)) {
        ++pos_;
      } else if (c == '#' || next_is("//")) {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (next_is("/*")) {
        const size_t start = pos_;
        const size_t end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) {
          fail_at(start, "unterminated /* comment; close it with */");
        }
        pos_ = end + 2;
      } else {
        return;
      }
    }
  }

  nlohmann::json parse_value(const std::string& path, int depth) {
    if (depth > kMaxDepth) {
      fail_here("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    if (at_end()) fail_here("expected a value, got end of text");
    const char c = peek();
    if (c == '{') return parse_members(path, depth, /*braces=*/true);
    if (c == '[') return parse_array(path, depth);
    if (c == '"' || (c == '\'' && !next_is("'''"))) return parse_quoted(c);
    if (c == '\'') return parse_multiline();
    if (is_punctuator(c)) {
      fail_here("expected a value (object, array, string, number, true, false or null), got " +
                describe_here());
    }
    return parse_quoteless();
  }

  // An object's members, between braces or (the root, in hjson) without them.
  nlohmann::json parse_members(const std::string& path, int depth, bool braces) {
    const size_t open = pos_;
    if (braces) ++pos_;  // '{'
    nlohmann::json object = nlohmann::json::object();
    std::map<std::string, size_t> first_seen;  // key -> offset, for duplicate messages
    while (true) {
      skip_blanks();
      if (braces) {
        if (at_end()) fail_at(open, "unterminated object: this '{' has no matching '}'");
        if (peek() == '}') {
          ++pos_;
          return object;
        }
      } else if (at_end()) {
        return object;
      }
      const size_t key_offset = pos_;
      std::string key = parse_key();
      const std::string key_path = join_key(path, key);
      if (const auto it = first_seen.find(key); it != first_seen.end()) {
        const Position first = position_of(it->second);
        fail_at(key_offset, "duplicate key '" + key_path + "' (first set at line " +
                                std::to_string(first.line) + ", column " +
                                std::to_string(first.column) + "); keep only one of them");
      }
      first_seen.emplace(key, key_offset);
      if (key_lines_ != nullptr) (*key_lines_)[key_path] = line_of(key_offset);
      skip_blanks();
      if (at_end() || peek() != ':') {
        fail_here("expected ':' after key '" + key_path + "', got " + describe_here());
      }
      ++pos_;
      skip_blanks();
      object[key] = parse_value(key_path, depth + 1);
      skip_blanks();
      if (!at_end() && peek() == ',') ++pos_;  // commas are optional in hjson
    }
  }

  // A key: quoted, or unquoted up to ':' (no blanks inside, no punctuators).
  std::string parse_key() {
    const char c = peek();
    if (c == '"' || c == '\'') return parse_quoted(c);
    const size_t start = pos_;
    std::optional<size_t> blank_at;
    while (!at_end()) {
      const char k = peek();
      if (k == ':') break;
      if (is_punctuator(k)) {
        fail_here("found '" + std::string(1, k) +
                  "' where a key was expected; put keys that contain {}[],: in quotes");
      }
      if (is_blank(k)) {
        if (!blank_at) blank_at = pos_;
      } else if (blank_at) {
        fail_at(*blank_at, "a key without quotes cannot contain spaces; put it in quotes");
      }
      ++pos_;
    }
    if (at_end()) fail_at(start, "expected ':' after this key, got end of text");
    const std::string_view key = trim(text_.substr(start, pos_ - start));
    if (key.empty()) fail_here("found ':' with no key before it; an empty key needs quotes");
    check_utf8(start, pos_);
    return std::string(key);
  }

  nlohmann::json parse_array(const std::string& path, int depth) {
    const size_t open = pos_;
    ++pos_;  // '['
    nlohmann::json array = nlohmann::json::array();
    while (true) {
      skip_blanks();
      if (at_end()) fail_at(open, "unterminated array: this '[' has no matching ']'");
      if (peek() == ']') {
        ++pos_;
        return array;
      }
      const std::string element_path = path + "[" + std::to_string(array.size()) + "]";
      array.push_back(parse_value(element_path, depth + 1));
      skip_blanks();
      if (!at_end() && peek() == ',') ++pos_;
    }
  }

  // hjson's quoteless value: the rest of the line, unless what comes before a ',', ']', '}' or
  // comment already reads as true, false, null or a number.
  nlohmann::json parse_quoteless() {
    const size_t start = pos_;
    // Only the text before the first stop can be a keyword or number: everything after it
    // contains the stop character. Checking once keeps this linear in the line's length.
    bool checked = false;
    while (true) {
      const bool end_of_line = at_end() || peek() == '\n' || peek() == '\r';
      const bool stop = end_of_line || peek() == ',' || peek() == '}' || peek() == ']' ||
                        peek() == '#' || next_is("//") || next_is("/*");
      if (stop && !checked) {
        checked = true;
        const std::string_view value = trim(text_.substr(start, pos_ - start));
        if (value == "true") return true;
        if (value == "false") return false;
        if (value == "null") return nullptr;
        if (is_json_number(value)) return number_at(start, value);
      }
      if (end_of_line) {
        check_utf8(start, pos_);
        return std::string(trim(text_.substr(start, pos_ - start)));
      }
      ++pos_;
    }
  }

  nlohmann::json number_at(size_t offset, std::string_view text) const {
    const char* first = text.data();
    const char* last = text.data() + text.size();
    const bool integral = text.find_first_of(".eE") == std::string_view::npos;
    if (integral) {
      int64_t value = 0;
      if (auto r = std::from_chars(first, last, value); r.ec == std::errc() && r.ptr == last) {
        return value;
      }
      uint64_t unsigned_value = 0;
      if (auto r = std::from_chars(first, last, unsigned_value);
          r.ec == std::errc() && r.ptr == last) {
        return unsigned_value;
      }
    }
    double value = 0.0;
    const auto r = std::from_chars(first, last, value);
    if (r.ec != std::errc() || r.ptr != last) {
      fail_at(offset, "number " + std::string(text) + " is out of range for a double");
    }
    return value;
  }

  // '''multiline''' strings: the indent of the opening ''' is removed from every line, a line
  // break right after the opening and right before the closing ''' is not part of the string.
  nlohmann::json parse_multiline() {
    const size_t start = pos_;
    size_t indent = 0;
    while (indent < start && text_[start - indent - 1] != '\n') ++indent;
    pos_ += 3;
    auto skip_indent = [&] {
      for (size_t skipped = 0; skipped < indent && !at_end() && peek() != '\n' &&
                               static_cast<unsigned char>(peek()) <= ' ';
           ++skipped) {
        ++pos_;
      }
    };
    while (!at_end() && peek() != '\n' && static_cast<unsigned char>(peek()) <= ' ') ++pos_;
    if (!at_end() && peek() == '\n') {
      ++pos_;
      skip_indent();
    }
    std::string out;
    int quotes = 0;
    while (true) {
      if (at_end()) fail_at(start, "unterminated ''' string; close it with '''");
      const char c = peek();
      ++pos_;
      if (c == '\'') {
        if (++quotes == 3) {
          if (!out.empty() && out.back() == '\n') out.pop_back();
          check_utf8_text(out, start);
          return out;
        }
        continue;
      }
      out.append(static_cast<size_t>(quotes), '\'');
      quotes = 0;
      if (c == '\n') {
        out += '\n';
        skip_indent();
      } else if (c != '\r') {
        out += c;
      }
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail_here("incomplete \\u escape; it needs four hex digits");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_];
      value <<= 4;
      if (c >= '0' && c <= '9') {
        value |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        value |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        value |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail_here("bad \\u escape; it needs four hex digits");
      }
      ++pos_;
    }
    return value;
  }

  static void append_utf8(std::string& out, uint32_t code_point) {
    if (code_point < 0x80) {
      out += static_cast<char>(code_point);
    } else if (code_point < 0x800) {
      out += static_cast<char>(0xC0 | (code_point >> 6));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else if (code_point < 0x10000) {
      out += static_cast<char>(0xE0 | (code_point >> 12));
      out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code_point >> 18));
      out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    }
  }

  // Length of the valid UTF-8 character at text[at], or 0 (nlohmann refuses to dump invalid
  // UTF-8 later, which would surface far from the cause).
  static size_t utf8_length(std::string_view text, size_t at) {
    const auto lead = static_cast<unsigned char>(text[at]);
    if (lead < 0x80) return 1;
    size_t length = 0;
    uint32_t min_value = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
      min_value = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      min_value = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      min_value = 0x10000;
    } else {
      return 0;
    }
    if (at + length > text.size()) return 0;
    uint32_t value = lead & (0xFF >> (length + 1));
    for (size_t i = 1; i < length; ++i) {
      const auto byte = static_cast<unsigned char>(text[at + i]);
      if ((byte & 0xC0) != 0x80) return 0;
      value = (value << 6) | (byte & 0x3F);
    }
    if (value < min_value || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
    return length;
  }

  void check_utf8(size_t begin, size_t end) const {
    for (size_t at = begin; at < end;) {
      const size_t length = utf8_length(text_.substr(0, end), at);
      if (length == 0) fail_at(at, "invalid UTF-8 in the text; save the file as UTF-8");
      at += length;
    }
  }

  void check_utf8_text(const std::string& text, size_t offset) const {
    for (size_t at = 0; at < text.size();) {
      const size_t length = utf8_length(text, at);
      if (length == 0) fail_at(offset, "invalid UTF-8 in this string; save the file as UTF-8");
      at += length;
    }
  }

  // "..." or '...': JSON escapes (plus \' for single quotes); no line breaks inside.
  std::string parse_quoted(char quote) {
    const size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail_at(start, std::string("unterminated string; close it with ") + quote);
      const char c = peek();
      if (c == quote) {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        if (c == '\n') fail_at(start, "unterminated string (a line break inside quotes)");
        fail_here("control character inside a string; escape it (\\t, \\n, ...)");
      }
      if (c == '\\') {
        ++pos_;
        if (at_end()) fail_at(start, std::string("unterminated string; close it with ") + quote);
        const char e = peek();
        ++pos_;
        switch (e) {
          case '"': out += '"'; break;
          case '\'': out += '\''; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t code = parse_hex4();
            if (code >= 0xD800 && code <= 0xDBFF) {
              if (!next_is("\\u")) fail_here("unpaired UTF-16 surrogate in \\u escape");
              pos_ += 2;
              const uint32_t low = parse_hex4();
              if (low < 0xDC00 || low > 0xDFFF) {
                fail_here("unpaired UTF-16 surrogate in \\u escape");
              }
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            } else if (code >= 0xDC00 && code <= 0xDFFF) {
              fail_here("unpaired UTF-16 surrogate in \\u escape");
            }
            append_utf8(out, code);
            break;
          }
          default:
            pos_ -= 2;
            fail_here(std::string("unknown escape \\") + e + " in a string");
        }
        continue;
      }
      const size_t length = utf8_length(text_, pos_);
      if (length == 0) fail_here("invalid UTF-8 byte in a string; save the file as UTF-8");
      out.append(text_.substr(pos_, length));
      pos_ += length;
    }
  }

  std::string_view text_;
  const std::string& source_;
  KeyLines* key_lines_;
  size_t pos_ = 0;
  size_t line_cursor_ = 0;
  size_t line_ = 1;
};

}  // namespace

nlohmann::json parse_lenient_json(std::string_view text, const std::string& source_name,
                                  KeyLines* key_lines) {
  return Parser(text, source_name, key_lines).parse_document();
}

}  // namespace zero::config
