// DistributedSampler: per-epoch permutation, rank striding, and the resumable state.
#include "data/distributed_sampler.h"

#include <limits>
#include <numeric>
#include <string>

#include "core/error.h"
#include "data/rng.h"

namespace zero::data {
namespace {

// The state for a message, cut short: a damaged state may be large.
std::string shown(const nlohmann::json& state) {
  std::string text = state.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 120 ? text.substr(0, 120) + "..." : text;
}

// A non-negative integer field of at most `max`; unsigned values past int64 and floats (which is
// how the JSON parser stores 2^64) are refused, not converted.
int64_t state_int(const nlohmann::json& state, const char* key,
                  int64_t max = std::numeric_limits<int64_t>::max()) {
  const nlohmann::json* value = state.is_object() && state.contains(key) ? &state[key] : nullptr;
  const bool ok = value != nullptr && value->is_number_integer() &&
                  (value->is_number_unsigned()
                       ? value->get<uint64_t>() <= static_cast<uint64_t>(max)
                       : value->get<int64_t>() >= 0 && value->get<int64_t>() <= max);
  if (!ok) {
    throw FileError(std::string("the data sampler state in the checkpoint needs an integer \"") +
                    key + "\" from 0 to " + std::to_string(max) + ", got " + shown(state) +
                    "; the checkpoint's client state is corrupt");
  }
  return value->get<int64_t>();
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t num_samples, int rank, int world_size, uint64_t seed,
                                       SamplerOptions options)
    : num_samples_(num_samples),
      rank_(rank),
      world_size_(world_size),
      seed_(seed),
      options_(options),
      per_rank_(0) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw ConfigError("data sampler: rank " + std::to_string(rank) + " is not in a world of " +
                      std::to_string(world_size) + " ranks (need 0 <= rank < world_size)");
  }
  if (num_samples < 1) {
    throw ConfigError(
        "data sampler: the data has no samples; give more data or a shorter --seq-len");
  }
  per_rank_ =
      options.drop_last ? num_samples / world_size : (num_samples + world_size - 1) / world_size;
  if (per_rank_ < 1) {
    throw ConfigError("the data has " + std::to_string(num_samples) + " samples, fewer than the " +
                      std::to_string(world_size) + " ranks: use more data or a shorter --seq-len");
  }
  order_ = permutation(num_samples_, seed_, epoch_, options_.shuffle);
}

std::vector<int64_t> DistributedSampler::permutation(int64_t num_samples, uint64_t seed,
                                                     int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(num_samples));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  Rng rng(seed + static_cast<uint64_t>(epoch));
  for (int64_t i = num_samples - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

void DistributedSampler::start_next_epoch() {
  if (position_ == 0) return;
  ++epoch_;
  position_ = 0;
  order_ = permutation(num_samples_, seed_, epoch_, options_.shuffle);
}

int64_t DistributedSampler::next() {
  if (position_ >= per_rank_) start_next_epoch();
  // Positions past the end exist only when padding; they wrap to the start of the order.
  const int64_t slot = (position_ * world_size_ + rank_) % num_samples_;
  ++position_;
  return order_[static_cast<size_t>(slot)];
}

std::vector<int64_t> DistributedSampler::next_batch(int64_t micro_batch) {
  if (micro_batch < 1) {
    throw ConfigError("data sampler: the micro batch must be >= 1, got " +
                      std::to_string(micro_batch));
  }
  std::vector<int64_t> batch(static_cast<size_t>(micro_batch));
  for (auto& index : batch) index = next();
  return batch;
}

nlohmann::json DistributedSampler::state() const {
  return {{"epoch", epoch_},
          {"position", position_},
          {"num_samples", num_samples_},
          {"world_size", world_size_},
          {"seed", seed_}};
}

void DistributedSampler::restore(const nlohmann::json& state) {
  const int64_t epoch = state_int(state, "epoch", kMaxSamplerEpoch);
  const int64_t position = state_int(state, "position");
  // The identity fields are optional (older states lack them) but must match when present;
  // they are checked first because a mismatch there explains any other inconsistency.
  const auto check = [&](const char* key, int64_t ours, const char* fix) {
    if (!state.contains(key)) return;
    const int64_t theirs = state_int(state, key);
    if (theirs != ours) {
      throw ConfigError(
          std::string("cannot resume the data order: the checkpoint was taken with ") + key + " " +
          std::to_string(theirs) + ", this run has " + std::to_string(ours) + "; " + fix);
    }
  };
  check("num_samples", num_samples_,
        "use the same data files and --seq-len as the saved run (or start a fresh run)");
  check("world_size", world_size_, "resume with the same number of ranks");
  if (state.contains("seed")) {
    if (!state["seed"].is_number_unsigned() &&
        !(state["seed"].is_number_integer() && state["seed"].get<int64_t>() >= 0)) {
      throw FileError("the data sampler state in the checkpoint has a seed that is not a "
                      "non-negative integer: " + shown(state));
    }
    const auto theirs = state["seed"].get<uint64_t>();
    if (theirs != seed_) {
      throw ConfigError("cannot resume the data order: the checkpoint was taken with seed " +
                        std::to_string(theirs) + ", this run has seed " + std::to_string(seed_) +
                        "; resume with the same seed");
    }
  }
  if (position > per_rank_) {
    throw FileError("the data sampler state in the checkpoint is at position " +
                    std::to_string(position) + " of an epoch, but an epoch has only " +
                    std::to_string(per_rank_) + " samples per rank; the data changed since");
  }
  if (epoch != epoch_) order_ = permutation(num_samples_, seed_, epoch, options_.shuffle);
  epoch_ = epoch;
  position_ = position;
}

}  // namespace zero::data
