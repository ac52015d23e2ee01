#include "data/distributed_sampler.h"

#include <numeric>
#include <random>

#include "core/error.h"

namespace zero::data {

DistributedSampler::DistributedSampler(int64_t num_samples, int rank, int world_size, uint64_t seed)
    : num_samples_(num_samples), per_rank_(num_samples / world_size), rank_(rank),
      world_size_(world_size), seed_(seed) {
  if (per_rank_ < 1) {
    throw ConfigError("the data has " + std::to_string(num_samples) + " samples, fewer than the " +
                      std::to_string(world_size) + " ranks: use more data or a shorter --seq-len");
  }
  shuffle();
}

void DistributedSampler::shuffle() {
  order_.resize(static_cast<size_t>(num_samples_));
  std::iota(order_.begin(), order_.end(), 0);
  std::mt19937_64 rng(seed_ * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(epoch_));
  for (int64_t i = num_samples_ - 1; i > 0; --i) {
    // rng() % (i + 1) has a negligible bias for these sizes and, unlike
    // std::uniform_int_distribution, is the same on every standard library.
    const auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order_[static_cast<size_t>(i)], order_[static_cast<size_t>(j)]);
  }
}

int64_t DistributedSampler::next() {
  if (position_ >= per_rank_) {
    ++epoch_;
    position_ = 0;
    shuffle();
  }
  const int64_t index = order_[static_cast<size_t>(position_ * world_size_ + rank_)];
  ++position_;
  return index;
}

void DistributedSampler::restore(const nlohmann::json& state) {
  if (!state.contains("epoch") || !state.contains("position")) {
    throw FileError("sampler state needs epoch and position, got " + state.dump());
  }
  epoch_ = state["epoch"].get<int64_t>();
  position_ = state["position"].get<int64_t>();
  shuffle();
}

}  // namespace zero::data
