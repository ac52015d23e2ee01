// Qwen3 (Qwen3ForCausalLM) and Qwen3-MoE (Qwen3MoeForCausalLM): the config.json keys (head_dim's
// own default, attention_bias over q/k/v/o, the experts' own width and norm_topk_prob; the
// per-layer sliding window and dense layers among sparse ones refused rather than ignored), the
// parameter counts of released shapes, the whole model's logits against Hugging Face's forward
// written out here in f64 (per-head RMSNorm of queries and keys before the rotation; the sparse
// MLP's softmax-then-top-k routing, renormalised or not), the norms' scale invariance, and the
// Hugging Face tensor names through a save and reload. Gradients against finite differences:
// test_model_gradients.cpp (qwen3_*); the backend ops: tests/backend/test_qk_norm_ops.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/host_convert.h"
#include "io/safetensors_reader.h"
#include "model/hf_checkpoint.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace test_qwen3 {

namespace fs = std::filesystem;

// Qwen3-0.6B's config.json as released (the keys that shape the model).
nlohmann::json qwen3_06b_json() {
  return {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"},
          {"vocab_size", 151936}, {"hidden_size", 1024}, {"num_hidden_layers", 28},
          {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"head_dim", 128},
          {"intermediate_size", 3072}, {"max_position_embeddings", 40960},
          {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000}, {"rope_scaling", nullptr},
          {"attention_bias", false}, {"attention_dropout", 0.0}, {"hidden_act", "silu"},
          {"use_sliding_window", false}, {"sliding_window", nullptr},
          {"max_window_layers", 28}, {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"}};
}

std::string config_error(const nlohmann::json& json) {
  try {
    TransformerConfig::from_hf_json(json, "config.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Qwen3Config, ReadsTheReleasedShape) {
  const TransformerConfig c = TransformerConfig::from_hf_json(qwen3_06b_json(), "config.json");
  EXPECT_EQ(c.family, ModelFamily::kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_dim(), 2048);  // twice the hidden size
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.attn_out_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 1e6);
  // Per layer: q 1024x2048, k and v 1024x1024 each, o 2048x1024, q_norm and k_norm 128 each,
  // gate/up/down 3 x 1024x3072, two norms of 1024; plus the tied embedding and the final norm.
  const int64_t per_layer =
      2 * 1024 * 2048 + 2 * 1024 * 1024 + 2 * 128 + 3 * 1024 * 3072 + 2 * 1024;
  EXPECT_EQ(c.num_parameters(), 28 * per_layer + 151936 * 1024 + 1024);
  EXPECT_EQ(c.num_parameters(), 596049920);  // "Qwen3-0.6B": 0.44B of it outside the embedding
}

TEST(Qwen3Config, HeadDimDefaultsTo128AndBiasCoversTheAttention) {
  nlohmann::json json = qwen3_06b_json();
  json.erase("head_dim");
  json["attention_bias"] = true;
  json["hidden_size"] = 512;  // 16 heads of 128 are still 2048 query channels
  const TransformerConfig c = TransformerConfig::from_hf_json(json, "config.json");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.attn_out_bias);
  EXPECT_FALSE(c.mlp_bias);
  const nlohmann::json back = c.to_hf_json();
  EXPECT_EQ(back["architectures"], nlohmann::json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(back["model_type"], "qwen3");
  EXPECT_EQ(back["head_dim"], 128);
  EXPECT_EQ(back["attention_bias"], true);
  EXPECT_EQ(back["max_window_layers"], 28);  // a key zero.cpp does not model survives
  const TransformerConfig again = TransformerConfig::from_hf_json(back, "config.json");
  EXPECT_EQ(again.num_parameters(), c.num_parameters());
}

TEST(Qwen3Config, SettingsZeroCppLacksAreRefusedByName) {
  nlohmann::json json = qwen3_06b_json();
  json["use_sliding_window"] = true;
  json["sliding_window"] = nullptr;  // a window needs its size
  const TransformerConfig c = TransformerConfig::from_hf_json(json, "config.json");
  EXPECT_EQ(c.sliding_window, 0);
  json["layer_types"] = {"full_attention", "sliding_attention"};  // 2 of 28 layers
  EXPECT_NE(config_error(json).find("layer_types"), std::string::npos) << config_error(json);
  json = qwen3_06b_json();
  json["head_dim"] = 127;  // rotary pairs need an even head size
  EXPECT_NE(config_error(json).find("head_dim"), std::string::npos) << config_error(json);
  // q/k norms belong to Qwen3: another family's config cannot turn them on.
  TransformerConfig llama = preset_config("tiny-llama");
  llama.qk_norm = true;
  EXPECT_THROW(llama.validate("test"), ConfigError);
}

// Qwen3-30B-A3B's config.json as released (the keys that shape the model).
nlohmann::json qwen3_30b_a3b_json() {
  nlohmann::json json = qwen3_06b_json();
  json["architectures"] = {"Qwen3MoeForCausalLM"};
  json["model_type"] = "qwen3_moe";
  json["hidden_size"] = 2048;
  json["num_hidden_layers"] = 48;
  json["num_attention_heads"] = 32;
  json["num_key_value_heads"] = 4;
  json["intermediate_size"] = 6144;
  json["moe_intermediate_size"] = 768;
  json["num_experts"] = 128;
  json["num_experts_per_tok"] = 8;
  json["norm_topk_prob"] = true;
  json["decoder_sparse_step"] = 1;
  json["mlp_only_layers"] = nlohmann::json::array();
  json["output_router_logits"] = false;
  json["router_aux_loss_coef"] = 0.001;
  json["tie_word_embeddings"] = false;
  return json;
}

TEST(Qwen3MoeConfig, ReadsTheReleasedShape) {
  const TransformerConfig c =
      TransformerConfig::from_hf_json(qwen3_30b_a3b_json(), "config.json");
  EXPECT_EQ(c.family, ModelFamily::kQwen3Moe);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_EQ(c.intermediate_size, 768);  // the experts' width
  EXPECT_TRUE(c.normalize_expert_weights);
  EXPECT_EQ(c.router_aux_loss_coef, 0.0);  // output_router_logits: false
  // Per layer: q 2048x4096, k and v 2048x512 each, o 4096x2048, q/k norms 128 each, two norms
  // of 2048, the router 128x2048 and 128 experts of three 2048x768 matrices; an untied head.
  const int64_t per_layer = 2 * 2048 * 4096 + 2 * 2048 * 512 + 2 * 128 + 2 * 2048 +
                            128 * 2048 + int64_t{128} * 3 * 2048 * 768;
  EXPECT_EQ(c.num_parameters(), 48 * per_layer + 2 * 151936 * 2048 + 2048);
  EXPECT_EQ(c.num_parameters(), 30532122624);  // "Qwen3-30B-A3B": 30.5B in all
}

TEST(Qwen3MoeConfig, WritesBackBothWidthsAndTheRouting) {
  nlohmann::json json = qwen3_30b_a3b_json();
  json["norm_topk_prob"] = false;
  json["output_router_logits"] = true;
  const TransformerConfig c = TransformerConfig::from_hf_json(json, "config.json");
  EXPECT_FALSE(c.normalize_expert_weights);
  EXPECT_EQ(c.router_aux_loss_coef, 0.001);
  const nlohmann::json back = c.to_hf_json();
  EXPECT_EQ(back["model_type"], "qwen3_moe");
  EXPECT_EQ(back["intermediate_size"], 6144);  // the dense width, as it came
  EXPECT_EQ(back["moe_intermediate_size"], 768);
  EXPECT_EQ(back["num_experts"], 128);
  EXPECT_EQ(back["num_experts_per_tok"], 8);
  EXPECT_EQ(back["norm_topk_prob"], false);
  EXPECT_EQ(back["output_router_logits"], true);
  const TransformerConfig again = TransformerConfig::from_hf_json(back, "config.json");
  EXPECT_EQ(again.num_parameters(), c.num_parameters());
  EXPECT_EQ(again.intermediate_size, 768);
  // A preset has no source: its one width is written as both.
  const nlohmann::json preset = preset_config("tiny-qwen3-moe").to_hf_json();
  EXPECT_EQ(preset["intermediate_size"], 64);
  EXPECT_EQ(preset["moe_intermediate_size"], 64);
}

TEST(Qwen3MoeConfig, DenseLayersAmongSparseOnesAreRefusedByName) {
  nlohmann::json json = qwen3_30b_a3b_json();
  json["decoder_sparse_step"] = 2;
  EXPECT_NE(config_error(json).find("decoder_sparse_step"), std::string::npos)
      << config_error(json);
  json = qwen3_30b_a3b_json();
  json["mlp_only_layers"] = {0, 47};
  EXPECT_NE(config_error(json).find("mlp_only_layers"), std::string::npos) << config_error(json);
  json = qwen3_30b_a3b_json();
  json.erase("moe_intermediate_size");
  EXPECT_NE(config_error(json).find("moe_intermediate_size"), std::string::npos)
      << config_error(json);
  json = qwen3_30b_a3b_json();
  json["num_experts_per_tok"] = 129;
  EXPECT_NE(config_error(json).find("num_experts_per_tok"), std::string::npos)
      << config_error(json);
}

// ---- Hugging Face's Qwen3 forward, written out in f64 -----------------------------------------

using Matrix = std::vector<double>;  // row-major

const double* values(Model& model, const std::string& name) {
  Parameter* p = model.find_parameter(name);
  if (p == nullptr) throw Error("no parameter " + name);
  return p->value.data<double>();
}

// y[rows, out] = x[rows, in] w[out, in]^T (+ bias)
Matrix linear(const Matrix& x, int64_t in, const double* w, int64_t out, const double* bias) {
  const int64_t rows = static_cast<int64_t>(x.size()) / in;
  Matrix y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = bias != nullptr ? bias[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[static_cast<size_t>(r * in + i)] * w[o * in + i];
      y[static_cast<size_t>(r * out + o)] = s;
    }
  }
  return y;
}

// Qwen3RMSNorm over consecutive groups of `dim`: x / sqrt(mean(x^2) + eps) * w.
void rms_norm(Matrix& x, int64_t dim, const double* w, double eps) {
  for (size_t start = 0; start < x.size(); start += static_cast<size_t>(dim)) {
    double* v = x.data() + start;
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += v[i] * v[i];
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) v[i] *= inv * w[i];
  }
}

// Rotate-half rotary embedding of each head of `width` channels in rows of `seq` positions.
// Hugging Face forms the angles in f32 whatever the model's dtype (inv_freq = 1 / theta^(2i/D)
// and position * inv_freq in float32); their cosines and sines are then exact here.
void rotate(Matrix& x, int64_t seq, int64_t width, int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  for (size_t row = 0; row < x.size() / static_cast<size_t>(width); ++row) {
    const auto position = static_cast<float>(static_cast<int64_t>(row) % seq);
    for (int64_t head = 0; head < width / head_dim; ++head) {
      double* v = x.data() + static_cast<int64_t>(row) * width + head * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
        const float inv_freq = 1.0f / std::pow(static_cast<float>(theta), exponent);
        const auto angle = static_cast<double>(position * inv_freq);
        const double lo = v[i], hi = v[i + half];
        v[i] = lo * std::cos(angle) - hi * std::sin(angle);
        v[i + half] = hi * std::cos(angle) + lo * std::sin(angle);
      }
    }
  }
}

