// RouterBalance: the routers' load-balancing loss of one forward, Hugging Face's
// load_balancing_loss_func for Mixtral and Qwen3-MoE (added to the loss when config.json says
// output_router_logits: true):
//   aux = E * sum_e F_e * P_e over R = rows x MoE blocks routed rows, where
//   F_e = (token-expert pairs routed to e in every block) / R and
//   P_e = (sum over every block's rows of softmax(router logits)[e]) / R,
// and the loss gains coefficient * aux. F is piecewise constant (top-k counts), so the gradient
// flows through P alone: d(coefficient * aux) / d p[r, e] = coefficient * E * F_e / R for every
// routed row r of every block - one [E] vector for the whole forward, known once it is done.
//
// The Model makes one per forward (model.cpp) and hands it to the blocks through StepContext;
// each MoE block's first forward adds its counts (already on the host: the dispatch reads them)
// and its router's probability sums (summed on the device); finish() closes it (a recompute in
// backward adds nothing) with one device read, and its gradient vector is uploaded for the
// blocks' backwards. Thread/stream rules: the backend's; one thread drives it.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace zero::model {

class RouterBalance {
 public:
  RouterBalance(backend::Backend& backend, int64_t experts, double coefficient);

  // One MoE block's (or row shard's) routing: pairs per expert and its router logits [rows, E].
  // Ignored once closed.
  void add(const std::vector<int32_t>& counts, const Tensor& logits);
  bool closed() const { return closed_; }
  // Closes the forward: returns coefficient * aux (0 when nothing was routed) and prepares
  // prob_grad(). One counted device read.
  double finish();
  // coefficient * E * F_e / R, f64 [E] on the device (after finish()).
  const Tensor& prob_grad() const;
  // The aux term's value (coefficient * aux) finish() returned.
  double value() const { return value_; }

 private:
  backend::Backend& backend_;
  int64_t experts_;
  double coefficient_;
  std::vector<int64_t> counts_;
  int64_t rows_ = 0;  // routed rows over every block: R
  Tensor prob_sums_;  // f64 [E], device
  Tensor prob_grad_;  // f64 [E], device
  bool closed_ = false;
  double value_ = 0.0;
};

}  // namespace zero::model
