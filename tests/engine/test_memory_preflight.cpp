// Memory preflight: the bytes a model and batch need, compared with this machine's memory before
// anything is allocated; a run that cannot fit is a ConfigError giving both numbers and the flags
// and keys to change.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/memory_preflight.h"
#include "support/text_has.h"
#include "model/transformer_builder.h"
#include "model/transformer_config.h"

namespace zero::engine {
namespace memory_preflight_test {

using zero::testing::has;

HostMemory machine_with(int64_t bytes) {
  HostMemory memory;
  memory.physical_bytes = bytes;
  return memory;
}

// The ConfigError check_training_memory throws, with or without a device (`device...`).
template <typename... Device>
std::string error_of(const model::TransformerConfig& config, const MemoryPreflightRequest& r,
                     const HostMemory& memory, const Device&... device) {
  try {
    check_training_memory(config, r, memory, device...);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

TEST(MemoryPreflight, SmallRunFitsAndReportsItsNeed) {
  const model::TransformerConfig config = model::preset_config("tiny");
  MemoryPreflightRequest r;
  r.micro_batch = 4;
  r.seq_len = 64;
  const MemoryNeed need = check_training_memory(config, r);  // this machine
  EXPECT_GT(need.model_state_bytes, 2 * 4 * config.num_parameters() - 1);
  EXPECT_GT(need.activation_bytes, 0);
  EXPECT_EQ(need.total_bytes, need.model_state_bytes + need.activation_bytes);
}

TEST(MemoryPreflight, RunLargerThanMemoryNamesBothNumbersAndTheFlags) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  MemoryPreflightRequest r;
  r.micro_batch = 64;
  r.seq_len = 1024;
  const std::string message = error_of(config, r, machine_with(int64_t{8} << 30));
  EXPECT_TRUE(has(message, "not enough memory")) << message;
  EXPECT_TRUE(has(message, "8.0 GiB of physical memory")) << message;
  EXPECT_TRUE(has(message, "--micro-batch 64")) << message;
  EXPECT_TRUE(has(message, "train_micro_batch_size_per_gpu")) << message;
  EXPECT_TRUE(has(message, "--seq-len")) << message;
  EXPECT_TRUE(has(message, "zero_optimization.stage")) << message;
  EXPECT_TRUE(has(message, "--gradient-checkpointing")) << message;
  // The same run fits a machine with enough memory.
  EXPECT_NO_THROW(check_training_memory(config, r, machine_with(int64_t{1} << 40)));
}

TEST(MemoryPreflight, MoreRanksOnOneMachineNeedMore) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  MemoryPreflightRequest one;
  one.seq_len = 128;
  MemoryPreflightRequest four = one;
  four.world_size = 4;
  four.ranks_on_this_machine = 4;
  four.zero_stage = 3;
  const MemoryNeed a = estimate_training_memory(config, one);
  const MemoryNeed b = estimate_training_memory(config, four);
  EXPECT_GT(b.total_bytes, a.total_bytes);
  EXPECT_LE(b.model_state_bytes, a.model_state_bytes);
}

TEST(MemoryPreflight, WiderParametersNeedMore) {
  const model::TransformerConfig config = model::preset_config("tiny");
  MemoryPreflightRequest f32;
  f32.seq_len = 64;
  MemoryPreflightRequest f64 = f32;
  f64.param_bytes = 8;
  f64.activation_bytes = 8;
  EXPECT_GT(estimate_training_memory(config, f64).total_bytes,
            estimate_training_memory(config, f32).total_bytes);
}

// 1-bit Adam's error feedback on N > 1 ranks: f32 worker errors for every parameter and server
// errors for 1/N of them, on top of stage 0's states; one rank compresses nothing.
TEST(MemoryPreflight, OneBitAdamAddsItsErrorBuffers) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  MemoryPreflightRequest adam;
  adam.seq_len = 128;
  adam.world_size = 4;
  MemoryPreflightRequest onebit = adam;
  onebit.onebit_compression = true;
  const MemoryNeed a = estimate_training_memory(config, adam);
  const MemoryNeed b = estimate_training_memory(config, onebit);
  EXPECT_EQ(b.model_state_bytes - a.model_state_bytes, a.rank_params * 4 + a.rank_params * 4 / 4);
  adam.world_size = onebit.world_size = 1;
  EXPECT_EQ(estimate_training_memory(config, onebit).model_state_bytes,
            estimate_training_memory(config, adam).model_state_bytes);
}

// hpZ keeps a 1/k slice of every parameter from the forward to the backward: P * bytes / k more,
// only at stage 3 across data-parallel ranks.
TEST(MemoryPreflight, HpzSecondaryPartitionsAreCounted) {
  const model::TransformerConfig config = model::preset_config("tiny-llama");
  MemoryPreflightRequest plain;
  plain.seq_len = 64;
  plain.world_size = 8;
  plain.zero_stage = 3;
  plain.param_bytes = 2;
  MemoryPreflightRequest hpz = plain;
  hpz.hpz_partition_size = 4;
  const MemoryNeed a = estimate_training_memory(config, plain);
  const MemoryNeed b = estimate_training_memory(config, hpz);
  EXPECT_EQ(b.model_state_bytes - a.model_state_bytes, a.rank_params * 2 / 4);
  plain.zero_stage = hpz.zero_stage = 2;
  EXPECT_EQ(estimate_training_memory(config, hpz).model_state_bytes,
            estimate_training_memory(config, plain).model_state_bytes);
}

// Muon orthogonalizes every 2-D parameter of a transformer block (engine/muon_units.cpp); the
// preflight's count must be the built model's: for Mixtral, the router and each expert's three
// matrices, not one dense MLP.
// Also Qwen3's (query width apart from the hidden size; its q/k norms are vectors) and
// Qwen3-MoE's (experts of their own width).
TEST(MemoryPreflight, MuonMatricesOfMixtralAreTheBuiltBlocks) {
  for (const char* preset : {"tiny-mixtral", "tiny-qwen3", "tiny-qwen3-moe"}) {
    const model::TransformerConfig config = model::preset_config(preset);
    backend::CpuBackend cpu;
    auto net = model::build_transformer(config, cpu, DType::kF32);
    int64_t built = 0;
    for (const auto& unit : net->units()) {
      if (unit->kind() != "transformer_block") continue;
      for (const model::Parameter& p : unit->parameters()) {
        if (p.spec.shape.size() == 2) built += p.numel();
      }
    }
    EXPECT_EQ(muon_matrix_params(config), built) << preset;
  }
}

// Muon's step workspace: GPT-2 124M's block (c_attn [2304, 768], attn c_proj [768, 768], c_fc
// [3072, 768], mlp c_proj [768, 3072], norms and biases counted as 8 x 768), plus the largest
// matrix again (Newton-Schulz's second buffer) and two 768 x 768 Gram matrices, in f32. It
// counts only where it exceeds the activations, which the step follows. Its state is 4 bytes an
// element smaller on the matrices.
TEST(MemoryPreflight, MuonCountsItsStateAndItsStepWorkspace) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  const int64_t block = 8 * 768 + 2304 * 768 + 768 * 768 + 3072 * 768 + 768 * 3072;
  const int64_t expected = 4 * (block + 3072 * 768 + 2 * 768 * 768);
  EXPECT_EQ(muon_step_workspace_bytes(config), expected);
  MemoryPreflightRequest adam;
  adam.seq_len = 1;
  MemoryPreflightRequest muon = adam;
  muon.muon = true;
  EXPECT_LT(estimate_training_memory(config, adam).activation_bytes, expected);
  EXPECT_EQ(estimate_training_memory(config, muon).activation_bytes, expected);
  adam.seq_len = muon.seq_len = 1024;
  EXPECT_EQ(estimate_training_memory(config, muon).activation_bytes,
            estimate_training_memory(config, adam).activation_bytes);
  // No second moment on the matrices: 12 blocks' worth of 4 bytes fewer, half of that per rank
  // at stage 1 on 2 ranks (where the partitioned states still exceed the whole model's
  // parameters and gradients that every rank builds first).
  const int64_t matrices = 12 * (block - 8 * 768);
  EXPECT_EQ(muon_matrix_params(config), matrices);
  EXPECT_EQ(estimate_training_memory(config, adam).model_state_bytes -
                estimate_training_memory(config, muon).model_state_bytes,
            4 * matrices);
  adam.zero_stage = muon.zero_stage = 1;
  adam.world_size = muon.world_size = adam.ranks_on_this_machine = muon.ranks_on_this_machine = 2;
  EXPECT_EQ(estimate_training_memory(config, adam).model_state_bytes -
                estimate_training_memory(config, muon).model_state_bytes,
            4 * matrices / 2);
}

