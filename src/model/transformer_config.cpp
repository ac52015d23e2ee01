#include "model/transformer_config.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/check.h"
#include "core/error.h"
#include "io/bounded_json.h"
#include "io/input_file.h"
#include "model/config_limits.h"

namespace zero::model {
namespace {

// Typed access to config.json keys with messages that name the file, the key and the value.
// Sizes are read strictly (a JSON integer, or an integral number such as 768.0; never a bool, a
// string or a fraction) and range-checked as they are read, before anything multiplies them.
class KeyReader {
 public:
  KeyReader(const nlohmann::json& json, const std::string& source) : json_(json), source_(source) {}

  bool has(const char* key) const { return json_.contains(key) && !json_.at(key).is_null(); }

  int64_t size(const char* key, const SizeLimit& limit) const {
    if (!has(key)) fail(key, "is missing; it is required for " + architecture());
    return size_value(key, json_.at(key), limit);
  }
  int64_t size_or(const char* key, int64_t fallback, const SizeLimit& limit) const {
    return has(key) ? size_value(key, json_.at(key), limit) : fallback;
  }
  // A count that may be 0 (max_window_layers), else as size_or.
  int64_t count_or(const char* key, int64_t fallback, const SizeLimit& limit) const {
    if (!has(key)) return fallback;
    if (whole_number(json_.at(key)) == std::optional<int64_t>(0)) return 0;
    return size_value(key, json_.at(key), limit);
  }
  double positive_number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const auto& value = json_.at(key);
    if (!value.is_number() || !(value.get<double>() > 0.0) ||
        !std::isfinite(value.get<double>())) {
      fail(key, "must be a positive number, got " + io::json_excerpt(value));
    }
    return value.get<double>();
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const auto& value = json_.at(key);
    if (!value.is_boolean()) fail(key, "must be true or false, got " + io::json_excerpt(value));
    return value.get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const auto& value = json_.at(key);
    if (!value.is_string()) fail(key, "must be a string, got " + io::json_excerpt(value));
    return value.get<std::string>();
  }
  const nlohmann::json& at(const char* key) const { return json_.at(key); }
  const std::string& source() const { return source_; }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw ConfigError(source_ + ": key '" + key + "' " + problem);
  }
  std::string architecture() const {
    const auto archs = json_.find("architectures");
    if (archs != json_.end() && archs->is_array() && !archs->empty() &&
        archs->front().is_string()) {
      return archs->front().get<std::string>();
    }
    const auto type = json_.find("model_type");
    if (type != json_.end() && type->is_string()) return type->get<std::string>();
    return "this model";
  }

 private:
  int64_t size_value(const char* key, const nlohmann::json& value, const SizeLimit& limit) const {
    const std::optional<int64_t> whole = whole_number(value);
    if (!whole) fail(key, "must be a positive integer, got " + io::json_excerpt(value));
    if (*whole < 1 || *whole > limit.max) {
      throw_out_of_range(source_, key, io::json_excerpt(value), limit.max, limit.reason);
    }
    return *whole;
  }

  // The integer `value` holds; INT64_MAX stands in for integers beyond int64 (out of range for
  // every size); nothing for non-numbers and fractions.
  static std::optional<int64_t> whole_number(const nlohmann::json& value) {
    if (value.is_number_unsigned()) {
      const auto u = value.get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
    }
    if (value.is_number_integer()) return value.get<int64_t>();
    if (!value.is_number_float()) return std::nullopt;
    const double d = value.get<double>();
    if (d != std::floor(d)) return std::nullopt;
    // 2^63 is the first double that does not convert to int64.
    if (d >= 9223372036854775808.0) return INT64_MAX;
    if (d < -9223372036854775808.0) return INT64_MIN;
    return static_cast<int64_t>(d);
  }

  const nlohmann::json& json_;
  const std::string& source_;
};

