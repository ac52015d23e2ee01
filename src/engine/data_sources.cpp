#include "engine/data_sources.h"

#include "core/error.h"

namespace zero::engine {

SyntheticData::SyntheticData(std::shared_ptr<const data::MarkovSource> source, int rank,
                             int world_size, uint64_t stream)
    : source_(std::move(source)), rank_(rank), world_size_(world_size), stream_(stream) {}

model::Batch SyntheticData::next(int64_t micro_batch, int64_t seq_len) {
  Tensor ids = Tensor::zeros_host({micro_batch, seq_len + 1}, DType::kI32);
  model::Batch batch;
  batch.tokens = Tensor::zeros_host({micro_batch, seq_len}, DType::kI32);
  batch.targets = Tensor::zeros_host({micro_batch, seq_len}, DType::kI32);
  for (int64_t b = 0; b < micro_batch; ++b) {
    const auto index = static_cast<uint64_t>(next_sample_ * world_size_ + rank_);
    ++next_sample_;
    const std::vector<int32_t> tokens = source_->sample((stream_ << 40) ^ index, seq_len + 1);
    for (int64_t t = 0; t < seq_len; ++t) {
      batch.tokens.data<int32_t>()[b * seq_len + t] = tokens[static_cast<size_t>(t)];
      batch.targets.data<int32_t>()[b * seq_len + t] = tokens[static_cast<size_t>(t + 1)];
    }
  }
  return batch;
}

void SyntheticData::restore(const nlohmann::json& state) {
  if (!state.contains("next_sample")) throw FileError("synthetic data state lacks next_sample");
  next_sample_ = state["next_sample"].get<int64_t>();
}

std::string SyntheticData::description() const {
  return "synthetic order-" + std::to_string(source_->order()) + " Markov chain over " +
         std::to_string(source_->vocab_size()) + " tokens (entropy rate " +
         std::to_string(source_->entropy_rate()) + " nats/token)";
}

ShardData::ShardData(const std::vector<std::string>& paths, int64_t vocab_size, int64_t seq_len,
                     int rank, int world_size, uint64_t seed)
    : seq_len_(seq_len) {
  if (paths.empty()) throw ConfigError("--data: no token shards given");
  int64_t windows = 0;
  for (const auto& path : paths) {
    shards_.push_back(data::TokenShard::open(path, vocab_size));
    first_window_.push_back(windows);
    windows += std::max<int64_t>(0, (shards_.back().size() - 1) / seq_len);
  }
  first_window_.push_back(windows);
  sampler_ = std::make_unique<data::DistributedSampler>(windows, rank, world_size, seed);
}

model::Batch ShardData::next(int64_t micro_batch, int64_t seq_len) {
  if (seq_len != seq_len_) throw ShapeError("ShardData was built for --seq-len " + std::to_string(seq_len_));
  model::Batch batch;
  batch.tokens = Tensor::zeros_host({micro_batch, seq_len}, DType::kI32);
  batch.targets = Tensor::zeros_host({micro_batch, seq_len}, DType::kI32);
  for (int64_t b = 0; b < micro_batch; ++b) {
    const int64_t window = sampler_->next();
    size_t shard = 0;
    while (first_window_[shard + 1] <= window) ++shard;
    const int64_t start = (window - first_window_[shard]) * seq_len;
    for (int64_t t = 0; t < seq_len; ++t) {
      batch.tokens.data<int32_t>()[b * seq_len + t] = static_cast<int32_t>(shards_[shard].token(start + t));
      batch.targets.data<int32_t>()[b * seq_len + t] = static_cast<int32_t>(shards_[shard].token(start + t + 1));
    }
  }
  return batch;
}

std::string ShardData::description() const {
  int64_t tokens = 0;
  for (const auto& s : shards_) tokens += s.size();
  return std::to_string(shards_.size()) + " shard(s), " + std::to_string(tokens) + " tokens, " +
         std::to_string(first_window_.back()) + " windows of " + std::to_string(seq_len_);
}

}  // namespace zero::engine
