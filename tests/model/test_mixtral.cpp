// Mixtral's mixture-of-experts blocks: the config.json keys (router jitter refused rather than
// ignored), the routers' load-balancing loss against Hugging Face's formula, MoeFeedForward
// against the per-token formula of Hugging Face's MixtralSparseMoeBlock written out here, one
// expert being exactly Llama's dense MLP, row shards (TiledMLP) changing nothing but summation
// order, and the Hugging Face tensor names through a save and reload. Gradients against finite
// differences: test_model_gradients.cpp (mixtral_experts, mixtral_balance_loss).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "io/safetensors_reader.h"
#include "model/hf_checkpoint.h"
#include "model/moe_feed_forward.h"
#include "model/router_balance.h"
#include "model/tensor_parallel.h"
#include "model/transformer_builder.h"
#include "support/gradcheck.h"

namespace zero::model {
namespace test_mixtral {

namespace fs = std::filesystem;

nlohmann::json mixtral_json() {
  return {{"architectures", {"MixtralForCausalLM"}}, {"model_type", "mixtral"},
          {"vocab_size", 64}, {"hidden_size", 16}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 24},
          {"max_position_embeddings", 128}, {"rms_norm_eps", 1e-5}, {"rope_theta", 1e6},
          {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"sliding_window", nullptr},
          {"output_router_logits", false}, {"router_aux_loss_coef", 0.02},
          {"router_jitter_noise", 0.0}, {"tie_word_embeddings", false}};
}

std::string config_error(const nlohmann::json& json) {
  try {
    TransformerConfig::from_hf_json(json, "config.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MixtralConfig, ReadsTheExpertsAndWritesThemBack) {
  const TransformerConfig c = TransformerConfig::from_hf_json(mixtral_json(), "config.json");
  EXPECT_EQ(c.family, ModelFamily::kMixtral);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_TRUE(c.normalize_expert_weights);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_FALSE(c.mlp_bias);
  // Router 8 x 16 and 8 experts of three 16 x 24 matrices per layer.
  const int64_t per_block = 2 * 16 + 16 * (16 + 2 * 8) + 16 * 16 + 8 * 16 + 8 * 3 * 16 * 24;
  EXPECT_EQ(c.num_parameters(), 2 * per_block + 2 * 64 * 16 + 16);
  const nlohmann::json back = c.to_hf_json();
  EXPECT_EQ(back["num_local_experts"], 8);
  EXPECT_EQ(back["num_experts_per_tok"], 2);
  EXPECT_EQ(back["model_type"], "mixtral");
  EXPECT_EQ(TransformerConfig::from_hf_json(back, "back").num_parameters(), c.num_parameters());
}

TEST(MixtralConfig, RefusesRouterJitterAndBadExpertCounts) {
  nlohmann::json j = mixtral_json();
  j["router_jitter_noise"] = 0.01;
  EXPECT_NE(config_error(j).find("'router_jitter_noise'"), std::string::npos) << config_error(j);
  j = mixtral_json();
  j["num_experts_per_tok"] = 9;
  EXPECT_NE(config_error(j).find("'num_experts_per_tok' = 9 is out of range"), std::string::npos)
      << config_error(j);
  j = mixtral_json();
  j.erase("num_local_experts");
  EXPECT_NE(config_error(j).find("'num_local_experts' is missing"), std::string::npos)
      << config_error(j);
  j = mixtral_json();
  j["num_local_experts"] = 0;
  EXPECT_NE(config_error(j).find("'num_local_experts'"), std::string::npos) << config_error(j);
}

TEST(MixtralConfig, ExpertsBelongToMixtralOnly) {
  TransformerConfig llama = preset_config("tiny-llama");
  llama.num_experts = 4;
  llama.experts_per_token = 2;
  EXPECT_THROW(llama.validate("preset"), ConfigError);
  TransformerConfig mixtral = preset_config("tiny-mixtral");
  mixtral.num_experts = 0;
  mixtral.experts_per_token = 0;
  EXPECT_THROW(mixtral.validate("preset"), ConfigError);
  mixtral = preset_config("tiny-mixtral");
  mixtral.router_aux_loss_coef = -0.5;
  EXPECT_THROW(mixtral.validate("preset"), ConfigError);
}

TEST(MixtralConfig, TensorParallelismOverExpertsIsRefused) {
  const TransformerConfig c = preset_config("tiny-mixtral");
  try {
    tensor_parallel_block_config(c, TensorParallelLayout{0, 2});
    FAIL() << "tensor-parallel experts were accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("autotp_size"), std::string::npos) << e.what();
  }
}

// silu(a) * b.
double swiglu(double a, double b) { return a / (1.0 + std::exp(-a)) * b; }

TEST(MoeFeedForward, MatchesThePerTokenFormula) {
  const int64_t n = 9, c = 6, inner = 5, experts = 4, k = 2;
  backend::CpuBackend cpu;
  const Tensor h = zero::testing::random_tensor({n, c}, DType::kF64, 1);
  const Tensor router = zero::testing::random_tensor({experts, c}, DType::kF64, 2);
  const Tensor up = zero::testing::random_tensor({experts * 2 * inner, c}, DType::kF64, 3);
  const Tensor down = zero::testing::random_tensor({experts * c, inner}, DType::kF64, 4);
  auto at = [](const Tensor& t, int64_t row, int64_t col) {
    return t.data<double>()[row * t.size(1) + col];
  };
  for (bool normalize : {true, false}) {
    MoeFeedForward moe(experts, k, inner, normalize);
    Tensor y = Tensor::zeros_host({n, c}, DType::kF64);
    moe.forward(cpu, h, router, up, down, &y, false);
    const std::vector<int32_t> counts = moe.last_counts();
    EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0), n * k);
    for (int64_t t = 0; t < n; ++t) {
      // softmax over the router's logits, the top k, renormalised when asked.
      std::vector<double> p(static_cast<size_t>(experts));
      for (int64_t e = 0; e < experts; ++e) {
        double logit = 0;
        for (int64_t i = 0; i < c; ++i) logit += at(router, e, i) * at(h, t, i);
        p[static_cast<size_t>(e)] = logit;
      }
      const double max = *std::max_element(p.begin(), p.end());
      double sum = 0;
      for (double& v : p) sum += (v = std::exp(v - max));
      for (double& v : p) v /= sum;
      std::vector<int64_t> order(static_cast<size_t>(experts));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return p[a] > p[b]; });
      const double chosen = p[order[0]] + p[order[1]];
      for (int64_t col = 0; col < c; ++col) {
        double want = 0;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t e = order[static_cast<size_t>(j)];
          double out = 0;
          for (int64_t m = 0; m < inner; ++m) {
            double gate = 0, lin = 0;
            for (int64_t i = 0; i < c; ++i) {
              gate += at(up, e * 2 * inner + m, i) * at(h, t, i);          // w1
              lin += at(up, e * 2 * inner + inner + m, i) * at(h, t, i);   // w3
            }
            out += at(down, e * c + col, m) * swiglu(gate, lin);           // w2
          }
          want += (normalize ? p[e] / chosen : p[e]) * out;
        }
        // f64 throughout; only the order of the sums differs (values O(1)): 1e-12.
        EXPECT_NEAR(at(y, t, col), want, 1e-12) << "token " << t << " column " << col;
      }
    }
  }
}