void read_gpt2(const KeyReader& keys, TransformerConfig& config) {
  config.family = ModelFamily::kGpt2;
  config.architecture = "GPT2LMHeadModel";
  config.vocab_size = keys.size("vocab_size", kVocabSizeLimit);
  config.hidden_size = keys.size("n_embd", kHiddenSizeLimit);
  config.num_layers = keys.size("n_layer", kLayersLimit);
  config.num_heads = keys.size("n_head", {config.hidden_size, "at most one head per channel"});
  config.num_kv_heads = config.num_heads;
  if (config.hidden_size % config.num_heads != 0) {
    keys.fail("n_head", "(" + std::to_string(config.num_heads) + ") must divide n_embd (" +
                            std::to_string(config.hidden_size) + ")");
  }
  config.head_dim = config.hidden_size / config.num_heads;
  config.intermediate_size = keys.size_or("n_inner", 4 * config.hidden_size,
                                          kIntermediateSizeLimit);
  config.max_position_embeddings = keys.size("n_positions", kPositionsLimit);
  config.norm_eps = keys.positive_number_or("layer_norm_epsilon", 1e-5);
  config.norm = NormKind::kLayerNorm;
  config.mlp = MlpKind::kGeluTanh;
  config.learned_positions = true;
  config.tie_word_embeddings = keys.boolean_or("tie_word_embeddings", true);
  config.qkv_bias = config.attn_out_bias = config.mlp_bias = config.norm_bias = true;
  const std::string activation = keys.string_or("activation_function", "gelu_new");
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh") {
    keys.fail("activation_function", "is \"" + activation +
                                         "\"; zero.cpp supports the tanh GELU (\"gelu_new\")");
  }
  if (!keys.boolean_or("scale_attn_weights", true)) {
    keys.fail("scale_attn_weights", "is false; only scaled attention (true) is supported");
  }
  if (keys.boolean_or("scale_attn_by_inverse_layer_idx", false)) {
    keys.fail("scale_attn_by_inverse_layer_idx", "is true; this is not supported yet");
  }
  if (keys.boolean_or("add_cross_attention", false)) {
    keys.fail("add_cross_attention", "is true; decoder-only models without cross-attention only");
  }
}

double read_rope_theta(const KeyReader& keys) {
  // transformers >= 5 writes rope_parameters {rope_theta, rope_type}; older versions wrote a
  // top-level rope_theta and an optional rope_scaling block.
  if (keys.has("rope_parameters")) {
    const auto& params = keys.at("rope_parameters");
    if (!params.is_object()) keys.fail("rope_parameters", "must be an object");
    if (params.contains("rope_type") && params["rope_type"] != "default") {
      keys.fail("rope_parameters.rope_type",
                "is " + io::json_excerpt(params["rope_type"]) +
                    "; only the default rotary embedding is supported (no scaling) yet");
    }
    if (params.contains("rope_theta")) {
      if (!params["rope_theta"].is_number() || !(params["rope_theta"].get<double>() > 0) ||
          !std::isfinite(params["rope_theta"].get<double>())) {
        keys.fail("rope_parameters.rope_theta",
                  "must be a positive number, got " + io::json_excerpt(params["rope_theta"]));
      }
      return params["rope_theta"].get<double>();
    }
  }
  if (keys.has("rope_scaling")) {
    keys.fail("rope_scaling", "is set (" + io::json_excerpt(keys.at("rope_scaling")) +
                                  "); scaled rotary embeddings are not supported yet");
  }
  return keys.positive_number_or("rope_theta", 10000.0);
}