// down(silu(gate h) * up h) of the SwiGLU MLP under `prefix` (gate_proj, up_proj, down_proj).
Matrix swiglu(Model& model, const std::string& prefix, const Matrix& h,
              const TransformerConfig& c) {
  const int64_t hid = c.hidden_size, inner = c.intermediate_size;
  const Matrix gate = linear(h, hid, values(model, prefix + "gate_proj.weight"), inner, nullptr);
  Matrix up = linear(h, hid, values(model, prefix + "up_proj.weight"), inner, nullptr);
  for (size_t i = 0; i < up.size(); ++i) up[i] *= gate[i] / (1.0 + std::exp(-gate[i]));
  return linear(up, inner, values(model, prefix + "down_proj.weight"), hid, nullptr);
}

// Qwen3MoeSparseMoeBlock: softmax of the router's logits, its top k (the lower expert first
// among equals, as torch.topk is asked here with distinct values), renormalised over the k when
// norm_topk_prob, and the weighted sum of those experts' SwiGLU outputs - token by token.
Matrix sparse_mlp(Model& model, const TransformerConfig& c, const std::string& p,
                  const Matrix& h) {
  const int64_t hid = c.hidden_size, experts = c.num_experts, k = c.experts_per_token;
  const int64_t rows = static_cast<int64_t>(h.size()) / hid;
  const Matrix logits = linear(h, hid, values(model, p + "mlp.gate.weight"), experts, nullptr);
  Matrix out(h.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = logits.data() + r * experts;
    const double top = *std::max_element(row, row + experts);
    std::vector<double> prob(static_cast<size_t>(experts));
    double total = 0.0;
    for (int64_t e = 0; e < experts; ++e) {
      total += (prob[static_cast<size_t>(e)] = std::exp(row[e] - top));
    }
    for (double& q : prob) q /= total;
    std::vector<int64_t> order(static_cast<size_t>(experts));
    for (int64_t e = 0; e < experts; ++e) order[static_cast<size_t>(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return prob[static_cast<size_t>(a)] > prob[static_cast<size_t>(b)];
    });
    double chosen = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      chosen += prob[static_cast<size_t>(order[static_cast<size_t>(j)])];
    }
    const Matrix token(h.begin() + r * hid, h.begin() + (r + 1) * hid);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = order[static_cast<size_t>(j)];
      double weight = prob[static_cast<size_t>(e)];
      if (c.normalize_expert_weights) weight /= chosen;
      const Matrix y = swiglu(model, p + "mlp.experts." + std::to_string(e) + ".", token, c);
      double* token_out = out.data() + r * hid;
      for (int64_t i = 0; i < hid; ++i) token_out[i] += weight * y[static_cast<size_t>(i)];
    }
  }
  return out;
}

