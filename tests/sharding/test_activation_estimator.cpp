// The activation estimate under the long-sequence options, by hand for a tiny shape, and the
// longest-sequence search. The formulas are derived in sharding/activation_estimator.h;
// test_activation_estimate_measured.cpp checks them against the allocator.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/sequence_tiling.h"
#include "sharding/activation_estimator.h"

namespace zero::sharding {
namespace {

// h 8, 2 heads of d 4 (q 8), 1 KV head (kv 4), SwiGLU I 12 (U 24), V 32, 3 layers.
model::TransformerConfig tiny() {
  model::TransformerConfig c = model::preset_config("tiny-llama");
  c.hidden_size = 8;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.intermediate_size = 12;
  c.vocab_size = 32;
  c.num_layers = 3;
  return c;
}

// b 1, s 16, f32 (w 4): t 16 rows. Per row: input w h = 32; attention w (h + q + 2kv + q) = 128;
// MLP untiled w (2h + U + I) = 208, tiled w h = 32; lse 4 * 2 heads.
ActivationSettings f32_16() {
  ActivationSettings s;
  s.seq_len = 16;
  s.activation_bytes = 4;
  return s;
}

TEST(ActivationEstimator, PlainByHand) {
  const ActivationMemory m = estimate_activations(tiny(), f32_16());
  // block saved 16 (128 + 208) + 4*2*16 = 5504; + input 512 = 6016.
  EXPECT_EQ(m.per_layer_bytes, 6016);
  EXPECT_EQ(m.layers_bytes, 3 * 6016);
  EXPECT_EQ(m.logits_bytes, 16 * 4 * 32);
  // dy 512 + d_up 16*4*24 = 1536.
  EXPECT_EQ(m.backward_bytes, 2048);
  EXPECT_EQ(m.head_bytes, 3 * 16 * 4 * 8 + 2048);  // y, h, dh + logits
  // Head moment 18048 + 3584 = 21632 beats the block moment 2*6016 + 512 + 5504 + 2048 = 20096.
  EXPECT_EQ(m.peak_bytes, 21632);
  EXPECT_EQ(m.host_bytes, 0);
}

TEST(ActivationEstimator, CheckpointingTilingAndHostCheckpointsByHand) {
  ActivationSettings s = f32_16();
  s.checkpointing = true;
  ActivationMemory m = estimate_activations(tiny(), s);
  // Inputs 3 * 512; block moment 1536 + 5504 + 2048 = 9088 > head 1536 + 3584.
  EXPECT_EQ(m.layers_bytes, 1536 + 6016);
  EXPECT_EQ(m.peak_bytes, 9088);

  s.tiled_mlp_shards = 4;  // r = 4 rows a shard
  m = estimate_activations(tiny(), s);
  EXPECT_EQ(m.mlp_shards, 4);
  EXPECT_EQ(m.per_layer_bytes, 512 + 16 * (128 + 32) + 128);  // 3200: x1 only of the MLP
  // MLP: dy 512 + dx 512 + shard 4 (4 (h + U + I + max(I, U)) + 4) = 2128; the attention half
  // now weighs more: 16 * 4 (4h + 2q + 2kv) - x1 512 = 3072.
  EXPECT_EQ(m.backward_bytes, 3072);
  EXPECT_EQ(m.peak_bytes, 1536 + 2688 + 3072);  // 7296

  s.tiled_logits_shards = 4;
  m = estimate_activations(tiny(), s);
  EXPECT_EQ(m.logits_shards, 4);
  EXPECT_EQ(m.logits_bytes, 4 * 4 * 32);
  // y, h, dh + one shard + the [V, h] accumulator + losses: 1536 + 512 + 1024 + 64.
  EXPECT_EQ(m.head_bytes, 3136);
  EXPECT_EQ(m.peak_bytes, 7296);  // still the block moment

  s.cpu_checkpointing = true;
  m = estimate_activations(tiny(), s);
  EXPECT_EQ(m.host_bytes, 3 * 512);
  // The device keeps the restored input and the prefetched one: 1024 + 2688 + 3072.
  EXPECT_EQ(m.peak_bytes, 6784);
}

TEST(ActivationEstimator, UlyssesByHand) {
  ActivationSettings s = f32_16();
  s.sequence_parallel = 2;  // t = 8; 1 KV head < sp: replicated, one per rank
  const ActivationMemory m = estimate_activations(tiny(), s);
  EXPECT_EQ(m.rows, 8);
  // Attention per row 128 + gathered w (2q + 2 * d * sp * 1) = 128 + 128; MLP 208; lse 8 * 8.
  EXPECT_EQ(m.per_layer_bytes, 8 * 32 + 8 * (256 + 208) + 64);  // 4032
  // MLP: dy 256 + d_up 8 * 4 * 24 = 1024. Attention, while the core attention's backward runs:
  // 8 (4 (2h + 2q + 2kv) + 128 gathered) - the MLP's 8 * 208 = 640 (at the end: 8 (4 (4h + 2q
  // + 2kv) - 128) - 1664 < 0).
  EXPECT_EQ(m.backward_bytes, 1024);
  EXPECT_EQ(m.peak_bytes, 3 * 4032 + 3 * 8 * 4 * 8 + 8 * 4 * 32);  // head moment, 13888
}

TEST(ActivationEstimator, AutoShardsResolveAsTheModelDoes) {
  const model::TransformerConfig c = model::preset_config("llama-1b");
  ActivationSettings s;
  s.seq_len = 32768;
  s.checkpointing = true;
  s.tiled_mlp_shards = s.tiled_logits_shards = model::kAutoShards;
  const ActivationMemory m = estimate_activations(c, s);
  EXPECT_EQ(m.mlp_shards, model::resolve_mlp_shards(model::kAutoShards, 32768, 2048));  // 16
  EXPECT_EQ(m.mlp_shards, 16);
  EXPECT_EQ(m.logits_shards, model::resolve_logits_shards(model::kAutoShards, 32768, 2048, 128256));
  EXPECT_GT(m.logits_shards, 1);
  s.tiled_mlp_shards = s.tiled_logits_shards = 1;
  EXPECT_LT(m.peak_bytes, estimate_activations(c, s).peak_bytes / 4);
}

TEST(ActivationEstimator, BadSettingsAreErrors) {
  ActivationSettings s = f32_16();
  s.sequence_parallel = 3;  // does not divide 16
  EXPECT_THROW(estimate_activations(tiny(), s), ConfigError);
  s = f32_16();
  s.cpu_checkpointing = true;  // without checkpointing
  EXPECT_THROW(estimate_activations(tiny(), s), ConfigError);
}

// The longest-sequence search: the answer fits, answer + granule does not, and a larger budget
// never gives a shorter answer.
TEST(ActivationEstimator, LongestFittingSequence) {
  const model::TransformerConfig c = model::preset_config("llama-1b");
  for (const bool checkpointing : {false, true}) {
    ActivationSettings s;
    s.checkpointing = checkpointing;
    s.tiled_mlp_shards = s.tiled_logits_shards = checkpointing ? model::kAutoShards : 1;
    const int64_t states = int64_t{20} << 30;
    int64_t previous = 0;
    for (const int64_t gib : {24, 40, 80, 141}) {
      const int64_t budget = gib << 30;
      const int64_t granule = 2;
      const auto longest = longest_fitting_seq_len(c, s, states, budget, granule, int64_t{1} << 24);
      ASSERT_TRUE(longest.has_value()) << gib;
      EXPECT_EQ(*longest % granule, 0);
      EXPECT_GE(*longest, previous) << gib;
      previous = *longest;
      s.seq_len = *longest;
      EXPECT_LE(states + estimate_activations(c, s).peak_bytes, budget);
      s.seq_len = *longest + granule;
      EXPECT_GT(states + estimate_activations(c, s).peak_bytes, budget);
    }
  }
  // Nothing fits when the states alone exceed the budget; the cap is respected.
  ActivationSettings s;
  EXPECT_FALSE(longest_fitting_seq_len(c, s, 2, 1, 1, 1024).has_value());
  EXPECT_EQ(longest_fitting_seq_len(c, s, 0, int64_t{1} << 50, 4, 1000), 1000);
}

}  // namespace
}  // namespace zero::sharding
