// tokenizer.json normalizers; see normalizers.h.
#include "data/tokenizer/normalizers.h"

#include <cstdlib>
#include <vector>

#include <utf8proc.h>

#include "core/error.h"
#include "data/tokenizer/split_regex.h"
#include "data/tokenizer/utf8.h"

namespace zero::data::tokenizer {
namespace {

bool is_ascii(const std::string& text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// NFC/NFD/NFKC/NFKD through utf8proc. ASCII text is the same in every form: skipped.
class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(int options) : options_(options) {}
  bool is_local() const override { return true; }
  void normalize(std::string& text) const override {
    if (text.empty() || is_ascii(text)) return;
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                     static_cast<utf8proc_ssize_t>(text.size()), &result,
                     static_cast<utf8proc_option_t>(options_));
    if (n < 0) {
      throw ConfigError(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
    }
    text.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
    std::free(result);
  }

 private:
  int options_;
};

// Per code point lowercase mapping, as Hugging Face's Lowercase (Rust's char::to_lowercase, no
// context rules): utf8proc's simple mapping plus the one one-to-many lowercase mapping Unicode
// has, U+0130 'İ' -> "i" U+0307.
class LowercaseNormalizer : public Normalizer {
 public:
  bool is_local() const override { return true; }
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      const uint32_t cp = next_code_point(text, pos);
      if (cp == 0x130) {
        out += "i\xCC\x87";
        continue;
      }
      append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
    text.swap(out);
  }
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);  // HF leaves empty text empty
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(Pattern pattern, std::string content, const JsonPath& at)
      : pattern_(std::move(pattern)), content_(std::move(content)) {
    if (!pattern_.is_literal) regex_ = std::make_unique<SplitRegex>(pattern_.text, at.child("pattern").str());
  }
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size() + text.size() / 4);
    size_t done = 0;
    if (pattern_.is_literal) {
      if (pattern_.text.empty()) return;
      size_t hit;
      while ((hit = text.find(pattern_.text, done)) != std::string::npos) {
        out.append(text, done, hit - done);
        out += content_;
        done = hit + pattern_.text.size();
      }
    } else {
      regex_->for_each_match(text, [&](size_t start, size_t end) {
        out.append(text, done, start - done);
        out += content_;
        done = end;
      });
    }
    out.append(text, done, std::string::npos);
    text.swap(out);
  }

 private:
  Pattern pattern_;
  std::string content_;
  std::unique_ptr<SplitRegex> regex_;
};

// Strips Unicode whitespace from the left and/or right end.
class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!is_unicode_whitespace(next_code_point(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t next = start;
        if (!is_unicode_whitespace(next_code_point(text, next))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }
  bool is_local() const override {
    for (const auto& step : steps_) {
      if (!step->is_local()) return false;
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& spec, const JsonPath& at) {
  if (spec.is_null()) return nullptr;
  const std::string type = type_field(spec, at);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") {
    return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "NFKD") {
    return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(string_field(spec, "prepend", at));
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(pattern_field(spec, "pattern", at),
                                               string_field(spec, "content", at), at);
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(bool_field(spec, "strip_left", at, false),
                                             bool_field(spec, "strip_right", at, false));
  }
  if (type == "Sequence") {
    const Json& list = require_field(spec, "normalizers", at);
    if (!list.is_array()) throw ConfigError(at.child("normalizers").str() + " must be an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_normalizer(list[i], at.child("normalizers").index(i))) {
        steps.push_back(std::move(step));
      }
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  unsupported_type(at, "normalizer", type,
                   "NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, Sequence");
}

}  // namespace zero::data::tokenizer
