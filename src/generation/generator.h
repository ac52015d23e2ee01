// Generator: text generation with a key/value cache (model/kv_cache.h). The prompt runs once
// through the model (prefill), then each new token runs alone at the next position (decode),
// attending over the cached keys and values; each step reads the last position's logits from
// the device once and the Sampler picks the next token on the host.
//
// Several sequences continue one prompt side by side (num_sequences: HF's
// num_return_sequences), each with its own random stream; the prompt runs once, for one
// sequence, and its keys and values are copied to every sequence's cache (KvCache::replicate).
// A sequence ends at a stop token (the model's eos) or after max_new_tokens. Ownership: the
// model and its backend outlive the Generator. One thread drives it.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "generation/sampler.h"
#include "model/model.h"

namespace zero::generation {

struct GenerationOptions {
  int64_t max_new_tokens = 64;          // >= 1
  int64_t num_sequences = 1;            // continuations of the prompt, >= 1
  SamplingOptions sampling;
  std::vector<int64_t> stop_token_ids;  // a sequence ends after producing one of these
  // Rotary models may run past config max_position_embeddings (quality is the user's risk, as
  // with --allow-long-sequences in training); learned position tables never can.
  bool allow_long_sequences = false;
};

struct GeneratedSequence {
  std::vector<int64_t> tokens;  // the new tokens, a final stop token included
  bool stopped = false;         // ended at a stop token (else at max_new_tokens)
};

struct GenerationStats {
  int64_t prompt_tokens = 0;     // per sequence
  int64_t generated_tokens = 0;  // over all sequences, stop tokens included
  int64_t decode_steps = 0;      // model runs after the prompt's
  double prefill_seconds = 0.0;  // the prompt's run and its first tokens
  double decode_seconds = 0.0;
  int64_t cache_bytes = 0;
};

class Generator {
 public:
  explicit Generator(model::Model& model);

  // Continues `prompt` (token ids, at least one) num_sequences times. on_token(sequence, id), when
  // given, is called for every new token as soon as it is picked (streaming output). Throws
  // ConfigError for bad options, a prompt + max_new_tokens past the model's positions or a cache
  // that does not fit in memory,
  // ShapeError for an id outside the vocabulary.
  std::vector<GeneratedSequence> generate(
      const std::vector<int64_t>& prompt, const GenerationOptions& options,
      const std::function<void(int64_t, int64_t)>& on_token = {});

  const GenerationStats& stats() const { return stats_; }

 private:
  // The positions a run needs: every prompt token and each new token but the last is fed in.
  int64_t checked_capacity(int64_t prompt_tokens, const GenerationOptions& options) const;
  // ConfigError before allocating when the cache does not fit beside what the backend holds
  // (the device's memory, or the host's on the CPU).
  void check_cache_fits(int64_t cache_bytes, const GenerationOptions& options) const;

  model::Model& model_;
  GenerationStats stats_;
};

}  // namespace zero::generation
