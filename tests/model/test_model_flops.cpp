// The FLOP formula table (model/model_flops.h): counts of a tiny model checked against a hand
// calculation, totals identical to the formula the MFU figure used before the table existed, one
// entry per unit of the built model with that unit's name and parameter count.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/model_flops.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace {

// The MFU formula as it stood before the per-unit table (kept here as the reference the table
// must reproduce): 6 x tokens x weights, plus causal attention 3 x 2 x 2 x T^2/2 x q x batch per
// layer.
StepFlops previous_mfu_formula(const TransformerConfig& c, int64_t batch, int64_t seq_len) {
  const auto tokens = static_cast<double>(batch * seq_len);
  const auto h = static_cast<double>(c.hidden_size);
  const auto qkv = static_cast<double>(c.q_dim() + 2 * c.kv_dim());
  const auto q = static_cast<double>(c.q_dim());
  const auto inner = static_cast<double>(c.intermediate_size);
  const double up = c.mlp == MlpKind::kSwiGlu ? 2.0 * inner : inner;
  const double block_weights = h * qkv + q * h + h * up + inner * h;
  const double weights =
      static_cast<double>(c.num_layers) * block_weights + h * static_cast<double>(c.vocab_size);
  StepFlops f;
  f.matmul = 3.0 * 2.0 * tokens * weights;
  const auto t = static_cast<double>(seq_len);
  f.attention = 3.0 * 2.0 * 2.0 * (t * t / 2.0) * q * static_cast<double>(batch) *
                static_cast<double>(c.num_layers);
  return f;
}

// GPT-2 shape small enough to count by hand: vocab 10, hidden 4, 2 layers of 2 heads x 2,
// MLP 8, 16 positions, tied head.
TransformerConfig hand_config() {
  TransformerConfig c = preset_config("tiny");
  c.vocab_size = 10;
  c.hidden_size = 4;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 2;
  c.intermediate_size = 8;
  c.max_position_embeddings = 16;
  c.tie_word_embeddings = true;
  return c;
}

TEST(ModelFlops, TinyGpt2MatchesAHandCalculation) {
  const TransformerConfig c = hand_config();
  // batch 3 x seq 5 = 15 tokens.
  const std::vector<UnitFlops> units = unit_flops(c, 3, 5);
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[0].name, "embedding");
  EXPECT_EQ(units[1].name, "block0");
  EXPECT_EQ(units[2].name, "block1");
  EXPECT_EQ(units[3].name, "lm_head");

  // Embedding: wte 10x4 + wpe 16x4 parameters, lookups only.
  EXPECT_EQ(units[0].params(), 40.0 + 64.0);
  EXPECT_EQ(units[0].forward_macs(), 0.0);

  // A block: qkv 15 x 4 x 12 = 720 MACs, scores and values 3 x 25/2 x 4 = 150 each, output
  // 15 x 4 x 4 = 240, up 15 x 4 x 8 = 480, down 15 x 8 x 4 = 480: 2220 MACs.
  const UnitFlops& block = units[1];
  ASSERT_EQ(block.ops.size(), 8u);
  EXPECT_EQ(block.ops[1].name, "qkv projection");
  EXPECT_EQ(block.ops[1].forward_macs, 720.0);
  EXPECT_EQ(block.ops[2].forward_macs, 150.0);
  EXPECT_EQ(block.ops[3].forward_macs, 150.0);
  EXPECT_TRUE(block.ops[2].attention);
  EXPECT_EQ(block.ops[4].forward_macs, 240.0);
  EXPECT_EQ(block.ops[6].forward_macs, 480.0);
  EXPECT_EQ(block.ops[7].forward_macs, 480.0);
  EXPECT_EQ(block.forward_macs(), 2220.0);
  EXPECT_EQ(block.forward_flops(), 4440.0);
  EXPECT_EQ(block.backward_flops(), 8880.0);
  EXPECT_EQ(block.training_flops(), 13320.0);
  // Parameters: 2 LayerNorms (4 + 4 each), qkv 48 + 12, out 16 + 4, up 32 + 8, down 32 + 4.
  EXPECT_EQ(block.params(), 16.0 + 60.0 + 20.0 + 40.0 + 36.0);

  // Head: final LayerNorm 8 parameters; the tied 4 x 10 product, 15 x 4 x 10 = 600 MACs, owns none.
  EXPECT_EQ(units[3].params(), 8.0);
  EXPECT_EQ(units[3].forward_macs(), 600.0);

  // Step: matmuls 6 x 15 x (2 x 128 + 40) = 26640, attention 2 layers x 3 x 2 x 300 = 3600.
  const StepFlops step = training_flops(c, 3, 5);
  EXPECT_EQ(step.matmul, 26640.0);
  EXPECT_EQ(step.attention, 3600.0);
  EXPECT_EQ(step.total(), 30240.0);
  EXPECT_EQ(step.total(), 2.0 * units[1].training_flops() + units[3].training_flops());
}