Batch token_batch(int64_t batch, int64_t seq, int64_t vocab) {
  Tensor ids = Tensor::zeros_host({batch, seq}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 53 + 11) % vocab;
  return batch_from_input_ids(ids);
}

// Hugging Face's load_balancing_loss_func over two MoE layers' router logits, concatenated:
// E * sum_e (share of the top-k picks going to e) * (mean softmax probability of e).
TEST(RouterBalance, EqualsTheConcatenatedLayersFormula) {
  const int64_t n = 11, c = 6, inner = 3, experts = 5, k = 2;
  const double coefficient = 0.02;
  backend::CpuBackend cpu;
  const Tensor up = zero::testing::random_tensor({experts * 2 * inner, c}, DType::kF64, 3);
  const Tensor down = zero::testing::random_tensor({experts * c, inner}, DType::kF64, 4);
  RouterBalance balance(cpu, experts, coefficient);
  std::vector<double> picks(static_cast<size_t>(experts), 0.0), probs(picks);
  for (uint64_t layer = 0; layer < 2; ++layer) {
    const Tensor h = zero::testing::random_tensor({n, c}, DType::kF64, 10 + layer);
    const Tensor router = zero::testing::random_tensor({experts, c}, DType::kF64, 20 + layer);
    MoeFeedForward moe(experts, k, inner, true);
    Tensor y = Tensor::zeros_host({n, c}, DType::kF64);
    moe.forward(cpu, h, router, up, down, &y, false, &balance);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> p(static_cast<size_t>(experts));
      for (int64_t e = 0; e < experts; ++e) {
        for (int64_t i = 0; i < c; ++i) {
          p[static_cast<size_t>(e)] +=
              router.data<double>()[e * c + i] * h.data<double>()[t * c + i];
        }
      }
      const double max = *std::max_element(p.begin(), p.end());
      double sum = 0;
      for (double& v : p) sum += (v = std::exp(v - max));
      std::vector<int64_t> order(static_cast<size_t>(experts));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return p[a] > p[b]; });
      for (int64_t j = 0; j < k; ++j) picks[static_cast<size_t>(order[j])] += 1.0;
      for (int64_t e = 0; e < experts; ++e) probs[static_cast<size_t>(e)] += p[e] / sum;
    }
  }
  const double rows = 2.0 * n;
  double aux = 0.0;
  for (int64_t e = 0; e < experts; ++e) {
    aux += (picks[static_cast<size_t>(e)] / rows) * (probs[static_cast<size_t>(e)] / rows);
  }
  aux *= static_cast<double>(experts);
  // f64 sums of 22 rows in another order: a few units of 1e-17 on a value near 0.04.
  EXPECT_NEAR(balance.finish(), coefficient * aux, 1e-15);
  // The gradient of coefficient * aux with respect to each probability: c * E * F_e / R.
  std::vector<double> grad(static_cast<size_t>(experts));
  cpu.copy_to_host(grad.data(), balance.prob_grad());
  for (int64_t e = 0; e < experts; ++e) {
    EXPECT_NEAR(grad[static_cast<size_t>(e)],
                coefficient * experts * picks[static_cast<size_t>(e)] / rows / rows, 1e-18);
  }
  // Closed: a recompute's routing is not counted again.
  Tensor y = Tensor::zeros_host({n, c}, DType::kF64);
  MoeFeedForward again(experts, k, inner, true);
  again.forward(cpu, zero::testing::random_tensor({n, c}, DType::kF64, 10),
                zero::testing::random_tensor({experts, c}, DType::kF64, 20), up, down, &y, false,
                &balance);
  EXPECT_NEAR(balance.value(), coefficient * aux, 1e-15);
}

