// SequenceTiling: how many row shards the tiled units (TiledMlp inside each TransformerBlock, the
// tiled fused logits + loss inside LmHeadUnit) split their B*T rows into, and the rules that
// resolve "auto".
//
// A count is kAutoShards (resolve from the shape, below), or N >= 1 (1 = untiled). A unit clamps N
// to its row count at run time (a shard of zero rows does no work; evaluation batches may be
// shorter than training ones). Every rule reads only the sequence length and the model's widths,
// never the rank, so all ranks of a job agree on the shard counts.
//
// auto, MLP (ALST's rule): ceil(seq_len / hidden). A shard then has about `hidden` rows per
// sequence, so one shard's [rows/N, FFN] intermediates are about as large as one MLP weight
// matrix, and each matmul still has >= hidden rows (it stays efficient). When seq_len <= hidden
// the whole MLP intermediate is already no larger than the weights: auto stays 1 (no recompute).
// ALST's rule was preferred over ceil(FFN / hidden) because the memory it saves grows with the
// sequence, and a rule without the sequence length would tile short sequences for nothing.
//
// auto, logits: one shard's logits [rows/N, V] no larger than kLogitsShardFactor x the hidden
// state [rows, C]: N = ceil(V / (kLogitsShardFactor * C)); 1 when V <= kLogitsShardFactor * C
// (the full logits are already that small). Tiling costs a [V, C] weight-gradient accumulator
// (f32 while activations may be 16-bit, so counted twice) and saves rows * V * (1 - 1/N) logits
// elements: auto is 1 unless seq_len * (1 - 1/N) > 2 * C, i.e. unless it lowers the peak.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::model {

inline constexpr int64_t kAutoShards = 0;
inline constexpr int64_t kLogitsShardFactor = 2;
inline constexpr int64_t kMaxShards = int64_t{1} << 30;

struct SequenceTiling {
  int64_t mlp_shards = 1;     // kAutoShards, or N >= 1 (1: untiled)
  int64_t logits_shards = 1;  // kAutoShards, or N >= 1 (1: untiled)
};

// The shard count for `requested` (kAutoShards or N) by the rules above, not yet clamped to rows.
int64_t resolve_mlp_shards(int64_t requested, int64_t seq_len, int64_t hidden);
int64_t resolve_logits_shards(int64_t requested, int64_t seq_len, int64_t hidden, int64_t vocab);

// A contiguous range [begin, end) of rows.
struct RowShard {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t rows() const { return end - begin; }
};

// `rows` split into `count` contiguous shards whose sizes differ by at most one row (the first
// rows % count shards get the extra row). Throws ConfigError unless 1 <= count <= rows.
std::vector<RowShard> split_rows(int64_t rows, int64_t count);

// Parses a --tiled-* flag value: "auto" -> kAutoShards, "off" -> 1, or an integer N in
// [1, kMaxShards]. Throws ConfigError naming `flag` (e.g. "--tiled-mlp") otherwise.
int64_t parse_shards_flag(const std::string& flag, const std::string& value);

// "auto", "off" or the number, for messages.
std::string describe_shards(int64_t shards);

}  // namespace zero::model