// Logits [B*T, V] of a Qwen3 or Qwen3-MoE model (with its per-layer windows) for `ids` [B, T].
Matrix reference_logits(Model& model, const TransformerConfig& c, const Tensor& ids) {
  const int64_t batch = ids.size(0), seq = ids.size(1), hid = c.hidden_size;
  const int64_t heads = c.num_heads, kv_heads = c.num_kv_heads, d = c.head_dim;
  const int64_t rows = batch * seq;
  const double* embed = values(model, "model.embed_tokens.weight");
  Matrix x(static_cast<size_t>(rows * hid));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(embed + ids.data<int64_t>()[r] * hid, hid, x.begin() + r * hid);
  }
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    auto bias = [&](const char* name) {
      return c.qkv_bias ? values(model, p + "self_attn." + name + ".bias") : nullptr;
    };
    Matrix h = x;
    rms_norm(h, hid, values(model, p + "input_layernorm.weight"), c.norm_eps);
    Matrix q = linear(h, hid, values(model, p + "self_attn.q_proj.weight"), heads * d,
                      bias("q_proj"));
    Matrix k = linear(h, hid, values(model, p + "self_attn.k_proj.weight"), kv_heads * d,
                      bias("k_proj"));
    const Matrix v = linear(h, hid, values(model, p + "self_attn.v_proj.weight"), kv_heads * d,
                            bias("v_proj"));
    rms_norm(q, d, values(model, p + "self_attn.q_norm.weight"), c.norm_eps);
    rms_norm(k, d, values(model, p + "self_attn.k_norm.weight"), c.norm_eps);
    rotate(q, seq, heads * d, d, c.rope_theta);
    rotate(k, seq, kv_heads * d, d, c.rope_theta);
    Matrix attn(static_cast<size_t>(rows * heads * d), 0.0);
    // This layer's window: query i sees keys i - window < j <= i (all j <= i without one).
    const int64_t window = c.window_of_layer(layer);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t head = 0; head < heads; ++head) {
        const int64_t kv_head = head / (heads / kv_heads);
        for (int64_t i = 0; i < seq; ++i) {
          const double* qi = q.data() + ((b * seq + i) * heads + head) * d;
          const int64_t first = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
          std::vector<double> scores(static_cast<size_t>(i + 1), -INFINITY);
          double top = -INFINITY;
          for (int64_t j = first; j <= i; ++j) {
            const double* kj = k.data() + ((b * seq + j) * kv_heads + kv_head) * d;
            double s = 0.0;
            for (int64_t e = 0; e < d; ++e) s += qi[e] * kj[e];
            scores[static_cast<size_t>(j)] = s / std::sqrt(static_cast<double>(d));
            top = std::max(top, scores[static_cast<size_t>(j)]);
          }
          double total = 0.0;
          for (double& s : scores) total += (s = std::exp(s - top));
          double* out = attn.data() + ((b * seq + i) * heads + head) * d;
          for (int64_t j = first; j <= i; ++j) {
            const double* vj = v.data() + ((b * seq + j) * kv_heads + kv_head) * d;
            const double p_ij = scores[static_cast<size_t>(j)] / total;
            for (int64_t e = 0; e < d; ++e) out[e] += p_ij * vj[e];
          }
        }
      }
    }
    const Matrix o = linear(attn, heads * d, values(model, p + "self_attn.o_proj.weight"), hid,
                            c.attn_out_bias ? values(model, p + "self_attn.o_proj.bias")
                                            : nullptr);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = x;
    rms_norm(h, hid, values(model, p + "post_attention_layernorm.weight"), c.norm_eps);
    const Matrix mlp = c.is_moe() ? sparse_mlp(model, c, p, h) : swiglu(model, p + "mlp.", h, c);
    for (size_t i = 0; i < x.size(); ++i) x[i] += mlp[i];
  }
  rms_norm(x, hid, values(model, "model.norm.weight"), c.norm_eps);
  const double* head_weight =
      values(model, c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  return linear(x, hid, head_weight, c.vocab_size, nullptr);
}