// The routers' load-balancing loss: on when output_router_logits is true, as in transformers,
// with router_aux_loss_coef (transformers' default 0.001 for both Mixtral and Qwen3-MoE).
void read_balance_loss(const KeyReader& keys, TransformerConfig& config) {
  if (keys.boolean_or("output_router_logits", false)) {
    // transformers' MixtralConfig default. 0 is allowed (the loss is then computed and unused).
    config.router_aux_loss_coef = 0.001;
    if (keys.has("router_aux_loss_coef")) {
      const auto& coef = keys.at("router_aux_loss_coef");
      if (!coef.is_number() || !(coef.get<double>() >= 0.0) ||
          !std::isfinite(coef.get<double>())) {
        keys.fail("router_aux_loss_coef",
                  "must be a number >= 0, got " + io::json_excerpt(coef));
      }
      config.router_aux_loss_coef = coef.get<double>();
    }
  }
}

// Mixtral's sparse MLP: the expert count, the experts per token, the load-balancing loss, and
// router jitter, which zero.cpp does not implement: refused rather than ignored.
void read_mixtral_experts(const KeyReader& keys, TransformerConfig& config) {
  config.num_experts = keys.size("num_local_experts", kExpertsLimit);
  config.experts_per_token = keys.size(
      "num_experts_per_tok", {config.num_experts, "a token chooses among num_local_experts"});
  config.normalize_expert_weights = true;  // Mixtral renormalises the chosen experts' weights
  read_balance_loss(keys, config);
  if (keys.has("router_jitter_noise")) {
    const auto& noise = keys.at("router_jitter_noise");
    if (!noise.is_number() || noise.get<double>() != 0.0) {
      keys.fail("router_jitter_noise", "is " + io::json_excerpt(noise) +
                                           "; router jitter is not supported, set it to 0");
    }
  }
}

// Qwen3-MoE's sparse MLP: num_experts experts of moe_intermediate_size, the chosen weights
// renormalised when norm_topk_prob (transformers' default false; the released models set it).
// Dense layers among the sparse ones (decoder_sparse_step > 1, mlp_only_layers) are refused:
// zero.cpp builds every block alike, and the released models are sparse throughout.
void read_qwen3_moe_experts(const KeyReader& keys, TransformerConfig& config) {
  config.num_experts = keys.size("num_experts", kExpertsLimit);
  config.experts_per_token = keys.size(
      "num_experts_per_tok", {config.num_experts, "a token chooses among num_experts"});
  config.intermediate_size = keys.size("moe_intermediate_size", kIntermediateSizeLimit);
  config.normalize_expert_weights = keys.boolean_or("norm_topk_prob", false);
  read_balance_loss(keys, config);
  const int64_t step = keys.size_or("decoder_sparse_step", 1, kLayersLimit);
  if (step != 1) {
    keys.fail("decoder_sparse_step", "is " + std::to_string(step) + "; zero.cpp builds every "
              "layer with experts (1): dense layers between sparse ones are not supported yet");
  }
  if (keys.has("mlp_only_layers")) {
    const auto& dense = keys.at("mlp_only_layers");
    if (!dense.is_array() || !dense.empty()) {
      keys.fail("mlp_only_layers", "is " + io::json_excerpt(dense) + "; zero.cpp builds every "
                "layer with experts ([]): dense layers among sparse ones are not supported yet");
    }
  }
}

