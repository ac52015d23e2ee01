// Decoders; see decoders.h.
#include "data/tokenizer/decoders.h"

#include "core/error.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/metaspace.h"
#include "data/tokenizer/split_regex.h"
#include "data/tokenizer/utf8.h"

namespace zero::data::tokenizer {
namespace {

// All tokens -> one string: each token's characters back to bytes (a token with a character
// outside the alphabet is taken as its UTF-8 bytes), then the bytes as lossy UTF-8.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::instance();
    std::string bytes;
    for (const std::string& token : tokens) {
      if (!alphabet.decode(token, bytes)) bytes += token;
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

// The replacement character becomes a space; in the first token (unless prepend_scheme is
// never) it is dropped instead: it was the prefix the pre-tokenizer added.
class MetaspaceDecoder : public Decoder {
 public:
  explicit MetaspaceDecoder(MetaspaceOptions options) : options_(std::move(options)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    const std::string& r = options_.replacement;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const bool drop = i == 0 && options_.prepend_scheme != PrependScheme::kNever;
      std::string out;
      size_t done = 0, hit;
      while ((hit = tokens[i].find(r, done)) != std::string::npos) {
        out.append(tokens[i], done, hit - done);
        if (!drop) out += ' ';
        done = hit + r.size();
      }
      out.append(tokens[i], done, std::string::npos);
      tokens[i].swap(out);
    }
  }

 private:
  MetaspaceOptions options_;
};

// Runs of <0xXX> tokens become the text of their bytes; a run that is not valid UTF-8 becomes
// one U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string bytes;
    size_t byte_count = 0;
    const auto flush = [&]() {
      if (byte_count == 0) return;
      if (first_invalid_utf8(bytes) == kValidUtf8) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < byte_count; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      byte_count = 0;
    };
    for (std::string& token : tokens) {
      int value = -1;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
        value = hex_byte(token[3], token[4]);
      }
      if (value >= 0) {
        bytes.push_back(static_cast<char>(value));
        ++byte_count;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens.swap(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char high, char low) {
    const int h = hex_digit(high), l = hex_digit(low);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing `content` characters of each token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    const size_t n = content_.size();
    for (std::string& token : tokens) {
      size_t begin = 0, end = token.size();
      for (size_t i = 0; i < start_ && begin + n <= end && token.compare(begin, n, content_) == 0; ++i) {
        begin += n;
      }
      for (size_t i = 0; i < stop_ && end >= begin + n && token.compare(end - n, n, content_) == 0; ++i) {
        end -= n;
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content, const JsonPath& at)
      : pattern_(std::move(pattern)), content_(std::move(content)) {
    if (!pattern_.is_literal) regex_ = std::make_unique<SplitRegex>(pattern_.text, at.child("pattern").str());
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::string out;
      size_t done = 0;
      if (regex_) {
        regex_->for_each_match(token, [&](size_t start, size_t end) {
          out.append(token, done, start - done);
          out += content_;
          done = end;
        });
      } else if (!pattern_.text.empty()) {
        size_t hit;
        while ((hit = token.find(pattern_.text, done)) != std::string::npos) {
          out.append(token, done, hit - done);
          out += content_;
          done = hit + pattern_.text.size();
        }
      }
      out.append(token, done, std::string::npos);
      token.swap(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
  std::unique_ptr<SplitRegex> regex_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

size_t count_field(const Json& spec, const std::string& key, const JsonPath& at) {
  const Json& value = require_field(spec, key, at);
  if (!value.is_number_unsigned() || value.get<uint64_t>() > 1024) {
    throw ConfigError(at.child(key).str() + " must be a small non-negative integer");
  }
  return static_cast<size_t>(value.get<uint64_t>());
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& spec, const JsonPath& at) {
  if (spec.is_null()) return nullptr;
  const std::string type = type_field(spec, at);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") return std::make_unique<MetaspaceDecoder>(parse_metaspace(spec, at));
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const std::string content = string_field(spec, "content", at);
    size_t end = 0;
    if (content.empty() || (next_code_point(content, end), end != content.size())) {
      throw ConfigError(at.child("content").str() + " must be exactly one character");
    }
    return std::make_unique<StripDecoder>(content, count_field(spec, "start", at),
                                          count_field(spec, "stop", at));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(pattern_field(spec, "pattern", at),
                                            string_field(spec, "content", at), at);
  }
  if (type == "Sequence") {
    const Json& list = require_field(spec, "decoders", at);
    if (!list.is_array()) throw ConfigError(at.child("decoders").str() + " must be an array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_decoder(list[i], at.child("decoders").index(i))) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  unsupported_type(at, "decoder", type,
                   "ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence");
}

}  // namespace zero::data::tokenizer
