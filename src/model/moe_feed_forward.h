// MoeFeedForward: Mixtral's and Qwen3-MoE's sparse MLP, y = sum over a token's k chosen experts of
// w_j *
// expert_{e_j}(h), each expert a SwiGLU MLP (w2(silu(w1 h) * w3 h)) and (e_j, w_j) the router's
// top-k of softmax(h @ router^T) (Backend::moe_route). Dropless: every token reaches all k of its
// experts, as in Hugging Face's MixtralSparseMoeBlock (and Qwen3MoeSparseMoeBlock, which
// renormalises w only when norm_topk_prob), so results do not depend on the batch.
//
// The N*k (token, choice) pairs run grouped by expert (Backend::moe_dispatch): each expert's
// tokens are gathered into one contiguous block of rows and go through its two matrix products
// at once. The group sizes decide those products' shapes, so the forward reads the E counts to
// the host: one counted device read per MoE block per forward (a device-side grouped GEMM would
// remove it). Recomputing a forward gives the same routing and bits (activation checkpointing).
//
// Parameters are not owned: the block passes views of its own (bound now) every call. Experts
// stack along the rows: up [E * 2I, C] (expert e's w1 | w3 rows), down [E * C, I] (its w2).
// Saved between forward and backward: the router logits and choices, the dispatch order and,
// per pair, the experts' [2I] and [I] intermediates and [C] outputs (k times a dense MLP's
// intermediates); the gathered inputs are gathered again in backward rather than kept.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/router_balance.h"

namespace zero::model {

class MoeFeedForward {
 public:
  MoeFeedForward(int64_t num_experts, int64_t experts_per_token, int64_t intermediate_size,
                 bool normalize_weights);

  // y [N, C] (contiguous, h's dtype; overwritten) for h [N, C] contiguous. y == nullptr: only
  // what backward needs (a recompute), no combine. save: keep what backward needs. balance
  // (optional, not owned): the forward's load-balancing loss, which gets this routing.
  void forward(backend::Backend& backend, const Tensor& h, const Tensor& router,
               const Tensor& up, const Tensor& down, Tensor* y, bool save,
               RouterBalance* balance = nullptr);
  // d h [N, C] for dy = d y [N, C] after a forward(save); the weight gradients accumulate (+=)
  // into d_router, d_up and d_down (shaped as router, up, down). balance (optional): adds
  // loss_grad times the load-balancing loss's gradient to the router's.
  Tensor backward(backend::Backend& backend, const Tensor& dy, const Tensor& router,
                  const Tensor& up, const Tensor& down, Tensor& d_router, Tensor& d_up,
                  Tensor& d_down, const RouterBalance* balance = nullptr,
                  double loss_grad = 1.0);
  void release();
  // Pairs routed to each expert by the last forward (host copy of the counts it read).
  const std::vector<int32_t>& last_counts() const { return counts_; }

 private:
  // Rows [first, first + count) of each expert that received pairs: fn(expert, first, count).
  template <typename Fn>
  void for_each_expert(Fn&& fn) const;

  int64_t experts_, choices_, inner_;
  bool normalize_;
  std::vector<int32_t> counts_;
  Tensor h_, logits_, expert_ids_, weights_, source_rows_, slot_of_;
  Tensor up_, act_, expert_out_;  // [N*k, 2I], [N*k, I], [N*k, C] in dispatch order
};

}  // namespace zero::model
