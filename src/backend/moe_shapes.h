// Argument checks of the mixture-of-experts ops (Backend::moe_route, moe_dispatch, moe_combine,
// moe_combine_backward, moe_route_backward), shared by every backend so that a bad call reads
// the same on the CPU and on a GPU. Device placement is each backend's own check.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend {

// Sizes of one routing: tokens N, experts E, choices per token k, columns C (the combine ops).
struct MoeDims {
  int64_t tokens = 0, experts = 0, choices = 0, columns = 0;
  int64_t slots() const { return tokens * choices; }
};

// Each throws ShapeError naming `op` and the bad argument.
MoeDims check_moe_route(const char* op, const Tensor& expert_ids, const Tensor& weights,
                        const Tensor& logits);
MoeDims check_moe_dispatch(const char* op, const Tensor& counts, const Tensor& source_rows,
                           const Tensor& slot_of, const Tensor& expert_ids, int64_t num_experts);
// weights may be nullptr (unit weights).
MoeDims check_moe_combine(const char* op, const Tensor& out, const Tensor& rows,
                          const Tensor& slot_of, const Tensor* weights);
MoeDims check_moe_combine_backward(const char* op, const Tensor& d_rows, const Tensor& d_weights,
                                   const Tensor& dout, const Tensor& rows, const Tensor& slot_of,
                                   const Tensor& weights);
// Sizes N and E of the load-balancing ops: sums / prob_grad f64 [E], dlogits logits' shape.
MoeDims check_moe_router_prob_sums(const char* op, const Tensor& sums, const Tensor& logits);
MoeDims check_moe_router_balance_backward(const char* op, const Tensor& dlogits,
                                          const Tensor& logits, const Tensor& prob_grad);
MoeDims check_moe_route_backward(const char* op, const Tensor& dlogits, const Tensor& d_weights,
                                 const Tensor& expert_ids, const Tensor& weights,
                                 const Tensor& logits);

}  // namespace zero::backend
