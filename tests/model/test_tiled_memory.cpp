// Tiled compute lowers activation memory as predicted, measured by the backend allocator's
// accounting (MemoryCategory::kActivations), and prints the bytes:
// - TiledMlp: after a training forward every block holds no MLP intermediates; the bytes held
//   between forward and backward fall by exactly layers x rows x (C + 2 + up_width + FFN)
//   elements (norm2 output and statistics, up projection, activation), and the peak falls too.
// - TiledFusedLogitsLoss: inside the LM head unit (forward + backward) the peak falls by the
//   [rows, V] logits less one shard's logits and the [V, C] weight-gradient accumulator.
#include <gtest/gtest.h>

#include <cstdio>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/transformer_builder.h"
#include "tiling_harness.h"

namespace zero::model {
namespace {

// A GPT-2 shape whose MLP is wide and whose vocabulary is much wider than its hidden size.
TransformerConfig wide_config() {
  TransformerConfig c = preset_config("tiny");
  c.vocab_size = 1024;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 512;
  c.max_position_embeddings = 128;
  return c;
}

// Resets the allocator's peaks when the head unit starts its forward and reads the peak when its
// backward is done: the head's own activation peak (above what the blocks hold).
class HeadWindow : public UnitObserver {
 public:
  HeadWindow(backend::Backend& backend, size_t head) : backend_(backend), head_(head) {}
  void before_forward(size_t unit) override {
    if (unit != head_) return;
    backend_.allocator().reset_peaks();
    base = backend_.allocator().stats().live(MemoryCategory::kActivations);
  }
  void after_forward(size_t) override {}
  void before_backward(size_t) override {}
  void after_backward(size_t unit) override {
    if (unit == head_) peak = backend_.allocator().stats().peak(MemoryCategory::kActivations) - base;
  }
  size_t base = 0, peak = 0;

 private:
  backend::Backend& backend_;
  size_t head_;
};

struct Measured {
  size_t held_after_forward = 0;  // activation bytes kept for backward
  size_t pass_peak = 0;           // activation peak of forward + backward
  size_t head_peak = 0;           // activation peak inside the LM head unit
};

Measured measure(SequenceTiling tiling) {
  backend::CpuBackend cpu;
  auto model = build_transformer(wide_config(), cpu, DType::kF32);
  init_parameters(*model, 1);
  model->set_sequence_tiling(tiling);
  HeadWindow window(cpu, model->units().size() - 1);
  model->add_observer(&window);
  const Batch batch = tiling_test::make_batch(1, 128, 1024);
  cpu.allocator().reset_peaks();
  const size_t before = cpu.allocator().stats().live(MemoryCategory::kActivations);
  StepContext ctx{cpu, batch};
  model->forward_loss(ctx);
  Measured m;
  m.held_after_forward = cpu.allocator().stats().live(MemoryCategory::kActivations) - before;
  const size_t pass_peak_forward = cpu.allocator().stats().peak(MemoryCategory::kActivations);
  model->backward(ctx, 1.0);
  // The head window reset the peaks mid-pass: the pass peak is the larger of the two windows.
  m.pass_peak = std::max(pass_peak_forward,
                         cpu.allocator().stats().peak(MemoryCategory::kActivations)) - before;
  m.head_peak = window.peak;
  model->remove_observer(&window);
  return m;
}

TEST(TiledMemory, MlpKeepsNoIntermediatesAndLowersThePeak) {
  const TransformerConfig c = wide_config();
  const int64_t rows = 128;
  const Measured untiled = measure(SequenceTiling{});
  SequenceTiling tiling;
  tiling.mlp_shards = 4;
  const Measured tiled = measure(tiling);
  // Per row and layer: norm2's output [C] and its two statistics (LayerNorm: mean, rstd), the
  // up projection [FFN] and the GELU output [FFN], all f32.
  const size_t predicted = static_cast<size_t>(c.num_layers * rows *
                                               (c.hidden_size + 2 + 2 * c.intermediate_size)) * 4;
  std::printf("MLP tiling (4 shards): held after forward %zu -> %zu bytes (predicted drop %zu), "
              "pass peak %zu -> %zu bytes\n",
              untiled.held_after_forward, tiled.held_after_forward, predicted, untiled.pass_peak,
              tiled.pass_peak);
  EXPECT_EQ(untiled.held_after_forward - tiled.held_after_forward, predicted);
  EXPECT_LT(tiled.pass_peak, untiled.pass_peak);
}

TEST(TiledMemory, LogitsNeverExistInFull) {
  const TransformerConfig c = wide_config();
  const int64_t rows = 128, shards = 8;
  const Measured untiled = measure(SequenceTiling{});
  SequenceTiling tiling;
  tiling.logits_shards = shards;
  const Measured tiled = measure(tiling);
  const int64_t v = c.vocab_size;
  const size_t predicted =
      static_cast<size_t>(rows * v - (rows / shards) * v - v * c.hidden_size) * 4;
  std::printf("logits tiling (%lld shards): LM head peak %zu -> %zu bytes (predicted drop %zu; "
              "full logits %lld bytes)\n",
              static_cast<long long>(shards), untiled.head_peak, tiled.head_peak, predicted,
              static_cast<long long>(rows * v * 4));
  ASSERT_GT(untiled.head_peak, tiled.head_peak);
  const double drop = static_cast<double>(untiled.head_peak - tiled.head_peak);
  // Within a few [rows]-sized vectors (per-token losses, norm statistics) of the prediction.
  EXPECT_NEAR(drop, static_cast<double>(predicted), 4.0 * rows * 8);
  // The tiled head never holds a [rows, V] buffer.
  EXPECT_LT(tiled.head_peak, static_cast<size_t>(rows * v * 4));
}

// "auto" at a sequence (128) longer than the hidden size (32): the MLP takes ceil(128 / 32) = 4
// shards and the logits ceil(1024 / (2 * 32)) = 16, both lowering their peaks as above.
TEST(TiledMemory, AutoTilesASequenceLongerThanTheHiddenSize) {
  const TransformerConfig c = wide_config();
  EXPECT_EQ(resolve_mlp_shards(kAutoShards, 128, c.hidden_size), 4);
  EXPECT_EQ(resolve_logits_shards(kAutoShards, 128, c.hidden_size, c.vocab_size), 16);
  SequenceTiling four;
  four.mlp_shards = 4;
  SequenceTiling automatic;
  automatic.mlp_shards = kAutoShards;
  automatic.logits_shards = kAutoShards;
  const Measured untiled = measure(SequenceTiling{});
  const Measured mlp_four = measure(four);
  const Measured tiled = measure(automatic);
  std::printf("auto tiling: pass peak %zu -> %zu bytes, LM head peak %zu -> %zu bytes\n",
              untiled.pass_peak, tiled.pass_peak, untiled.head_peak, tiled.head_peak);
  EXPECT_LT(tiled.head_peak, untiled.head_peak);
  EXPECT_LT(tiled.pass_peak, mlp_four.pass_peak);
  // The blocks keep what 4 MLP shards keep; until its backward the tiled head keeps dh [rows, C]
  // and the [V, C] accumulator where the untiled head keeps h [rows, C] and the [rows, V] logits.
  const size_t head_keeps = static_cast<size_t>((128 + c.vocab_size) * c.hidden_size) * 4;
  const size_t untiled_head_keeps = static_cast<size_t>(128 * (c.vocab_size + c.hidden_size)) * 4;
  EXPECT_EQ(tiled.held_after_forward + untiled_head_keeps, mlp_four.held_after_forward + head_keeps);
}

}  // namespace
}  // namespace zero::model
