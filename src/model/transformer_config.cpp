#include "model/transformer_config.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace zero::model {
namespace {

// Typed access to config.json keys with messages that name the file, the key and the value.
class KeyReader {
 public:
  KeyReader(const nlohmann::json& json, const std::string& source) : json_(json), source_(source) {}

  bool has(const char* key) const { return json_.contains(key) && !json_.at(key).is_null(); }

  int64_t positive_int(const char* key) const {
    if (!has(key)) fail(key, "is missing; it is required for " + architecture());
    return positive_int_value(key, json_.at(key));
  }
  int64_t positive_int_or(const char* key, int64_t fallback) const {
    return has(key) ? positive_int_value(key, json_.at(key)) : fallback;
  }
  double positive_number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const auto& value = json_.at(key);
    if (!value.is_number() || value.get<double>() <= 0.0) {
      fail(key, "must be a positive number, got " + value.dump());
    }
    return value.get<double>();
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const auto& value = json_.at(key);
    if (!value.is_boolean()) fail(key, "must be true or false, got " + value.dump());
    return value.get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const auto& value = json_.at(key);
    if (!value.is_string()) fail(key, "must be a string, got " + value.dump());
    return value.get<std::string>();
  }
  const nlohmann::json& at(const char* key) const { return json_.at(key); }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw ConfigError(source_ + ": key '" + key + "' " + problem);
  }
  std::string architecture() const {
    if (json_.contains("architectures") && json_["architectures"].is_array() &&
        !json_["architectures"].empty() && json_["architectures"][0].is_string()) {
      return json_["architectures"][0].get<std::string>();
    }
    return string_or("model_type", "this model");
  }

 private:
  int64_t positive_int_value(const char* key, const nlohmann::json& value) const {
    if (!value.is_number_integer() || value.get<int64_t>() <= 0) {
      fail(key, "must be a positive integer, got " + value.dump());
    }
    return value.get<int64_t>();
  }

  const nlohmann::json& json_;
  const std::string& source_;
};

void read_gpt2(const KeyReader& keys, TransformerConfig& config) {
  config.family = ModelFamily::kGpt2;
  config.architecture = "GPT2LMHeadModel";
  config.vocab_size = keys.positive_int("vocab_size");
  config.hidden_size = keys.positive_int("n_embd");
  config.num_layers = keys.positive_int("n_layer");
  config.num_heads = keys.positive_int("n_head");
  config.num_kv_heads = config.num_heads;
  if (config.hidden_size % config.num_heads != 0) {
    keys.fail("n_head", "(" + std::to_string(config.num_heads) + ") must divide n_embd (" +
                            std::to_string(config.hidden_size) + ")");
  }
  config.head_dim = config.hidden_size / config.num_heads;
  config.intermediate_size = keys.positive_int_or("n_inner", 4 * config.hidden_size);
  config.max_position_embeddings = keys.positive_int("n_positions");
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
                "is " + params["rope_type"].dump() +
                    "; only the default rotary embedding is supported (no scaling) yet");
    }
    if (params.contains("rope_theta")) {
      if (!params["rope_theta"].is_number() || params["rope_theta"].get<double>() <= 0) {
        keys.fail("rope_parameters.rope_theta",
                  "must be a positive number, got " + params["rope_theta"].dump());
      }
      return params["rope_theta"].get<double>();
    }
  }
  if (keys.has("rope_scaling")) {
    keys.fail("rope_scaling", "is set (" + keys.at("rope_scaling").dump() +
                                  "); scaled rotary embeddings are not supported yet");
  }
  return keys.positive_number_or("rope_theta", 10000.0);
}

