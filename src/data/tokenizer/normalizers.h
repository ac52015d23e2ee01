// tokenizer.json "normalizer": rewrites each piece of text (between added tokens) before
// pre-tokenization. Supported: NFC, NFD, NFKC, NFKD (utf8proc), Lowercase, Prepend, Replace,
// Strip, Sequence. Anything else is a ConfigError naming its path.
#pragma once
#include <memory>
#include <string>

#include "data/tokenizer/json_fields.h"

namespace zero::data::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8 and stays so.
  virtual void normalize(std::string& text) const = 0;
  // True when normalizing text cut after a "\n" gives the same as cutting the normalized text:
  // the Unicode forms and Lowercase map ASCII to itself and never join across a "\n";
  // Prepend, Replace and Strip look at the ends or at patterns and promise nothing.
  virtual bool is_local() const { return false; }
};

// null JSON -> nullptr (no normalizer).
std::unique_ptr<Normalizer> make_normalizer(const Json& spec, const JsonPath& at);

}  // namespace zero::data::tokenizer
