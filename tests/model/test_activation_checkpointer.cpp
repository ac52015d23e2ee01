// DeepSpeed's activation_checkpointing options (model/activation_checkpointer.h) on one process:
// host copies of the saved block inputs (cpu_checkpointing), one contiguous buffer
// (contiguous_memory_optimization, with partition_activations over a one-rank group), the
// per-block choice, synchronize_checkpoint_boundary and profile. Each must give losses and
// gradients BIT-IDENTICAL to plain checkpointing (copies are exact, kernels deterministic), on
// the CPU backend and on the simulated device backend, in f32 and bf16 activations; each test
// fails without its feature (the bytes, copies, syncs or timings it counts would not appear).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "comm/self_comm.h"
#include "core/error.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace activation_checkpointer_test {

constexpr int64_t kBlocks = 4;
constexpr int64_t kBatch = 2;
constexpr int64_t kSeq = 64;
constexpr int64_t kHidden = 64;

TransformerConfig config() {
  TransformerConfig c = preset_config("tiny-llama");
  c.vocab_size = 64;
  c.hidden_size = kHidden;
  c.num_layers = kBlocks;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.max_position_embeddings = kSeq;
  return c;
}

Batch batch() {
  Tensor ids = Tensor::zeros_host({kBatch, kSeq}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 13 + 5) % 64;
  return batch_from_input_ids(ids);
}

std::unique_ptr<backend::Backend> make_backend(bool simulated) {
  if (simulated) return std::make_unique<backend::SimulatedDeviceBackend>();
  return std::make_unique<backend::CpuBackend>();
}

// Bytes of one block input (one hidden state [B, T, C]) in the activation dtype.
size_t hidden_bytes(std::optional<DType> activations) {
  return static_cast<size_t>(kBatch * kSeq * kHidden) *
         dtype_size(activations.value_or(DType::kF32));
}

struct Outcome {
  double loss = 0.0;
  std::vector<float> grads;
  size_t device_activation_peak = 0;  // allocator accounting, bytes above the start
  size_t host_activation_peak = 0;    // pinned host allocator, bytes above the start
  backend::TransferStats transfers;
  int64_t compute_waits = 0;          // simulated backend: events the compute stream waited on
  CheckpointMemory saved;
  CheckpointProfile profile;
};

struct PassSetup {
  bool simulated = false;
  std::optional<DType> activations;
  bool checkpointing = true;
  CheckpointingOptions options;
  bool size_one_group = false;
};

Outcome run_pass(const PassSetup& setup) {
  auto device = make_backend(setup.simulated);
  auto model = build_transformer(config(), *device, DType::kF32);
  init_parameters(*model, 7);
  model->set_activation_dtype(setup.activations);
  model->set_activation_checkpointing(setup.checkpointing);
  model->set_checkpointing_options(setup.options);
  comm::SelfComm one_rank(setup.simulated ? device.get() : nullptr);
  if (setup.size_one_group) model->set_activation_partition_group(&one_rank);
  const Batch b = batch();
  // One pass first, so buffers kept across steps (the contiguous buffer) exist in both runs'
  // baselines only when the feature keeps them; then measure a second pass.
  model->forward_backward(b);
  model->zero_grad();
  model->activation_checkpointer().take_profile();
  device->allocator().reset_peaks();
  device->pinned_host_allocator().reset_peaks();
  model->activation_checkpointer().reset_peaks();
  const size_t device_before = device->allocator().stats().live(MemoryCategory::kActivations);
  const size_t host_before =
      device->pinned_host_allocator().stats().live(MemoryCategory::kActivations);
  device->reset_transfer_stats();
  auto* sim = dynamic_cast<backend::SimulatedDeviceBackend*>(device.get());
  const int64_t waits_before = sim ? sim->waits_on(backend::StreamKind::kCompute) : 0;
  Outcome out;
  out.loss = model->forward_backward(b);
  out.transfers = device->transfer_stats();
  out.compute_waits = sim ? sim->waits_on(backend::StreamKind::kCompute) - waits_before : 0;
  out.device_activation_peak =
      device->allocator().stats().peak(MemoryCategory::kActivations) - device_before;
  out.host_activation_peak =
      device->pinned_host_allocator().stats().peak(MemoryCategory::kActivations) - host_before;
  out.saved = model->activation_checkpointer().memory();
  out.profile = model->activation_checkpointer().take_profile();
  const Tensor& g = model->flat_grads();
  out.grads.resize(static_cast<size_t>(g.numel()));
  device->copy_to_host(out.grads.data(), g);
  return out;
}

