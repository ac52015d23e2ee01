#include "data/markov_source.h"

#include <cmath>
#include <random>

#include "core/error.h"

namespace zero::data {
namespace {

// splitmix64: a tiny, well-mixed hash so (seed, index) streams are independent and identical on
// every platform (std::mt19937_64 is too, but seeding it from two numbers needs a mix anyway).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform double in [0, 1) from the generator, independent of the standard library's
// distribution implementations (which may differ between platforms).
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int64_t draw(const double* probs, int64_t n, double u) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    acc += probs[i];
    if (u < acc) return i;
  }
  return n - 1;
}

}  // namespace

MarkovSource::MarkovSource(int64_t vocab_size, int64_t order, int64_t support, uint64_t seed)
    : vocab_(vocab_size), order_(order), contexts_(1), seed_(seed) {
  if (vocab_size < 2 || order < 1 || support < 1 || support > vocab_size) {
    throw ConfigError("synthetic source needs vocab >= 2, order >= 1 and 1 <= support <= vocab");
  }
  for (int64_t i = 0; i < order; ++i) contexts_ *= vocab_;
  if (contexts_ > (1 << 22)) throw ConfigError("synthetic source: vocab^order is too large");
  std::mt19937_64 rng(mix(seed));
  transitions_.assign(static_cast<size_t>(contexts_ * vocab_), 0.0);
  const double floor_mass = 0.02;  // spread over all tokens: every transition possible
  for (int64_t c = 0; c < contexts_; ++c) {
    double* row = &transitions_[static_cast<size_t>(c * vocab_)];
    std::vector<double> weights(static_cast<size_t>(support));
    double total = 0.0;
    for (auto& w : weights) total += (w = 0.1 + uniform(rng));
    for (int64_t s = 0; s < support; ++s) {
      const auto token = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab_));
      row[token] += (1.0 - floor_mass) * weights[static_cast<size_t>(s)] / total;
    }
    for (int64_t t = 0; t < vocab_; ++t) row[t] += floor_mass / static_cast<double>(vocab_);
  }
  // Stationary distribution over contexts: context c = (x_1..x_k) moves to (x_2..x_k, y).
  stationary_.assign(static_cast<size_t>(contexts_), 1.0 / static_cast<double>(contexts_));
  std::vector<double> next(static_cast<size_t>(contexts_));
  for (int iteration = 0; iteration < 100000; ++iteration) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int64_t c = 0; c < contexts_; ++c) {
      const int64_t shifted = (c * vocab_) % contexts_;
      const double mass = stationary_[static_cast<size_t>(c)];
      for (int64_t y = 0; y < vocab_; ++y) {
        next[static_cast<size_t>(shifted + y)] += mass * transitions_[static_cast<size_t>(c * vocab_ + y)];
      }
    }
    double change = 0.0;
    for (int64_t c = 0; c < contexts_; ++c) change += std::fabs(next[static_cast<size_t>(c)] - stationary_[static_cast<size_t>(c)]);
    stationary_.swap(next);
    if (change < 1e-14) break;
  }
  entropy_rate_ = 0.0;
  for (int64_t c = 0; c < contexts_; ++c) {
    double h = 0.0;
    for (int64_t y = 0; y < vocab_; ++y) {
      const double p = transitions_[static_cast<size_t>(c * vocab_ + y)];
      if (p > 0) h -= p * std::log(p);
    }
    entropy_rate_ += stationary_[static_cast<size_t>(c)] * h;
  }
}

std::vector<int32_t> MarkovSource::sample(uint64_t index, int64_t length) const {
  std::mt19937_64 rng(mix(seed_ ^ mix(index + 1)));
  std::vector<int32_t> out(static_cast<size_t>(length));
  int64_t context = draw(stationary_.data(), contexts_, uniform(rng));
  for (int64_t i = 0; i < length; ++i) {
    const auto token = draw(transition(context), vocab_, uniform(rng));
    out[static_cast<size_t>(i)] = static_cast<int32_t>(token);
    context = (context * vocab_ + token) % contexts_;
  }
  return out;
}

}  // namespace zero::data
