#include "engine/memory_preflight.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/checked_math.h"
#include "core/error.h"
#include "sharding/activation_estimator.h"
#include "sharding/model_parallel_share.h"

namespace zero::engine {
namespace {

// Its model states are 16-bit parameters plus fp32 master weights and optimizer states (20 bytes
// a parameter unpartitioned); zero.cpp's f32 training needs 16 of those 20 (parameters,
// gradients, two Adam moments), so the figure stands for f32 and scales only for wider dtypes.
constexpr int64_t kEstimatorStateWidth = 4;

const char* const kWhat = "the memory this run needs";

void require(bool ok, const std::string& problem) {
  if (!ok) throw ConfigError("memory preflight: " + problem);
}

// bytes * numerator / denominator, overflow-checked.
int64_t scaled(int64_t bytes, int64_t numerator, int64_t denominator) {
  return checked_product({bytes, numerator}, kWhat) / denominator;
}

std::string fixes(const MemoryPreflightRequest& r) {
  return "lower --micro-batch (train_micro_batch_size_per_gpu) or --seq-len" +
         std::string(r.activation_checkpointing ? "" : ", turn on --gradient-checkpointing true") +
         ", raise zero_optimization.stage (now " + std::to_string(r.zero_stage) +
         ") to partition the states over more ranks, or use a smaller model (--model, or the "
         "sizes in its config.json)" +
         std::string(r.tiled_mlp_shards == 1 || r.tiled_logits_shards == 1
                         ? "; for long sequences --tiled-mlp auto and --tiled-logits auto keep "
                           "only one shard of the MLP and logits intermediates"
                         : "");
}

// What frees host memory in a device run: only the parts kept there.
std::string host_fixes(const MemoryNeed& need) {
  std::string fix;
  if (need.offloaded_bytes > 0) {
    fix = "put the offloaded optimizer states on NVMe (zero_optimization.offload_optimizer.device "
          "\"nvme\" with nvme_path), spread them over more machines' ranks, or keep them on the "
          "device (offload_optimizer.device \"none\")";
  }
  if (need.checkpoint_host_bytes > 0) {
    fix += std::string(fix.empty() ? "" : "; ") +
           "turn activation_checkpointing.cpu_checkpointing off (the checkpointed block inputs "
           "then stay on the device) or lower --micro-batch or --seq-len";
  }
  return fix;
}

}  // namespace

namespace {

// A transformer block's matrices as [rows, cols] (what Muon orthogonalizes); GPT-2 fuses q, k
// and v, Llama's MLP gates.
std::vector<std::pair<int64_t, int64_t>> block_matrices(const model::TransformerConfig& c) {
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), inter = c.intermediate_size;
  if (c.family == model::ModelFamily::kGpt2) {
    return {{q + 2 * kv, h}, {h, q}, {inter, h}, {h, inter}};
  }
  std::vector<std::pair<int64_t, int64_t>> matrices = {{q, h}, {kv, h}, {kv, h}, {h, q}};
  if (c.is_moe()) matrices.push_back({c.num_experts, h});  // the router
  for (int64_t e = 0; e < (c.is_moe() ? c.num_experts : 1); ++e) {
    matrices.insert(matrices.end(), {{inter, h}, {inter, h}, {h, inter}});
  }
  return matrices;
}

}  // namespace

int64_t muon_matrix_params(const model::TransformerConfig& c) {
  int64_t block = 0;
  for (const auto& [rows, cols] : block_matrices(c)) {
    block = checked_sum(block, checked_product({rows, cols}, kWhat), kWhat);
  }
  return checked_product({block, c.num_layers}, kWhat);
}

int64_t muon_step_workspace_bytes(const model::TransformerConfig& c) {
  const std::vector<std::pair<int64_t, int64_t>> matrices = block_matrices(c);
  const int64_t h = c.hidden_size;
  int64_t block = checked_product({8, h}, kWhat);  // norms and biases, generously
  int64_t largest = 0, largest_gram = 0;
  for (const auto& [rows, cols] : matrices) {
    const int64_t elements = checked_product({rows, cols}, kWhat);
    block = checked_sum(block, elements, kWhat);
    largest = std::max(largest, elements);
    largest_gram = std::max(largest_gram, checked_product({std::min(rows, cols),
                                                           std::min(rows, cols)}, kWhat));
  }
  const int64_t elements =
      checked_sum(checked_sum(block, largest, kWhat), checked_product({2, largest_gram}, kWhat),
                  kWhat);
  return checked_product({4, elements}, kWhat);
}

