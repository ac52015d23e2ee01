// PCRE2 wrapper for tokenizer split patterns; see split_regex.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizer/split_regex.h"

#include <pcre2.h>

#include "core/error.h"
#include "data/tokenizer/utf8.h"

namespace zero::data::tokenizer {
namespace {

// U+0085 (NEL) is White_Space for Oniguruma and Rust but not in PCRE2's \s: add it, inside and
// outside character classes. \S outside a class becomes [^\s\x{85}]; inside a class it is
// left alone (no tokenizer uses it there).
std::string widen_whitespace(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (e == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else if (e == 'Q') {
        // \Q...\E is literal text: copy it untouched.
        const size_t end = pattern.find("\\E", i + 2);
        const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
        out.append(pattern, i, stop - i);
        i = stop - 1;
        continue;
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

// Per-thread JIT stack: PCRE2's default 32 KiB runs out on long whitespace runs.
struct JitStack {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  JitStack() {
    if (stack && context) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~JitStack() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

}  // namespace

struct SplitRegex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex(const std::string& pattern, const std::string& where)
    : compiled_(std::make_unique<Compiled>()), where_(where) {
  const std::string widened = widen_whitespace(pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(widened.data()), widened.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error,
                                  &error_offset, nullptr);
  if (!compiled_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw ConfigError(where + ": the regex \"" + pattern + "\" does not compile (" +
                      reinterpret_cast<const char*>(message) + " near byte " +
                      std::to_string(error_offset) + ")");
  }
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

SplitRegex::~SplitRegex() = default;

void SplitRegex::for_each_match(std::string_view subject,
                                const std::function<void(size_t, size_t)>& on_match) const {
  thread_local JitStack jit_stack;
  const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> owner(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), pcre2_match_data_free);
  pcre2_match_data* data = owner.get();
  if (!data) throw InternalError("PCRE2 could not allocate match data");
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    int rc;
    if (compiled_->jit) {
      rc = pcre2_jit_match(compiled_->code, text, subject.size(), pos, 0, data, jit_stack.context);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(compiled_->code, text, subject.size(), pos, PCRE2_NO_UTF_CHECK, data,
                         nullptr);
      }
    } else {
      rc = pcre2_match(compiled_->code, text, subject.size(), pos, PCRE2_NO_UTF_CHECK, data,
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw ConfigError(where_ + ": matching the regex failed: " +
                        std::string(reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t start = ovector[0], end = ovector[1];
    on_match(start, end);
    if (end > start) {
      pos = end;
    } else {
      if (end >= subject.size()) break;
      pos = end + utf8_length(static_cast<unsigned char>(subject[end]));
    }
  }
}

std::string escape_regex_literal(std::string_view literal) {
  // \Q...\E quotes everything but a literal "\E", which is split out and escaped.
  std::string out = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal.compare(i, 2, "\\E") == 0) {
      out += "\\E\\\\E\\Q";
      ++i;
    } else {
      out += literal[i];
    }
  }
  out += "\\E";
  return out;
}

}  // namespace zero::data::tokenizer