TEST(MemoryPreflight, OverflowingSizesAreRefusedFastWithTheFlags) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  MemoryPreflightRequest r;
  r.micro_batch = int64_t{1} << 40;
  r.seq_len = int64_t{1} << 30;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of(config, r, machine_with(int64_t{8} << 30));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_TRUE(has(message, "--micro-batch 1099511627776")) << message;
  EXPECT_TRUE(has(message, "--seq-len 1073741824")) << message;
}

TEST(MemoryPreflight, InvalidRequestsNameTheFlag) {
  const model::TransformerConfig config = model::preset_config("tiny");
  MemoryPreflightRequest r;
  r.micro_batch = 0;
  EXPECT_TRUE(has(error_of(config, r, machine_with(int64_t{1} << 40)), "--micro-batch"));
  r = {};
  r.seq_len = -5;
  EXPECT_TRUE(has(error_of(config, r, machine_with(int64_t{1} << 40)), "--seq-len"));
  r = {};
  r.ranks_on_this_machine = 3;
  EXPECT_TRUE(has(error_of(config, r, machine_with(int64_t{1} << 40)), "world size"));
}

// The preflight charges the long-sequence options through the same activation model as
// `zero estimate` (sharding/activation_estimator.h): tiling and sequence parallelism lower the
// activation bytes, cpu_checkpointing moves the saved block inputs to the host column, and a
// sequence that sequence_parallel_size does not divide is a clear error.
TEST(MemoryPreflight, LongSequenceOptionsUseTheEstimatorsActivations) {
  const model::TransformerConfig config = model::preset_config("llama-1b");
  MemoryPreflightRequest r;
  r.seq_len = 32768;
  r.activation_checkpointing = true;
  sharding::ActivationSettings s;
  s.seq_len = r.seq_len;
  s.checkpointing = true;
  s.activation_bytes = r.activation_bytes;
  const MemoryNeed plain = estimate_training_memory(config, r);
  EXPECT_EQ(plain.activation_bytes, sharding::estimate_activations(config, s).peak_bytes);
  EXPECT_EQ(plain.checkpoint_host_bytes, 0);

  r.tiled_mlp_shards = r.tiled_logits_shards = 0;  // auto
  const MemoryNeed tiled = estimate_training_memory(config, r);
  EXPECT_LT(tiled.activation_bytes, plain.activation_bytes / 2);

  r.cpu_checkpointing = true;
  const MemoryNeed on_host = estimate_training_memory(config, r);
  EXPECT_LT(on_host.activation_bytes, tiled.activation_bytes);
  // 16 block inputs of 32768 x 2048 f32 values.
  EXPECT_EQ(on_host.checkpoint_host_bytes, int64_t{16} * 32768 * 2048 * 4);
  EXPECT_EQ(on_host.total_bytes,
            on_host.model_state_bytes + on_host.activation_bytes + on_host.checkpoint_host_bytes);

  r.sequence_parallel = 4;
  EXPECT_LT(estimate_training_memory(config, r).activation_bytes, on_host.activation_bytes);
  r.seq_len = 32766;  // not a multiple of 4
  try {
    estimate_training_memory(config, r);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "sequence_parallel_size (4)")) << e.what();
    EXPECT_TRUE(has(e.what(), "--seq-len (32766)")) << e.what();
  }
}

}  // namespace memory_preflight_test
}  // namespace zero::engine

