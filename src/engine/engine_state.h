// EngineState: the contents of a checkpoint's DIR/<tag>/engine_state.json, read once and
// validated field by field — type, range, and consistency between fields and with the tensor
// files beside it — before anything acts on it. Engine::load_checkpoint, `zero convert` and
// `zero inspect` all read checkpoints through read_engine_state, so a damaged or hand-edited file
// is one FileError naming the file, the field, the value and what to do, never a library
// exception, a wrapped counter or a crash.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "model/transformer_config.h"

namespace zero::engine {

inline constexpr const char* kCheckpointFormat = "zero.cpp checkpoint";
inline constexpr int kCheckpointFormatVersion = 1;

// The largest value a training counter may hold: steps, samples, micro-steps, scheduler and loss
// scaler iterations, data positions, and `zero train --steps`. 2^53 is far beyond any run (10^15
// steps), every counter up to it is exact as a double (logs, schedules and JSON readers see it as
// one), and the headroom to 2^63 means counting one more step or batch can never overflow.
inline constexpr int64_t kMaxTrainingCounter = int64_t{1} << 53;
// World sizes a checkpoint may record (each rank has a shard file).
inline constexpr int64_t kMaxCheckpointWorldSize = int64_t{1} << 20;
// Elements one parameter tensor may have (2^48 f32 values is 1 PiB: no real tensor is close),
// and dimensions per tensor.
inline constexpr int64_t kMaxParameterElements = int64_t{1} << 48;
inline constexpr size_t kMaxParameterRank = 8;

// One entry of the parameter manifest: the model's identity for compatibility checks.
struct ManifestEntry {
  std::string name;
  Shape shape;
  int64_t numel = 0;  // product of `shape`, overflow-checked and <= kMaxParameterElements
};

// The fp16 dynamic loss scaler's state (optim::LossScaler::state_json).
struct LossScalerState {
  double scale = 1.0;
  int64_t hysteresis = 0;
  int64_t iteration = 0;
  int64_t last_overflow_iteration = -1;
  nlohmann::json to_json() const;
};

struct EngineState {
  std::string source;  // the file it was read from (or the name given to parse_engine_state)
  std::string tag;
  int64_t global_steps = 0;
  int64_t global_samples = 0;
  int64_t skipped_steps = 0;
  int64_t micro_steps = 0;
  int world_size = 1;
  int zero_stage = 0;
  std::vector<std::string> shard_files;  // stages 1-3: zero_shard_<r>_of_<world_size>, r in order
  std::string optimizer_type;
  int64_t optimizer_step_count = 0;
  nlohmann::json optimizer_hyper = nlohmann::json::object();
  std::vector<std::string> optimizer_state_names;
  int64_t scheduler_last_batch_iteration = -1;
  std::optional<LossScalerState> loss_scaler;
  std::vector<ManifestEntry> parameters;
  std::unordered_map<std::string, size_t> parameter_index;  // name -> position in `parameters`
  std::optional<model::TransformerConfig> model_config;  // validated as the model reader does
  nlohmann::json deepspeed_config = nlohmann::json::object();
  nlohmann::json client_state = nlohmann::json::object();

  // The manifest entry named `name`, or null.
  const ManifestEntry* find_parameter(const std::string& name) const;
  bool has_state_name(const std::string& state_name) const;
  // The tensor files the layout implies: model.safetensors and optimizer.safetensors at stage 0,
  // the shard files at stages 1-3.
  std::vector<std::string> tensor_files() const;
};

// Parses and validates the text of an engine_state.json (no file access: the fuzz harness calls
// this). `source` names the file in messages. Throws FileError naming the field for a bad one
// (ConfigError from the model config reader for a bad model_config, naming it too). Nesting is
// limited while parsing, so a deeply nested client_state is an error, not a stack overflow.
EngineState parse_engine_state(std::string_view text, const std::string& source);

// Reads `tag_dir`/engine_state.json (a regular file of at most io::kMaxCheckpointStateBytes),
// parses it with parse_engine_state, and checks that the tensor files it implies are regular
// files in `tag_dir`. Throws FileError naming the path.
EngineState read_engine_state(const std::string& tag_dir);

// Throws FileError unless `state`'s manifest equals `expected` (same names and shapes in the same
// order), naming the first difference; `what` says what `expected` is ("the model being
// trained").
void require_same_manifest(const EngineState& state, const std::vector<ManifestEntry>& expected,
                           const std::string& what);

}  // namespace zero::engine
