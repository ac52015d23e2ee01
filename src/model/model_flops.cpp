#include "model/model_flops.h"

namespace zero::model {

StepFlops training_flops(const TransformerConfig& c, int64_t batch, int64_t seq_len) {
  const auto tokens = static_cast<double>(batch * seq_len);
  const auto h = static_cast<double>(c.hidden_size);
  const auto qkv = static_cast<double>(c.q_dim() + 2 * c.kv_dim());
  const auto q = static_cast<double>(c.q_dim());
  const auto inner = static_cast<double>(c.intermediate_size);
  const double up = c.mlp == MlpKind::kSwiGlu ? 2.0 * inner : inner;
  const double block_weights = h * qkv + q * h + h * up + inner * h;
  const double weights = static_cast<double>(c.num_layers) * block_weights +
                         h * static_cast<double>(c.vocab_size);
  StepFlops f;
  f.matmul = 3.0 * 2.0 * tokens * weights;
  // Per layer and sequence, causal QK^T and PV each cost T^2/2 * D multiply-adds per head.
  const auto t = static_cast<double>(seq_len);
  const double forward_attention = 2.0 * 2.0 * (t * t / 2.0) * q * static_cast<double>(batch);
  f.attention = 3.0 * forward_attention * static_cast<double>(c.num_layers);
  return f;
}

}  // namespace zero::model
