#include "model/sequence_tiling.h"

#include "core/error.h"
#include "core/parse_number.h"

namespace zero::model {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_requested(int64_t requested, const char* what) {
  if (requested < 0 || requested > kMaxShards) {
    throw ConfigError(std::string(what) + " shards must be auto (" +
                      std::to_string(kAutoShards) + ") or between 1 and " +
                      std::to_string(kMaxShards) + ", got " + std::to_string(requested));
  }
}

}  // namespace

int64_t resolve_mlp_shards(int64_t requested, int64_t seq_len, int64_t hidden) {
  check_requested(requested, "MLP");
  if (requested != kAutoShards) return requested;
  if (seq_len <= hidden || hidden <= 0) return 1;
  return ceil_div(seq_len, hidden);
}

int64_t resolve_logits_shards(int64_t requested, int64_t seq_len, int64_t hidden, int64_t vocab) {
  check_requested(requested, "logits");
  if (requested != kAutoShards) return requested;
  if (hidden <= 0 || vocab <= kLogitsShardFactor * hidden) return 1;
  const int64_t shards = std::min(ceil_div(vocab, kLogitsShardFactor * hidden), seq_len);
  if (shards <= 1) return 1;
  // Lowers the peak only when the logits saved, seq_len * V * (1 - 1/N) per sequence, exceed the
  // [V, C] accumulator counted twice: seq_len * (N - 1) > 2 * C * N.
  return seq_len * (shards - 1) > 2 * hidden * shards ? shards : 1;
}

std::vector<RowShard> split_rows(int64_t rows, int64_t count) {
  if (count < 1 || count > rows) {
    throw ConfigError("cannot split " + std::to_string(rows) + " rows into " +
                      std::to_string(count) + " shards: the count must be between 1 and the rows");
  }
  std::vector<RowShard> shards;
  shards.reserve(static_cast<size_t>(count));
  const int64_t base = rows / count;
  const int64_t extra = rows % count;
  int64_t begin = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t size = base + (i < extra ? 1 : 0);
    shards.push_back({begin, begin + size});
    begin += size;
  }
  return shards;
}

int64_t parse_shards_flag(const std::string& flag, const std::string& value) {
  if (value == "auto") return kAutoShards;
  if (value == "off") return 1;
  const std::optional<int64_t> n = parse_int64(value);
  if (!n || *n < 1 || *n > kMaxShards) {
    throw ConfigError(flag + " takes auto, off or a shard count between 1 and " +
                      std::to_string(kMaxShards) + ", got \"" + value + "\"");
  }
  return *n;
}

std::string describe_shards(int64_t shards) {
  if (shards == kAutoShards) return "auto";
  if (shards == 1) return "off";
  return std::to_string(shards);
}

}  // namespace zero::model
