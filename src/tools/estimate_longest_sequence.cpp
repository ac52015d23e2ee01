#include "tools/estimate_longest_sequence.h"

#include <cstdio>

#include "model/sequence_tiling.h"
#include "tools/estimate_format.h"

namespace zero::tools {
namespace {

std::string tiled_name(const sharding::ActivationSettings& s) {
  return "tiled-mlp " + model::describe_shards(s.tiled_mlp_shards) + ", tiled-logits " +
         model::describe_shards(s.tiled_logits_shards);
}

}  // namespace

std::vector<LongestSequenceRow> longest_sequences(const model::TransformerConfig& config,
                                                  const sharding::ActivationSettings& base,
                                                  int64_t state_bytes, int64_t gpu_budget_bytes,
                                                  int64_t max_seq_len) {
  sharding::ActivationSettings plain = base;
  plain.checkpointing = plain.cpu_checkpointing = false;
  plain.tiled_mlp_shards = plain.tiled_logits_shards = 1;
  sharding::ActivationSettings checkpointed = plain;
  checkpointed.checkpointing = true;
  sharding::ActivationSettings tiled = checkpointed;
  tiled.tiled_mlp_shards = base.tiled_mlp_shards == 1 ? model::kAutoShards : base.tiled_mlp_shards;
  tiled.tiled_logits_shards =
      base.tiled_logits_shards == 1 ? model::kAutoShards : base.tiled_logits_shards;
  sharding::ActivationSettings on_host = tiled;
  on_host.cpu_checkpointing = true;

  std::vector<LongestSequenceRow> rows = {
      {"plain", plain, 0, 0, 0},
      {"checkpointing", checkpointed, 0, 0, 0},
      {"checkpointing + " + tiled_name(tiled), tiled, 0, 0, 0},
      {"checkpointing + " + tiled_name(tiled) + " + cpu_checkpointing", on_host, 0, 0, 0}};
  const int64_t granule = base.sequence_parallel;
  for (LongestSequenceRow& row : rows) {
    const auto longest = sharding::longest_fitting_seq_len(config, row.settings, state_bytes,
                                                           gpu_budget_bytes, granule, max_seq_len);
    if (!longest) continue;
    row.longest_seq_len = *longest;
    row.settings.seq_len = *longest;
    const sharding::ActivationMemory m = sharding::estimate_activations(config, row.settings);
    row.peak_bytes = m.peak_bytes;
    row.host_bytes = m.host_bytes;
  }
  return rows;
}

void print_longest_sequences(const std::vector<LongestSequenceRow>& rows,
                             const std::string& budget, const std::string& configuration,
                             int64_t max_seq_len) {
  if (rows.empty()) return;
  const sharding::ActivationSettings& s = rows.front().settings;
  std::printf("\nLongest sequence that fits %s with %s (micro-batch %lld, %lld-byte activations, "
              "sequence parallel %lld):\n",
              budget.c_str(), configuration.c_str(), static_cast<long long>(s.micro_batch),
              static_cast<long long>(s.activation_bytes),
              static_cast<long long>(s.sequence_parallel));
  std::printf("%16s  %14s  %14s  %s\n", "seq len", "activations", "host (ckpt)", "options");
  for (const LongestSequenceRow& row : rows) {
    std::string length = row.longest_seq_len == 0 ? "none" : std::to_string(row.longest_seq_len);
    if (row.longest_seq_len >= max_seq_len) length += " (limit)";
    std::printf("%16s  %14s  %14s  %s\n", length.c_str(),
                row.longest_seq_len == 0 ? "-" : gib(row.peak_bytes).c_str(),
                row.host_bytes > 0 ? gib(row.host_bytes).c_str() : "-", row.options.c_str());
  }
  std::printf("(limit: the search stops at %lld tokens; activations: the device peak of one "
              "micro-batch)\n", static_cast<long long>(max_seq_len));
}

nlohmann::json longest_sequences_json(const std::vector<LongestSequenceRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const LongestSequenceRow& row : rows) {
    out.push_back({{"options", row.options},
                   {"checkpointing", row.settings.checkpointing},
                   {"tiled_mlp", model::describe_shards(row.settings.tiled_mlp_shards)},
                   {"tiled_logits", model::describe_shards(row.settings.tiled_logits_shards)},
                   {"cpu_checkpointing", row.settings.cpu_checkpointing},
                   {"longest_seq_len", row.longest_seq_len},
                   {"activation_bytes", row.peak_bytes},
                   {"host_bytes", row.host_bytes}});
  }
  return out;
}

}  // namespace zero::tools
