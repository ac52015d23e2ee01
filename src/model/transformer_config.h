// TransformerConfig: the shape of a decoder-only transformer, read from a Hugging Face
// config.json (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// Qwen3MoeForCausalLM, MistralForCausalLM, MixtralForCausalLM) or
// taken from a built-in preset. Everything the model builder needs, validated once.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace zero::model {

enum class ModelFamily { kGpt2, kLlama, kQwen2, kQwen3, kQwen3Moe, kMistral, kMixtral };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class MlpKind { kGeluTanh, kSwiGlu };

const char* family_name(ModelFamily family);

struct TransformerConfig {
  ModelFamily family = ModelFamily::kGpt2;
  std::string architecture = "GPT2LMHeadModel";  // the HF class name written to config.json
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  // The MLP's width; with experts each expert's (Qwen3-MoE's moe_intermediate_size: every layer
  // is sparse, so its dense intermediate_size is kept only in source_json).
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  double norm_eps = 1e-5;
  NormKind norm = NormKind::kLayerNorm;
  MlpKind mlp = MlpKind::kGeluTanh;
  bool learned_positions = true;  // GPT-2's wpe table; otherwise rotary embeddings
  double rope_theta = 0.0;        // used when !learned_positions
  bool tie_word_embeddings = true;
  bool qkv_bias = true;           // bias on the q/k/v projections
  bool attn_out_bias = true;      // bias on the attention output projection
  bool mlp_bias = true;
  bool norm_bias = true;          // LayerNorm has a bias; RMSNorm never does
  // 0: full causal attention. Otherwise each query sees the last sliding_window positions, in
  // every layer or, when windowed_layers is not empty, in the layers it marks 1 (Qwen2/Qwen3's
  // max_window_layers, transformers' layer_types); set both through set_attention_windows.
  int64_t sliding_window = 0;
  std::vector<uint8_t> windowed_layers;
  // Qwen3: each query and key head is RMS-normalised over head_dim (weights q_norm and k_norm of
  // head_dim elements, Backend::qk_rmsnorm_forward) after the projection, before rotary.
  bool qk_norm = false;
  // Mixture of experts (Mixtral, Qwen3-MoE; model/moe_feed_forward.h): num_experts > 0 replaces
  // each block's MLP by num_experts SwiGLU experts of width intermediate_size, of which a router
  // picks experts_per_token for each token; their outputs are summed with the router's softmax
  // weights (renormalised over the chosen experts when normalize_expert_weights: Mixtral always,
  // Qwen3-MoE when norm_topk_prob).
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  bool normalize_expert_weights = true;
  // > 0: the routers' load-balancing loss (model/router_balance.h) times this is added to the
  // loss - config.json's router_aux_loss_coef when it says output_router_logits: true, else 0.
  double router_aux_loss_coef = 0.0;
  // The config.json this came from (empty for presets); saving writes it back with only the
  // keys zero.cpp owns updated, so fields we do not model survive a round trip.
  nlohmann::json source_json;

  // Parses a Hugging Face config.json object. `source` names the file in error messages.
  static TransformerConfig from_hf_json(const nlohmann::json& json, const std::string& source);
  // Reads and parses a config.json file (throws FileError / ConfigError naming the path): only a
  // regular file of at most io::kMaxConfigBytes, nested at most io::kMaxJsonDepth levels.
  static TransformerConfig from_hf_file(const std::string& path);
  // The Hugging Face config.json for this model.
  nlohmann::json to_hf_json() const;

  // Throws ConfigError if a size is outside its limit (model/config_limits.h: vocab_size up to
  // 2^31 - 1, hidden size 2^20, 10,000 layers, ...), a product of sizes overflows, or fields
  // contradict each other (heads not dividing, ...). Messages name `source` and the key.
  void validate(const std::string& source) const;
  // Parameters of the model, counting a tied embedding once (overflow-checked: ConfigError).
  int64_t num_parameters() const;
  // Products of sizes validate() has checked: they fit int64 for any validated config.
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  bool is_moe() const { return num_experts > 0; }
  // The window of layer `layer` (0: full attention there).
  int64_t window_of_layer(int64_t layer) const;
  // `window` in the layers `windowed` marks (empty: all of them); stored uniform when every
  // layer or none is windowed.
  void set_attention_windows(int64_t window, std::vector<uint8_t> windowed = {});
  // Qwen3 and Qwen3-MoE.
  bool is_qwen3() const {
    return family == ModelFamily::kQwen3 || family == ModelFamily::kQwen3Moe;
  }
};

// Built-in model shapes: "tiny" (GPT-2 style, byte vocabulary), "tiny-llama", "gpt2-124m",
// "gpt2-350m", "llama-1b" (Llama 3.2 1B), "llama-1b-mha" (hidden 2048, 16 layers, 16 heads,
// FFN 5632, vocabulary 32000, untied: the GPU speed benchmark's shape), "tiny-qwen3"
// (tiny-llama's sizes with head_dim 48, q/k head norms and a tied head), "tiny-qwen3-moe"
// (tiny-qwen3's attention, untied, with 8 experts of width 64, 2 per token, not renormalised),
// "tiny-mixtral" (tiny-llama's attention with 8 experts of width 176, 2 per token). Throws
// ConfigError listing the presets for an unknown name.
TransformerConfig preset_config(std::string_view name);
std::vector<std::string> preset_names();

}  // namespace zero::model
