// The support table. Built today: fp32 training, ZeRO stages 0-3 over MPI, the optimizers
// Adam/AdamW/Lamb/Lion/Adagrad, the schedules WarmupLR/WarmupDecayLR/WarmupCosineLR/OneCycle/
// LRRangeTest, gradient clipping, steps_per_print, wall_clock_breakdown, checkpoint tag
// validation, bf16 and fp16 training (fp32 master weights, static or dynamic loss scaling; bf16
// master weights, gradients and optimizer states under ZeRO, with optional stochastic rounding),
// gradient accumulation and communication in fp32, bf16 or fp16. Each row below is
// a setting that asks for something else; delete a row when its feature lands.
//
// Built since: the OneBitAdam and Muon optimizers, prescale_gradients,
// gradient_predivide_factor, zero_optimization.reduce_scatter false, the csv_monitor and
// tensorboard monitors, every activation_checkpointing key
// (model/activation_checkpointer.h), optimizer and parameter offload to CPU memory and NVMe
// (partial optimizer offload, ratio < 1, to CPU memory), pipeline and tensor parallelism,
// ZeRO++'s zero_quantized_weights, zero_hpz_partition_size and zero_quantized_gradients
// (sharding/zero_plus_plus.h), dump_state (config/config_dump.h).
// Not gated on purpose: the aio section (only NVMe offload reads it),
// ZeRO tuning knobs that only change memory or speed (bucket sizes, overlap_comm and stage3_*
// are all honoured; sub_group_size and stage3_gather_16bit_weights_on_model_save need nothing:
// the optimizer updates one partition at a time and every checkpoint consolidates with `zero
// convert`).
#include "config/feature_support.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>

#include "config/key_suggestion.h"
#include "core/error.h"

