// The defaults a Hugging Face model folder gives generation: generation_config.json (what
// transformers' generate() reads: do_sample, temperature, top_k, top_p, repetition_penalty,
// max_new_tokens, eos_token_id) and, for the stop tokens, config.json's eos_token_id when the
// former has none. Keys transformers knows but zero.cpp does not use (num_beams, ...) are
// listed so the command can say they are not applied; null values mean "unset", as in HF.
// Every value is type- and range-checked: a bad one is a ConfigError naming the file and key.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace zero::generation {

struct GenerationDefaults {
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_new_tokens;
  std::vector<int64_t> eos_token_ids;
  // Settings that change what HF's generate() does and that zero.cpp does not apply (beam
  // search, length penalties, ...), each with a value other than HF's default.
  std::vector<std::string> not_applied;
};

// `text` is a generation_config.json's content, `source` names it in messages.
GenerationDefaults parse_generation_config(std::string_view text, const std::string& source);

// The eos_token_id of a model config.json's content (an id or a list; none when absent).
// ConfigError naming `source` for a bad value.
std::vector<int64_t> eos_token_ids_of(const nlohmann::json& model_config, const std::string& source);

// DIR/generation_config.json when it exists (else all unset), then DIR/config.json's
// eos_token_id when the former gave none. FileError for unreadable files.
GenerationDefaults read_generation_defaults(const std::string& model_dir);

}  // namespace zero::generation