std::string label(const PassSetup& s) {
  return std::string(s.simulated ? "sim" : "cpu") + (s.activations ? " bf16" : " f32");
}

std::vector<PassSetup> bases() {
  std::vector<PassSetup> out;
  for (bool simulated : {false, true}) {
    for (std::optional<DType> act : {std::optional<DType>(), std::optional<DType>(DType::kBF16)}) {
      PassSetup s;
      s.simulated = simulated;
      s.activations = act;
      out.push_back(s);
    }
  }
  return out;
}

TEST(ActivationCheckpointer, CpuCheckpointingIsBitIdenticalAndMovesSavedInputsToPinnedHost) {
  for (const PassSetup& base : bases()) {
    PassSetup cpu = base;
    cpu.options.cpu_checkpointing = true;
    const Outcome plain = run_pass(base);
    const Outcome host = run_pass(cpu);
    const std::string what = label(base);
    EXPECT_EQ(host.loss, plain.loss) << what;
    EXPECT_EQ(host.grads, plain.grads) << what;
    const size_t h = hidden_bytes(base.activations);
    // Plain checkpointing holds all kBlocks inputs on the device at the peak (the last block's
    // backward). With host copies at most two are on the device then: the restored input and
    // the prefetched one of the block before it.
    const size_t predicted = plain.device_activation_peak - (kBlocks - 2) * h;
    std::printf("%s: device activation peak %zu bytes plain, %zu with cpu_checkpointing "
                "(predicted %zu); pinned host peak %zu (predicted %zu)\n",
                what.c_str(), plain.device_activation_peak, host.device_activation_peak,
                predicted, host.host_activation_peak, kBlocks * h);
    EXPECT_EQ(host.device_activation_peak, predicted) << what;
    EXPECT_EQ(plain.host_activation_peak, 0u) << what;
    EXPECT_EQ(host.host_activation_peak, kBlocks * h) << what;
    EXPECT_EQ(host.saved.peak_host_bytes, kBlocks * h) << what;
    EXPECT_EQ(host.saved.peak_device_bytes, 2 * h) << what;
    // One counted download per block in forward, one upload per block in backward.
    EXPECT_EQ(host.transfers.device_to_host_calls - plain.transfers.device_to_host_calls, kBlocks);
    EXPECT_EQ(host.transfers.device_to_host_bytes - plain.transfers.device_to_host_bytes,
              static_cast<int64_t>(kBlocks * h));
    EXPECT_EQ(host.transfers.host_to_device_calls - plain.transfers.host_to_device_calls, kBlocks);
    EXPECT_EQ(host.transfers.host_to_device_bytes - plain.transfers.host_to_device_bytes,
              static_cast<int64_t>(kBlocks * h));
    if (base.simulated) {
      // Per block: compute waits on the download (before reusing the memory) and on the upload.
      EXPECT_EQ(host.compute_waits - plain.compute_waits, 2 * kBlocks) << what;
    }
  }
}

TEST(ActivationCheckpointer, ContiguousBufferOverAOneRankPartitionIsBitIdentical) {
  for (const PassSetup& base : bases()) {
    const Outcome plain = run_pass(base);
    const size_t h = hidden_bytes(base.activations);
    for (bool on_host : {false, true}) {
      PassSetup contiguous = base;
      contiguous.size_one_group = true;
      contiguous.options.partition_activations = true;
      contiguous.options.contiguous_memory_optimization = true;
      contiguous.options.cpu_checkpointing = on_host;
      contiguous.options.number_checkpoints = kBlocks + 2;  // slots beyond the blocks: allowed
      const Outcome c = run_pass(contiguous);
      const std::string what = label(base) + (on_host ? " contiguous on host" : " contiguous");
      EXPECT_EQ(c.loss, plain.loss) << what;
      EXPECT_EQ(c.grads, plain.grads) << what;
      // The buffer has number_checkpoints slots and outlives the step (allocated in the first
      // pass, so it is not part of this pass's peak above the start).
      const size_t buffer = (kBlocks + 2) * h;
      if (on_host) {
        EXPECT_EQ(c.saved.host_bytes, buffer) << what;
        EXPECT_EQ(c.host_activation_peak, 0u) << what;
      } else {
        EXPECT_EQ(c.saved.device_bytes, buffer) << what;
        // The inputs are copies in the buffer: the blocks' own outputs are freed, so the peak
        // above the buffer is the plain peak without the kBlocks saved inputs.
        std::printf("%s: device activation peak above the buffer %zu (plain %zu, predicted %zu)\n",
                    what.c_str(), c.device_activation_peak, plain.device_activation_peak,
                    plain.device_activation_peak - kBlocks * h);
        EXPECT_EQ(c.device_activation_peak, plain.device_activation_peak - kBlocks * h) << what;
      }
    }
  }
}