// Which layers attend within a sliding window, as transformers decides it: Mistral and Mixtral
// window every layer when sliding_window is set; Qwen2/Qwen3 only with use_sliding_window (else
// their sliding_window is ignored), the layers from max_window_layers on (transformers' default
// 28); and layer_types, when config.json lists it (transformers >= 5), names each layer's
// attention. Llama has no window: a sliding layer there is refused.
void read_attention_windows(const KeyReader& keys, TransformerConfig& config) {
  const ModelFamily family = config.family;
  const bool mistral_like = family == ModelFamily::kMistral || family == ModelFamily::kMixtral;
  const bool qwen = family == ModelFamily::kQwen2 || family == ModelFamily::kQwen3 ||
                    family == ModelFamily::kQwen3Moe;
  int64_t window = 0;
  if (mistral_like || (qwen && keys.boolean_or("use_sliding_window", false))) {
    window = keys.size_or("sliding_window", 0, kSlidingWindowLimit);
  }
  std::vector<uint8_t> windowed;
  if (keys.has("layer_types")) {
    const auto& types = keys.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != config.num_layers) {
      keys.fail("layer_types", "must list one attention type per layer (num_hidden_layers = " +
                                   std::to_string(config.num_layers) + "), got " +
                                   io::json_excerpt(types));
    }
    for (const auto& t : types) {
      if (t != "full_attention" && t != "sliding_attention") {
        keys.fail("layer_types", "contains " + io::json_excerpt(t) + "; zero.cpp knows "
                                 "\"full_attention\" and \"sliding_attention\"");
      }
      if (t == "sliding_attention" && !mistral_like && !qwen) {
        keys.fail("layer_types", "has a sliding layer, but " + keys.architecture() +
                                     " has no sliding window");
      }
      windowed.push_back(t == "sliding_attention" ? 1 : 0);
    }
  } else if (qwen && window > 0) {
    const int64_t full = keys.count_or("max_window_layers", 28, kLayersLimit);
    for (int64_t layer = 0; layer < config.num_layers; ++layer) {
      windowed.push_back(layer >= full ? 1 : 0);
    }
  }
  config.set_attention_windows(window, std::move(windowed));
}

void read_llama_like(const KeyReader& keys, TransformerConfig& config, ModelFamily family) {
  config.family = family;
  config.vocab_size = keys.size("vocab_size", kVocabSizeLimit);
  config.hidden_size = keys.size("hidden_size", kHiddenSizeLimit);
  config.num_layers = keys.size("num_hidden_layers", kLayersLimit);
  config.num_heads =
      keys.size("num_attention_heads", {config.hidden_size, "at most one head per channel"});
  config.num_kv_heads = keys.size_or("num_key_value_heads", config.num_heads,
                                     {config.num_heads, "at most one per attention head"});
  const bool qwen3 = family == ModelFamily::kQwen3 || family == ModelFamily::kQwen3Moe;
  if (!keys.has("head_dim") && !qwen3 &&
      config.hidden_size % config.num_heads != 0) {
    keys.fail("num_attention_heads", "(" + std::to_string(config.num_heads) +
                                         ") must divide hidden_size (" +
                                         std::to_string(config.hidden_size) +
                                         ") when head_dim is not given");
  }
  // Qwen3's configs default head_dim to 128 whatever the hidden size; the others derive it.
  const int64_t default_head_dim = qwen3 ? 128 : config.hidden_size / config.num_heads;
  config.head_dim = keys.size_or("head_dim", default_head_dim, kHeadDimLimit);
  config.intermediate_size = keys.size("intermediate_size", kIntermediateSizeLimit);
  config.max_position_embeddings = keys.size("max_position_embeddings", kPositionsLimit);
  config.norm_eps = keys.positive_number_or("rms_norm_eps", 1e-6);
  config.norm = NormKind::kRmsNorm;
  config.norm_bias = false;
  config.mlp = MlpKind::kSwiGlu;
  config.learned_positions = false;
  config.rope_theta = read_rope_theta(keys);
  config.tie_word_embeddings = keys.boolean_or("tie_word_embeddings", false);
  const std::string act = keys.string_or("hidden_act", "silu");
  if (act != "silu") keys.fail("hidden_act", "is \"" + act + "\"; only \"silu\" is supported");
  keys.size_or("pretraining_tp", 1, {1, "tensor-parallel pretraining slices are not supported"});
  switch (family) {
    case ModelFamily::kQwen2:
      config.architecture = "Qwen2ForCausalLM";
      config.qkv_bias = true;  // Qwen2 always has q/k/v biases and none elsewhere
      config.attn_out_bias = false;
      config.mlp_bias = false;
      break;
    case ModelFamily::kQwen3:
    case ModelFamily::kQwen3Moe:
      config.architecture =
          family == ModelFamily::kQwen3 ? "Qwen3ForCausalLM" : "Qwen3MoeForCausalLM";
      // Qwen3's attention_bias covers q, k, v and o alike; its MLPs never have biases.
      config.qkv_bias = config.attn_out_bias = keys.boolean_or("attention_bias", false);
      config.mlp_bias = false;
      config.qk_norm = true;
      if (family == ModelFamily::kQwen3Moe) read_qwen3_moe_experts(keys, config);
      break;
    case ModelFamily::kMistral:
      config.architecture = "MistralForCausalLM";
      config.qkv_bias = config.attn_out_bias = config.mlp_bias = false;
      break;
    case ModelFamily::kMixtral:
      config.architecture = "MixtralForCausalLM";
      config.qkv_bias = config.attn_out_bias = config.mlp_bias = false;
      read_mixtral_experts(keys, config);
      break;
    default:
      config.architecture = "LlamaForCausalLM";
      config.qkv_bias = config.attn_out_bias = keys.boolean_or("attention_bias", false);
      config.mlp_bias = keys.boolean_or("mlp_bias", false);
      break;
  }
  read_attention_windows(keys, config);
}

