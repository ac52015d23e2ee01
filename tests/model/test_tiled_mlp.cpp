// TiledMlp: each transformer block's MLP half run over row shards with recompute in backward
// gives the untiled values and gradients - the loss, every parameter gradient, the logits, and a
// block's output and input gradient - for shard counts that divide the 12 rows and that do not.
//
// Tolerances: f64 1e-12 relative (the same products, only the weight-gradient sums over rows are
// split into per-shard partial sums: reassociation). f32 1e-5 relative: the same reassociation
// in f32 (eps 6e-8) over sums of up to 12 rows and 2 layers stays far below it. bf16 activations
// 2e-2 relative: values are rounded to 8 bits after every op, so one reassociated partial sum
// that rounds the other way moves a value by 2^-8 ~ 4e-3 and that can spread through the layers.
#include <gtest/gtest.h>

#include <string>

#include "model/transformer_block.h"
#include "tiling_harness.h"

namespace zero::model {
namespace tiled_mlp_test {

using namespace tiling_test;

SequenceTiling mlp_tiling(int64_t shards) {
  SequenceTiling t;
  t.mlp_shards = shards;
  return t;
}

class TiledMlpModels : public ::testing::TestWithParam<std::string> {};

TEST_P(TiledMlpModels, F64MatchesUntiledForDividingAndUnevenShards) {
  const Batch batch = make_batch(2, 6, config_for(GetParam()).vocab_size);  // 12 rows
  TiledSetup s;
  s.family = GetParam();
  const Pass untiled = train_pass(s, batch);
  for (int64_t shards : {2, 3, 5, 7, 12}) {
    SCOPED_TRACE("mlp shards " + std::to_string(shards));
    s.tiling = mlp_tiling(shards);
    const Pass tiled = train_pass(s, batch);
    EXPECT_NEAR(tiled.loss, untiled.loss, 1e-12 * untiled.loss);
    expect_close(tiled.grads, untiled.grads, 1e-12, "gradients");
    expect_close(tiled.logits, untiled.logits, 1e-12, "logits");
  }
}

TEST_P(TiledMlpModels, MoreShardsThanRowsClampToOneRowPerShard) {
  const Batch batch = make_batch(2, 6, config_for(GetParam()).vocab_size);
  TiledSetup s;
  s.family = GetParam();
  s.tiling = mlp_tiling(12);
  const Pass per_row = train_pass(s, batch);
  s.tiling = mlp_tiling(1000);
  const Pass clamped = train_pass(s, batch);
  EXPECT_EQ(clamped.loss, per_row.loss);
  EXPECT_EQ(clamped.grads, per_row.grads);
}

TEST_P(TiledMlpModels, F32AndBf16WithinTheirTolerances) {
  const Batch batch = make_batch(3, 4, config_for(GetParam()).vocab_size);  // 12 rows
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 activations" : "f32");
    TiledSetup s;
    s.family = GetParam();
    s.params = DType::kF32;
    if (bf16) s.activations = DType::kBF16;
    const double tolerance = bf16 ? 2e-2 : 1e-5;
    const Pass untiled = train_pass(s, batch);
    for (int64_t shards : {3, 5}) {
      s.tiling = mlp_tiling(shards);
      const Pass tiled = train_pass(s, batch);
      EXPECT_NEAR(tiled.loss, untiled.loss, tolerance * untiled.loss) << shards;
      expect_close(tiled.grads, untiled.grads, tolerance, "gradients, shards " + std::to_string(shards));
    }
  }
}

TEST_P(TiledMlpModels, WithCheckpointingLossGradAndIgnoredTargets) {
  // Rows 4..7 (a whole shard of 3) ignored, and one more; d objective / d loss = 8.
  const Batch batch = make_batch(2, 6, config_for(GetParam()).vocab_size, {4, 5, 6, 7, 10});
  TiledSetup s;
  s.family = GetParam();
  s.loss_grad = 8.0;
  const Pass untiled = train_pass(s, batch);
  s.checkpointing = true;
  for (int64_t shards : {3, 5}) {
    s.tiling = mlp_tiling(shards);
    const Pass tiled = train_pass(s, batch);
    EXPECT_NEAR(tiled.loss, untiled.loss, 1e-12 * untiled.loss) << shards;
    expect_close(tiled.grads, untiled.grads, 1e-12, "gradients, shards " + std::to_string(shards));
  }
}

// One block on its own: its output and the gradient w.r.t. its input, which a whole-model test
// sees only through the embedding gradient.
TEST_P(TiledMlpModels, BlockOutputAndInputGradient) {
  const TransformerConfig config = config_for(GetParam());
  const Batch batch = make_batch(2, 6, config.vocab_size);
  const int64_t rows = 12, c = config.hidden_size;
  struct BlockPass {
    std::vector<double> y, dx, grads;
  };
  auto run_block = [&](int64_t shards) {
    backend::CpuBackend cpu;
    auto model = build_transformer(config, cpu, DType::kF64);
    init_parameters(*model, 3);
    Unit& block = *model->units()[1];
    EXPECT_EQ(block.kind(), "transformer_block");
    Tensor x = Tensor::zeros_host({rows, c}, DType::kF64);
    Tensor dy = Tensor::zeros_host({rows, c}, DType::kF64);
    for (int64_t i = 0; i < rows * c; ++i) {
      x.data<double>()[i] = std::sin(0.37 * static_cast<double>(i));
      dy.data<double>()[i] = std::cos(0.11 * static_cast<double>(i));
    }
    StepContext ctx{cpu, batch};
    ctx.sequence_tiling = mlp_tiling(shards);
    BlockPass p;
    p.y = to_doubles(block.forward(ctx, x));
    p.dx = to_doubles(block.backward(ctx, dy));
    p.grads = to_doubles(model->flat_grads());
    return p;
  };
  const BlockPass untiled = run_block(1);
  for (int64_t shards : {3, 5, 12}) {
    SCOPED_TRACE("mlp shards " + std::to_string(shards));
    const BlockPass tiled = run_block(shards);
    expect_close(tiled.y, untiled.y, 1e-12, "block output");
    expect_close(tiled.dx, untiled.dx, 1e-12, "input gradient");
    expect_close(tiled.grads, untiled.grads, 1e-12, "parameter gradients");
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TiledMlpModels, ::testing::Values("gpt2", "llama"));

}  // namespace tiled_mlp_test
}  // namespace zero::model
