// Activation memory of one training micro-batch on one GPU (rank): what zero.cpp's transformer
// keeps alive at its peak, under activation checkpointing (on the device or in host memory),
// TiledMLP, the tiled fused logits + loss and Ulysses sequence parallelism; and the longest
// sequence that fits a memory budget. Pure arithmetic, overflow-checked (a count beyond int64 is
// a ConfigError "... is too large"), no printing.
//
// Notation: b micro-batch, s sequence length, sp sequence-parallel size, t = ceil(b*s / sp) rows
// per rank, h hidden, q = heads*d, kv = kv_heads*d, I intermediate size, U up-projection width
// (2I for SwiGLU: gate|up fused; I for GELU), V vocabulary, L layers, a heads (a_kv key/value
// heads); w bytes per activation element, f = 4 bytes per statistic (8 for f64 activations),
// lw = max(w, 4) for the logits (fp32 at least, as the loss reads them). N / Nl: MLP / logits row
// shards, r = ceil(t/N).
//
// Saved per block (model/transformer_block.cpp, tiled_mlp.cpp: the tensors kept from forward to
// backward), per row:
//   input x                      w h      (the previous unit's output)
//   attention: h1, qkv, attn     w (h + q + 2kv + q)     lse f a (flash; eager: a s^2 w / row)
//   MLP untiled: x1, h2, up, act w (2h + U + I)          tiled (N > 1): x1 only, w h
//   MoE (E experts, k per token): x1, h2, router logits, and per pair up, act and output:
//                                w (2h + E) + k w (U + I + h) + 16 k
//   Qwen3's q/k head norms: the projection before them and a 1/RMS per normalised head:
//                                w (q + 2kv) + f (a + a_kv)
//   Ulysses (sp > 1): the gathered q, k, v and output of the core attention, [s, heads/sp]:
//                                w (2q + 2 kv_r) with kv_r = d * sp * max(1, kv_heads/sp)
//                                (GQA with fewer KV heads than sp replicates one per rank)
// so per_layer = t w (4h + 2q + 2kv + U + I) + t f a untiled: Megatron's count for these layers
// (see memory_estimator.h for its GPT-2 form).
//
// The peak is the larger of two moments (measured with the allocator's kActivations peak):
//  (head) the LM head's backward begins: every block's saved set (checkpointing: its input
//    only) + the last block's output y, the normed hidden state and its gradient dh (3 t w h),
//    the logits t lw V (tiled: one shard's r_l lw V, plus the head-weight gradient accumulator
//    V h lw the tiled loss keeps from forward to backward) and the per-token losses t f;
//  (block) the last block's backward: the other blocks' saved sets + this block's saved set +
//    its output gradient dy (t w h) + the largest working set of its backward:
//      MLP untiled: d_act then d_up while up is alive:  t w max(I, U)
//                   MoE: per pair its input and both gradients, d_act and d_up, its saved
//                   output freed: t k w (2h + I + U)
//      MLP tiled:   dx (t w h) + one shard recomputed (h2, up, act) and its gradients:
//                   r (w (h + U + I + max(I, U)) + f), the saved MLP set being x1 only
//      attention:   the MLP's saved set is gone; dy, d_x1, d_attn, d_qkv, d_h1 and the norm's
//                   dx: t w (4h + 2q + 2kv) (d_attn and d_qkv stay alive through head views);
//                   q/k head norms: the gradient before them (q + 2kv) is alive with d_h1 at the
//                   projection's backward and freed before dx, so max(h, q + 2kv) for the last h;
//                   Ulysses: also the larger of that minus the saved gathered tensors (freed
//                   first) and t w (2h + 2q + 2kv) + the gathered output and qkv gradients
//                   (t w (2q + 2 kv_r)) while the core attention's backward runs
//      recompute (checkpointing): the block's saved set + dy + its output y: 2 t w h.
// With checkpointing the "other blocks" hold only their inputs (L t w h at the head moment); with
// cpu_checkpointing those live in host memory (host_bytes = L t w h) and the device holds the
// restored input of the block in backward plus the prefetched previous one (2 t w h). Not
// counted: norm statistics (f per row per norm, < 1% of a block), backend workspaces, the
// all-to-all staging of Ulysses.
#pragma once
#include <cstdint>
#include <optional>

