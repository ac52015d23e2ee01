// `zero estimate`'s flag values: counts like 176B, GiB budgets, bounded positive integers,
// offload devices, booleans and the model. Each throws ConfigError naming the flag and the
// value it got.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "model/transformer_config.h"
#include "sharding/memory_estimator.h"
#include "tools/arg_parser.h"

namespace zero::tools {

// Stated limits for counts of hardware and batch shapes: products of them and of model sizes
// stay far inside int64 in the estimator.
inline constexpr int64_t kMaxGpusPerNode = 1 << 10;
inline constexpr int64_t kMaxNodes = 1 << 20;
inline constexpr int64_t kMaxMicroBatch = 1 << 16;
inline constexpr int64_t kMaxEstimateSeqLen = 1 << 24;
// GiB of memory: positive, finite, and at most kMaxGiB so the byte count fits an int64.
inline constexpr double kMaxGiB = 1 << 30;  // 1 EiB

// A count such as 176e9, 176B, 3.6B, 350M, 7K or 1.5T (B is a billion, as model names use it).
// The number is parsed strictly (the whole text, finite) and must stay below 9e18 after scaling.
int64_t parse_count(const std::string& flag, const std::string& text);

// GiB, positive and at most kMaxGiB.
double parse_gib(const std::string& flag, const std::string& text);

// --flag's integer value, from 1 to `max`.
int64_t positive_int(const ArgParser& parser, const std::string& flag, int64_t max);

// none, cpu or nvme; nullopt when the flag was not given.
std::optional<sharding::OffloadDevice> parse_device(const ArgParser& parser,
                                                    const std::string& flag);

// on/off or anything parse_bool takes.
bool parse_flag_bool(const std::string& flag, const std::string& text);

// --model: a Hugging Face model folder (its config.json) or a preset name.
model::TransformerConfig load_model(const std::string& name);

}  // namespace zero::tools
