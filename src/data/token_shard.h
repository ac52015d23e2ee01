// TokenShard: a memory-mapped token file in llm.c's .bin layout — a header of 256 little-endian
// int32 (magic 20240520 with uint16 tokens, version 1; magic 20240801 with uint32 tokens,
// version 2; [2] = token count), then the tokens. The header, the size and every token id are
// checked when the shard is opened.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zero::data {

inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardMagicU32 = 20240801;

class TokenShard {
 public:
  // Throws FileError naming the file for a bad header, a size that disagrees with it, or a token
  // id >= vocab_size (naming the id and its position).
  static TokenShard open(const std::string& path, int64_t vocab_size);

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }
  uint32_t token(int64_t i) const {
    return wide_ ? static_cast<const uint32_t*>(tokens_)[i] : static_cast<const uint16_t*>(tokens_)[i];
  }

 private:
  std::string path_;
  std::shared_ptr<const void> mapping_;
  const void* tokens_ = nullptr;
  int64_t count_ = 0;
  bool wide_ = false;
};

// Writes `tokens` as a shard (uint16 when every id fits, else uint32), atomically.
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens);

}  // namespace zero::data