namespace zero::config {
namespace {

using nlohmann::json;
using Config = DeepSpeedConfig;

// One use of an unbuilt feature: the value as the user wrote it and the words of the message.
struct Use {
  json value;
  std::string what;        // "fp16 training"
  std::string lands_with;  // "the mixed-precision issue"; empty when no work is planned
  std::string fix;         // "remove the key or set it to false"
};

struct Gate {
  std::string key;
  std::function<std::optional<Use>(const Config&)> check;
};

// A row whose text is fixed: `value_in_use` returns the offending value, or nothing when off.
Gate row(std::string key, std::function<std::optional<json>(const Config&)> value_in_use,
         std::string what, std::string lands_with, std::string fix) {
  return {std::move(key),
          [value_in_use, what, lands_with, fix](const Config& c) -> std::optional<Use> {
            std::optional<json> value = value_in_use(c);
            if (!value) return std::nullopt;
            return Use{*value, what, lands_with, fix};
          }};
}

std::optional<json> when_true(bool flag) {
  return flag ? std::optional<json>(true) : std::nullopt;
}

std::optional<json> when_set(const std::optional<json>& value) { return value; }

std::optional<json> when_not_fp32(const std::optional<PrecisionType>& type,
                                  const ChoiceList<PrecisionType>& names) {
  if (!type || *type == PrecisionType::kFp32) return std::nullopt;
  return json(choice_name(names, *type));
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

const std::vector<std::string> kBuiltOptimizers = {"Adam",    "AdamW",      "Lamb", "Lion",
                                                   "Adagrad", "OneBitAdam", "Muon"};
const std::vector<std::string> kBuiltSchedulers = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
                                                   "OneCycle", "LRRangeTest"};

std::string list(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// DeepSpeed lower-cases optimizer names it implements itself; anything else it imports from
// torch.optim, which zero.cpp cannot.
std::optional<Use> check_optimizer(const Config& c) {
  if (!c.optimizer) return std::nullopt;
  const std::string& type = c.optimizer->type;
  const std::string name = lower(type);
  for (const std::string& built : kBuiltOptimizers) {
    if (name == lower(built)) return std::nullopt;
  }
  const std::string fix = "use one of " + list(kBuiltOptimizers);
  if (name == "zerooneadam" || name == "onebitlamb") {
    return Use{type, "the " + type + " optimizer", "the compressed-communication issue", fix};
  }
  if (name == "muadam" || name == "muadamw" || name == "musgd") {
    return Use{type, "the " + type + " (muP) optimizer", "", fix};
  }
  return Use{type,
             "optimizer \"" + type + "\" is not a DeepSpeed optimizer (DeepSpeed would import it "
             "from torch.optim) and",
             "", fix + " (closest: " + closest_name(type, kBuiltOptimizers) + ")"};
}

// Muon's step runs where the optimizer state lives; the offloaded step is CPU Adam.
std::optional<Use> check_muon_offload(const Config& c) {
  const OffloadDevice device = c.zero_optimization.offload_optimizer.device;
  if (!c.optimizer || lower(c.optimizer->type) != "muon" || device == OffloadDevice::kNone) {
    return std::nullopt;
  }
  return Use{choice_name(offload_device_names(), device),
             "the Muon optimizer with its state offloaded", "",
             "remove zero_optimization.offload_optimizer, or use AdamW"};
}

// DeepSpeed matches its LR schedule names exactly; others it imports from torch.
std::optional<Use> check_scheduler(const Config& c) {
  if (!c.scheduler) return std::nullopt;
  const std::string& type = c.scheduler->type;
  if (std::find(kBuiltSchedulers.begin(), kBuiltSchedulers.end(), type) != kBuiltSchedulers.end()) {
    return std::nullopt;
  }
  return Use{type,
             "scheduler \"" + type + "\" is not a DeepSpeed LR schedule (DeepSpeed would import it "
             "from torch.optim.lr_scheduler) and",
             "", "use one of " + list(kBuiltSchedulers) + " (closest: " +
                     closest_name(type, kBuiltSchedulers) + ")"};
}

// The tensor_parallel settings in use besides the size (autotp_size, and tp.tp_size when it
// repeats it): what zero.cpp does not act on.
std::optional<nlohmann::json> tensor_parallel_extras(const Config& c) {
  std::optional<nlohmann::json> keys = c.tensor_parallel.settings_in_use();
  if (!keys) return keys;
  keys->erase("autotp_size");
  for (const char* inner : {"tensor_parallel", "tp"}) {
    auto section = keys->find(inner);
    if (section == keys->end() || !section->is_object()) continue;
    auto size = section->find("tp_size");
    if (size != section->end() && *size == c.tensor_parallel.autotp_size) section->erase(size);
    if (section->empty()) keys->erase(inner);
  }
  if (keys->empty()) return std::nullopt;
  return keys;
}

const std::vector<Gate>& gates() {
  static const std::vector<Gate> table = [] {
    const std::string off = "remove the key or set it to false";
    const std::string precision = "the mixed-precision issue";
    const std::string zero = "the ZeRO-partitioning issue";
    const std::string offload = "the offload issue";
    const std::string zeropp = "the ZeRO++ issue";
    const std::string monitoring = "the monitoring issue";
    std::vector<Gate> t = {
        {"optimizer.type", check_optimizer},
        {"scheduler.type", check_scheduler},
        {"zero_optimization.offload_optimizer.device", check_muon_offload},
        // Precision.
        // bf16 and fp16 training are built; these switch DeepSpeed's other code paths on.
        row("bf16.immediate_grad_update",
            [](const Config& c) { return when_true(c.bf16.immediate_grad_update); },
            "immediate bf16 gradient updates", precision, off),
        row("fp16.fp16_master_weights_and_grads",
            [](const Config& c) { return when_true(c.fp16.fp16_master_weights_and_grads); },
            "fp16 master weights and gradients", precision, off),
        row("fp16.auto_cast", [](const Config& c) { return when_true(c.fp16.auto_cast); },
            "fp16 autocasting of inputs", precision, off),
        row("data_types.param_dtype",
            [](const Config& c) { return when_not_fp32(c.data_types.param_dtype, dtype_names()); },
            "16-bit parameters", precision, "remove the key or set it to \"fp32\""),
        row("data_types.buffer_dtype",
            [](const Config& c) { return when_not_fp32(c.data_types.buffer_dtype, dtype_names()); },
            "16-bit buffers", precision, "remove the key or set it to \"fp32\""),
        // ZeRO.
        // Stages 0-3 are built (reduce_scatter: false too); these switches ask for DeepSpeed's
        // other code paths.
                row("zero_optimization.allgather_partitions",
            [](const Config& c) {
              return c.zero_optimization.allgather_partitions ? std::nullopt
                                                              : std::optional<json>(false);
            },
            "broadcasts instead of all-gather for updated partitions", zero,
            "remove the key or set it to true"),
        row("zero_optimization.contiguous_gradients",
            [](const Config& c) {
              return c.zero_optimization.contiguous_gradients ? std::nullopt
                                                              : std::optional<json>(false);
            },
            "reducing gradients in place without a contiguous bucket", zero,
            "remove the key or set it to true"),
        row("zero_optimization.round_robin_gradients",
            [](const Config& c) { return when_true(c.zero_optimization.round_robin_gradients); },
            "round-robin gradient partitioning", zero, off),
        // Optimizer offload to CPU memory and to NVMe is built (stages 1-3), parameter offload
        // (stage 3), and partial optimizer offload to CPU memory (ratio < 1, stage 3).
        // SuperOffload (DeepSpeed's engine for Grace-Hopper-class superchips); its
        // cpuadam_cores_perc and convert_grad_on_cpu only apply with it, as in DeepSpeed.
        row("zero_optimization.offload_optimizer.super_offload",
            [](const Config& c) { return when_true(c.zero_optimization.offload_optimizer.super_offload); },
            "SuperOffload", offload, "remove the key or set it to false (ZeRO-Offload then runs)"),
        row("zero_optimization.offload_optimizer.ratio",
            [](const Config& c) {
              const auto& o = c.zero_optimization.offload_optimizer;
              return o.device == OffloadDevice::kNvme && o.ratio < 1.0 ? std::optional<json>(o.ratio)
                                                                       : std::nullopt;
            },
            "partial optimizer offload to NVMe (ratio < 1 is built for device \"cpu\")", offload,
            "remove the key or set it to 1"),
        row("zero_optimization.zero_quantized_nontrainable_weights",
            [](const Config& c) {
              return when_true(c.zero_optimization.zero_quantized_nontrainable_weights);
            },
            "ZeRO++ quantized frozen weights", zeropp, off),
        row("zero_optimization.zeropp_loco_param",
            [](const Config& c) { return when_set(c.zero_optimization.zeropp_loco_param); },
            "LoCo-ZeRO++", zeropp, "remove the key"),
        row("zero_optimization.mics_shard_size",
            [](const Config& c) {
              const int64_t size = c.zero_optimization.mics_shard_size;
              return size > 0 ? std::optional<json>(size) : std::nullopt;
            },
            "MiCS sharding", zero, "remove the key or set it to -1"),
        row("zero_optimization.mics_hierarchical_params_gather",
            [](const Config& c) {
              return when_true(c.zero_optimization.mics_hierarchical_params_gather);
            },
            "MiCS hierarchical gathering", zero, off),
        row("zero_optimization.zenflow",
            [](const Config& c) { return when_set(c.zero_optimization.zenflow); },
            "ZenFlow", offload, "remove the key"),
        // Parallelism and communication.
        // Tensor parallelism runs (autotp_size, or zero train --tensor-parallel-size: model/
        // tensor_parallel.h); the section's other settings changed from DeepSpeed's defaults are
        // not acted on. (Pipeline parallelism runs: engine/pipeline_engine.h refuses the
        // pipeline keys it does not act on.)
        row("tensor_parallel", [](const Config& c) { return tensor_parallel_extras(c); },
            "tensor_parallel settings other than autotp_size", "the 3D-parallelism issue",
            "remove them (keep \"autotp_size\", which zero.cpp acts on)"),
                        // Monitoring and profiling.
        row("comms_logger.debug",
            [](const Config& c) { return when_true(c.comms_logger.enabled && c.comms_logger.debug); },
            "caller names in communication logs", monitoring, off),
        row("wandb.enabled", [](const Config& c) { return when_true(c.wandb.enabled); },
            "Weights & Biases logging", "",
            "it needs a network; remove the section or set it to false, and log offline with the "
            "tensorboard or csv_monitor section (or `zero train --log-json FILE`)"),
        // Checkpoints and engine API.
        row("checkpoint.load_universal",
            [](const Config& c) { return when_true(c.checkpoint.load_universal); },
            "loading universal checkpoints", "the checkpoint-conversion issue", off),
        row("checkpoint.use_node_local_storage",
            [](const Config& c) { return when_true(c.checkpoint.use_node_local_storage); },
            "node-local checkpoint storage", "the multi-node issue", off),
        row("checkpoint.parallel_write.pipeline_stage",
            [](const Config& c) { return when_true(c.checkpoint.parallel_write.pipeline_stage); },
            "parallel checkpoint writing by pipeline stage", "the pipeline-parallelism issue", off),
        row("checkpoint.writer", [](const Config& c) { return when_set(c.checkpoint.writer); },
            "DeepSpeed's fast checkpoint writer", "", "remove the key"),
        row("managed_gradient_accumulation",
            [](const Config& c) {
              return c.managed_gradient_accumulation ? std::nullopt : std::optional<json>(false);
            },
            "client-managed accumulation boundaries", "", "remove the key or set it to true"),
    };
    // Recognised sections zero.cpp does not model at all.
    for (const OtherSection& section : other_sections()) {
      t.push_back(row(
          section.key,
          [key = section.key](const Config& c) -> std::optional<json> {
            const auto it = c.unmodeled_sections.find(key);
            if (it == c.unmodeled_sections.end() || !other_section_in_use(it->second)) {
              return std::nullopt;
            }
            return it->second;
          },
          section.what, "",
          section.fix.empty() ? "remove the key (or set \"enabled\": false in it)" : section.fix));
    }
    return t;
  }();
  return table;
}

std::string message_for(const std::string& source, const std::string& key, const Use& use) {
  std::string text = source + ": key '" + key + "' = " + use.value.dump() + ": " + use.what +
                     " is not supported yet by zero.cpp";
  if (!use.lands_with.empty()) text += " (it lands with " + use.lands_with + ")";
  return text + "; " + use.fix;
}

}  // namespace

std::vector<UnsupportedUse> find_unsupported(const DeepSpeedConfig& config,
                                             const std::string& source) {
  std::vector<UnsupportedUse> found;
  for (const Gate& gate : gates()) {
    if (const std::optional<Use> use = gate.check(config)) {
      found.push_back({gate.key, message_for(source, gate.key, *use)});
    }
  }
  return found;
}

void check_supported(const DeepSpeedConfig& config, const std::string& source) {
  const std::vector<UnsupportedUse> found = find_unsupported(config, source);
  if (found.empty()) return;
  std::string message = found.front().message;
  if (found.size() > 1) {
    message += "; also not supported yet:";
    for (size_t i = 1; i < found.size(); ++i) message += " '" + found[i].key + "'";
  }
  throw UnsupportedError(message);
}

}  // namespace zero::config
