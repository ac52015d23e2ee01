#include "model/config_limits.h"

#include "core/checked_math.h"
#include "core/error.h"

namespace zero::model {
namespace {

void check_range(const std::string& source, const char* key, int64_t value, int64_t max,
                 const std::string& reason) {
  if (value < 1 || value > max) throw_out_of_range(source, key, std::to_string(value), max, reason);
}

// Sums products of sizes; the first overflow throws naming what is being counted.
class CheckedCount {
 public:
  explicit CheckedCount(std::string what) : what_(std::move(what)) {}
  void add(std::initializer_list<int64_t> factors) {
    total_ = checked_sum(total_, checked_product(factors, what_), what_);
  }
  void add_if(bool present, std::initializer_list<int64_t> factors) {
    if (present) add(factors);
  }
  int64_t total() const { return total_; }

 private:
  std::string what_;
  int64_t total_ = 0;
};

}  // namespace

ConfigKeys config_keys(ModelFamily family) {
  if (family == ModelFamily::kGpt2) {
    return {"vocab_size", "n_embd", "n_layer", "n_head", "n_head", "n_embd / n_head", "n_inner",
            "n_positions"};
  }
  return {"vocab_size",        "hidden_size",       "num_hidden_layers",
          "num_attention_heads", "num_key_value_heads", "head_dim",
          "intermediate_size", "max_position_embeddings"};
}

void throw_out_of_range(const std::string& source, const std::string& key,
                        const std::string& value, int64_t max, const std::string& reason) {
  throw ConfigError(source + ": key '" + key + "' = " + value +
                    " is out of range: it must be an integer from 1 to " + std::to_string(max) +
                    " (zero.cpp's limit: " + reason + "); correct it");
}

void check_config_sizes(const TransformerConfig& c, const std::string& source) {
  const ConfigKeys keys = config_keys(c.family);
  check_range(source, keys.vocab_size, c.vocab_size, kVocabSizeLimit.max, kVocabSizeLimit.reason);
  check_range(source, keys.hidden_size, c.hidden_size, kHiddenSizeLimit.max,
              kHiddenSizeLimit.reason);
  check_range(source, keys.num_layers, c.num_layers, kLayersLimit.max, kLayersLimit.reason);
  check_range(source, keys.num_heads, c.num_heads, c.hidden_size,
              "at most one head per channel of " + std::string(keys.hidden_size));
  check_range(source, keys.num_kv_heads, c.num_kv_heads, c.num_heads,
              "at most one key-value head per attention head");
  check_range(source, keys.head_dim, c.head_dim, kHeadDimLimit.max, kHeadDimLimit.reason);
  check_range(source, keys.intermediate_size, c.intermediate_size, kIntermediateSizeLimit.max,
              kIntermediateSizeLimit.reason);
  check_range(source, keys.max_position_embeddings, c.max_position_embeddings,
              kPositionsLimit.max, kPositionsLimit.reason);
  if (c.sliding_window < 0 || c.sliding_window > kSlidingWindowLimit.max) {
    throw_out_of_range(source, "sliding_window", std::to_string(c.sliding_window),
                       kSlidingWindowLimit.max, kSlidingWindowLimit.reason);
  }
  if (c.is_moe()) {
    check_range(source, "num_local_experts", c.num_experts, kExpertsLimit.max,
                kExpertsLimit.reason);
    check_range(source, "num_experts_per_tok", c.experts_per_token, c.num_experts,
                "a token chooses among num_local_experts experts");
  }
  // Under the limits above these fit, but the parameter count is what sizes the buffers: count
  // it with checks so no later product can overflow.
  checked_parameter_count(c, source);
}

int64_t checked_parameter_count(const TransformerConfig& config, const std::string& source) {
  const int64_t c = config.hidden_size;
  const std::string what = source + ": the parameter count of this model";
  const int64_t q = checked_product({config.num_heads, config.head_dim}, what);
  const int64_t kv = checked_product({config.num_kv_heads, config.head_dim}, what);
  const int64_t qkv = checked_sum(q, checked_product({2, kv}, what), what);
  const int64_t norm_params = config.norm_bias ? 2 * c : c;

  CheckedCount block(what);
  block.add({2, norm_params});
  block.add({c, qkv});
  block.add_if(config.qkv_bias, {qkv});
  block.add_if(config.qk_norm, {2, config.head_dim});  // q_norm and k_norm
  block.add({q, c});
  block.add_if(config.attn_out_bias, {c});
  const int64_t mlp_matrices = config.mlp == MlpKind::kSwiGlu ? 3 : 2;
  if (config.is_moe()) {
    block.add({config.num_experts, c});  // the router
    block.add({config.num_experts, mlp_matrices, c, config.intermediate_size});
  } else {
    block.add({mlp_matrices, c, config.intermediate_size});
  }
  block.add_if(config.mlp_bias, {mlp_matrices - 1, config.intermediate_size});
  block.add_if(config.mlp_bias, {c});

  CheckedCount total(what);
  total.add({config.num_layers, block.total()});
  total.add({config.vocab_size, c});
  total.add({norm_params});
  total.add_if(config.learned_positions, {config.max_position_embeddings, c});
  total.add_if(!config.tie_word_embeddings, {config.vocab_size, c});
  return total.total();
}

}  // namespace zero::model