TEST(MixtralConfig, OutputRouterLogitsTurnsTheBalanceLossOn) {
  nlohmann::json j = mixtral_json();
  j["output_router_logits"] = true;
  TransformerConfig c = TransformerConfig::from_hf_json(j, "config.json");
  EXPECT_EQ(c.router_aux_loss_coef, 0.02);
  EXPECT_EQ(c.to_hf_json()["output_router_logits"], true);
  j.erase("router_aux_loss_coef");
  EXPECT_EQ(TransformerConfig::from_hf_json(j, "config.json").router_aux_loss_coef, 0.001);
  j["router_aux_loss_coef"] = -1;
  EXPECT_NE(config_error(j).find("'router_aux_loss_coef' must be a number >= 0"),
            std::string::npos) << config_error(j);
  // Off, the loss is what a model without the term gives; on, it grows by the term.
  c.router_aux_loss_coef = 0.0;
  backend::CpuBackend cpu;
  auto plain = build_transformer(c, cpu, DType::kF64);
  c.router_aux_loss_coef = 0.5;
  auto balanced = build_transformer(c, cpu, DType::kF64);
  init_parameters(*plain, 8, 0.3);
  init_parameters(*balanced, 8, 0.3);
  const Batch batch = token_batch(2, 8, c.vocab_size);
  const double base = plain->evaluate(batch);
  const double with_term = balanced->evaluate(batch);
  // Even routing gives aux = k = 2 (F_e = k/E, P_e = 1/E); each F_e <= 1 (an expert is chosen at
  // most once a row) bounds aux by E. Routing that favours likely experts keeps aux near or
  // above k, so the term 0.5 * aux lies well inside (0.49, 0.5 E); its exact value is pinned by
  // RouterBalance.EqualsTheConcatenatedLayersFormula.
  EXPECT_GT(with_term - base, 0.49);
  EXPECT_LT(with_term - base, 0.5 * c.num_experts);
  // Pipeline stages cannot average over each other's blocks yet: refused, not ignored.
  try {
    build_transformer_stage(c, cpu, DType::kF64, 0, 2, "config.json");
    FAIL() << "a pipeline stage with the balance loss was built";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("output_router_logits"), std::string::npos) << e.what();
  }
}

