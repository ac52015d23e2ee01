// The TrainingData implementations `zero train` uses: the synthetic Markov source and token
// shards (.bin) read through a distributed sampler.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/distributed_sampler.h"
#include "data/markov_source.h"
#include "data/token_shard.h"
#include "engine/training_data.h"

namespace zero::engine {

// Sample i of the Markov source is its own deterministic stream; ranks take disjoint indices
// (rank, rank + W, ...). `stream` separates training from evaluation samples.
class SyntheticData final : public TrainingData {
 public:
  SyntheticData(std::shared_ptr<const data::MarkovSource> source, int rank, int world_size,
                uint64_t stream);
  model::Batch next(int64_t micro_batch, int64_t seq_len) override;
  nlohmann::json state() const override { return {{"next_sample", next_sample_}}; }
  void restore(const nlohmann::json& state) override;
  std::string description() const override;
  std::optional<double> entropy_floor() const override { return source_->entropy_rate(); }

 private:
  std::shared_ptr<const data::MarkovSource> source_;
  int rank_, world_size_;
  uint64_t stream_;
  int64_t next_sample_ = 0;
};

// Non-overlapping windows of seq_len + 1 tokens from each shard (never crossing shards), in the
// sampler's order. Targets whose token a shard's loss mask excludes (prompt tokens) are
// model::kIgnoreIndex. Windows are never skipped for holding no target: a micro-batch whose
// targets are all ignored has loss 0 and a zero gradient, and still counts as a micro-batch.
class ShardData final : public TrainingData {
 public:
  // `drop_last_batch` (DeepSpeed's dataloader_drop_last): a micro-batch never spans two epochs;
  // the rank's last samples of an epoch that do not fill one are skipped. Off, micro-batches
  // run on into the next epoch, so nothing is skipped.
  ShardData(const std::vector<std::string>& paths, int64_t vocab_size, int64_t seq_len, int rank,
            int world_size, uint64_t seed, bool drop_last_batch = false);
  model::Batch next(int64_t micro_batch, int64_t seq_len) override;
  nlohmann::json state() const override { return sampler_->state(); }
  void restore(const nlohmann::json& state) override { sampler_->restore(state); }
  std::string description() const override;

 private:
  std::vector<data::TokenShard> shards_;
  std::vector<int64_t> first_window_;  // per shard: index of its first window
  int64_t seq_len_;
  bool drop_last_batch_;
  std::unique_ptr<data::DistributedSampler> sampler_;
};

}  // namespace zero::engine
