#include "engine/engine_state.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/checked_math.h"
#include "core/error.h"
#include "engine/checkpoint_dir.h"
#include "engine/checkpoint_tensors.h"
#include "io/bounded_json.h"
#include "io/input_file.h"

namespace zero::engine {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFix =
    "the checkpoint is damaged or was edited by hand; use another checkpoint, or restore this one "
    "from a copy";
constexpr size_t kMaxShownChars = 80;
constexpr size_t kMaxStateNames = 16;

// A value for a message: its JSON text, cut short (a field may hold megabytes).
std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxShownChars) text = text.substr(0, kMaxShownChars) + "...";
  return text;
}

std::string range_text(int64_t lo, int64_t hi) {
  std::string text = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (hi == kMaxTrainingCounter) text += " (2^53)";
  return text;
}

// The value of an integer JSON number that fits int64; nothing for anything else (floats such as
// 2^64, which the JSON parser stores as a double, strings, unsigned values above 2^63 - 1).
std::optional<int64_t> as_int64(const json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

// Typed reads of one JSON object of the state; every failure names the file and the field's
// full path ("optimizer.step_count").
class Fields {
 public:
  Fields(const json& object, const std::string& source, std::string prefix,
         std::initializer_list<const char*> known)
      : object_(object), source_(source), prefix_(std::move(prefix)) {
    for (const auto& item : object_.items()) {
      const std::string& key = item.key();
      const bool is_known = std::any_of(known.begin(), known.end(),
                                        [&](const char* k) { return key == k; });
      if (!is_known) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        fail_path(prefix_ + (key.size() > kMaxShownChars ? key.substr(0, kMaxShownChars) + "..." : key),
                  "is not a field of a zero.cpp checkpoint (known here: " + list + ")");
      }
    }
  }

  std::string path(const std::string& key) const { return prefix_ + key; }
  bool has(const char* key) const { return object_.contains(key); }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    fail_path(path(key), problem);
  }
  [[noreturn]] void fail_path(const std::string& field, const std::string& problem) const {
    throw FileError(source_ + ": field \"" + field + "\" " + problem + "; " + kFix);
  }

  const json& at(const char* key) const {
    if (!has(key)) fail(key, "is missing");
    return object_.at(key);
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const json& value = at(key);
    const std::optional<int64_t> number = as_int64(value);
    if (!number || *number < lo || *number > hi) {
      fail(key, "must be " + range_text(lo, hi) + ", got " + shown(value));
    }
    return *number;
  }
  double positive_finite(const char* key) const {
    const json& value = at(key);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0) {
      fail(key, "must be a finite number > 0, got " + shown(value));
    }
    return value.get<double>();
  }
  std::string string(const char* key) const {
    const json& value = at(key);
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
      fail(key, "must be a non-empty string, got " + shown(value));
    }
    return value.get<std::string>();
  }
  const json& object(const char* key) const {
    const json& value = at(key);
    if (!value.is_object()) fail(key, "must be a JSON object, got " + shown(value));
    return value;
  }
  const json& array(const char* key) const {
    const json& value = at(key);
    if (!value.is_array()) fail(key, "must be a JSON array, got " + shown(value));
    return value;
  }

 private:
  const json& object_;
  const std::string& source_;
  std::string prefix_;
};

// Optimizer types and state names are short identifiers (AdamW; exp_avg, exp_avg_sq, ...): state
// names become parts of tensor keys, so they may not hold the separators '.', '@' or '/', and
// both are printed by `zero inspect`, so no control characters either.
bool is_identifier(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
         });
}

void read_format(const Fields& top) {
  if (!top.has("format") || top.at("format") != kCheckpointFormat) {
    top.fail("format", std::string("must be \"") + kCheckpointFormat + "\", got " +
                           (top.has("format") ? shown(top.at("format")) : "nothing") +
                           ": this is not a zero.cpp checkpoint");
  }
  const int64_t version = top.integer("format_version", 0, std::numeric_limits<int32_t>::max());
  if (version != kCheckpointFormatVersion) {
    top.fail("format_version", "is " + std::to_string(version) + ", but this build of zero.cpp reads version " +
                                   std::to_string(kCheckpointFormatVersion) +
                                   " (a checkpoint from another version of zero.cpp)");
  }
}