TEST(ModelFlops, SwiGluCountsGateAndUpAsOneProduct) {
  TransformerConfig c = preset_config("tiny-llama");
  const auto units = unit_flops(c, 1, 4);
  const UnitFlops& block = units[1];
  const auto h = static_cast<double>(c.hidden_size);
  const auto inner = static_cast<double>(c.intermediate_size);
  EXPECT_EQ(block.ops[6].name, "mlp gate+up projection");
  EXPECT_EQ(block.ops[6].forward_macs, 4.0 * h * 2.0 * inner);
  EXPECT_EQ(block.ops[7].forward_macs, 4.0 * inner * h);
  // Grouped KV heads: q + 2 x kv columns.
  EXPECT_EQ(block.ops[1].forward_macs,
            4.0 * h * static_cast<double>(c.q_dim() + 2 * c.kv_dim()));
}

TEST(ModelFlops, MixtralCountsEveryExpertsWeightsButOnlyTheChosenExpertsWork) {
  const TransformerConfig c = preset_config("tiny-mixtral");  // 8 experts, 2 per token
  const auto units = unit_flops(c, 2, 5);                      // 10 tokens
  const UnitFlops& block = units[1];
  const auto h = static_cast<double>(c.hidden_size);
  const auto inner = static_cast<double>(c.intermediate_size);
  ASSERT_EQ(block.ops.size(), 9u);
  EXPECT_EQ(block.ops[6].name, "moe router");
  EXPECT_EQ(block.ops[6].params, 8.0 * h);
  EXPECT_EQ(block.ops[6].forward_macs, 10.0 * h * 8.0);
  EXPECT_EQ(block.ops[7].params, 8.0 * h * 2.0 * inner);
  EXPECT_EQ(block.ops[7].forward_macs, 10.0 * 2.0 * h * 2.0 * inner);  // 20 routed rows
  EXPECT_EQ(block.ops[8].params, 8.0 * inner * h);
  EXPECT_EQ(block.ops[8].forward_macs, 10.0 * 2.0 * inner * h);
  double params = 0.0;
  for (const UnitFlops& u : units) params += u.params();
  EXPECT_EQ(params, static_cast<double>(c.num_parameters()));
}

// Qwen3's q/k head norms: 2 x head_dim parameters a block, no matmul work; the projections are
// q_dim = 192 wide from a hidden size of 128.
TEST(ModelFlops, Qwen3CountsTheHeadNormsAndItsWideQueries) {
  const TransformerConfig c = preset_config("tiny-qwen3");
  const auto units = unit_flops(c, 2, 5);  // 10 tokens
  const UnitFlops& block = units[1];
  ASSERT_EQ(block.ops.size(), 9u);
  EXPECT_EQ(block.ops[2].name, "query/key head norms");
  EXPECT_EQ(block.ops[2].params, 2.0 * 48.0);
  EXPECT_EQ(block.ops[2].forward_macs, 0.0);
  EXPECT_EQ(block.ops[1].forward_macs, 10.0 * 128.0 * (192.0 + 2.0 * 96.0));
  EXPECT_EQ(block.ops[5].forward_macs, 10.0 * 192.0 * 128.0);  // output projection
  double params = 0.0;
  for (const UnitFlops& u : units) params += u.params();
  EXPECT_EQ(params, static_cast<double>(c.num_parameters()));
}

