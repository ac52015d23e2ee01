// HfTokenizer: a Hugging Face tokenizer.json (the `tokenizers` library's format) as a
// zero::data::Tokenizer, giving the ids the Hugging Face library gives.
//
// Supported: model BPE (byte-level like GPT-2, Llama 3, Qwen2/3; SentencePiece-style with
// byte_fallback like Llama 2, Mistral); normalizers NFC/NFD/NFKC/NFKD, Lowercase, Prepend,
// Replace, Strip, Sequence; pre-tokenizers ByteLevel, Split, Metaspace, Sequence; added and
// special tokens (lstrip, rstrip, single_word, normalized); post-processors TemplateProcessing,
// RobertaProcessing, BertProcessing, ByteLevel, Sequence; decoders ByteLevel, Metaspace,
// ByteFallback, Fuse, Strip, Replace, Sequence. Anything else (WordPiece, Unigram, WordLevel
// models; other component types; BPE dropout or subword prefixes) is a ConfigError naming the
// JSON path and the type. "truncation" and "padding" are ignored: they shape batches, not ids.
//
// decode() is the tokenizers library's decode (transformers' extra clean_up_tokenization_spaces
// is not applied). Known corners where ids could differ from the library, none seen in the
// reference corpus: characters newer than the Unicode tables of the system's PCRE2/utf8proc
// (the library follows a later Unicode for \p{L} and friends); single_word treats letters and
// numbers as word characters (Rust also counts combining marks with the Alphabetic property);
// an rstrip token's swallowed whitespace is not searched again for other added tokens.
//
// Input text must be valid UTF-8: encode() throws ConfigError naming the byte offset of the
// first invalid byte (Hugging Face's Python and Node APIs cannot even hold such text).
//
// document_separator(), the EOS token, in this order:
//   1. eos_token of tokenizer_config.json in the same folder (what Hugging Face's
//      AutoTokenizer uses), when it names a token of this vocabulary;
//   2. the last special token the post-processor puts after the sequence ("$A </s>");
//   3. the first of <|endoftext|>, <|end_of_text|>, </s>, <eos>, <|im_end|>, <|end|> that is a
//      special added token;
//   4. none.
//
// Thread safety: encode/decode are const and may run on several threads at once. A single
// long text is itself encoded on several threads when that is exact (set_max_threads).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "data/tokenizer.h"

namespace zero::data {

class HfTokenizer final : public Tokenizer {
 public:
  // `json_text` is the content of a tokenizer.json, `origin` names it in messages. `eos_token`:
  // tokenizer_config.json's eos_token when known (rule 1 above). Throws ConfigError for
  // unsupported or inconsistent content, FileError for text that is not JSON.
  HfTokenizer(std::string_view json_text, const std::string& origin,
              const std::optional<std::string>& eos_token = std::nullopt);
  ~HfTokenizer() override;
  HfTokenizer(const HfTokenizer&) = delete;
  HfTokenizer& operator=(const HfTokenizer&) = delete;

  int64_t vocab_size() const override;
  std::vector<uint32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(const std::vector<uint32_t>& ids, bool skip_special_tokens) const override;
  std::optional<uint32_t> document_separator() const override;
  std::string description() const override;

  // The id of a token (added tokens first, then the model's vocabulary).
  std::optional<uint32_t> token_to_id(std::string_view token) const;

  // One encode() of a text of 1 MiB or more uses up to this many threads (default: the
  // machine's cores, at most 8; 1 = never) when the tokenizer can be cut exactly: byte-level
  // BPE with the GPT-2, Llama 3 or Qwen2 split pattern is cut at line starts, SentencePiece BPE
  // whose newline is a byte token in no merge after newlines. Call before sharing the object.
  void set_max_threads(int threads);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Loads DIR/tokenizer.json (or DIR/tokenizer.json.gz), or the file itself when given a file
// (.json or gzip-compressed .json.gz), with tokenizer_config.json beside it for the EOS token.
// Throws FileError naming the path when it is missing or unreadable, ConfigError for content
// zero.cpp does not support.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir_or_file);

}  // namespace zero::data