void read_llama_like(const KeyReader& keys, TransformerConfig& config, ModelFamily family) {
  config.family = family;
  config.vocab_size = keys.positive_int("vocab_size");
  config.hidden_size = keys.positive_int("hidden_size");
  config.num_layers = keys.positive_int("num_hidden_layers");
  config.num_heads = keys.positive_int("num_attention_heads");
  config.num_kv_heads = keys.positive_int_or("num_key_value_heads", config.num_heads);
  if (!keys.has("head_dim") && config.hidden_size % config.num_heads != 0) {
    keys.fail("num_attention_heads", "(" + std::to_string(config.num_heads) +
                                         ") must divide hidden_size (" +
                                         std::to_string(config.hidden_size) +
                                         ") when head_dim is not given");
  }
  config.head_dim = keys.positive_int_or("head_dim", config.hidden_size / config.num_heads);
  config.intermediate_size = keys.positive_int("intermediate_size");
  config.max_position_embeddings = keys.positive_int("max_position_embeddings");
  config.norm_eps = keys.positive_number_or("rms_norm_eps", 1e-6);
  config.norm = NormKind::kRmsNorm;
  config.norm_bias = false;
  config.mlp = MlpKind::kSwiGlu;
  config.learned_positions = false;
  config.rope_theta = read_rope_theta(keys);
  config.tie_word_embeddings = keys.boolean_or("tie_word_embeddings", false);
  const std::string act = keys.string_or("hidden_act", "silu");
  if (act != "silu") keys.fail("hidden_act", "is \"" + act + "\"; only \"silu\" is supported");
  if (keys.has("pretraining_tp") && keys.positive_int_or("pretraining_tp", 1) != 1) {
    keys.fail("pretraining_tp", "must be 1 (tensor-parallel pretraining slices are not supported)");
  }
  if (keys.has("layer_types")) {
    // transformers >= 5 lists each layer's attention; per-layer sliding windows (Qwen2's
    // max_window_layers, Gemma-style alternation) are not supported, a uniform window is.
    const auto& types = keys.at("layer_types");
    if (!types.is_array()) keys.fail("layer_types", "must be a list of strings");
    for (const auto& t : types) {
      if (t == "full_attention") continue;
      if (t == "sliding_attention" && family == ModelFamily::kMistral) continue;
      keys.fail("layer_types", "contains " + t.dump() +
                                   "; only full attention (or Mistral's uniform sliding window) is "
                                   "supported");
    }
  }
  switch (family) {
    case ModelFamily::kQwen2:
      config.architecture = "Qwen2ForCausalLM";
      config.qkv_bias = true;  // Qwen2 always has q/k/v biases and none elsewhere
      config.attn_out_bias = false;
      config.mlp_bias = false;
      if (keys.boolean_or("use_sliding_window", false)) {
        keys.fail("use_sliding_window", "is true; Qwen2's per-layer sliding window is not supported "
                                        "yet (set it to false to use full attention)");
      }
      break;
    case ModelFamily::kMistral:
      config.architecture = "MistralForCausalLM";
      config.qkv_bias = config.attn_out_bias = config.mlp_bias = false;
      config.sliding_window = keys.has("sliding_window") ? keys.positive_int_or("sliding_window", 0) : 0;
      break;
    default:
      config.architecture = "LlamaForCausalLM";
      config.qkv_bias = config.attn_out_bias = keys.boolean_or("attention_bias", false);
      config.mlp_bias = keys.boolean_or("mlp_bias", false);
      break;
  }
}

std::string supported_architectures() {
  return "GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM";
}

}  // namespace

const char* family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::kGpt2: return "gpt2";
    case ModelFamily::kLlama: return "llama";
    case ModelFamily::kQwen2: return "qwen2";
    case ModelFamily::kMistral: return "mistral";
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
      keys.fail("architectures", "must be a list with one class name, got " + archs.dump());
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
  } else if (architecture == "MistralForCausalLM" ||
             (architecture.empty() && model_type == "mistral")) {
    read_llama_like(keys, config, ModelFamily::kMistral);
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
  std::ifstream in(path);
  if (!in) throw FileError(path + ": cannot open the model's config.json");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + ": not valid JSON (" + e.what() + ")");
  }
  return from_hf_json(json, path);
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
  json["intermediate_size"] = intermediate_size;
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
  if (family == ModelFamily::kMistral) {
    json["sliding_window"] = sliding_window > 0 ? nlohmann::json(sliding_window) : nlohmann::json();
  }
  return json;
}

void TransformerConfig::validate(const std::string& source) const {
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw ConfigError(source + ": " + what);
  };
  require(vocab_size > 0 && hidden_size > 0 && num_layers > 0 && num_heads > 0 &&
              num_kv_heads > 0 && head_dim > 0 && intermediate_size > 0 &&
              max_position_embeddings > 0,
          "every size (vocab, hidden, layers, heads, head_dim, intermediate, positions) must be > 0");
  require(num_heads % num_kv_heads == 0,
          "num_attention_heads (" + std::to_string(num_heads) +
              ") must be a multiple of num_key_value_heads (" + std::to_string(num_kv_heads) + ")");
  require(learned_positions || head_dim % 2 == 0,
          "head_dim (" + std::to_string(head_dim) + ") must be even for rotary embeddings");
  require(learned_positions || rope_theta > 0.0, "rope_theta must be positive");
  require(norm_eps > 0.0, "the normalisation epsilon must be positive");
  require(sliding_window >= 0, "sliding_window must be >= 0");
}

int64_t TransformerConfig::num_parameters() const {
  const int64_t c = hidden_size;
  const int64_t norm_params = norm_bias ? 2 * c : c;
  int64_t block = 2 * norm_params;
  block += c * (q_dim() + 2 * kv_dim()) + (qkv_bias ? q_dim() + 2 * kv_dim() : 0);
  block += q_dim() * c + (attn_out_bias ? c : 0);
  if (mlp == MlpKind::kSwiGlu) {
    block += 3 * c * intermediate_size + (mlp_bias ? 2 * intermediate_size + c : 0);
  } else {
    block += 2 * c * intermediate_size + (mlp_bias ? intermediate_size + c : 0);
  }
  int64_t total = num_layers * block + vocab_size * c + norm_params;
  if (learned_positions) total += max_position_embeddings * c;
  if (!tie_word_embeddings) total += vocab_size * c;
  return total;
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
  return {"tiny", "tiny-llama", "gpt2-124m", "gpt2-350m", "llama-1b"};
}

}  // namespace zero::model
