#include "generation/generator.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/check.h"
#include "core/error.h"
#include "core/host_convert.h"
#include "core/host_memory.h"
#include "model/kv_cache.h"

namespace zero::generation {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The logits [B, V] on the device, read once, as doubles on the host.
Tensor host_logits(backend::Backend& backend, const Tensor& logits) {
  Tensor raw = Tensor::zeros_host(logits.shape(), logits.dtype());
  backend.copy_to_host(raw.raw_data(), logits);
  return converted_host(raw, DType::kF64);
}

}  // namespace

Generator::Generator(model::Model& model) : model_(model) {
  ZERO_CHECK(model_.config().has_value(), "generation needs a model built from a transformer "
                                          "config");
}

int64_t Generator::checked_capacity(int64_t prompt_tokens, const GenerationOptions& options) const {
  const model::TransformerConfig& config = *model_.config();
  if (options.max_new_tokens < 1) {
    throw ConfigError("--max-new-tokens must be at least 1, got " +
                      std::to_string(options.max_new_tokens));
  }
  if (options.num_sequences < 1) {
    throw ConfigError("--num-sequences must be at least 1, got " +
                      std::to_string(options.num_sequences));
  }
  if (options.max_new_tokens > config.max_position_embeddings * int64_t{64} + 1) {
    // Far past any position table: a typo, refused before the sum below can overflow.
    throw ConfigError("--max-new-tokens " + std::to_string(options.max_new_tokens) +
                      " is far past the model's " + std::to_string(config.max_position_embeddings) +
                      " positions");
  }
  const int64_t capacity = prompt_tokens + options.max_new_tokens - 1;
  const bool may_extend = !config.learned_positions && options.allow_long_sequences;
  if (capacity > config.max_position_embeddings && !may_extend) {
    throw ConfigError(
        "the prompt's " + std::to_string(prompt_tokens) + " tokens and --max-new-tokens " +
        std::to_string(options.max_new_tokens) + " need " + std::to_string(capacity) +
        " positions, past the model's " + std::to_string(config.max_position_embeddings) +
        " (max_position_embeddings); lower --max-new-tokens or shorten the prompt" +
        (config.learned_positions ? std::string()
                                  : std::string(", or pass --allow-long-sequences true")));
  }
  return capacity;
}

void Generator::check_cache_fits(int64_t cache_bytes, const GenerationOptions& options) const {
  backend::Backend& backend = model_.backend();
  const std::optional<int64_t> device = backend.device_memory_capacity_bytes();
  const HostMemory host = host_memory();
  const int64_t capacity = device.value_or(host.usable_bytes());
  const auto in_use = static_cast<int64_t>(backend.allocator().stats().total_live_bytes);
  if (cache_bytes > capacity - in_use) {
    throw ConfigError(
        "the key/value cache for " + std::to_string(options.num_sequences) + " sequence(s) of " +
        "prompt + " + std::to_string(options.max_new_tokens) + " new tokens needs " +
        format_gib(cache_bytes) + ", and " + format_gib(in_use) + " of " +
        (device ? format_gib(*device) + " on " + backend.device().to_string()
                : host.describe()) +
        " are in use; lower --max-new-tokens or --num-sequences, or use --dtype bf16");
  }
}

std::vector<GeneratedSequence> Generator::generate(
    const std::vector<int64_t>& prompt, const GenerationOptions& options,
    const std::function<void(int64_t, int64_t)>& on_token) {
  if (prompt.empty()) throw ConfigError("the prompt holds no tokens; give at least one");
  const model::TransformerConfig& config = *model_.config();
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= config.vocab_size) {
      throw ShapeError("prompt token " + std::to_string(i) + " is id " +
                       std::to_string(prompt[i]) + ", outside the model's vocabulary of " +
                       std::to_string(config.vocab_size));
    }
  }
  const auto prompt_tokens = static_cast<int64_t>(prompt.size());
  const int64_t capacity = checked_capacity(prompt_tokens, options);
  const int64_t batch = options.num_sequences;
  backend::Backend& backend = model_.backend();
  const DType dtype = model_.activation_dtype().value_or(model_.param_dtype());
  stats_ = GenerationStats{};
  stats_.prompt_tokens = prompt_tokens;
  stats_.cache_bytes = model::KvCache::bytes_for(config, batch, capacity, dtype);
  if (batch > 1) {
    // The prompt's own cache of one sequence: the prompt runs once, not once per sequence.
    stats_.cache_bytes += model::KvCache::bytes_for(config, 1, prompt_tokens, dtype);
  }
  check_cache_fits(stats_.cache_bytes, options);
  Sampler sampler(options.sampling, batch);
  model::KvCache cache(backend, config, batch, capacity, dtype);

  std::vector<GeneratedSequence> out(static_cast<size_t>(batch));
  std::vector<std::vector<int64_t>> history(static_cast<size_t>(batch), prompt);
  auto is_stop = [&](int64_t id) {
    return std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), id) !=
           options.stop_token_ids.end();
  };

  // Step input: the prompt (once), then each sequence's last token.
  Tensor tokens = Tensor::zeros_host({1, prompt_tokens}, DType::kI64);
  std::copy(prompt.begin(), prompt.end(), tokens.data<int64_t>());
  auto start = Clock::now();
  int64_t active = batch;
  for (int64_t step = 0; step < options.max_new_tokens && active > 0; ++step) {
    Tensor logits;
    if (step == 0 && batch > 1) {
      // Every sequence continues the same prompt: run it for one and copy its keys and values
      // to all; each sequence samples its first token from that one row of logits.
      model::KvCache prompt_cache(backend, config, 1, prompt_tokens, dtype);
      logits = host_logits(backend, model_.next_token_logits(tokens, prompt_cache));
      prompt_cache.advance(prompt_tokens);
      cache.replicate(backend, prompt_cache);
    } else {
      logits = host_logits(backend, model_.next_token_logits(tokens, cache));
      cache.advance(tokens.size(1));
    }
    const int64_t vocab = logits.size(1);
    // Row b of the logits (row 0 for every sequence after a shared prompt).
    auto row_of = [&](int64_t b) {
      return logits.data<double>() + (logits.size(0) > 1 ? b : 0) * vocab;
    };
    Tensor next = Tensor::zeros_host({batch, 1}, DType::kI64);
    for (int64_t b = 0; b < batch; ++b) {
      GeneratedSequence& sequence = out[static_cast<size_t>(b)];
      std::vector<int64_t>& seen = history[static_cast<size_t>(b)];
      if (!sequence.stopped) {
        const int64_t id =
            sampler.next(b, std::span<const double>(row_of(b), static_cast<size_t>(vocab)), seen);
        sequence.tokens.push_back(id);
        seen.push_back(id);
        ++stats_.generated_tokens;
        if (on_token) on_token(b, id);
        if (is_stop(id)) {
          sequence.stopped = true;
          --active;
        }
      }
      // A finished sequence keeps feeding its last token: the batch stays rectangular and
      // nothing it computes is read.
      next.data<int64_t>()[b] = seen.back();
    }
    tokens = next;
    if (step == 0) {
      stats_.prefill_seconds = seconds_since(start);
      start = Clock::now();
    } else {
      ++stats_.decode_steps;
    }
  }
  stats_.decode_seconds = seconds_since(start);
  return out;
}

}  // namespace zero::generation