TEST(ActivationCheckpointer, EveryOtherBlockIsBitIdenticalAndSavesOnlyItsInputs) {
  for (const PassSetup& base : bases()) {
    PassSetup none = base;
    none.checkpointing = false;
    const Outcome full = run_pass(none);
    const Outcome all = run_pass(base);
    PassSetup half = base;
    half.options.unit_mask = ActivationCheckpointer::every_kth(kBlocks, 2);
    const Outcome some = run_pass(half);
    const std::string what = label(base);
    EXPECT_EQ(some.loss, full.loss) << what;
    EXPECT_EQ(some.grads, full.grads) << what;
    EXPECT_EQ(all.grads, full.grads) << what;
    const size_t h = hidden_bytes(base.activations);
    EXPECT_EQ(all.saved.peak_device_bytes, kBlocks * h) << what;
    EXPECT_EQ(some.saved.peak_device_bytes, kBlocks / 2 * h) << what;
    std::printf("%s: activation peak %zu (no checkpointing), %zu (every other block), %zu (all)\n",
                what.c_str(), full.device_activation_peak, some.device_activation_peak,
                all.device_activation_peak);
    EXPECT_LT(some.device_activation_peak, full.device_activation_peak) << what;
    EXPECT_GT(some.device_activation_peak, all.device_activation_peak) << what;
  }
}

TEST(ActivationCheckpointer, SynchronizesAtEachCheckpointedBoundary) {
  PassSetup base;
  base.simulated = true;
  const Outcome plain = run_pass(base);
  PassSetup sync = base;
  sync.options.synchronize_checkpoint_boundary = true;
  sync.options.unit_mask = {true, false, true, true};
  const Outcome s = run_pass(sync);
  EXPECT_EQ(s.grads, plain.grads);
  EXPECT_EQ(s.transfers.synchronizations - plain.transfers.synchronizations, 3);
}

TEST(ActivationCheckpointer, ProfileTimesEachCheckpointedForwardAndRecompute) {
  PassSetup base;
  const Outcome plain = run_pass(base);
  EXPECT_TRUE(plain.profile.units.empty());
  PassSetup profiled = base;
  profiled.options.profile = true;
  const Outcome p = run_pass(profiled);
  EXPECT_EQ(p.grads, plain.grads);
  ASSERT_EQ(p.profile.units.size(), static_cast<size_t>(kBlocks));
  for (const auto& t : p.profile.units) {
    EXPECT_EQ(t.forwards, 1);
    EXPECT_EQ(t.recomputes, 1);
    EXPECT_GT(t.forward_seconds, 0.0);
    EXPECT_GT(t.recompute_seconds, 0.0);
  }
  // Units 1..kBlocks are the blocks (unit 0 is the embedding).
  EXPECT_EQ(p.profile.units.front().unit, 1u);
}

TEST(ActivationCheckpointer, OptionsAreCheckedAgainstTheModel) {
  backend::CpuBackend cpu;
  auto model = build_transformer(config(), cpu, DType::kF32);
  CheckpointingOptions bad_mask;
  bad_mask.unit_mask = {true, false};
  EXPECT_THROW(model->set_checkpointing_options(bad_mask), ConfigError);
  CheckpointingOptions contiguous_alone;
  contiguous_alone.contiguous_memory_optimization = true;
  try {
    model->set_checkpointing_options(contiguous_alone);
    ADD_FAILURE() << "contiguous_memory_optimization without partition_activations accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("contiguous_memory_optimization"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("partition_activations"), std::string::npos);
  }
  CheckpointingOptions too_few;
  too_few.number_checkpoints = kBlocks - 1;
  try {
    model->set_checkpointing_options(too_few);
    ADD_FAILURE() << "number_checkpoints below the block count accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("number_checkpoints"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(std::to_string(kBlocks) + " units"), std::string::npos);
  }
  // Fewer checkpointed blocks need fewer slots.
  too_few.unit_mask = ActivationCheckpointer::every_kth(kBlocks, 2);
  EXPECT_NO_THROW(model->set_checkpointing_options(too_few));
  EXPECT_THROW(ActivationCheckpointer::every_kth(4, 0), ConfigError);
}

}  // namespace activation_checkpointer_test
}  // namespace zero::model