Tensor token_ids(int64_t batch, int64_t seq, int64_t vocab) {
  Tensor ids = Tensor::zeros_host({batch, seq}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = (i * 37 + 11) % vocab;
  return ids;
}

Tensor model_logits(Model& model, const Tensor& ids) {
  Batch batch = batch_from_input_ids(ids);
  Tensor logits;
  StepContext ctx{model.backend(), batch};
  ctx.training = false;
  ctx.capture_logits = &logits;
  model.forward(ctx);
  return converted_host(logits, DType::kF64);
}

// max |a - b| / max |b|
double relative_difference(const Tensor& got, const Matrix& want) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(got.data<double>()[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / scale;
}

void init_norm_weights_away_from_one(Model& model) {
  // Norm weights start at 1; spread them so that a q_norm / k_norm mix-up cannot hide.
  for (Parameter* p : model.parameters()) {
    if (p->spec.name.find("norm.weight") == std::string::npos) continue;
    const size_t salt = std::hash<std::string>{}(p->spec.name) % 11;
    for (int64_t i = 0; i < p->numel(); ++i) {
      const size_t step = (static_cast<size_t>(i) * 7 + salt) % 11;
      p->value.data<double>()[i] = 0.5 + 0.1 * static_cast<double>(step);
    }
  }
}

// The preset (head_dim 48: 192 query channels from a hidden size of 128, tied) and an untied
// variant with attention biases: f64 logits equal the formula's to summation order (seen
// ~1e-15); 1e-12 leaves a wide margin, while leaving out either norm or normalising across
// heads moves them by > 1e-2.
TEST(Qwen3Model, LogitsEqualHuggingFacesForwardWrittenOut) {
  for (const bool variant : {false, true}) {
    TransformerConfig config = preset_config("tiny-qwen3");
    config.num_layers = 2;
    if (variant) {
      config.tie_word_embeddings = false;
      config.qkv_bias = config.attn_out_bias = true;
      config.num_kv_heads = 4;
    }
    backend::CpuBackend cpu;
    auto model = build_transformer(config, cpu, DType::kF64);
    init_parameters(*model, 5, 0.2);
    init_norm_weights_away_from_one(*model);
    const Tensor ids = token_ids(2, 9, config.vocab_size);
    EXPECT_LE(relative_difference(model_logits(*model, ids), reference_logits(*model, config, ids)),
              1e-12)
        << (variant ? "untied, biases, MHA" : "preset");
  }
}

// Qwen3-MoE's preset (8 experts of 64, 2 per token, not renormalised: transformers' default)
// and with norm_topk_prob: the same f64 bound as above; a wrong renormalisation or expert
// weight moves the logits by > 1e-3.
TEST(Qwen3MoeModel, LogitsEqualHuggingFacesForwardWrittenOut) {
  for (const bool normalise : {false, true}) {
    TransformerConfig config = preset_config("tiny-qwen3-moe");
    config.num_layers = 2;
    config.normalize_expert_weights = normalise;
    backend::CpuBackend cpu;
    auto model = build_transformer(config, cpu, DType::kF64);
    init_parameters(*model, 6, 0.2);
    init_norm_weights_away_from_one(*model);
    const Tensor ids = token_ids(2, 9, config.vocab_size);
    EXPECT_LE(relative_difference(model_logits(*model, ids), reference_logits(*model, config, ids)),
              1e-12)
        << (normalise ? "norm_topk_prob" : "not renormalised");
  }
}

// use_sliding_window with max_window_layers 1 of 2: the first layer attends to everything,
// the second within 3 positions of 9 (a per-layer window changes the logits by > 1e-3 here).
TEST(Qwen3Model, PerLayerWindowsAsHuggingFaceDecidesThem) {
  nlohmann::json json = preset_config("tiny-qwen3").to_hf_json();
  json["num_hidden_layers"] = 2;
  json["use_sliding_window"] = true;
  json["sliding_window"] = 3;
  json["max_window_layers"] = 1;
  const TransformerConfig config = TransformerConfig::from_hf_json(json, "config.json");
  ASSERT_EQ(config.window_of_layer(0), 0);
  ASSERT_EQ(config.window_of_layer(1), 3);
  backend::CpuBackend cpu;
  auto model = build_transformer(config, cpu, DType::kF64);
  init_parameters(*model, 8, 0.2);
  const Tensor ids = token_ids(2, 9, config.vocab_size);
  EXPECT_LE(relative_difference(model_logits(*model, ids), reference_logits(*model, config, ids)),
            1e-12);
}

// The norms make attention blind to each head's query and key scale (up to eps): scaling the
// query and key projections changes nothing, which a model without them would not survive.
TEST(Qwen3Model, QueryAndKeyScalesDoNotReachTheLogits) {
  TransformerConfig config = preset_config("tiny-qwen3");
  config.num_layers = 1;
  config.norm_eps = 1e-300;  // so that only rounding is left between the two
  backend::CpuBackend cpu;
  auto model = build_transformer(config, cpu, DType::kF64);
  init_parameters(*model, 9, 0.2);
  const Tensor ids = token_ids(1, 7, config.vocab_size);
  const Tensor before = model_logits(*model, ids);
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight",
                           "model.layers.0.self_attn.k_proj.weight"}) {
    Parameter* p = model->find_parameter(name);
    for (int64_t i = 0; i < p->numel(); ++i) p->value.data<double>()[i] *= 8.0;
  }
  const Tensor after = model_logits(*model, ids);
  Matrix expected(before.data<double>(), before.data<double>() + before.numel());
  EXPECT_LE(relative_difference(after, expected), 1e-13);
}

