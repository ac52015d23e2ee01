// tokenizer.json "decoder": turns the token strings of ids back into text, as Hugging Face's
// decode_chain does (each decoder maps the list of strings; the result is concatenated).
// Supported: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence. Without a
// decoder the tokens are joined with spaces (Hugging Face's behaviour). Anything else is a
// ConfigError naming its path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer/json_fields.h"

namespace zero::data::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// null JSON -> nullptr.
std::unique_ptr<Decoder> make_decoder(const Json& spec, const JsonPath& at);

}  // namespace zero::data::tokenizer
