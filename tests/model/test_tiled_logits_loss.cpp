// TiledFusedLogitsLoss: the LM head + cross-entropy over row shards, with the backward folded
// into the forward, gives the untiled loss, every gradient and the captured logits - for shard
// counts that divide the 12 rows and that do not, with ignored targets (a whole shard of them),
// with d objective / d loss != 1 (applied in backward, where it becomes known), with tied (GPT-2)
// and untied (Llama) heads, with activation checkpointing and with the tiled MLP.
//
// Tolerances: as in test_tiled_mlp.cpp. f64 1e-12 relative (only the head-weight gradient's sum
// over rows is split into per-shard partial sums, and loss_grad multiplies after the sum instead
// of before: reassociation). f32 1e-5. bf16 activations 2e-2: dh is rounded to bf16 before it is
// scaled by loss_grad instead of after, one more 2^-8 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model/tiled_logits_loss.h"

#include "tiling_harness.h"

namespace zero::model {
namespace tiled_logits_loss_test {

using namespace tiling_test;

SequenceTiling logits_tiling(int64_t shards, int64_t mlp_shards = 1) {
  SequenceTiling t;
  t.logits_shards = shards;
  t.mlp_shards = mlp_shards;
  return t;
}

class TiledLogitsModels : public ::testing::TestWithParam<std::string> {};

TEST_P(TiledLogitsModels, F64MatchesUntiledForDividingAndUnevenShards) {
  const Batch batch = make_batch(2, 6, config_for(GetParam()).vocab_size);  // 12 rows
  TiledSetup s;
  s.family = GetParam();
  const Pass untiled = train_pass(s, batch);
  for (int64_t shards : {2, 3, 5, 7, 12}) {
    SCOPED_TRACE("logits shards " + std::to_string(shards));
    s.tiling = logits_tiling(shards);
    const Pass tiled = train_pass(s, batch);
    EXPECT_NEAR(tiled.loss, untiled.loss, 1e-12 * untiled.loss);
    expect_close(tiled.grads, untiled.grads, 1e-12, "gradients");
    expect_close(tiled.logits, untiled.logits, 1e-12, "captured logits");
  }
}

TEST_P(TiledLogitsModels, IgnoredTargetsAndLossGrad) {
  // With 3 shards of 4 rows, rows 4..7 are a whole shard of ignored targets.
  const Batch batch = make_batch(2, 6, config_for(GetParam()).vocab_size, {0, 4, 5, 6, 7, 11});
  for (double loss_grad : {1.0, 8.0, 1.0 / 3.0}) {
    SCOPED_TRACE("loss_grad " + std::to_string(loss_grad));
    TiledSetup s;
    s.family = GetParam();
    s.loss_grad = loss_grad;
    const Pass untiled = train_pass(s, batch);
    for (int64_t shards : {3, 5}) {
      s.tiling = logits_tiling(shards);
      const Pass tiled = train_pass(s, batch);
      EXPECT_NEAR(tiled.loss, untiled.loss, 1e-12 * untiled.loss) << shards;
      expect_close(tiled.grads, untiled.grads, 1e-12, "gradients, shards " + std::to_string(shards));
    }
  }
}

TEST_P(TiledLogitsModels, EveryTargetIgnoredGivesZeroLossAndGradients) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < 12; ++i) all.push_back(i);
  const Batch batch = make_batch(2, 6, config_for(GetParam()).vocab_size, all);
  TiledSetup s;
  s.family = GetParam();
  s.tiling = logits_tiling(5);
  const Pass tiled = train_pass(s, batch);
  EXPECT_EQ(tiled.loss, 0.0);
  for (double g : tiled.grads) ASSERT_EQ(g, 0.0);
}

TEST_P(TiledLogitsModels, F32AndBf16WithinTheirTolerances) {
  const Batch batch = make_batch(3, 4, config_for(GetParam()).vocab_size, {1, 2});
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 activations" : "f32");
    TiledSetup s;
    s.family = GetParam();
    s.params = DType::kF32;
    s.loss_grad = 8.0;
    if (bf16) s.activations = DType::kBF16;
    const double tolerance = bf16 ? 2e-2 : 1e-5;
    const Pass untiled = train_pass(s, batch);
    for (int64_t shards : {3, 5}) {
      s.tiling = logits_tiling(shards);
      const Pass tiled = train_pass(s, batch);
      EXPECT_NEAR(tiled.loss, untiled.loss, tolerance * untiled.loss) << shards;
      expect_close(tiled.grads, untiled.grads, tolerance, "gradients, shards " + std::to_string(shards));
      expect_close(tiled.logits, untiled.logits, tolerance, "logits, shards " + std::to_string(shards));
    }
  }
}

