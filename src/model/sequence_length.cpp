#include "model/sequence_length.h"

#include "core/error.h"

namespace zero::model {

void check_sequence_length(const TransformerConfig& config, int64_t seq_len, bool allow_long,
                           const std::string& who) {
  const int64_t limit = config.max_position_embeddings;
  if (seq_len <= limit) return;
  const std::string asked = who + ": --seq-len " + std::to_string(seq_len);
  if (config.learned_positions) {
    throw ConfigError(asked + " is longer than the model's learned position table (n_positions = " +
                      std::to_string(limit) + " rows); a learned position table cannot extend " +
                      "past its rows, even with " + kAllowLongSequencesFlag +
                      ": use --seq-len " + std::to_string(limit) + " or less, or a rotary model");
  }
  if (!allow_long) {
    throw ConfigError(asked + " is longer than the model's max_position_embeddings (" +
                      std::to_string(limit) + "), the longest sequence it was trained on; pass " +
                      kAllowLongSequencesFlag + " true to train past it (rotary positions are " +
                      "computed for any length), or use --seq-len " + std::to_string(limit) +
                      " or less");
  }
}

}  // namespace zero::model
