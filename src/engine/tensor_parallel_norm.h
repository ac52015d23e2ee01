// The global gradient norm under tensor parallelism. After ZeRO's reduction over the data-
// parallel group every rank of a tensor group holds a squared norm over ITS parameters: its
// slices (distinct per rank), key/value-head slices shared by `replicas` ranks, and whole
// parameters (norms, biases of row-parallel layers, position embeddings) held identically by all
// tp ranks. The model's norm counts every logical element once:
//   norm^2 = sum over the tensor group of (local norm^2 - sum_p (1 - w_p) |g_p|^2)
// with w_p = 1 for a slice, 1 / replicas for a replicated slice, 1 / tp for a whole parameter
// (tensor_parallel_norm_weight). Megatron computes it the same way (its
// param_is_not_tensor_parallel_duplicate filter).
#pragma once
#include <cstdint>

#include "comm/comm.h"
#include "model/model.h"
#include "sharding/zero_stage.h"

namespace zero::engine {

// The share w of `spec`'s squared norm one of `tp` tensor-parallel ranks contributes.
double tensor_parallel_norm_weight(const model::ParamSpec& spec, int64_t tp);

// Turns `squared_norm` (f64 [1] on the model's device: ZeroStage::reduce_gradients' result over
// `data_group`) into the model's squared norm over the tensor group, the same on every rank.
// Collective over `data_group` (stages 1-3: partitions) and `tensor_group`. Reads each
// duplicated parameter's reduced gradient once on the host (Backend::squared_norm).
void reduce_tensor_parallel_squared_norm(sharding::ZeroStage& zero, model::Model& model,
                                         comm::Comm& data_group, comm::Comm& tensor_group,
                                         Tensor& squared_norm);

}  // namespace zero::engine