namespace zero::engine {
namespace memory_preflight_test {

// zero.Init: at stage 3 a model built partitioned never exists whole on a rank, so the whole
// model's parameters and gradients are no longer a floor; the other stages build it whole.
TEST(MemoryPreflight, PartitionedBuildDropsTheWholeModelFloor) {
  const model::TransformerConfig config = model::preset_config("tiny-llama");
  MemoryPreflightRequest r;
  r.zero_stage = 3;
  r.world_size = 8;
  r.ranks_on_this_machine = 8;
  const MemoryNeed whole = estimate_training_memory(config, r);
  r.builds_partitioned = true;
  const MemoryNeed partitioned = estimate_training_memory(config, r);
  EXPECT_EQ(whole.model_state_bytes, 2 * 4 * config.num_parameters());
  EXPECT_LT(partitioned.model_state_bytes, whole.model_state_bytes / 2);
}

}  // namespace memory_preflight_test
}  // namespace zero::engine

namespace zero::engine {
namespace memory_preflight_test {

// 3D parallelism: a rank holds one pipeline stage's blocks and a 1/tp slice of their weights,
// ZeRO partitions over the data-parallel ranks only, and 1F1B keeps several micro-batches'
// activations in the first stage. Before, the preflight charged every rank the whole model.
TEST(MemoryPreflight, PipelineAndTensorParallelRanksHoldTheirShare) {
  const model::TransformerConfig config = model::preset_config("llama-1b-mha");  // 16 layers
  MemoryPreflightRequest whole;
  whole.micro_batch = 1;
  whole.seq_len = 512;
  whole.world_size = 8;
  whole.ranks_on_this_machine = 8;
  whole.gradient_accumulation = 8;
  MemoryPreflightRequest piped = whole;
  piped.pipeline_stages = 4;  // 4 blocks a stage
  MemoryPreflightRequest sliced = piped;
  sliced.tensor_parallel = 2;  // dp = 1
  const MemoryNeed a = estimate_training_memory(config, whole);
  const MemoryNeed b = estimate_training_memory(config, piped);
  const MemoryNeed c = estimate_training_memory(config, sliced);

  // Stage 0 replicates the states: a rank holds its stage (4 of 16 blocks, embedding and head
  // counted as if every stage had them), then half of that with tp = 2.
  model::TransformerConfig stage = config;
  stage.num_layers = 4;
  EXPECT_LT(b.model_state_bytes, a.model_state_bytes / 2);
  EXPECT_GE(b.model_state_bytes, 16 * stage.num_parameters());  // f32: 16 bytes a parameter
  EXPECT_NEAR(static_cast<double>(c.model_state_bytes), b.model_state_bytes / 2.0,
              b.model_state_bytes * 1e-6);
  // Activations: 4 blocks of one micro-batch, times the min(4 stages, 8 micro-batches) in flight.
  MemoryPreflightRequest one_stage_depth = whole;
  const MemoryNeed four_blocks = estimate_training_memory(stage, one_stage_depth);
  EXPECT_EQ(b.activation_bytes, 4 * four_blocks.activation_bytes);
  MemoryPreflightRequest few = piped;
  few.gradient_accumulation = 2;  // only 2 micro-batches: 2 in flight
  EXPECT_EQ(estimate_training_memory(config, few).activation_bytes, 2 * four_blocks.activation_bytes);

  // A machine that cannot hold the unpipelined run holds the pipelined one.
  const HostMemory machine = machine_with(b.total_bytes + (int64_t{1} << 30));
  EXPECT_THROW(check_training_memory(config, whole, machine), ConfigError);
  EXPECT_NO_THROW(check_training_memory(config, piped, machine));
}

TEST(MemoryPreflight, AWorldThatIsNoMultipleOfTheModelRanksIsRefused) {
  const model::TransformerConfig config = model::preset_config("tiny");
  MemoryPreflightRequest r;
  r.world_size = 6;
  r.ranks_on_this_machine = 6;
  r.pipeline_stages = 4;
  try {
    estimate_training_memory(config, r);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(has(e.what(), "multiple of the pipeline stages (4)")) << e.what();
  }
}

DeviceMemory gpu_with(int64_t bytes, int64_t ranks_sharing = 1) {
  DeviceMemory device;
  device.name = "cuda:0";
  device.capacity_bytes = bytes;
  device.ranks_sharing = ranks_sharing;
  return device;
}

TEST(MemoryPreflight, DeviceRunsCheckTheDeviceForStatesAndActivations) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  MemoryPreflightRequest r;
  r.micro_batch = 64;
  r.seq_len = 1024;
  r.param_bytes = r.activation_bytes = 2;
  const MemoryNeed host_view = estimate_training_memory(config, r);
  // The device holds states and activations; nothing is left for the host, so a small host
  // does not refuse a run that fits the GPU.
  const MemoryNeed fits = check_training_memory(config, r, machine_with(int64_t{1} << 30),
                                                gpu_with(host_view.total_bytes + 1));
  EXPECT_EQ(fits.device_bytes, host_view.model_state_bytes + host_view.activation_bytes);
  EXPECT_EQ(fits.host_bytes, 0);

