#include "engine/data_sources.h"

#include <limits>
#include <optional>

#include "core/checked_math.h"
#include "core/error.h"
#include "data/token_dataset.h"
#include "engine/engine_state.h"
#include "model/step_context.h"

namespace zero::engine {
namespace {

static_assert(data::kIgnoredTarget == model::kIgnoreIndex,
              "masked shard tokens must become the loss's ignore index");

// The micro-batch shape both sources produce: tokens and targets of micro_batch x seq_len, read
// from windows of seq_len + 1 tokens.
void check_batch_shape(int64_t micro_batch, int64_t seq_len) {
  if (micro_batch < 1 || seq_len < 1 || seq_len >= std::numeric_limits<int32_t>::max() ||
      !mul_if_fits(micro_batch, seq_len + 1)) {
    throw ConfigError("a micro-batch of " + std::to_string(micro_batch) + " sequences of " +
                      std::to_string(seq_len) +
                      " tokens cannot be built; use a micro-batch >= 1 and a --seq-len from 1 "
                      "to 2^31 - 2 whose product fits in memory");
  }
}

}  // namespace

SyntheticData::SyntheticData(std::shared_ptr<const data::MarkovSource> source, int rank,
                             int world_size, uint64_t stream)
    : source_(std::move(source)), rank_(rank), world_size_(world_size), stream_(stream) {}

model::Batch SyntheticData::next(int64_t micro_batch, int64_t seq_len) {
  check_batch_shape(micro_batch, seq_len);
  model::Batch batch;
  batch.tokens = Tensor::zeros_host({micro_batch, seq_len}, DType::kI32);
  batch.targets = Tensor::zeros_host({micro_batch, seq_len}, DType::kI32);
  for (int64_t b = 0; b < micro_batch; ++b) {
    // Sample indices stay far below 2^63 (next_sample_ <= 2^53 on restore, one per sample read);
    // checked anyway, because the index is a function of an outside number.
    const std::optional<int64_t> scaled = mul_if_fits(next_sample_, world_size_);
    if (!scaled || next_sample_ >= kMaxTrainingCounter) {
      throw Error("the synthetic data source has read " + std::to_string(next_sample_) +
                  " samples per rank, the most it can index; start a fresh run");
    }
    const auto index = static_cast<uint64_t>(*scaled + rank_);
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
  const nlohmann::json* value =
      state.is_object() && state.contains("next_sample") ? &state["next_sample"] : nullptr;
  // A JSON integer that fits [0, 2^53]: floats (2^64 parses as one), strings, negatives and
  // unsigned values past int64 are all refused rather than converted.
  const bool fits = value != nullptr && value->is_number_integer() &&
                    (value->is_number_unsigned()
                         ? value->get<uint64_t>() <= static_cast<uint64_t>(kMaxTrainingCounter)
                         : value->get<int64_t>() >= 0 && value->get<int64_t>() <= kMaxTrainingCounter);
  if (!fits) {
    std::string got = value == nullptr ? "nothing" : value->dump();
    if (got.size() > 80) got = got.substr(0, 80) + "...";
    throw FileError("the synthetic data position \"next_sample\" must be an integer from 0 to " +
                    std::to_string(kMaxTrainingCounter) + " (2^53), got " + got +
                    "; the checkpoint's client state is damaged or was edited by hand");
  }
  next_sample_ = value->get<int64_t>();
}

std::string SyntheticData::description() const {
  return "synthetic order-" + std::to_string(source_->order()) + " Markov chain over " +
         std::to_string(source_->vocab_size()) + " tokens (entropy rate " +
         std::to_string(source_->entropy_rate()) + " nats/token)";
}

ShardData::ShardData(const std::vector<std::string>& paths, int64_t vocab_size, int64_t seq_len,
                     int rank, int world_size, uint64_t seed, bool drop_last_batch)
    : seq_len_(seq_len), drop_last_batch_(drop_last_batch) {
  if (paths.empty()) throw ConfigError("--data: no token shards given");
  check_batch_shape(1, seq_len);
  int64_t windows = 0;
  for (const auto& path : paths) {
    shards_.push_back(data::TokenShard::open(path, vocab_size));
    first_window_.push_back(windows);
    windows = checked_sum(windows, std::max<int64_t>(0, (shards_.back().size() - 1) / seq_len),
                          "the number of --seq-len windows in --data");
  }
  first_window_.push_back(windows);
  sampler_ = std::make_unique<data::DistributedSampler>(windows, rank, world_size, seed);
}

model::Batch ShardData::next(int64_t micro_batch, int64_t seq_len) {
  if (seq_len != seq_len_) throw ShapeError("ShardData was built for --seq-len " + std::to_string(seq_len_));
  check_batch_shape(micro_batch, seq_len);
  if (drop_last_batch_) {
    if (sampler_->samples_per_rank() < micro_batch) {
      throw ConfigError("dataloader_drop_last is true, but each rank's share of --data (" +
                        std::to_string(sampler_->samples_per_rank()) +
                        " windows of --seq-len tokens) is less than one micro-batch (" +
                        std::to_string(micro_batch) +
                        "), so every batch would be dropped; give more data, a smaller "
                        "micro-batch, or set dataloader_drop_last to false");
    }
    if (sampler_->samples_per_rank() - sampler_->position() < micro_batch) {
      sampler_->start_next_epoch();
    }
  }
  model::Batch batch;
  batch.tokens = Tensor::zeros_host({micro_batch, seq_len}, DType::kI32);
  batch.targets = Tensor::zeros_host({micro_batch, seq_len}, DType::kI32);
  for (int64_t b = 0; b < micro_batch; ++b) {
    const int64_t window = sampler_->next();
    size_t shard = 0;
    while (first_window_[shard + 1] <= window) ++shard;
    const int64_t start = (window - first_window_[shard]) * seq_len;
    // A target the shard's loss mask excludes (a prompt token) becomes the ignore index.
    shards_[shard].copy_window(start, seq_len, batch.tokens.data<int32_t>() + b * seq_len);
    shards_[shard].copy_targets(start + 1, seq_len, data::kIgnoredTarget,
                                batch.targets.data<int32_t>() + b * seq_len);
  }
  return batch;
}

std::string ShardData::description() const {
  int64_t tokens = 0, targets = 0;
  bool masked = false;
  for (const auto& s : shards_) {
    tokens += s.size();
    targets += s.target_count();
    masked = masked || s.has_mask();
  }
  return std::to_string(shards_.size()) + " shard(s), " + std::to_string(tokens) + " tokens" +
         (masked ? " (" + std::to_string(targets) + " of them loss targets)" : "") + ", " +
         std::to_string(first_window_.back()) + " windows of " + std::to_string(seq_len_);
}

}  // namespace zero::engine