std::string supported_architectures() {
  return "GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
         "Qwen3MoeForCausalLM, MistralForCausalLM, MixtralForCausalLM";
}

}  // namespace

const char* family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::kGpt2: return "gpt2";
    case ModelFamily::kLlama: return "llama";
    case ModelFamily::kQwen2: return "qwen2";
    case ModelFamily::kQwen3: return "qwen3";
    case ModelFamily::kQwen3Moe: return "qwen3_moe";
    case ModelFamily::kMistral: return "mistral";
    case ModelFamily::kMixtral: return "mixtral";
  }
  return "unknown";
}

TransformerConfig TransformerConfig::from_hf_json(const nlohmann::json& json,
                                                  const std::string& source) {
  if (!json.is_object()) throw ConfigError(source + ": config.json must be a JSON object");
  KeyReader keys(json, source);
  std::string model_type = keys.string_or("model_type", "");
  std::string architecture;
  if (json.contains("architectures")) {
    const auto& archs = json["architectures"];
    if (!archs.is_array() || archs.size() != 1 || !archs[0].is_string()) {
      keys.fail("architectures", "must be a list with one class name such as "
                                 "[\"LlamaForCausalLM\"], got " + io::json_excerpt(archs) +
                                 " (supported: " + supported_architectures() + ")");
    }
    architecture = archs[0].get<std::string>();
  }
  if (architecture.empty() && model_type.empty()) {
    throw ConfigError(source + ": neither 'architectures' nor 'model_type' is set; cannot tell "
                               "which model this is (supported: " + supported_architectures() + ")");
  }
  TransformerConfig config;
  if (architecture == "GPT2LMHeadModel" || (architecture.empty() && model_type == "gpt2")) {
    read_gpt2(keys, config);
  } else if (architecture == "LlamaForCausalLM" || (architecture.empty() && model_type == "llama")) {
    read_llama_like(keys, config, ModelFamily::kLlama);
  } else if (architecture == "Qwen2ForCausalLM" || (architecture.empty() && model_type == "qwen2")) {
    read_llama_like(keys, config, ModelFamily::kQwen2);
  } else if (architecture == "Qwen3ForCausalLM" ||
             (architecture.empty() && model_type == "qwen3")) {
    read_llama_like(keys, config, ModelFamily::kQwen3);
  } else if (architecture == "Qwen3MoeForCausalLM" ||
             (architecture.empty() && model_type == "qwen3_moe")) {
    read_llama_like(keys, config, ModelFamily::kQwen3Moe);
  } else if (architecture == "MistralForCausalLM" ||
             (architecture.empty() && model_type == "mistral")) {
    read_llama_like(keys, config, ModelFamily::kMistral);
  } else if (architecture == "MixtralForCausalLM" ||
             (architecture.empty() && model_type == "mixtral")) {
    read_llama_like(keys, config, ModelFamily::kMixtral);
  } else {
    throw ConfigError(source + ": unsupported architecture \"" +
                      (architecture.empty() ? model_type : architecture) +
                      "\"; supported: " + supported_architectures());
  }
  config.source_json = json;
  config.validate(source);
  return config;
}