namespace {

MemoryNeed estimate(const model::TransformerConfig& config, const MemoryPreflightRequest& r,
                    const sharding::ZeroOptions& options) {
  // What one rank of the largest pipeline stage and its tensor-parallel slice holds, ZeRO
  // partitioning over the data-parallel ranks (shared with `zero estimate`).
  const sharding::ModelParallelShare share = sharding::model_parallel_share(
      config, r.pipeline_stages, r.tensor_parallel, r.world_size, r.ranks_on_this_machine);
  const sharding::EstimateShape& shape = share.shape;
  const sharding::ModelStateMemory states = sharding::estimate_model_states(shape, options);

  MemoryNeed need;
  const int64_t partitioned = r.param_bytes > kEstimatorStateWidth
                                  ? scaled(states.gpu_bytes, r.param_bytes, kEstimatorStateWidth)
                                  : states.gpu_bytes;
  // Unless it is built partitioned (zero.Init), every rank first builds the whole model
  // (parameters and gradients) before ZeRO partitions it, so that is a floor whatever the stage.
  // (With pipeline or tensor parallelism a rank builds only its stage's slice.)
  const int64_t whole_model =
      r.builds_partitioned ? 0 : checked_product({shape.total_params, 2, r.param_bytes}, kWhat);
  // Muon keeps no second moment on the blocks' matrices: 4 bytes fewer each, partitioned with
  // the optimizer states from stage 1 on.
  const int64_t muon_saving =
      r.muon ? checked_product({muon_matrix_params(config), 4}, kWhat) /
                   (r.zero_stage >= 1 ? r.world_size : 1)
             : 0;
  need.model_state_bytes = std::max(partitioned - muon_saving, whole_model);
  if (r.onebit_compression && r.world_size > 1) {
    const int64_t worker = checked_product({shape.total_params, 4}, kWhat);
    need.model_state_bytes =
        checked_sum(need.model_state_bytes, checked_sum(worker, worker / r.world_size, kWhat),
                    kWhat);
  }
  const int64_t data_parallel = r.world_size / (r.pipeline_stages * r.tensor_parallel);
  if (r.zero_stage == 3 && r.hpz_partition_size > 1 && data_parallel > 1) {
    const int64_t secondary =
        checked_product({shape.total_params, r.param_bytes}, kWhat) / r.hpz_partition_size;
    need.model_state_bytes = checked_sum(need.model_state_bytes, secondary, kWhat);
  }
  need.rank_params = shape.total_params;

  // The same activation model `zero estimate` uses, at this run's element width (the logits
  // at least f32) and with its long-sequence options.
  sharding::ActivationSettings settings;
  settings.micro_batch = r.micro_batch;
  settings.seq_len = r.seq_len;
  settings.checkpointing = r.activation_checkpointing;
  settings.activation_bytes = r.activation_bytes;
  settings.tiled_mlp_shards = r.tiled_mlp_shards;
  settings.tiled_logits_shards = r.tiled_logits_shards;
  settings.sequence_parallel = r.sequence_parallel;
  settings.cpu_checkpointing = r.cpu_checkpointing && r.activation_checkpointing;
  // One tensor-parallel rank's activations: its heads, MLP width and vocabulary part.
  const sharding::ActivationMemory activations = sharding::estimate_activations(
      sharding::tensor_parallel_activation_config(share.stage, r.tensor_parallel), settings);
  // 1F1B: the first stage holds this many micro-batches' activations before its first backward.
  const int64_t in_flight =
      sharding::micro_batches_in_flight(r.pipeline_stages, r.gradient_accumulation);
  need.activation_bytes = checked_product({activations.peak_bytes, in_flight}, kWhat);
  if (r.muon) {
    need.activation_bytes = std::max(need.activation_bytes, muon_step_workspace_bytes(config));
  }
  need.checkpoint_host_bytes = checked_product({activations.host_bytes, in_flight}, kWhat);

  if (options.offload_optimizer != sharding::OffloadDevice::kNone) {
    need.offloaded_bytes = states.cpu_bytes;
  }
  const int64_t per_rank =
      checked_sum(checked_sum(need.model_state_bytes, need.activation_bytes, kWhat),
                  need.checkpoint_host_bytes, kWhat);
  need.total_bytes = checked_sum(checked_product({per_rank, r.ranks_on_this_machine}, kWhat),
                                 need.offloaded_bytes, kWhat);
  return need;
}

}  // namespace

