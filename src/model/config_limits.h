// Limits on the sizes a model config may give (HF config.json, presets, checkpoint metadata).
// The sizes come from files, so each is checked against a stated bound before anything
// multiplies it: the bounds are far above every released model and far below where products of
// sizes overflow int64, so a typo or a corrupt file is refused at once with the key to fix
// instead of overflowing (undefined behaviour) or spinning on 2^40 layers.
#pragma once
#include <cstdint>
#include <string>

#include "model/transformer_config.h"

namespace zero::model {

struct SizeLimit {
  int64_t max;
  const char* reason;  // why the bound is what it is, quoted in the error
};

inline constexpr SizeLimit kVocabSizeLimit{2147483647, "token ids are stored as 32-bit integers"};
inline constexpr SizeLimit kHiddenSizeLimit{int64_t{1} << 20,
                                            "the widest released models use about 2^14"};
inline constexpr SizeLimit kLayersLimit{10000,
                                        "the deepest released models have a few hundred layers"};
inline constexpr SizeLimit kHeadDimLimit{int64_t{1} << 14, "released models use 64 to 256"};
inline constexpr SizeLimit kIntermediateSizeLimit{int64_t{1} << 24,
                                                  "released models use under 2^16"};
inline constexpr SizeLimit kPositionsLimit{int64_t{1} << 24,
                                           "the longest released contexts are about 10M tokens"};
inline constexpr SizeLimit kSlidingWindowLimit{2147483647,
                                               "windows are compared with 32-bit positions"};
inline constexpr SizeLimit kExpertsLimit{4096, "released models use up to a few hundred experts"};
// Heads are bounded by the hidden size (at least one channel each); key-value heads by heads.

// The config.json keys that hold each size, by family (GPT-2 names them differently).
struct ConfigKeys {
  const char* vocab_size;
  const char* hidden_size;
  const char* num_layers;
  const char* num_heads;
  const char* num_kv_heads;
  const char* head_dim;
  const char* intermediate_size;
  const char* max_position_embeddings;
};
ConfigKeys config_keys(ModelFamily family);

// "<source>: key 'KEY' = VALUE is out of range: it must be from 1 to MAX (REASON); correct it".
[[noreturn]] void throw_out_of_range(const std::string& source, const std::string& key,
                                     const std::string& value, int64_t max,
                                     const std::string& reason);

// Throws ConfigError naming `source` and the family's key when a size of `config` is out of its
// range, or when a product of sizes (q/kv widths, the parameter count) overflows int64.
void check_config_sizes(const TransformerConfig& config, const std::string& source);

// Parameters of `config` (a tied embedding counted once), every product and sum
// overflow-checked; ConfigError naming `source` when the count does not fit int64.
int64_t checked_parameter_count(const TransformerConfig& config, const std::string& source);

}  // namespace zero::model
