// Vocabulary parallelism (tensor parallelism's embedding and LM head): each rank of the tensor
// group holds a balanced part of the vocabulary (rows [first, first + count) of the embedding /
// head weight; balanced_part: any vocabulary size, no padding, parts differ by at most one row,
// e.g. GPT-2's 50257 at tp = 2 is 25128 + 25129). The loss is computed without ever gathering
// a full logits row: local max -> all-reduce max -> local sum of exp(x - max) and the target's
// logit (its owner's, zero elsewhere) -> one all-reduce sum of both -> loss = log(sum) + max -
// x_target, dlogits = softmax - onehot on the local columns (Backend::cross_entropy_slice_*).
// Why no padding: Megatron pads the vocabulary to a multiple of tp; balanced parts keep the
// Hugging Face shapes exact and cost nothing (the ops take any slice width).
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "model/tensor_parallel.h"

namespace zero::comm {
class Comm;
}  // namespace zero::comm

namespace zero::model {

// This rank's vocabulary rows (the whole vocabulary without tensor parallelism).
Range vocab_part(int64_t vocab_size, const TensorParallelLayout& layout);

// softmax_cross_entropy over a row split across `group` (null or one rank: the plain op):
// logits [N, count] are columns [first_column, first_column + count) of the full row. losses
// (stats dtype of logits, identical on every rank) and dlogits (this rank's columns; may alias
// logits) as Backend::softmax_cross_entropy. Two all-reduces of f64 [N] and [2, N].
void vocab_parallel_cross_entropy(backend::Backend& backend, comm::Comm* group, Tensor& losses,
                                  Tensor* dlogits, const Tensor& logits, const Tensor& targets,
                                  int64_t first_column, int64_t ignore_index, double grad_scale);

}  // namespace zero::model