void read_counters(const Fields& top, EngineState& s) {
  s.global_steps = top.integer("global_steps", 0, kMaxTrainingCounter);
  s.global_samples = top.integer("global_samples", 0, kMaxTrainingCounter);
  s.skipped_steps = top.integer("skipped_steps", 0, kMaxTrainingCounter);
  s.micro_steps = top.integer("micro_steps", 0, kMaxTrainingCounter);
  if (s.skipped_steps > s.global_steps) {
    top.fail("skipped_steps", "is " + std::to_string(s.skipped_steps) + ", more than global_steps " +
                                  std::to_string(s.global_steps) + " (skipped steps are counted in global_steps)");
  }
  // Every optimizer step consumes at least one micro-step and one sample.
  if (s.global_samples < s.global_steps) {
    top.fail("global_samples", "is " + std::to_string(s.global_samples) + ", fewer than global_steps " +
                                   std::to_string(s.global_steps) + " (each step trains at least one sample)");
  }
  if (s.micro_steps < s.global_steps) {
    top.fail("micro_steps", "is " + std::to_string(s.micro_steps) + ", fewer than global_steps " +
                                std::to_string(s.global_steps) + " (each step takes at least one micro-step)");
  }
}

void read_layout(const Fields& top, EngineState& s) {
  s.world_size = static_cast<int>(top.integer("world_size", 1, kMaxCheckpointWorldSize));
  s.zero_stage = static_cast<int>(top.integer("zero_stage", 0, 3));
  if (s.zero_stage == 0) {
    if (top.has("shard_files")) {
      top.fail("shard_files", "is present, but a ZeRO stage 0 checkpoint keeps whole tensors in "
                              "model.safetensors and optimizer.safetensors");
    }
    return;
  }
  const json& files = top.array("shard_files");
  if (files.size() != static_cast<size_t>(s.world_size)) {
    top.fail("shard_files", "lists " + std::to_string(files.size()) + " files, but world_size " +
                                std::to_string(s.world_size) + " means one per rank");
  }
  for (int r = 0; r < s.world_size; ++r) {
    const std::string expected = shard_file_name(r, s.world_size);
    const json& name = files[static_cast<size_t>(r)];
    // Only the names the writer uses: a path here could point outside the checkpoint.
    if (!name.is_string() || name.get_ref<const std::string&>() != expected) {
      top.fail_path(top.path("shard_files") + "[" + std::to_string(r) + "]",
                    "must be \"" + expected + "\" (rank " + std::to_string(r) + " of " +
                        std::to_string(s.world_size) + "), got " + shown(name));
    }
    s.shard_files.push_back(expected);
  }
}

void read_optimizer(const Fields& top, EngineState& s) {
  const Fields optimizer(top.object("optimizer"), s.source, "optimizer.",
                         {"type", "step_count", "hyper", "state_names"});
  s.optimizer_type = optimizer.string("type");
  if (!is_identifier(s.optimizer_type)) {  // DeepSpeed names: AdamW, Lamb, ...
    optimizer.fail("type", "must be an optimizer name of letters, digits and '_', got " +
                               shown(optimizer.at("type")));
  }
  s.optimizer_step_count = optimizer.integer("step_count", 0, kMaxTrainingCounter);
  s.optimizer_hyper = optimizer.object("hyper");
  const json& names = optimizer.array("state_names");
  if (names.size() > kMaxStateNames) {
    optimizer.fail("state_names", "lists " + std::to_string(names.size()) + " states; optimizers have at most " +
                                      std::to_string(kMaxStateNames));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string field = optimizer.path("state_names") + "[" + std::to_string(i) + "]";
    if (!names[i].is_string() || !is_identifier(names[i].get<std::string>())) {
      optimizer.fail_path(field, "must be a state name of letters, digits and '_', got " + shown(names[i]));
    }
    const std::string name = names[i].get<std::string>();
    if (s.has_state_name(name)) optimizer.fail_path(field, "repeats \"" + name + "\"");
    s.optimizer_state_names.push_back(name);
  }
  // Skipped steps (gradient overflow) leave the optimizer untouched; every other step updates it.
  if (s.optimizer_step_count != s.global_steps - s.skipped_steps) {
    optimizer.fail("step_count", "is " + std::to_string(s.optimizer_step_count) +
                                     ", but global_steps - skipped_steps is " +
                                     std::to_string(s.global_steps - s.skipped_steps) +
                                     " (every step that is not skipped updates the optimizer)");
  }
}

