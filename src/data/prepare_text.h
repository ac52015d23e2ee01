// Turning text files into token shards with the byte-level tokenizer (token = byte value,
// vocabulary 256): what `zero prepare` runs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::data {

inline constexpr int64_t kByteVocabSize = 256;

// The byte-level tokenizer.
std::vector<uint32_t> encode_bytes(const std::string& text);
std::string decode_bytes(const std::vector<uint32_t>& tokens);

struct PrepareResult {
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
};

// Tokenizes `inputs` (concatenated in order) and writes `train_out`; when `val_out` is not empty,
// the last `val_fraction` of the tokens go there instead. Throws FileError naming a missing or
// unreadable input and ConfigError for a fraction outside [0, 1).
PrepareResult prepare_text_files(const std::vector<std::string>& inputs, const std::string& train_out,
                                 const std::string& val_out, double val_fraction);

}  // namespace zero::data
