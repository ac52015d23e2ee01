// Ulysses sequence parallelism for attention (DeepSpeed-Ulysses): each of the P ranks of a
// sequence group holds T/P consecutive tokens of every sequence. Attention needs whole
// sequences, so around the core attention two all-to-alls trade sequence for heads:
//
//   q, k, v [B, T/P, heads, D]  --all_to_all-->  [B, T, heads/P, D]   (scatter heads, gather seq)
//   backend.attention_forward on the full sequence with this rank's heads
//   out [B, T, H/P, D]          --all_to_all-->  [B, T/P, H, D]      (scatter seq, gather heads)
//
// Backward runs the reverse exchanges around attention_backward. GQA: query heads must divide
// by P; key/value heads either divide by P, or (fewer KV heads than ranks, P % KVH == 0) each KV
// head is replicated P/KVH times before the exchange as DeepSpeed does, and the replicas'
// gradients are summed on the way back.
//
// Packing into and out of the contiguous all_to_all buffers is a row gather (and in the last
// backward step a row scatter-add) of D-element head rows through Backend::embedding_forward /
// embedding_backward with index tables built on the host once per shape and uploaded once, so
// no host code touches device elements. Buffers are accounted as activations; the saved state
// (this rank's heads over the whole sequence) is what the core attention's backward needs.
#pragma once
#include <cstdint>

#include "backend/backend.h"

namespace zero::comm {
class Comm;
}  // namespace zero::comm

namespace zero::model {

// How the heads of one attention layer split over a sequence group of `ranks`.
struct UlyssesHeads {
  int64_t q_per_rank = 0;    // query heads each rank attends with: heads / ranks
  int64_t kv_per_rank = 0;   // key/value heads each rank holds after the exchange
  int64_t kv_replicas = 1;   // copies of each KV head (ranks / kv_heads when replicated)
  bool operator==(const UlyssesHeads&) const = default;
};

// Throws ConfigError naming num_attention_heads / num_key_value_heads and the
// sequence_parallel_size when the heads cannot be split over `ranks`.
UlyssesHeads ulysses_heads(int64_t heads, int64_t kv_heads, int64_t ranks);

class UlyssesAttention {
 public:
  // qkv: this rank's fused projections [B * T_local, (H + 2 KVH) * D] (contiguous; q, k, v heads
  // in that order per row, rotary already applied); out: [B * T_local, H * D] (contiguous),
  // overwritten with the attention output of this rank's tokens. `training` keeps what
  // backward() needs. Collective over `group` (every rank calls it with the same shapes).
  void forward(backend::Backend& backend, comm::Comm& group, Tensor& out, const Tensor& qkv,
               int64_t batch, int64_t heads, int64_t kv_heads, int64_t head_dim, double scale,
               int64_t window, bool training);
  // dout: [B * T_local, H * D]; dqkv: [B * T_local, (H + 2 KVH) * D], overwritten. Uses the
  // state of the last training forward() and releases it.
  void backward(backend::Backend& backend, comm::Comm& group, Tensor& dqkv, const Tensor& dout);
  void release();

 private:
  struct Shape {
    int64_t batch = 0, local_len = 0, ranks = 0, heads = 0, kv_heads = 0, head_dim = 0;
    UlyssesHeads split;
    int64_t width() const { return heads + 2 * kv_heads; }  // head rows per token, before
    int64_t local_width() const { return split.q_per_rank + 2 * split.kv_per_rank; }  // after
    bool operator==(const Shape&) const = default;
  };
  // Row-index tables (i64, on the device) for the gathers; rebuilt when the shape changes.
  struct Indices {
    Tensor qkv_pack;     // send [P, B, Tl, Wl] <- qkv rows (also the backward scatter map)
    Tensor qkv_unpack;   // [B, T, Wl] <- recv [P, B, Tl, Wl]
    Tensor qkv_repack;   // send [P, B, Tl, Wl] <- [B, T, Wl] (backward: sequence back)
    Tensor out_pack;     // send [P, B, Tl, Hl] <- out [B, T, Hl]
    Tensor out_unpack;   // [B, Tl, H] <- recv [P, B, Tl, Hl]
    Tensor dout_pack;    // send [P, B, Tl, Hl] <- dout [B, Tl, H]
    Tensor dout_unpack;  // [B, T, Hl] <- recv [P, B, Tl, Hl]
  };
  void build_indices(backend::Backend& backend);

  Shape shape_;
  Indices indices_;
  bool have_indices_ = false;
  double scale_ = 1.0;
  int64_t window_ = 0;
  // Saved by a training forward: this rank's heads over the whole sequence.
  Tensor qkv_full_, out_full_, lse_;
};

}  // namespace zero::model