void read_scheduler(const Fields& top, EngineState& s) {
  const Fields scheduler(top.object("scheduler"), s.source, "scheduler.", {"last_batch_iteration"});
  s.scheduler_last_batch_iteration =
      scheduler.integer("last_batch_iteration", -1, kMaxTrainingCounter);
  // The schedule steps right after each optimizer update and starts at -1.
  if (s.scheduler_last_batch_iteration != s.optimizer_step_count - 1) {
    scheduler.fail("last_batch_iteration",
                   "is " + std::to_string(s.scheduler_last_batch_iteration) +
                       ", but optimizer.step_count - 1 is " + std::to_string(s.optimizer_step_count - 1) +
                       " (the schedule advances once per optimizer update)");
  }
}

void read_loss_scaler(const Fields& top, EngineState& s) {
  if (!top.has("loss_scaler")) return;
  const Fields scaler(top.object("loss_scaler"), s.source, "loss_scaler.",
                      {"scale", "hysteresis", "iteration", "last_overflow_iteration"});
  LossScalerState state;
  state.scale = scaler.positive_finite("scale");
  state.hysteresis = scaler.integer("hysteresis", 0, kMaxTrainingCounter);
  // The scaler counts the steps it saw in this and earlier fp16 runs: at most global_steps.
  state.iteration = scaler.integer("iteration", 0, s.global_steps);
  state.last_overflow_iteration =
      scaler.integer("last_overflow_iteration", -1, std::max<int64_t>(-1, state.iteration - 1));
  s.loss_scaler = state;
}

void read_parameters(const Fields& top, EngineState& s) {
  const json& list = top.array("parameters");
  int64_t total = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = top.path("parameters") + "[" + std::to_string(i) + "]";
    const json& entry = list[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() ||
        entry[0].get_ref<const std::string&>().empty() || !entry[1].is_array()) {
      top.fail_path(field, "must be [\"<parameter name>\", [<dimensions>]], got " + shown(entry));
    }
    ManifestEntry parameter;
    parameter.name = entry[0].get<std::string>();
    if (!s.parameter_index.emplace(parameter.name, s.parameters.size()).second) {
      top.fail_path(field, "repeats the parameter name \"" + parameter.name + "\"");
    }
    const json& dims = entry[1];
    if (dims.size() > kMaxParameterRank) {
      top.fail_path(field, "has " + std::to_string(dims.size()) + " dimensions; at most " +
                               std::to_string(kMaxParameterRank) + " are allowed");
    }
    int64_t numel = 1;
    for (const json& dim : dims) {
      const std::optional<int64_t> size = as_int64(dim);
      if (!size || *size < 1 || *size > kMaxParameterElements) {
        top.fail_path(field, "(\"" + parameter.name + "\") has dimension " + shown(dim) +
                                 "; dimensions must be " + range_text(1, kMaxParameterElements));
      }
      const std::optional<int64_t> product = mul_if_fits(numel, *size);
      if (!product || *product > kMaxParameterElements) {
        top.fail_path(field, "(\"" + parameter.name + "\") has shape " + shown(dims) +
                                 ", more than the 2^48 elements a parameter may have");
      }
      numel = *product;
      parameter.shape.push_back(*size);
    }
    parameter.numel = numel;
    const std::optional<int64_t> sum = add_if_fits(total, numel);
    if (!sum || *sum > kMaxParameterElements) {
      top.fail_path(field, "takes the model past 2^48 parameters in all");
    }
    total = *sum;
    s.parameters.push_back(std::move(parameter));
  }
  if (s.parameters.empty()) top.fail("parameters", "lists no parameters");
}

void read_model_config(const Fields& top, EngineState& s) {
  if (!top.has("model_config")) return;
  const json& value = top.object("model_config");
  try {
    s.model_config = model::TransformerConfig::from_hf_json(value, s.source + " (field \"model_config\")");
  } catch (const Error& e) {
    throw FileError(std::string(e.what()) + "; " + kFix);
  }
  // The manifest must describe the model the config builds (a tied embedding counts once in both).
  int64_t total = 0;
  for (const ManifestEntry& p : s.parameters) total += p.numel;  // <= 2^48, checked above
  const int64_t expected = s.model_config->num_parameters();
  if (expected != total) {
    top.fail("parameters", "describes " + std::to_string(total) + " parameters, but model_config builds a model of " +
                               std::to_string(expected));
  }
}

}  // namespace

