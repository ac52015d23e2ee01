// CPU mixture-of-experts ops (Backend::moe_route, moe_dispatch, moe_combine,
// moe_combine_backward, moe_route_backward) on f32 and f64 tensors: the oracle the device
// kernels are tested against. Every sum runs in a fixed order (a row's columns or choices in
// index order), so results do not depend on threads.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend::cpu {

void moe_route(Tensor& expert_ids, Tensor& weights, const Tensor& logits, bool normalize);
void moe_dispatch(Tensor& counts, Tensor& source_rows, Tensor& slot_of, const Tensor& expert_ids,
                  int64_t num_experts);
void moe_combine(Tensor& out, const Tensor& rows, const Tensor& slot_of, const Tensor* weights);
void moe_combine_backward(Tensor& d_rows, Tensor& d_weights, const Tensor& dout,
                          const Tensor& rows, const Tensor& slot_of, const Tensor& weights);
void moe_router_prob_sums(Tensor& sums, const Tensor& logits, bool accumulate);
void moe_router_balance_backward(Tensor& dlogits, const Tensor& logits, const Tensor& prob_grad,
                                 double scale);
void moe_route_backward(Tensor& dlogits, const Tensor& d_weights, const Tensor& expert_ids,
                        const Tensor& weights, const Tensor& logits, bool normalize);

}  // namespace zero::backend::cpu
