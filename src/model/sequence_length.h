// Whether a model can train on sequences of a given length. A model's max_position_embeddings is
// the longest sequence it was trained on; past it:
//  - rotary models (Llama, Mistral, Qwen2) still compute: the rope table is built for any
//    position (model/rope_table.h), though a checkpoint never saw such angles, so going past it
//    is an explicit choice (`zero train --allow-long-sequences true`);
//  - learned-position models (GPT-2) cannot: their wpe table has exactly n_positions rows.
#pragma once
#include <cstdint>
#include <string>

#include "model/transformer_config.h"

namespace zero::model {

// The `zero train` flag that allows sequences past max_position_embeddings on rotary models.
inline constexpr const char* kAllowLongSequencesFlag = "--allow-long-sequences";

// Throws ConfigError naming `seq_len`, the model's limit and the fix when `seq_len` exceeds
// config.max_position_embeddings and either `allow_long` is false (rotary models: pass the
// flag) or the model has a learned position table (which no flag can extend). `who` prefixes
// the message ("zero train").
void check_sequence_length(const TransformerConfig& config, int64_t seq_len, bool allow_long,
                           const std::string& who);

}  // namespace zero::model
