#include "generation/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/check.h"
#include "core/error.h"

namespace zero::generation {

void validate(const SamplingOptions& o) {
  if (!(o.temperature > 0.0) || !std::isfinite(o.temperature)) {
    throw ConfigError("--temperature must be a finite number above 0 (use --greedy for "
                      "temperature 0), got " + std::to_string(o.temperature));
  }
  if (o.top_k < 0) {
    throw ConfigError("--top-k must be 0 (off) or a positive count, got " +
                      std::to_string(o.top_k));
  }
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) {
    throw ConfigError("--top-p must lie in (0, 1] (1: off), got " + std::to_string(o.top_p));
  }
  if (!(o.repetition_penalty > 0.0) || !std::isfinite(o.repetition_penalty)) {
    throw ConfigError("--repetition-penalty must be a finite number above 0 (1: off), got " +
                      std::to_string(o.repetition_penalty));
  }
}

Sampler::Sampler(const SamplingOptions& options, int64_t sequences) : options_(options) {
  validate(options_);
  ZERO_CHECK(sequences >= 1, "a sampler for " << sequences << " sequences");
  for (int64_t s = 0; s < sequences; ++s) {
    rngs_.emplace_back(data::derive_seed(options_.seed, static_cast<uint64_t>(s)));
  }
}

int64_t Sampler::next(int64_t sequence, std::span<const double> logits,
                      std::span<const int64_t> history) {
  ZERO_CHECK(sequence >= 0 && sequence < static_cast<int64_t>(rngs_.size()),
             "sequence " << sequence << " of a sampler for " << rngs_.size());
  const size_t vocab = logits.size();
  ZERO_CHECK(vocab > 0, "sampling from no logits");
  scores_.assign(logits.begin(), logits.end());
  for (size_t i = 0; i < vocab; ++i) {
    if (std::isnan(scores_[i]) || scores_[i] == std::numeric_limits<double>::infinity()) {
      throw Error("the model's logit for token " + std::to_string(i) + " is " +
                  std::to_string(scores_[i]) + "; the weights or the dtype overflowed (try "
                  "--dtype f32)");
    }
  }
  if (options_.repetition_penalty != 1.0) {
    // HF's RepetitionPenaltyLogitsProcessor: each token present once or more has its logit
    // divided by the penalty when positive, multiplied when negative.
    seen_.assign(vocab, 0);
    for (const int64_t id : history) {
      if (id >= 0 && static_cast<size_t>(id) < vocab) seen_[static_cast<size_t>(id)] = 1;
    }
    for (size_t i = 0; i < vocab; ++i) {
      if (!seen_[i]) continue;
      scores_[i] = scores_[i] > 0 ? scores_[i] / options_.repetition_penalty
                                  : scores_[i] * options_.repetition_penalty;
    }
  }
  // The most likely first; ties to the lower id (torch.argmax's and a stable sort's choice).
  auto more_likely = [&](int64_t a, int64_t b) {
    const double sa = scores_[static_cast<size_t>(a)], sb = scores_[static_cast<size_t>(b)];
    return sa > sb || (sa == sb && a < b);
  };
  if (options_.greedy) {
    int64_t best = 0;
    for (size_t i = 1; i < vocab; ++i) {
      if (more_likely(static_cast<int64_t>(i), best)) best = static_cast<int64_t>(i);
    }
    if (scores_[static_cast<size_t>(best)] == -std::numeric_limits<double>::infinity()) {
      throw Error("every token's logit is -inf: nothing can be generated");
    }
    return best;
  }
  for (double& s : scores_) s /= options_.temperature;
  const bool filtered = (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < vocab) ||
                        options_.top_p < 1.0;
  if (!filtered) return draw_unfiltered(sequence);
  order_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) order_[i] = static_cast<int64_t>(i);
  size_t kept = vocab;
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < vocab) {
    kept = static_cast<size_t>(options_.top_k);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(kept),
                      order_.end(), more_likely);
  } else {
    std::sort(order_.begin(), order_.end(), more_likely);
  }
  const double top = scores_[static_cast<size_t>(order_[0])];
  if (top == -std::numeric_limits<double>::infinity()) {
    throw Error("every token's logit is -inf: nothing can be generated");
  }
  // Softmax weights of the candidates (unnormalised), most likely first.
  std::vector<double>& weight = weights_;
  weight.resize(kept);
  double total = 0.0;
  for (size_t r = 0; r < kept; ++r) {
    weight[r] = std::exp(scores_[static_cast<size_t>(order_[r])] - top);
    total += weight[r];
  }
  if (options_.top_p < 1.0) {
    // HF's TopPLogitsWarper keeps the most likely tokens up to and including the one whose
    // cumulative probability reaches top_p (at least one).
    double mass = 0.0;
    size_t keep = 0;
    while (keep < kept && mass < options_.top_p * total) mass += weight[keep++];
    kept = std::max<size_t>(keep, 1);
    total = 0.0;
    for (size_t r = 0; r < kept; ++r) total += weight[r];
  }
  const double target = rngs_[static_cast<size_t>(sequence)].uniform() * total;
  double running = 0.0;
  for (size_t r = 0; r < kept; ++r) {
    running += weight[r];
    if (target < running) return order_[r];
  }
  return order_[kept - 1];  // rounding left the draw at the very end of the mass
}

int64_t Sampler::draw_unfiltered(int64_t sequence) {
  // Every token keeps its probability, so no order is needed: one pass in vocabulary order
  // rather than sorting the vocabulary (150k ids for Qwen) for every token drawn.
  const size_t vocab = scores_.size();
  double top = -std::numeric_limits<double>::infinity();
  for (const double s : scores_) top = std::max(top, s);
  if (top == -std::numeric_limits<double>::infinity()) {
    throw Error("every token's logit is -inf: nothing can be generated");
  }
  weights_.resize(vocab);
  double total = 0.0;
  for (size_t i = 0; i < vocab; ++i) total += (weights_[i] = std::exp(scores_[i] - top));
  const double target = rngs_[static_cast<size_t>(sequence)].uniform() * total;
  double running = 0.0;
  size_t last_possible = 0;
  for (size_t i = 0; i < vocab; ++i) {
    if (weights_[i] == 0.0) continue;  // -inf (or underflowed): never drawn
    last_possible = i;
    running += weights_[i];
    if (target < running) return static_cast<int64_t>(i);
  }
  return static_cast<int64_t>(last_possible);  // rounding left the draw at the end of the mass
}

}  // namespace zero::generation
