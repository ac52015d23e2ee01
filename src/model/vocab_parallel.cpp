#include "model/vocab_parallel.h"

#include "comm/comm.h"

namespace zero::model {

Range vocab_part(int64_t vocab_size, const TensorParallelLayout& layout) {
  return balanced_part(vocab_size, layout.size, layout.rank);
}

void vocab_parallel_cross_entropy(backend::Backend& be, comm::Comm* group, Tensor& losses,
                                  Tensor* dlogits, const Tensor& logits, const Tensor& targets,
                                  int64_t first_column, int64_t ignore_index, double grad_scale) {
  if (group == nullptr || group->world_size() == 1) {
    be.softmax_cross_entropy(losses, dlogits, logits, targets, ignore_index, grad_scale);
    return;
  }
  const int64_t rows = losses.numel();
  const auto category = MemoryCategory::kActivations;
  Tensor row_max = be.empty({rows}, DType::kF64, category);
  be.cross_entropy_slice_max(row_max, logits);
  group->all_reduce(row_max, comm::ReduceOp::kMax);
  // sum_exp and the target's logit in one buffer: one all-reduce.
  Tensor sums = be.empty({2 * rows}, DType::kF64, category);
  Tensor sum_exp = sums.view(0, {rows});
  Tensor target_logit = sums.view(rows, {rows});
  be.cross_entropy_slice_sums(sum_exp, target_logit, logits, row_max, targets, first_column);
  group->all_reduce(sums, comm::ReduceOp::kSum);
  be.cross_entropy_slice_finish(losses, dlogits, logits, row_max, sum_exp, target_logit, targets,
                                first_column, ignore_index, grad_scale);
}

}  // namespace zero::model
