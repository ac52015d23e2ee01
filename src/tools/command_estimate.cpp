// `zero estimate`: memory per GPU and per node for ZeRO stages 0-3 with and without offload
// (sharding::estimate_model_states, DeepSpeed's estimators), optionally with the activations of
// a micro-batch, and with --gpu-memory the fastest configuration that fits. The arithmetic is
// in sharding/memory_estimator; this file turns flags into its inputs and prints a table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/parse_number.h"
#include "model/sequence_tiling.h"
#include "model/transformer_config.h"
#include "sharding/memory_estimator.h"
#include "tools/arg_parser.h"
#include "tools/command.h"
#include "tools/estimate_longest_sequence.h"

namespace zero::tools {
namespace {

namespace fs = std::filesystem;
using sharding::OffloadDevice;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / kGiB);
  return text;
}

// A count such as 176e9, 176B, 3.6B, 350M, 7K or 1.5T (B is a billion, as model names use it).
// The number is parsed strictly (the whole text, finite) and must stay below 9e18 after scaling.
int64_t parse_count(const std::string& flag, const std::string& text) {
  std::string number = text;
  double scale = 1.0;
  if (!number.empty()) {
    switch (number.back()) {
      case 'K': case 'k': scale = 1e3; break;
      case 'M': case 'm': scale = 1e6; break;
      case 'B': case 'b': case 'G': case 'g': scale = 1e9; break;
      case 'T': case 't': scale = 1e12; break;
      default: break;
    }
    if (scale != 1.0) number.pop_back();
  }
  const std::optional<double> value = parse_finite_double(number);
  if (value && *value > 0 && *value * scale < 9e18) {
    return static_cast<int64_t>(std::llround(*value * scale));
  }
  throw ConfigError("zero estimate: --" + flag +
                    " must be a positive count below 9e18 like 176e9, 176B or 350M, got \"" +
                    ArgParser::shown(text) + "\"");
}

// GiB of memory: positive, finite, and at most kMaxGiB so the byte count fits an int64.
constexpr double kMaxGiB = 1 << 30;  // 1 EiB

double parse_gib(const std::string& flag, const std::string& text) {
  const std::optional<double> value = parse_finite_double(text);
  if (value && *value > 0 && *value <= kMaxGiB) return *value;
  throw ConfigError("zero estimate: --" + flag + " must be a positive number of GiB up to 2^30 "
                    "(e.g. 80), got \"" + ArgParser::shown(text) + "\"");
}

// Stated limits for counts of hardware and batch shapes: products of them and of model sizes
// stay far inside int64 in the estimator.
constexpr int64_t kMaxGpusPerNode = 1 << 10;
constexpr int64_t kMaxNodes = 1 << 20;
constexpr int64_t kMaxMicroBatch = 1 << 16;
constexpr int64_t kMaxEstimateSeqLen = 1 << 24;

int64_t positive_int(const ArgParser& parser, const std::string& flag, int64_t max) {
  const int64_t value = parser.get_int(flag);
  if (value <= 0) {
    throw ConfigError("zero estimate: --" + flag + " must be at least 1, got " + std::to_string(value));
  }
  if (value > max) {
    throw ConfigError("zero estimate: --" + flag + " must be at most " + std::to_string(max) +
                      ", got " + std::to_string(value));
  }
  return value;
}

std::optional<OffloadDevice> parse_device(const ArgParser& parser, const std::string& flag) {
  const std::string text = parser.get(flag);
  if (text.empty()) return std::nullopt;
  if (text == "none") return OffloadDevice::kNone;
  if (text == "cpu") return OffloadDevice::kCpu;
  if (text == "nvme") return OffloadDevice::kNvme;
  throw ConfigError("zero estimate: --" + flag + " must be none, cpu or nvme, got \"" + text + "\"");
}

bool parse_flag_bool(const std::string& flag, const std::string& text) {
  if (text == "on") return true;
  if (text == "off") return false;
  if (const std::optional<bool> value = parse_bool(text)) return *value;
  throw ConfigError("zero estimate: --" + flag + " takes no value or true/false, got \"" +
                    ArgParser::shown(text) + "\"");
}

