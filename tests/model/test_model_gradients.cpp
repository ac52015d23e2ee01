// Every unit's backward, end to end through the Model, against central finite differences in
// f64 — for each model family and its options (Qwen3's q/k norms, Mixtral's experts and router
// included) — plus a user-defined unit in the list, and the f32 path against f64.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/cpu_backend.h"
#include "model/embedding_unit.h"
#include "model/lm_head_unit.h"
#include "model/transformer_block.h"
#include "model/transformer_builder.h"
#include "support/gradcheck.h"

namespace zero::model {
namespace {

TransformerConfig tiny(ModelFamily family) {
  TransformerConfig c = family == ModelFamily::kGpt2 ? preset_config("tiny") : preset_config("tiny-llama");
  c.family = family;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = family == ModelFamily::kGpt2 ? 2 : 1;
  c.head_dim = 4;
  c.intermediate_size = family == ModelFamily::kGpt2 ? 32 : 12;
  c.max_position_embeddings = 8;
  if (family == ModelFamily::kQwen2) {
    c.qkv_bias = true;
    c.attn_out_bias = c.mlp_bias = false;
  }
  if (family == ModelFamily::kQwen3 || family == ModelFamily::kQwen3Moe) {
    c.qk_norm = true;
    c.head_dim = 6;  // q and k widths (12, 6) apart from the hidden size
  }
  if (family == ModelFamily::kMixtral || family == ModelFamily::kQwen3Moe) {
    c.num_experts = 4;  // 12 tokens over 4 experts, 2 each: every expert gets some
    c.experts_per_token = 2;
    // Qwen3-MoE without norm_topk_prob: the route's backward through the softmax over all E.
    c.normalize_expert_weights = family == ModelFamily::kMixtral;
  }
  return c;
}

Batch random_batch(int64_t batch, int64_t seq_len, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor ids = Tensor::zeros_host({batch, seq_len}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = static_cast<int64_t>(rng() % vocab);
  Batch b = batch_from_input_ids(ids);
  b.targets.data<int64_t>()[1] = kIgnoreIndex;  // an ignored target in the middle too
  return b;
}

// Finite differences over every parameter of a (tiny) f64 model.
void expect_gradients_match_finite_differences(Model& model, const Batch& batch) {
  model.zero_grad();
  model.forward_backward(batch, 1.0);
  Tensor analytic = zero::testing::converted(model.flat_grads(), DType::kF64);
  Tensor params = model.flat_params();
  Tensor numeric = zero::testing::finite_difference(params, [&] { return model.evaluate(batch); });
  for (Parameter* p : model.parameters()) {
    Tensor a = analytic.view(p->flat_offset, {p->numel()});
    Tensor n = numeric.view(p->flat_offset, {p->numel()});
    // 1e-6: f64 central differences are accurate to ~1e-9 here (see gradcheck.h).
    EXPECT_LE(zero::testing::relative_error(a, n), 1e-6) << p->spec.name;
  }
}

struct FamilyCase {
  const char* label;
  ModelFamily family;
  bool tied;
  bool attention_bias;
  int64_t window;
};

class ModelGradients : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(ModelGradients, MatchFiniteDifferences) {
  const FamilyCase& fc = GetParam();
  TransformerConfig config = tiny(fc.family);
  config.tie_word_embeddings = fc.tied;
  if (fc.family == ModelFamily::kLlama && fc.attention_bias) {
    config.qkv_bias = config.attn_out_bias = config.mlp_bias = true;
  }
  if (fc.family == ModelFamily::kQwen3) config.qkv_bias = config.attn_out_bias = fc.attention_bias;
  config.sliding_window = fc.window;
  if (std::string(fc.label).ends_with("balance_loss")) config.router_aux_loss_coef = 0.3;
  backend::CpuBackend cpu;
  auto model = build_transformer(config, cpu, DType::kF64);
  init_parameters(*model, 7, 0.3);  // large init so every path carries signal
  expect_gradients_match_finite_differences(*model, random_batch(2, 6, config.vocab_size, 3));
}

INSTANTIATE_TEST_SUITE_P(
    Families, ModelGradients,
    ::testing::Values(FamilyCase{"gpt2_tied", ModelFamily::kGpt2, true, true, 0},
                      FamilyCase{"gpt2_untied", ModelFamily::kGpt2, false, true, 0},
                      FamilyCase{"llama_gqa", ModelFamily::kLlama, false, false, 0},
                      FamilyCase{"llama_all_biases_tied", ModelFamily::kLlama, true, true, 0},
                      FamilyCase{"qwen2_qkv_bias", ModelFamily::kQwen2, false, false, 0},
                      FamilyCase{"mistral_window3", ModelFamily::kMistral, false, false, 3},
                      // Per-head q/k norms (their weights' gradients included).
                      FamilyCase{"qwen3_tied", ModelFamily::kQwen3, true, false, 0},
                      FamilyCase{"qwen3_attention_bias", ModelFamily::kQwen3, false, true, 0},
                      FamilyCase{"mixtral_experts", ModelFamily::kMixtral, false, false, 3},
                      // The routers' load-balancing loss (its value is in evaluate()'s loss).
                      FamilyCase{"mixtral_balance_loss", ModelFamily::kMixtral, false, false, 0},
                      FamilyCase{"qwen3_moe_balance_loss", ModelFamily::kQwen3Moe, false, false,
                                 0}),
    [](const auto& param_info) { return std::string(param_info.param.label); });

// A unit type defined outside the library: a learned per-channel scale of the residual stream.
class ChannelScaleUnit final : public Unit {
 public:
  explicit ChannelScaleUnit(int64_t channels) : Unit("scale") {
    scale_ = add_parameter({"custom.scale", {channels}, false, HfLayout::kSame});
  }
  std::string kind() const override { return "channel_scale"; }
  Tensor forward(StepContext& ctx, const Tensor& x) override {
    Tensor y = Tensor::zeros_host(x.shape(), x.dtype());
    const int64_t c = x.size(1);
    for (int64_t i = 0; i < x.numel(); ++i) {
      y.data<double>()[i] = x.data<double>()[i] * param(scale_).data<double>()[i % c];
    }
    if (ctx.training) x_ = x;
    return y;
  }
  Tensor backward(StepContext&, const Tensor& dy) override {
    Tensor dx = Tensor::zeros_host(dy.shape(), dy.dtype());
    const int64_t c = dy.size(1);
    for (int64_t i = 0; i < dy.numel(); ++i) {
      dx.data<double>()[i] = dy.data<double>()[i] * param(scale_).data<double>()[i % c];
      grad(scale_).data<double>()[i % c] += dy.data<double>()[i] * x_.data<double>()[i];
    }
    return dx;
  }
  void release_activations() override { x_ = Tensor(); }

 private:
  size_t scale_ = 0;
  Tensor x_;
};

TEST(CustomUnit, UserDefinedUnitTrainsInsideTheModel) {
  TransformerConfig config = tiny(ModelFamily::kLlama);
  backend::CpuBackend cpu;
  Model model(cpu, DType::kF64);
  auto& embedding = static_cast<EmbeddingUnit&>(model.add_unit(std::make_unique<EmbeddingUnit>(config)));
  model.add_unit(std::make_unique<ChannelScaleUnit>(config.hidden_size));
  model.add_unit(std::make_unique<TransformerBlock>(config, 0));
  model.add_unit(std::make_unique<LmHeadUnit>(config, &embedding.token_embedding()));
  model.finalize();
  double* p = model.flat_params().data<double>();
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0.0, 0.3);
  for (int64_t i = 0; i < model.num_parameters(); ++i) p[i] = normal(rng);
  ASSERT_NE(model.find_parameter("custom.scale"), nullptr);
  expect_gradients_match_finite_differences(model, random_batch(2, 5, config.vocab_size, 9));
}

// f32 against f64 on the same weights: the f32 path is within 1e-4 norm-wise (unit roundoff
// 6e-8 grown through two blocks of reductions of length <= 32 and a large-init softmax).
TEST(ModelPrecision, F32MatchesF64) {
  for (ModelFamily family : {ModelFamily::kGpt2, ModelFamily::kLlama}) {
    TransformerConfig config = tiny(family);
    backend::CpuBackend cpu;
    auto m64 = build_transformer(config, cpu, DType::kF64);
    auto m32 = build_transformer(config, cpu, DType::kF32);
    init_parameters(*m64, 11, 0.3);
    init_parameters(*m32, 11, 0.3);
    // Same starting values: the f32 weights are the rounded f64 weights; copy them back exactly.
    for (int64_t i = 0; i < m64->num_parameters(); ++i) {
      m64->flat_params().data<double>()[i] = m32->flat_params().data<float>()[i];
    }
    Batch batch = random_batch(2, 6, config.vocab_size, 4);
    m64->zero_grad();
    m32->zero_grad();
    const double l64 = m64->forward_backward(batch);
    const double l32 = m32->forward_backward(batch);
    EXPECT_NEAR(l32, l64, 1e-5 * std::abs(l64));
    const Tensor g32 = zero::testing::converted(m32->flat_grads(), DType::kF64);
    EXPECT_LE(zero::testing::relative_error(g32, m64->flat_grads()), 1e-4);
  }
}

TEST(ModelGradients, AccumulateAcrossMicroBatches) {
  TransformerConfig config = tiny(ModelFamily::kGpt2);
  backend::CpuBackend cpu;
  auto model = build_transformer(config, cpu, DType::kF64);
  init_parameters(*model, 1, 0.3);
  Batch a = random_batch(2, 6, config.vocab_size, 1);
  Batch b = random_batch(2, 6, config.vocab_size, 2);
  model->zero_grad();
  model->forward_backward(a);
  Tensor ga = zero::testing::converted(model->flat_grads(), DType::kF64);
  model->zero_grad();
  model->forward_backward(b);
  Tensor gb = zero::testing::converted(model->flat_grads(), DType::kF64);
  model->zero_grad();
  model->forward_backward(a, 0.5);
  model->forward_backward(b, 0.5);
  for (int64_t i = 0; i < ga.numel(); ++i) {
    EXPECT_NEAR(model->flat_grads().data<double>()[i], 0.5 * (ga.data<double>()[i] + gb.data<double>()[i]), 1e-12);
  }
}

}  // namespace
}  // namespace zero::model