TransformerConfig TransformerConfig::from_hf_file(const std::string& path) {
  // A regular file of at most kMaxConfigBytes, nested at most kMaxJsonDepth levels: a FIFO, a
  // multi-megabyte file or a 200,000-level value in an unused key is a FileError naming it.
  return from_hf_json(io::read_json_file(path, "the model's config.json", io::kMaxConfigBytes),
                      path);
}

nlohmann::json TransformerConfig::to_hf_json() const {
  nlohmann::json json = source_json.is_object() ? source_json : nlohmann::json::object();
  json["architectures"] = {architecture};
  json["vocab_size"] = vocab_size;
  json["tie_word_embeddings"] = tie_word_embeddings;
  if (family == ModelFamily::kGpt2) {
    json["model_type"] = "gpt2";
    json["n_embd"] = hidden_size;
    json["n_layer"] = num_layers;
    json["n_head"] = num_heads;
    json["n_positions"] = max_position_embeddings;
    json["n_inner"] = intermediate_size;
    json["layer_norm_epsilon"] = norm_eps;
    json["activation_function"] = "gelu_new";
    return json;
  }
  json["model_type"] = family_name(family);
  json["hidden_size"] = hidden_size;
  json["num_hidden_layers"] = num_layers;
  json["num_attention_heads"] = num_heads;
  json["num_key_value_heads"] = num_kv_heads;
  json["head_dim"] = head_dim;
  // Qwen3-MoE's experts' width is moe_intermediate_size; its dense width stays as it came.
  const bool expert_width_apart = family == ModelFamily::kQwen3Moe;
  if (!expert_width_apart || !source_json.contains("intermediate_size")) {
    json["intermediate_size"] = intermediate_size;
  }
  json["max_position_embeddings"] = max_position_embeddings;
  json["rms_norm_eps"] = norm_eps;
  json["hidden_act"] = "silu";
  json.erase("rope_theta");
  json.erase("rope_scaling");
  json["rope_parameters"] = {{"rope_theta", rope_theta}, {"rope_type", "default"}};
  if (family == ModelFamily::kLlama) {
    json["attention_bias"] = qkv_bias;
    json["mlp_bias"] = mlp_bias;
  }
  if (is_qwen3()) json["attention_bias"] = qkv_bias;
  const bool qwen = family == ModelFamily::kQwen2 || is_qwen3();
  if (family == ModelFamily::kMistral || family == ModelFamily::kMixtral) {
    json["sliding_window"] = sliding_window > 0 ? nlohmann::json(sliding_window) : nlohmann::json();
  }
  if (qwen) {
    // Qwen reads sliding_window only with use_sliding_window; an unused value stays as it came.
    json["use_sliding_window"] = sliding_window > 0;
    if (sliding_window > 0) json["sliding_window"] = sliding_window;
  }
  if (!windowed_layers.empty() || json.contains("layer_types")) {
    // Each layer's attention, as transformers >= 5 reads it (it outranks max_window_layers).
    nlohmann::json types = nlohmann::json::array();
    for (int64_t layer = 0; layer < num_layers; ++layer) {
      types.push_back(window_of_layer(layer) > 0 ? "sliding_attention" : "full_attention");
    }
    json["layer_types"] = types;
  }
  if (family == ModelFamily::kQwen3Moe) {
    json["num_experts"] = num_experts;
    json["moe_intermediate_size"] = intermediate_size;
    json["norm_topk_prob"] = normalize_expert_weights;
    json["decoder_sparse_step"] = 1;
    json["mlp_only_layers"] = nlohmann::json::array();
  }
  if (family == ModelFamily::kMixtral) json["num_local_experts"] = num_experts;
  if (is_moe()) {
    json["num_experts_per_tok"] = experts_per_token;
    json["output_router_logits"] = router_aux_loss_coef > 0.0;
    if (router_aux_loss_coef > 0.0) json["router_aux_loss_coef"] = router_aux_loss_coef;
  }
  return json;
}