TEST_P(TiledLogitsModels, WithTiledMlpAndCheckpointing) {
  const Batch batch = make_batch(2, 6, config_for(GetParam()).vocab_size, {3, 9});
  TiledSetup s;
  s.family = GetParam();
  s.loss_grad = 8.0;
  const Pass untiled = train_pass(s, batch);
  s.checkpointing = true;
  s.tiling = logits_tiling(3, 5);
  const Pass tiled = train_pass(s, batch);
  EXPECT_NEAR(tiled.loss, untiled.loss, 1e-12 * untiled.loss);
  expect_close(tiled.grads, untiled.grads, 1e-12, "gradients");
}

// The helper on its own, for both reductions a loss can use: "mean" (grad_scale = 1 / valid
// targets, what the model's loss is) and "sum" (grad_scale = 1): per-token losses, dh and the
// head-weight gradient equal the untiled head's; evaluation computes the losses only.
TEST(TiledFusedLogitsLoss, MeanAndSumReductionsMatchTheUntiledHead) {
  backend::CpuBackend cpu;
  const int64_t rows = 12, c = 8, v = 29;
  Tensor h = Tensor::zeros_host({rows, c}, DType::kF64);
  Tensor w = Tensor::zeros_host({v, c}, DType::kF64);
  Tensor targets = Tensor::zeros_host({rows}, DType::kI64);
  for (int64_t i = 0; i < rows * c; ++i) h.data<double>()[i] = std::sin(0.9 * static_cast<double>(i));
  for (int64_t i = 0; i < v * c; ++i) w.data<double>()[i] = 0.5 * std::cos(0.4 * static_cast<double>(i));
  int64_t valid = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const bool ignored = i >= 4 && i < 8;  // a whole shard of 3
    targets.data<int64_t>()[i] = ignored ? kIgnoreIndex : (i * 7) % v;
    valid += ignored ? 0 : 1;
  }
  for (const double grad_scale : {1.0 / static_cast<double>(valid), 1.0}) {
    SCOPED_TRACE(grad_scale == 1.0 ? "sum" : "mean");
    Tensor logits = Tensor::zeros_host({rows, v}, DType::kF64);
    Tensor losses = Tensor::zeros_host({rows}, DType::kF64);
    Tensor dh = Tensor::zeros_host({rows, c}, DType::kF64);
    Tensor dw = Tensor::zeros_host({v, c}, DType::kF64);
    cpu.linear_forward(logits, h, w, nullptr);
    cpu.softmax_cross_entropy(losses, &logits, logits, targets, kIgnoreIndex, grad_scale);
    cpu.linear_backward(&dh, dw, nullptr, logits, h, w);
    for (int64_t shards : {3, 5}) {
      TiledFusedLogitsLoss tiled;
      TiledFusedLogitsLoss::Inputs in;
      in.h = &h;
      in.weight = &w;
      in.targets = &targets;
      in.grad_scale = grad_scale;
      // A forward-time expectation that backward corrects (x4 then x1/4: exact in f64).
      in.forward_loss_grad = 4.0;
      Tensor eval_losses = Tensor::zeros_host({rows}, DType::kF64);
      tiled.forward(cpu, in, shards, false, eval_losses);
      EXPECT_FALSE(tiled.has_saved());
      Tensor tiled_losses = Tensor::zeros_host({rows}, DType::kF64);
      tiled.forward(cpu, in, shards, true, tiled_losses);
      Tensor tiled_dw = Tensor::zeros_host({v, c}, DType::kF64);
      const Tensor tiled_dh = tiled.backward(cpu, 1.0, tiled_dw);
      EXPECT_FALSE(tiled.has_saved());
      expect_close(to_doubles(tiled_losses), to_doubles(losses), 1e-12, "losses");
      expect_close(to_doubles(eval_losses), to_doubles(losses), 1e-12, "evaluation losses");
      expect_close(to_doubles(tiled_dh), to_doubles(dh), 1e-12, "dh");
      expect_close(to_doubles(tiled_dw), to_doubles(dw), 1e-12, "head weight gradient");
    }
  }
}

// The simulated device runs the CPU kernels but refuses host access to device memory: the tiled
// head and MLP train there, and give the CPU backend's numbers bit for bit.
TEST_P(TiledLogitsModels, SimulatedDeviceMatchesCpuBitForBit) {
  const Batch batch = make_batch(2, 6, config_for(GetParam()).vocab_size, {4, 5});
  TiledSetup s;
  s.family = GetParam();
  s.params = DType::kF32;
  s.tiling = logits_tiling(5, 3);
  const Pass cpu = train_pass(s, batch);
  s.simulated = true;
  const Pass sim = train_pass(s, batch);
  EXPECT_EQ(sim.loss, cpu.loss);
  EXPECT_EQ(sim.grads, cpu.grads);
  EXPECT_EQ(sim.logits, cpu.logits);
}

INSTANTIATE_TEST_SUITE_P(Families, TiledLogitsModels, ::testing::Values("gpt2", "llama"));

}  // namespace tiled_logits_loss_test
}  // namespace zero::model