MemoryNeed estimate_training_memory(const model::TransformerConfig& config,
                                    const MemoryPreflightRequest& r) {
  require(r.micro_batch >= 1, "--micro-batch (train_micro_batch_size_per_gpu) must be at least 1, "
                              "got " + std::to_string(r.micro_batch));
  require(r.seq_len >= 1, "--seq-len must be at least 1, got " + std::to_string(r.seq_len));
  require(r.param_bytes >= 1 && r.param_bytes <= 8,
          "the parameter dtype's size must be 1 to 8 bytes, got " + std::to_string(r.param_bytes));
  require(r.activation_bytes >= 1 && r.activation_bytes <= 8,
          "the activation dtype's size must be 1 to 8 bytes, got " +
              std::to_string(r.activation_bytes));
  require(r.world_size >= 1 && r.ranks_on_this_machine >= 1 &&
              r.ranks_on_this_machine <= r.world_size,
          "the ranks on this machine (" + std::to_string(r.ranks_on_this_machine) +
              ") must be between 1 and the world size (" + std::to_string(r.world_size) + ")");
  require(r.sequence_parallel >= 1 && r.seq_len % r.sequence_parallel == 0,
          "sequence_parallel_size (" + std::to_string(r.sequence_parallel) +
              ") must be at least 1 and divide --seq-len (" + std::to_string(r.seq_len) + ")");
  require(r.tiled_mlp_shards >= 0 && r.tiled_logits_shards >= 0,
          "--tiled-mlp and --tiled-logits must be auto, off or a shard count");
  require(r.pipeline_stages >= 1 && r.tensor_parallel >= 1 && r.gradient_accumulation >= 1 &&
              r.world_size % (r.pipeline_stages * r.tensor_parallel) == 0,
          "the world size (" + std::to_string(r.world_size) + ") must be a multiple of the " +
              "pipeline stages (" + std::to_string(r.pipeline_stages) + ") times the " +
              "tensor-parallel size (" + std::to_string(r.tensor_parallel) + ")");
  config.validate("model config");
  const sharding::ZeroOptions options{r.zero_stage, r.offload_optimizer, r.offload_param,
                                      r.builds_partitioned};
  sharding::validate_options(options);
  try {
    return estimate(config, r, options);
  } catch (const ConfigError& e) {
    // Only arithmetic is left to fail: the bytes overflow a 64-bit count.
    throw ConfigError("not enough memory for this run: " + std::string(e.what()) +
                      " (--micro-batch " + std::to_string(r.micro_batch) + ", --seq-len " +
                      std::to_string(r.seq_len) + "); " + fixes(r));
  }
}

MemoryNeed check_training_memory(const model::TransformerConfig& config,
                                 const MemoryPreflightRequest& request) {
  return check_training_memory(config, request, host_memory());
}

