// CorpusBuilder: the concatenation `zero prepare` builds before it writes shards — the tokens of
// every document in order, each followed by the tokenizer's separator (when it has one), the
// loss mask when the documents have prompts, and where each document ends (the validation
// split may only cut there).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace zero::data {

// One tokenized document: its prompt tokens first (not trained on), then its text tokens.
struct EncodedDocument {
  std::vector<uint32_t> tokens;
  size_t prompt_tokens = 0;
};

class CorpusBuilder {
 public:
  // `masked`: keep a loss mask (prompt tokens 0; text tokens and the separator 1).
  // `max_tokens`: more is a ConfigError (what the shards can count). `expected_tokens` sizes
  // the buffers once: growing a multi-gigabyte vector by doubling copies it several times on
  // the one thread that appends, while the tokenizing threads wait.
  CorpusBuilder(std::optional<uint32_t> separator, bool masked, int64_t max_tokens,
                int64_t expected_tokens);

  // Appends one document and the separator; returns the tokens added. Throws ConfigError when
  // the corpus would exceed max_tokens.
  int64_t append(const EncodedDocument& document);

  std::vector<uint32_t>& tokens() { return tokens_; }
  const std::vector<uint32_t>& tokens() const { return tokens_; }
  std::vector<uint8_t>& mask() { return mask_; }  // empty unless masked()
  // Token offsets where documents end, increasing; the last is tokens().size().
  const std::vector<int64_t>& document_ends() const { return document_ends_; }
  bool masked() const { return masked_; }
  // Training targets among tokens [begin, end): all of them without a mask.
  int64_t targets(int64_t begin, int64_t end) const;

 private:
  std::optional<uint32_t> separator_;
  bool masked_;
  int64_t max_tokens_;
  std::vector<uint32_t> tokens_;
  std::vector<uint8_t> mask_;
  std::vector<int64_t> document_ends_;
};

}  // namespace zero::data
