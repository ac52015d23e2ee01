// Finding and reading a Hugging Face tokenizer's files: DIR/tokenizer.json (or .json.gz, which
// is inflated with zlib), and tokenizer_config.json beside it for the eos_token.
#pragma once
#include <optional>
#include <string>

namespace zero::data::tokenizer {

// Larger than any real tokenizer.json (the biggest are ~35 MB).
inline constexpr uint64_t kMaxTokenizerJsonBytes = 1ull << 30;

struct TokenizerFiles {
  std::string json_path;                 // the tokenizer.json(.gz) read
  std::string json_text;                 // its (inflated) content
  std::optional<std::string> eos_token;  // tokenizer_config.json's eos_token, when present
};

// Throws FileError naming the path when nothing readable is there.
TokenizerFiles read_tokenizer_files(const std::string& dir_or_file);

// The gzip stream `compressed` inflated; FileError naming `path` when it is not gzip or
// inflates to more than `max_bytes`.
std::string gunzip(const std::string& compressed, const std::string& path, uint64_t max_bytes);

}  // namespace zero::data::tokenizer
