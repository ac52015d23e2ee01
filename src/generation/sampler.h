// Sampler: picks the next token from one sequence's logits, the way Hugging Face's generate()
// does with the same settings - the repetition penalty, then temperature, top-k and top-p
// (nucleus) filtering, then a draw from the softmax of what is left; or the argmax (greedy, HF's
// do_sample=False). Every step of the arithmetic is in double on the host: the logits of one
// position are V numbers, read from the device once per step.
//
// Randomness: sequence s of a run draws from its own generator seeded with (seed, s), so its
// tokens do not depend on how many other sequences run beside it. Thread safety: one thread.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "data/rng.h"

namespace zero::generation {

struct SamplingOptions {
  bool greedy = true;                // argmax; the settings below except the penalty are unused
  double temperature = 1.0;          // > 0; logits are divided by it
  int64_t top_k = 0;                 // keep the k most likely tokens (0: all)
  double top_p = 1.0;                // keep the fewest most likely tokens whose mass >= top_p
  double repetition_penalty = 1.0;   // > 0; HF's: tokens already present are made less likely
  uint64_t seed = 0;
};

// Throws ConfigError naming the setting (as its command-line flag) and its range.
void validate(const SamplingOptions& options);

class Sampler {
 public:
  // `sequences` independent random streams (see above). Validates the options.
  Sampler(const SamplingOptions& options, int64_t sequences);

  // The next token of sequence `sequence`, from its logits (V values; -inf excludes a token) and
  // the ids it holds so far (prompt and generated, for the repetition penalty). Throws
  // zero::Error when a logit is NaN or +inf, or when every token is excluded.
  int64_t next(int64_t sequence, std::span<const double> logits,
               std::span<const int64_t> history);

 private:
  // Without top-k or top-p: a draw from every token's tempered softmax in vocabulary order.
  int64_t draw_unfiltered(int64_t sequence);

  SamplingOptions options_;
  std::vector<data::Rng> rngs_;
  std::vector<double> scores_;     // the penalised, tempered logits
  std::vector<int64_t> order_;     // candidate token ids, most likely first
  std::vector<double> weights_;    // unnormalised softmax weights of the candidates
  std::vector<uint8_t> seen_;      // per token: present in the history (the penalty)
};

}  // namespace zero::generation
