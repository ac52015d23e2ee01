// ByteTokenizer: bytes <-> token ids.
#include "data/byte_tokenizer.h"

#include "core/error.h"

namespace zero::data {

std::vector<uint32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> tokens(text.size());
  // Through unsigned char: plain char is signed on x86, and byte 0xff must become 255, not -1.
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(const std::vector<uint32_t>& tokens) const {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= kByteVocabSize) {
      throw ConfigError("token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                        " is not a byte: the byte tokenizer has 256 tokens (were these tokens "
                        "made by another tokenizer?)");
    }
    text[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return text;
}

std::vector<uint32_t> ByteTokenizer::encode(std::string_view text,
                                            bool /*add_special_tokens*/) const {
  return encode(text);
}

std::string ByteTokenizer::decode(const std::vector<uint32_t>& ids,
                                  bool /*skip_special_tokens*/) const {
  return decode(ids);
}

std::string ByteTokenizer::description() const {
  return "byte tokenizer (token = byte value, vocabulary 256)";
}

}  // namespace zero::data
