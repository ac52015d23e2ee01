#include "sharding/activation_estimator.h"

#include <algorithm>

#include "core/checked_math.h"
#include "core/error.h"
#include "sharding/estimate_math.h"
#include "model/sequence_tiling.h"
#include "model/tensor_parallel.h"

namespace zero::sharding {
namespace {

using namespace estimate_math;  // mul, add: overflow-checked

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

void validate(const ActivationSettings& a) {
  if (a.micro_batch <= 0 || a.seq_len <= 0) {
    throw ConfigError("activation estimate: micro-batch and sequence length must be positive, got " +
                      std::to_string(a.micro_batch) + " and " + std::to_string(a.seq_len));
  }
  if (a.activation_bytes < 1 || a.activation_bytes > 8) {
    throw ConfigError("activation estimate: bytes per activation must be 1 to 8, got " +
                      std::to_string(a.activation_bytes));
  }
  if (a.sequence_parallel < 1 || a.seq_len % a.sequence_parallel != 0) {
    throw ConfigError("activation estimate: the sequence-parallel size (" +
                      std::to_string(a.sequence_parallel) +
                      ") must be at least 1 and divide the sequence length (" +
                      std::to_string(a.seq_len) + ")");
  }
  if (a.cpu_checkpointing && !a.checkpointing) {
    throw ConfigError("activation estimate: cpu_checkpointing moves the checkpointed block "
                      "inputs to host memory, so it needs activation checkpointing on");
  }
}

}  // namespace

ActivationMemory estimate_activations(const model::TransformerConfig& c,
                                      const ActivationSettings& a) {
  validate(a);
  const int64_t sp = a.sequence_parallel;
  const int64_t t = mul({a.micro_batch, a.seq_len / sp});  // rows per rank
  const int64_t local_seq = a.seq_len / sp;
  const int64_t h = c.hidden_size, inter = c.intermediate_size, vocab = c.vocab_size;
  const int64_t q = mul({c.num_heads, c.head_dim}), kv = mul({c.num_kv_heads, c.head_dim});
  const int64_t heads = c.num_heads, layers = c.num_layers;
  const int64_t up = c.mlp == model::MlpKind::kSwiGlu ? mul({2, inter}) : inter;
  const int64_t w = a.activation_bytes;
  const int64_t stat = w > 4 ? 8 : 4;
  const int64_t lw = std::max<int64_t>(w, 4);

  ActivationMemory m;
  m.rows = t;
  // The units clamp shard counts to their rows (sequence_tiling.h).
  m.mlp_shards = std::min(model::resolve_mlp_shards(a.tiled_mlp_shards, local_seq, h), t);
  m.logits_shards =
      std::min(model::resolve_logits_shards(a.tiled_logits_shards, local_seq, h, vocab), t);
  const bool tiled_mlp = m.mlp_shards > 1, tiled_logits = m.logits_shards > 1;

  // Per-row bytes of one block's saved set (the header's table).
  const int64_t input_row = mul({w, h});
  // Ulysses: the core attention's gathered q, k, v and output ([s, heads/sp] per rank), per row.
  int64_t gathered_row = 0;
  if (sp > 1) {
    const int64_t kv_heads_per_rank = std::max<int64_t>(1, c.num_kv_heads / sp);
    const int64_t gathered_kv = mul({c.head_dim, sp, kv_heads_per_rank});
    gathered_row = mul({w, add({mul({2, q}), mul({2, gathered_kv})})});
  }
  // Qwen3's q/k head norms keep the projection before them and a 1/RMS per normalised head.
  const int64_t qk_norm_row =
      c.qk_norm ? add({mul({w, add({q, mul({2, kv})})}), mul({stat, c.num_heads + c.num_kv_heads})})
                : 0;
  const int64_t attention_row =
      add({mul({w, add({h, q, mul({2, kv}), q})}), gathered_row, qk_norm_row});
  // The MLP's saved set per row, untiled; MoE: Mixtral's experts (model/moe_feed_forward.h):
  // the norm's input and output, the router's logits, and for each of the k pairs its
  // intermediates and output, its weight (f32) and three 32-bit indices.
  const int64_t k = c.is_moe() ? c.experts_per_token : 1;
  // Besides x1 (which a tiled shard only views):
  const int64_t recomputed_mlp_row =
      c.is_moe() ? add({mul({w, add({h, c.num_experts})}), mul({k, w, add({up, inter, h})}),
                        mul({k, 16})})
                 : mul({w, add({h, up, inter})});
  const int64_t untiled_mlp_row = add({mul({w, h}), recomputed_mlp_row});
  // MoE backward: each pair's input (gathered again), its gradient and the output's, d_act and
  // d_up at once, the saved outputs freed by then (net 2h); dense: d_act then d_up.
  const int64_t mlp_backward_row = c.is_moe() ? mul({k, w, add({mul({2, h}), inter, up})})
                                              : mul({w, std::max(inter, up)});
  const int64_t mlp_row = tiled_mlp ? mul({w, h}) : untiled_mlp_row;
  int64_t dropout_row = 0;
  if (a.dropout) dropout_row = mul({2, h});  // 1-byte masks after attention and MLP
  int64_t block_saved = mul({t, add({attention_row, mlp_row, dropout_row})});
  if (a.flash_attention) {
    block_saved = add({block_saved, mul({stat, heads, t})});  // logsumexp per query row
  } else {
    // The stored softmax: a heads x s x s per sequence (a/sp heads per rank under Ulysses).
    const int64_t scores = mul({heads, a.micro_batch, a.seq_len, a.seq_len}) / sp;
    block_saved = add({block_saved, mul({w, scores})});
    if (a.dropout) block_saved = add({block_saved, mul({3, scores})});  // mask + dropped copy
  }
  const int64_t input = mul({t, input_row});
  m.per_layer_bytes = add({input, block_saved});

  // The last block's backward working set, beyond its saved set (header: the block moment).
  const int64_t dy = input;
  const int64_t mlp_saved = mul({t, mlp_row});
  int64_t mlp_phase = 0;
  if (tiled_mlp) {
    const int64_t r = ceil_div(t, m.mlp_shards);
    const int64_t shard = mul({r, add({recomputed_mlp_row, mlp_backward_row, stat})});
    mlp_phase = add({dy, input /* dx */, shard});
  } else {
    mlp_phase = add({dy, mul({t, mlp_backward_row})});
  }
  // The attention half (the MLP's saved set is freed by then): at the norm's backward dy, d_x1,
  // d_attn, d_qkv, d_h1 and dx are alive (d_attn and d_qkv are dropped early, but head views of
  // them live to the end of the block's backward). Under Ulysses the core attention's backward
  // also runs on gathered tensors: while it runs, dy, d_x1, d_attn, d_qkv and the gathered
  // output and q/k/v gradients (one gathered row) are alive on top of the saved gathered
  // tensors, which are released before d_h1 and dx exist.
  // With q/k head norms the gradient before them (d_qkv's size) is alive at the projection's
  // backward, freed before the norm's dx exists: the larger of h and q + 2kv.
  const int64_t last_grad = c.qk_norm ? std::max(h, add({q, mul({2, kv})})) : h;
  const int64_t attention_end = mul(
      {t, add({mul({w, add({mul({3, h}), last_grad, mul({2, q}), mul({2, kv})})}),
               -gathered_row})});
  const int64_t attention_core =
      mul({t, add({mul({w, add({mul({2, h}), mul({2, q}), mul({2, kv})})}), gathered_row})});
  const int64_t attention_grads = std::max(attention_end, attention_core);
  const int64_t attention_phase = attention_grads - mlp_saved;  // the MLP's saved set is freed
  const int64_t recompute_phase = a.checkpointing ? mul({2, dy}) : 0;  // dy + the output y
  m.backward_bytes = std::max({mlp_phase, attention_phase, recompute_phase});

  // The LM head moment: y_last, the normed h, dh, and the logits (or one shard + accumulator).
  const int64_t hidden_states = mul({3, t, w, h});
  if (tiled_logits) {
    const int64_t r = ceil_div(t, m.logits_shards);
    m.logits_bytes = mul({r, lw, vocab});
    m.head_bytes = add({hidden_states, m.logits_bytes, mul({vocab, h, lw}), mul({t, stat})});
  } else {
    m.logits_bytes = mul({t, lw, vocab});
    m.head_bytes = add({hidden_states, m.logits_bytes});
  }

  // What the other blocks hold at each moment.
  int64_t saved_at_head = 0, others_at_block = 0;
  if (!a.checkpointing) {
    saved_at_head = mul({layers, m.per_layer_bytes});
    others_at_block = add({mul({layers - 1, m.per_layer_bytes}), input});
    m.layers_bytes = saved_at_head;
  } else if (!a.cpu_checkpointing) {
    saved_at_head = mul({layers, input});
    others_at_block = saved_at_head;
    // The inputs + the block being recomputed: its saved set and its output y (an input's size).
    m.layers_bytes = add({saved_at_head, m.per_layer_bytes});
  } else {
    // Host memory holds every input; the device the restored one and the prefetched previous.
    m.host_bytes = mul({layers, input});
    others_at_block = mul({std::min<int64_t>(layers, 2), input});
    m.layers_bytes = add({others_at_block, m.per_layer_bytes});
  }
  m.peak_bytes = std::max(add({saved_at_head, m.head_bytes}),
                          add({others_at_block, block_saved, m.backward_bytes}));
  return m;
}

std::optional<int64_t> longest_fitting_seq_len(const model::TransformerConfig& config,
                                               ActivationSettings settings, int64_t fixed_bytes,
                                               int64_t budget_bytes, int64_t granule,
                                               int64_t max_seq_len) {
  if (granule < 1 || max_seq_len < granule) {
    throw ConfigError("longest sequence search: the granule (" + std::to_string(granule) +
                      ") must be at least 1 and at most the longest length (" +
                      std::to_string(max_seq_len) + ")");
  }
  auto fits = [&](int64_t units) {
    settings.seq_len = units * granule;
    try {
      const ActivationMemory m = estimate_activations(config, settings);
      return m.peak_bytes <= budget_bytes - fixed_bytes;
    } catch (const ConfigError&) {
      return false;  // the bytes overflow int64: far past any budget
    }
  };
  if (fixed_bytes > budget_bytes || !fits(1)) return std::nullopt;
  // Invariant: lo fits; hi does not fit or is one past the largest allowed multiple.
  int64_t lo = 1, hi = max_seq_len / granule + 1;
  // Grow first (the answer is usually far below the maximum), then bisect.
  for (int64_t probe = 2; probe < hi; probe *= 2) {
    if (!fits(probe)) {
      hi = probe;
      break;
    }
    lo = probe;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo * granule;
}

model::TransformerConfig tensor_parallel_activation_config(const model::TransformerConfig& config,
                                                           int64_t tensor_parallel) {
  if (tensor_parallel <= 1) return config;
  // Throws ConfigError for heads or an MLP width the size does not split.
  model::TransformerConfig local = model::tensor_parallel_block_config(
      config, model::TensorParallelLayout{0, tensor_parallel});
  local.vocab_size = ceil_div(config.vocab_size, tensor_parallel);  // the largest balanced part
  return local;
}

}  // namespace zero::sharding
