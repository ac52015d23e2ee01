#include "model/tensor_parallel.h"

#include <algorithm>
#include <vector>

#include "comm/comm.h"
#include "core/check.h"
#include "core/error.h"

namespace zero::model {

TensorParallelHeads tensor_parallel_heads(int64_t heads, int64_t kv_heads,
                                          const TensorParallelLayout& layout) {
  const int64_t tp = layout.size;
  ZERO_CHECK(tp >= 1 && layout.rank >= 0 && layout.rank < tp,
             "tensor-parallel rank " << layout.rank << " of " << tp);
  if (heads % tp != 0) {
    throw ConfigError("num_attention_heads " + std::to_string(heads) +
                      " is not divisible by the tensor-parallel size " + std::to_string(tp) +
                      " (tensor_parallel.autotp_size): pick a size that divides the heads");
  }
  if (kv_heads % tp != 0 && tp % kv_heads != 0) {
    throw ConfigError("num_key_value_heads " + std::to_string(kv_heads) +
                      " and the tensor-parallel size " + std::to_string(tp) +
                      " (tensor_parallel.autotp_size) must divide one another so that key/value "
                      "heads split or replicate evenly");
  }
  TensorParallelHeads out;
  out.heads = heads / tp;
  out.kv_parts = std::min(kv_heads, tp);
  out.kv_heads = kv_heads / out.kv_parts;
  out.kv_replicas = tp / out.kv_parts;
  out.kv_index = layout.rank / out.kv_replicas;
  return out;
}

TransformerConfig tensor_parallel_block_config(const TransformerConfig& config,
                                               const TensorParallelLayout& layout) {
  TransformerConfig local = config;
  if (!layout.enabled()) return local;
  if (config.is_moe()) {
    throw UnsupportedError("tensor parallelism over mixture-of-experts blocks (" +
                           std::to_string(config.num_experts) +
                           " experts) is not supported yet; set tensor_parallel.autotp_size to "
                           "1 (ZeRO stage 3 partitions the experts across the data-parallel "
                           "ranks instead)");
  }
  const TensorParallelHeads split =
      tensor_parallel_heads(config.num_heads, config.num_kv_heads, layout);
  if (config.intermediate_size % layout.size != 0) {
    throw ConfigError("intermediate_size " + std::to_string(config.intermediate_size) +
                      " is not divisible by the tensor-parallel size " +
                      std::to_string(layout.size) + " (tensor_parallel.autotp_size)");
  }
  local.num_heads = split.heads;
  local.num_kv_heads = split.kv_heads;
  local.intermediate_size = config.intermediate_size / layout.size;
  return local;
}

TensorSlice make_tensor_slice(const Shape& local, int dim, int64_t parts, int64_t index,
                              int64_t blocks, int64_t replicas) {
  ZERO_CHECK(dim >= 0 && dim < static_cast<int>(local.size()),
             "slice dimension " << dim << " of a " << local.size() << "-d tensor");
  TensorSlice slice;
  slice.dim = dim;
  slice.parts = parts;
  slice.index = index;
  slice.blocks = blocks;
  slice.replicas = replicas;
  slice.full_shape = local;
  slice.full_shape[static_cast<size_t>(dim)] *= parts;
  return slice;
}

TensorSlice make_balanced_slice(const Shape& local, int dim, int64_t full_length, int64_t parts,
                                int64_t index) {
  TensorSlice slice = make_tensor_slice(local, dim, parts, index);
  slice.full_shape[static_cast<size_t>(dim)] = full_length;
  ZERO_CHECK(balanced_part(full_length, parts, index).size() == local[static_cast<size_t>(dim)],
             "part " << index << " of " << parts << " of " << full_length << " elements");
  return slice;
}

Range balanced_part(int64_t length, int64_t parts, int64_t index) {
  return Range{index * length / parts, (index + 1) * length / parts};
}

void extract_tensor_slice(const TensorSlice& s, const double* full, double* part) {
  const Shape& shape = s.full_shape;
  ZERO_CHECK(!shape.empty() && shape.size() <= 2, "slices of 1-d and 2-d tensors only, got "
                                                      << shape.size() << " dims");
  const int64_t rows = shape[0];
  const int64_t cols = shape.size() == 2 ? shape[1] : 1;
  const int64_t split_len = shape[static_cast<size_t>(s.dim)];
  const int64_t block = split_len / s.blocks;
  const Range piece = balanced_part(block, s.parts, s.index);
  // The logical indices along the split dimension this part holds, in order.
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < s.blocks; ++b) {
    for (int64_t i = piece.begin; i < piece.end; ++i) kept.push_back(b * block + i);
  }
  const int64_t n = static_cast<int64_t>(kept.size());
  if (s.dim == 0) {
    for (int64_t r = 0; r < n; ++r) {
      std::copy_n(full + kept[static_cast<size_t>(r)] * cols, cols, part + r * cols);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < n; ++c) part[r * n + c] = full[r * cols + kept[static_cast<size_t>(c)]];
    }
  }
}

comm::Comm* checked_tensor_group(comm::Comm* group, const TensorParallelLayout& layout,
                                 const std::string& unit) {
  const int64_t ranks = group != nullptr ? group->world_size() : 1;
  if (ranks != layout.size || (group != nullptr && group->rank() != layout.rank)) {
    throw Error(unit + " was built as tensor-parallel rank " + std::to_string(layout.rank) +
                " of " + std::to_string(layout.size) + " but runs in a tensor group of " +
                std::to_string(ranks) + " ranks: build the model with the group's layout");
  }
  return layout.enabled() ? group : nullptr;
}

void tensor_parallel_all_reduce(comm::Comm* group, Tensor& tensor) {
  if (group == nullptr || group->world_size() == 1) return;
  group->all_reduce(tensor, comm::ReduceOp::kSum);
}

bool adds_row_parallel_bias(const comm::Comm* group) {
  return group == nullptr || group->rank() == 0;
}

}  // namespace zero::model
