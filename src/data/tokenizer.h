// Tokenizer: text <-> token ids, the interface `zero prepare`, `zero tokenize` and the data
// pipeline code against. Implementations: ByteTokenizer (token = byte, vocabulary 256, no files
// needed) and the Hugging Face tokenizer.json reader (data/hf_tokenizer.h).
//
// Thread safety: encode/decode are const and may be called from several threads at once on one
// object (`zero prepare` tokenizes documents in parallel).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zero::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Every id encode() returns is < vocab_size() (elements, not bytes).
  virtual int64_t vocab_size() const = 0;
  // `text` is UTF-8. add_special_tokens: the ids the tokenizer's post-processor adds around a
  // single sequence (BOS/EOS), as Hugging Face's encode(text, add_special_tokens=True) does.
  virtual std::vector<uint32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  // The text of `ids`; skip_special_tokens leaves out special tokens. Throws ConfigError naming
  // the first id outside the vocabulary.
  virtual std::string decode(const std::vector<uint32_t>& ids, bool skip_special_tokens) const = 0;
  // The id placed between documents when several are packed into one shard (the EOS token;
  // GPT-2's <|endoftext|>); nullopt when the tokenizer has none (documents are then simply
  // concatenated).
  virtual std::optional<uint32_t> document_separator() const = 0;
  // One line for logs: the kind and where it came from.
  virtual std::string description() const = 0;
};

}  // namespace zero::data
