// ByteTokenizer: the simplest tokenizer that covers every input — token = byte value, a
// vocabulary of 256 — so `zero prepare` and `zero train` work on any text with no tokenizer
// files. UTF-8 text becomes one token per byte; decoding returns the exact bytes. Any bytes are
// accepted (invalid UTF-8 too), since every byte is a token. No special tokens and no document
// separator: documents are simply concatenated.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace zero::data {

inline constexpr int64_t kByteVocabSize = 256;

class ByteTokenizer final : public Tokenizer {
 public:
  int64_t vocab_size() const override { return kByteVocabSize; }
  std::vector<uint32_t> encode(std::string_view text) const;
  // Throws ConfigError naming the first token >= 256 and its position.
  std::string decode(const std::vector<uint32_t>& tokens) const;

  // Tokenizer: there are no special tokens, so the flags change nothing.
  std::vector<uint32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(const std::vector<uint32_t>& ids, bool skip_special_tokens) const override;
  std::optional<uint32_t> document_separator() const override { return std::nullopt; }
  std::string description() const override;
};

// Shorthands for ByteTokenizer{}.encode / decode.
inline std::vector<uint32_t> encode_bytes(std::string_view text) {
  return ByteTokenizer{}.encode(text);
}
inline std::string decode_bytes(const std::vector<uint32_t>& tokens) {
  return ByteTokenizer{}.decode(tokens);
}

}  // namespace zero::data