void TransformerConfig::validate(const std::string& source) const {
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw ConfigError(source + ": " + what);
  };
  // Every size in range and every product of sizes countable, before anything below divides
  // or multiplies them (and before a builder allocates by them).
  check_config_sizes(*this, source);
  require(num_heads % num_kv_heads == 0,
          "num_attention_heads (" + std::to_string(num_heads) +
              ") must be a multiple of num_key_value_heads (" + std::to_string(num_kv_heads) + ")");
  require(learned_positions || head_dim % 2 == 0,
          "head_dim (" + std::to_string(head_dim) + ") must be even for rotary embeddings");
  require(learned_positions || (rope_theta > 0.0 && std::isfinite(rope_theta)),
          "rope_theta must be a positive number");
  require(norm_eps > 0.0 && std::isfinite(norm_eps),
          "the normalisation epsilon must be a positive number");
  require(!is_moe() || (mlp == MlpKind::kSwiGlu && !mlp_bias),
          "mixture-of-experts blocks have SwiGLU experts without biases");
  require(is_moe() || family != ModelFamily::kMixtral,
          "a Mixtral model needs num_local_experts and num_experts_per_tok");
  require(is_moe() || family != ModelFamily::kQwen3Moe,
          "a Qwen3-MoE model needs num_experts and num_experts_per_tok");
  require(windowed_layers.empty() ||
              (sliding_window > 0 && static_cast<int64_t>(windowed_layers.size()) == num_layers),
          "the per-layer sliding windows must name every layer, with a sliding_window set");
  require(router_aux_loss_coef >= 0.0 && std::isfinite(router_aux_loss_coef),
          "router_aux_loss_coef must be a number >= 0");
  require(!qk_norm || norm == NormKind::kRmsNorm,
          "query/key head norms are RMSNorms (Qwen3); this model uses LayerNorm");
  require(qk_norm == is_qwen3(), std::string("query/key head norms are part of Qwen3 models, "
                                             "not ") + family_name(family));
  require(!is_moe() || family == ModelFamily::kMixtral || family == ModelFamily::kQwen3Moe,
          std::string("experts are part of Mixtral and Qwen3-MoE models, not ") +
              family_name(family));
}

void TransformerConfig::set_attention_windows(int64_t window, std::vector<uint8_t> windowed) {
  const auto count = std::count(windowed.begin(), windowed.end(), uint8_t{1});
  if (window <= 0 || (!windowed.empty() && count == 0)) {
    sliding_window = 0;  // no layer is windowed
    windowed_layers.clear();
    return;
  }
  sliding_window = window;
  if (count == static_cast<int64_t>(windowed.size())) windowed.clear();  // every layer: uniform
  windowed_layers = std::move(windowed);
}

int64_t TransformerConfig::window_of_layer(int64_t layer) const {
  if (windowed_layers.empty()) return sliding_window;
  ZERO_CHECK(layer >= 0 && layer < static_cast<int64_t>(windowed_layers.size()),
             "layer " << layer << " of " << windowed_layers.size());
  return windowed_layers[static_cast<size_t>(layer)] != 0 ? sliding_window : 0;
}

int64_t TransformerConfig::num_parameters() const {
  return checked_parameter_count(*this, "model config");
}

