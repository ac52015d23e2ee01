// TokenDataset: several token shards seen as one list of training samples. Sample i is a window
// of seq_len + 1 consecutive tokens (inputs = the first seq_len, targets = the same shifted by
// one). Each shard is cut into non-overlapping windows, (size - 1) / seq_len of them — the last
// token of one window is the first of the next, since it is only ever a target there — and no
// window crosses a shard boundary (shards are separate documents or datasets). A target whose
// token the shard's loss mask marks as not a target (a prompt token) is kIgnoredTarget.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/token_shard.h"

namespace zero::data {

// The target value of a masked token: model::kIgnoreIndex (the loss skips it); the data library
// does not depend on the model library, so the value is repeated here and checked equal there.
inline constexpr int32_t kIgnoredTarget = -100;

class TokenDataset {
 public:
  // Throws ConfigError if seq_len < 1 or no shard holds a single window of seq_len + 1 tokens
  // (naming the shards and the fix).
  TokenDataset(std::vector<TokenShard> shards, int64_t seq_len);
  // Opens every path with TokenShard::open (validated against vocab_size).
  static TokenDataset open(const std::vector<std::string>& paths, int64_t vocab_size,
                           int64_t seq_len);

  int64_t seq_len() const { return seq_len_; }
  int64_t num_samples() const { return first_sample_.back(); }
  int64_t num_shards() const { return static_cast<int64_t>(shards_.size()); }
  const TokenShard& shard(int64_t i) const { return shards_[static_cast<size_t>(i)]; }
  int64_t total_tokens() const;

  // Where sample `index` lives: shard number and first token of its seq_len + 1 window.
  struct Location {
    int64_t shard = 0;
    int64_t start = 0;
  };
  Location locate(int64_t index) const;

  // Writes sample `index`'s seq_len inputs and seq_len targets (kIgnoredTarget where masked).
  void copy_sample(int64_t index, int32_t* inputs, int32_t* targets) const;
  void copy_sample(int64_t index, int64_t* inputs, int64_t* targets) const;

 private:
  template <typename Out>
  void copy_sample_to(int64_t index, Out* inputs, Out* targets) const;

  std::vector<TokenShard> shards_;
  int64_t seq_len_;
  std::vector<int64_t> first_sample_;  // [num_shards + 1]: prefix sums of samples per shard
};

}  // namespace zero::data
