// Checkpoint segments (model/checkpoint_segments.h, CheckpointingOptions::segment_units): groups
// of N consecutive blocks checkpointed as one piece keep only the group's input between forward
// and backward, and recomputing the whole group before its last block's backward gives losses
// and gradients BIT-IDENTICAL to no checkpointing and to one block per checkpoint (every kernel
// is deterministic), in f64 and f32 (and bf16 activations), on the CPU and the simulated device
// backend, also with cpu_checkpointing. The saved inputs are counted exactly (one hidden state
// per group), so the test fails if a group kept more than its input or recomputed less than its
// blocks.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"
#include "model/checkpoint_segments.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace checkpoint_segments_test {

constexpr int64_t kBlocks = 5;
constexpr int64_t kBatch = 2;
constexpr int64_t kSeq = 16;
constexpr int64_t kHidden = 32;

TEST(CheckpointSegments, CutRunsOfChosenUnitsIntoGroups) {
  // embedding, blocks 1..3, norm, blocks 5..6 (a unit that is not chosen ends a run).
  const std::vector<bool> chosen{false, true, true, true, false, true, true};
  using S = CheckpointSegment;
  EXPECT_EQ(plan_checkpoint_segments(chosen, 1),
            (std::vector<S>{{1, 1}, {2, 2}, {3, 3}, {5, 5}, {6, 6}}));
  EXPECT_EQ(plan_checkpoint_segments(chosen, 2), (std::vector<S>{{1, 2}, {3, 3}, {5, 6}}));
  EXPECT_EQ(plan_checkpoint_segments(chosen, 3), (std::vector<S>{{1, 3}, {5, 6}}));
  EXPECT_EQ(plan_checkpoint_segments(chosen, 100), (std::vector<S>{{1, 3}, {5, 6}}));
  EXPECT_TRUE(plan_checkpoint_segments({false, false}, 2).empty());
}

TransformerConfig config() {
  TransformerConfig c = preset_config("tiny-llama");
  c.vocab_size = 48;
  c.hidden_size = kHidden;
  c.num_layers = kBlocks;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.intermediate_size = 64;
  c.max_position_embeddings = kSeq;
  return c;
}

Batch batch() {
  Tensor ids = Tensor::zeros_host({kBatch, kSeq}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 11 + 3) % 48;
  return batch_from_input_ids(ids);
}

struct Outcome {
  double loss = 0.0;
  std::vector<unsigned char> grad_bytes;  // the flat gradient buffer, bit for bit
  size_t saved_bytes = 0;                 // checkpointer's saved inputs after the forward
  size_t live_after_forward = 0;          // accounted activation bytes between the passes
  size_t activation_peak = 0;             // accounted activation peak of forward + backward
};

// `segment_units` 0: no checkpointing. `activations`: mixed precision's activation dtype.
Outcome train_once(DType dtype, bool simulated, int64_t segment_units,
                   std::optional<DType> activations = std::nullopt, bool on_host = false) {
  std::unique_ptr<backend::Backend> be;
  if (simulated) {
    be = std::make_unique<backend::SimulatedDeviceBackend>();
  } else {
    be = std::make_unique<backend::CpuBackend>();
  }
  auto net = build_transformer(config(), *be, dtype);
  init_parameters(*net, 5);
  net->set_activation_dtype(activations);
  net->set_activation_checkpointing(segment_units > 0);
  if (segment_units > 0) {
    CheckpointingOptions options;
    options.segment_units = segment_units;
    options.cpu_checkpointing = on_host;
    net->set_checkpointing_options(options);
  }
  const Batch b = batch();
  be->allocator().reset_peaks();
  const size_t before = be->allocator().stats().live(MemoryCategory::kActivations);
  StepContext ctx{*be, b};
  Outcome out;
  out.loss = be->read_scalar(net->forward_loss(ctx));
  const CheckpointMemory saved = net->activation_checkpointer().memory();
  out.saved_bytes = on_host ? saved.host_bytes : saved.device_bytes;
  out.live_after_forward = be->allocator().stats().live(MemoryCategory::kActivations) - before;
  net->backward(ctx, 1.0);
  out.activation_peak = be->allocator().stats().peak(MemoryCategory::kActivations) - before;
  Tensor grads = Tensor::zeros_host(net->flat_grads().shape(), dtype);
  be->copy_to_host(grads.raw_data(), net->flat_grads());
  out.grad_bytes.resize(grads.nbytes());
  std::memcpy(out.grad_bytes.data(), grads.raw_data(), grads.nbytes());
  return out;
}

