// CPU kernels over a slice of the vocabulary (tensor parallelism's vocabulary-parallel embedding
// and LM head + loss). Semantics are those of the Backend ops of the same names
// (backend/backend.h); CpuBackend forwards to these (16-bit tensors through f32 twins).
// Every tensor is host-resident and contiguous; logits f32/f64; stats f64 [N].
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend::cpu {

void embedding_forward_slice(Tensor& out, const Tensor& ids, const Tensor& table,
                             int64_t first_id, bool accumulate);
void embedding_backward_slice(Tensor& dtable, const Tensor& dout, const Tensor& ids,
                              int64_t first_id);

void cross_entropy_slice_max(Tensor& row_max, const Tensor& logits);
void cross_entropy_slice_sums(Tensor& sum_exp, Tensor& target_logit, const Tensor& logits,
                              const Tensor& row_max, const Tensor& targets, int64_t first_column);
void cross_entropy_slice_finish(Tensor& losses, Tensor* dlogits, const Tensor& logits,
                                const Tensor& row_max, const Tensor& sum_exp,
                                const Tensor& target_logit, const Tensor& targets,
                                int64_t first_column, int64_t ignore_index, double grad_scale);

}  // namespace zero::backend::cpu