model::TransformerConfig load_model(const std::string& name) {
  std::error_code error;
  if (fs::is_directory(name, error)) {
    return model::TransformerConfig::from_hf_file((fs::path(name) / "config.json").string());
  }
  try {
    return model::preset_config(name);
  } catch (const ConfigError& e) {
    throw ConfigError("zero estimate: --model " + name + " is not a folder; " + e.what());
  }
}

std::string describe(const sharding::ZeroOptions& o) {
  std::string text = "ZeRO-" + std::to_string(o.stage);
  if (o.offload_optimizer != OffloadDevice::kNone) {
    text += std::string(", offload_optimizer=") + sharding::offload_device_name(o.offload_optimizer);
  }
  if (o.offload_param != OffloadDevice::kNone) {
    text += std::string(", offload_param=") + sharding::offload_device_name(o.offload_param);
  }
  if (o.stage == 3) text += o.zero_init ? ", zero_init=1" : ", zero_init=0";
  return text;
}

struct Row {
  sharding::ZeroOptions options;
  sharding::ModelStateMemory states;
  int64_t gpu_total = 0;  // states + activations
};

size_t least_states(const std::vector<Row>& rows) {
  size_t least = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].states.gpu_bytes < rows[least].states.gpu_bytes) least = i;
  }
  return least;
}

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
  else throw ConfigError("zero estimate: --activation-dtype must be bf16, fp16, f32 or f64, got \"" +
                         ArgParser::shown(dtype) + "\"");
  return s;
}

}  // namespace

