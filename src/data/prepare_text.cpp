#include "data/prepare_text.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/token_shard.h"

namespace zero::data {

std::vector<uint32_t> encode_bytes(const std::string& text) {
  std::vector<uint32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string decode_bytes(const std::vector<uint32_t>& tokens) {
  std::string out(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= kByteVocabSize) {
      throw Error("token " + std::to_string(tokens[i]) + " is not a byte (the byte tokenizer has 256 tokens)");
    }
    out[i] = static_cast<char>(tokens[i]);
  }
  return out;
}

PrepareResult prepare_text_files(const std::vector<std::string>& inputs, const std::string& train_out,
                                 const std::string& val_out, double val_fraction) {
  if (inputs.empty()) throw ConfigError("zero prepare: give at least one text file");
  if (val_fraction < 0.0 || val_fraction >= 1.0) {
    throw ConfigError("zero prepare: --val-fraction must be in [0, 1), got " + std::to_string(val_fraction));
  }
  std::vector<uint32_t> tokens;
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw FileError(path + ": cannot open the text file");
    std::stringstream text;
    text << in.rdbuf();
    const auto encoded = encode_bytes(text.str());
    tokens.insert(tokens.end(), encoded.begin(), encoded.end());
  }
  PrepareResult result;
  size_t split = tokens.size();
  if (!val_out.empty()) split = tokens.size() - static_cast<size_t>(static_cast<double>(tokens.size()) * val_fraction);
  write_token_shard(train_out, std::vector<uint32_t>(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(split)));
  result.train_tokens = static_cast<int64_t>(split);
  if (!val_out.empty()) {
    write_token_shard(val_out, std::vector<uint32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(split), tokens.end()));
    result.val_tokens = static_cast<int64_t>(tokens.size() - split);
  }
  return result;
}

}  // namespace zero::data
