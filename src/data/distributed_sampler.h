// DistributedSampler: a deterministic, rank-disjoint, resumable order over N samples. Each epoch
// is a Fisher-Yates shuffle seeded by (seed, epoch) with a fixed generator, so every platform
// and every rank sees the same permutation; rank r takes positions r, r + W, r + 2W, ...
// (dropping the tail that does not divide evenly, as torch's drop_last does).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace zero::data {

class DistributedSampler {
 public:
  DistributedSampler(int64_t num_samples, int rank, int world_size, uint64_t seed);

  // The next sample index for this rank; moves to the next epoch when one is exhausted.
  int64_t next();
  int64_t epoch() const { return epoch_; }
  int64_t samples_per_rank() const { return per_rank_; }
  nlohmann::json state() const { return {{"epoch", epoch_}, {"position", position_}}; }
  void restore(const nlohmann::json& state);

 private:
  void shuffle();

  int64_t num_samples_, per_rank_;
  int rank_, world_size_;
  uint64_t seed_;
  int64_t epoch_ = 0, position_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace zero::data