int run_estimate(const Args& args) {
  // Boolean flags may stand alone; ArgParser knows flags with values only.
  bool json = false, checkpointing_flag = false, cpu_checkpointing_flag = false;
  Args flags;
  for (const std::string& arg : args) {
    if (arg == "--json") json = true;
    else if (arg == "--activation-checkpointing") checkpointing_flag = true;
    else if (arg == "--cpu-checkpointing") cpu_checkpointing_flag = true;
    else flags.push_back(arg);
  }
  ArgParser parser("estimate", flags);
  parser.option("params", "", "total parameters, e.g. 176B or 7e9 (or use --model)")
      .option("largest-layer-params", "", "parameters of the largest layer, e.g. 3.6B (ZeRO-3 needs it with --params)")
      .option("model", "", "a Hugging Face model folder or a preset (tiny, tiny-llama, gpt2-124m, gpt2-350m, llama-1b, llama-1b-mha)")
      .option("gpus-per-node", "1", "GPUs per node")
      .option("nodes", "1", "number of nodes")
      .option("stage", "", "ZeRO stage 0-3 (default: all stages)")
      .option("offload-optimizer", "", "none, cpu or nvme (default: with and without cpu offload)")
      .option("offload-param", "", "none, cpu or nvme, ZeRO-3 only (default: as DeepSpeed lists them)")
      .option("buffer-factor", "1.5", "DeepSpeed's additional_buffer_factor on host memory")
      .option("micro-batch", "", "sequences per GPU per step: adds activations (needs --model)")
      .option("seq-len", "", "tokens per sequence for the activation estimate (without it, --gpu-memory "
              "reports the longest sequence that fits)")
      .option("activation-checkpointing", "false", "recompute blocks in backward (a bare flag means true)")
      .option("cpu-checkpointing", "false", "keep the checkpointed block inputs in host memory "
              "(needs --activation-checkpointing; a bare flag means true)")
      .option("tiled-mlp", "off", "TiledMLP row shards: auto, off or N (only one shard's [rows/N, FFN] lives)")
      .option("tiled-logits", "off", "tiled logits + loss row shards: auto, off or N (one [rows/N, vocab] shard)")
      .option("sequence-parallel", "1", "Ulysses sequence_parallel_size: each GPU holds seq-len/N tokens")
      .option("activation-dtype", "bf16", "bf16, fp16 (2 bytes, DeepSpeed's accounting), f32 or f64")
      .option("attention", "flash", "flash (zero.cpp: no seq x seq buffer) or eager (stores the softmax)")
      .option("gpu-memory", "", "GiB per GPU: mark which rows fit and recommend the fastest that fits; "
              "without --seq-len, the longest sequence that fits")
      .option("cpu-memory", "", "GiB of host memory per node to check as well")
      .option("json", "", "print JSON instead of a table (a bare flag)");
  if (!parser.parse()) return 0;

  // The model: a count or a model shape.
  const std::string params_text = parser.get("params"), largest_text = parser.get("largest-layer-params");
  const std::string model_name = parser.get("model");
  std::optional<model::TransformerConfig> config;
  sharding::EstimateShape shape;
  if (!model_name.empty()) {
    if (!params_text.empty() || !largest_text.empty()) {
      throw ConfigError("zero estimate: give either --model or --params/--largest-layer-params, not both");
    }
    config = load_model(model_name);
    shape.total_params = config->num_parameters();
    shape.largest_layer_params = sharding::largest_layer_params(*config);
  } else if (!params_text.empty()) {
    shape.total_params = parse_count("params", params_text);
    if (!largest_text.empty()) shape.largest_layer_params = parse_count("largest-layer-params", largest_text);
  } else {
    throw ConfigError("zero estimate: pass --params N (e.g. 176B) or --model PRESET|DIR\n" + parser.usage());
  }
  shape.gpus_per_node = positive_int(parser, "gpus-per-node", kMaxGpusPerNode);
  shape.num_nodes = positive_int(parser, "nodes", kMaxNodes);
  {
    const std::string text = parser.get("buffer-factor");
    const std::optional<double> factor = parse_finite_double(text);
    if (!factor || *factor < 1.0 || *factor > 100.0) {
      throw ConfigError("zero estimate: --buffer-factor must be a number from 1 to 100 (DeepSpeed "
                        "uses 1.5), got \"" + ArgParser::shown(text) + "\"");
    }
    shape.additional_buffer_factor = *factor;
  }
  if (shape.largest_layer_params > shape.total_params) {
    throw ConfigError("zero estimate: --largest-layer-params (" + std::to_string(shape.largest_layer_params) +
                      ") is larger than --params (" + std::to_string(shape.total_params) + ")");
  }

  // Which rows.
  std::optional<int> stage;
  if (!parser.get("stage").empty()) {
    const int64_t s = parser.get_int("stage");
    if (s < 0 || s > 3) throw ConfigError("zero estimate: --stage must be 0, 1, 2 or 3, got " + std::to_string(s));
    stage = static_cast<int>(s);
  }
  const auto offload_optimizer = parse_device(parser, "offload-optimizer");
  const auto offload_param = parse_device(parser, "offload-param");
  if (offload_optimizer || offload_param) {
    // Says why a combination is impossible rather than printing an empty table. Without
    // --stage the offload flags can only mean stage 3 when they ask for anything but none.
    sharding::ZeroOptions asked{stage.value_or(3), offload_optimizer.value_or(OffloadDevice::kCpu),
                                offload_param.value_or(OffloadDevice::kNone), true};
    if (!offload_optimizer && offload_param == OffloadDevice::kNone) asked.offload_optimizer = OffloadDevice::kNone;
    try {
      sharding::validate_options(asked);
    } catch (const ConfigError& e) {
      throw ConfigError("zero estimate: --stage " + std::to_string(asked.stage) +
                        " with --offload-optimizer " + sharding::offload_device_name(asked.offload_optimizer) +
                        " --offload-param " + sharding::offload_device_name(asked.offload_param) + ": " + e.what());
    }
  }
  const std::vector<sharding::ZeroOptions> options = sharding::estimator_rows(stage, offload_optimizer, offload_param);
  if (options.empty()) {
    throw ConfigError("zero estimate: no configuration matches --stage/--offload-optimizer/--offload-param "
                      "(offload_param needs stage 3 and offload_optimizer; nvme needs stage 3)");
  }
  bool needs_largest = false;
  for (const auto& o : options) needs_largest |= o.stage == 3;
  if (needs_largest && shape.largest_layer_params == 0) {
    throw ConfigError(
        "zero estimate: --largest-layer-params N is needed for the ZeRO-3 rows (the biggest single layer, "
        "usually the embedding: vocab x hidden); or pass --stage 0, 1 or 2");
  }

  // Activations, when a micro-batch is described.
  if (!parser.get("json").empty()) json = json || parse_flag_bool("json", parser.get("json"));
  const bool checkpointing =
      checkpointing_flag || parse_flag_bool("activation-checkpointing", parser.get("activation-checkpointing"));
  const std::string attention = parser.get("attention");
  if (attention != "flash" && attention != "eager") {
    throw ConfigError("zero estimate: --attention must be flash or eager, got \"" + attention + "\"");
  }
  std::optional<sharding::ActivationMemory> activations;
  sharding::ActivationSettings settings = activation_settings(parser, checkpointing,
                                                              cpu_checkpointing_flag);
  std::optional<int64_t> gpu_budget, cpu_budget;
  if (!parser.get("gpu-memory").empty()) {
    gpu_budget = static_cast<int64_t>(parse_gib("gpu-memory", parser.get("gpu-memory")) * kGiB);
  }
  const bool long_sequence_flags = settings.cpu_checkpointing || settings.tiled_mlp_shards != 1 ||
                                   settings.tiled_logits_shards != 1 || settings.sequence_parallel != 1;
  const bool wants_activations = !parser.get("micro-batch").empty() || !parser.get("seq-len").empty() ||
                                 checkpointing || long_sequence_flags;
  // --gpu-memory with a model and no --seq-len: what sequence length fits that GPU.
  const bool wants_longest = config && gpu_budget && parser.get("seq-len").empty();
  if (wants_activations && !wants_longest) {
    if (!config) {
      throw ConfigError("zero estimate: the activation estimate (--micro-batch/--seq-len/--activation-checkpointing) "
                        "needs the model's shape: pass --model PRESET|DIR instead of --params");
    }
    if (parser.get("seq-len").empty()) {
      throw ConfigError("zero estimate: --seq-len N is needed for the activation estimate (or pass "
                        "--gpu-memory G without it for the longest sequence that fits)");
    }
    settings.seq_len = positive_int(parser, "seq-len", kMaxEstimateSeqLen);
    activations = sharding::estimate_activations(*config, settings);
  }
  if (!parser.get("cpu-memory").empty()) {
    cpu_budget = static_cast<int64_t>(parse_gib("cpu-memory", parser.get("cpu-memory")) * kGiB);
  }

  std::vector<Row> rows;
  std::vector<sharding::FitCandidate> candidates;
  for (const auto& o : options) {
    Row r{o, sharding::estimate_model_states(shape, o), 0};
    r.gpu_total = r.states.gpu_bytes + (activations ? activations->total_bytes() : 0);
    rows.push_back(r);
    candidates.push_back({o, r.gpu_total, r.states.cpu_bytes});
  }
  std::optional<size_t> pick;
  if (gpu_budget) pick = sharding::cheapest_fitting(candidates, *gpu_budget, cpu_budget);
  // The longest sequence per option set, on the states of the row that leaves the most room.
  // A learned position table (GPT-2) has exactly max_position_embeddings rows: no longer
  // sequence can run whatever the memory; rotary positions extend (zero train needs
  // --allow-long-sequences true past max_position_embeddings).
  const int64_t longest_allowed =
      config && config->learned_positions
          ? std::min(kMaxEstimateSeqLen, config->max_position_embeddings)
          : kMaxEstimateSeqLen;
  auto longest_rows = [&](const std::vector<Row>& all) {
    return longest_sequences(*config, settings, all[least_states(all)].states.gpu_bytes,
                             *gpu_budget, longest_allowed);
  };
  auto fits = [&](const Row& r) {
    return gpu_budget && r.gpu_total <= *gpu_budget && (!cpu_budget || r.states.cpu_bytes <= *cpu_budget);
  };
  // When nothing fits without checkpointing, say whether checkpointing would change that.
  std::optional<size_t> pick_with_checkpointing;
  if (gpu_budget && !pick && activations && !settings.checkpointing) {
    sharding::ActivationSettings with = settings;
    with.checkpointing = true;
    const auto act = sharding::estimate_activations(*config, with);
    std::vector<sharding::FitCandidate> again = candidates;
    for (size_t i = 0; i < again.size(); ++i) again[i].gpu_bytes = rows[i].states.gpu_bytes + act.total_bytes();
    pick_with_checkpointing = sharding::cheapest_fitting(again, *gpu_budget, cpu_budget);
  }

  if (json) {
    nlohmann::json out;
    out["total_params"] = shape.total_params;
    out["largest_layer_params"] = shape.largest_layer_params;
    out["gpus_per_node"] = shape.gpus_per_node;
    out["nodes"] = shape.num_nodes;
    out["additional_buffer_factor"] = shape.additional_buffer_factor;
    if (activations) {
      out["activations"] = {{"micro_batch", settings.micro_batch},
                            {"seq_len", settings.seq_len},
                            {"checkpointing", settings.checkpointing},
                            {"cpu_checkpointing", settings.cpu_checkpointing},
                            {"tiled_mlp_shards", activations->mlp_shards},
                            {"tiled_logits_shards", activations->logits_shards},
                            {"sequence_parallel", settings.sequence_parallel},
                            {"per_layer_bytes", activations->per_layer_bytes},
                            {"layers_bytes", activations->layers_bytes},
                            {"logits_bytes", activations->logits_bytes},
                            {"peak_bytes", activations->peak_bytes},
                            {"host_bytes", activations->host_bytes}};
    }
    if (wants_longest) out["longest_sequence"] = longest_sequences_json(longest_rows(rows));
    out["rows"] = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json row = {{"stage", r.options.stage},
                            {"offload_optimizer", sharding::offload_device_name(r.options.offload_optimizer)},
                            {"offload_param", sharding::offload_device_name(r.options.offload_param)},
                            {"gpu_bytes", r.states.gpu_bytes},
                            {"cpu_bytes", r.states.cpu_bytes},
                            {"nvme_bytes", r.states.nvme_bytes},
                            {"gpu_total_bytes", r.gpu_total}};
      if (r.options.stage == 3) row["zero_init"] = r.options.zero_init;
      if (gpu_budget) row["fits"] = fits(r);
      out["rows"].push_back(row);
    }
    if (gpu_budget) out["recommended"] = pick ? nlohmann::json(*pick) : nlohmann::json(nullptr);
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  const int64_t gpus = shape.total_gpus();
  std::printf("Memory for params, gradients and optimizer states (DeepSpeed's estimators, "
              "additional_buffer_factor %.2g)\n", shape.additional_buffer_factor);
  std::printf("HW: %lld node%s x %lld GPU%s = %lld GPU%s\n", static_cast<long long>(shape.num_nodes),
              shape.num_nodes > 1 ? "s" : "", static_cast<long long>(shape.gpus_per_node),
              shape.gpus_per_node > 1 ? "s" : "", static_cast<long long>(gpus), gpus > 1 ? "s" : "");
  std::printf("SW: %s%lldM total params, %lldM largest layer params\n",
              config ? ("model " + model_name + ", ").c_str() : "",
              static_cast<long long>(shape.total_params / 1000000),
              static_cast<long long>(shape.largest_layer_params / 1000000));
  if (activations) {
    std::printf("Activations per GPU: micro-batch %lld x %lld tokens, checkpointing %s%s, %s attention, "
                "tiled MLP %lld shard(s), tiled logits %lld shard(s), sequence parallel %lld: "
                "%s per block, %s for %lld blocks, %s logits; peak %s",
                static_cast<long long>(settings.micro_batch), static_cast<long long>(settings.seq_len),
                settings.checkpointing ? "on" : "off", settings.cpu_checkpointing ? " (inputs on the host)" : "",
                attention.c_str(), static_cast<long long>(activations->mlp_shards),
                static_cast<long long>(activations->logits_shards),
                static_cast<long long>(settings.sequence_parallel),
                gib(activations->per_layer_bytes).c_str(), gib(activations->layers_bytes).c_str(),
                static_cast<long long>(config->num_layers), gib(activations->logits_bytes).c_str(),
                gib(activations->total_bytes()).c_str());
    if (activations->host_bytes > 0) std::printf(" + %s in host memory", gib(activations->host_bytes).c_str());
    std::printf("\n");
  }
  std::printf("\n");
  std::string header = "stage  offload_optimizer  offload_param  zero_init   GPU states";
  if (activations) header += "    GPU total";
  header += "      CPU/node     NVMe/node";
  if (gpu_budget) header += "  fits";
  std::printf("%s\n", header.c_str());
  for (const Row& r : rows) {
    std::printf("%5d  %-17s  %-13s  %-9s  %11s", r.options.stage,
                sharding::offload_device_name(r.options.offload_optimizer),
                sharding::offload_device_name(r.options.offload_param),
                r.options.stage == 3 ? (r.options.zero_init ? "1" : "0") : "-", gib(r.states.gpu_bytes).c_str());
    if (activations) std::printf("  %11s", gib(r.gpu_total).c_str());
    std::printf("  %12s  %12s", gib(r.states.cpu_bytes).c_str(),
                r.states.nvme_bytes > 0 ? gib(r.states.nvme_bytes).c_str() : "-");
    if (gpu_budget) std::printf("  %s", fits(r) ? "yes" : "no");
    std::printf("\n");
  }
  std::printf("\nGPU states: params, gradients and optimizer states per GPU%s. CPU/node: host memory per node,\n"
              "with the buffer factor. zero_init=1: the model is built partitioned (deepspeed.zero.Init).\n",
              activations ? "; GPU total adds the activations" : "");
  if (!gpu_budget) return 0;
  const std::string budget = parser.get("gpu-memory") + " GiB per GPU" +
                             (cpu_budget ? " and " + parser.get("cpu-memory") + " GiB per node" : "");
  if (wants_longest) {
    const Row& smallest = rows[least_states(rows)];
    const std::vector<LongestSequenceRow> longest = longest_rows(rows);
    print_longest_sequences(longest, parser.get("gpu-memory") + " GiB per GPU",
                            describe(smallest.options) + " (the listed configuration with the least "
                            "GPU states, " + gib(smallest.states.gpu_bytes) + ")", longest_allowed);
    if (config->learned_positions) {
      std::printf("(at most the model's %lld learned positions: a learned position table cannot extend)\n",
                  static_cast<long long>(config->max_position_embeddings));
    } else if (longest.back().longest_seq_len > config->max_position_embeddings) {
      std::printf("(past the model's max_position_embeddings, %lld, zero train needs --allow-long-sequences true)\n",
                  static_cast<long long>(config->max_position_embeddings));
    }
  }
  std::printf("\n");
  if (!activations && !wants_longest) {
    std::printf("note: activations are not counted; pass --model, --micro-batch and --seq-len to include them\n");
  }
  if (pick) {
    const Row& r = rows[*pick];
    std::printf("recommended: %s fits in %s (needs %s per GPU, %s host memory per node)\n",
                describe(r.options).c_str(), budget.c_str(), gib(r.gpu_total).c_str(),
                gib(r.states.cpu_bytes).c_str());
  } else {
    size_t smallest = 0;
    for (size_t i = 1; i < rows.size(); ++i) {
      if (rows[i].gpu_total < rows[smallest].gpu_total) smallest = i;
    }
    if (rows[smallest].gpu_total <= *gpu_budget) {
      // The GPU side fits somewhere: host memory is what is short.
      int64_t least_host = -1;
      for (const Row& r : rows) {
        if (r.gpu_total <= *gpu_budget && (least_host < 0 || r.states.cpu_bytes < least_host)) {
          least_host = r.states.cpu_bytes;
        }
      }
      std::printf("nothing fits in %s: the rows that fit the GPU need at least %s of host memory per node; "
                  "add nodes or offload to nvme (--offload-optimizer nvme)\n",
                  budget.c_str(), gib(least_host).c_str());
    } else {
      std::printf("nothing fits in %s: the smallest is %s at %s per GPU; add GPUs%s or offload more\n",
                  budget.c_str(), describe(rows[smallest].options).c_str(), gib(rows[smallest].gpu_total).c_str(),
                  activations ? ", lower --micro-batch or --seq-len" : "");
    }
    if (pick_with_checkpointing) {
      std::printf("with --activation-checkpointing, %s would fit\n",
                  describe(rows[*pick_with_checkpointing].options).c_str());
    }
  }
  return 0;
}

}  // namespace zero::tools
