#include "tools/estimate_request.h"

#include "core/error.h"
#include "core/parse_number.h"
#include "model/sequence_tiling.h"
#include "tools/arg_parser.h"
#include "tools/estimate_activation_flags.h"
#include "tools/estimate_flag_values.h"

namespace zero::tools {
namespace {

using sharding::OffloadDevice;

// The boolean flags that may stand alone; ArgParser knows flags with values only.
struct BareFlags {
  bool json = false, checkpointing = false, cpu_checkpointing = false;
};

Args take_bare_flags(const Args& args, BareFlags& bare) {
  Args flags;
  for (const std::string& arg : args) {
    if (arg == "--json") bare.json = true;
    else if (arg == "--activation-checkpointing") bare.checkpointing = true;
    else if (arg == "--cpu-checkpointing") bare.cpu_checkpointing = true;
    else flags.push_back(arg);
  }
  return flags;
}

void add_model_flags(ArgParser& parser) {
  parser.option("params", "", "total parameters, e.g. 176B or 7e9 (or use --model)")
      .option("largest-layer-params", "",
              "parameters of the largest layer, e.g. 3.6B (ZeRO-3 needs it with --params)")
      .option("model", "",
              "a Hugging Face model folder or a preset (tiny, tiny-llama, gpt2-124m, gpt2-350m, "
              "llama-1b, llama-1b-mha)")
      .option("gpus-per-node", "1", "GPUs per node")
      .option("nodes", "1", "number of nodes");
  add_mesh_flags(parser);
  parser.option("stage", "", "ZeRO stage 0-3 (default: all stages)")
      .option("offload-optimizer", "", "none, cpu or nvme (default: with and without cpu offload)")
      .option("offload-param", "",
              "none, cpu or nvme, ZeRO-3 only (default: as DeepSpeed lists them)")
      .option("buffer-factor", "1.5", "DeepSpeed's additional_buffer_factor on host memory");
}

void add_activation_flags(ArgParser& parser) {
  parser.option("micro-batch", "", "sequences per GPU per step: adds activations (needs --model)")
      .option("seq-len", "",
              "tokens per sequence for the activation estimate (without it, --gpu-memory "
              "reports the longest sequence that fits)")
      .option("activation-checkpointing", "false",
              "recompute blocks in backward (a bare flag means true)")
      .option("cpu-checkpointing", "false",
              "keep the checkpointed block inputs in host memory "
              "(needs --activation-checkpointing; a bare flag means true)")
      .option("tiled-mlp", "off",
              "TiledMLP row shards: auto, off or N (only one shard's [rows/N, FFN] lives)")
      .option("tiled-logits", "off",
              "tiled logits + loss row shards: auto, off or N (one [rows/N, vocab] shard)")
      .option("sequence-parallel", "1",
              "Ulysses sequence_parallel_size: each GPU holds seq-len/N tokens")
      .option("activation-dtype", "bf16",
              "bf16, fp16 (2 bytes, DeepSpeed's accounting), f32 or f64")
      .option("attention", "flash",
              "flash (zero.cpp: no seq x seq buffer) or eager (stores the softmax)")
      .option("gpu-memory", "",
              "GiB per GPU: mark which rows fit and recommend the fastest that fits; "
              "without --seq-len, the longest sequence that fits")
      .option("cpu-memory", "", "GiB of host memory per node to check as well")
      .option("json", "", "print JSON instead of a table (a bare flag)");
}

// The model (a count or a shape), the GPUs and the buffer factor.
void parse_model(const ArgParser& parser, EstimateRequest& req) {
  const std::string params_text = parser.get("params");
  const std::string largest_text = parser.get("largest-layer-params");
  req.model_name = parser.get("model");
  sharding::EstimateShape& shape = req.shape;
  if (!req.model_name.empty()) {
    if (!params_text.empty() || !largest_text.empty()) {
      throw ConfigError(
          "zero estimate: give either --model or --params/--largest-layer-params, not both");
    }
    req.config = load_model(req.model_name);
    shape.total_params = req.config->num_parameters();
    shape.largest_layer_params = sharding::largest_layer_params(*req.config);
  } else if (!params_text.empty()) {
    shape.total_params = parse_count("params", params_text);
    if (!largest_text.empty()) {
      shape.largest_layer_params = parse_count("largest-layer-params", largest_text);
    }
  } else {
    throw ConfigError("zero estimate: pass --params N (e.g. 176B) or --model PRESET|DIR\n" +
                      parser.usage());
  }
  shape.gpus_per_node = positive_int(parser, "gpus-per-node", kMaxGpusPerNode);
  shape.num_nodes = positive_int(parser, "nodes", kMaxNodes);
  const std::string text = parser.get("buffer-factor");
  const std::optional<double> factor = parse_finite_double(text);
  if (!factor || *factor < 1.0 || *factor > 100.0) {
    throw ConfigError("zero estimate: --buffer-factor must be a number from 1 to 100 (DeepSpeed "
                      "uses 1.5), got \"" + ArgParser::shown(text) + "\"");
  }
  shape.additional_buffer_factor = *factor;
  if (shape.largest_layer_params > shape.total_params) {
    throw ConfigError("zero estimate: --largest-layer-params (" +
                      std::to_string(shape.largest_layer_params) + ") is larger than --params (" +
                      std::to_string(shape.total_params) + ")");
  }
}

// Says why a combination of --stage and offload flags is impossible rather than printing an
// empty table. Without --stage the offload flags can only mean stage 3 when they ask for
// anything but none.
void check_offload_combination(std::optional<int> stage,
                               std::optional<OffloadDevice> offload_optimizer,
                               std::optional<OffloadDevice> offload_param) {
  if (!offload_optimizer && !offload_param) return;
  sharding::ZeroOptions asked{stage.value_or(3), offload_optimizer.value_or(OffloadDevice::kCpu),
                              offload_param.value_or(OffloadDevice::kNone), true};
  if (!offload_optimizer && offload_param == OffloadDevice::kNone) {
    asked.offload_optimizer = OffloadDevice::kNone;
  }
  try {
    sharding::validate_options(asked);
  } catch (const ConfigError& e) {
    throw ConfigError("zero estimate: --stage " + std::to_string(asked.stage) +
                      " with --offload-optimizer " +
                      sharding::offload_device_name(asked.offload_optimizer) +
                      " --offload-param " + sharding::offload_device_name(asked.offload_param) +
                      ": " + e.what());
  }
}

// Which rows: --stage and the offload flags, less what the pipeline refuses.
void parse_rows(const ArgParser& parser, EstimateRequest& req) {
  std::optional<int> stage;
  if (!parser.get("stage").empty()) {
    const int64_t s = parser.get_int("stage");
    if (s < 0 || s > 3) {
      throw ConfigError("zero estimate: --stage must be 0, 1, 2 or 3, got " + std::to_string(s));
    }
    stage = static_cast<int>(s);
  }
  const auto offload_optimizer = parse_device(parser, "offload-optimizer");
  const auto offload_param = parse_device(parser, "offload-param");
  check_offload_combination(stage, offload_optimizer, offload_param);
  req.options = sharding::estimator_rows(stage, offload_optimizer, offload_param);
  if (req.options.empty()) {
    throw ConfigError("zero estimate: no configuration matches --stage/--offload-optimizer/"
                      "--offload-param (offload_param needs stage 3 and offload_optimizer; nvme "
                      "needs stage 3)");
  }
  req.options = pipeline_rows(req.mesh, stage, std::move(req.options));
  bool needs_largest = false;
  for (const auto& o : req.options) needs_largest |= o.stage == 3;
  if (needs_largest && req.shape.largest_layer_params == 0) {
    throw ConfigError("zero estimate: --largest-layer-params N is needed for the ZeRO-3 rows "
                      "(the biggest single layer, usually the embedding: vocab x hidden); or "
                      "pass --stage 0, 1 or 2");
  }
}

}  // namespace

std::optional<EstimateRequest> parse_estimate_request(const Args& args) {
  BareFlags bare;
  ArgParser parser("estimate", take_bare_flags(args, bare));
  add_model_flags(parser);
  add_activation_flags(parser);
  if (!parser.parse()) return std::nullopt;
  EstimateRequest req;
  parse_model(parser, req);
  req.mesh = parse_mesh(parser, req.config, req.shape);
  parse_rows(parser, req);
  req.json = bare.json;
  if (!parser.get("json").empty()) {
    req.json = req.json || parse_flag_bool("json", parser.get("json"));
  }
  parse_activation_flags(parser, bare.checkpointing, bare.cpu_checkpointing, req);
  return req;
}

}  // namespace zero::tools
