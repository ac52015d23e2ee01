// Reading a DeepSpeed JSON config into EngineSettings: lenient JSON (// and /* */ comments,
// trailing commas), DeepSpeed's batch-size inference, "auto" values resolved from the command
// line as the Hugging Face integration resolves them, an error naming the closest known key for
// an unknown one, and an UnsupportedError for a known feature that is enabled but not built yet.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine_settings.h"

namespace zero::engine {

// Values "auto" keys resolve to (from command-line flags), as the HF Trainer does.
struct AutoValues {
  std::optional<int64_t> micro_batch_size;
  std::optional<int64_t> gradient_accumulation_steps;
  std::optional<int64_t> total_steps;
  std::optional<int64_t> warmup_steps;
  std::optional<double> learning_rate;
  std::optional<double> weight_decay;
  std::optional<double> max_grad_norm;
};

// Removes comments and trailing commas outside strings; throws ConfigError on a bad comment.
std::string strip_json_extensions(const std::string& text, const std::string& source);

EngineSettings settings_from_deepspeed_json(const nlohmann::json& config, int world_size,
                                            const AutoValues& autos, const std::string& source);
EngineSettings settings_from_deepspeed_file(const std::string& path, int world_size,
                                            const AutoValues& autos);

// The batch-size arithmetic alone: fills the missing ones of (train, micro, gas) for world size
// W, exactly as DeepSpeed does; throws ConfigError showing the numbers when inconsistent.
void infer_batch_sizes(std::optional<int64_t> train, std::optional<int64_t> micro,
                       std::optional<int64_t> gas, int world_size, EngineSettings& out,
                       const std::string& source);

}  // namespace zero::engine