// Llama and a one-expert Mixtral of the same shape, the expert holding Llama's MLP weights.
TEST(Mixtral, OneExpertIsTheDenseLlamaMlp) {
  TransformerConfig llama = preset_config("tiny-llama");
  llama.num_layers = 2;
  TransformerConfig mixtral = llama;
  mixtral.family = ModelFamily::kMixtral;
  mixtral.architecture = "MixtralForCausalLM";
  mixtral.num_experts = 1;
  mixtral.experts_per_token = 1;
  backend::CpuBackend cpu;
  auto dense = build_transformer(llama, cpu, DType::kF64);
  auto sparse = build_transformer(mixtral, cpu, DType::kF64);
  init_parameters(*dense, 5, 0.05);
  init_parameters(*sparse, 6, 0.05);
  auto mixtral_name = [](std::string name) {
    const std::pair<const char*, const char*> renames[] = {
        {"mlp.gate_proj", "block_sparse_moe.experts.0.w1"},
        {"mlp.up_proj", "block_sparse_moe.experts.0.w3"},
        {"mlp.down_proj", "block_sparse_moe.experts.0.w2"}};
    for (const auto& [from, to] : renames) {
      const size_t at = name.find(from);
      if (at != std::string::npos) name.replace(at, std::string(from).size(), to);
    }
    return name;
  };
  for (Parameter* p : dense->parameters()) {
    Parameter* twin = sparse->find_parameter(mixtral_name(p->spec.name));
    ASSERT_NE(twin, nullptr) << p->spec.name;
    std::copy_n(p->value.data<double>(), p->numel(), twin->value.data<double>());
  }
  const Batch batch = token_batch(2, 12, llama.vocab_size);
  dense->zero_grad();
  sparse->zero_grad();
  const double dense_loss = dense->forward_backward(batch, 1.0);
  const double sparse_loss = sparse->forward_backward(batch, 1.0);
  // The same f64 products on the same rows (one expert's block is every token, in order); the
  // combine adds 1.0 * y to 0 exactly; 1e-13 / 1e-12 leave room for a BLAS that blocks a
  // product over a slice of a buffer differently from one over a whole tensor.
  EXPECT_NEAR(dense_loss, sparse_loss, 1e-13);
  for (Parameter* p : dense->parameters()) {
    Parameter* twin = sparse->find_parameter(mixtral_name(p->spec.name));
    EXPECT_LE(zero::testing::relative_error(p->grad, twin->grad), 1e-12) << p->spec.name;
  }
  // One expert always carries weight 1: the router learns nothing.
  EXPECT_EQ(std::sqrt(cpu.squared_norm(
                sparse->find_parameter("model.layers.0.block_sparse_moe.gate.weight")->grad)),
            0.0);
}

TEST(Mixtral, RowShardsChangeOnlyTheSummationOrder) {
  const TransformerConfig config = preset_config("tiny-mixtral");
  backend::CpuBackend cpu;
  auto whole = build_transformer(config, cpu, DType::kF64);
  auto tiled = build_transformer(config, cpu, DType::kF64);
  init_parameters(*whole, 3);
  init_parameters(*tiled, 3);
  tiled->set_sequence_tiling(SequenceTiling{3, 1});
  const Batch batch = token_batch(2, 16, config.vocab_size);
  whole->zero_grad();
  tiled->zero_grad();
  // Shards change only the order in which expert gradients are summed (f64): 1e-13 / 1e-12.
  EXPECT_NEAR(whole->forward_backward(batch, 1.0), tiled->forward_backward(batch, 1.0), 1e-13);
  EXPECT_LE(zero::testing::relative_error(whole->flat_grads(), tiled->flat_grads()), 1e-12);
}

TEST(Mixtral, SavesAndReloadsUnderHuggingFaceNames) {
  const fs::path dir = fs::temp_directory_path() /
                       ("zero_mixtral_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const TransformerConfig config = preset_config("tiny-mixtral");
  backend::CpuBackend cpu;
  auto model = build_transformer(config, cpu, DType::kF32);
  init_parameters(*model, 4);
  save_hf_model(*model, dir.string(), DType::kF32);
  const auto file = io::SafetensorsFile::open((dir / "model.safetensors").string());
  EXPECT_TRUE(file.contains("model.layers.3.block_sparse_moe.gate.weight"));
  EXPECT_TRUE(file.contains("model.layers.0.block_sparse_moe.experts.7.w2.weight"));
  EXPECT_EQ(file.entry("model.layers.0.block_sparse_moe.experts.7.w1.weight").shape,
            (Shape{176, 128}));
  EXPECT_FALSE(file.contains("model.layers.0.mlp.gate_proj.weight"));
  auto reloaded = load_hf_model(dir.string(), cpu, DType::kF32);
  EXPECT_EQ(reloaded->num_parameters(), model->num_parameters());
  const Batch batch = token_batch(2, 8, config.vocab_size);
  EXPECT_EQ(model->evaluate(batch), reloaded->evaluate(batch));
  fs::remove_all(dir);
}

}  // namespace test_mixtral
}  // namespace zero::model
