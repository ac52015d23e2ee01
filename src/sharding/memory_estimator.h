// Memory needed to train a model under ZeRO stages 0-3, with and without offload: the model
// states (parameters, gradients, optimizer states) by DeepSpeed's own estimators, plus what
// those estimators leave out and what makes users OOM: activations and the logits buffer for a
// given micro-batch, sequence length and checkpointing setting. Pure arithmetic, no printing.
// The sizes come from config.json and flags, so every product and sum is overflow-checked: a
// count beyond int64 is a ConfigError ("... is too large"), never a wrapped byte count.
//
// Model states (P parameters, N = total GPUs, abf = additional_buffer_factor, gf = 1/nodes,
// LL = 4 x largest layer's parameters, the buffer a stage-3 gather of the largest layer needs):
//
//   stage 0, no offload   GPU 20P               CPU 4P * gpn * abf
//   stage 1, no offload   GPU 4P + 16P/N        CPU 4P * gpn * abf
//   stage 1, optim cpu    GPU 4P                CPU P * max(4N, 16) * abf
//   stage 2, no offload   GPU 2P + 18P/N        CPU 4P * gpn * abf        (DeepSpeed)
//   stage 2, optim cpu    GPU 2P                CPU P * max(4N, 16) * abf (DeepSpeed)
//   stage 3, both cpu     GPU LL                CPU 18P * gf * abf        (DeepSpeed, zero_init)
//   stage 3, optim cpu    GPU LL + 2P/N         CPU 16P * gf * abf        (DeepSpeed, zero_init)
//   stage 3, no offload   GPU LL + 18P/N        CPU 4 * largest * gpn * abf (DeepSpeed, zero_init)
//   stage 3, params only  GPU LL + 16P/N        CPU 2P * gf * abf  (no DeepSpeed row: the no-
//                         offload figure with the fp16 params on the host; NVMe: 2P on disk)
//   stage 3 without zero_init: CPU P * max(4 * gpn, X * gf) * abf for X = 18 / 16, and
//   4P * gpn * abf without offload (every process first builds the whole fp32 model).
//
// DeepSpeed's stage-2 GPU figure splits as 2 (fp16 params) + 18/N (2 fp16 grads + 4 fp32 grads
// + 4 fp32 master params + 8 Adam moments). Stages 0 and 1 are not in DeepSpeed's estimators;
// they are derived with the same byte counts so the stages order sensibly (at N = 1 all of 0,
// 1 and 2 give 20P): stage 0 replicates everything (2 + 18 = 20P); stage 1 keeps the full
// fp16 params and fp16 grads (4P) and partitions the other 16 bytes. The textbook 16P / 4P +
// 12P/N leave out the fp32 gradient buffer DeepSpeed counts and would make stage 1 cheaper
// than stage 2 on one or two GPUs. Offload needs stage >= 1 (DeepSpeed rejects it at stage 0);
// stage 1 with optimizer offload keeps its fp16 params and full fp16 grads on the GPU (4P) and
// needs the same host memory as stage 2's offload.
//
// NVMe (ZeRO-Infinity, stage 3 only): GPU memory is that of the cpu offload. Optimizer offload
// to NVMe moves the fp32 master params and Adam moments (12 bytes/param) off the host, param
// offload to NVMe the fp16 params (2 bytes/param); the host keeps the rest (fp32 grads, pinned
// swap buffers: covered by abf). So CPU = P * max(4 * gpn if not zero_init, (X - moved) * gf) *
// abf, and NVMe per node = moved * P * gf.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/transformer_config.h"
#include "sharding/activation_estimator.h"

namespace zero::sharding {

enum class OffloadDevice { kNone, kCpu, kNvme };
const char* offload_device_name(OffloadDevice device);  // "none", "cpu", "nvme"

// The sizes DeepSpeed's estimators take.
struct EstimateShape {
  int64_t total_params = 0;
  int64_t largest_layer_params = 0;  // only stage 3 uses it
  int64_t gpus_per_node = 1;
  int64_t num_nodes = 1;
  double additional_buffer_factor = 1.5;  // DeepSpeed's default headroom on host memory
  int64_t total_gpus() const { return gpus_per_node * num_nodes; }
};

// One ZeRO configuration, as in DeepSpeed's zero_optimization section.
struct ZeroOptions {
  int stage = 0;
  OffloadDevice offload_optimizer = OffloadDevice::kNone;
  OffloadDevice offload_param = OffloadDevice::kNone;  // stage 3 only
  // Stage 3 only: the model is built already partitioned (deepspeed.zero.Init), so no process
  // ever holds the whole model in host memory. Changes the CPU figure only.
  bool zero_init = true;
};

struct ModelStateMemory {
  int64_t gpu_bytes = 0;   // per GPU
  int64_t cpu_bytes = 0;   // host memory per node
  int64_t nvme_bytes = 0;  // per node
};

// Throws ConfigError for a combination DeepSpeed cannot run (offload at stage 0, param offload
// below stage 3, NVMe below stage 3, a stage outside 0-3).
void validate_options(const ZeroOptions& options);

// Model-state memory of `options` for `shape` (validates both).
ModelStateMemory estimate_model_states(const EstimateShape& shape, const ZeroOptions& options);

// The rows to show for `stage` (or for all stages when empty): the combinations DeepSpeed's
// estimate_*_all_cold print (cpu offload on/off, zero_init on/off for stage 3), narrowed to the
// given offload devices when those are set. NVMe rows appear only when asked for.
std::vector<ZeroOptions> estimator_rows(std::optional<int> stage,
                                        std::optional<OffloadDevice> offload_optimizer,
                                        std::optional<OffloadDevice> offload_param);

// Speed rank of a configuration (lower is faster): each offloaded state costs 1 (cpu) or 3
// (nvme), so no offload < optimizer to cpu < optimizer and params to cpu < optimizer to nvme <
// one to nvme and one to cpu < both to nvme; within a level a lower stage wins (less
// communication).
int configuration_cost(const ZeroOptions& options);

// The largest single module's parameter count, as DeepSpeed's model_to_params counts modules
// (weights plus bias of one module): the token embedding (vocab x hidden) for most models.
int64_t largest_layer_params(const model::TransformerConfig& config);

// Activations (ActivationSettings, estimate_activations, longest_fitting_seq_len): see
// sharding/activation_estimator.h. For GPT-2 (q = k = h, I = 4h) with a stored softmax and
// dropout a block's saved set is Megatron's bsh(34 + 5as/h) ("Reducing Activation Recomputation
// in Large Transformer Models", Korthikanti et al. 2022).

// A row to judge against a memory budget.
struct FitCandidate {
  ZeroOptions options;
  int64_t gpu_bytes = 0;  // everything per GPU: model states + activations + logits
  int64_t cpu_bytes = 0;  // host memory per node
};

// Index of the fastest candidate (lowest configuration_cost, then least GPU memory) whose GPU
// bytes fit `gpu_budget_bytes` and, when `cpu_budget_bytes` is set, whose CPU bytes fit it.
std::optional<size_t> cheapest_fitting(const std::vector<FitCandidate>& candidates,
                                       int64_t gpu_budget_bytes,
                                       std::optional<int64_t> cpu_budget_bytes);

}  // namespace zero::sharding