namespace {

// "model states X per rank (parameters, gradients and optimizer states of ...) + activations Y
// per rank (--micro-batch B x --seq-len T), times N <where>".
std::string describe_device_parts(const model::TransformerConfig& config,
                                  const MemoryPreflightRequest& r, const MemoryNeed& need,
                                  const std::string& times_ranks) {
  const int64_t model_ranks = r.pipeline_stages * r.tensor_parallel;
  const std::string whose =
      model_ranks == 1
          ? std::to_string(config.num_parameters()) + " parameters at ZeRO stage " +
                std::to_string(r.zero_stage) + " over " + std::to_string(r.world_size) + " rank(s)"
          : std::to_string(need.rank_params) + " parameters (this rank's pipeline stage of " +
                std::to_string((config.num_layers + r.pipeline_stages - 1) / r.pipeline_stages) +
                " blocks, 1/" + std::to_string(r.tensor_parallel) + " of them by tensor " +
                "parallelism) at ZeRO stage " + std::to_string(r.zero_stage) + " over " +
                std::to_string(r.world_size / model_ranks) + " data-parallel rank(s)";
  return "model states " + format_gib(need.model_state_bytes) +
         " per rank (parameters, gradients and optimizer states of " + whose +
         ") + activations " + format_gib(need.activation_bytes) + " per rank (--micro-batch " +
         std::to_string(r.micro_batch) + " x --seq-len " + std::to_string(r.seq_len) + "), times " +
         times_ranks;
}

// The host-memory parts, each preceded by `separator`: cpu_checkpointing's block inputs and
// offloaded optimizer states ("" when there are none).
std::string describe_host_parts(const MemoryNeed& need, const std::string& separator) {
  std::string detail;
  if (need.checkpoint_host_bytes > 0) {
    detail += separator + format_gib(need.checkpoint_host_bytes) +
              " per rank of checkpointed block inputs in host memory (cpu_checkpointing)";
  }
  if (need.offloaded_bytes > 0) {
    detail += separator + format_gib(need.offloaded_bytes) + " of offloaded optimizer states";
  }
  return detail;
}

}  // namespace

MemoryNeed check_training_memory(const model::TransformerConfig& config,
                                 const MemoryPreflightRequest& r, const HostMemory& memory) {
  const MemoryNeed need = estimate_training_memory(config, r);
  if (need.total_bytes <= memory.usable_bytes()) return need;
  const std::string detail =
      describe_device_parts(config, r, need,
                            std::to_string(r.ranks_on_this_machine) + " rank(s) on this machine") +
      describe_host_parts(need, ", + ");
  throw ConfigError("not enough memory for this run: it needs about " +
                    format_gib(need.total_bytes) + " on this machine (" + detail +
                    "), more than its " + memory.describe() + ". To fit: " + fixes(r));
}

MemoryNeed check_training_memory(const model::TransformerConfig& config,
                                 const MemoryPreflightRequest& r, const HostMemory& memory,
                                 const DeviceMemory& device) {
  MemoryNeed need = estimate_training_memory(config, r);
  require(device.capacity_bytes > 0, device.name + " reports no memory");
  require(device.ranks_sharing >= 1 && device.ranks_sharing <= r.ranks_on_this_machine,
          "the ranks sharing " + device.name + " (" + std::to_string(device.ranks_sharing) +
              ") must be between 1 and the ranks on this machine (" +
              std::to_string(r.ranks_on_this_machine) + ")");
  const int64_t per_rank = checked_sum(need.model_state_bytes, need.activation_bytes, kWhat);
  need.device_bytes = checked_product({per_rank, device.ranks_sharing}, kWhat);
  need.host_bytes =
      checked_sum(checked_product({need.checkpoint_host_bytes, r.ranks_on_this_machine}, kWhat),
                  need.offloaded_bytes, kWhat);
  if (need.device_bytes > device.capacity_bytes) {
    const std::string offload =
        r.offload_optimizer == sharding::OffloadDevice::kNone
            ? "; or keep the optimizer states in host memory "
              "(zero_optimization.offload_optimizer.device \"cpu\", ZeRO stage 1-3)"
            : "";
    throw ConfigError(
        "not enough memory for this run: it needs about " + format_gib(need.device_bytes) +
        " on " + device.name + " (" +
        describe_device_parts(config, r, need,
                              std::to_string(device.ranks_sharing) + " rank(s) on this device") +
        "), more than its " + format_gib(device.capacity_bytes) + ". To fit: " + fixes(r) +
        offload);
  }
  if (need.host_bytes > memory.usable_bytes()) {
    throw ConfigError("not enough host memory for this run: it needs about " +
                      format_gib(need.host_bytes) + " in this machine's memory (" +
                      describe_host_parts(need, " + ").substr(3) + ", for " +
                      std::to_string(r.ranks_on_this_machine) + " rank(s)), more than its " +
                      memory.describe() + ". To fit: " + host_fixes(need));
  }
  return need;
}

}  // namespace zero::engine
