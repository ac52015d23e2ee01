// TransformerConfig from Hugging Face config.json: every family, both rope_theta spellings, and
// a clear ConfigError for missing, invalid or unsupported keys.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/transformer_config.h"

namespace zero::model {
namespace {

nlohmann::json gpt2_json() {
  return nlohmann::json::parse(R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "vocab_size": 256, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64,
    "n_inner": null, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"})");
}

nlohmann::json llama_json() {
  return nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
    "rms_norm_eps": 1e-5, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": false, "hidden_act": "silu"})");
}

// Expects a ConfigError whose message contains every one of `parts`.
void expect_config_error(const nlohmann::json& json, std::initializer_list<const char*> parts) {
  try {
    TransformerConfig::from_hf_json(json, "some/config.json");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("some/config.json"), std::string::npos) << message;
    for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(TransformerConfig, ReadsGpt2) {
  TransformerConfig c = TransformerConfig::from_hf_json(gpt2_json(), "gpt2");
  EXPECT_EQ(c.family, ModelFamily::kGpt2);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 256);  // n_inner null -> 4 * n_embd
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.learned_positions);
  EXPECT_EQ(c.norm, NormKind::kLayerNorm);
}

TEST(TransformerConfig, ReadsLlamaWithNewAndOldRopeTheta) {
  TransformerConfig c = TransformerConfig::from_hf_json(llama_json(), "llama");
  EXPECT_EQ(c.family, ModelFamily::kLlama);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.qkv_bias);
  nlohmann::json old = llama_json();
  old.erase("rope_parameters");
  old["rope_theta"] = 500000.0;
  EXPECT_DOUBLE_EQ(TransformerConfig::from_hf_json(old, "old").rope_theta, 500000.0);
}

TEST(TransformerConfig, Qwen2HasQkvBiasOnly) {
  nlohmann::json j = llama_json();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  j["use_sliding_window"] = false;
  j["sliding_window"] = 4096;  // ignored while use_sliding_window is false, as in HF
  TransformerConfig c = TransformerConfig::from_hf_json(j, "qwen2");
  EXPECT_EQ(c.family, ModelFamily::kQwen2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.attn_out_bias);
  EXPECT_EQ(c.sliding_window, 0);
}

// Which layers attend within a window, as transformers decides it, and back to config.json.
TEST(TransformerConfig, PerLayerSlidingWindows) {
  nlohmann::json j = llama_json();
  const int64_t layers = j["num_hidden_layers"].get<int64_t>();
  ASSERT_GE(layers, 2);
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4;
  j["max_window_layers"] = 1;  // layer 0 full, the rest windowed
  TransformerConfig c = TransformerConfig::from_hf_json(j, "qwen2");
  EXPECT_EQ(c.window_of_layer(0), 0);
  for (int64_t l = 1; l < layers; ++l) EXPECT_EQ(c.window_of_layer(l), 4) << l;
  nlohmann::json back = c.to_hf_json();
  EXPECT_EQ(back["use_sliding_window"], true);
  ASSERT_EQ(back["layer_types"].size(), static_cast<size_t>(layers));
  EXPECT_EQ(back["layer_types"][0], "full_attention");
  EXPECT_EQ(back["layer_types"][1], "sliding_attention");
  const TransformerConfig again = TransformerConfig::from_hf_json(back, "qwen2");
  for (int64_t l = 0; l < layers; ++l) EXPECT_EQ(again.window_of_layer(l), c.window_of_layer(l));
  // max_window_layers 0: every layer windowed, kept as one uniform window.
  j["max_window_layers"] = 0;
  c = TransformerConfig::from_hf_json(j, "qwen2");
  EXPECT_TRUE(c.windowed_layers.empty());
  EXPECT_EQ(c.window_of_layer(layers - 1), 4);
  // layer_types outranks max_window_layers; without use_sliding_window Qwen has no window.
  j["layer_types"] = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l) {
    j["layer_types"].push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  }
  c = TransformerConfig::from_hf_json(j, "qwen2");
  EXPECT_EQ(c.window_of_layer(0), 4);
  EXPECT_EQ(c.window_of_layer(1), 0);
  j["use_sliding_window"] = false;
  c = TransformerConfig::from_hf_json(j, "qwen2");
  EXPECT_EQ(c.window_of_layer(0), 0);
  EXPECT_EQ(c.sliding_window, 0);
  // Mistral: layer_types picks the windowed layers; a Llama has no window to pick.
  j = llama_json();
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 8;
  j["layer_types"] = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l) {
    j["layer_types"].push_back(l == 0 ? "full_attention" : "sliding_attention");
  }
  c = TransformerConfig::from_hf_json(j, "mistral");
  EXPECT_EQ(c.window_of_layer(0), 0);
  EXPECT_EQ(c.window_of_layer(1), 8);
  j["architectures"] = {"LlamaForCausalLM"};
  expect_config_error(j, {"layer_types", "no sliding window"});
  j["architectures"] = {"MistralForCausalLM"};
  j["layer_types"] = {"full_attention"};
  expect_config_error(j, {"layer_types", "one attention type per layer"});
  j["layer_types"] = nlohmann::json::array();
  for (int64_t l = 0; l < layers; ++l) j["layer_types"].push_back("chunked_attention");
  expect_config_error(j, {"layer_types", "chunked_attention"});
}

