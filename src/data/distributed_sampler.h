// DistributedSampler: a deterministic, rank-disjoint, resumable order over N samples, with the
// semantics of torch's DistributedSampler. Each epoch is a Fisher-Yates shuffle with data/rng.h
// seeded by seed + epoch (as torch seeds with seed + epoch), so every platform and every rank
// computes the same permutation; rank r of W takes positions r, r + W, r + 2W, ... of it.
// drop_last (the default) drops the tail that does not divide by W, so each rank gets N / W
// samples; without it the order is padded by wrapping around to its start (ceil(N / W) each).
// The state {epoch, position} is the same on every rank (they advance in lockstep), so one
// saved copy restores all of them.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace zero::data {

// The largest epoch a restored state may name (2^53: exact in a double, and far from
// overflowing the epoch counter or the seed + epoch of the shuffle).
inline constexpr int64_t kMaxSamplerEpoch = int64_t{1} << 53;

struct SamplerOptions {
  bool shuffle = true;    // false: the order is 0, 1, 2, ... every epoch (e.g. evaluation)
  bool drop_last = true;  // false: pad by wrapping around instead of dropping the tail
};

class DistributedSampler {
 public:
  // Throws ConfigError for world_size < 1, a rank outside [0, world_size), or fewer samples
  // than ranks (drop_last) / no samples at all.
  DistributedSampler(int64_t num_samples, int rank, int world_size, uint64_t seed,
                     SamplerOptions options = {});

  // The next sample index for this rank; starts the next epoch when this one is exhausted.
  int64_t next();
  // The next `micro_batch` indices (they may span an epoch boundary).
  std::vector<int64_t> next_batch(int64_t micro_batch);
  // Drops what is left of this epoch and starts the next (a data loader's drop_last: a batch
  // never mixes two epochs). Does nothing at the start of an epoch.
  void start_next_epoch();

  int64_t epoch() const { return epoch_; }
  int64_t position() const { return position_; }  // indices already taken in this epoch
  int64_t samples_per_rank() const { return per_rank_; }
  int64_t num_samples() const { return num_samples_; }

  // {"epoch", "position"} plus "num_samples", "world_size" and "seed", which restore() checks
  // so a resumed run with different data or a different world size fails loudly instead of
  // silently reading other samples.
  nlohmann::json state() const;
  // Continues exactly where state() was taken. Throws FileError for a malformed state and
  // ConfigError when the recorded data size, world size or seed differ from this sampler's.
  void restore(const nlohmann::json& state);

  // One epoch's order over all ranks, before dropping or padding.
  static std::vector<int64_t> permutation(int64_t num_samples, uint64_t seed, int64_t epoch,
                                          bool shuffle = true);

 private:
  int64_t num_samples_;
  int rank_, world_size_;
  uint64_t seed_;
  SamplerOptions options_;
  int64_t per_rank_;
  int64_t epoch_ = 0, position_ = 0;
  std::vector<int64_t> order_;  // permutation(num_samples_, seed_, epoch_)
};

}  // namespace zero::data
