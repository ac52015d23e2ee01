// Added tokens; see added_tokens.h.
#include "data/tokenizer/added_tokens.h"

#include <algorithm>

#include "core/error.h"
#include "data/tokenizer/utf8.h"

namespace zero::data::tokenizer {
namespace {

// The code point ending at `end` (exclusive) of valid UTF-8.
uint32_t code_point_before(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return next_code_point(text, start);
}

bool is_word_character(uint32_t cp) { return cp == '_' || is_unicode_alphanumeric(cp); }

}  // namespace

std::vector<AddedToken> parse_added_tokens(const Json& list, const JsonPath& at) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) throw ConfigError(at.str() + " must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonPath here = at.index(i);
    AddedToken token;
    token.id = uint_field(list[i], "id", here);
    token.content = string_field(list[i], "content", here);
    if (token.content.empty()) throw ConfigError(here.str() + ".content must not be empty");
    token.single_word = bool_field(list[i], "single_word", here, false);
    token.lstrip = bool_field(list[i], "lstrip", here, false);
    token.rstrip = bool_field(list[i], "rstrip", here, false);
    token.special = bool_field(list[i], "special", here, false);
    token.normalized = bool_field(list[i], "normalized", here, !token.special);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<const AddedToken*>& tokens,
                                     const std::vector<std::string>& patterns)
    : tokens_(tokens) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::string& pattern = patterns[t];
    if (pattern.empty()) continue;
    uint32_t node = 0;
    for (const char c : pattern) {
      const auto byte = static_cast<unsigned char>(c);
      const auto it = nodes_[node].next.find(byte);
      if (it != nodes_[node].next.end()) {
        node = it->second;
      } else {
        const auto created = static_cast<uint32_t>(nodes_.size());
        nodes_[node].next.emplace(byte, created);
        nodes_.emplace_back();
        node = created;
      }
    }
    // Two tokens with one pattern: the first listed wins (as Aho-Corasick's pattern order).
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(t);
    first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Piece>& out) const {
  size_t emitted = 0;  // text before this is in `out`
  size_t pos = 0;      // where the search goes on
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    // The longest pattern starting at pos.
    uint32_t node = 0;
    int32_t found = -1;
    size_t found_end = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const auto it = nodes_[node].next.find(static_cast<unsigned char>(text[i]));
      if (it == nodes_[node].next.end()) break;
      node = it->second;
      if (nodes_[node].token >= 0) found = nodes_[node].token, found_end = i + 1;
    }
    if (found < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = *tokens_[static_cast<size_t>(found)];
    size_t start = pos, stop = found_end;
    pos = found_end;  // the matches do not overlap, whether this one is kept or not
    if (token.single_word) {
      const bool space_before = start == 0 || !is_word_character(code_point_before(text, start));
      size_t after = stop;
      const bool space_after =
          stop == text.size() || !is_word_character(next_code_point(text, after));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0 && is_unicode_whitespace(code_point_before(text, new_start))) {
        size_t cp_start = new_start - 1;
        while (cp_start > 0 && (static_cast<unsigned char>(text[cp_start]) & 0xC0) == 0x80) --cp_start;
        new_start = cp_start;
      }
      // Whitespace an earlier match already took stays with it.
      start = std::max(new_start, emitted);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!is_unicode_whitespace(next_code_point(text, next))) break;
        stop = next;
      }
      pos = std::max(pos, stop);
    }
    if (emitted < start) out.push_back({text.substr(emitted, start - emitted), false, 0});
    out.push_back({text.substr(start, stop - start), true, token.id});
    emitted = stop;
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), false, 0});
}

}  // namespace zero::data::tokenizer
