// MarkovSource: the built-in synthetic data — a random order-k Markov chain over a small
// vocabulary whose entropy rate is computed exactly (stationary distribution by power iteration,
// then the average next-token entropy). A model that learns the chain reaches that rate, so the
// default `zero train` shows real learning against a known floor, with no download.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zero::data {

class MarkovSource {
 public:
  // vocab_size tokens, `order` previous tokens as context, `support` likely next tokens per
  // context (plus a small floor on every token, which keeps the chain ergodic).
  MarkovSource(int64_t vocab_size, int64_t order, int64_t support, uint64_t seed);

  int64_t vocab_size() const { return vocab_; }
  int64_t order() const { return order_; }
  // Exact entropy rate in nats per token.
  double entropy_rate() const { return entropy_rate_; }
  // P(next | context) for a context index (context = tokens as a base-V number).
  const double* transition(int64_t context) const { return &transitions_[static_cast<size_t>(context * vocab_)]; }

  // `length` tokens of sample `index`: its own RNG stream from (seed, index), starting from a
  // context drawn from the stationary distribution. Deterministic in (seed, index).
  std::vector<int32_t> sample(uint64_t index, int64_t length) const;

 private:
  int64_t vocab_, order_, contexts_;
  uint64_t seed_;
  std::vector<double> transitions_;  // [contexts, vocab]
  std::vector<double> stationary_;   // [contexts]
  double entropy_rate_ = 0.0;
};

}  // namespace zero::data
