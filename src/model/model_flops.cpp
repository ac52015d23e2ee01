#include "model/model_flops.h"

namespace zero::model {

double UnitFlops::params() const {
  double sum = 0.0;
  for (const OpFlops& op : ops) sum += op.params;
  return sum;
}

double UnitFlops::forward_macs() const {
  double sum = 0.0;
  for (const OpFlops& op : ops) sum += op.forward_macs;
  return sum;
}

std::vector<UnitFlops> unit_flops(const TransformerConfig& c, int64_t batch, int64_t seq_len) {
  const auto tokens = static_cast<double>(batch) * static_cast<double>(seq_len);
  const auto h = static_cast<double>(c.hidden_size);
  const auto q = static_cast<double>(c.q_dim());
  const auto qkv = static_cast<double>(c.q_dim() + 2 * c.kv_dim());
  const auto inner = static_cast<double>(c.intermediate_size);
  const auto vocab = static_cast<double>(c.vocab_size);
  const bool swiglu = c.mlp == MlpKind::kSwiGlu;
  const double up = swiglu ? 2.0 * inner : inner;  // SwiGLU's gate and up run as one product
  const double norm_params = c.norm_bias ? 2.0 * h : h;
  // Per head and sequence a causal QK^T (or PV) costs T^2/2 * head_dim multiply-adds; summed
  // over heads that is T^2/2 * q_dim.
  const auto t = static_cast<double>(seq_len);
  const double causal_product = static_cast<double>(batch) * (t * t / 2.0) * q;
  auto bias = [](bool present, double n) { return present ? n : 0.0; };
  auto weights = [](std::string name, double params, double macs) {
    return OpFlops{std::move(name), params, macs, false};
  };
  auto attention = [](std::string name, double macs) {
    return OpFlops{std::move(name), 0.0, macs, true};
  };
  auto elementwise = [](std::string name, double params) {
    return OpFlops{std::move(name), params, 0.0, false};
  };

  std::vector<UnitFlops> units;
  units.reserve(static_cast<size_t>(c.num_layers) + 2);

  UnitFlops embedding{"embedding", {elementwise("token embedding (lookup)", vocab * h)}};
  if (c.learned_positions) {
    embedding.ops.push_back(elementwise("position embedding (lookup)",
                                        static_cast<double>(c.max_position_embeddings) * h));
  }
  units.push_back(std::move(embedding));

  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    UnitFlops block{"block" + std::to_string(layer), {}};
    block.ops = {
        elementwise("attention norm", norm_params),
        weights("qkv projection", h * qkv + bias(c.qkv_bias, qkv), tokens * h * qkv),
        attention("attention scores QK^T (causal)", causal_product),
        attention("attention values PV (causal)", causal_product),
        weights("attention output projection", q * h + bias(c.attn_out_bias, h), tokens * q * h),
        elementwise("mlp norm", norm_params),
    };
    if (c.qk_norm) {
      const auto head_dim = static_cast<double>(c.head_dim);
      block.ops.insert(block.ops.begin() + 2, elementwise("query/key head norms", 2 * head_dim));
    }
    if (c.is_moe()) {
      // Every expert's weights count as parameters; each token runs only its k experts.
      const auto experts = static_cast<double>(c.num_experts);
      const double routed = tokens * static_cast<double>(c.experts_per_token);
      block.ops.push_back(weights("moe router", experts * h, tokens * h * experts));
      block.ops.push_back(weights("moe experts gate+up", experts * h * up, routed * h * up));
      block.ops.push_back(weights("moe experts down", experts * inner * h, routed * inner * h));
    } else {
      block.ops.push_back(weights(swiglu ? "mlp gate+up projection" : "mlp up projection",
                                  h * up + bias(c.mlp_bias, up), tokens * h * up));
      block.ops.push_back(weights("mlp down projection", inner * h + bias(c.mlp_bias, h),
                                  tokens * inner * h));
    }
    units.push_back(std::move(block));
  }

  // A tied head multiplies by the token embedding, whose parameters the embedding unit owns.
  units.push_back({"lm_head",
                   {elementwise("final norm", norm_params),
                    weights(c.tie_word_embeddings ? "lm head (tied to the token embedding)" : "lm head",
                            c.tie_word_embeddings ? 0.0 : vocab * h, tokens * h * vocab)}});
  return units;
}

StepFlops total_flops(const std::vector<UnitFlops>& units) {
  StepFlops f;
  for (const UnitFlops& unit : units) {
    for (const OpFlops& op : unit.ops) (op.attention ? f.attention : f.matmul) += op.training_flops();
  }
  return f;
}

StepFlops training_flops(const TransformerConfig& config, int64_t batch, int64_t seq_len) {
  return total_flops(unit_flops(config, batch, seq_len));
}

}  // namespace zero::model