  const std::string message = error_of(config, r, machine_with(int64_t{1} << 40),
                                              gpu_with(int64_t{16} << 30));
  EXPECT_TRUE(has(message, "not enough memory")) << message;
  EXPECT_TRUE(has(message, "on cuda:0")) << message;
  EXPECT_TRUE(has(message, "more than its 16.0 GiB")) << message;
  EXPECT_TRUE(has(message, "--micro-batch 64")) << message;
  EXPECT_TRUE(has(message, "1 rank(s) on this device")) << message;
  EXPECT_TRUE(has(message, "offload_optimizer")) << message;
}

TEST(MemoryPreflight, RanksSharingOneDeviceAddUpThere) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  MemoryPreflightRequest r;
  r.seq_len = 256;
  r.world_size = r.ranks_on_this_machine = 3;
  const HostMemory host = machine_with(int64_t{1} << 40);
  const int64_t one = check_training_memory(config, r, host, gpu_with(int64_t{1} << 40, 1))
                          .device_bytes;
  const int64_t three = check_training_memory(config, r, host, gpu_with(int64_t{1} << 40, 3))
                            .device_bytes;
  EXPECT_EQ(three, 3 * one);
  // A device that holds one rank's share refuses three ranks on it, and says so.
  const std::string message = error_of(config, r, host, gpu_with(2 * one, 3));
  EXPECT_TRUE(has(message, "3 rank(s) on this device")) << message;
  // More ranks sharing a device than this machine has is a caller bug, named.
  const std::string bad = error_of(config, r, host, gpu_with(int64_t{1} << 40, 4));
  EXPECT_TRUE(has(bad, "ranks sharing cuda:0 (4)")) << bad;
}

TEST(MemoryPreflight, OffloadedStatesOfADeviceRunNeedHostMemory) {
  const model::TransformerConfig config = model::preset_config("gpt2-124m");
  MemoryPreflightRequest r;
  r.seq_len = 256;
  r.zero_stage = 2;
  r.offload_optimizer = sharding::OffloadDevice::kCpu;
  const MemoryNeed need =
      check_training_memory(config, r, machine_with(int64_t{1} << 40), gpu_with(int64_t{1} << 40));
  EXPECT_GT(need.offloaded_bytes, 0);
  EXPECT_EQ(need.host_bytes, need.offloaded_bytes);
  const std::string message =
      error_of(config, r, machine_with(need.host_bytes - 1), gpu_with(int64_t{1} << 40));
  EXPECT_TRUE(has(message, "not enough host memory")) << message;
  EXPECT_TRUE(has(message, "of offloaded optimizer states")) << message;
  // Offloading already: the device message does not suggest it again.
  const std::string device_message =
      error_of(config, r, machine_with(int64_t{1} << 40), gpu_with(int64_t{1} << 20));
  EXPECT_FALSE(has(device_message, "offload_optimizer")) << device_message;
}

}  // namespace memory_preflight_test
}  // namespace zero::engine
