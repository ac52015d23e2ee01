// A compiled split pattern of a tokenizer.json (Split pre-tokenizer, Replace normalizer and
// decoder): PCRE2 in UTF + UCP mode with JIT, standing in for the Oniguruma regexes Hugging Face
// uses. `\s`/`\S` are widened to Unicode White_Space (Oniguruma's meaning; PCRE2's leaves out
// U+0085). Matching is const and thread-safe: match data and JIT stack are per call / thread.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace zero::data::tokenizer {

class SplitRegex {
 public:
  // Throws ConfigError naming `where` (the JSON path) when PCRE2 rejects `pattern`.
  SplitRegex(const std::string& pattern, const std::string& where);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Calls on_match(start, end) (byte offsets) for each non-overlapping match, left to right, as
  // Oniguruma's find_iter does; an empty match advances by one character. `subject` must be
  // valid UTF-8.
  void for_each_match(std::string_view subject,
                      const std::function<void(size_t, size_t)>& on_match) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string where_;
};

// A literal search string as a regex pattern (Hugging Face's {"String": ...} patterns).
std::string escape_regex_literal(std::string_view literal);

}  // namespace zero::data::tokenizer