TEST(Qwen3Model, SavesAndReloadsUnderHuggingFaceNames) {
  const fs::path dir = fs::temp_directory_path() / ("zero_qwen3_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const TransformerConfig config = preset_config("tiny-qwen3");
  backend::CpuBackend cpu;
  auto model = build_transformer(config, cpu, DType::kF32);
  init_parameters(*model, 4);
  save_hf_model(*model, dir.string(), DType::kF32);
  const auto file = io::SafetensorsFile::open((dir / "model.safetensors").string());
  EXPECT_EQ(file.entry("model.layers.3.self_attn.q_norm.weight").shape, (Shape{48}));
  EXPECT_EQ(file.entry("model.layers.0.self_attn.k_norm.weight").shape, (Shape{48}));
  EXPECT_EQ(file.entry("model.layers.0.self_attn.q_proj.weight").shape, (Shape{192, 128}));
  EXPECT_EQ(file.entry("model.layers.0.self_attn.o_proj.weight").shape, (Shape{128, 192}));
  EXPECT_FALSE(file.contains("lm_head.weight"));  // tied
  auto reloaded = load_hf_model(dir.string(), cpu, DType::kF32);
  EXPECT_EQ(reloaded->config()->family, ModelFamily::kQwen3);
  EXPECT_EQ(reloaded->num_parameters(), model->num_parameters());
  const Batch batch = batch_from_input_ids(token_ids(2, 8, config.vocab_size));
  EXPECT_EQ(model->evaluate(batch), reloaded->evaluate(batch));
  fs::remove_all(dir);
}

TEST(Qwen3MoeModel, SavesAndReloadsUnderHuggingFaceNames) {
  const fs::path dir =
      fs::temp_directory_path() / ("zero_qwen3_moe_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const TransformerConfig config = preset_config("tiny-qwen3-moe");
  backend::CpuBackend cpu;
  auto model = build_transformer(config, cpu, DType::kF32);
  init_parameters(*model, 4);
  save_hf_model(*model, dir.string(), DType::kF32);
  const auto file = io::SafetensorsFile::open((dir / "model.safetensors").string());
  EXPECT_EQ(file.entry("model.layers.3.mlp.gate.weight").shape, (Shape{8, 128}));
  EXPECT_EQ(file.entry("model.layers.0.mlp.experts.7.gate_proj.weight").shape, (Shape{64, 128}));
  EXPECT_EQ(file.entry("model.layers.0.mlp.experts.7.up_proj.weight").shape, (Shape{64, 128}));
  EXPECT_EQ(file.entry("model.layers.0.mlp.experts.0.down_proj.weight").shape, (Shape{128, 64}));
  EXPECT_TRUE(file.contains("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_FALSE(file.contains("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_FALSE(file.contains("model.layers.0.block_sparse_moe.gate.weight"));
  auto reloaded = load_hf_model(dir.string(), cpu, DType::kF32);
  EXPECT_EQ(reloaded->config()->family, ModelFamily::kQwen3Moe);
  EXPECT_FALSE(reloaded->config()->normalize_expert_weights);
  EXPECT_EQ(reloaded->num_parameters(), model->num_parameters());
  const Batch batch = batch_from_input_ids(token_ids(2, 8, config.vocab_size));
  EXPECT_EQ(model->evaluate(batch), reloaded->evaluate(batch));
  fs::remove_all(dir);
}

}  // namespace test_qwen3
}  // namespace zero::model
