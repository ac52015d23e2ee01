// TokenShard: a memory-mapped token file in llm.c's .bin layout — a header of 256 little-endian
// int32 ([0] magic, [1] version, [2] token count; the rest zero), then the tokens:
//   magic 20240520, version 1: uint16 tokens (GPT-2 style vocabularies)
//   magic 20240801, version 7: uint32 tokens (Llama 3 style vocabularies)
// and zero.cpp's own layout for data with a loss mask (prompt/response fine-tuning):
//   magic 20261125, version 1: header [3] = bytes per token (2: uint16, 4: uint32); after the
//   [2] tokens, [2] mask bytes, one per token: 1 = the token is a training target, 0 = it is
//   not (a prompt token: the model still reads it as input, but predicting it costs no loss).
// llm.c shards carry no mask: every token is a target. The header, the file size, every token id
// and every mask byte are checked when the shard is opened, so a bad shard fails at startup with
// its name instead of as a wrong loss hours later.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zero::data {

inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardVersionU16 = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;
inline constexpr int32_t kShardMagicMasked = 20261125;
inline constexpr int32_t kShardVersionMasked = 1;
inline constexpr int64_t kShardHeaderBytes = 256 * 4;

class TokenShard {
 public:
  // Maps `path` read-only. Throws FileError naming the file for: a file shorter than the header,
  // an unknown magic, a version that does not match the magic, a masked shard whose token width
  // is not 2 or 4, a token count that disagrees with the file size (truncated or trailing bytes),
  // a token id >= vocab_size or a mask byte other than 0/1 (naming the first such value and its
  // position). Pass the model's vocabulary size; ConfigError if it is < 1.
  static TokenShard open(const std::string& path, int64_t vocab_size);

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }
  bool wide() const { return wide_; }                // uint32 tokens (else uint16)
  uint32_t max_token() const { return max_token_; }  // 0 for an empty shard
  bool has_mask() const { return mask_ != nullptr; }
  // Tokens that are training targets: size() for a shard without a mask.
  int64_t target_count() const { return target_count_; }
  // Whether token i is a training target (always, without a mask).
  bool is_target(int64_t i) const { return mask_ == nullptr || mask_[i] != 0; }

  uint32_t token(int64_t i) const {
    return wide_ ? static_cast<const uint32_t*>(tokens_)[i]
                 : static_cast<const uint16_t*>(tokens_)[i];
  }

  // Copies tokens [start, start + count) into `out`; the range must lie inside the shard.
  void copy_window(int64_t start, int64_t count, int32_t* out) const;
  void copy_window(int64_t start, int64_t count, int64_t* out) const;
  // The same range as training targets: a token that is not a target (mask 0) becomes
  // `ignore_index` (the loss's model::kIgnoreIndex, -100), so the loss skips it.
  void copy_targets(int64_t start, int64_t count, int32_t ignore_index, int32_t* out) const;
  void copy_targets(int64_t start, int64_t count, int32_t ignore_index, int64_t* out) const;

 private:
  template <typename Out>
  void copy_window_to(int64_t start, int64_t count, Out* out) const;
  template <typename Out>
  void copy_targets_to(int64_t start, int64_t count, int32_t ignore_index, Out* out) const;

  std::string path_;
  std::shared_ptr<const void> mapping_;  // shared: copies of a shard share one mapping
  const void* tokens_ = nullptr;
  int64_t count_ = 0;
  bool wide_ = false;
  uint32_t max_token_ = 0;
  const uint8_t* mask_ = nullptr;  // [count_] 0/1 inside the mapping; null without a mask
  int64_t target_count_ = 0;
};

// Writes `tokens` as a shard, atomically (io/atomic_file.h). uint16 tokens (magic 20240520) when
// every id is < 65536 and `wide` is false, else uint32 tokens (magic 20240801). Throws
// ConfigError for more than 2^31 - 1 tokens (the header's count is an int32) and FileError for
// I/O failures.
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                       bool wide = false);
// The same with a loss mask (mask[i] = 1: token i is a target, 0: it is not), written in the
// masked layout (magic 20261125) with the same uint16/uint32 rule. Throws ConfigError when the
// mask's length differs from the tokens' or a mask value is not 0 or 1.
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                       const std::vector<uint8_t>& mask, bool wide = false);

}  // namespace zero::data