TEST(ModelFlops, SumOverUnitsEqualsTrainingFlopsAndThePreviousMfuFormula) {
  struct Case {
    const char* preset;
    int64_t batch;
    int64_t seq_len;
  };
  for (const Case& k : {Case{"tiny", 4, 64}, Case{"tiny-llama", 3, 63}, Case{"gpt2-124m", 8, 1024},
                        Case{"gpt2-350m", 2, 1024}, Case{"llama-1b", 16, 2048}}) {
    const TransformerConfig c = preset_config(k.preset);
    const std::vector<UnitFlops> units = unit_flops(c, k.batch, k.seq_len);
    double sum = 0.0, forward = 0.0;
    for (const UnitFlops& u : units) {
      sum += u.training_flops();
      forward += u.forward_flops();
    }
    const StepFlops table = training_flops(c, k.batch, k.seq_len);
    const StepFlops before = previous_mfu_formula(c, k.batch, k.seq_len);
    EXPECT_DOUBLE_EQ(sum, table.total()) << k.preset;
    EXPECT_DOUBLE_EQ(3.0 * forward, table.total()) << k.preset;
    EXPECT_DOUBLE_EQ(table.matmul, before.matmul) << k.preset;
    EXPECT_DOUBLE_EQ(table.attention, before.attention) << k.preset;
    EXPECT_EQ(total_flops(units).total(), table.total()) << k.preset;
    // Parameters of the table are the model's.
    double params = 0.0;
    for (const UnitFlops& u : units) params += u.params();
    EXPECT_EQ(params, static_cast<double>(c.num_parameters())) << k.preset;
  }
  // Small sizes are exact integers: identical, not merely close.
  const TransformerConfig tiny = preset_config("tiny");
  EXPECT_EQ(training_flops(tiny, 4, 64).total(), previous_mfu_formula(tiny, 4, 64).total());
}

// Every unit of a built model has the table's name and exactly the table's parameters, across
// the families' variants (tied/untied, biases, LayerNorm/RMSNorm, learned/rotary positions).
TEST(ModelFlops, TableMatchesTheBuiltModelUnitByUnit) {
  std::vector<TransformerConfig> configs;
  configs.push_back(preset_config("tiny"));
  configs.push_back(preset_config("tiny-llama"));
  TransformerConfig untied_biased = preset_config("tiny-llama");  // Qwen2-like
  untied_biased.tie_word_embeddings = !untied_biased.tie_word_embeddings;
  untied_biased.qkv_bias = true;
  untied_biased.attn_out_bias = true;
  untied_biased.mlp_bias = true;
  configs.push_back(untied_biased);
  backend::CpuBackend cpu;
  for (const TransformerConfig& c : configs) {
    const auto model = build_transformer(c, cpu, DType::kF32);
    const std::vector<UnitFlops> table = unit_flops(c, 2, 8);
    ASSERT_EQ(table.size(), model->units().size());
    for (size_t i = 0; i < table.size(); ++i) {
      const Unit& unit = *model->units()[i];
      EXPECT_EQ(table[i].name, unit.name());
      int64_t params = 0;
      for (const Parameter& p : unit.parameters()) params += p.numel();
      EXPECT_EQ(table[i].params(), static_cast<double>(params)) << unit.name();
    }
  }
}

}  // namespace
}  // namespace zero::model