nlohmann::json LossScalerState::to_json() const {
  return {{"scale", scale},
          {"hysteresis", hysteresis},
          {"iteration", iteration},
          {"last_overflow_iteration", last_overflow_iteration}};
}

const ManifestEntry* EngineState::find_parameter(const std::string& name) const {
  const auto it = parameter_index.find(name);
  return it == parameter_index.end() ? nullptr : &parameters[it->second];
}

bool EngineState::has_state_name(const std::string& state_name) const {
  return std::find(optimizer_state_names.begin(), optimizer_state_names.end(), state_name) !=
         optimizer_state_names.end();
}

std::vector<std::string> EngineState::tensor_files() const {
  if (zero_stage == 0) return {"model.safetensors", "optimizer.safetensors"};
  return shard_files;
}

EngineState parse_engine_state(std::string_view text, const std::string& source) {
  const json root = io::parse_json_bounded(text, source, "the checkpoint state");
  if (!root.is_object()) {
    throw FileError(source + ": the checkpoint state must be a JSON object, got " + shown(root) +
                    "; " + kFix);
  }
  EngineState s;
  s.source = source;
  const Fields top(root, s.source, "",
                   {"format", "format_version", "tag", "global_steps", "global_samples",
                    "skipped_steps", "micro_steps", "world_size", "zero_stage", "shard_files",
                    "optimizer", "scheduler", "loss_scaler", "parameters", "model_config",
                    "deepspeed_config", "client_state"});
  read_format(top);
  s.tag = top.string("tag");
  try {
    validate_tag(s.tag);  // the writer's rule; inspect prints it
  } catch (const ConfigError&) {
    top.fail("tag", "must be a plain folder name, got " + shown(top.at("tag")));
  }
  read_counters(top, s);
  read_layout(top, s);
  read_optimizer(top, s);
  read_scheduler(top, s);
  read_loss_scaler(top, s);
  read_parameters(top, s);
  read_model_config(top, s);
  s.deepspeed_config = top.object("deepspeed_config");
  s.client_state = top.at("client_state");
  return s;
}

EngineState read_engine_state(const std::string& tag_dir) {
  const std::string path = (fs::path(tag_dir) / "engine_state.json").string();
  std::error_code error;
  if (!fs::exists(path, error) && !error) {
    throw FileError(path + ": missing, so " + tag_dir +
                    " is not a complete zero.cpp checkpoint (was the save interrupted, or is this "
                    "the wrong folder?)");
  }
  EngineState state = parse_engine_state(
      io::read_text_file(path, "the checkpoint state", io::kMaxCheckpointStateBytes), path);
  for (const std::string& name : state.tensor_files()) {
    const std::string file = (fs::path(tag_dir) / name).string();
    if (!fs::exists(file, error) && !error) {
      throw FileError(file + ": missing; " + path + " (ZeRO stage " +
                      std::to_string(state.zero_stage) + ", world_size " +
                      std::to_string(state.world_size) +
                      ") needs it beside it; copy the whole checkpoint folder");
    }
    io::require_regular_file(file, "a checkpoint tensor file");
  }
  return state;
}

void require_same_manifest(const EngineState& state, const std::vector<ManifestEntry>& expected,
                           const std::string& what) {
  const size_t common = std::min(state.parameters.size(), expected.size());
  std::string difference;
  for (size_t i = 0; i < common && difference.empty(); ++i) {
    const ManifestEntry& a = state.parameters[i];
    const ManifestEntry& b = expected[i];
    if (a.name != b.name || a.shape != b.shape) {
      difference = "parameter " + std::to_string(i) + " is \"" + a.name + "\" " +
                   shape_to_string(a.shape) + " in the checkpoint and \"" + b.name + "\" " +
                   shape_to_string(b.shape) + " in " + what;
    }
  }
  if (difference.empty() && state.parameters.size() != expected.size()) {
    difference = "the checkpoint has " + std::to_string(state.parameters.size()) +
                 " parameters, " + what + " has " + std::to_string(expected.size());
  }
  if (!difference.empty()) {
    throw FileError(state.source + ": checkpoint of another model (" + difference +
                    "); check --model, or resume from a checkpoint of this model");
  }
}

}  // namespace zero::engine
