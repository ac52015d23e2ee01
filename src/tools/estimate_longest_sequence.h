// `zero estimate --model X --gpu-memory G` without --seq-len: the longest sequence that fits one
// GPU, for each set of long-sequence options (plain, activation checkpointing, + TiledMLP and
// tiled logits, + cpu_checkpointing), by a search on the activation estimate
// (sharding::longest_fitting_seq_len) on top of the model states of a chosen ZeRO configuration.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/transformer_config.h"
#include "sharding/activation_estimator.h"

namespace zero::tools {

struct LongestSequenceRow {
  std::string options;          // "plain", "checkpointing", ...
  sharding::ActivationSettings settings;  // seq_len: the answer (0 when nothing fits)
  int64_t longest_seq_len = 0;  // 0: not even the granule fits
  int64_t peak_bytes = 0;       // device activations at that length
  int64_t host_bytes = 0;       // host memory of cpu_checkpointing's saved inputs
};

// `base`: micro-batch, activation width, attention, Ulysses size and the tiled shard counts to use
// in the tiled rows (kAutoShards when the user gave none). `state_bytes`: model states per GPU.
// Granule: the sequence-parallel size (the sequence must divide by it); at most `max_seq_len`.
std::vector<LongestSequenceRow> longest_sequences(const model::TransformerConfig& config,
                                                  const sharding::ActivationSettings& base,
                                                  int64_t state_bytes, int64_t gpu_budget_bytes,
                                                  int64_t max_seq_len);

// Prints the rows as a table under a heading naming the budget and the configuration.
void print_longest_sequences(const std::vector<LongestSequenceRow>& rows,
                             const std::string& budget, const std::string& configuration,
                             int64_t max_seq_len);
nlohmann::json longest_sequences_json(const std::vector<LongestSequenceRow>& rows);

}  // namespace zero::tools