#include "model/transformer_config.h"

namespace zero::sharding {

struct ActivationSettings {
  int64_t micro_batch = 1;
  int64_t seq_len = 1;         // tokens per sequence (the whole sequence, before Ulysses splits it)
  bool checkpointing = false;  // recompute each block in backward, keeping only its input
  // zero.cpp's attention is flash-style (keeps a logsumexp per row, nothing seq x seq);
  // false models an implementation that stores the softmax output (Megatron's accounting).
  bool flash_attention = true;
  bool dropout = false;  // zero.cpp has no dropout; true adds Megatron's dropout masks
  // Bytes per stored activation element: 2 is DeepSpeed's / Megatron's 16-bit accounting, 4 an
  // f32 run, 8 an f64 one.
  int64_t activation_bytes = 2;
  // Row shards of TiledMLP and of the tiled logits + loss: 1 untiled, model::kAutoShards (0)
  // resolved as model/sequence_tiling.h does, N >= 2 tiled.
  int64_t tiled_mlp_shards = 1;
  int64_t tiled_logits_shards = 1;
  int64_t sequence_parallel = 1;   // Ulysses group size: each rank holds t = b*s/sp rows
  bool cpu_checkpointing = false;  // the saved block inputs live in host memory (with checkpointing)
};

struct ActivationMemory {
  int64_t per_layer_bytes = 0;  // one block's saved activations, its input included
  // All blocks at the end of forward: their saved sets, or with checkpointing the inputs held on
  // the device + one block's saved set (the one being recomputed).
  int64_t layers_bytes = 0;
  int64_t logits_bytes = 0;    // logits alive at once: [t, V], or one shard's [r_l, V] when tiled
  int64_t head_bytes = 0;      // the LM head moment on top of the saved blocks (logits included)
  int64_t backward_bytes = 0;  // the last block's backward working set on top of its saved set
  int64_t peak_bytes = 0;      // device bytes at the peak: max of the two moments
  int64_t host_bytes = 0;      // cpu_checkpointing: the saved block inputs, in host memory
  int64_t mlp_shards = 1;      // resolved shard counts (1: untiled)
  int64_t logits_shards = 1;
  int64_t rows = 0;            // t, rows per rank
  int64_t total_bytes() const { return peak_bytes; }
};

// The config whose activations one rank of a tensor-parallel group of `tensor_parallel` holds
// (Megatron-style, without sequence parallelism): its heads, key/value heads and MLP width
// (model::tensor_parallel_block_config) and the largest rank's vocabulary part for the logits;
// the hidden size - the residual stream every rank keeps whole - unchanged. `config` itself
// for 1. Throws ConfigError (naming the size) when the model cannot be split that way.
model::TransformerConfig tensor_parallel_activation_config(const model::TransformerConfig& config,
                                                           int64_t tensor_parallel);

// Throws ConfigError for non-positive sizes, sequence parallelism that does not divide the
// sequence, or cpu_checkpointing without checkpointing.
ActivationMemory estimate_activations(const model::TransformerConfig& config,
                                      const ActivationSettings& settings);

// The longest sequence length, a multiple of `granule` and at most `max_seq_len`, whose peak
// activations plus `fixed_bytes` (model states) fit `budget_bytes` on the device (host_bytes
// are not charged: see the caller); nullopt when even `granule` does not fit. Keeps the
// invariant "lo fits, hi does not", so the answer fits and answer + granule does not (or is past
// max_seq_len). A length whose estimate overflows counts as not fitting.
std::optional<int64_t> longest_fitting_seq_len(const model::TransformerConfig& config,
                                               ActivationSettings settings, int64_t fixed_bytes,
                                               int64_t budget_bytes, int64_t granule,
                                               int64_t max_seq_len);

}  // namespace zero::sharding