namespace {

TransformerConfig gpt2_shape(int64_t vocab, int64_t positions, int64_t hidden, int64_t layers,
                             int64_t heads) {
  TransformerConfig c;
  c.family = ModelFamily::kGpt2;
  c.architecture = "GPT2LMHeadModel";
  c.vocab_size = vocab;
  c.max_position_embeddings = positions;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = c.num_kv_heads = heads;
  c.head_dim = hidden / heads;
  c.intermediate_size = 4 * hidden;
  return c;
}

TransformerConfig llama_shape(int64_t vocab, int64_t positions, int64_t hidden, int64_t layers,
                              int64_t heads, int64_t kv_heads, int64_t intermediate, double theta,
                              bool tied) {
  TransformerConfig c;
  c.family = ModelFamily::kLlama;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = vocab;
  c.max_position_embeddings = positions;
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.intermediate_size = intermediate;
  c.norm = NormKind::kRmsNorm;
  c.norm_eps = 1e-5;
  c.mlp = MlpKind::kSwiGlu;
  c.learned_positions = false;
  c.rope_theta = theta;
  c.tie_word_embeddings = tied;
  c.qkv_bias = c.attn_out_bias = c.mlp_bias = c.norm_bias = false;
  return c;
}

}  // namespace

TransformerConfig preset_config(std::string_view name) {
  TransformerConfig c;
  if (name == "tiny") {
    c = gpt2_shape(256, 256, 128, 4, 4);
  } else if (name == "tiny-llama") {
    c = llama_shape(256, 256, 128, 4, 4, 2, 352, 10000.0, false);
  } else if (name == "gpt2-124m") {
    c = gpt2_shape(50257, 1024, 768, 12, 12);
  } else if (name == "gpt2-350m") {
    c = gpt2_shape(50257, 1024, 1024, 24, 16);
  } else if (name == "llama-1b") {
    c = llama_shape(128256, 131072, 2048, 16, 32, 8, 8192, 500000.0, true);
  } else if (name == "llama-1b-mha") {
    // The GPU speed benchmark's Llama shape (bench/, issue 13): multi-head attention, a 32k
    // Llama-2 vocabulary, untied head.
    c = llama_shape(32000, 4096, 2048, 16, 16, 16, 5632, 10000.0, false);
  } else if (name == "tiny-qwen3") {
    // Qwen3's shape traits at tiny size: head_dim apart from hidden / heads (4 x 48 = 192
    // query channels from 128), per-head q/k norms, a tied head.
    c = llama_shape(256, 256, 128, 4, 4, 2, 352, 1000000.0, true);
    c.family = ModelFamily::kQwen3;
    c.architecture = "Qwen3ForCausalLM";
    c.head_dim = 48;
    c.qk_norm = true;
    c.norm_eps = 1e-6;
  } else if (name == "tiny-qwen3-moe") {
    c = preset_config("tiny-qwen3");
    c.family = ModelFamily::kQwen3Moe;
    c.architecture = "Qwen3MoeForCausalLM";
    c.tie_word_embeddings = false;
    c.intermediate_size = 64;
    c.num_experts = 8;
    c.experts_per_token = 2;
    c.normalize_expert_weights = false;  // transformers' Qwen3MoeConfig default
  } else if (name == "tiny-mixtral") {
    c = llama_shape(256, 256, 128, 4, 4, 2, 176, 10000.0, false);
    c.family = ModelFamily::kMixtral;
    c.architecture = "MixtralForCausalLM";
    c.num_experts = 8;
    c.experts_per_token = 2;
  } else {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw ConfigError("unknown model preset \"" + std::string(name) + "\"; presets: " + names +
                      " (or pass a Hugging Face model folder)");
  }
  c.validate("preset " + std::string(name));
  return c;
}

std::vector<std::string> preset_names() {
  return {"tiny",     "tiny-llama", "tiny-qwen3", "tiny-qwen3-moe", "tiny-mixtral",
          "gpt2-124m", "gpt2-350m", "llama-1b",   "llama-1b-mha"};
}

}  // namespace zero::model
