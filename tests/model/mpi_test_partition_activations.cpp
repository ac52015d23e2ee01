// mpi-ranks: 2 4
// partition_activations across ranks that hold IDENTICAL activations (in zero.cpp that will be
// the tensor-parallel group; here every rank feeds the same batch and the group is the world):
// each rank keeps 1/N of every checkpointed block input (ceil(numel/N) elements, the last piece
// zero-padded: the hidden state below has 130 elements, not a multiple of 4) and the
// recompute all-gathers it back. Gradients must be bit-identical to plain checkpointing on one
// rank, with and without cpu_checkpointing and the contiguous buffer, in f32 and bf16, on the
// CPU backend over MPI and on the simulated device backend through HostStagedComm.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "comm/host_staged_comm.h"
#include "comm/world.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace {

constexpr int64_t kBlocks = 3;
constexpr int64_t kBatch = 1;
constexpr int64_t kSeq = 13;
constexpr int64_t kHidden = 10;

TransformerConfig config() {
  TransformerConfig c = preset_config("tiny-llama");
  c.vocab_size = 29;
  c.hidden_size = kHidden;
  c.num_layers = kBlocks;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 10;
  c.intermediate_size = 40;
  c.max_position_embeddings = 16;
  return c;
}

Batch batch() {
  Tensor ids = Tensor::zeros_host({kBatch, kSeq}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 7 + 3) % 29;
  return batch_from_input_ids(ids);
}

struct Outcome {
  double loss = 0.0;
  std::vector<float> grads;
  CheckpointMemory saved;
  int64_t all_gathers = 0;
};

Outcome run_pass(bool simulated, std::optional<DType> activations, comm::Comm* group,
                 const CheckpointingOptions& options) {
  std::unique_ptr<backend::Backend> device;
  if (simulated) {
    device = std::make_unique<backend::SimulatedDeviceBackend>();
  } else {
    device = std::make_unique<backend::CpuBackend>();
  }
  comm::Comm* counted = group;  // the MPI group: HostStagedComm runs its collectives
  std::unique_ptr<comm::Comm> staged;
  if (group != nullptr && simulated) {
    staged = std::make_unique<comm::HostStagedComm>(*group, *device);
    group = staged.get();
  }
  auto model = build_transformer(config(), *device, DType::kF32);
  init_parameters(*model, 5);
  model->set_activation_dtype(activations);
  model->set_activation_checkpointing(true);
  model->set_checkpointing_options(options);
  model->set_activation_partition_group(group);
  const int64_t gathers_before =
      counted != nullptr ? counted->stats().at(comm::OpKind::kAllGather).calls : 0;
  Outcome out;
  out.loss = model->forward_backward(batch());
  out.saved = model->activation_checkpointer().memory();
  out.all_gathers =
      counted != nullptr ? counted->stats().at(comm::OpKind::kAllGather).calls - gathers_before : 0;
  const Tensor& g = model->flat_grads();
  out.grads.resize(static_cast<size_t>(g.numel()));
  device->copy_to_host(out.grads.data(), g);
  return out;
}

TEST(PartitionActivations, GradientsBitIdenticalAndEachRankKeepsItsShare) {
  comm::Comm& world = comm::world();
  const int64_t n = world.world_size();
  const int64_t numel = kBatch * kSeq * kHidden;
  const int64_t piece = (numel + n - 1) / n;
  for (bool simulated : {false, true}) {
    for (std::optional<DType> act : {std::optional<DType>(), std::optional<DType>(DType::kBF16)}) {
      const Outcome plain = run_pass(simulated, act, nullptr, {});
      const size_t element = dtype_size(act.value_or(DType::kF32));
      // 0: pieces on the device; 1: pieces in pinned host memory; 2: host pieces in the
      // contiguous buffer; 3: device pieces in the contiguous buffer.
      for (int variant = 0; variant < 4; ++variant) {
        CheckpointingOptions o;
        o.partition_activations = true;
        o.cpu_checkpointing = variant == 1 || variant == 2;
        o.contiguous_memory_optimization = variant >= 2;
        const Outcome p = run_pass(simulated, act, &world, o);
        const std::string what = std::string(simulated ? "sim" : "cpu") + (act ? " bf16" : " f32") +
                                 " variant " + std::to_string(variant) + " at N=" +
                                 std::to_string(n);
        EXPECT_EQ(p.loss, plain.loss) << what;
        EXPECT_EQ(p.grads, plain.grads) << what;
        EXPECT_EQ(p.all_gathers, kBlocks) << what;
        // Saved inputs: kBlocks pieces of ceil(numel/N) elements instead of kBlocks inputs.
        const size_t share = static_cast<size_t>(kBlocks * piece) * element;
        EXPECT_EQ(plain.saved.peak_device_bytes, static_cast<size_t>(kBlocks * numel) * element);
        if (o.cpu_checkpointing) {
          EXPECT_EQ(p.saved.peak_host_bytes, share) << what;
        } else {
          EXPECT_EQ(p.saved.peak_device_bytes, share) << what;
        }
        if (world.rank() == 0 && variant == 0) {
          std::printf("%s: saved-input bytes per rank %zu (plain %zu; 1/N + padding = %zu)\n",
                      what.c_str(), p.saved.peak_device_bytes, plain.saved.peak_device_bytes,
                      share);
        }
      }
    }
  }
}

}  // namespace
}  // namespace zero::model
