// Memory preflight: before a training run allocates anything, estimate the bytes the model and
// batch need on this machine (sharding/memory_estimator.h: DeepSpeed's model-state accounting
// plus activations and logits) and refuse, with both numbers and the flags or keys to change,
// a run that cannot fit. Linux overcommits, so without this a too-large run "allocates" fine
// and is killed later (or swaps for hours).
#pragma once
#include <cstdint>
#include <string>

#include "core/host_memory.h"
#include "model/transformer_config.h"
#include "sharding/memory_estimator.h"

namespace zero::engine {

// One training run's sizes, as `zero train` knows them after reading flags and the DeepSpeed
// config.
struct MemoryPreflightRequest {
  int64_t micro_batch = 1;       // --micro-batch / train_micro_batch_size_per_gpu
  int64_t seq_len = 1;           // --seq-len
  int64_t param_bytes = 4;       // bytes per parameter element (dtype_size of the param dtype)
  int64_t activation_bytes = 4;  // bytes per stored activation element
  int zero_stage = 0;            // zero_optimization.stage
  int64_t world_size = 1;        // data-parallel ranks sharing the ZeRO partitions
  int64_t ranks_on_this_machine = 1;  // processes of the job on this host
  bool activation_checkpointing = false;  // --gradient-checkpointing
  // Long-sequence options (sharding/activation_estimator.h has what each changes):
  int64_t tiled_mlp_shards = 1;     // --tiled-mlp: 1 off, model::kAutoShards (0) auto, N
  int64_t tiled_logits_shards = 1;  // --tiled-logits, likewise
  int64_t sequence_parallel = 1;    // sequence_parallel_size (Ulysses): t = b*s/sp rows a rank
  bool cpu_checkpointing = false;   // activation_checkpointing.cpu_checkpointing
  sharding::OffloadDevice offload_optimizer = sharding::OffloadDevice::kNone;
  sharding::OffloadDevice offload_param = sharding::OffloadDevice::kNone;
  // The model is built partitioned (zero.Init at stage 3): no rank ever holds it whole.
  bool builds_partitioned = false;
  // 3D parallelism (world_size = pipeline_stages x tensor_parallel x data-parallel ranks): a rank
  // holds one pipeline stage (the largest counts: ceil(layers / stages) blocks, with the
  // embedding and the head as if every stage had them) and 1/tensor_parallel of its weights;
  // ZeRO partitions over the data-parallel ranks only; 1F1B keeps the activations of up to
  // min(stages, gradient_accumulation) micro-batches in the first stage at once.
  int64_t pipeline_stages = 1;
  int64_t tensor_parallel = 1;
  int64_t gradient_accumulation = 1;  // gradient_accumulation_steps (the pipeline's micro-batches)
  // OneBitAdam on more than one rank: its error-feedback buffers, f32 worker errors for every
  // parameter and server errors for 1/world of them (comm/compressed_all_reduce.h).
  bool onebit_compression = false;
  // ZeRO++'s hpZ (zero_optimization.zero_hpz_partition_size k > 1, stage 3 on several
  // data-parallel ranks): each rank keeps a 1/k slice of every gathered unit from the forward
  // to the backward (sharding/zero_plus_plus.h), P/k parameter elements at the peak.
  int64_t hpz_partition_size = 1;
  // Muon: the blocks' matrices keep one optimizer state instead of Adam's two (4 bytes an
  // element fewer), and its step orthogonalizes one transformer block's matrices at a time, in
  // f32 workspace (the block's proposed updates, and Newton-Schulz's second matrix and two Gram
  // matrices). The step runs after backward has freed the activations, so the larger of the two
  // counts.
  bool muon = false;
};

// The elements of the transformer blocks' matrices (the ones Muon orthogonalizes).
int64_t muon_matrix_params(const model::TransformerConfig& config);

// The workspace bytes of Muon's step on `config`'s largest block (MemoryPreflightRequest::muon).
int64_t muon_step_workspace_bytes(const model::TransformerConfig& config);

// A device with memory of its own (a GPU) that the run's tensors live on. Without one (the CPU
// backend, the simulated device) every byte of the estimate is host memory.
struct DeviceMemory {
  std::string name;            // the device as the user named it, e.g. "cuda:0"
  int64_t capacity_bytes = 0;  // its total memory (Backend::device_memory_capacity_bytes)
  // Ranks of this machine training on this one device (several share GPU 0 when there are more
  // ranks than GPUs: the host-staged path); their model states and activations add up there.
  int64_t ranks_sharing = 1;
};

// What the estimate found, in bytes.
struct MemoryNeed {
  int64_t model_state_bytes = 0;  // per rank: parameters, gradients, optimizer states
  int64_t rank_params = 0;        // parameters a rank's states are of (its stage / tp slice)
  int64_t activation_bytes = 0;   // per rank: peak activations and logits of one micro-batch
  int64_t checkpoint_host_bytes = 0;  // per rank: cpu_checkpointing's saved inputs, host memory
  int64_t offloaded_bytes = 0;    // host memory of offloaded states, whole machine
  int64_t total_bytes = 0;  // this machine: ranks x (states + activations + host) + offloaded
  // Where the run has a device (check_training_memory with a DeviceMemory): the device's share,
  // ranks_sharing x (states + activations), and the host's, total_bytes less the device parts.
  int64_t device_bytes = 0;
  int64_t host_bytes = 0;
};

// The estimate alone. Throws ConfigError for invalid sizes (naming the flag) or when the bytes
// do not fit a 64-bit count (far beyond any machine).
MemoryNeed estimate_training_memory(const model::TransformerConfig& config,
                                    const MemoryPreflightRequest& request);

// The estimate, compared with `memory` (by default this machine's: host_memory()). Throws
// ConfigError "... needs about X GiB on this machine ..., more than its Y GiB ...; lower
// --micro-batch (train_micro_batch_size_per_gpu) or --seq-len, ..." when it does not fit.
MemoryNeed check_training_memory(const model::TransformerConfig& config,
                                 const MemoryPreflightRequest& request);
MemoryNeed check_training_memory(const model::TransformerConfig& config,
                                 const MemoryPreflightRequest& request, const HostMemory& memory);
// A run on `device`: its model states and activations must fit the device's memory (a
// ConfigError "... needs about X GiB on cuda:0 ..., more than its Y GiB ..." with the same fixes,
// plus ZeRO-Offload), and what stays in host memory (cpu_checkpointing's block inputs,
// offloaded optimizer states) must fit `memory`.
MemoryNeed check_training_memory(const model::TransformerConfig& config,
                                 const MemoryPreflightRequest& request, const HostMemory& memory,
                                 const DeviceMemory& device);

}  // namespace zero::engine
