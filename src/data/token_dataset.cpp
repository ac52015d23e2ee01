// TokenDataset: shard windows, sample -> (shard, start) lookup, and sample copies.
#include "data/token_dataset.h"

#include <algorithm>

#include "core/check.h"
#include "core/error.h"

namespace zero::data {

TokenDataset::TokenDataset(std::vector<TokenShard> shards, int64_t seq_len)
    : shards_(std::move(shards)), seq_len_(seq_len) {
  if (seq_len < 1) {
    throw ConfigError("the sequence length must be >= 1, got " + std::to_string(seq_len));
  }
  if (shards_.empty()) throw ConfigError("no token shards given: pass at least one .bin file");
  first_sample_.reserve(shards_.size() + 1);
  first_sample_.push_back(0);
  for (const auto& s : shards_) {
    const int64_t windows = s.size() > 0 ? (s.size() - 1) / seq_len : 0;
    first_sample_.push_back(first_sample_.back() + windows);
  }
  if (num_samples() == 0) {
    std::string names;
    for (const auto& s : shards_) {
      names +=
          (names.empty() ? "" : ", ") + s.path() + " (" + std::to_string(s.size()) + " tokens)";
    }
    throw ConfigError(
        "no token shard holds one training window of seq_len + 1 = " + std::to_string(seq_len + 1) +
        " tokens: " + names + ". Use a shorter --seq-len or more data.");
  }
}

TokenDataset TokenDataset::open(const std::vector<std::string>& paths, int64_t vocab_size,
                                int64_t seq_len) {
  std::vector<TokenShard> shards;
  shards.reserve(paths.size());
  for (const auto& path : paths) shards.push_back(TokenShard::open(path, vocab_size));
  return TokenDataset(std::move(shards), seq_len);
}

int64_t TokenDataset::total_tokens() const {
  int64_t total = 0;
  for (const auto& s : shards_) total += s.size();
  return total;
}

TokenDataset::Location TokenDataset::locate(int64_t index) const {
  ZERO_CHECK(index >= 0 && index < num_samples(),
             "sample " << index << " outside the dataset's " << num_samples() << " samples");
  // The last shard whose first sample is <= index; empty shards have equal prefix sums and are
  // skipped by upper_bound.
  const auto after = std::upper_bound(first_sample_.begin(), first_sample_.end(), index);
  const auto shard = static_cast<int64_t>(after - first_sample_.begin()) - 1;
  return {shard, (index - first_sample_[static_cast<size_t>(shard)]) * seq_len_};
}

template <typename Out>
void TokenDataset::copy_sample_to(int64_t index, Out* inputs, Out* targets) const {
  const Location at = locate(index);
  const TokenShard& s = shard(at.shard);
  s.copy_window(at.start, seq_len_, inputs);
  s.copy_targets(at.start + 1, seq_len_, kIgnoredTarget, targets);
}

void TokenDataset::copy_sample(int64_t index, int32_t* inputs, int32_t* targets) const {
  copy_sample_to(index, inputs, targets);
}

void TokenDataset::copy_sample(int64_t index, int64_t* inputs, int64_t* targets) const {
  copy_sample_to(index, inputs, targets);
}

}  // namespace zero::data
