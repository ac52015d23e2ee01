#include "tools/estimate_activation_flags.h"

#include "core/error.h"
#include "model/sequence_tiling.h"
#include "tools/estimate_flag_values.h"
#include "tools/estimate_format.h"

namespace zero::tools {
namespace {

// The activation flags other than --seq-len: micro-batch, dtype, attention, long-sequence options.
sharding::ActivationSettings activation_settings(const ArgParser& parser, bool checkpointing,
                                                 bool cpu_checkpointing_flag) {
  sharding::ActivationSettings s;
  s.micro_batch =
      parser.get("micro-batch").empty() ? 1 : positive_int(parser, "micro-batch", kMaxMicroBatch);
  s.checkpointing = checkpointing;
  s.flash_attention = parser.get("attention") != "eager";
  s.cpu_checkpointing = cpu_checkpointing_flag ||
                        parse_flag_bool("cpu-checkpointing", parser.get("cpu-checkpointing"));
  if (s.cpu_checkpointing && !s.checkpointing) {
    throw ConfigError("zero estimate: --cpu-checkpointing keeps the checkpointed block inputs in "
                      "host memory: it needs --activation-checkpointing too");
  }
  s.tiled_mlp_shards = model::parse_shards_flag("--tiled-mlp", parser.get("tiled-mlp"));
  s.tiled_logits_shards = model::parse_shards_flag("--tiled-logits", parser.get("tiled-logits"));
  s.sequence_parallel = positive_int(parser, "sequence-parallel", kMaxGpusPerNode * kMaxNodes);
  const std::string dtype = parser.get("activation-dtype");
  if (dtype == "bf16" || dtype == "fp16") s.activation_bytes = 2;
  else if (dtype == "f32" || dtype == "fp32") s.activation_bytes = 4;
  else if (dtype == "f64") s.activation_bytes = 8;
  else throw ConfigError("zero estimate: --activation-dtype must be bf16, fp16, f32 or f64, "
                         "got \"" + ArgParser::shown(dtype) + "\"");
  return s;
}

// Whether any flag describes a micro-batch whose activations to add.
bool asks_for_activations(const ArgParser& parser, const sharding::ActivationSettings& s) {
  const bool long_sequence_flags = s.cpu_checkpointing || s.tiled_mlp_shards != 1 ||
                                   s.tiled_logits_shards != 1 || s.sequence_parallel != 1;
  return !parser.get("micro-batch").empty() || !parser.get("seq-len").empty() ||
         s.checkpointing || long_sequence_flags;
}

// The activations of one micro-batch at --seq-len, on one GPU of the largest stage.
void estimate_micro_batch(const ArgParser& parser, EstimateRequest& req) {
  if (!req.config) {
    throw ConfigError("zero estimate: the activation estimate (--micro-batch/--seq-len/"
                      "--activation-checkpointing) needs the model's shape: pass --model "
                      "PRESET|DIR instead of --params");
  }
  if (parser.get("seq-len").empty()) {
    throw ConfigError("zero estimate: --seq-len N is needed for the activation estimate (or pass "
                      "--gpu-memory G without it for the longest sequence that fits)");
  }
  req.settings.seq_len = positive_int(parser, "seq-len", kMaxEstimateSeqLen);
  req.activations = sharding::estimate_activations(*req.mesh.stage, req.settings);
}

}  // namespace

void parse_activation_flags(const ArgParser& parser, bool bare_checkpointing,
                            bool bare_cpu_checkpointing, EstimateRequest& req) {
  const bool checkpointing =
      bare_checkpointing ||
      parse_flag_bool("activation-checkpointing", parser.get("activation-checkpointing"));
  req.attention = parser.get("attention");
  if (req.attention != "flash" && req.attention != "eager") {
    throw ConfigError("zero estimate: --attention must be flash or eager, got \"" +
                      req.attention + "\"");
  }
  req.settings = activation_settings(parser, checkpointing, bare_cpu_checkpointing);
  check_mesh_sequence_parallel(req.mesh, req.settings.sequence_parallel);
  req.gpu_memory_text = parser.get("gpu-memory");
  if (!req.gpu_memory_text.empty()) {
    req.gpu_budget_bytes =
        static_cast<int64_t>(parse_gib("gpu-memory", req.gpu_memory_text) * kGiB);
  }
  // --gpu-memory with a model and no --seq-len: what sequence length fits that GPU.
  req.wants_longest = req.config && req.gpu_budget_bytes && parser.get("seq-len").empty();
  if (asks_for_activations(parser, req.settings) && !req.wants_longest) {
    estimate_micro_batch(parser, req);
  }
  req.cpu_memory_text = parser.get("cpu-memory");
  if (!req.cpu_memory_text.empty()) {
    req.cpu_budget_bytes =
        static_cast<int64_t>(parse_gib("cpu-memory", req.cpu_memory_text) * kGiB);
  }
}

}  // namespace zero::tools