TEST(TransformerConfig, MistralSlidingWindow) {
  nlohmann::json j = llama_json();
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 32;
  EXPECT_EQ(TransformerConfig::from_hf_json(j, "mistral").sliding_window, 32);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(TransformerConfig::from_hf_json(j, "mistral").sliding_window, 0);
}

TEST(TransformerConfig, MissingKeyIsNamed) {
  nlohmann::json j = gpt2_json();
  j.erase("n_embd");
  expect_config_error(j, {"'n_embd'", "missing"});
  nlohmann::json l = llama_json();
  l.erase("intermediate_size");
  expect_config_error(l, {"'intermediate_size'", "missing"});
}

TEST(TransformerConfig, InvalidValuesAreNamed) {
  nlohmann::json j = gpt2_json();
  j["n_head"] = "four";
  expect_config_error(j, {"'n_head'", "positive integer", "\"four\""});
  j = gpt2_json();
  j["n_head"] = 5;
  expect_config_error(j, {"'n_head'", "divide"});
  j = llama_json();
  j["num_key_value_heads"] = 3;
  expect_config_error(j, {"multiple of num_key_value_heads"});
  j = llama_json();
  j["rms_norm_eps"] = -1;
  expect_config_error(j, {"'rms_norm_eps'"});
  j = gpt2_json();
  j["activation_function"] = "relu";
  expect_config_error(j, {"'activation_function'", "relu"});
}

TEST(TransformerConfig, UnsupportedArchitectureAndRopeScaling) {
  nlohmann::json j = gpt2_json();
  j["architectures"] = {"BertForMaskedLM"};
  expect_config_error(j, {"unsupported architecture", "BertForMaskedLM", "LlamaForCausalLM"});
  nlohmann::json l = llama_json();
  l["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}};
  expect_config_error(l, {"rope_type", "llama3"});
  l = llama_json();
  l.erase("rope_parameters");
  l["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  expect_config_error(l, {"rope_scaling"});
  expect_config_error(nlohmann::json::object(), {"architectures"});
}

TEST(TransformerConfig, RoundTripsThroughHfJson) {
  for (const auto& source : {gpt2_json(), llama_json()}) {
    TransformerConfig a = TransformerConfig::from_hf_json(source, "a");
    TransformerConfig b = TransformerConfig::from_hf_json(a.to_hf_json(), "b");
    EXPECT_EQ(a.num_parameters(), b.num_parameters());
    EXPECT_EQ(a.family, b.family);
    EXPECT_EQ(a.head_dim, b.head_dim);
    EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
    EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  }
}

TEST(TransformerConfig, PresetsAndParameterCounts) {
  // GPT-2 small has 124,439,808 parameters (tied head), the figure HF reports.
  EXPECT_EQ(preset_config("gpt2-124m").num_parameters(), 124439808);
  EXPECT_THROW(preset_config("gpt5"), ConfigError);
  for (const auto& name : preset_names()) EXPECT_GT(preset_config(name).num_parameters(), 0);
}

}  // namespace
}  // namespace zero::model
