// Tensor parallelism (Megatron / DeepSpeed AutoTP style) for the transformer blocks: which part
// of the attention heads and of the MLP's inner width one rank of the tensor-parallel group
// holds, the slice metadata of its parameters, and the all-reduce that joins the partial sums of
// a row-parallel layer (Megatron's "g" operator forward, "f" backward).
//
// Layout: q/k/v and the MLP's up projection (c_fc, or gate + up) are column-parallel (each rank
// holds whole heads / a contiguous part of the inner width); the attention output and the MLP's
// down projection are row-parallel (each rank holds the matching input columns) and their
// outputs are all-reduced once. Norms, biases of row-parallel layers, the embeddings and the LM
// head are replicated whole on every rank (their gradients are then identical on every rank).
// A row-parallel bias is added by tensor-parallel rank 0 only, before the all-reduce.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/parameter.h"
#include "model/transformer_config.h"

namespace zero::comm {
class Comm;
}  // namespace zero::comm

namespace zero::model {

// This rank's place in the tensor-parallel group (size 1: no tensor parallelism).
struct TensorParallelLayout {
  int64_t rank = 0;
  int64_t size = 1;
  bool enabled() const { return size > 1; }
};

// The heads one tensor-parallel rank runs: `heads` query heads [rank * heads, ...) and
// `kv_heads` key/value heads, part `kv_index` of `kv_parts`. With fewer key/value heads than
// ranks each of them is held by `kv_replicas` consecutive ranks (one head each).
struct TensorParallelHeads {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t kv_parts = 1;
  int64_t kv_index = 0;
  int64_t kv_replicas = 1;
};

// Throws ConfigError naming num_attention_heads / num_key_value_heads / the tensor-parallel size
// when the heads cannot be split (heads % tp, kv_heads % tp and tp % kv_heads all nonzero).
TensorParallelHeads tensor_parallel_heads(int64_t heads, int64_t kv_heads,
                                          const TensorParallelLayout& layout);

// The config one rank's block computes with: num_heads, num_key_value_heads and
// intermediate_size reduced to this rank's part (head_dim and hidden_size unchanged). Throws
// ConfigError when intermediate_size is not divisible by the tensor-parallel size.
TransformerConfig tensor_parallel_block_config(const TransformerConfig& config,
                                               const TensorParallelLayout& layout);

// The slice metadata of a part of shape `local` (see TensorSlice).
TensorSlice make_tensor_slice(const Shape& local, int dim, int64_t parts, int64_t index,
                              int64_t blocks = 1, int64_t replicas = 1);
// The slice metadata of part `index` of `parts` balanced parts of a dimension of length
// `full_length` (one block); `local` is the part's shape.
TensorSlice make_balanced_slice(const Shape& local, int dim, int64_t full_length, int64_t parts,
                                int64_t index);
// Part `index` of `parts` balanced parts of [0, length): {begin, end}.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
Range balanced_part(int64_t length, int64_t parts, int64_t index);

// Copies this slice's elements out of the logical tensor `full` (host, f64, slice.full_shape)
// into `part` (host, f64, the local shape). Initialisation draws the logical tensor and keeps
// the part; tests compare a part with the full model's tensor.
void extract_tensor_slice(const TensorSlice& slice, const double* full, double* part);

// The group a unit built for `layout` computes over: `group` (null without tensor parallelism)
// after checking that it has the layout's size and this rank's place in it (Error naming `unit`
// otherwise: the model was built for another group).
comm::Comm* checked_tensor_group(comm::Comm* group, const TensorParallelLayout& layout,
                                 const std::string& unit);

// Sum of `tensor` over `group` in place; nothing when the group is null or has one rank.
void tensor_parallel_all_reduce(comm::Comm* group, Tensor& tensor);

// Whether this rank adds the biases of row-parallel layers (rank 0 of the group, or no group).
bool adds_row_parallel_bias(const comm::Comm* group);

}  // namespace zero::model