class SegmentEquivalence : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(SegmentEquivalence, BitIdenticalWithOneSavedInputPerGroup) {
  const auto [dtype, simulated] = GetParam();
  const size_t hidden = static_cast<size_t>(kBatch * kSeq * kHidden) * dtype_size(dtype);
  const Outcome plain = train_once(dtype, simulated, 0);
  const Outcome per_block = train_once(dtype, simulated, 1);
  EXPECT_EQ(per_block.saved_bytes, static_cast<size_t>(kBlocks) * hidden);
  for (int64_t n : std::vector<int64_t>{1, 2, 3, kBlocks, 100}) {
    const Outcome grouped = train_once(dtype, simulated, n);
    const std::string what = "segments of " + std::to_string(n);
    EXPECT_EQ(grouped.loss, plain.loss) << what;
    EXPECT_EQ(grouped.grad_bytes, plain.grad_bytes) << what;
    // One hidden state per group of n blocks, and nothing else of the blocks kept.
    const auto groups = static_cast<size_t>((kBlocks + n - 1) / n);
    EXPECT_EQ(grouped.saved_bytes, groups * hidden) << what;
    EXPECT_EQ(per_block.live_after_forward - grouped.live_after_forward,
              (static_cast<size_t>(kBlocks) - groups) * hidden)
        << what;
    // Recomputing a group holds its blocks' activations at once: never more than no
    // checkpointing, which holds every block's.
    EXPECT_LE(grouped.activation_peak, plain.activation_peak) << what;
  }
  EXPECT_LT(per_block.activation_peak, plain.activation_peak);
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<DType, bool>>& p) {
  return std::string(dtype_name(std::get<0>(p.param))) +
         (std::get<1>(p.param) ? "_simulated" : "_cpu");
}

INSTANTIATE_TEST_SUITE_P(DTypes, SegmentEquivalence,
                         ::testing::Combine(::testing::Values(DType::kF64, DType::kF32),
                                            ::testing::Values(false, true)),
                         param_name);

// bf16 activations (mixed precision): the saved group inputs are bf16 hidden states.
TEST(CheckpointSegments, Bf16ActivationsAreBitIdenticalToo) {
  const size_t hidden = static_cast<size_t>(kBatch * kSeq * kHidden) * 2;
  const Outcome plain = train_once(DType::kF32, false, 0, DType::kBF16);
  for (int64_t n : std::vector<int64_t>{2, 100}) {
    const Outcome grouped = train_once(DType::kF32, false, n, DType::kBF16);
    EXPECT_EQ(grouped.loss, plain.loss) << n;
    EXPECT_EQ(grouped.grad_bytes, plain.grad_bytes) << n;
    EXPECT_EQ(grouped.saved_bytes, static_cast<size_t>((kBlocks + n - 1) / n) * hidden) << n;
  }
}

// cpu_checkpointing applies per group: one pinned host copy of each group's input, uploaded
// before the group's recompute (simulated device: real host<->device copies).
TEST(CheckpointSegments, CpuCheckpointingKeepsOneHostCopyPerGroup) {
  const size_t hidden = static_cast<size_t>(kBatch * kSeq * kHidden) * 4;
  const Outcome plain = train_once(DType::kF32, true, 0);
  const Outcome grouped = train_once(DType::kF32, true, 2, std::nullopt, true);
  EXPECT_EQ(grouped.loss, plain.loss);
  EXPECT_EQ(grouped.grad_bytes, plain.grad_bytes);
  EXPECT_EQ(grouped.saved_bytes, static_cast<size_t>((kBlocks + 1) / 2) * hidden);
}

TEST(CheckpointSegments, ZeroUnitsPerSegmentIsAConfigError) {
  backend::CpuBackend cpu;
  auto net = build_transformer(config(), cpu, DType::kF32);
  CheckpointingOptions options;
  options.segment_units = 0;
  try {
    net->set_checkpointing_options(options);
    FAIL() << "segments of 0 units accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("segment"), std::string::npos) << e.what();
  }
}

}  // namespace checkpoint_segments_test
}  // namespace zero::model
